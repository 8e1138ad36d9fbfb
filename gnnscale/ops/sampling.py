"""The sampling domain: ``sample_neighbors`` (and ``typed_runs``, the table of its typed
draws), ``random_walk_top_k``, ``negative_sample`` and ``edge_key_table``
(``csrc/sampling/``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch

from gnnscale.ops._loader import native


class TypedRuns(NamedTuple):
    """Where each destination's in-edges of each type lie, for typed sampling
    (:func:`typed_runs`): for a vertex ``v`` of node type ``d``, ``runs`` (int32) holds at
    ``base[d] + (v - node_type_offset[d]) * K_d`` one entry per edge type entering ``d``
    (``run_types[run_ptr[d]:run_ptr[d + 1]]``, ascending, ``K_d`` of them): the end of that
    type's in-edges relative to ``indptr[v]``; ``base[d]`` sums ``N_d' * K_d'`` over the
    node types before ``d``."""

    runs: torch.Tensor
    node_type_offset: torch.Tensor
    run_ptr: torch.Tensor
    run_types: torch.Tensor
    num_edge_types: int


def typed_runs(indptr: torch.Tensor, type_per_edge: torch.Tensor,
               node_type_offset: torch.Tensor, edge_dst_types: Sequence[int]) -> TypedRuns:
    """The :class:`TypedRuns` of a typed CSC graph, built once per graph (``O(E)``):
    ``type_per_edge`` (int16/int64 ``[E]``) in CSC order, ``node_type_offset`` (``[T_n + 1]``,
    node type ``d`` holds ids ``[offset[d], offset[d + 1])``), ``edge_dst_types[t]``: the node
    type that edge type ``t`` enters. Raises ``ValueError`` in one line unless every edge's
    type is in range and enters its destination's node type, and each destination's in-edges
    are sorted by type (what :class:`~gnnscale.data.graph.GraphStore` keeps)."""
    off = node_type_offset.long().contiguous()
    num_types, num_node_types = len(edge_dst_types), off.numel() - 1
    dst_types = torch.tensor([int(d) for d in edge_dst_types], dtype=torch.int64)
    if num_types == 0 or bool(((dst_types < 0) | (dst_types >= num_node_types)).any()):
        raise ValueError(f"typed_runs: edge_dst_types must name node types in [0, "
                         f"{num_node_types}), got {dst_types.tolist()}")
    entering = [[t for t in range(num_types) if int(dst_types[t]) == d]
                for d in range(num_node_types)]
    kmap = torch.zeros(num_types, dtype=torch.int64)
    for types in entering:
        kmap[types] = torch.arange(len(types))
    n = indptr.numel() - 1
    types = type_per_edge.long()
    if types.numel() != int(indptr[-1]):
        raise ValueError(f"typed_runs: type_per_edge has {types.numel()} entries for "
                         f"{int(indptr[-1])} edges")
    dst = torch.repeat_interleave(torch.arange(n), indptr.diff())
    if types.numel():
        lo, hi = int(types.min()), int(types.max())
        if lo < 0 or hi >= num_types:
            raise ValueError(f"typed_runs: type_per_edge holds types in [{lo}, {hi}], outside "
                             f"[0, {num_types})")
        node_type = torch.bucketize(dst, off[1:], right=True)
        wrong = (dst_types[types] != node_type).nonzero()
        if wrong.numel():
            e = int(wrong[0])
            raise ValueError(f"typed_runs: edge {e} of type {int(types[e])} enters vertex "
                             f"{int(dst[e])} of node type {int(node_type[e])}, not its edge "
                             f"type's node type {int(dst_types[types[e]])}")
        unsorted = ((dst[1:] == dst[:-1]) & (types[1:] < types[:-1])).nonzero()
        if unsorted.numel():
            raise ValueError(f"typed_runs: the in-edges of vertex {int(dst[int(unsorted[0])])} "
                             "are not sorted by edge type")
    parts = []
    for d, ts in enumerate(entering):
        count, k = int(off[d + 1] - off[d]), len(ts)
        if count * k == 0:
            continue
        a, b = int(indptr[off[d]]), int(indptr[off[d + 1]])
        key = (dst[a:b] - off[d]) * k + kmap[types[a:b]]
        parts.append(torch.bincount(key, minlength=count * k).view(count, k).cumsum(1)
                     .to(torch.int32).reshape(-1))
    runs = torch.cat(parts) if parts else torch.empty(0, dtype=torch.int32)
    run_ptr = torch.tensor([0] + [len(ts) for ts in entering]).cumsum(0)
    run_types = torch.tensor([t for ts in entering for t in ts], dtype=torch.int64)
    return TypedRuns(runs, off, run_ptr, run_types, num_types)


def sample_neighbors(indptr: torch.Tensor, indices: torch.Tensor, weights: torch.Tensor | None,
                     seeds: torch.Tensor, fanouts: Sequence[int] | Sequence[Sequence[int]],
                     replace: bool, seed: int, num_threads: int = 0, *, edge_ids: bool = False,
                     typed: TypedRuns | None = None
                     ) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor],
                                list[torch.Tensor] | None]:
    """Multi-hop neighbor sampling over a CSC graph (``indptr`` int64, ``indices`` int64/int32,
    optional float32 edge ``weights``), from int64 ``seeds``, ``fanouts[h]`` per hop (-1: all).

    Returns ``(n_id, counts, edges, e_ids)``: the sampled global ids (seeds first, then each
    hop's new ones), the cumulative vertex counts after each hop (``counts[0]`` = number of
    seeds), per hop a ``(2, E_h)`` edge list in local ids (row 0 source, row 1 destination),
    and, with ``edge_ids``, per hop the int64 ``[E_h]`` global ids of those edges (their
    positions in ``indices``: ``indices[e_id]`` is the source's global id and ``e_id`` lies in
    the destination's ``indptr`` range), else None; asking for them changes nothing else. The
    draw of vertex ``v`` in hop ``h`` is keyed by ``(seed, h, v)``: the same ``seed`` gives the
    same sample whatever the thread count. ``num_threads``: threads to use, the caller included
    (0: ``torch.get_num_threads()`` of the calling thread). Bad inputs raise a ``RuntimeError``
    naming the argument.

    Typed sampling: given ``typed`` (the graph's :func:`typed_runs`), ``fanouts`` is a
    ``[hops, num_edge_types]`` table (nested lists or a 2-D tensor): each vertex draws
    ``fanouts[h][t]`` of its in-edges of type ``t`` (-1: all of them, 0: none), independently
    per type, keyed by ``(seed, h, v, t)`` (type 0's draw is the untyped one's).
    """
    num_types, runs = 0, [None] * 4
    if typed is not None:
        table = torch.as_tensor(fanouts, dtype=torch.int64)
        if table.dim() != 2 or table.shape[1] != typed.num_edge_types:
            raise ValueError("typed sampling takes fanouts as a [hops, num_edge_types="
                             f"{typed.num_edge_types}] table, got shape {tuple(table.shape)}")
        num_types = typed.num_edge_types
        fanouts = table.reshape(-1).tolist()
        runs = list(typed[:4])
    n_id, counts, edges, e_ids = native().sample_neighbors(
        indptr, indices, weights, seeds, list(fanouts), bool(replace), int(seed),
        int(num_threads), bool(edge_ids), *runs, num_types)
    return n_id, counts, edges, (e_ids if edge_ids else None)


def random_walk_top_k(indptr: torch.Tensor, indices: torch.Tensor, targets: torch.Tensor,
                      num_walks: int, walk_length: int, top_k: int, seed: int, hop: int = 0,
                      num_threads: int = 0
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """PinSAGE random-walk neighbourhoods over a CSC graph (``indptr`` int64, ``indices``
    int64/int32) of int64 ``targets``: per target, ``num_walks`` walks of ``walk_length`` steps
    along in-edges (a walk stops at a vertex without in-edges); the ``top_k`` vertices visited
    most often (the target excluded, ties by the smaller id) are kept.

    Returns ``(owner, vertex, count)`` (int64): the target's position in ``targets``, the kept
    vertex's global id and its visit count, grouped by owner, most visited first. Walk ``w`` of
    target ``v`` draws from a counter-based RNG keyed by ``(seed, hop, v, w)``: the result does
    not depend on the thread count (``num_threads``: 0 = ``torch.get_num_threads()``). Bad inputs
    raise a ``RuntimeError`` naming the argument.
    """
    return native().random_walk_top_k(indptr, indices, targets, int(num_walks),
                                      int(walk_length), int(top_k), int(seed), int(hop),
                                      int(num_threads))


def negative_sample(num_nodes: int, keys: torch.Tensor, k: int, seed: int, *,
                    sources: torch.Tensor | None = None, indptr: torch.Tensor | None = None,
                    indices: torch.Tensor | None = None, max_tries: int = 64,
                    num_threads: int = 0, edge_table: torch.Tensor | None = None,
                    src_range: tuple[int, int] | None = None,
                    dst_range: tuple[int, int] | None = None
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """``k`` negative pairs for each int64 key in ``keys`` (a positive edge's global id):
    ``(src, dst)``, int64 ``[len(keys) * k]``, the negatives of key ``i`` at
    ``[i * k, (i + 1) * k)``.

    ``sources`` None draws both endpoints uniformly over ``[0, num_nodes)``; else ``sources[i]``
    is kept and only the target is drawn (per-source corruption). ``src_range`` /
    ``dst_range`` ``(lo, hi)`` narrow the drawn source / target to ``[lo, hi)`` (on a typed
    graph: the id ranges of an edge type's source and destination node types); the full range
    draws the same as none. With a CSC graph
    (``indptr`` int64, ``indices`` int64/int32, each vertex's in-neighbours sorted ascending) a
    self loop or an edge ``src -> dst`` of it is drawn again, up to ``max_tries`` times. Key
    ``i``'s draws come from a counter-based RNG keyed by ``(seed, keys[i])``: the same whatever
    the batch, rank or thread count. ``edge_table`` (:func:`edge_key_table` of the same graph)
    makes the edge test one hash probe instead of a binary search: the same negatives. Bad
    inputs raise a ``RuntimeError`` naming the argument.
    """
    empty = torch.empty(0, dtype=torch.int64)
    mode = 0 if sources is None else 1

    def span(r: tuple[int, int] | None) -> list[int] | None:
        return None if r is None else [int(x) for x in r]

    return native().negative_sample(
        empty if indptr is None else indptr, empty if indices is None else indices,
        empty if sources is None else sources.long(), keys.long(), int(num_nodes), int(k),
        mode, int(seed), int(max_tries), int(num_threads), edge_table, span(src_range),
        span(dst_range))


def edge_key_table(indptr: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """The edges of a CSC graph (``indptr`` int64, ``indices`` int64/int32) as an
    open-addressing hash of the keys ``dst * num_nodes + src``: int64, a power of two slots at
    least twice the edges (``16 * edges`` bytes at most), empty slots -1; what
    :func:`negative_sample` probes for its edge test."""
    return native().edge_key_table(indptr, indices)
