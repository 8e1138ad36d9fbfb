"""``model=to_hetero``: a user's homogeneous PyG model converted by PyG's ``to_hetero`` for a
typed graph, run in stages by every strategy.

The user's class (``model.target``, built with ``in_channels=model.hidden``) is traced into
stages as ``model=custom`` traces it (:mod:`gnnscale.models.trace`); at
:meth:`ToHetero.bind_graph` PyG's own ``to_hetero(module, metadata, aggr)`` converts it for the
graph's node and edge types: every module its forward calls is copied per node type, every
message-passing layer per edge type (PyG's parameters, initialisation and naming: state dicts
load into PyG's converted module). Layer 0 reads the typed input's ``hidden``-wide rows
(:class:`~gnnscale.models.typed_input.TypedInput`, shared with every typed model). Stage ``i``
runs on a sampled block through the shared typed adapter
(:class:`~gnnscale.models.hetero.TypedBlock`): the vertex-wise steps per node type with that
type's copies, each message-passing call per edge type ``(s, r, d)`` on (the rows of type
``s``, the destinations of type ``d``), combined over the edge types into each node type by
``model.aggr`` (``to_hetero``'s ``aggr``), the user's dropout keyed by vertex id; the rows a
stage ships hold every value still needed, as a traced model's do. So it equals the converted
module's own forward on the whole graph, and every strategy runs it as it runs any typed model.
Every node type must be the destination of some edge type (as ``to_hetero``, whose other types
get no output): build the graph with reverse edges.
"""

from __future__ import annotations

import warnings
from typing import Any, cast

import torch
from torch import fx, nn

from gnnscale.models.contract import build, describe, not_staged, why_not_per_edge_type
from gnnscale.models.hetero import HeteroGNN
from gnnscale.models.schemas import ToHeteroConfig
from gnnscale.models.trace import NotStaged, Staged, stage
from gnnscale.sampling.base import Block

#: how ``to_hetero`` combines the edge types' outputs into a node type
AGGRS = ("sum", "mean", "max", "min")


def _key(key: str | tuple[str, ...]) -> str:
    """PyG's ``key2str``: a node type as is, an edge type joined by ``__``."""
    return "__".join(key) if isinstance(key, tuple) else key


class _TypeView:
    """The converted module as one node type sees it: a submodule ``to_hetero`` copied per
    type is that type's copy, any other the user's own (parameterless: checked at binding)."""

    def __init__(self, owner: ToHetero, key: str) -> None:
        self.owner, self.key = owner, key

    @property
    def training(self) -> bool:
        """Whether the model trains."""
        return self.owner.training

    def get_submodule(self, target: str) -> nn.Module:
        """The type's copy of ``target`` (else the user's own module)."""
        return self.owner.typed_module(str(target), self.key)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.owner.homogeneous, name)


