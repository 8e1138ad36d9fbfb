"""The planned device bound: for every layer, the largest size each device buffer takes over
the batches, summed, plus the largest bytes autograd saves for one chunk.

The strategy holds exactly the buffers named here (:class:`~.tiers.DeviceTier`
tracks them by the same names), so the measured peak can never exceed the bound as long as the
activation model bounds what autograd saves.

A typed graph's layer-0 rows are encoded on the device chunk by chunk (:func:`encode_bound`:
the chunk's raw inputs, the encoded rows and their gradient, and the encoder's intermediate
rows, modelled as two more of the encoded rows); the bound is the largest of the layers' and
the encoding's.
"""

from __future__ import annotations

from gnnscale.strategies.offload.memory import ActivationModel
from gnnscale.strategies.offload.transfers import BatchTransfer

FLOAT, INDEX = 4, 8


def batch_buffers(t: BatchTransfer, prev: BatchTransfer | None, d_in: int, d_out: int,
                  cache: bool, products: bool = False, agg_width: int | None = None,
                  edge_bytes: int = 0) -> dict[str, int]:
    """Bytes of each device buffer while batch ``t`` of a layer (``d_in`` -> ``d_out``) runs;
    ``products``: the chunk's CSR matrix and its transpose too (a splittable model);
    ``agg_width``: the cached aggregate's width (default ``d_in``; a model keeping several
    sums per vertex: a multiple of it); ``edge_bytes``: what the block carries per edge
    besides its index (edge types, edge features)."""
    n_buf, n_recv = t.buffer.numel(), sum(t.recv_counts)
    n_src, n_dst, n_send = t.src_ids.numel(), t.dst.numel(), t.send_idx.numel()
    n_prev = prev.buffer.numel() if prev is not None and t.reuse_dst.numel() else 0
    rows = {
        "buffer": n_buf, "prev_buffer": n_prev, "recv": n_recv, "src": n_src,
        "x_dst": n_dst if cache else 0,
        "grad_src": n_src, "grad_rows": n_buf + n_recv, "grad_back": n_send,
        "carry": t.keep.numel(), "prev_carry": t.reuse_dst.numel(),
    }
    out = {k: v * d_in * FLOAT for k, v in rows.items()}
    agg_width = d_in if agg_width is None else agg_width
    out["agg"] = (n_dst if cache else 0) * agg_width * FLOAT
    out["out"] = out["grad_out"] = n_dst * d_out * FLOAT
    e = t.edge_index.shape[1]
    out["block"] = (2 * e + n_src) * INDEX + e * edge_bytes
    if products:  # row pointers, column indices and values of each
        slots = max(agg_width // max(d_in, 1), 1)
        out["matrix"] = (n_dst * slots + 1 + e) * INDEX + e * FLOAT
        out["matrix_t"] = (n_src + 1 + e) * INDEX + e * FLOAT
    return out


def layer_bound(transfers: list[BatchTransfer], d_in: int, d_out: int, cache: bool,
                act: ActivationModel, products: bool = False, agg_width: int | None = None,
                edge_bytes: int = 0) -> tuple[int, int]:
    """(bound, batch index reaching the largest buffers + activations) of one layer
    (``products``, ``agg_width``, ``edge_bytes``: as :func:`batch_buffers`)."""
    biggest: dict[str, int] = {}
    act_max, worst, worst_size = 0, 0, -1
    prev = None
    for i, t in enumerate(transfers):
        sizes = batch_buffers(t, prev, d_in, d_out, cache, products, agg_width, edge_bytes)
        for k, v in sizes.items():
            biggest[k] = max(biggest.get(k, 0), v)
        a = act(t.edge_index.shape[1], t.src_ids.numel(), t.dst.numel())
        act_max = max(act_max, a)
        size = sum(sizes.values()) + a
        if size > worst_size:
            worst, worst_size = i, size
        prev = t
    return sum(biggest.values()) + act_max, worst


def encode_bound(transfers: list[BatchTransfer], raw_row_bytes: int, width: int
                 ) -> tuple[int, int]:
    """(device bytes, batch index) of encoding the largest chunk's destinations: their raw
    inputs (``raw_row_bytes`` a row: features, ids and types), the ``width``-wide encoded rows,
    their gradient and two rows as wide of the encoder's intermediates."""
    rows = [t.dst.numel() for t in transfers]
    i = max(range(len(rows)), key=rows.__getitem__, default=0)
    return (rows[i] if rows else 0) * (raw_row_bytes + 4 * width * FLOAT), i
