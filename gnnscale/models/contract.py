"""The contract a user's own model follows (``model=custom``), read from the module itself.

A **layer-wise** model, the form every strategy runs, is an ``nn.Module`` whose ``__init__``
takes ``in_channels`` and ``out_channels`` keywords (plus its own, ``model.kwargs``) and that
holds

- ``convs``: an ``nn.ModuleList`` of PyG ``MessagePassing`` convs, one per layer, each called
  as ``conv((x_src, x_dst), edge_index, size=(n_src, n_dst))`` on a bipartite block whose
  destinations are the first ``n_dst`` sources (PyG's own bipartite form; ``size`` only where
  the conv's ``forward`` takes it: attention convs such as ``GATv2Conv`` do not, and add their
  self loops to the first ``n_dst`` sources, the destinations); a conv that reads edge features
  (:func:`reads_edges`: its forward takes ``edge_attr`` and it has an ``edge_dim``, or its
  messages need them, as GINEConv's) is also given ``edge_attr=`` the block's edge feature rows
  (``model.kwargs.edge_dim=auto`` passes the dataset's edge feature width to ``__init__``);
- ``between(i, h, x)``: what runs after conv ``i`` of every layer but the last, given its
  output rows ``h`` and the layer's input rows ``x`` of the same vertices (for a residual); it
  must be vertex-wise (each output row reads only the same row of ``h`` and ``x``: a norm over
  a row's channels, an activation, a residual, a linear) and keep the width. Dropout there is
  gnnscale's (``model.dropout``, keyed by vertex id), not the module's own. (Without
  ``between``, what the module's ``forward`` runs between its convs is unknown: it is
  whole-graph-only, even with ``convs``, as PyG's own ``BasicGNN`` models are.)

Any other module with ``forward(x, edge_index)`` is **whole-graph-only**: the strategies that
run a model on each rank's sampled subgraph (``data``, ``factored``) run it on the union of
the sample's blocks as one ``edge_index``, targets first (as PyG's ``NeighborLoader`` feeds a
model), and the others refuse it in one line. :func:`describe` reads which form a module has
and what keeps it from running layer by layer; :func:`probe` builds the ``model.target`` class
once (cached) for the launcher's checks.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gnnscale.errors import ConfigError

#: Widths the launcher's probe builds a module with (its checks need no dataset); a module
#: given ``edge_dim=auto`` in its kwargs is probed with ``PROBE_EDGE``.
PROBE_IN, PROBE_OUT, PROBE_EDGE = 8, 3, 4
#: The in-degree histogram a module given ``deg=auto`` (PyG's ``PNA``) is probed with.
PROBE_DEG = (0, 3, 4, 2, 1)


@dataclass
class Contract:
    """What a user's module offers the strategies."""

    name: str  #: the class's name, for messages
    layer_wise: bool
    why_not_layer_wise: str | None  #: None when layer-wise
    num_layers: int  #: convs (0 for a whole-graph-only module)
    widths: list[int]  #: row widths of layers 0..L (layer-wise), else []
    batch_norm: bool  #: holds a norm over the rows a forward holds
    has_between: bool
    why_not_layer_by_layer: str | None  #: None when split/fullgraph/offload can run it
    takes_size: tuple[bool, ...] = ()  #: per conv: whether its forward takes ``size=``
    #: per conv: whether it reads edge features (given ``edge_attr=`` the block's rows)
    reads_edges: tuple[bool, ...] = ()
    #: the module's forward traced into stages (:mod:`gnnscale.models.trace`), None for the
    #: explicit form (``convs`` + ``between``) and for a whole-graph-only module
    staged: Any = field(default=None, repr=False, compare=False)

    @property
    def traced(self) -> bool:
        """Whether the strategies run the module's own forward cut into stages."""
        return self.staged is not None


