"""One chunk's computation per layer, forward and backward, with the intermediate data either
cached (HongTu section 4.2: the aggregate goes to the host in the forward pass and only the
update is recomputed) or recomputed (the layer runs again from its reloaded inputs).

Both paths give the gradient of the chunk's source rows from the gradient of its outputs;
caching needs a model split into aggregate and update whose aggregate is linear in its source
rows (GAT and residual models recompute). Which path a chunk takes is :mod:`.rule`'s.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from gnnscale.models.base import GNN
from gnnscale.sampling.base import Block
from gnnscale.strategies.offload.memory import SavedBytes

AtPeak = Callable[[list[torch.Tensor]], object]

def can_cache(model: GNN) -> bool:
    """Whether the model's backward can run from a cached aggregate (no source rows)."""
    return model.splittable and model.linear_aggregate


def _aggregate(model: GNN, k: int, src: torch.Tensor, block: Block
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """(layer ``k``'s input rows, the aggregate over the chunk's edges)."""
    x = model.inputs(src, block.src_ids) if k == 0 else src
    return x, model.aggregate(k, x, block)


def _update(model: GNN, k: int, x: torch.Tensor, agg: torch.Tensor, block: Block
            ) -> torch.Tensor:
    """The layer's vertex-wise rest on the destinations only (not every source row)."""
    dst_ids = block.src_ids[: block.num_dst]
    return model.post(k, model.update(k, agg, x[: block.num_dst], dst_ids), dst_ids)


def forward(model: GNN, k: int, src: torch.Tensor, block: Block, cache: bool,
            clock: Callable[[], float] | None = None
            ) -> tuple[torch.Tensor, torch.Tensor | None, float]:
    """Output rows of the chunk's destinations (no autograd), the aggregate when ``cache``,
    and, given a ``clock``, the seconds of the aggregation (inputs included): the part of the
    layer a cached chunk does not run again. Splittable models aggregate, then update; the
    others (GAT) run their conv (0 seconds reported: they always recompute)."""
    with torch.no_grad():
        if not model.splittable:
            return model.layer(k, src, block), None, 0.0
        t0 = clock() if clock is not None else 0.0
        x, agg = _aggregate(model, k, src, block)
        seconds = clock() - t0 if clock is not None else 0.0
        return _update(model, k, x, agg, block), (agg if cache else None), seconds


def backward_recompute(model: GNN, k: int, src: torch.Tensor, block: Block,
                       grad_out: torch.Tensor, need_src: bool, at_peak: AtPeak | None = None
                       ) -> tuple[torch.Tensor | None, int]:
    """Run the layer again on ``src`` and backpropagate ``grad_out``: parameter gradients
    accumulate; returns the sources' gradient (``need_src``) and the bytes autograd saved.
    ``at_peak`` sees the saved tensors and the output before the backward frees them."""
    src = src.detach().requires_grad_(need_src)
    with SavedBytes((src,)) as saved:
        if model.splittable:
            out = _update(model, k, *_aggregate(model, k, src, block), block)
        else:
            out = model.layer(k, src, block)
    if at_peak is not None:
        at_peak(saved.alive() + [out])
    torch.autograd.backward(out, grad_out)
    del out
    return (src.grad if need_src else None), saved.nbytes


def backward_cached(model: GNN, k: int, agg: torch.Tensor, x_dst: torch.Tensor, block: Block,
                    grad_out: torch.Tensor, need_src: bool, at_peak: AtPeak | None = None
                    ) -> tuple[torch.Tensor | None, int]:
    """Recompute only the update from the cached aggregate and the destinations' rows; the
    sources' gradient is the aggregate's transpose applied to the aggregate's gradient."""
    agg = agg.detach().requires_grad_(need_src)
    x_dst = x_dst.detach().requires_grad_(need_src)
    dst_ids = block.src_ids[: block.num_dst]
    with SavedBytes((agg, x_dst)) as saved:
        xin = model.inputs(x_dst, dst_ids) if k == 0 else x_dst
        out = model.post(k, model.update(k, agg, xin, dst_ids), dst_ids)
    if at_peak is not None:
        at_peak(saved.alive() + [out])
    torch.autograd.backward(out, grad_out)
    del out, xin
    if not need_src:
        return None, saved.nbytes
    grad = model.aggregate_grad(k, agg.grad, block)
    grad[: block.num_dst] += x_dst.grad
    return grad, saved.nbytes
