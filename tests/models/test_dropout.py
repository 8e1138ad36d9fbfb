"""The native keyed dropout against the torch reference, and the unkeyed dropout built on it."""

import pytest
import torch

from gnnscale.models.dropout import dropout, keyed_dropout, reference_keyed_dropout
from gnnscale.ops import dropout as ops

pytestmark = pytest.mark.skipif(not ops.available(), reason="native extension not built")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("id_dtype", [torch.int64, torch.int32])
@pytest.mark.parametrize("p", [0.1, 0.5, 0.77])
def test_native_mask_is_the_reference_bit_for_bit(dtype, id_dtype, p):
    g = torch.Generator().manual_seed(3)
    h = torch.randn(300, 37, generator=g, dtype=dtype)
    ids = torch.randint(-5, 10**12, (300,), generator=g).to(id_dtype)
    key = -8_123_456_789_012_345_678
    want = reference_keyed_dropout(h, p, key, ids)
    got = ops.keyed_dropout(h, p, key, ids)
    assert torch.equal(got, want)
    assert torch.equal(ops.keyed_dropout(h, p, key, ids, num_threads=1), got)
    # rows keyed by position when no ids are given; non-contiguous input
    assert torch.equal(ops.keyed_dropout(h, p, key), ops.keyed_dropout(h, p, key,
                                                                       torch.arange(300)))
    ht = h.t().contiguous().t()
    assert torch.equal(ops.keyed_dropout(ht, p, key, ids), got)


def test_backward_applies_the_same_mask():
    h = torch.randn(64, 16, requires_grad=True)
    ids = torch.arange(100, 164)
    g = torch.randn(64, 16)
    keyed_dropout(h, 0.4, 42, ids).backward(g)
    ref = h.detach().clone().requires_grad_()
    reference_keyed_dropout(ref, 0.4, 42, ids).backward(g)
    assert torch.equal(h.grad, ref.grad)


def test_unkeyed_dropout_follows_torch_seed_and_rate():
    h = torch.ones(2000, 64)
    torch.manual_seed(5)
    a = dropout(h, 0.3)
    b = dropout(h, 0.3)
    torch.manual_seed(5)
    assert torch.equal(dropout(h, 0.3), a)  # reproducible from the generator's state
    assert not torch.equal(a, b)  # a fresh mask per call
    kept = (a != 0).float().mean().item()
    assert kept == pytest.approx(0.7, abs=0.01)
    assert torch.allclose(a[a != 0], torch.full_like(a[a != 0], 1 / 0.7))
    assert dropout(h, 0.3, training=False) is h and dropout(h, 0.0) is h


def test_bad_arguments_say_what_is_wrong():
    with pytest.raises(RuntimeError, match="must be 2-D"):
        ops.keyed_dropout(torch.randn(2, 3, 4), 0.5, 1)
    with pytest.raises(RuntimeError, match="float32 or float64"):
        ops.keyed_dropout(torch.ones(2, 3, dtype=torch.int64), 0.5, 1)
    with pytest.raises(RuntimeError, match="3 row ids for 2 rows"):
        ops.keyed_dropout(torch.randn(2, 3), 0.5, 1, torch.arange(3))
    with pytest.raises(RuntimeError, match=r"p must be in \[0, 1\)"):
        ops.keyed_dropout(torch.randn(2, 3), 1.0, 1)
