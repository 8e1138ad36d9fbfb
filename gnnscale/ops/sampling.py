"""The sampling domain: ``sample_neighbors``, ``random_walk_top_k``, ``negative_sample`` and
``edge_key_table`` (``csrc/sampling/``)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from gnnscale.ops._loader import native


def sample_neighbors(indptr: torch.Tensor, indices: torch.Tensor, weights: torch.Tensor | None,
                     seeds: torch.Tensor, fanouts: Sequence[int] | Sequence[Sequence[int]],
                     replace: bool, seed: int, num_threads: int = 0, *, edge_ids: bool = False,
                     type_per_edge: torch.Tensor | None = None
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

    Typed sampling: given ``type_per_edge`` (int16 ``[E]``, each destination's in-edges sorted
    by type, as :class:`~gnnscale.data.graph.GraphStore` keeps them), ``fanouts`` is a
    ``[hops, num_edge_types]`` table (nested lists or a 2-D tensor): each vertex draws
    ``fanouts[h][t]`` of its in-edges of type ``t`` (-1: all of them, 0: none), independently
    per type, keyed by ``(seed, h, v, t)`` (type 0's draw is the untyped one's).
    """
    num_types = 0
    if type_per_edge is not None:
        table = torch.as_tensor(fanouts, dtype=torch.int64)
        if table.dim() != 2:
            raise ValueError("typed sampling takes fanouts as a [hops, num_edge_types] table, "
                             f"got shape {tuple(table.shape)}")
        num_types = int(table.shape[1])
        fanouts = table.reshape(-1).tolist()
    n_id, counts, edges, e_ids = native().sample_neighbors(
        indptr, indices, weights, seeds, list(fanouts), bool(replace), int(seed),
        int(num_threads), bool(edge_ids), type_per_edge, num_types)
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
