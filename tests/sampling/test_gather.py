"""Native row gather: equals direct indexing for every dtype and id pattern; clear errors."""

import pytest
import torch

from gnnscale.sampling.gather import empty_huge, gather_rows


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.bfloat16,
                                   torch.uint8])
def test_gather_equals_indexing(dtype):
    table = (torch.randn(3000, 37, generator=torch.Generator().manual_seed(0)) * 50).to(dtype)
    ids = torch.randint(0, 3000, (5000,), generator=torch.Generator().manual_seed(1))
    out = gather_rows(table, ids)
    assert out.dtype == dtype and torch.equal(out, table[ids])


def test_duplicates_unsorted_empty_int32_and_shapes():
    table = torch.randn(100, 8)
    ids = torch.tensor([5, 5, 99, 0, 5, 42, 1])
    assert torch.equal(gather_rows(table, ids), table[ids])
    assert torch.equal(gather_rows(table, ids.int()), table[ids])
    empty = gather_rows(table, torch.tensor([], dtype=torch.long))
    assert empty.shape == (0, 8)
    vec = torch.arange(10.0)
    assert torch.equal(gather_rows(vec, ids % 10), vec[ids % 10])
    cube = torch.randn(20, 3, 4)
    assert torch.equal(gather_rows(cube, ids % 20), cube[ids % 20])
    strided = torch.randn(8, 100).t()  # not contiguous
    assert torch.equal(gather_rows(strided, ids), strided[ids])
    assert torch.equal(gather_rows(table, [3, 1]), table[[3, 1]])


def test_gather_into_preallocated_out():
    table = torch.randn(5000, 16)
    ids = torch.randint(0, 5000, (3000,), generator=torch.Generator().manual_seed(2))
    out = torch.empty(3000, 16)
    assert gather_rows(table, ids, out=out) is out and torch.equal(out, table[ids])
    with pytest.raises(RuntimeError, match="out must be a contiguous CPU tensor"):
        gather_rows(table, ids, out=torch.empty(3000, 15))
    with pytest.raises(RuntimeError, match="out must be a contiguous CPU tensor"):
        gather_rows(table, ids, out=torch.empty(3000, 16, dtype=torch.float64))


def test_huge_page_table_gathers_the_same():
    table = torch.randn(40_000, 100)  # 16 MB: large enough for the huge-page hint
    huge = empty_huge(40_000, 100)
    huge.copy_(table)
    ids = torch.randint(0, 40_000, (10_000,), generator=torch.Generator().manual_seed(3))
    assert huge.shape == (40_000, 100) and huge.dtype == torch.float32
    assert torch.equal(gather_rows(huge, ids), table[ids])
    assert gather_rows(empty_huge(5, dtype=torch.int64).fill_(7), [4]).tolist() == [7]


def test_out_of_range_and_bad_ids_are_clear_errors():
    table = torch.randn(10, 4)
    with pytest.raises(RuntimeError, match=r"ids\[2\] = 10 is out of range .* 10 rows"):
        gather_rows(table, torch.tensor([0, 1, 10]))
    with pytest.raises(RuntimeError, match=r"ids\[0\] = -1 is out of range"):
        gather_rows(table, torch.tensor([-1]))
    with pytest.raises(TypeError, match="int64 or int32"):
        gather_rows(table, torch.tensor([0.0]))
