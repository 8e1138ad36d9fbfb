"""Train/val/test positive edges for link prediction, and the message graph trained on.

Two sources (``task.split``): the dataset's own split edges (``GraphStore.links``: an OGB
link-prediction layout, or ``dataset=custom`` arrays ``train_pos``, ``val_pos``, ``val_neg``,
``test_pos``, ``test_neg``), scored as given; or a seeded random split of the graph's edges
(``val_fraction``, ``test_fraction``; an undirected graph's edge is split as one pair, both of
its directions on the same side). Either way:

- val/test positives are removed from the message graph (both directions when undirected),
  so no training step and no layer of the encoder sees them;
- a val/test positive that is also a training positive is refused (a leak);
- val/test negatives missing from the data are drawn once (``eval_negatives`` per positive,
  seeded, never an edge of the whole graph) and stored, so every run and every strategy
  scores the same pairs.

On a typed graph the split is of one edge type's edges (``task.edge_type``,
:mod:`gnnscale.tasks.link.edge_types`; random, given split edges are not read): an edge type
between two node types is directed, one within a node type may be undirected as above. The
message graph keeps every node and edge type, the features and the edge features, and loses
the held-out edges of the target type and their reverses in the reverse edge type
(``(d, rev_r, s)``, :func:`~gnnscale.tasks.link.edge_types.reverse_of`); stored val/test
negatives keep the source in the edge type's source node type and the target in its
destination node type (never an edge of that type), and the split's arrays hold global ids.

The result (the message graph plus the five edge arrays) is processed once into a folder
beside the dataset's (``<root>/<key>-link-<digest>/processed``, arrays it shares with the
dataset hard-linked) and memory-mapped and verified like every processed graph
(:mod:`gnnscale.data.processed`).
"""

from __future__ import annotations

import hashlib
import json
import math
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from gnnscale.data import processed
from gnnscale.data.graph import GraphStore
from gnnscale.errors import ConfigError
from gnnscale.sampling.schedule import mix_seed
from gnnscale.tasks.link.edge_types import key as edge_type_key
from gnnscale.tasks.link.edge_types import reverse_of
from gnnscale.tasks.link.negatives import draw, type_ranges

FORMAT = 1  # of the split below: a change re-splits into a new folder
VAL_NEG, TEST_NEG, SPLIT = 11, 12, 13  # seed streams (sampling.schedule.mix_seed)


@dataclass(frozen=True)
class SplitOptions:
    """What decides a link split (and names its folder)."""

    split: str = "auto"  # auto | given | random
    val_fraction: float = 0.05
    test_fraction: float = 0.1
    seed: int = 0
    directed: str = "auto"  # auto | undirected | directed
    eval_negatives: int = 1
    eval_negative_kind: str = "uniform"  # uniform | per_source
    reject_edges: bool = True
    edge_type: tuple[str, str, str] | None = None  # a typed graph's target edge type


def edge_keys(edges: torch.Tensor, n: int) -> torch.Tensor:
    """``src * n + dst`` of a ``[2, E]`` edge array (one int64 per directed edge)."""
    return edges[0].long() * n + edges[1].long()


def is_undirected(graph: GraphStore, edges: torch.Tensor | None = None) -> bool:
    """Whether every edge's reverse is an edge too (of ``edges``, default the graph's)."""
    ei = graph.edge_index() if edges is None else edges
    n = graph.num_nodes
    return bool(torch.isin(ei[1] * n + ei[0], ei[0] * n + ei[1]).all())


def resolve_directed(graph: GraphStore, option: str, edges: torch.Tensor | None = None
                     ) -> bool:
    """True when the split treats the graph (or ``edges`` of it) as undirected."""
    if option == "auto":
        return is_undirected(graph, edges)
    return option == "undirected"


