"""gnnscale.ops.gather_rows / advise_huge_pages on their own."""

import pytest
import torch

from gnnscale.ops.gather import advise_huge_pages, gather_rows


def test_gather_rows_new_and_out():
    table = torch.arange(60, dtype=torch.float32).reshape(20, 3)
    ids = torch.tensor([19, 0, 5, 5])
    assert torch.equal(gather_rows(table, ids), table[ids])
    out = torch.full((4, 3), -1.0)
    assert gather_rows(table, ids.int(), out=out) is out and torch.equal(out, table[ids])
    big = torch.randn(50_000, 8)
    many = torch.randint(0, 50_000, (120_000,), generator=torch.Generator().manual_seed(0))
    assert torch.equal(gather_rows(big, many), big[many])
    for threads in (1, 3, 8):
        assert torch.equal(gather_rows(big, many, num_threads=threads), big[many])


def test_gather_rows_checks_its_inputs():
    table = torch.zeros(4, 2)
    with pytest.raises(RuntimeError, match=r"ids\[1\] = 4 is out of range"):
        gather_rows(table, torch.tensor([0, 4]))
    many = torch.zeros(10_000, dtype=torch.long)
    many[7000] = -2
    with pytest.raises(RuntimeError, match=r"ids\[7000\] = -2 is out of range"):
        gather_rows(table, many, num_threads=4)
    assert torch.equal(gather_rows(table, torch.zeros(2, 2, dtype=torch.long)), table[[0] * 4])
    with pytest.raises(RuntimeError, match="at least one dimension"):
        gather_rows(torch.tensor(1.0), torch.tensor([0]))
    with pytest.raises(RuntimeError, match="out must be a contiguous CPU tensor"):
        gather_rows(table, torch.tensor([0]), out=torch.zeros(2, 2))
    with pytest.raises(TypeError, match="int64 or int32"):
        gather_rows(table, torch.tensor([0.0]))


def test_advise_huge_pages_is_a_hint():
    assert advise_huge_pages(torch.zeros(10)) is False  # too small to hold a huge page
    big = torch.empty(8 << 20, dtype=torch.uint8)      # 8 MiB: may or may not be granted
    assert isinstance(advise_huge_pages(big), bool)
    big.fill_(3)
    assert int(big[-1]) == 3
