"""Device working set of a chunk: the bytes autograd saves while a chunk recomputes, measured
and modelled.

:class:`SavedBytes` counts the bytes of the tensors autograd saves for backward inside its
block (each storage once, leaving out storages the caller already accounts for) and keeps a
weak reference to each, so the device tier can measure them while they live. An
:class:`ActivationModel` fits ``bytes = a*edges + b*sources + c*destinations + d`` per layer
from a few probes of the same computation on random blocks, so the planned bound of every
batch is known before training and the budget is checked at set-up.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass

import torch

from gnnscale.sampling.base import Block


class SavedBytes:
    """``with SavedBytes(exclude) as s: ...``; ``s.nbytes`` = bytes saved for backward."""

    def __init__(self, exclude: tuple[torch.Tensor, ...] = ()) -> None:
        self._seen = {t.untyped_storage().data_ptr() for t in exclude}
        self.nbytes = 0
        self._refs: list[weakref.ref] = []
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        self._refs.append(weakref.ref(t))
        return self._count(t)

    def _count(self, t: torch.Tensor) -> torch.Tensor:
        if t.layout == torch.sparse_csr:  # a block's matrix: its index and value arrays
            for part in (t.crow_indices(), t.col_indices(), t.values()):
                self._count(part)
            return t
        st = t.untyped_storage()
        if st.data_ptr() not in self._seen:
            self._seen.add(st.data_ptr())
            self.nbytes += st.nbytes()
        return t

    def alive(self) -> list[torch.Tensor]:
        """The saved tensors autograd still holds."""
        return [t for t in (r() for r in self._refs) if t is not None]

    def __enter__(self) -> SavedBytes:
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._hooks.__exit__(*exc)


# probe shapes (sources, destinations, edges): independent directions for the fit
PROBES = ((40, 20, 60), (40, 20, 200), (90, 20, 60), (40, 35, 60), (120, 60, 300))


@dataclass
class ActivationModel:
    """Saved bytes of one layer's chunk computation as a linear function of its shape."""

    coef: tuple[float, float, float, float]  # per edge, per source, per destination, constant

    def __call__(self, edges: int, sources: int, destinations: int) -> int:
        """Bytes autograd saves for a batch of this many edges, sources and destinations."""
        a, b, c, d = self.coef
        return int(max(a * edges + b * sources + c * destinations + d, 0.0)) + 1

    @staticmethod
    def fit(run: Callable[[Block, torch.Tensor], int], in_dim: int, num_ids: int,
            generator: torch.Generator, edge_types: int = 0, edge_dim: int = 0,
            types: tuple[torch.Tensor, torch.Tensor] | None = None) -> ActivationModel:
        """``run(block, x)`` computes one chunk on random rows and returns the saved bytes;
        the probe blocks' sources carry vertex ids below ``num_ids``, their edges random types
        below ``edge_types`` (a typed graph's) and ``edge_dim``-wide random features when
        those are > 0 (what the chunks' blocks carry). ``types`` (a typed graph's
        ``node_type_offset`` and each edge type's ``(source, destination)`` node type
        indices) makes each probe edge's type join its rows' node types, as a real chunk's
        do (:func:`typed_probe`; a model that splits rows by type needs it)."""
        rows, ys = [], []
        for s, d, e in PROBES:
            src = torch.randint(0, s, (e,), generator=generator)
            dst = torch.cat([torch.arange(d), torch.randint(0, d, (e - d,), generator=generator)])
            dst, order = dst.sort(stable=True)  # in-edge order, as chunks are built
            block = Block(torch.stack([src[order], dst]), (s, d), torch.arange(s) % num_ids)
            if types is not None:
                block = typed_probe(block, *types, generator)
                e = block.num_edges
            elif edge_types:
                block.edge_type = torch.randint(0, edge_types, (e,), generator=generator)
            if edge_dim:
                block.edge_attr = torch.randn(e, edge_dim, generator=generator)
            rows.append([e, s, d, 1.0])
            ys.append(float(run(block, torch.randn(s, in_dim, generator=generator))))
        a = torch.tensor(rows, dtype=torch.float64)
        y = torch.tensor(ys, dtype=torch.float64)
        coef = torch.linalg.lstsq(a, y.unsqueeze(1)).solution.flatten()
        # an upper bound of every probe: the fit plus its largest shortfall
        short = float((y - a @ coef).clamp(min=0).max())
        coef[3] += short
        return ActivationModel(tuple(float(c) for c in coef))


def typed_probe(block: Block, offsets: torch.Tensor, ends: torch.Tensor,
                generator: torch.Generator) -> Block:
    """``block`` typed as a typed graph's chunk is: its rows take the node types in turn
    (ids of their types from ``offsets``, the graph's ``node_type_offset``), each edge a random
    edge type into its destination's type (``ends[r]``: edge type ``r``'s source and
    destination node type indices) and a source row of that edge type's source type; edges
    into a type that no edge type points to are dropped."""
    kinds = offsets.numel() - 1
    s, d = block.size
    kind = torch.arange(s) % kinds
    size = (offsets[1:] - offsets[:-1]).clamp(min=1)
    ids = offsets[kind] + torch.randint(0, 1 << 40, (s,), generator=generator) % size[kind]
    into = [(ends[:, 1] == t).nonzero().flatten() for t in range(kinds)]
    width = max(1, max(r.numel() for r in into))
    table = torch.stack([torch.cat([r, r.new_zeros(width - r.numel())]) for r in into])
    count = torch.tensor([r.numel() for r in into])
    dst = block.edge_index[1]
    dkind = kind[dst]
    keep = count[dkind] > 0
    dst, dkind = dst[keep], dkind[keep]
    pick = torch.randint(0, 1 << 40, (dst.numel(),), generator=generator)
    rel = table[dkind, pick % count[dkind]]
    skind = ends[rel, 0]
    rows_of = (s - skind + kinds - 1) // kinds  # rows j < s with j % kinds == skind
    src = skind + kinds * (pick // width % rows_of.clamp(min=1))
    ok = rows_of > 0
    return Block(torch.stack([src[ok], dst[ok]]), (s, d), ids, edge_type=rel[ok])
