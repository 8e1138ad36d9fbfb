"""``model=custom``: a user's own PyG model, in the user's own module, run by every strategy.

:class:`Custom` wraps the module (built from ``model.target`` and ``model.kwargs``, or passed
from Python as ``Custom(module=net)``) in the :class:`~gnnscale.models.base.GNN` interface the
strategies call; the contract it must follow is :mod:`gnnscale.models.contract`'s.

A layer-wise module runs one conv at a time like a built-in model: layer ``i`` is
``convs[i]((x, x[:n_dst]), edge_index, size)`` (plus ``edge_attr=`` the block's edge features
for a conv that reads them), then (but after the last conv)
``between(i, h, x[:n_dst])`` and ``model.dropout``, keyed by (seed,
epoch, layer, vertex id) where a strategy keys dropout, so a replicated vertex's recomputation
equals its owner's. It is never split into aggregate and update (vertex-cuts and cached
aggregates refuse it); every edge-cut path runs it whole, as GAT.

A whole-graph-only module runs on each sampled mini-batch as PyG's loaders feed a model: the
union of the sample's blocks as one ``edge_index`` over the sample's vertices, targets first,
and the first ``num_targets`` output rows are the batch's; evaluation runs it once on the whole
graph.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from gnnscale.models.base import GNN
from gnnscale.models.contract import Contract, build, describe
from gnnscale.models.schemas import CustomModelConfig
from gnnscale.sampling.base import Block


def sample_edges(blocks: list[Block]) -> torch.Tensor:
    """The union of the blocks' edges as one ``edge_index`` over the sample's local ids (block
    ``l``'s sources are the first ``n_src`` of them), each edge once, sorted by destination
    then source."""
    n = blocks[0].num_src
    ei = torch.cat([b.edge_index for b in blocks], dim=1).to(torch.int64)
    keys = torch.unique(ei[1] * n + ei[0])
    return torch.stack([keys % n, torch.div(keys, n, rounding_mode="floor")])


class Custom(GNN):
    """A user's module behind the GNN interface (see the module docstring)."""

    schema = CustomModelConfig

    def __init__(self, in_channels: int | None = None, out_channels: int | None = None,
                 target: str = "", kwargs: dict[str, Any] | None = None,
                 num_layers: int | None = None, dropout: float = 0.0,
                 input_dropout: float = 0.0, module: nn.Module | None = None) -> None:
        nn.Module.__init__(self)
        if module is None:
            if in_channels is None or out_channels is None:
                raise ValueError("Custom needs in_channels and out_channels to build "
                                 "model.target (or a built module=)")
            module = build(target, in_channels, out_channels, kwargs)
        self.net = module
        self.target = target or f"{type(module).__module__}.{type(module).__qualname__}"
        self.kwargs = dict(kwargs or {})
        dim = self.kwargs.get("edge_dim")
        self.contract: Contract = describe(module, in_channels,
                                           dim if isinstance(dim, int) else None)
        c = self.contract
        layers = c.num_layers if c.layer_wise else num_layers
        if layers is None:
            raise ValueError(f"{c.name} is whole-graph-only ({c.why_not_layer_wise}): give "
                             "num_layers, the hops its forward reads")
        if c.layer_wise and num_layers not in (None, c.num_layers):
            raise ValueError(f"num_layers={num_layers} but {c.name} has {c.num_layers} convs")
        if c.traced and dropout > 0:
            raise ValueError(f"model.dropout={dropout} runs after between() of the explicit "
                             f"form; {c.name} is traced and runs its own dropout calls (keyed "
                             "by vertex id): set model.dropout=0")
        self.num_layers, self.dropout, self.input_dropout = int(layers), dropout, input_dropout
        self.reorder_update, self.norm, self.residual, self.act = "false", "none", False, F.relu
        #: gnnscale's own norms: none (the module's between() holds its own)
        self.norms = nn.ModuleList(nn.Identity() for _ in range(max(self.num_layers - 1, 0)))
        self.dropout_key: tuple[int, int] | None = None
        self.spec().check()

    # ---- what the model can do: its schema, with the wrapped module's contract ----------
    def options(self) -> dict[str, Any]:
        """The options its schema reads."""
        return {"target": self.target, "kwargs": self.kwargs, "num_layers": self.num_layers,
                "dropout": self.dropout, "input_dropout": self.input_dropout}

    def spec(self) -> CustomModelConfig:
        """Its schema, answering from the wrapped module (no probe)."""
        spec = CustomModelConfig(**self.options())
        spec.__dict__["_contract"] = self.contract
        return spec

    @property
    def layer_wise(self) -> bool:
        """Whether the module runs one conv at a time (else whole-graph-only)."""
        return self.contract.layer_wise

    @property
    def convs(self) -> nn.ModuleList:
        """The module's convs (a layer-wise module; traced: each stage's first call)."""
        self._require_layers()
        if self.contract.traced:
            return nn.ModuleList(self.net.get_submodule(s[0].node.target)
                                 for s in self.contract.staged.convs)
        return self.net.convs

    def _require_layers(self) -> None:
        if not self.contract.layer_wise:
            raise ValueError(f"{self.contract.name} is whole-graph-only "
                             f"({self.contract.why_not_layer_wise}): it runs whole on a sampled "
                             "subgraph (strategy=data or factored), not one layer at a time")

    def make_conv(self, layer: int, in_dim: int, out_dim: int) -> nn.Module:
        """Never called: the module built its own convs."""
        raise NotImplementedError("a custom model's convs are its own")

    # ---- layer by layer ----------------------------------------------------------------------
    def conv(self, layer: int, x: torch.Tensor, block: Block) -> torch.Tensor:
        """The module's conv ``layer`` on the block, in PyG's bipartite form."""
        self._require_layers()
        if block.edge_weight is not None:
            raise ValueError(self.spec().why_not_weighted())
        conv = self.net.convs[layer]
        kw = {"size": block.size} if self.contract.takes_size[layer] else {}
        if self.contract.reads_edges[layer]:
            kw["edge_attr"] = self.edge_attr(block)
        return conv((x, x[: block.num_dst]), block.edge_index, **kw)

    @property
    def reads_edge_features(self) -> bool:
        """Whether some conv of the module reads edge features (the contract says)."""
        return any(self.contract.reads_edges)

    def layer(self, i: int, x: torch.Tensor, block: Block,
              ids: torch.Tensor | None = None) -> torch.Tensor:
        """Conv ``i``, then (but after the last) ``between`` and keyed dropout."""
        if ids is None and block.src_ids is not None:
            ids = block.src_ids[: block.num_dst]
        if i == 0:
            x = self.inputs(x, block.src_ids)
        if self.contract.traced:  # the module's own forward, stage i
            if block.edge_weight is not None:
                raise ValueError(self.spec().why_not_weighted())
            return self.contract.staged.layer(self, i, x, block)
        return self.post(i, self.conv(i, x, block), ids, x[: block.num_dst])

    def post(self, i: int, h: torch.Tensor, ids: torch.Tensor | None = None,
             x_dst: torch.Tensor | None = None) -> torch.Tensor:
        """After conv ``i`` (but the last): the module's ``between(i, h, x_dst)``, then
        ``model.dropout`` keyed by ``ids``."""
        if i == self.num_layers - 1:
            return h
        return self._drop(self.net.between(i, h, x_dst), self.dropout, i, ids)

    def bind_graph(self, graph: Any) -> None:
        """Keep the graph's in-degrees: a traced ``GCNConv`` normalises by them (as PyG's
        ``gcn_norm`` on the whole graph), so every part of a layer gets one process's
        weights."""
        if self.contract.traced:
            self.in_degree = graph.in_degree().float()

    in_degree: torch.Tensor | None = None

    def gcn_weights(self, block: Block, normalize: bool,
                    loops: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        """A ``GCNConv``'s edges on ``block`` (the destinations' self loops after the block's
        edges when ``loops``) and, when it normalises, ``1 / sqrt(deg(u) deg(v))`` per edge
        with the graph's in-degrees (plus one for the loop): PyG's ``gcn_norm`` of the whole
        graph."""
        ei = block.edge_index.to(torch.int64)
        if loops:
            ar = torch.arange(block.num_dst, device=ei.device)
            ei = torch.cat([ei, torch.stack([ar, ar])], 1)
        if not normalize:
            return ei, None
        if self.in_degree is not None and block.src_ids is not None:
            deg = self.in_degree.to(ei.device)[block.src_ids.to(ei.device)]
        elif block.num_src == block.num_dst:  # a whole graph: its own degrees
            deg = torch.bincount(block.edge_index[1], minlength=block.num_src).float()
        else:
            raise ValueError(f"{self.contract.name}'s GCNConv normalises by the graph's "
                             "degrees: call model.bind_graph(graph) first")
        s = (deg + float(loops)).rsqrt()
        s = torch.where(torch.isinf(s), torch.zeros_like(s), s)
        return ei, s[ei[0]] * s[ei[1]]

    def widths(self, in_dim: int) -> list[int]:
        """The input width, then each conv's output width."""
        self._require_layers()
        return [int(in_dim), *self.contract.widths[1:]]

    # ---- whole models --------------------------------------------------------------------------
    def forward(self, x: torch.Tensor, blocks: list[Block] | torch.Tensor,
                edge_attr: torch.Tensor | None = None) -> torch.Tensor:
        """Layer by layer on the blocks (layer-wise), or the module's forward on the union of
        the blocks (whole-graph-only): the rows of the last block's destinations. Called as a
        PyG model, ``model(x, edge_index[, edge_attr])``: :meth:`whole_graph`."""
        if isinstance(blocks, torch.Tensor):
            return self.whole_graph(x, blocks, edge_attr=edge_attr)
        if self.contract.layer_wise:
            return super().forward(x, blocks)
        x = self.inputs(x, blocks[0].src_ids)
        return self.net(x, sample_edges(blocks))[: blocks[-1].num_dst]

    def whole_graph(self, x: torch.Tensor, edge_index: torch.Tensor,
                    ids: torch.Tensor | None = None,
                    edge_attr: torch.Tensor | None = None) -> torch.Tensor:
        """Every vertex's output from the whole graph's ``edge_index`` (row ``v`` is vertex
        ``v``): the module's forward, or each layer on the whole graph."""
        if not self.contract.layer_wise:
            extra = () if edge_attr is None else (edge_attr,)
            return self.net(self.inputs(x, ids), edge_index, *extra)
        return super().whole_graph(x, edge_index, ids, edge_attr)