def _qualname(obj: Any) -> str:
    cls = obj if isinstance(obj, type) else type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def _row_statistics(module: Any) -> str | None:
    """The name of a submodule that normalises over the rows a forward holds, if any."""
    from torch import nn

    try:
        from torch_geometric.nn import norm as pyg_norm
    except ImportError:  # pragma: no cover - PyG is a dependency
        pyg_norm = None
    for name, sub in module.named_modules():
        if isinstance(sub, (nn.modules.batchnorm._BatchNorm,
                            nn.modules.instancenorm._InstanceNorm)):
            return name or type(sub).__name__
        if pyg_norm is not None and type(sub).__module__.startswith(pyg_norm.__name__):
            rowwise = type(sub).__name__ in ("LayerNorm", "HeteroLayerNorm", "MessageNorm") \
                and getattr(sub, "mode", "node") == "node"
            if not rowwise:
                return name or type(sub).__name__
    return None


def _torch_dropout(module: Any) -> str | None:
    """A submodule or conv that drops with torch's generator (``nn.Dropout`` with p > 0, a
    conv's attention ``dropout``), if any."""
    from torch import nn
    from torch_geometric.nn import MessagePassing

    for name, sub in module.named_modules():
        if isinstance(sub, nn.modules.dropout._DropoutNd) and sub.p > 0:
            return f"{name} ({type(sub).__name__}(p={sub.p}))"
        p = getattr(sub, "dropout", 0.0)
        if isinstance(sub, MessagePassing) and isinstance(p, float) and p > 0:
            return f"{name} ({type(sub).__name__}(dropout={p}))"
    return None


def conv_width(conv: Any) -> int:
    """The width of a conv's output rows (``out_channels``, times ``heads`` when they are
    concatenated; GIN-like convs: the last Linear of their ``nn``, else of the conv)."""
    from torch import nn

    out = getattr(conv, "out_channels", None)
    if out is None:  # its MLP's (GINEConv's edge projection is not the output)
        mlp = conv.nn if isinstance(getattr(conv, "nn", None), nn.Module) else conv
        linears = [m for m in mlp.modules() if isinstance(m, nn.Linear)]
        if not linears:
            raise ConfigError(f"cannot tell the output width of {type(conv).__name__} (no "
                              "out_channels, no Linear): give it an out_channels attribute")
        return int(linears[-1].out_features)
    if getattr(conv, "concat", False):
        out *= int(getattr(conv, "heads", 1))
    return int(out)


def describe(module: Any, in_channels: int | None = None,
             edge_dim: int | None = None) -> Contract:
    """Read the contract of a built module (``in_channels``: its input width, for
    :attr:`Contract.widths`; default the first conv's ``in_channels``; ``edge_dim``: the
    width of the edge features its forward may read). The explicit form (``convs`` and
    ``between``) is read as it is; any other module is traced into stages
    (:func:`gnnscale.models.trace.stage`), or, where that is refused, whole-graph-only."""
    from torch import nn

    name = type(module).__name__
    if not isinstance(module, nn.Module):
        raise ConfigError(f"{_qualname(module)} is not a torch.nn.Module")
    why = _why_not_explicit(module)
    if why is None:
        return _explicit(module, in_channels)
    if not _takes_edge_index(module):
        raise ConfigError(f"{name} is neither layer-wise ({why}) nor a model with "
                          "forward(x, edge_index): see docs/bring-your-own-model.md")
    from gnnscale.models.trace import NotStaged, stage

    start = in_channels if in_channels is not None else _first_in(module)
    try:
        staged = stage(module, start, edge_dim if edge_dim is not None else _edge_dim(module))
    except NotStaged as err:
        return _whole_graph_only(module, str(err))
    out = _prod(staged.shapes[staged.output])
    batch = _row_statistics(module)
    no_layers = _not_layer_by_layer(name, batch, _conv_dropout(module), " inside a conv",
                                    "set it to 0")
    return Contract(name=name, layer_wise=True, why_not_layer_wise=None,
                    num_layers=staged.num_layers, widths=staged.widths(start, out),
                    batch_norm=batch is not None, has_between=False,
                    why_not_layer_by_layer=no_layers,
                    takes_size=tuple(False for _ in range(staged.num_layers)),
                    reads_edges=staged.reads_edges(), staged=staged)


