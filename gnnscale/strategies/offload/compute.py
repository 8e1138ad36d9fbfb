"""One chunk's computation per layer, forward and backward, with the intermediate data either
cached (HongTu section 4.2: the aggregate goes to the host in the forward pass and only the
update is recomputed) or recomputed (the layer runs again from its reloaded inputs).

Both paths give the gradient of the chunk's source rows from the gradient of its outputs;
caching needs a model split into aggregate and update whose aggregate is linear in its source
rows (GAT and residual models recompute).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gnnscale.models.base import GNN
from gnnscale.sampling.base import Block
from gnnscale.strategies.offload.memory import SavedBytes


@dataclass
class LayerChoice:
    """What a layer keeps for its backward pass, and the bytes each way would move."""

    mode: str
    cache_bytes: int
    recompute_bytes: int


def choose(model: GNN, layer: int, setting: str, width: int, dst_rows: int, loaded_rows: int,
           edges: int) -> LayerChoice:
    """``auto``: cache when the aggregate's round trip (out, back, and the destinations' own
    rows) moves fewer bytes than reloading the neighbours and re-aggregating every edge."""
    cache = 3 * dst_rows * width * 4
    recompute = (loaded_rows + edges) * width * 4
    if setting == "auto":
        mode = "cache" if model.linear_aggregate and cache <= recompute else "recompute"
    else:
        mode = setting
    return LayerChoice(mode, cache, recompute)


def _split_layer(model: GNN, k: int, src: torch.Tensor, block: Block
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """(output, aggregate) of layer ``k`` as aggregate-then-update: the layer's linear maps
    run on the destinations only, not on every source row a chunk loads."""
    ids = block.src_ids
    dst_ids = ids[: block.num_dst]
    x = model.inputs(src, ids) if k == 0 else src
    agg = model.aggregate(k, x, block)
    return model.post(k, model.update(k, agg, x[: block.num_dst], dst_ids), dst_ids), agg


def forward(model: GNN, k: int, src: torch.Tensor, block: Block, cache: bool
            ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Output rows of the chunk's destinations (no autograd) and, ``cache``, the aggregate.
    Splittable models aggregate, then update; the others (GAT) run their conv."""
    with torch.no_grad():
        if not model.splittable:
            return model.layer(k, src, block), None
        out, agg = _split_layer(model, k, src, block)
        return out, (agg if cache else None)


def backward_recompute(model: GNN, k: int, src: torch.Tensor, block: Block,
                       grad_out: torch.Tensor, need_src: bool
                       ) -> tuple[torch.Tensor | None, int]:
    """Run the layer again on ``src`` and backpropagate ``grad_out``: parameter gradients
    accumulate; returns the sources' gradient (``need_src``) and the bytes autograd saved."""
    src = src.detach().requires_grad_(need_src)
    with SavedBytes((src,)) as saved:
        out = _split_layer(model, k, src, block)[0] if model.splittable \
            else model.layer(k, src, block)
    torch.autograd.backward(out, grad_out)
    return (src.grad if need_src else None), saved.nbytes


def backward_cached(model: GNN, k: int, agg: torch.Tensor, x_dst: torch.Tensor, block: Block,
                    grad_out: torch.Tensor, need_src: bool) -> tuple[torch.Tensor | None, int]:
    """Recompute only the update from the cached aggregate and the destinations' rows; the
    sources' gradient is the aggregate's transpose applied to the aggregate's gradient."""
    agg = agg.detach().requires_grad_(need_src)
    x_dst = x_dst.detach().requires_grad_(need_src)
    dst_ids = block.src_ids[: block.num_dst]
    with SavedBytes((agg, x_dst)) as saved:
        xin = model.inputs(x_dst, dst_ids) if k == 0 else x_dst
        out = model.post(k, model.update(k, agg, xin, dst_ids), dst_ids)
    torch.autograd.backward(out, grad_out)
    if not need_src:
        return None, saved.nbytes
    grad = model.aggregate_grad(k, agg.grad, block)
    grad[: block.num_dst] += x_dst.grad
    return grad, saved.nbytes
