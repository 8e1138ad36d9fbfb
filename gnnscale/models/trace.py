"""A user's PyG model, unmodified, traced into the staged form every strategy runs.

:func:`stage` traces ``module.forward(x, edge_index[, edge_attr])`` with :mod:`torch.fx` (as
PyG's own ``to_hetero`` and ``torch_geometric.nn.fx`` do: every ``MessagePassing`` call a leaf)
and cuts the graph into stages: each message-passing call is in the stage of its depth (the
number of message-passing calls on the longest path from ``x`` to it), and everything else
runs *vertex-wise* between them, on the rows of the vertices the stage computes. A value that
a later stage reads (a JumpingKnowledge input, a skip or residual, a head's input) is carried
as rows beside the stage's output: the rows a strategy ships between layers are the
concatenation of every value still needed (:attr:`Staged.widths`).

The cut is checked on a small probe graph before anything runs: a vertex-wise step must give
each row from that row alone (run on a subset of the rows it must equal the subset of its
output), so a global pooling, a norm over the rows held, or any op that mixes rows outside
message passing is refused in one line that names the line of the user's forward. The user's
own dropout calls (``F.dropout``, ``nn.Dropout``) are kept and keyed by (seed, epoch, call,
vertex id) where a strategy keys dropout (:mod:`gnnscale.models.dropout`), so a replica's mask
equals its owner's.

The staged form is what :class:`~gnnscale.models.custom.Custom` runs one layer at a time
(:meth:`Staged.layer`): the explicit ``convs`` + ``between`` contract
(:mod:`gnnscale.models.contract`) stays the explicit form, and this produces it.
"""

from __future__ import annotations

import inspect
import operator
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import fx, nn

#: Rows of the probe graph the cut is checked on, and how many of them a subset keeps.
PROBE_ROWS, PROBE_SUBSET = 13, 7
#: The first keyed-dropout stream of a traced model's own dropout calls (one per call).
DROPOUT_STREAM = 2000

_DROPOUTS = {F.dropout, torch.dropout, torch.nn.functional.dropout}


class NotStaged(Exception):
    """Why a module cannot be staged (one line, naming the line of its forward)."""


def _pyg_mp() -> type:
    from torch_geometric.nn import MessagePassing

    return MessagePassing


class _Tracer(fx.Tracer):
    """torch.fx's tracer with PyG message-passing layers and JumpingKnowledge as leaves."""

    def __init__(self) -> None:
        super().__init__()
        self.record_stack_traces = False  # create_node records them, without torch's recorder

    def create_node(self, *args: Any, **kwargs: Any) -> fx.Node:
        """fx's node, with the frames from the user's ``forward`` down as its stack trace, taken
        by Python's own ``traceback`` (torch's recorder imports torch._dynamo, inductor and
        export to filter frames: seconds of a launch)."""
        node = super().create_node(*args, **kwargs)
        if not node.stack_trace:
            frames = traceback.extract_stack()
            first = next((i for i, f in enumerate(frames) if f.name == "forward"), None)
            if first is not None:
                node.stack_trace = "".join(traceback.format_list(frames[first:])).strip()
        return node

    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        from torch_geometric.nn import JumpingKnowledge

        if isinstance(m, (_pyg_mp(), JumpingKnowledge)):
            return True
        return super().is_leaf_module(m, qualname)


def _user_frame(frames: list[tuple[str, int, str]]) -> str:
    """``file:line `code``` of the outermost frame in the user's code (else the innermost)."""
    def ours(f: str) -> bool:
        return "/torch/" in f or "/gnnscale/models/trace" in f
    mine = [f for f in frames if not ours(f[0])]
    file, line, code = (mine[0] if mine else frames[-1]) if frames else ("?", 0, "")
    return f"{file.rsplit('/', 1)[-1]}:{line} `{code.strip()}`"


def _node_line(node: fx.Node) -> str:
    """Where in the user's forward a traced node comes from."""
    trace = node.stack_trace or ""
    frames, lines = [], trace.splitlines()
    for i, text in enumerate(lines):
        text = text.strip()
        if text.startswith("File "):
            try:
                file = text.split('"')[1]
                line = int(text.split("line ")[1].split(",")[0])
            except (IndexError, ValueError):
                continue
            code = lines[i + 1] if i + 1 < len(lines) else ""
            frames.append((file, line, code))
    return _user_frame(frames) if frames else f"the call {node.format_node()}"