class ToHetero(HeteroGNN):
    """A homogeneous user model, converted by PyG's ``to_hetero`` (see the module docstring)."""

    schema = cast(Any, ToHeteroConfig)

    def __init__(self, in_channels: int, out_channels: int, target: str = "",
                 kwargs: dict[str, Any] | None = None, hidden: int = 64, aggr: str = "sum",
                 input_dropout: float = 0.0, input_features: str = "all",
                 num_layers: int | None = None, dropout: float = 0.0,
                 module: nn.Module | None = None) -> None:
        if aggr not in AGGRS:
            raise ValueError(f"model.aggr must be one of {AGGRS}, got {aggr!r}")
        if dropout:
            raise ValueError("model.dropout: a model converted by to_hetero runs its own "
                             "dropout calls (keyed by vertex id): set model.dropout=0")
        if module is None:
            module = build(target, hidden, out_channels, kwargs)
        name = type(module).__name__
        try:
            staged = stage(module, hidden)
        except NotStaged as err:
            raise ValueError(not_staged(module, err)) from None
        why = why_not_per_edge_type(module, staged)
        if why is not None:
            raise ValueError(why)
        if num_layers not in (None, staged.num_layers):
            raise ValueError(f"num_layers={num_layers} but {name} has {staged.num_layers} "
                             "message-passing stages")
        super().__init__(in_channels, out_channels, hidden=hidden,
                         num_layers=staged.num_layers, dropout=0.0,
                         input_dropout=input_dropout)
        self.target = target or f"{type(module).__module__}.{type(module).__qualname__}"
        self.kwargs, self.aggr, self.input_features = dict(kwargs or {}), aggr, input_features
        self.staged: Staged = staged
        #: the user's module (not a submodule: its parameters are never trained; to_hetero's
        #: per-type copies in :attr:`hetero` are)
        self.__dict__["_homogeneous"] = module
        self.hetero: nn.Module | None = None
        self.contract = describe(module, hidden)

    def spec(self) -> Any:
        """Its schema, answering from the user's module (no probe)."""
        spec = ToHeteroConfig(**self.options())
        spec.__dict__["_contract"] = self.contract
        return spec

    @property
    def homogeneous(self) -> nn.Module:
        """The user's module as built (before ``to_hetero``)."""
        return self.__dict__["_homogeneous"]

    def options(self) -> dict[str, Any]:
        """The options its schema reads."""
        return {"target": self.target, "kwargs": self.kwargs, "hidden": self.hidden,
                "aggr": self.aggr, "input_dropout": self.input_dropout,
                "input_features": self.input_features, "num_layers": self.num_layers}

    def typed_conv(self, layer: int, in_dim: int, out_dim: int) -> nn.Module:
        """A placeholder: the convs are ``to_hetero``'s copies in :attr:`hetero`."""
        return nn.Identity()

    def check_types(self, graph: Any) -> None:
        """Every node type the destination of some edge type (``to_hetero`` updates no
        other)."""
        dsts = {et[2] for et in graph.edge_types}
        lost = [t for t in graph.node_types if t not in dsts]
        if lost:
            raise ValueError(f"model=to_hetero: node type(s) {lost} of {graph.name} are the "
                             "destination of no edge type, so to_hetero gives them no output: "
                             "build the graph with reverse edges")

    def bind_graph(self, graph: Any) -> None:
        """Bind as every typed model does (the typed input, the type offsets), then convert the
        user's module with PyG's ``to_hetero`` for the graph's node and edge types (once)."""
        super().bind_graph(graph)
        if self.hetero is not None:
            return
        from torch_geometric.nn import to_hetero

        metadata = (list(self.node_types), [tuple(et) for et in self.edge_types])
        try:
            with warnings.catch_warnings():  # its forward bakes F.dropout's training flag in;
                warnings.filterwarnings(  # gnnscale runs the stages, whose dropout follows it
                    "ignore", message=".*keyword argument 'training'")
                self.hetero = to_hetero(self.homogeneous, metadata, aggr=self.aggr)
        except Exception as err:  # noqa: BLE001 - PyG's conversion raises several kinds
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            raise ValueError(f"to_hetero cannot convert {type(self.homogeneous).__name__}: "
                             f"{first[:160]}") from None
        for node in self._module_nodes():
            self.typed_module(str(node.target), _key(self.node_types[0]))  # checked once

    def _module_nodes(self) -> list[fx.Node]:
        st = self.staged
        return [n for seg in st.segments for n in seg if n.op == "call_module"]

    def typed_module(self, target: str, key: str) -> nn.Module:
        """``to_hetero``'s copy of ``target`` for ``key`` (a node type, or an edge type joined
        by ``__``); a module it did not copy is the user's own, which must hold no
        parameters (one copy would serve every type)."""
        assert self.hetero is not None
        try:
            mod = self.hetero.get_submodule(target)
        except AttributeError:
            mod = None
        if isinstance(mod, nn.ModuleDict) and key in mod:
            return mod[key]
        own = self.homogeneous.get_submodule(target)
        if any(True for _ in own.parameters()):
            raise ValueError(f"to_hetero did not copy {target} ({type(own).__name__}) per "
                             "node type, and it holds parameters: gnnscale cannot give each "
                             "type its own")
        return own

    def widths(self, in_dim: int) -> list[int]:
        """The typed input's rows, each stage's shipped rows, the output."""
        return self.staged.widths(self.hidden, self.out_channels)

    def layer(self, i: int, x: torch.Tensor, block: Block,
              ids: torch.Tensor | None = None) -> torch.Tensor:
        """Stage ``i`` on ``block`` per node type and edge type (see the module docstring):
        ``x`` holds the block's source rows (layer 0: the encoded typed input); the result
        its destinations' rows, in block order."""
        if self.hetero is None:
            raise RuntimeError("model=to_hetero has no node or edge types yet: call "
                               "model.bind_graph(graph) first")
        if block.edge_weight is not None:
            raise ValueError(self.spec().why_not_weighted())
        if i == 0:
            x = self.inputs(x, block.src_ids)
        st, tb = self.staged, self.typed_block(block)
        src_ids = block.src_ids
        assert src_ids is not None  # TypedBlock needs them
        envs: dict[str, dict[fx.Node, Any]] = {}
        for t in self.node_types:
            rows = tb.rows[t]
            if i == 0:
                envs[t] = {st.x: x[rows]}
                st._run(cast(nn.Module, _TypeView(self, t)), st.segments[0], envs[t], src_ids[rows],
                        self._drop)
            else:
                envs[t] = st._unpack(x[rows], st.packs[i])
        outs: dict[str, dict[fx.Node, Any]] = {t: {} for t in self.node_types}
        sizes = tb.sizes()
        for c in st.convs[i]:
            into: dict[str, list[torch.Tensor]] = {}
            for et in self.edge_types:
                s, _, d = et
                conv = self.typed_module(str(c.node.target), _key(et))
                kw = dict(c.kwargs)
                if c.takes_size:
                    kw["size"] = sizes[et]
                xd = envs[d][c.x][: tb.num_dst[d]]
                into.setdefault(d, []).append(conv((envs[s][c.x], xd), tb.edge_index[et], **kw))
            for d, hs in into.items():
                outs[d][c.node] = _combine(hs, self.aggr)
        last = i == self.num_layers - 1
        done: dict[str, torch.Tensor] = {}
        for t in self.node_types:
            n = tb.num_dst[t]
            for v in st.carries[i]:
                outs[t][v] = envs[t][v][:n]
            st._run(cast(nn.Module, _TypeView(self, t)), st.segments[i + 1], outs[t],
                    src_ids[tb.rows[t][:n]], self._drop)
            done[t] = outs[t][st.output] if last else st._pack(outs[t], st.packs[i + 1], n)
        width = self.out_channels if last else st.width(st.packs[i + 1])
        return tb.gather(done, width, x)

    def forward_hetero(self, x_dict: dict[str, torch.Tensor],
                       edge_index_dict: dict[tuple[str, str, str], torch.Tensor]
                       ) -> dict[str, torch.Tensor]:
        """PyG's converted module on per-type rows (``hidden`` wide) and edges: what a PyG
        user runs, and what :meth:`layer` equals on the whole graph."""
        assert self.hetero is not None
        return self.hetero(x_dict, edge_index_dict)


def _combine(hs: list[torch.Tensor], aggr: str) -> torch.Tensor:
    """The edge types' outputs into one node type, as ``to_hetero`` combines them."""
    if len(hs) == 1:
        return hs[0]
    stacked = torch.stack(hs)
    if aggr == "sum":
        return stacked.sum(0)
    if aggr == "mean":
        return stacked.mean(0)
    return stacked.max(0).values if aggr == "max" else stacked.min(0).values