def _prod(shape: tuple[int, ...]) -> int:
    out = 1
    for s in shape:
        out *= int(s)
    return out


def _first_in(module: Any) -> int:
    """The input width of the module's first conv (a probe width when unknown)."""
    from torch_geometric.nn import MessagePassing

    for sub in module.modules():
        if isinstance(sub, MessagePassing):
            width = getattr(sub, "in_channels", None)
            width = width[0] if isinstance(width, (tuple, list)) else width
            if isinstance(width, int) and width > 0:
                return width
    return PROBE_IN


def _edge_dim(module: Any) -> int | None:
    """The ``edge_dim`` one of the module's convs was built with, if any."""
    for sub in module.modules():
        dim = getattr(sub, "edge_dim", None)
        if isinstance(dim, int) and not isinstance(dim, bool):
            return dim
    return None


def _why_not_explicit(module: Any) -> str | None:
    """None when the module has the explicit form (``convs`` of PyG convs and
    ``between(i, h, x)``), else what it lacks."""
    from torch import nn
    from torch_geometric.nn import MessagePassing

    name = type(module).__name__
    convs = getattr(module, "convs", None)
    if not isinstance(convs, nn.ModuleList) or len(convs) == 0:
        return f"{name} has no convs ModuleList"
    bad = [i for i, c in enumerate(convs) if not isinstance(c, MessagePassing)]
    if bad:
        return (f"{name}.convs[{bad[0]}] is a {type(convs[bad[0]]).__name__}, not a PyG "
                "MessagePassing conv")
    if not callable(getattr(module, "between", None)):
        return f"{name} has convs but no between(i, h, x)"
    params = [p for p in inspect.signature(module.between).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(params) != 3:
        return f"{name}.between must take (i, h, x), it takes {len(params)} arguments"
    return None


def _whole_graph_only(module: Any, why: str) -> Contract:
    name = type(module).__name__
    return Contract(name=name, layer_wise=False, why_not_layer_wise=why, num_layers=0,
                    widths=[], batch_norm=_row_statistics(module) is not None,
                    has_between=callable(getattr(module, "between", None)),
                    why_not_layer_by_layer=f"{name} is whole-graph-only ({why}; "
                    "docs/bring-your-own-model.md)")


def _explicit(module: Any, in_channels: int | None) -> Contract:
    """The contract of a module in the explicit form."""
    name, convs = type(module).__name__, module.convs
    batch = _row_statistics(module)
    first = getattr(convs[0], "in_channels", None)
    start = in_channels if in_channels is not None else first
    widths = [int(start) if isinstance(start, int) else -1, *(conv_width(c) for c in convs)]
    no_layers = _not_layer_by_layer(name, batch, _torch_dropout(module), "",
                                    "set it to 0 and use model.dropout (keyed by vertex id)")
    sized = tuple("size" in inspect.signature(c.forward).parameters for c in convs)
    edges = tuple(reads_edges(c) for c in convs)
    return Contract(name=name, layer_wise=True, why_not_layer_wise=None,
                    num_layers=len(convs), widths=widths, batch_norm=batch is not None,
                    has_between=True, why_not_layer_by_layer=no_layers, takes_size=sized,
                    reads_edges=edges)


def _not_layer_by_layer(name: str, batch: str | None, drop: str | None, where: str,
                        remedy: str) -> str | None:
    """Why model ``name`` cannot run a layer at a time on parts of it (its batch statistics
    ``batch``, else its unkeyed dropout ``drop``), or None when it can."""
    if batch is not None:
        return (f"{name}'s {batch} normalises over the rows a forward holds, which differ "
                "between the parts of a layer: use a row-wise norm (LayerNorm)")
    if drop is None:
        return None
    return (f"{name}'s {drop} drops with torch's generator{where}, which ranks computing the "
            f"same vertex cannot agree on: {remedy}")


def _conv_dropout(module: Any) -> str | None:
    """A conv of the module that drops with torch's generator (attention dropout, or an
    ``nn.Dropout`` inside its MLP)."""
    from torch_geometric.nn import MessagePassing

    for name, sub in module.named_modules():
        if isinstance(sub, MessagePassing):
            inner = _torch_dropout(sub)
            if inner is not None:
                return name + (inner if inner.startswith(" ") else "." + inner)
    return None


def reads_edges(conv: Any) -> bool:
    """Whether a conv reads edge features when it is given them
    (:func:`gnnscale.models.trace.reads_edges`)."""
    from gnnscale.models.trace import reads_edges as reads

    return reads(conv)


def _takes_edge_index(module: Any) -> bool:
    """Whether ``module.forward`` takes two positional arguments (x, edge_index)."""
    try:
        params = list(inspect.signature(module.forward).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params)


def locate(target: str) -> Any:
    """The object ``target`` names, its module imported (torch only if that module imports
    it); one :class:`ConfigError` line, with the import's own cause, when it does not."""
    import logging

    from hydra.utils import get_object

    hydra_log = logging.getLogger("hydra.utils")  # it logs the error again, over 3 lines
    was = hydra_log.disabled
    hydra_log.disabled = True
    try:
        return get_object(target)
    except Exception as err:  # noqa: BLE001 - import errors of every kind
        while err.__cause__ is not None:  # Hydra's "Error loading ..." wraps the cause
            err = err.__cause__  # ("No module named 'mypkg'")
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ConfigError(f"model.target={target} does not import: {first} (give the dotted "
                          "path of your nn.Module class, its package on PYTHONPATH)") from None
    finally:
        hydra_log.disabled = was


def build(target: str, in_channels: int, out_channels: int,
          kwargs: dict[str, Any] | None = None) -> Any:
    """Import ``target`` (a dotted path to an ``nn.Module`` class) and build it with
    ``in_channels``, ``out_channels`` and ``kwargs``; a one-line :class:`ConfigError` says what
    is wrong (not importable, not a module class, arguments it does not take)."""
    cls = locate(target)
    from torch import nn  # after the target: one that does not import is told first

    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise ConfigError(f"model.target={target} is not an nn.Module class")
    kwargs = plain_kwargs(kwargs)
    if kwargs.get("deg") == "auto":
        raise ConfigError("model.kwargs.deg=auto is filled from the training graph when the "
                          "model is built for a run (give a histogram to build it alone)")
    if isinstance(kwargs.get("deg"), Sequence) and not isinstance(kwargs["deg"], str):
        import torch  # a degree histogram (PyG's PNA takes it as a tensor)

        kwargs["deg"] = torch.as_tensor([int(d) for d in kwargs["deg"]], dtype=torch.long)
    taken = {"in_channels", "out_channels"} & set(kwargs)
    if taken:
        raise ConfigError(f"model.kwargs.{sorted(taken)[0]}: the dataset and task give it; "
                          "leave it out of model.kwargs")
    try:
        inspect.signature(cls).bind(in_channels=in_channels, out_channels=out_channels,
                                    **kwargs)
        return cls(in_channels=in_channels, out_channels=out_channels, **kwargs)
    except TypeError as err:  # arguments it does not take (its own or, via **kwargs, a conv's)
        hint = ("model.kwargs.deg=auto gives the training graph's in-degree histogram; " if
                "'deg'" in str(err) else "")
        shown = {k: ("<histogram>" if k == "deg" else v) for k, v in kwargs.items()}
        raise ConfigError(f"model.target={target} cannot be built with in_channels, "
                          f"out_channels and model.kwargs={shown}: {err} ({hint}its __init__ "
                          "must take in_channels and out_channels keywords; its other "
                          "arguments go in model.kwargs)") from None


def plain_kwargs(kwargs: Any) -> dict[str, Any]:
    """``kwargs`` as plain Python values (a config's lists and dicts as ``list`` and ``dict``:
    PyG checks ``isinstance(aggregators, list)``)."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    out = {}
    for key, value in dict(kwargs or {}).items():
        if isinstance(value, (DictConfig, ListConfig)):
            value = OmegaConf.to_container(value, resolve=True)
        out[str(key)] = value
    return out


@functools.lru_cache(maxsize=16)
def _probe(target: str, kwargs_json: str) -> Contract:
    locate(target)  # a target that does not import is told before torch is imported
    import torch

    kwargs = json.loads(kwargs_json)
    if kwargs.get("edge_dim") == "auto":  # the dataset's width, unknown to the probe
        kwargs["edge_dim"] = PROBE_EDGE
    if kwargs.get("deg") == "auto":  # the training graph's histogram, likewise
        kwargs["deg"] = list(PROBE_DEG)
    state = torch.random.get_rng_state()  # building draws initial weights: leave no trace
    try:
        module = build(target, PROBE_IN, PROBE_OUT, kwargs)
    finally:
        torch.random.set_rng_state(state)
    dim = kwargs.get("edge_dim")
    return describe(module, PROBE_IN, dim if isinstance(dim, int) else None)


def degree_histogram(graph: Any) -> list[int]:
    """The graph's in-degree histogram (entry ``d``: how many vertices have ``d`` in-edges),
    as PyG's PNA documentation computes ``deg`` from its training graph
    (``torch.bincount(degree(edge_index[1], num_nodes))``): what ``model.kwargs.deg=auto``
    gives the module."""
    import torch

    return [int(c) for c in torch.bincount(graph.in_degree().to(torch.long)).tolist()]


def probe(target: str, kwargs: dict[str, Any]) -> Contract:
    """The contract of ``target`` built with probe widths and ``kwargs`` (once per both)."""
    return _probe(target, json.dumps(kwargs, sort_keys=True, default=str))


def why_not_per_edge_type(module: Any, staged: Any) -> str | None:
    """Why a conv of ``module`` cannot be one bipartite conv per edge type (a GCNConv or APPNP,
    normalised by a homogeneous graph's degrees; a conv taking one tensor of rows; one reading
    edge features), or None."""
    from torch_geometric.nn import APPNP, GCNConv

    for calls in staged.convs:
        for c in calls:
            conv = module.get_submodule(str(c.node.target))
            if isinstance(conv, (GCNConv, APPNP)) or not c.pair or c.reads_edges:
                return (f"model=to_hetero runs {c.node.target} ({type(conv).__name__}) as one "
                        "bipartite conv per edge type, which it cannot be (normalised by a "
                        "homogeneous graph's degrees, one tensor of rows, or edge features): "
                        "use SAGEConv, GraphConv, GINConv or GATConv(add_self_loops=False)")
    return None


def check_target(target: str, kwargs: dict[str, Any], hidden: int) -> str | None:
    """The launcher's check of ``model.target`` for ``model=to_hetero``
    (:mod:`gnnscale.models.to_hetero`): built with
    ``in_channels=hidden`` (leaving the random state as it was) and traced, why its convs
    cannot run per edge type, or None (:func:`why_not_per_edge_type`); once per arguments."""
    plain = plain_kwargs(kwargs)  # a config's lists as lists
    return _check_target(target, json.dumps(plain, sort_keys=True, default=str), hidden)


@functools.lru_cache(maxsize=16)
def _check_target(target: str, kwargs_json: str, hidden: int) -> str | None:
    import torch

    from gnnscale.models.trace import NotStaged, stage

    kwargs = json.loads(kwargs_json)
    if kwargs.get("edge_dim") == "auto":
        kwargs["edge_dim"] = PROBE_EDGE
    if kwargs.get("deg") == "auto":
        kwargs["deg"] = list(PROBE_DEG)
    state = torch.random.get_rng_state()
    try:
        module = build(target, hidden, PROBE_OUT, kwargs)
    finally:
        torch.random.set_rng_state(state)
    try:
        staged = stage(module, hidden)
    except NotStaged as err:
        return not_staged(module, err)
    return why_not_per_edge_type(module, staged)


def not_staged(module: Any, err: Exception) -> str:
    """Why ``model=to_hetero`` cannot run ``module`` (its forward cannot be staged), and what
    runs it."""
    name = type(module).__name__
    return (f"model=to_hetero runs {name} in stages, one conv per edge type, but {err}: a "
            "whole-graph-only model trains on homogeneous graphs only (model=custom, "
            "strategy=data or factored)")