def _error_line(err: BaseException) -> str:
    frames = [(f.filename, f.lineno or 0, f.line or "") for f in
              traceback.extract_tb(err.__traceback__)]
    return _user_frame(frames)


@dataclass
class _Conv:
    """One message-passing call of a stage."""

    node: fx.Node
    x: fx.Node  #: the row value it reads
    kwargs: dict[str, Any]  #: constant keyword arguments the forward passes (not None)
    takes_size: bool
    reads_edges: bool
    pair: bool = True  #: it takes PyG's bipartite ``(x_src, x_dst)``; else one tensor of rows


@dataclass
class Staged:
    """A traced module cut into stages (see the module docstring); holds no parameters (it
    runs against the module it was traced from, passed as ``root``)."""

    graph: fx.Graph
    x: fx.Node
    edge_index: fx.Node
    edge_attr: fx.Node | None
    convs: list[list[_Conv]]  #: per stage, its message-passing calls
    segments: list[list[fx.Node]]  #: vertex-wise nodes run after stage j-1 (0: before stage 0)
    packs: list[list[fx.Node]]  #: the row values boundary j carries (0: the input x)
    carries: list[list[fx.Node]]  #: per stage, the values its output carries besides the convs
    shapes: dict[fx.Node, tuple[int, ...]]  #: per carried value, its row shape (after dim 0)
    dtypes: dict[fx.Node, torch.dtype]
    output: fx.Node
    dropouts: dict[fx.Node, int] = field(default_factory=dict)  #: node -> keyed stream

    @property
    def num_layers(self) -> int:
        """The number of stages (message-passing hops)."""
        return len(self.convs)

    def width(self, values: list[fx.Node]) -> int:
        """The width of the rows that pack ``values`` side by side."""
        return sum(_prod(self.shapes[v]) for v in values)

    def widths(self, in_dim: int, out_dim: int) -> list[int]:
        """The row widths of layers 0..L: the input, each boundary's pack, the output."""
        return [in_dim, *(self.width(p) for p in self.packs[1:]), out_dim]

    def reads_edges(self) -> tuple[bool, ...]:
        """Per stage, whether one of its calls is given the edge features."""
        return tuple(any(c.reads_edges for c in s) for s in self.convs)

    # ---- running -----------------------------------------------------------------------------
    def _pack(self, env: dict[fx.Node, Any], values: list[fx.Node], n: int) -> torch.Tensor:
        if not values:
            return torch.empty((n, 0))
        dtype = next((env[v].dtype for v in values if env[v].is_floating_point()),
                     torch.float32)
        return torch.cat([env[v].reshape(n, _prod(self.shapes[v])).to(dtype) for v in values],
                         1)

    def _unpack(self, rows: torch.Tensor, values: list[fx.Node]) -> dict[fx.Node, Any]:
        env, at = {}, 0
        for v in values:
            w = _prod(self.shapes[v])
            env[v] = rows[:, at : at + w].reshape(rows.shape[0], *self.shapes[v]) \
                .to(self.dtypes[v])
            at += w
        return env

    def layer(self, model: Any, i: int, x: torch.Tensor, block: Any) -> torch.Tensor:
        """Stage ``i`` on ``block``: ``x`` holds the rows of boundary ``i`` of its sources
        (layer 0: the input features); returns boundary ``i + 1``'s rows of its destinations
        (the last stage: the module's output rows). ``model`` is the
        :class:`~gnnscale.models.custom.Custom` that wraps the traced module (its ``net``):
        its ``_drop(h, p, stream, ids)`` is the keyed dropout, ``edge_attr(block)`` the
        block's edge features, ``gcn_weights(block)`` a GCNConv's normalised edges."""
        root, drop = model.net, model._drop
        n_dst = block.num_dst
        src_ids = block.src_ids
        dst_ids = None if src_ids is None else src_ids[:n_dst]
        if i == 0:
            env: dict[fx.Node, Any] = {self.x: x}
            self._run(root, self.segments[0], env, src_ids, drop)
        else:
            env = self._unpack(x, self.packs[i])
        out: dict[fx.Node, Any] = {}
        for c in self.convs[i]:
            v = env[c.x]
            kw = dict(c.kwargs)
            if c.takes_size:
                kw["size"] = block.size
            if c.reads_edges:
                kw["edge_attr"] = model.edge_attr(block)
            conv = root.get_submodule(c.node.target)
            if c.node.kwargs.get(_HOP):
                out[c.node] = _propagate(conv, v, block, model.gcn_weights)
            elif _is_gcn(conv):
                out[c.node] = _gcn(conv, v, block, model.gcn_weights)
            elif not c.pair:  # every source's rows; the destinations are the first n_dst
                kw.pop("size", None)
                out[c.node] = conv(v, block.edge_index, **kw)[:n_dst]
            else:
                out[c.node] = conv((v, v[:n_dst]), block.edge_index, **kw)
        for v in self.carries[i]:
            out[v] = env[v][:n_dst]
        self._run(root, self.segments[i + 1], out, dst_ids, drop)
        if i == self.num_layers - 1:
            return out[self.output]
        return self._pack(out, self.packs[i + 1], n_dst)

    def _run(self, root: nn.Module, nodes: list[fx.Node], env: dict[fx.Node, Any],
             ids: torch.Tensor | None, drop: Callable) -> None:
        for node in nodes:
            stream = self.dropouts.get(node)
            if stream is not None:
                h, p, on = _dropout_args(root, node, env)
                if on and root.training and p > 0:
                    flat = h.reshape(h.shape[0], _prod(tuple(h.shape[1:])))
                    h = drop(flat, p, stream, ids).reshape(h.shape)
                env[node] = h
                continue
            env[node] = _eval(root, node, env)


