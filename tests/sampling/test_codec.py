"""The mini-batch codec (gnnscale.sampling.codec): round trips of every block field, sizes,
clear errors on a header or body that does not fit."""

import pytest
import torch

from gnnscale.sampling import codec
from gnnscale.sampling.base import Block, MiniBatch


def _batch() -> MiniBatch:
    """Three blocks covering every field: prefix and sent src_ids, none; a float32 weight no
    int64 keeps (and a NaN with a payload); edge ids and types on some blocks only."""
    n_id = torch.tensor([5, 2, 9, 7, 1])
    weight = torch.tensor([3.0, 0.1, float("nan")])
    weight[2:].view(torch.int32).bitwise_or_(0x5)  # a NaN payload survives only bit for bit
    blocks = [Block(torch.tensor([[2, 3, 4], [0, 1, 1]]), (5, 2), n_id, weight,
                    e_id=torch.tensor([40, 3, 2**40]), edge_type=torch.tensor([0, 2, 1])),
              Block(torch.tensor([[1], [0]]), (2, 1), torch.tensor([8, 6]),
                    e_id=torch.tensor([11])),
              Block(torch.tensor([[0], [0]]), (1, 1))]
    return MiniBatch(n_id, blocks, 1)


def _same(got: MiniBatch, want: MiniBatch) -> None:
    assert got.num_targets == want.num_targets and torch.equal(got.n_id, want.n_id)
    assert len(got.blocks) == len(want.blocks)
    for g, w in zip(got.blocks, want.blocks):
        assert g.size == w.size and torch.equal(g.edge_index, w.edge_index)
        for name in ("src_ids", "edge_weight", "e_id", "edge_type"):
            a, b = getattr(g, name), getattr(w, name)
            assert (a is None) == (b is None), name
            if b is not None:
                assert a.dtype == b.dtype, name
                assert torch.equal(a.view(torch.int32) if name == "edge_weight" else a,
                                   b.view(torch.int32) if name == "edge_weight" else b), name


def test_round_trip_of_every_field():
    mb = _batch()
    header, body = codec.encode(mb)
    assert header.dtype == body.dtype == torch.int64
    assert header.numel() == codec.header_size(3) and body.numel() == codec.body_size(header)
    flags = header[codec.HEAD + 3::codec.PER_BLOCK].tolist()
    assert flags == [codec.SRC_PREFIX | codec.WEIGHT | codec.EDGE_ID | codec.EDGE_TYPE,
                     codec.SRC_SENT | codec.EDGE_ID, 0]
    got = codec.decode(header, body)
    _same(got, mb)
    assert got.blocks[0].src_ids.data_ptr() == got.n_id.data_ptr()  # a view, not sent
    shared_header, shared = codec.encode(mb, shared=True)
    assert shared.is_shared() and torch.equal(shared, body)
    _same(codec.decode(shared_header.tolist(), shared), mb)
    empty = MiniBatch(torch.empty(0, dtype=torch.int64), [], 0)
    _same(codec.decode(*codec.encode(empty)), empty)


def test_blocks_alone_round_trip_narrowed():
    """The block encoding inside a bigger message (split plans narrow it to int32)."""
    blocks = [b for b in _batch().blocks]
    blocks[1].e_id = None
    blocks[0].e_id = torch.tensor([40, 3, 7])
    head, parts = codec.encode_blocks(blocks)  # no n_id: every src_ids is sent
    body = torch.cat([p.reshape(-1).long() for p in parts]).int()
    got = codec.decode_blocks(head, body)
    _same(MiniBatch(torch.empty(0), got, 0), MiniBatch(torch.empty(0), blocks, 0))


def test_bad_headers_and_bodies_give_clear_errors():
    header, body = codec.encode(_batch())
    with pytest.raises(ValueError, match=r"header has 2 \+ 4 \* layers entries, got 13"):
        codec.decode(header[:-1], body)
    with pytest.raises(ValueError, match="announces 27 body entries but the body has 26"):
        codec.decode(header, body[:-1])
    bad = header.clone()
    bad[codec.HEAD + 3] = 64
    with pytest.raises(ValueError, match="block 0's header entry"):
        codec.decode(bad, body)
    bad = header.clone()
    bad[1] = 9
    with pytest.raises(ValueError, match="num_targets = 9"):
        codec.decode(bad, body)
    mb = _batch()
    head, parts = codec.encode_blocks(mb.blocks, mb.n_id)
    with pytest.raises(ValueError, match="no n_id was given"):
        codec.decode_blocks(head, torch.cat([p.long() for p in parts]))
    mb = _batch()
    mb.blocks[0].edge_weight = mb.blocks[0].edge_weight.double()
    with pytest.raises(TypeError, match="edge_weight must be float32"):
        codec.encode(mb)
    mb = _batch()
    mb.blocks[1].e_id = torch.tensor([1, 2])
    with pytest.raises(ValueError, match="e_id has 2 entries for 1 edges"):
        codec.encode(mb)
