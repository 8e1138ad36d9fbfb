"""Typed schemas of the ``sampler`` options (torch-free: the launcher composes and checks a
config with these alone; each ``_target_`` names the implementation a rank builds, whose
constructor runs the same :meth:`check`), and the typed fanouts (:func:`fanout_table`).

``sampler.fanouts`` holds one entry per layer, target layer first. An entry is a fanout that
every edge type gets (-1: all in-edges of the type), or a dict naming each edge type's fanout
in that layer (0: none of that type), keyed by the relation where it names one edge type of
the graph, else by ``src__rel__dst``::

    sampler.fanouts=[10,5]                                    # every edge type, both layers
    sampler.fanouts=[{writes:10,cites:5,...},{writes:5,cites:5,...}]
    sampler.fanouts=[{author__writes__paper:10,...},5]        # a dict and a number mix

A dict must name every edge type of the graph, and only those. In Python (not on the command
line, where Hydra cannot replace the default list by a dict) the dict of per-layer lists
``{writes: [10, 5], cites: [5, 5], ...}`` (PyG's ``num_neighbors``) means the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from gnnscale.errors import ConfigError
from gnnscale.registry import register
from gnnscale.schema import Options, require_at_least

#: Joins an edge type's parts in a typed fanout key: ``src__rel__dst``.
KEY_SEP = "__"

EdgeType = tuple[str, str, str]
Layer = int | dict[str, int]


def edge_type_key(edge_type: Sequence[str]) -> str:
    """The ``src__rel__dst`` key of an edge type in a typed fanout dict."""
    return KEY_SEP.join(edge_type)


def fanout_layers(fanouts: Any) -> list[Layer]:
    """``sampler.fanouts`` as plain values, one entry per layer: a fanout (every edge type)
    or a dict of fanouts per edge type key (a dict of per-layer lists is transposed into
    these). Raises ``ConfigError`` in one line on a malformed value: no layer, an entry below
    -1, an empty dict, per-type lists of different lengths."""
    if isinstance(fanouts, Mapping):
        cols: dict[str, list[int]] = {}
        for key, value in fanouts.items():
            if isinstance(value, (str, Mapping)) or not isinstance(value, Sequence):
                raise ConfigError(f"sampler.fanouts.{key} must be a list of fanouts per layer, "
                                  f"got {value!r}")
            cols[str(key)] = [int(f) for f in value]
        if len({len(c) for c in cols.values()}) > 1:
            raise ConfigError("sampler.fanouts gives edge types different numbers of layers "
                              f"({', '.join(f'{k}: {len(c)}' for k, c in cols.items())}): "
                              "give every edge type one fanout per layer")
        layers: list[Layer] = [dict(zip(cols, row)) for row in zip(*cols.values())]
    else:
        layers = [{str(k): int(v) for k, v in f.items()} if isinstance(f, Mapping) else int(f)
                  for f in fanouts]
    if not layers:
        raise ConfigError("sampler.fanouts is empty: give one fanout per layer, "
                          "e.g. [15, 10, 5]")
    for h, layer in enumerate(layers):
        values = list(layer.values()) if isinstance(layer, dict) else [layer]
        if not values:
            raise ConfigError(f"sampler.fanouts[{h}] is an empty dict: name each edge type's "
                              "fanout, e.g. {writes:10,cites:5}")
        if any(f < -1 for f in values):
            raise ConfigError(f"sampler.fanouts must be -1 (all neighbors) or >= 0, got "
                              f"{layer} in layer {h}")
    return layers


def layer_fanouts(fanouts: Any) -> list[int]:
    """One fanout per layer: a number as it is; a per-edge-type dict as the most a destination
    draws in that layer, the sum of its fanouts (-1 when some type takes all: unbounded). On a
    graph with one edge type that is exactly its fanout."""
    return [f if isinstance(f, int) else -1 if -1 in f.values() else sum(f.values())
            for f in fanout_layers(fanouts)]


def is_typed(fanouts: Any) -> bool:
    """Whether ``sampler.fanouts`` names edge types (some layer is a dict)."""
    return isinstance(fanouts, Mapping) or any(isinstance(f, Mapping) for f in fanouts)


def fanout_table(fanouts: Any, edge_types: Sequence[Sequence[str]],
                 graph: str = "the graph") -> list[list[int]]:
    """``[layer][edge type]``: the fanout of each of ``edge_types`` (the graph's, in order)
    in each layer (:func:`fanout_layers`' forms). Raises ``ConfigError`` in one line for a
    dict that misses an edge type, names one the graph (``graph`` in the message) lacks, or
    names one twice."""
    types = [tuple(et) for et in edge_types]
    by_rel: dict[str, list[int]] = {}
    for t, et in enumerate(types):
        by_rel.setdefault(et[1], []).append(t)
    full = {edge_type_key(et): t for t, et in enumerate(types)}

    def name(t: int) -> str:
        return types[t][1] if len(by_rel[types[t][1]]) == 1 else edge_type_key(types[t])

    def index(key: str) -> int:
        if key in full:
            return full[key]
        if len(by_rel.get(key, ())) == 1:
            return by_rel[key][0]
        if key in by_rel:
            names = ", ".join(edge_type_key(types[t]) for t in by_rel[key])
            raise ConfigError(f"sampler.fanouts key {key!r} is ambiguous: relation {key!r} "
                              f"names {len(by_rel[key])} edge types of {graph} ({names}); "
                              "key them as src__rel__dst")
        raise ConfigError(f"sampler.fanouts names edge type {key!r}, which {graph} lacks "
                          f"(its edge types: {', '.join(name(t) for t in range(len(types)))})")

    table = []
    for layer in fanout_layers(fanouts):
        if not isinstance(layer, dict):
            table.append([layer] * len(types))
            continue
        row: dict[int, int] = {}
        for key, f in layer.items():
            t = index(key)
            if t in row:
                raise ConfigError(f"sampler.fanouts names edge type {edge_type_key(types[t])} "
                                  "twice (by relation and by src__rel__dst): keep one")
            row[t] = f
        missing = [name(t) for t in range(len(types)) if t not in row]
        if missing:
            raise ConfigError(f"sampler.fanouts misses edge type(s) {', '.join(missing)} of "
                              f"{graph}: name every edge type's fanout (0: none of that type)")
        table.append([row[t] for t in range(len(types))])
    return table


@dataclass
class SamplerConfig(Options):
    """Base of the sampler options; :attr:`weighted_blocks`: its blocks carry ``edge_weight``
    (strategies and models check they can use it)."""

    weighted_blocks: ClassVar[bool] = False
    _target_: str = ""


@register("sampler", "neighbor")
@dataclass
class NeighborSamplerConfig(SamplerConfig):
    """``sampler=neighbor``: per-layer fanouts, target layer first; -1 = all neighbors; a
    list gives every edge type those fanouts, a dict one list per edge type (the module
    docstring's syntax); ``threads``: native sampling threads, 0 = automatic;
    ``with_edge_ids``: blocks carry their edges' global ids on every graph, not only on
    graphs with edge types (see ``NeighborSampler``)."""

    _target_: str = "gnnscale.sampling.neighbor.NeighborSampler"
    fanouts: Any = field(default_factory=lambda: [15, 10, 5])
    replace: bool = False
    weighted: bool = False
    threads: int = 0
    with_edge_ids: bool = False

    def check(self) -> None:
        """At least one layer of fanouts, each -1 or >= 0 (a dict: as many layers for every
        edge type); threads >= 0."""
        fanout_layers(self.fanouts)
        require_at_least("sampler.threads", int(self.threads), 0, " (0: automatic)")


@dataclass
class HopsSamplerConfig(SamplerConfig):
    """Base of the samplers that draw ``num_layers`` hops instead of per-layer fanouts (the
    strategies check it against ``model.num_layers``)."""

    num_layers: int = 3

    def check(self) -> None:
        """At least one hop."""
        require_at_least("sampler.num_layers", int(self.num_layers), 1)


@register("sampler", "full")
@dataclass
class FullNeighborSamplerConfig(HopsSamplerConfig):
    """``sampler=full``: whole in-neighborhoods, ``num_layers`` hops; ``with_edge_ids`` as
    ``sampler=neighbor``'s."""

    _target_: str = "gnnscale.sampling.full.FullNeighborSampler"
    with_edge_ids: bool = False


@register("sampler", "random_walk")
@dataclass
class RandomWalkSamplerConfig(HopsSamplerConfig):
    """``sampler=random_walk``: PinSAGE's neighbourhoods (FGNN: 4 walks of length 3, top 5)."""

    weighted_blocks: ClassVar[bool] = True
    _target_: str = "gnnscale.sampling.random_walk.RandomWalkSampler"
    num_walks: int = 4
    walk_length: int = 3
    top_k: int = 5
    threads: int = 0

    def check(self) -> None:
        """At least one hop; walks, walk length and top-k >= 1; threads >= 0."""
        super().check()
        for key in ("num_walks", "walk_length", "top_k"):
            require_at_least(f"sampler.{key}", int(getattr(self, key)), 1)
        require_at_least("sampler.threads", int(self.threads), 0, " (0: automatic)")