def _is_gcn(conv: nn.Module) -> bool:
    from torch_geometric.nn import GCNConv

    return isinstance(conv, GCNConv)


def _gcn(conv: Any, x: torch.Tensor, block: Any, weights: Callable) -> torch.Tensor:
    """PyG's ``GCNConv`` on a bipartite block (which its ``forward`` refuses): ``lin``, the
    sum over the block's edges and the destinations' self loops weighted as its
    ``gcn_norm`` weighs the whole graph (``weights(block)``: the graph's degrees, so every
    part of a layer sees the weights of one process), then the bias."""
    if conv.normalize or conv.add_self_loops:
        ei, w = weights(block, conv.normalize, conv.add_self_loops)
    else:
        ei, w = block.edge_index, None
    h = conv.lin(x)
    out = conv.propagate(ei, x=h, edge_weight=w, size=(block.num_src, block.num_dst))
    return out if conv.bias is None else out + conv.bias


#: the keyword marking one propagation step of an expanded APPNP call in the traced graph
_HOP = "_gnnscale_hop"


def _expand_appnp(module: nn.Module, graph: fx.Graph) -> None:
    """Each call of PyG's ``APPNP`` (K propagation steps in one module) rewritten as its K
    steps, each a stage, with the teleport to the input between them
    (``x = (1 - alpha) * propagate(x) + alpha * h``, vertex-wise): the input ``h`` travels as
    rows beside the stages."""
    from torch_geometric.nn import APPNP

    for node in list(graph.nodes):
        if node.op != "call_module" or not isinstance(module.get_submodule(node.target), APPNP):
            continue
        conv: Any = module.get_submodule(str(node.target))  # PyG's APPNP (alpha, K)
        bound = inspect.signature(conv.forward).bind(*node.args, **node.kwargs)
        h, edge_index = bound.arguments["x"], bound.arguments["edge_index"]
        if bound.arguments.get("edge_weight") is not None:
            raise _refuse(module, _node_line(node), f"gives {node.target} edge weights "
                          "(gnnscale gives a conv its rows, edges and edge features only)")
        with graph.inserting_before(node):
            cur = h
            tele = graph.call_function(operator.mul, (h, float(conv.alpha)))  # carried once
            tele.stack_trace = node.stack_trace
            for _ in range(int(conv.K)):
                hop = graph.call_module(node.target, (cur, edge_index), {_HOP: True})
                scaled = graph.call_function(operator.mul, (hop, 1.0 - float(conv.alpha)))
                cur = graph.call_function(operator.add, (scaled, tele))
                for made in (hop, scaled, cur):
                    made.stack_trace = node.stack_trace
        node.replace_all_uses_with(cur)
        graph.erase_node(node)