def random_split(graph: GraphStore, opts: SplitOptions, undirected: bool,
                 edges: torch.Tensor | None = None, what: str | None = None
                 ) -> dict[str, torch.Tensor]:
    """``train_pos``, ``val_pos``, ``test_pos`` (``[2, E]``): a seeded permutation of the
    graph's edges (or of ``edges``, named ``what`` in messages; an undirected graph's pairs
    ``u < v``; self loops stay out) cut by the fractions (rounded down, as Kipf & Welling's
    split)."""
    n = graph.num_nodes
    src, dst = graph.edge_index() if edges is None else edges
    keep = src < dst if undirected else src != dst
    keys = torch.unique(src[keep] * n + dst[keep])
    m = keys.numel()
    n_val, n_test = math.floor(opts.val_fraction * m), math.floor(opts.test_fraction * m)
    if n_val < 1 or n_test < 1 or m - n_val - n_test < 1:
        raise ConfigError(f"task.split=random: {what or graph.name} has {m} "
                          f"{'undirected ' if undirected else ''}edges, too few for "
                          f"task.val_fraction={opts.val_fraction} and task.test_fraction="
                          f"{opts.test_fraction} to leave at least one edge in each split")
    gen = torch.Generator().manual_seed(mix_seed(opts.seed, SPLIT))
    perm = keys[torch.randperm(m, generator=gen)]
    parts = torch.split(perm, [n_val, n_test, m - n_val - n_test])
    return {name: torch.stack([k // n, k % n]) for name, k in
            zip(("val_pos", "test_pos", "train_pos"), parts)}


def _keys(edges: torch.Tensor, n: int, undirected: bool) -> torch.Tensor:
    """:func:`edge_keys` of ``edges``, and of their reverses when ``undirected``."""
    keys = edge_keys(edges, n)
    return torch.cat([keys, edge_keys(edges.flip(0), n)]) if undirected else keys


def check_no_leak(train_pos: torch.Tensor, held: torch.Tensor, name: str, n: int,
                  undirected: bool, other: str = "train_pos", what: str = "training") -> None:
    """Refuse a val/test positive that is also a training positive (or, with ``other``, a
    positive of another held-out split), either direction when the graph is undirected."""
    leak = torch.isin(edge_keys(held, n), _keys(train_pos, n, undirected))
    if bool(leak.any()):
        i = int(leak.nonzero()[0])
        raise ConfigError(f"{name} holds {int(leak.sum())} edges that are also {what} edges "
                          f"({other}), first ({int(held[0, i])}, {int(held[1, i])}): a leak; "
                          f"remove them from {other} or from {name}")


#: the share of given negatives that may be edges or positives before the split is refused
#: (a random draw, as OGB's, may hit a few; a file whose negatives are positives scores 0.5)
NEGATIVE_HITS_TOLERATED = 0.01


def check_given_negatives(graph: GraphStore, links: dict[str, torch.Tensor], given: set[str],
                          undirected: bool) -> None:
    """Refuse given negatives (``val_neg``, ``test_neg``) that are positives of their own
    split, or of which more than :data:`NEGATIVE_HITS_TOLERATED` are positives of any split
    or edges of the graph; warn about fewer."""
    n = graph.num_nodes
    where = graph.meta.get("source", graph.name)
    positives = torch.cat([_keys(links[k], n, undirected)
                           for k in ("train_pos", "val_pos", "test_pos")])
    src, dst = graph.edge_index()
    edges = torch.cat([positives, _keys(torch.stack([src, dst]), n, undirected)])
    for split in ("val", "test"):
        name = f"{split}_neg"
        if name not in given:
            continue
        neg = links[name].long()
        keys = edge_keys(neg, n)
        own = torch.isin(keys, _keys(links[f"{split}_pos"], n, undirected))
        hit = torch.isin(keys, edges)
        count, total = int(hit.sum()), int(keys.numel())
        if bool(own.any()) or count > NEGATIVE_HITS_TOLERATED * total:
            i = int((own if bool(own.any()) else hit).nonzero()[0])
            kind = f"positives of {split}_pos" if bool(own.any()) else \
                "positives (train_pos, val_pos, test_pos) or edges of the graph"
            raise ConfigError(
                f"{where}: {name} holds {int(own.sum()) if bool(own.any()) else count} of its "
                f"{total} negatives that are {kind}, first ({int(neg[0, i])}, "
                f"{int(neg[1, i])}): a negative must be a non-edge (scored as given, the "
                f"metric is meaningless); fix {name} or leave it out (negatives are drawn)")
        if count:
            warnings.warn(f"{where}: {count} of the {total} given {name} are edges or "
                          "positives (a random draw's collisions); they are scored as given",
                          stacklevel=2)


def without_edges(graph: GraphStore, edges: torch.Tensor, undirected: bool) -> GraphStore:
    """``graph`` minus ``edges`` (and their reverses when ``undirected``), in CSC order."""
    n = graph.num_nodes
    drop = edge_keys(edges, n)
    if undirected:
        drop = torch.cat([drop, edge_keys(edges.flip(0), n)])
    src, dst = graph.edge_index()
    keep = ~torch.isin(src * n + dst, drop)
    indptr = torch.zeros(n + 1, dtype=torch.int64)
    indptr[1:] = torch.cumsum(torch.bincount(dst[keep], minlength=n), 0)
    w = None if graph.edge_weight is None else graph.edge_weight[keep]
    return GraphStore(indptr=indptr, indices=graph.indices[keep], x=graph.x, y=graph.y,
                      edge_weight=w, num_classes=graph.num_classes, name=graph.name,
                      meta={k: v for k, v in graph.meta.items()
                            if k not in ("checksum", "processed_dir")})


def whole_graph(graph: GraphStore, links: dict[str, torch.Tensor], undirected: bool,
                edges: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The sorted CSC of every edge of the graph (or of ``edges``: a typed graph's target
    type's) and every positive of the split (both directions when undirected): what a stored
    negative must never be."""
    parts = [graph.edge_index() if edges is None else edges] + \
        [links[k] for k in ("train_pos", "val_pos", "test_pos")]
    ei = torch.cat([p.long() for p in parts], 1)
    g = GraphStore.from_edge_index(ei, graph.num_nodes, symmetrize=undirected)
    return g.indptr, g.indices


def grouping(pos: torch.Tensor, neg: torch.Tensor) -> int:
    """Negatives per positive when ``neg`` holds each positive's own ``k`` negatives in order
    (``k`` consecutive columns per positive, each with the positive's source); else 0."""
    p, q = pos.shape[1], neg.shape[1]
    if p == 0 or q % p:
        return 0
    k = q // p
    return k if torch.equal(neg[0], pos[0].repeat_interleave(k)) else 0


def split_graph(graph: GraphStore, opts: SplitOptions) -> GraphStore:
    """The message graph with the five split arrays in ``links`` (computed, not stored)."""
    if graph.is_typed:
        return split_typed(graph, opts)
    given = bool(graph.links)
    if opts.split == "given" and not given:
        raise ConfigError(f"task.split=given but dataset {graph.name} has no split edges "
                          "(train_pos, val_pos, test_pos): use task.split=random")
    undirected = resolve_directed(graph, opts.directed)
    n = graph.num_nodes
    if opts.split == "random" or not given:
        links = random_split(graph, opts, undirected)
        kind = "random"
    else:
        missing = [k for k in ("train_pos", "val_pos", "test_pos") if k not in graph.links]
        if missing:
            raise ConfigError(f"dataset {graph.name} gives split edges but not "
                              f"{', '.join(missing)}: give all of train_pos, val_pos, test_pos "
                              "(val_neg, test_neg optional), or use task.split=random")
        links = {k: v.long() for k, v in graph.links.items()}
        kind = "given"
        for name in ("val_pos", "test_pos"):
            check_no_leak(links["train_pos"], links[name], name, n, undirected)
        check_no_leak(links["val_pos"], links["test_pos"], "test_pos", n, undirected,
                      other="val_pos", what="validation")
        check_given_negatives(graph, links, set(graph.links), undirected)
    if links["train_pos"].shape[1] == 0:
        raise ConfigError(f"the link split of {graph.name} has no training edge")
    groups = {}
    exclude = whole_graph(graph, links, undirected) if opts.reject_edges else (None, None)
    for name, stream in (("val", VAL_NEG), ("test", TEST_NEG)):
        pos = links[f"{name}_pos"]
        if f"{name}_neg" in links:
            groups[name] = grouping(pos, links[f"{name}_neg"])
            continue
        src, dst = draw(n, pos[0], torch.arange(pos.shape[1]), opts.eval_negatives,
                        opts.eval_negative_kind, mix_seed(opts.seed, stream), *exclude)
        links[f"{name}_neg"] = torch.stack([src, dst])
        groups[name] = opts.eval_negatives
    held = torch.cat([links["val_pos"], links["test_pos"]], 1)
    message = without_edges(graph, held, undirected)
    message.links = links
    message.train_idx = torch.unique(links["train_pos"])
    message.meta.update({"link_split": kind, "undirected": undirected, "neg_groups": groups,
                         "source": graph.meta.get("source", graph.name)})
    return message


def type_edges(graph: GraphStore, k: int) -> torch.Tensor:
    """``[2, E_k]`` global (source, destination) ids of the edges of edge type ``k``, in CSC
    order."""
    src, dst = graph.edge_index()
    if graph.type_per_edge is None:
        return torch.stack([src, dst])
    mine = graph.type_per_edge == k
    return torch.stack([src[mine], dst[mine]])


def type_csc(graph: GraphStore, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The sorted CSC over all of ``graph``'s global ids of its edges of type ``k`` only:
    what a typed link task's negatives avoid."""
    g = GraphStore.from_edge_index(type_edges(graph, k), graph.num_nodes)
    return g.indptr, g.indices


def without_type_edges(graph: GraphStore, held: torch.Tensor, k: int, rev: int | None,
                       undirected: bool) -> GraphStore:
    """The typed ``graph`` minus the edges ``held`` of edge type ``k`` (and their reverses
    within it when ``undirected``) and minus their reverses of the reverse type ``rev``;
    every type, feature and edge feature kept, in CSC order. Labels and node splits are left
    out (the training endpoints become ``train_idx``)."""
    n = graph.num_nodes
    src, dst = graph.edge_index()
    keys = src * n + dst
    held_keys = edge_keys(held, n)
    flipped = edge_keys(held.flip(0), n)
    tpe = graph.type_per_edge
    types = torch.zeros(graph.num_edges, dtype=torch.int64) if tpe is None else tpe.long()
    both = torch.cat([held_keys, flipped])
    drop = (types == k) & torch.isin(keys, both if undirected else held_keys)
    if rev is not None:
        drop |= (types == rev) & torch.isin(keys, both if undirected else flipped)
    keep = ~drop
    indptr = torch.zeros(n + 1, dtype=torch.int64)
    indptr[1:] = torch.cumsum(torch.bincount(dst[keep], minlength=n), 0)
    type_attr = {et: a[keep[graph.edge_type_csc(et)[2]]]
                 for et, a in graph.type_edge_attr.items()}
    return GraphStore(
        indptr=indptr, indices=graph.indices[keep], x=graph.x,
        edge_weight=None if graph.edge_weight is None else graph.edge_weight[keep],
        num_classes=graph.num_classes, name=graph.name,
        meta={m: v for m, v in graph.meta.items() if m not in ("checksum", "processed_dir")},
        node_types=graph.node_types, node_type_offset=graph.node_type_offset,
        edge_types=graph.edge_types, type_per_edge=None if tpe is None else tpe[keep],
        type_features=dict(graph.type_features), target_types=(),
        edge_attr=None if graph.edge_attr is None else graph.edge_attr[keep],
        type_edge_attr=type_attr)


def split_typed(graph: GraphStore, opts: SplitOptions) -> GraphStore:
    """:func:`split_graph` of a typed graph: a random split of the edges of the target edge
    type ``opts.edge_type``; negatives drawn within its source and destination types' id
    ranges; the message graph keeps every type and edge feature and loses the held-out
    edges and their reverses (:func:`without_type_edges`)."""
    if opts.edge_type is None:
        raise ConfigError(f"task=link on the typed graph {graph.name} needs task.edge_type")
    et = tuple(opts.edge_type)
    name = f"{graph.name}'s edge type {edge_type_key(et)}"
    if opts.split == "given" or (opts.split == "auto" and graph.links):
        raise ConfigError(f"task.split={opts.split} on the typed graph {graph.name}: split "
                          "edges are not read for typed graphs; use task.split=random")
    k = graph.edge_type_index(et)
    rev = reverse_of(et, graph.edge_types)
    edges = type_edges(graph, k)
    if et[0] != et[2] and opts.directed == "undirected":
        raise ConfigError(f"task.directed=undirected: {name} joins two node types, so its "
                          "edges are directed (the reverse type, if any, is held out with "
                          "them); use task.directed=auto")
    undirected = et[0] == et[2] and resolve_directed(graph, opts.directed, edges)
    links = random_split(graph, opts, undirected, edges, name)
    src_range, dst_range = type_ranges(graph.node_type_offset, graph.node_types, et)
    exclude = whole_graph(graph, links, undirected, edges) if opts.reject_edges \
        else (None, None)
    n, groups = graph.num_nodes, {}
    for split, stream in (("val", VAL_NEG), ("test", TEST_NEG)):
        pos = links[f"{split}_pos"]
        src, dst = draw(n, pos[0], torch.arange(pos.shape[1]), opts.eval_negatives,
                        opts.eval_negative_kind, mix_seed(opts.seed, stream), *exclude,
                        src_range=src_range, dst_range=dst_range)
        links[f"{split}_neg"] = torch.stack([src, dst])
        groups[split] = opts.eval_negatives
    held = torch.cat([links["val_pos"], links["test_pos"]], 1)
    message = without_type_edges(graph, held, k, None if rev is None else
                                 graph.edge_type_index(rev), undirected)
    message.links = links
    message.train_idx = torch.unique(links["train_pos"])
    message.meta.update({"link_split": "random", "undirected": undirected,
                         "neg_groups": groups, "link_edge_type": list(et),
                         "source": graph.meta.get("source", graph.name)})
    return message


def folder(graph: GraphStore, opts: SplitOptions) -> Path | None:
    """Where the split of ``graph`` under ``opts`` is stored (None: the graph was not loaded
    from a processed folder, so nothing is stored)."""
    where = graph.meta.get("processed_dir")
    if not where:
        return None
    decided = asdict(opts)
    if decided["edge_type"] is None:  # a homogeneous graph's split keeps its folder
        del decided["edge_type"]
    ident = json.dumps([FORMAT, graph.meta.get("checksum"), decided], sort_keys=True)
    digest = hashlib.blake2b(ident.encode(), digest_size=6).hexdigest()
    base = Path(where).parent
    return base.parent / f"{base.name}-link-{digest}" / "processed"


def load_split(graph: GraphStore, opts: SplitOptions) -> GraphStore:
    """The message graph and split of ``graph`` under ``opts``: processed once beside the
    dataset, then memory-mapped and verified."""
    where = folder(graph, opts)
    if where is None:
        return split_graph(graph, opts)
    if not processed.is_processed(where):
        processed.save(split_graph(graph, opts), where, share=where.parent.parent)
    return processed.load(where)
