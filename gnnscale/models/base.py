"""GNN base: a stack of PyG conv layers run on sampled blocks.

A model never knows which strategy runs it: it gets input features and per-layer
:class:`~gnnscale.sampling.base.Block` objects (destinations first among the sources) and runs
``conv((x_src, x_dst), edge_index, size)`` per layer.

Dropout is torch's unless a strategy sets :attr:`GNN.dropout_key` to ``(seed, epoch)``: then
hidden-layer masks are keyed by (seed, epoch, layer, global vertex id) (see
:mod:`gnnscale.models.dropout`), so every rank that computes a vertex's row drops the same
channels, and a partitioned forward equals the single-process one with dropout on.

Splittable models (:attr:`GNN.splittable`: SAGE with mean/sum, GCN with graph normalisation,
GIN, R-GCN) also expose a conv as :meth:`GNN.aggregate` (a sum over the block's edges that adds
up exactly across any split of the edges, normalised by the bound graph's degrees) and
:meth:`GNN.update` (the vertex-wise rest), for vertex-cut reduces, chunked aggregation and
update-before-aggregate (:meth:`GNN.reorders`, DeepGalois section 4.2). The aggregate keeps
:meth:`GNN.aggregate_slots` sums per destination side by side (one; R-GCN one per relation),
so its rows are :meth:`GNN.aggregate_width` wide, not always the input's width: edge ``e`` sums
into slot :meth:`GNN.edge_slot` of its destination, row ``dst * slots + slot`` of the
aggregation's matrix (:meth:`GNN.aggregate_matrix`, :func:`slot_rows`).

``residual=True`` builds Platonov et al.'s residual stack (2023, section 4): an input projection
(linear, dropout, activation), then per layer ``h + FFN(conv(norm(h)))`` with the conv
``hidden -> hidden`` and ``FFN`` = dropout, activation, linear, dropout, then a final norm and an
output projection. Every piece but the conv is vertex-wise, so the split contract holds:
:meth:`GNN.aggregate` normalises its source rows before summing, :meth:`GNN.update` adds the
residual, :meth:`GNN.inputs` projects and :meth:`GNN.post` of the last layer maps to the classes.
"""

from __future__ import annotations

import warnings
from abc import abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from gnnscale.data.graph import GraphStore
from gnnscale.models.dropout import dropout, keyed_dropout, stream_key
from gnnscale.models.schemas import ACTIVATION_NAMES, ModelConfig
from gnnscale.sampling.base import Block

ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": F.relu, "elu": F.elu, "gelu": F.gelu, "leaky_relu": F.leaky_relu, "tanh": torch.tanh,
}
assert sorted(ACTIVATIONS) == sorted(ACTIVATION_NAMES)