class _WholeBlock:
    """A whole graph as a block (the probe's)."""

    def __init__(self, edge_index: torch.Tensor, n: int) -> None:
        self.edge_index, self.num_src, self.num_dst = edge_index, n, n
        self.size, self.src_ids = (n, n), torch.arange(n)


def _whole_weights(block: Any, normalize: bool, loops: bool
                   ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """:meth:`~gnnscale.models.custom.Custom.gcn_weights` of a whole graph, from its own
    degrees."""
    ei = block.edge_index.to(torch.int64)
    if loops:
        ar = torch.arange(block.num_dst)
        ei = torch.cat([ei, torch.stack([ar, ar])], 1)
    if not normalize:
        return ei, None
    deg = torch.bincount(block.edge_index[1], minlength=block.num_src).float() + float(loops)
    s = deg.rsqrt()
    s = torch.where(torch.isinf(s), torch.zeros_like(s), s)
    return ei, s[ei[0]] * s[ei[1]]


def _propagate(conv: Any, x: torch.Tensor, block: Any, weights: Callable
               ) -> torch.Tensor:
    """One propagation step of PyG's ``APPNP`` on a block: the sum over the block's edges
    (and the destinations' self loops) weighted as its ``gcn_norm`` weighs the whole graph."""
    if conv.normalize or conv.add_self_loops:
        ei, w = weights(block, conv.normalize, conv.add_self_loops)
    else:
        ei, w = block.edge_index, None
    return conv.propagate(ei, x=x, edge_weight=w, size=(block.num_src, block.num_dst))


def _prod(shape: tuple[int, ...]) -> int:
    out = 1
    for s in shape:
        out *= int(s)
    return out


def _value(env: dict[fx.Node, Any], root: nn.Module, a: Any) -> Any:
    """An argument of a node with its inputs' values (constants evaluated as needed)."""
    def get(n: fx.Node) -> Any:
        if n not in env:
            env[n] = _eval(root, n, env)
        return env[n]
    return fx.node.map_arg(a, get)


def _eval(root: nn.Module, node: fx.Node, env: dict[fx.Node, Any]) -> Any:
    """One traced node on the values of its inputs."""
    if node.op == "get_attr":
        obj: Any = root
        for part in str(node.target).split("."):
            obj = getattr(obj, part)
        return obj
    args, kwargs = _value(env, root, node.args), _value(env, root, node.kwargs)
    if node.op == "call_module" and kwargs.get(_HOP):  # an APPNP step on a whole graph
        h, edge_index = args[0], args[1]
        n = h.shape[0]
        block = _WholeBlock(edge_index, n)
        return _propagate(root.get_submodule(node.target), h, block, _whole_weights)
    if node.op == "call_module":
        return root.get_submodule(node.target)(*args, **kwargs)
    if node.op == "call_function":
        return node.target(*args, **kwargs)
    if node.op == "call_method":
        return getattr(args[0], node.target)(*args[1:], **kwargs)
    if node.op == "placeholder":
        raise NotStaged(f"forward's argument {node.target} is not given by gnnscale")
    raise NotStaged(f"cannot run traced node {node.format_node()}")


def _dropout_args(root: nn.Module, node: fx.Node, env: dict[fx.Node, Any]
                  ) -> tuple[torch.Tensor, float, bool]:
    """(input, p, whether it drops when the module trains) of a dropout call."""
    if node.op == "call_module":
        mod: Any = root.get_submodule(str(node.target))  # a Dropout (p)
        return _value(env, root, node.args[0]), float(mod.p), True
    bound = inspect.signature(F.dropout).bind(*node.args, **node.kwargs)
    bound.apply_defaults()
    a = bound.arguments
    training = a.get("training", True)
    on = not (isinstance(training, bool) and not training)  # a traced self.training: follow
    return _value(env, root, a["input"]), float(a["p"]), on


def _is_dropout(root: nn.Module, node: fx.Node) -> bool:
    if node.op == "call_function" and node.target in _DROPOUTS:
        return True
    return node.op == "call_module" and type(root.get_submodule(node.target)) is nn.Dropout


def _skip(node: fx.Node) -> bool:
    """fx's own guards for specialised arguments (``_assert_is_none``)."""
    return node.op == "call_function" and getattr(node.target, "__name__", "") in (
        "_assert_is_none", "_assert")


def _refuse(module: nn.Module, where: str, why: str) -> NotStaged:
    return NotStaged(f"{type(module).__name__}'s forward at {where} {why}")


def reads_edges(conv: Any) -> bool:
    """Whether a conv reads edge features when it is given them: its ``forward`` takes
    ``edge_attr`` and it has an ``edge_dim`` set (GATConv, GATv2Conv, TransformerConv), or its
    ``message`` needs ``edge_attr`` (:func:`message_needs_edges`: GINEConv). A conv whose
    ``edge_attr`` is optional (``Optional[Tensor]``, as TransformerConv's) and unused (no
    ``edge_dim``) reads none."""
    try:
        if "edge_attr" not in inspect.signature(conv.forward).parameters:
            return False
    except (TypeError, ValueError):
        return False
    if getattr(conv, "edge_dim", None) is not None:
        return True
    return message_needs_edges(conv)


def message_needs_edges(conv: Any) -> bool:
    """Whether a conv's ``message`` takes ``edge_attr`` as a required, non-optional tensor
    (GINEConv's ``edge_attr: Tensor``; not TransformerConv's ``edge_attr: OptTensor``)."""
    message = getattr(conv, "message", None)
    try:
        param = inspect.signature(message).parameters.get("edge_attr") if message else None
    except (TypeError, ValueError):
        return False
    if param is None or param.default is not inspect.Parameter.empty:
        return False
    note = param.annotation
    text = note if isinstance(note, str) else repr(note)
    return not ("Optional" in text or "OptTensor" in text or "None" in text)


def _signature(module: nn.Module) -> tuple[list[str], dict[str, Any], bool]:
    """The forward's parameter names, the ones traced as constants (their defaults), and
    whether ``edge_attr`` is traced as an input."""
    params = [p for p in inspect.signature(module.forward).parameters.values()
              if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if len(params) < 2:
        raise NotStaged(f"{type(module).__name__}.forward must take (x, edge_index[, "
                        "edge_attr])")
    mp = _pyg_mp()
    wants_edges = any(isinstance(m, mp) and reads_edges(m) for m in module.modules())
    concrete, edge_attr = {}, False
    for p in params[2:]:
        if p.name == "edge_attr" and (p.default is p.empty or wants_edges):
            edge_attr = True
        elif p.default is not p.empty:
            concrete[p.name] = p.default
        else:
            raise NotStaged(f"{type(module).__name__}.forward takes {p.name} (no default): "
                            "gnnscale gives it x, edge_index and edge_attr only")
    return [p.name for p in params], concrete, edge_attr


def _trace(module: nn.Module, concrete: dict[str, Any]) -> fx.Graph:
    """``module``'s forward as an fx graph; one :class:`NotStaged` line when it does not trace."""
    try:
        return _Tracer().trace(module, concrete_args=concrete)
    except Exception as err:  # noqa: BLE001 - fx raises several kinds
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        if "control flow" in first or "iterate" in first or "bool" in first:
            first = "branches or loops on a tensor's value (data-dependent control flow)"
        raise NotStaged(f"{type(module).__name__}'s forward does not trace at "
                        f"{_error_line(err)}: {first[:160]}") from None


def _rowdep(body: list[fx.Node], x: fx.Node) -> set[fx.Node]:
    """The nodes of ``body`` that read the rows ``x`` (directly or through another)."""
    rowdep: set[fx.Node] = {x}
    for n in body:
        if any(a in rowdep for a in n.all_input_nodes):
            rowdep.add(n)
    return rowdep


def _check_edge_reads(module: nn.Module, body: list[fx.Node], ei: fx.Node, ea: fx.Node | None,
                      mp: type) -> None:
    """Refuses a node other than a message-passing call that reads ``edge_index``/``edge_attr``."""
    for n in body:
        graph_inputs = set(n.all_input_nodes) & {ei, ea} - {None}
        is_mp = n.op == "call_module" and isinstance(module.get_submodule(str(n.target)), mp)
        if graph_inputs and not is_mp:
            what = "edge_index" if ei in graph_inputs else "edge_attr"
            raise _refuse(module, _node_line(n), f"reads {what} outside a message-passing call "
                          "(only a PyG layer may read the edges)")


def _levels(body: list[fx.Node], x: fx.Node, convs: dict[fx.Node, _Conv],
            rowdep: set[fx.Node]) -> dict[fx.Node, int]:
    """Each row value's depth: the message-passing calls on the longest path from ``x``."""
    level: dict[fx.Node, int] = {x: 0}
    for n in body:
        ins = [level[a] for a in n.all_input_nodes if a in level]
        if n in convs:
            level[n] = level[convs[n].x] + 1
        elif n in rowdep:
            level[n] = max(ins)
    return level


def _uses(body: list[fx.Node], output: fx.Node, convs: dict[fx.Node, _Conv],
          rowdep: set[fx.Node], level: dict[fx.Node, int], L: int
          ) -> tuple[dict[fx.Node, int], dict[fx.Node, int]]:
    """Where each row value is read: the last segment ``s`` that uses it vertex-wise (at level
    ``s``), and the last boundary ``b`` whose conv (of stage ``b``) reads it."""
    seg_use: dict[fx.Node, int] = {}
    bnd_use: dict[fx.Node, int] = {}
    for n in [*body, output]:
        for a in n.all_input_nodes:
            if a not in rowdep:
                continue
            if n in convs:
                bnd_use[a] = max(bnd_use.get(a, -1), level[n] - 1)
            else:
                at = L if n is output else level[n]
                seg_use[a] = max(seg_use.get(a, -1), at)
    return seg_use, bnd_use


def _cut(body: list[fx.Node], output: fx.Node, x: fx.Node, convs: dict[fx.Node, _Conv],
         rowdep: set[fx.Node], level: dict[fx.Node, int], L: int
         ) -> tuple[list[list[_Conv]], list[list[fx.Node]], list[list[fx.Node]],
                    list[list[fx.Node]]]:
    """The cut into ``L`` stages: each stage's convs, each segment's vertex-wise nodes, the
    values packed at each boundary, and those carried beside each stage's output."""
    seg_use, bnd_use = _uses(body, output, convs, rowdep, level, L)

    def needed_after_boundary(v: fx.Node, j: int) -> bool:
        return bnd_use.get(v, -1) >= j or seg_use.get(v, -1) > j

    stages: list[list[_Conv]] = [[] for _ in range(L)]
    for n, c in convs.items():
        stages[level[n] - 1].append(c)
    segments: list[list[fx.Node]] = [[] for _ in range(L + 1)]
    for n in body:
        if n in rowdep and n not in convs:
            segments[level[n]].append(n)
    values = [v for v in [x, *body] if v in rowdep]
    packs: list[list[fx.Node]] = [[x]]
    for j in range(1, L):
        packs.append([v for v in values if level[v] <= j and needed_after_boundary(v, j)])
    carries = [[v for v in values if v not in convs and level[v] <= i
                and (bnd_use.get(v, -1) >= i + 1 or seg_use.get(v, -1) >= i + 1)]
               for i in range(L)]
    return stages, segments, packs, carries


def stage(module: nn.Module, in_channels: int, edge_dim: int | None = None) -> Staged:
    """Trace ``module`` and cut it into stages (checked on a probe graph of ``in_channels``
    wide rows, with ``edge_dim`` wide edge features when its forward reads them); raises
    :class:`NotStaged` with one line saying what cannot be staged and where."""
    names, concrete, edge_attr = _signature(module)
    graph = _trace(module, concrete)
    _expand_appnp(module, graph)
    holders = [n for n in graph.nodes if n.op == "placeholder"]
    x, ei = holders[0], holders[1]
    ea = dict(zip(names, holders)).get("edge_attr") if edge_attr else None
    mp = _pyg_mp()
    body = [n for n in graph.nodes if n.op not in ("placeholder", "output") and not _skip(n)]
    output = next(n for n in graph.nodes if n.op == "output")

    rowdep = _rowdep(body, x)
    _check_edge_reads(module, body, ei, ea, mp)
    convs = {n: _bind_conv(module, n, x, ei, ea, rowdep) for n in body
             if n.op == "call_module" and isinstance(module.get_submodule(n.target), mp)}
    level = _levels(body, x, convs, rowdep)
    L = max((level[c] for c in convs), default=0)
    if L == 0:
        raise NotStaged(f"{type(module).__name__}'s forward calls no PyG message-passing layer "
                        "on x")
    out_value = output.args[0]
    if not isinstance(out_value, fx.Node) or out_value not in rowdep:
        raise _refuse(module, _node_line(output), "returns something other than one tensor of "
                      "rows (a model gnnscale stages returns its output rows)")

    full, shapes, dtypes, dropouts = _probe(module, graph, body, convs, x, ei, ea, in_channels,
                                            edge_dim, rowdep)
    for n in body:
        if _is_dropout(module, n):
            dropouts[n] = DROPOUT_STREAM + len(dropouts)

    stages, segments, packs, carries = _cut(body, output, x, convs, rowdep, level, L)
    crossing = {v for p in packs[1:] for v in p} | {v for c in carries for v in c}
    for v in crossing:
        if v not in shapes:
            raise _refuse(module, _node_line(v), "carries a value that is not rows of vertices "
                          f"({type(full.get(v)).__name__}) past a message-passing call")
    return Staged(graph=graph, x=x, edge_index=ei, edge_attr=ea,
                  convs=stages, segments=segments, packs=packs, carries=carries,
                  shapes=shapes, dtypes=dtypes, output=out_value, dropouts=dropouts)


def _bind_conv(module: nn.Module, n: fx.Node, x: fx.Node, ei: fx.Node, ea: fx.Node | None,
               rowdep: set[fx.Node]) -> _Conv:
    conv = module.get_submodule(n.target)
    where = _node_line(n)
    if n.kwargs.get(_HOP):  # one propagation step of an expanded APPNP
        if n.args[1] is not ei:
            raise _refuse(module, where, f"gives {n.target} an edge_index other than its own "
                          "argument (only the graph's edges can be staged)")
        return _Conv(node=n, x=n.args[0], kwargs={}, takes_size=False, reads_edges=False)
    params = inspect.signature(conv.forward).parameters
    try:
        bound = inspect.signature(conv.forward).bind(*n.args, **n.kwargs)
    except TypeError as err:
        raise _refuse(module, where, f"calls {n.target} in a way gnnscale cannot read: "
                      f"{err}") from None
    args = dict(bound.arguments)
    first = next(iter(params))
    xv = args.pop(first, None)
    if not isinstance(xv, fx.Node) or xv not in rowdep:
        raise _refuse(module, where, f"gives {n.target} node features gnnscale cannot stage "
                      "(one tensor of rows computed from x)")
    if args.pop("edge_index", None) is not ei:
        raise _refuse(module, where, f"gives {n.target} an edge_index other than its own "
                      "argument (only the graph's edges can be staged)")
    edge = args.pop("edge_attr", None)
    if edge is not None and edge is not ea:
        raise _refuse(module, where, f"gives {n.target} edge_attr other than its own argument")
    kwargs = {}
    for key, value in args.items():
        if key == "size" and value is None:
            continue
        if isinstance(value, fx.Node) or fx.node.map_arg(value, lambda a: a) != value:
            raise _refuse(module, where, f"gives {n.target} {key} computed in the forward "
                          "(gnnscale gives a conv its rows, edges and edge features only)")
        if value is not None:
            kwargs[key] = value
    reads = edge is not None and ea is not None and (getattr(conv, "edge_dim", 0) is not None
                                                       or message_needs_edges(conv))
    return _Conv(node=n, x=xv, kwargs=kwargs, takes_size="size" in params,
                 reads_edges=bool(reads), pair=_takes_pair(params[first]))


def _takes_pair(param: inspect.Parameter) -> bool:
    """Whether a conv's first ``forward`` argument takes PyG's pair ``(x_src, x_dst)``: all
    but one annotated ``Tensor`` alone (``PNAConv``'s, which concatenates its input rows to
    the aggregate: it is given every source's rows and its first ``n_dst`` output rows are
    the destinations')."""
    note = param.annotation
    return not (note is torch.Tensor or note == "Tensor")


def _probe(module: nn.Module, graph: fx.Graph, body: list[fx.Node],
           convs: dict[fx.Node, _Conv], x: fx.Node, ei: fx.Node, ea: fx.Node | None,
           in_channels: int, edge_dim: int | None, rowdep: set[fx.Node]
           ) -> tuple[dict, dict, dict, dict]:
    """Run the traced graph on a probe graph, once whole and once on a subset of the rows
    (convs' outputs cut to the subset): a vertex-wise step must give each row from that row
    alone. Returns the full values and the row shapes and dtypes of row values."""
    n, k = PROBE_ROWS, PROBE_SUBSET
    gen = torch.Generator().manual_seed(0)
    state = torch.random.get_rng_state()
    was = module.training
    module.eval()
    try:
        dtype = next((p.dtype for p in module.parameters() if p.is_floating_point()),
                     torch.float32)
        xs = torch.randn(n, in_channels, generator=gen, dtype=dtype)
        src = torch.randint(0, n, (4 * n,), generator=gen)
        dst = torch.arange(n).repeat(4)
        edge_index = torch.stack([src, dst])
        full: dict[fx.Node, Any] = {x: xs, ei: edge_index}
        sub: dict[fx.Node, Any] = {x: xs[:k], ei: edge_index}
        if ea is not None:
            width = edge_dim or in_channels
            full[ea] = sub[ea] = torch.randn(edge_index.shape[1], width, generator=gen,
                                              dtype=dtype)
        for node in graph.nodes:
            if node.op == "placeholder" and node not in full:
                full[node] = sub[node] = None
        with torch.no_grad():
            for node in body:
                if _is_dropout(module, node):  # the probe checks rows, not masks
                    full[node] = _value(full, module, node.args[0] if node.args else
                                        node.kwargs["input"])
                    sub[node] = _value(sub, module, node.args[0] if node.args else
                                       node.kwargs["input"])
                    continue
                try:
                    full[node] = _eval(module, node, full)
                except NotStaged:
                    raise
                except Exception as err:  # noqa: BLE001
                    msg = (str(err).strip().splitlines() or [type(err).__name__])[0]
                    raise _refuse(module, _node_line(node), f"fails on a probe graph: "
                                  f"{msg[:160]}") from None
                if node not in rowdep:
                    sub[node] = full[node]
                    continue
                if node in convs:
                    if not _rows(full[node], n):
                        raise _refuse(module, _node_line(node), "gets from a message-passing "
                                      "call something other than rows of vertices")
                    sub[node] = full[node][:k]
                    continue
                try:
                    sub[node] = _eval(module, node, sub)
                    same = _same_rows(full[node], sub[node], n, k)
                except Exception:  # noqa: BLE001 - a step that fails on fewer rows
                    same = False
                if not same:
                    raise _refuse(module, _node_line(node), _mixing(module, node))
    finally:
        module.train(was)
        torch.random.set_rng_state(state)
    shapes = {v: tuple(full[v].shape[1:]) for v in full if v in rowdep and _rows(full[v], n)}
    dtypes = {v: full[v].dtype for v in shapes}
    return full, shapes, dtypes, {}


def _rows(v: Any, n: int) -> bool:
    return isinstance(v, torch.Tensor) and v.dim() >= 1 and v.shape[0] == n


def _same_rows(full: Any, sub: Any, n: int, k: int) -> bool:
    """Whether ``sub`` (a step run on the first ``k`` rows) is ``full`` cut to them."""
    if isinstance(full, torch.Tensor):
        if not _rows(full, n) or not isinstance(sub, torch.Tensor):
            return False
        return sub.shape == (k, *full.shape[1:]) and torch.allclose(
            sub.double(), full[:k].double(), rtol=1e-4, atol=1e-5)
    if isinstance(full, (tuple, list)):
        return isinstance(sub, (tuple, list)) and len(sub) == len(full) and all(
            _same_rows(a, b, n, k) for a, b in zip(full, sub))
    if isinstance(full, torch.Size) or isinstance(full, int):
        return True  # a size read of the rows: recomputed on the rows each stage holds
    return full == sub if not isinstance(full, torch.Tensor) else False


def _mixing(module: nn.Module, node: fx.Node) -> str:
    """What a step that is not vertex-wise does, in words."""
    target = node.target
    what = target if isinstance(target, str) else getattr(target, "__name__", str(target))
    if node.op == "call_module":
        what = type(module.get_submodule(node.target)).__name__
    pool = "pool" in str(what).lower() or what in ("mean", "sum", "max", "min") or \
        what in (operator.getitem,)
    kind = "pools or mixes rows" if pool else "mixes rows (its output row reads other rows)"
    return (f"{kind} outside message passing ({what}): a strategy that computes a layer's "
            "rows apart cannot run it")
