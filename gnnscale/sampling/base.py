"""Sampled mini-batches as per-layer bipartite blocks that PyG conv layers take unmodified.

Local ids are cumulative: ``n_id`` lists the global ids of every vertex of the sample, the
targets first, then each hop's new sources. Block ``l`` (input layer first) has
``size = (n_src, n_dst)``; its destinations are the first ``n_dst`` of its sources, so a layer
runs as ``conv((x, x[:n_dst]), block.edge_index, size=block.size)``.

A block may carry its edges' global ids (``e_id``: their CSC positions in the graph, the ids
edge features are stored by) and edge types (``edge_type``: ``graph.type_per_edge[e_id]``, on
graphs with more than one edge type); a strategy whose model reads edge features attaches
their rows (``edge_attr``) after sampling. A mini-batch crosses processes as one header and one
flat body (:mod:`gnnscale.sampling.codec`).

On a typed graph a model's raw input is a :class:`TypedInputs` (the feature store gathers it):
the node type and type-local id of every input row, and each featured type's feature rows.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import torch

from gnnscale.data.graph import GraphStore
from gnnscale.distributed.device import to_device


@dataclass
class Block:
    """One layer's bipartite graph: ``edge_index[0]`` = local source, ``[1]`` = local destination.

    ``src_ids`` (optional) are the global ids of the sources (destinations first), for layers
    whose weights depend on graph-level vertex properties such as GCN's degree normalisation.
    ``edge_weight`` (optional, float, one per edge) weighs the edges in the aggregation: the
    random-walk sampler's visit counts (SAGE: importance pooling, GCN: weighted degrees, GIN: a
    weighted sum); None aggregates every edge alike.
    ``e_id`` (optional, int64, one per edge) are the edges' global ids (CSC positions: the
    graph's ``indices[e_id]`` is each edge's global source); None when the sampler was not
    asked for them or its edges are not graph edges (random walks). ``edge_type`` (optional,
    int64, one per edge) is each edge's type, ``graph.type_per_edge[e_id]``; None when the
    graph has one edge type. ``edge_attr`` (optional, ``[num_edges, D]``) are the edges' features,
    ``graph.edge_attr[e_id]``: a strategy gathers them (:mod:`gnnscale.cache.edges`) when the
    model reads edge features; samplers never set it, and the codec does not carry it.
    """

    edge_index: torch.Tensor
    size: tuple[int, int]
    src_ids: torch.Tensor | None = None
    edge_weight: torch.Tensor | None = None
    e_id: torch.Tensor | None = None
    edge_type: torch.Tensor | None = None
    edge_attr: torch.Tensor | None = None

    @property
    def num_src(self) -> int:
        """Sources of the block (destinations first)."""
        return self.size[0]

    @property
    def num_dst(self) -> int:
        """Destinations of the block."""
        return self.size[1]

    @property
    def num_edges(self) -> int:
        """Edges of the block."""
        return int(self.edge_index.shape[1])

    def to(self, device: torch.device | str) -> Block:
        """The block with its tensors on ``device`` (copies as the device seam says)."""
        device = torch.device(device)

        def move(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else to_device(t, device)

        return Block(to_device(self.edge_index, device), self.size, move(self.src_ids),
                     move(self.edge_weight), move(self.e_id), move(self.edge_type),
                     move(self.edge_attr))


@dataclass
class TypedInputs:
    """The raw inputs of rows of a typed graph, rows in the order of their global ids ``ids``.

    ``node_type[i]`` (int64, an index into the graph's ``node_types``) and ``local[i]`` (the
    type-local id) describe row ``i``; ``features[t]`` holds, for each featured node type
    ``t``, the features of the rows of that type, in row order (``ids[node_type == k]``, ``k``
    the index of ``t``). A featureless type's rows carry only their local ids: a typed model
    looks them up in its embedding table.
    """

    ids: torch.Tensor
    node_type: torch.Tensor
    local: torch.Tensor
    features: dict[str, torch.Tensor]

    @property
    def num_rows(self) -> int:
        """Rows (input vertices)."""
        return int(self.ids.numel())

    @property
    def device(self) -> torch.device:
        """Where the tensors live."""
        return self.ids.device

    def to(self, device: torch.device | str) -> TypedInputs:
        """The inputs with their tensors on ``device``."""
        device = torch.device(device)
        return TypedInputs(to_device(self.ids, device), to_device(self.node_type, device),
                           to_device(self.local, device),
                           {t: to_device(f, device) for t, f in self.features.items()})


@dataclass
class MiniBatch:
    """A sampled k-hop neighbourhood of ``num_targets`` seed vertices."""

    n_id: torch.Tensor
    blocks: list[Block]
    num_targets: int

    @property
    def input_nodes(self) -> torch.Tensor:
        """Global ids whose input features layer 0 needs (all of ``n_id``)."""
        return self.n_id[: self.blocks[0].num_src] if self.blocks else self.n_id

    @property
    def targets(self) -> torch.Tensor:
        """Global ids of the seed vertices."""
        return self.n_id[: self.num_targets]

    @property
    def num_edges(self) -> int:
        """Edges over all blocks."""
        return sum(b.num_edges for b in self.blocks)

    def to(self, device: torch.device | str) -> MiniBatch:
        """The mini-batch with its ids and blocks on ``device``."""
        return MiniBatch(to_device(self.n_id, torch.device(device)),
                         [b.to(device) for b in self.blocks], self.num_targets)


class Sampler(ABC):
    """Draws the k-hop blocks of a set of seed vertices; ``seed`` makes a draw reproducible."""

    num_layers: int
    #: Whether the blocks carry ``edge_weight`` (strategies and models that cannot use edge
    #: weights refuse such a sampler before any rank starts).
    weighted_blocks: bool = False
    #: Whether the blocks carry ``e_id`` on every graph (samplers of graph edges set it when
    #: asked; they carry it on graphs with edge types whatever this says, for ``edge_type``).
    with_edge_ids: bool = False

    @abstractmethod
    def sample(self, graph: GraphStore, seeds: torch.Tensor, seed: int = 0) -> MiniBatch:
        """Blocks for ``seeds`` (global ids); the same ``seed`` gives the same sample."""
