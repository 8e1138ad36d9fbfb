"""The planned device bound: for every layer, the largest size each device buffer takes over
the batches, summed, plus the largest bytes autograd saves for one chunk.

The strategy holds exactly the buffers named here (:class:`~.tiers.DeviceTier`
tracks them by the same names), so the measured peak can never exceed the bound as long as the
activation model bounds what autograd saves.
"""

from __future__ import annotations

from gnnscale.strategies.offload.memory import ActivationModel
from gnnscale.strategies.offload.transfers import BatchTransfer

FLOAT, INDEX = 4, 8


def batch_buffers(t: BatchTransfer, prev: BatchTransfer | None, d_in: int, d_out: int,
                  cache: bool, products: bool = False, agg_dim: int | None = None
                  ) -> dict[str, int]:
    """Bytes of each device buffer while batch ``t`` of a layer (``d_in`` -> ``d_out``) runs;
    ``products``: the chunk's CSR matrix and its transpose too (a splittable model);
    ``agg_dim``: the aggregate's width (:meth:`GNN.aggregate_width`, default ``d_in``)."""
    n_buf, n_recv = t.buffer.numel(), sum(t.recv_counts)
    n_src, n_dst, n_send = t.src_ids.numel(), t.dst.numel(), t.send_idx.numel()
    n_prev = prev.buffer.numel() if prev is not None and t.reuse_dst.numel() else 0
    rows = {
        "buffer": n_buf, "prev_buffer": n_prev, "recv": n_recv, "src": n_src,
        "agg": n_dst if cache else 0, "x_dst": n_dst if cache else 0,
        "grad_src": n_src, "grad_rows": n_buf + n_recv, "grad_back": n_send,
        "carry": t.keep.numel(), "prev_carry": t.reuse_dst.numel(),
    }
    out = {k: v * d_in * FLOAT for k, v in rows.items()}
    out["agg"] = rows["agg"] * (d_in if agg_dim is None else agg_dim) * FLOAT
    slots = 1 if agg_dim is None else max(agg_dim // max(d_in, 1), 1)
    out["out"] = out["grad_out"] = n_dst * d_out * FLOAT
    out["block"] = (2 * t.edge_index.shape[1] + n_src) * INDEX
    if products:  # row pointers, column indices and values of each
        e = t.edge_index.shape[1]
        out["matrix"] = (n_dst * slots + 1 + e) * INDEX + e * FLOAT
        out["matrix_t"] = (n_src + 1 + e) * INDEX + e * FLOAT
    return out


def layer_bound(transfers: list[BatchTransfer], d_in: int, d_out: int, cache: bool,
                act: ActivationModel, products: bool = False, agg_dim: int | None = None
                ) -> tuple[int, int]:
    """(bound, batch index reaching the largest buffers + activations) of one layer
    (``products``, ``agg_dim``: as :func:`batch_buffers`)."""
    biggest: dict[str, int] = {}
    act_max, worst, worst_size = 0, 0, -1
    prev = None
    for i, t in enumerate(transfers):
        sizes = batch_buffers(t, prev, d_in, d_out, cache, products, agg_dim)
        for k, v in sizes.items():
            biggest[k] = max(biggest.get(k, 0), v)
        a = act(t.edge_index.shape[1], t.src_ids.numel(), t.dst.numel())
        act_max = max(act_max, a)
        size = sum(sizes.values()) + a
        if size > worst_size:
            worst, worst_size = i, size
        prev = t
    return sum(biggest.values()) + act_max, worst
