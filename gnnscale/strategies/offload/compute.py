"""One chunk's computation per layer, forward and backward, with the intermediate data either
cached (HongTu section 4.2: the aggregate goes to the host in the forward pass and only the
update is recomputed) or recomputed (the layer runs again from its reloaded inputs).

Both paths give the gradient of the chunk's source rows from the gradient of its outputs;
caching needs a model split into aggregate and update whose aggregate is linear in its source
rows (GAT and residual models recompute). Which path a chunk takes is :mod:`.rule`'s.

A splittable model's aggregation over a chunk's edges is one sparse product with the model's
edge weights, which the bound graph fixes: :class:`ChunkProducts` builds the chunk's CSR matrix
and its transpose once per chunk (per distinct weights: every layer of GCN or SAGE-mean shares
them), and every pass reuses them: the forward's product, the recomputed layer's backward
(:func:`gnnscale.ops.sparse.fixed_mm`, instead of torch's CSR backward, which transposes the
matrix, a sort, on every call) and the cached path's gradient of the aggregate. The sums are
those of :meth:`~gnnscale.models.base.GNN.aggregate` and
:meth:`~gnnscale.models.base.GNN.aggregate_grad`, bit for bit.

An aggregate may keep several sums per destination side by side (:func:`aggregate_slots`: a
model that declares ``aggregate_slots`` and ``edge_slot``, as a typed model keeps one sum per
relation): edge ``e`` then sums into row ``dst * slots + slot`` of the matrix, and the
``num_dst * slots``-row product is viewed as ``num_dst`` rows ``slots`` times as wide as the
input (:func:`aggregate_width`): the width the cached aggregates take.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from gnnscale.distributed import device as device_seam
from gnnscale.models.base import GNN, csr_matrix, slot_rows
from gnnscale.ops.sparse import fixed_mm
from gnnscale.sampling.base import Block
from gnnscale.strategies.offload.memory import SavedBytes

AtPeak = Callable[[list[torch.Tensor]], object]


@dataclass
class ChunkProducts:
    """A chunk's aggregation as a ``num_dst*slots x num_src`` CSR matrix of the model's edge
    weights and its transpose (for the backward), built once."""

    matrix: torch.Tensor
    matrix_t: torch.Tensor
    #: the aggregate's sums per destination (:meth:`GNN.aggregate_slots`): the matrix has
    #: ``num_dst * slots`` rows, edge ``e`` in row ``dst * slots + slot[e]``
    slots: int = 1

    @staticmethod
    def build(model: GNN, k: int, block: Block, dtype: torch.dtype = torch.float32
              ) -> ChunkProducts:
        """Layer ``k``'s matrices of ``block`` (the matrix :meth:`GNN.edge_sum` builds)."""
        with torch.no_grad():
            w = model.edge_weight(k, block)
        return ChunkProducts.of(block, None if w is None else w.to(block.edge_index.device),
                                dtype, model.edge_slot(k, block), model.aggregate_slots(k))

    @staticmethod
    def of(block: Block, w: torch.Tensor | None, dtype: torch.dtype,
           slot: torch.Tensor | None = None, slots: int = 1) -> ChunkProducts:
        """The matrices of ``block`` with edge weights ``w`` (None: ones) and, for an aggregate
        of ``slots`` sums per destination, each edge's ``slot``."""
        src, dst = block.edge_index
        rows = slot_rows(dst, slot, slots)
        n_src, n_rows = block.num_src, block.num_dst * slots
        return ChunkProducts(csr_matrix(src, rows, w, (n_src, n_rows), dtype),
                             csr_matrix(rows, src, w, (n_rows, n_src), dtype), slots)

    def to(self, device: torch.device) -> ChunkProducts:
        """The matrices on ``device`` (themselves on the host's)."""
        if not device_seam.is_accelerator(device):
            return self
        return ChunkProducts(self.matrix.to(device), self.matrix_t.to(device), self.slots)

    def aggregate(self, model: GNN, k: int, x: torch.Tensor) -> torch.Tensor:
        """:meth:`GNN.aggregate` of source rows ``x``: ``matrix @ pre(x)`` (one row per
        destination, :meth:`GNN.aggregate_width` wide), its backward the cached transpose's
        product."""
        model.check_splittable()
        out = fixed_mm(self.matrix, self.matrix_t, model.pre(k, x))
        return out.view(self.matrix.shape[0] // self.slots, -1)

    def aggregate_grad(self, model: GNN, grad: torch.Tensor) -> torch.Tensor:
        """:meth:`GNN.aggregate_grad`: the sources' gradient from the aggregate's, by the
        cached transpose."""
        if not model.linear_aggregate:
            raise ValueError("a residual model normalises source rows before aggregating: the "
                             "aggregate's gradient needs the rows (recompute the layer)")
        return torch.sparse.mm(self.matrix_t, grad.reshape(self.matrix.shape[0], -1))

    @property
    def tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The two matrices (what the device tier holds while the chunk runs)."""
        return self.matrix, self.matrix_t


def can_cache(model: GNN) -> bool:
    """Whether the model's backward can run from a cached aggregate (no source rows)."""
    return model.splittable and model.linear_aggregate


def _aggregate(model: GNN, k: int, src: torch.Tensor, block: Block,
               products: ChunkProducts | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(layer ``k``'s input rows, the aggregate over the chunk's edges: by ``products`` when
    given, else the model's own product)."""
    x = model.inputs(src, block.src_ids) if k == 0 else src
    if products is None:
        return x, model.aggregate(k, x, block)
    return x, products.aggregate(model, k, x)


def _update(model: GNN, k: int, x: torch.Tensor, agg: torch.Tensor, block: Block
            ) -> torch.Tensor:
    """The layer's vertex-wise rest on the destinations only (not every source row)."""
    dst_ids = block.src_ids[: block.num_dst]
    return model.post(k, model.update(k, agg, x[: block.num_dst], dst_ids), dst_ids)


def forward(model: GNN, k: int, src: torch.Tensor, block: Block, cache: bool,
            clock: Callable[[], float] | None = None, products: ChunkProducts | None = None
            ) -> tuple[torch.Tensor, torch.Tensor | None, float]:
    """Output rows of the chunk's destinations (no autograd), the aggregate when ``cache``,
    and, given a ``clock``, the seconds of the aggregation (inputs included): the part of the
    layer a cached chunk does not run again. Splittable models aggregate, then update; the
    others (GAT) run their conv (0 seconds reported: they always recompute)."""
    with torch.no_grad():
        if not model.splittable:
            return model.layer(k, src, block), None, 0.0
        t0 = clock() if clock is not None else 0.0
        x, agg = _aggregate(model, k, src, block, products)
        seconds = clock() - t0 if clock is not None else 0.0
        return _update(model, k, x, agg, block), (agg if cache else None), seconds


def backward_recompute(model: GNN, k: int, src: torch.Tensor, block: Block,
                       grad_out: torch.Tensor, need_src: bool, at_peak: AtPeak | None = None,
                       products: ChunkProducts | None = None
                       ) -> tuple[torch.Tensor | None, int]:
    """Run the layer again on ``src`` and backpropagate ``grad_out``: parameter gradients
    accumulate; returns the sources' gradient (``need_src``) and the bytes autograd saved.
    ``at_peak`` sees the saved tensors and the output before the backward frees them."""
    src = src.detach().requires_grad_(need_src)
    with SavedBytes((src,)) as saved:
        if model.splittable:
            out = _update(model, k, *_aggregate(model, k, src, block, products), block)
        else:
            out = model.layer(k, src, block)
    if at_peak is not None:
        at_peak(saved.alive() + [out])
    torch.autograd.backward(out, grad_out)
    del out
    return (src.grad if need_src else None), saved.nbytes


def backward_cached(model: GNN, k: int, agg: torch.Tensor, x_dst: torch.Tensor, block: Block,
                    grad_out: torch.Tensor, need_src: bool, at_peak: AtPeak | None = None,
                    products: ChunkProducts | None = None
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
    grad = model.aggregate_grad(k, agg.grad, block) if products is None \
        else products.aggregate_grad(model, agg.grad)
    grad[: block.num_dst] += x_dst.grad
    return grad, saved.nbytes