class GNN(nn.Module):
    """``num_layers`` conv layers; hidden layers get norm, activation and dropout.

    What the model can do (split, pre-aggregate, weigh edges) is read from its option's schema
    (:attr:`schema`, :meth:`spec`), which the launcher reads too, without building a model."""

    #: The option's typed schema (models/schemas.py), built from :meth:`options` by :meth:`spec`.
    schema: ClassVar[type[ModelConfig]] = ModelConfig
    #: The width of the edge features its convs read (``model.edge_dim``), None: none read.
    edge_dim: int | None = None

    def __init__(self, in_channels: int, out_channels: int, hidden: int = 256,
                 num_layers: int = 3, dropout: float = 0.5, activation: str = "relu",
                 norm: str = "none", reorder_update: str | bool = "auto",
                 input_dropout: float = 0.0, residual: bool = False) -> None:
        super().__init__()
        reorder_update = str(reorder_update).lower()
        ModelConfig(hidden=hidden, num_layers=num_layers, dropout=dropout,
                    input_dropout=input_dropout, activation=activation, norm=norm,
                    reorder_update=reorder_update, residual=bool(residual)).check()
        self.reorder_update, self.norm = reorder_update, norm
        self.num_layers, self.dropout, self.act = num_layers, dropout, ACTIVATIONS[activation]
        self.input_dropout, self.residual = input_dropout, bool(residual)
        if self.residual:
            self.in_proj = nn.Linear(in_channels, hidden)
            dims = [hidden] * (num_layers + 1)
        else:
            dims = [in_channels] + [hidden] * (num_layers - 1) + [out_channels]
        self.convs = nn.ModuleList(
            self.make_conv(i, dims[i], dims[i + 1]) for i in range(num_layers)
        )
        #: hidden layers' norms; residual: each block's pre-norm, then the output norm
        self.norms = nn.ModuleList(
            nn.BatchNorm1d(hidden) if norm == "batch" else
            nn.LayerNorm(hidden) if norm == "layer" else nn.Identity()
            for _ in range(num_layers + 1 if self.residual else num_layers - 1)
        )
        if self.residual:  # each block's feed-forward tail, then the class projection
            self.ffn = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(num_layers))
            self.out_proj = nn.Linear(hidden, out_channels)
        #: ``(seed, epoch)`` for keyed dropout, or None for torch's dropout (set by strategies).
        self.dropout_key: tuple[int, int] | None = None

    def options(self) -> dict[str, Any]:
        """This model's config values that decide what it can do (its schema's fields)."""
        return {"norm": self.norm, "residual": self.residual}

    def spec(self) -> ModelConfig:
        """This model's options as its schema, which answers what the model can do."""
        return self.schema(**self.options())

    @property
    def layer_wise(self) -> bool:
        """Whether the model runs one conv at a time (:meth:`layer`); a user's whole-graph-only
        module (``model=custom``) does not."""
        return True

    @property
    def splittable(self) -> bool:
        """Whether the convs split into :meth:`aggregate` and :meth:`update` (GAT: no)."""
        return self.spec().splittable

    @property
    def batch_norm(self) -> bool:
        """Whether hidden layers normalise over the rows a forward holds (``norm=batch``)."""
        return self.spec().batch_norm

    def set_dropout_key(self, seed: int | None, epoch: int = 0) -> None:
        """Key hidden-layer dropout by ``(seed, epoch)``; ``seed=None`` restores torch's."""
        self.dropout_key = None if seed is None else (int(seed), int(epoch))

    @property
    def preaggregatable(self) -> bool:
        """True when a sender may average its edges into a remote destination and ship one
        row, exactly (a mean/sum aggregation of the raw source rows, as SAGE's)."""
        return self.spec().preaggregatable

    def bind_graph(self, graph: GraphStore) -> None:
        """Take graph-level constants a layer needs (e.g. degrees); most models need none."""

    @abstractmethod
    def make_conv(self, layer: int, in_dim: int, out_dim: int) -> nn.Module:
        """The PyG conv layer ``layer`` (0 = input layer)."""

    @property
    def reads_edge_features(self) -> bool:
        """Whether its convs read the blocks' edge features (``block.edge_attr``)."""
        return self.edge_dim is not None

    def edge_attr(self, block: Block) -> torch.Tensor:
        """The block's edge features, which a model that reads them needs (one-line error)."""
        if block.edge_attr is None:
            raise ValueError(f"{type(self).__name__} reads edge features but the block "
                             "carries none (edge_attr): train it with strategy=data, "
                             "factored or split, which gather them")
        return block.edge_attr

    def conv(self, layer: int, x: torch.Tensor, block: Block) -> torch.Tensor:
        """Run conv ``layer`` on a block: ``x`` holds its sources, destinations first. A block
        with ``edge_weight`` runs as :meth:`update` of the weighted :meth:`aggregate`; a model
        that reads edge features gives the conv ``edge_attr=`` the block's rows."""
        if block.edge_weight is not None:
            return self.weighted_conv(layer, x, block)
        if self.edge_dim is not None:
            return self.convs[layer]((x, x[: block.num_dst]), block.edge_index,
                                     edge_attr=self.edge_attr(block), size=block.size)
        if self.sparse_conv:  # PyG's fused sparse product: no per-edge message rows
            return self.convs[layer]((x, x[: block.num_dst]), block_matrix(block, None, x.dtype))
        return self.convs[layer]((x, x[: block.num_dst]), block.edge_index, size=block.size)

    @property
    def sparse_conv(self) -> bool:
        """Whether the convs take a block as a sparse adjacency matrix (their aggregation is a
        sum or mean, which PyG runs as one sparse-dense product instead of gathering a message
        row per edge: 7-19x faster on CPU at 256 channels). False for attention and max."""
        return True

    # ---- weighted blocks (sampler=random_walk) ------------------------------------------------
    @classmethod
    def why_not_weighted(cls, options: Mapping[str, Any]) -> str | None:
        """None when a model built with ``options`` (its config) aggregates blocks that carry
        ``edge_weight``, else the reason (the schema's answer)."""
        names = {f.name for f in fields(cls.schema)}
        return cls.schema(**{k: v for k, v in options.items() if k in names}).why_not_weighted()

    def weighted_conv(self, layer: int, x: torch.Tensor, block: Block) -> torch.Tensor:
        """Conv ``layer`` on a block with ``edge_weight``: the aggregate of
        :meth:`edge_weight` (which uses the block's weights), then :meth:`update`."""
        why = self.why_not_weighted(self.options())
        if why is not None:
            raise ValueError(why)
        dst_ids = None if block.src_ids is None else block.src_ids[: block.num_dst]
        return self.conv_update(layer, self.edge_sum(layer, x, block), x[: block.num_dst],
                                dst_ids)

    def layer(self, i: int, x: torch.Tensor, block: Block,
              ids: torch.Tensor | None = None) -> torch.Tensor:
        """Conv ``i`` plus, for hidden layers, norm, activation and dropout (residual: the
        block around the conv). ``ids`` are the global ids of the output rows (default
        ``block.src_ids[:num_dst]``); keyed dropout needs them."""
        if ids is None and block.src_ids is not None:
            ids = block.src_ids[: block.num_dst]
        if i == 0:
            x = self.inputs(x, block.src_ids)
        h = self.conv(i, self.pre(i, x), block)
        if self.residual:
            h = x[: block.num_dst] + self.ffn_tail(i, h, ids)
        return self.post(i, h, ids)

    def _drop(self, h: torch.Tensor, p: float, stream: int,
              ids: torch.Tensor | None) -> torch.Tensor:
        """Dropout of rate ``p``: torch's, or keyed by (:attr:`dropout_key`, ``stream``, the
        rows' global vertex ids ``ids``) when a strategy set the key."""
        if not self.training or p == 0.0:
            return h
        if self.dropout_key is None:
            return dropout(h, p)
        if ids is None:
            raise ValueError("keyed dropout (model.dropout_key set) needs the global vertex ids "
                             "of the rows: pass ids= or blocks that carry src_ids")
        return keyed_dropout(h, p, stream_key(*self.dropout_key, stream), ids)

    def inputs(self, x: torch.Tensor, ids: torch.Tensor | None = None) -> torch.Tensor:
        """Input features as layer 0 reads them: ``input_dropout`` applied (keyed by ``ids``,
        the rows' global vertex ids, when :attr:`dropout_key` is set); residual: then the
        input projection, dropout and activation."""
        x = self._drop(x, self.input_dropout, -1, ids)
        if not self.residual:
            return x
        return self.act(self._drop(self.in_proj(x), self.dropout, -2, ids))

    def pre(self, i: int, x: torch.Tensor) -> torch.Tensor:
        """What conv ``i`` reads of its source rows: the block's pre-norm (residual), else
        ``x`` itself. Vertex-wise, so it commutes with any split of the edges."""
        return self.norms[i](x) if self.residual else x

    def ffn_tail(self, i: int, h: torch.Tensor, ids: torch.Tensor | None) -> torch.Tensor:
        """Residual block ``i``'s feed-forward after its conv: dropout, activation, linear,
        dropout (keyed streams ``1000 + 2i`` and ``1001 + 2i``)."""
        h = self.act(self._drop(h, self.dropout, 1000 + 2 * i, ids))
        return self._drop(self.ffn[i](h), self.dropout, 1001 + 2 * i, ids)

    def post(self, i: int, h: torch.Tensor, ids: torch.Tensor | None = None) -> torch.Tensor:
        """What follows conv ``i``: for hidden layers norm, activation and dropout (keyed by
        ``ids``, the rows' global vertex ids, when :attr:`dropout_key` is set); residual:
        nothing, and after the last block the output norm and projection."""
        last = i == self.num_layers - 1
        if self.residual:
            return self.out_proj(self.norms[-1](h)) if last else h
        if last:
            return h
        return self._drop(self.act(self.norms[i](h)), self.dropout, i, ids)

    # ---- aggregate / update (splittable models) -----------------------------------------------
    def why_not_splittable(self) -> str | None:
        """None when the convs split into aggregate and update, else the reason."""
        return self.spec().why_not_splittable()

    def why_not_whole_graph(self) -> str | None:
        """None when the model trains on the whole graph, else the reason (its schema's)."""
        return self.spec().why_not_whole_graph()

    def check_splittable(self) -> None:
        """Raise a ValueError saying why the model cannot be split (if it cannot)."""
        why = self.why_not_splittable()
        if why is not None:
            raise ValueError(why)

    def edge_weight(self, layer: int, block: Block) -> torch.Tensor | None:
        """Per-edge weight of the aggregation sum (None: all ones)."""
        return None

    @staticmethod
    def dst_ids(block: Block) -> torch.Tensor:
        """Global ids of a block's destinations (it must carry ``src_ids``)."""
        if block.src_ids is None:
            raise ValueError("aggregating with graph-level degrees needs blocks that carry "
                             "src_ids (global vertex ids)")
        return block.src_ids[: block.num_dst]

    def pre_linear(self, layer: int) -> nn.Module:
        """The linear map (a module with ``weight``, ``out x in``) that may move before the
        aggregation (update-before-aggregate)."""
        raise NotImplementedError(f"{type(self).__name__} has no linear to move")

    def reorders(self, layer: int) -> bool:
        """Whether layer ``layer`` transforms before aggregating (``model.reorder_update``:
        ``auto`` does when the linear shrinks the dimension)."""
        if self.reorder_update == "false" or not self.splittable or self.residual:
            return False
        out_dim, in_dim = self.pre_linear(layer).weight.shape
        return self.reorder_update == "true" or out_dim < in_dim

    def transform(self, layer: int, x: torch.Tensor) -> torch.Tensor:
        """``x`` through :meth:`pre_linear` without its bias: what a reordered layer sends."""
        return F.linear(x, self.pre_linear(layer).weight)

    def aggregate(self, layer: int, x: torch.Tensor, block: Block) -> torch.Tensor:
        """``sum over block edges (u, v) of w_uv * pre(x)[u]`` per destination (``num_dst``
        rows; :meth:`pre` is the identity unless the model is residual).

        ``x`` holds the block's sources (raw, or :meth:`transform`-ed for a reordered layer).
        The weights use graph-level degrees, so aggregates over disjoint edge sets add up to
        the aggregate over their union."""
        self.check_splittable()
        return self.edge_sum(layer, self.pre(layer, x), block)

    def edge_sum(self, layer: int, x: torch.Tensor, block: Block) -> torch.Tensor:
        """``sum over block edges (u, v) of w_uv * x[u]`` into slot :meth:`edge_slot` of row
        ``v`` (``num_dst x aggregate_width`` rows): the linear part of :meth:`aggregate`."""
        out = torch.sparse.mm(self.aggregate_matrix(layer, block, x.dtype), x)
        return out.view(block.num_dst, -1)

    # ---- the aggregate's slots (a model with several sums per vertex: R-GCN's relations) ----
    def aggregate_slots(self, layer: int) -> int:
        """How many sums of source rows layer ``layer``'s aggregate keeps per destination, side
        by side (1; R-GCN: one per relation): its rows are :meth:`aggregate_width` wide."""
        return 1

    def aggregate_width(self, layer: int, in_dim: int) -> int:
        """Width of layer ``layer``'s aggregate of ``in_dim``-wide source rows
        (``aggregate_slots * in_dim``): what a strategy sizes cached or reduced aggregates by.
        A strategy that builds the aggregation's matrix itself (from :meth:`edge_weight`) puts
        edge ``e`` in row ``dst[e] * slots + edge_slot[e]`` (:func:`slot_rows`) and views the
        ``num_dst * slots``-row product as ``num_dst`` rows of this width."""
        return self.aggregate_slots(layer) * in_dim

    def edge_slot(self, layer: int, block: Block) -> torch.Tensor | None:
        """Per edge, which of its destination's :meth:`aggregate_slots` sums it goes to (None:
        every edge to the only one)."""
        return None

    def aggregate_matrix(self, layer: int, block: Block, dtype: torch.dtype) -> torch.Tensor:
        """Layer ``layer``'s aggregation of ``block`` as a sparse CSR matrix of
        ``num_dst * aggregate_slots`` rows (:func:`slot_rows`) by ``num_src`` columns, with
        entries :meth:`edge_weight`."""
        w = self.edge_weight(layer, block)
        slots = self.aggregate_slots(layer)
        src, dst = block.edge_index
        return csr_matrix(src, slot_rows(dst, self.edge_slot(layer, block), slots), w,
                          (block.num_src, block.num_dst * slots), dtype)

    @property
    def linear_aggregate(self) -> bool:
        """Whether :meth:`aggregate` is linear in its source rows (split, and no pre-norm), so
        :meth:`aggregate_grad` gives its gradient without the source data."""
        return self.spec().linear_aggregate

    def aggregate_grad(self, layer: int, grad: torch.Tensor, block: Block) -> torch.Tensor:
        """The gradient of :meth:`aggregate` with respect to its source rows, from the
        gradient ``grad`` of its output (the transpose of the sum: no source data needed)."""
        self.check_splittable()
        if not self.linear_aggregate:
            raise ValueError("a residual model normalises source rows before aggregating: the "
                             "aggregate's gradient needs the rows (recompute the layer)")
        slots = self.aggregate_slots(layer)
        grad = grad.reshape(block.num_dst * slots, grad.shape[1] // slots)
        return torch.sparse.mm(self.aggregate_matrix(layer, block, grad.dtype).t(), grad)

    def update(self, layer: int, agg: torch.Tensor, x_dst: torch.Tensor,
               dst_ids: torch.Tensor | None = None,
               z_dst: torch.Tensor | None = None) -> torch.Tensor:
        """Conv ``layer``'s output from the summed aggregate of its destinations and their own
        input rows ``x_dst``; ``z_dst`` (= ``transform(x_dst)``) when the layer was reordered
        (``agg`` then sums transformed rows). Residual: ``x_dst`` plus the block's
        feed-forward of the conv on the pre-normed rows."""
        self.check_splittable()
        if not self.residual:
            return self.conv_update(layer, agg, x_dst, dst_ids, z_dst)
        h = self.conv_update(layer, agg, self.pre(layer, x_dst), dst_ids, z_dst)
        return x_dst + self.ffn_tail(layer, h, dst_ids)

    def conv_update(self, layer: int, agg: torch.Tensor, x_dst: torch.Tensor,
                    dst_ids: torch.Tensor | None = None,
                    z_dst: torch.Tensor | None = None) -> torch.Tensor:
        """The conv's own vertex-wise part (what :meth:`update` wraps); models override it."""
        raise NotImplementedError(f"{type(self).__name__}.conv_update")

    def widths(self, in_dim: int) -> list[int]:
        """Widths of the rows of layers 0..L: the input features, then each layer's output
        (what strategies ship and store between layers)."""
        if self.residual:
            return [in_dim] + [int(self.ffn[0].out_features)] * (self.num_layers - 1) + \
                [int(self.out_proj.out_features)]
        dims = [in_dim]
        for conv in self.convs:
            out = getattr(conv, "out_channels", None)
            if out is None:  # GIN, GINE: its MLP's last layer (not GINE's edge projection)
                mlp = conv.nn if isinstance(getattr(conv, "nn", None), nn.Module) else conv
                out = [m for m in mlp.modules() if isinstance(m, nn.Linear)][-1].out_features
            elif getattr(conv, "concat", False):
                out *= conv.heads
            dims.append(int(out))
        return dims

    def encode(self, x: Any) -> torch.Tensor:
        """Layer 0's dense source rows from the raw inputs the strategy read: the feature rows
        themselves (a typed model maps :class:`~gnnscale.sampling.base.TypedInputs` to rows
        here). Vertex-wise, so a strategy may encode wherever it reads raw rows (before it
        slices, exchanges or caches them); :meth:`forward` encodes first."""
        return x

    def forward(self, x: Any, blocks: list[Block] | torch.Tensor,
                edge_attr: torch.Tensor | None = None) -> torch.Tensor:
        """Every layer in turn on its block (``blocks`` input layer first); ``x`` holds layer 0's
        sources (raw: :meth:`encode` runs first). Called as a PyG model,
        ``model(x, edge_index[, edge_attr])`` with the whole graph's ``edge_index``, it runs
        :meth:`whole_graph`."""
        if isinstance(blocks, torch.Tensor):
            return self.whole_graph(x, blocks, edge_attr=edge_attr)
        if len(blocks) != self.num_layers:
            raise ValueError(f"got {len(blocks)} blocks for a {self.num_layers}-layer model")
        x = self.encode(x)
        for i, block in enumerate(blocks):
            x = self.layer(i, x, block)
        return x


    def whole_graph(self, x: Any, edge_index: torch.Tensor, ids: torch.Tensor | None = None,
                    edge_attr: torch.Tensor | None = None) -> torch.Tensor:
        """Every vertex's output rows from the whole graph's ``edge_index`` (row ``v`` is
        vertex ``v``; ``ids``: their global ids, default ``0..n-1``), each layer on the whole
        graph as one block (``edge_attr``: its edge features, for a model that reads them)."""
        n = x.shape[0] if isinstance(x, torch.Tensor) else int(edge_index.max()) + 1
        device = edge_index.device
        block = Block(edge_index, (n, n), ids if ids is not None else torch.arange(
            n, device=device), edge_attr=edge_attr)
        return self.forward(x, [block] * self.num_layers)


def block_matrix(block: Block, w: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor:
    """The block as a sparse ``num_dst x num_src`` CSR matrix of edge weights (ones when ``w``
    is None). O(edges) when the edges are grouped by destination (samplers and full-graph
    plans build them so), else one stable sort; duplicate edges add up as in the edge-wise
    sum."""
    src, dst = block.edge_index
    return csr_matrix(src, dst, w, block.size, dtype)


def slot_rows(dst: torch.Tensor, slot: torch.Tensor | None, slots: int) -> torch.Tensor:
    """The aggregation matrix's row of every edge: ``dst * slots + slot`` (``dst`` when the
    aggregate has one slot per destination, :meth:`GNN.aggregate_slots`)."""
    if slot is None or slots == 1:
        return dst
    return dst * slots + slot.to(dst.dtype)


def csr_matrix(src: torch.Tensor, dst: torch.Tensor, w: torch.Tensor | None,
               size: tuple[int, int], dtype: torch.dtype,
               loop_w: torch.Tensor | None = None) -> torch.Tensor:
    """``num_dst x num_src`` CSR matrix with entry ``w[e]`` at ``(dst[e], src[e])``, plus
    ``loop_w[v]`` at ``(v, v)`` after each row's edges when ``loop_w`` is given (self loops
    merged in O(edges), no sort)."""
    n_src, n_dst = size
    vals = torch.ones(src.numel(), dtype=dtype, device=src.device) if w is None \
        else w.to(dtype)
    if dst.numel() > 1 and bool((dst[1:] < dst[:-1]).any()):
        order = torch.argsort(dst, stable=True)
        src, dst, vals = src[order], dst[order], vals[order]
    counts = torch.bincount(dst, minlength=n_dst)
    src = src.to(torch.int64)
    if loop_w is not None:  # edge i of row r moves to i + r; row r's loop goes after its edges
        rows = torch.arange(n_dst, device=dst.device)
        edge_at = torch.arange(src.numel(), device=dst.device) + dst
        loop_at = counts.cumsum(0) + rows
        col = torch.empty(src.numel() + n_dst, dtype=torch.int64, device=dst.device)
        v = torch.empty(src.numel() + n_dst, dtype=dtype, device=dst.device)
        col[edge_at], col[loop_at] = src, rows
        v[edge_at], v[loop_at] = vals, loop_w.to(dtype)
        src, vals, counts = col, v, counts + 1
    crow = torch.zeros(n_dst + 1, dtype=torch.int64, device=dst.device)
    crow[1:] = counts.cumsum(0)
    with warnings.catch_warnings():  # "beta state" / invariant-check notices on every call
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(crow, src, vals, (n_dst, n_src), check_invariants=False)
