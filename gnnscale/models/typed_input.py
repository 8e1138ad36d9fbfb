"""A typed model's input layer: a typed graph's raw inputs as one ``[rows, hidden]`` matrix.

Node types of a typed graph differ in their feature widths, and some have no features at all.
:class:`TypedInput` gives every type a map into one shared width ``hidden``: a featured type
``t`` a ``Linear(F_t, hidden)`` of its features, a featureless type an
``nn.Embedding(num_nodes_of(t), hidden)`` looked up by type-local id (its rows are learned).
The embedding tables are sparse (``sparse=True``): a step's gradient holds only the rows the
step looked up, so an optimizer for sparse gradients (``torch.optim.SparseAdam``, which the
optimizer factory picks for them) updates only those rows, and an epoch touches only the rows
it sampled. Rows come out in the order of the input (a mini-batch's ``n_id``).

It reads a :class:`~gnnscale.sampling.base.TypedInputs` (what the feature store gathers on a
typed graph); a plain feature matrix is read as the rows of a one-type graph's only type.
Every featured type's linear runs on every call (on zero rows when the input has none of its
type), so each of its parameters gets a gradient in every step, as data-parallel reducers
expect. The rows are computed type by type and put back in the input's order by one
gather.
"""

from __future__ import annotations

import torch
from torch import nn

from gnnscale.data.graph import GraphStore
from gnnscale.models.schemas import INPUT_FEATURES
from gnnscale.sampling.base import TypedInputs


class TypedInput(nn.Module):
    """Per node type a linear map of its features or an embedding of its ids, into ``hidden``.

    ``feature_dims`` maps every node type (in the graph's order) to its feature width (0: no
    features), ``num_nodes`` every featureless type to its node count."""

    def __init__(self, feature_dims: dict[str, int], num_nodes: dict[str, int],
                 hidden: int) -> None:
        super().__init__()
        self.node_types = tuple(feature_dims)
        self.hidden = int(hidden)
        self.linears = nn.ModuleDict(
            {t: nn.Linear(d, hidden) for t, d in feature_dims.items() if d > 0})
        self.embeddings = nn.ModuleDict(
            {t: nn.Embedding(num_nodes[t], hidden, sparse=True)
             for t, d in feature_dims.items() if d == 0})
        for emb in self.embeddings.values():
            nn.init.normal_(emb.weight, std=hidden ** -0.5)

    def embedding_rows(self) -> dict[str, int]:
        """Rows of every featureless type's embedding table."""
        return {t: int(e.num_embeddings) for t, e in self.embeddings.items()}

    def embedding_bytes(self) -> int:
        """Bytes of the embedding tables' parameters (an optimizer keeps its own state too)."""
        return sum(e.weight.numel() * e.weight.element_size() for e in self.embeddings.values())

    def forward(self, inputs: TypedInputs | torch.Tensor) -> torch.Tensor:
        """``[rows, hidden]``: every row mapped by its type's linear or embedding."""
        if isinstance(inputs, torch.Tensor):
            if len(self.node_types) != 1 or self.node_types[0] not in self.linears:
                raise ValueError("a typed input got a plain feature matrix, but the graph it "
                                 "was bound to has several node types: pass TypedInputs")
            return self.linears[self.node_types[0]](inputs)
        ref = next(self.parameters())
        kinds = inputs.node_type
        order = torch.argsort(kinds, stable=True)  # the rows grouped by type, type by type
        parts = []
        for k, t in enumerate(self.node_types):
            pos = (kinds == k).nonzero().flatten()
            if t in self.linears:
                rows = inputs.features.get(t)
                if rows is None:
                    raise ValueError(f"the inputs carry no features of node type {t!r}")
                if rows.shape[0] != pos.numel():
                    raise ValueError(f"the inputs carry {rows.shape[0]} feature rows of node "
                                     f"type {t!r} for {pos.numel()} rows of that type")
                parts.append(self.linears[t](rows.to(ref.dtype)))
            elif pos.numel():
                parts.append(self.embeddings[t](inputs.local[pos]))
        if not parts:
            return ref.new_zeros(inputs.num_rows, self.hidden)
        out = torch.cat(parts)
        restore = torch.empty_like(order)
        restore[order] = torch.arange(order.numel(), device=order.device)
        return out[restore]


def input_dims(graph: GraphStore, which: str = "all") -> tuple[dict[str, int], dict[str, int]]:
    """``(feature width per node type, node count per embedded type)`` for a typed input
    that reads the features of ``which`` types (HGB's ``--feats-type`` 0, 2 and 3: every
    featured type's, the target types' only, or none); a type whose features it does not
    read gets width 0 and an embedding table (a learned row per vertex, as a one-hot id
    through a linear map)."""
    if which not in INPUT_FEATURES:
        raise ValueError(f"input_features must be one of {INPUT_FEATURES}, got {which!r}")
    targets = set(graph.target_types or ())
    dims = {t: d if which == "all" or (which == "target" and t in targets) else 0
            for t, d in graph.feature_dims.items()}
    rows = {t: graph.num_nodes_of(t) for t, d in dims.items() if d == 0}
    return dims, rows
