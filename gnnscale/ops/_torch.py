"""The torch-only path of the native ops: one function per ``torch.ops.gnnscale`` schema, with
the schema's arguments, used when the extension is absent or fails to load
(:mod:`gnnscale.ops._loader`).

Each function returns what the native kernel returns. The seeded ops replay the kernels'
counter-based RNG (``csrc/utils/rng.h``: splitmix64 keyed by (seed, hop, vertex)) in int64 torch
arithmetic (wrapping multiplication, logical shifts emulated by masking), so their samples are
the native samples, bit for bit; the one exception is :func:`edge_key_table`, whose slots hold
the same keys as the native table, possibly in other slots (its only reader,
:func:`negative_sample`, answers the same). ``num_threads`` is accepted and unused. The split
ops (``split_sample``, ``split_sample_all``) live in :mod:`gnnscale.ops._torch_split`, re-exported
here, so every schema has its torch-only function.
"""

from __future__ import annotations

import ctypes
import math
import sys
from collections.abc import Sequence

import torch

_GOLDEN = 0x9E3779B97F4A7C15
_RNG_IV = 0x6A09E667F3BCC909
_M1, _M2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
_MASK64 = (1 << 64) - 1
_LO32 = 0xFFFFFFFF
_FLOYD_MAX = 64          # neighbor_draw.h kFloydMax
_TYPE_SALT = 0xA0761D6478BD642F
_WALK_SALT = 0x7A3D1E5B9C4F2861
_NEG_SALT = 0x3C6EF372FE94F82B


class NativeMissing(RuntimeError):
    """An op that has no torch-only path was called without the native extension."""


def _signed(c: int) -> int:
    """An unsigned 64-bit value as the int64 with the same bits."""
    c &= _MASK64
    return c - (1 << 64) if c >= 1 << 63 else c


def _mix_py(z: int) -> int:
    """``mix64`` of ``csrc/utils/rng.h`` on a Python int (unsigned 64-bit)."""
    z &= _MASK64
    z = ((z ^ (z >> 30)) * _M1) & _MASK64
    z = ((z ^ (z >> 27)) * _M2) & _MASK64
    return z ^ (z >> 31)


def _shr(z: torch.Tensor, k: int) -> torch.Tensor:
    """Logical right shift of int64 bits (torch's ``>>`` is arithmetic)."""
    return (z >> k) & ((1 << (64 - k)) - 1)


def _mix(z: torch.Tensor) -> torch.Tensor:
    """``mix64`` element-wise on an int64 tensor (bits read as unsigned)."""
    z = (z ^ _shr(z, 30)) * _signed(_M1)
    z = (z ^ _shr(z, 27)) * _signed(_M2)
    return z ^ _shr(z, 31)


def _rng_state(seed: int | torch.Tensor, hop: int, vertex: torch.Tensor) -> torch.Tensor:
    """The initial state of ``KeyedRng(seed, hop, vertex)`` per vertex (``seed`` one Python
    int or an int64 tensor of the same length)."""
    if isinstance(seed, torch.Tensor):
        s = _mix(seed ^ _signed(_RNG_IV))
        s = _mix(s ^ _signed(hop + 1))
    else:
        s = _signed(_mix_py(_mix_py((seed & _MASK64) ^ _RNG_IV) ^ ((hop + 1) & _MASK64)))
    return _mix(vertex.long() ^ s)


def _draw(state: torch.Tensor, i: torch.Tensor | int) -> torch.Tensor:
    """The ``i``-th ``next()`` (1-based) of generators in ``state``."""
    return _mix(state + torch.as_tensor(i, dtype=torch.int64) * _signed(_GOLDEN))


def _below(z: torch.Tensor, n: torch.Tensor | int) -> torch.Tensor:
    """``KeyedRng::below``: the high 64 bits of ``z * n`` (z unsigned, 0 < n < 2^63)."""
    n = torch.as_tensor(n, dtype=torch.int64)
    a, b = _shr(z, 32), z & _LO32
    c, d = n >> 32, n & _LO32
    mid1 = a * d + _shr(b * d, 32)
    mid2 = b * c + (mid1 & _LO32)
    return a * c + _shr(mid1, 32) + _shr(mid2, 32)


def _open01(z: torch.Tensor) -> torch.Tensor:
    """``KeyedRng::open01``: a float64 in (0, 1]."""
    return (_shr(z, 11).double() + 1.0) * 2.0 ** -53


def _check(cond: bool, msg: str) -> None:
    if not cond:
        raise RuntimeError(msg)


def _check_range(t: torch.Tensor, n: int, msg) -> None:
    if t.numel():
        lo, hi = int(t.min()), int(t.max())
        _check(lo >= 0 and hi < n, msg(lo, hi))


# ---------------------------------------------------------------------------------- gather


def gather_rows(table: torch.Tensor, ids: torch.Tensor, num_threads: int = 0) -> torch.Tensor:
    """``table[ids]``."""
    _check_gather(table, ids)
    return table[_checked_ids(ids, table.shape[0])]


def gather_rows_out(table: torch.Tensor, ids: torch.Tensor, out: torch.Tensor,
                    num_threads: int = 0) -> torch.Tensor:
    """``table[ids]`` into ``out``."""
    _check_gather(table, ids)
    shape = [ids.numel(), *table.shape[1:]]
    _check(out.device.type == "cpu" and out.dtype == table.dtype and list(out.shape) == shape
           and out.is_contiguous(),
           f"gather_rows: out must be a contiguous CPU tensor of dtype {table.dtype} and shape "
           f"{shape}, got {out.dtype} {list(out.shape)}")
    torch.index_select(table, 0, _checked_ids(ids, table.shape[0]), out=out)
    return out


def _check_gather(table: torch.Tensor, ids: torch.Tensor) -> None:
    _check(table.device.type == "cpu" and ids.device.type == "cpu",
           "gather_rows: table and ids must be CPU tensors")
    _check(table.dim() >= 1, "gather_rows: table must have at least one dimension")
    _check(ids.dim() == 1, f"gather_rows: ids must be 1-D, got shape {list(ids.shape)}")
    _check(ids.dtype in (torch.int64, torch.int32),
           f"gather_rows: ids must be int64 or int32, got {ids.dtype}")


def _checked_ids(ids: torch.Tensor, rows: int) -> torch.Tensor:
    bad = ((ids < 0) | (ids >= rows)).nonzero()
    if bad.numel():
        i = int(bad[0])
        raise RuntimeError(f"gather_rows: ids[{i}] = {int(ids[i])} is out of range for a table "
                           f"with {rows} rows")
    return ids.long()


def advise_huge_pages(t: torch.Tensor) -> bool:
    """``madvise(MADV_HUGEPAGE)`` on the 2 MiB-aligned interior of ``t``'s memory, via libc."""
    huge = 1 << 21
    if not sys.platform.startswith("linux") or t.device.type != "cpu" or \
            t.numel() * t.element_size() < 4 * huge:
        return False
    begin = t.data_ptr()
    lo = (begin + huge - 1) & ~(huge - 1)
    hi = (begin + t.numel() * t.element_size()) & ~(huge - 1)
    if hi <= lo:
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    return libc.madvise(ctypes.c_void_p(lo), ctypes.c_size_t(hi - lo), 14) == 0  # MADV_HUGEPAGE


# ---------------------------------------------------------------------------------- dropout


def keyed_dropout(h: torch.Tensor, p: float, key: int, ids: torch.Tensor | None = None,
                  num_threads: int = 0) -> torch.Tensor:
    """The keyed inverted dropout of ``csrc/dropout/``: the same mask and bits."""
    _check(h.device.type == "cpu", "keyed_dropout: h must be a CPU tensor")
    _check(h.dim() == 2, f"keyed_dropout: h must be 2-D (rows x channels), got shape "
           f"{list(h.shape)}")
    _check(h.dtype in (torch.float32, torch.float64),
           f"keyed_dropout: h must be float32 or float64, got {h.dtype}")
    _check(0.0 <= p < 1.0, f"keyed_dropout: p must be in [0, 1), got {p}")
    if ids is not None:
        _check(ids.device.type == "cpu" and ids.dim() == 1,
               "keyed_dropout: ids must be a 1-D CPU tensor")
        _check(ids.dtype in (torch.int64, torch.int32),
               f"keyed_dropout: ids must be int64 or int32, got {ids.dtype}")
        _check(ids.numel() == h.shape[0],
               f"keyed_dropout: got {ids.numel()} row ids for {h.shape[0]} rows")
    rows, cols = h.shape
    row_ids = torch.arange(rows) if ids is None else ids.long()
    threshold = math.ceil(float(torch.tensor(p, dtype=torch.float32)) * 16777216.0)
    stream = _mix((row_ids ^ _signed(key)) + _signed(_GOLDEN)).view(-1, 1)
    col = (torch.arange(cols, dtype=torch.int64) * _signed(_GOLDEN) + _signed(_GOLDEN))
    out = torch.empty_like(h)
    step = max(1, (1 << 20) // max(cols, 1))
    scale = torch.tensor(1.0 / (1.0 - p), dtype=h.dtype)
    for s in range(0, rows, step):
        keep = _shr(_mix(stream[s: s + step] + col), 40) >= threshold
        out[s: s + step] = h[s: s + step] * keep.to(h.dtype) * scale
    return out


# ---------------------------------------------------------------------------------- pairs


def _check_pairs(rows, src, dst, grad=None) -> None:
    _check(rows.device.type == "cpu" and src.device.type == "cpu" and dst.device.type == "cpu",
           "pair_product: rows, src and dst must be CPU tensors")
    _check(rows.dim() == 2, f"pair_product: rows must be 2-D (rows x width), got shape "
           f"{list(rows.shape)}")
    _check(rows.dtype in (torch.float32, torch.float64),
           f"pair_product: rows must be float32 or float64, got {rows.dtype}")
    _check(src.dim() == 1 and dst.dim() == 1 and src.numel() == dst.numel(),
           "pair_product: src and dst must be 1-D and as long as each other, got "
           f"{list(src.shape)} and {list(dst.shape)}")
    _check(src.dtype == torch.int64 and dst.dtype == torch.int64,
           f"pair_product: src and dst must be int64, got {src.dtype} and {dst.dtype}")
    n = rows.shape[0]
    for t in (src, dst):
        _check_range(t, n, lambda lo, hi: f"pair_product: pair ends hold ids in [{lo}, {hi}] "
                     f"but rows has {n} rows")
    if grad is not None:
        _check(grad.device.type == "cpu" and grad.dtype == rows.dtype,
               f"pair_product_backward: grad must be a CPU tensor of rows' dtype {rows.dtype}, "
               f"got {grad.dtype}")
        p = src.numel()
        ok = (grad.dim() == 1 and grad.shape[0] == p) or \
            (grad.dim() == 2 and grad.shape[0] == p and grad.shape[1] == rows.shape[1])
        _check(ok, f"pair_product_backward: grad must be [{p}] or [{p}, {rows.shape[1]}], got "
               f"{list(grad.shape)}")


def pair_product(rows: torch.Tensor, src: torch.Tensor, dst: torch.Tensor,
                 reduce: bool) -> torch.Tensor:
    """``(rows[src] * rows[dst])``, summed over the last dimension when ``reduce``."""
    _check_pairs(rows, src, dst)
    out = rows[src] * rows[dst]
    return out.sum(-1) if reduce else out


def pair_product_backward(grad: torch.Tensor, rows: torch.Tensor, src: torch.Tensor,
                          dst: torch.Tensor, num_threads: int = 0) -> torch.Tensor:
    """Autograd's gradient of :func:`pair_product` with respect to ``rows``."""
    _check_pairs(rows, src, dst, grad)
    with torch.enable_grad():
        r = rows.detach().requires_grad_(True)
        out = r[src] * r[dst]
        if grad.dim() == 1:
            out = out.sum(-1)
        (g,) = torch.autograd.grad(out, r, grad)
    return g


# ---------------------------------------------------------------------------------- deps


def hybrid_greedy(recompute_cost: torch.Tensor, comm_cost: torch.Tensor,
                  mem_bytes: torch.Tensor | None, budget: float | None,
                  mu: float) -> torch.Tensor:
    """The greedy step (``csrc/deps/greedy.h``) vectorised."""
    n = recompute_cost.numel()
    _check(comm_cost.numel() in (1, n), "hybrid_greedy: comm_cost needs one value or one per "
           f"candidate ({n}), got {comm_cost.numel()}")
    _check(mem_bytes is None or mem_bytes.numel() == n, "hybrid_greedy: mem_bytes needs one "
           f"value per candidate ({n}), got {0 if mem_bytes is None else mem_bytes.numel()}")
    t_r = recompute_cost.double().reshape(-1)
    t_c = comm_cost.double().reshape(-1).expand(n)
    take = mu * t_r < t_c
    if budget is None or mem_bytes is None:
        return take.view(recompute_cost.shape)
    order = take.nonzero().flatten()
    order = order[torch.argsort(t_r[order], stable=True)]
    mem = mem_bytes.double().reshape(-1)[order]
    used, stop = 0.0, order.numel()
    for i, m in enumerate(mem.tolist()):  # sequential double sums, as the kernel's
        if not used + m <= budget:
            stop = i
            break
        used += m
    mask = torch.zeros(n, dtype=torch.bool)
    mask[order[:stop]] = True
    return mask.view(recompute_cost.shape)


def _check_graph_ids(indptr, indices, ids, op: str) -> None:
    _check(indptr.dim() == 1 and indptr.numel() >= 1 and indptr.dtype == torch.int64,
           f"{op}: indptr must be a 1-D int64 CSC pointer (num_nodes + 1 entries)")
    _check(indices.dim() == 1 and indices.dtype in (torch.int64, torch.int32),
           f"{op}: indices must be 1-D int64 or int32")
    _check(ids.dim() == 1 and ids.dtype == torch.int64, f"{op}: ids must be 1-D int64")
    n = indptr.numel() - 1
    if ids.numel():
        _check(int(ids.min()) >= 0 and int(ids.max()) < n, f"{op}: id out of [0, num_nodes)")


def _check_subtree(indptr, indices, cand, ok) -> None:
    _check_graph_ids(indptr, indices, cand, "subtree")
    n = indptr.numel() - 1
    _check(len(ok) > 0, "subtree: needs one availability mask per layer 0..k")
    for m in ok:
        _check(m.dim() == 1 and m.numel() == n and m.dtype == torch.bool,
               "subtree: every availability mask must be a bool tensor of num_nodes entries")


def _edges_of(indptr: torch.Tensor, indices: torch.Tensor,
              ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """In-edges of ``ids`` in CSC order: (source, position of the destination in ``ids``)."""
    start = indptr[ids]
    deg = indptr[ids + 1] - start
    pos = torch.repeat_interleave(torch.arange(ids.numel()), deg)
    first = torch.cumsum(deg, 0) - deg
    offset = torch.arange(pos.numel()) - first[pos]
    return indices[start[pos] + offset].long(), pos


def in_edges(indptr: torch.Tensor, indices: torch.Tensor, ids: torch.Tensor,
             num_threads: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """In-edges of ``ids`` in CSC order."""
    _check_graph_ids(indptr, indices, ids, "in_edges")
    return _edges_of(indptr, indices, ids)


def needed_mask(indptr: torch.Tensor, indices: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Bool mask of ``ids`` and their in-neighbours."""
    _check_graph_ids(indptr, indices, ids, "needed_mask")
    need = torch.zeros(indptr.numel() - 1, dtype=torch.bool)
    need[ids] = True
    need[_edges_of(indptr, indices, ids)[0]] = True
    return need


def _subtrees(indptr, indices, cand, ok):
    """Per level j = k..0: (candidate index, row) of every candidate's subtree, rows of one
    candidate ascending (the order the kernel sums its costs in)."""
    n, k = indptr.numel() - 1, len(ok) - 1
    ci, v = torch.arange(cand.numel()), cand
    for j in range(k, -1, -1):
        keep = ~ok[j][v]
        ci, v = ci[keep], v[keep]
        yield j, ci, v
        if j == 0 or v.numel() == 0:
            return
        src, pos = _edges_of(indptr, indices, v)
        key = torch.unique(torch.cat([ci[pos] * n + src, ci * n + v]))
        ci, v = key // n, key % n


def subtree_costs(indptr: torch.Tensor, indices: torch.Tensor, cand: torch.Tensor,
                  ok: Sequence[torch.Tensor], dims: Sequence[int], layer_costs: torch.Tensor,
                  edge_bytes: int, num_threads: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Recomputation cost and bytes of each candidate's subtree (``csrc/deps/``)."""
    _check_subtree(indptr, indices, cand, ok)
    L = len(dims) - 1
    _check(L >= 1 and len(ok) <= L,
           "subtree_costs: needs dims for layers 0..L and at most L availability masks")
    _check(layer_costs.numel() == 3 * (L + 1),
           "subtree_costs: layer_costs must hold 3 * (L + 1) values")
    lc = layer_costs.double().reshape(-1)
    edge_c, vert_c = lc[L + 1: 2 * L + 2], lc[2 * L + 2:]
    cost = torch.zeros(cand.numel(), dtype=torch.float64)
    mem = torch.zeros(cand.numel(), dtype=torch.float64)
    for j, ci, v in _subtrees(indptr, indices, cand, ok):
        row = torch.full((v.numel(),), 4.0 * dims[j], dtype=torch.float64)
        if j >= 1:
            d = (indptr[v + 1] - indptr[v]).double()
            cost.index_add_(0, ci, vert_c[j - 1] + d * edge_c[j - 1])
            row = row + float(edge_bytes) * d
        mem.index_add_(0, ci, row)
    return cost, mem


def subtree_rows(indptr: torch.Tensor, indices: torch.Tensor, cand: torch.Tensor,
                 take: torch.Tensor, ok: Sequence[torch.Tensor],
                 num_threads: int = 0) -> list[torch.Tensor]:
    """Per level, the rows in the subtrees of the candidates with ``take`` set."""
    _check_subtree(indptr, indices, cand, ok)
    _check(take.numel() == cand.numel() and take.dtype == torch.bool,
           "subtree_rows: take must be a bool mask with one entry per candidate")
    out = [torch.zeros(indptr.numel() - 1, dtype=torch.bool) for _ in ok]
    for j, _, v in _subtrees(indptr, indices, cand[take], ok):
        out[j][v] = True
    return out


# ---------------------------------------------------------------------------------- sampling


def _heap_push(heap: list, hole: int, top: int, value) -> None:
    """libstdc++'s ``__push_heap`` with ``std::greater`` (a min-heap)."""
    parent = (hole - 1) // 2
    while hole > top and heap[parent] > value:
        heap[hole] = heap[parent]
        hole = parent
        parent = (hole - 1) // 2
    heap[hole] = value


def _heap_pop_replace(heap: list, value) -> None:
    """``pop_heap`` over the whole heap, then its last slot set to ``value`` and
    ``push_heap``: libstdc++'s steps, so the heap's layout is the kernel's."""
    n = len(heap)
    if n > 1:
        last = heap[n - 1]
        heap[n - 1] = heap[0]
        length, hole, second = n - 1, 0, 0  # __adjust_heap(first, 0, n - 1, last)
        while second < (length - 1) // 2:
            second = 2 * (second + 1)
            if heap[second] > heap[second - 1]:
                second -= 1
            heap[hole] = heap[second]
            hole = second
        if length % 2 == 0 and second == (length - 2) // 2:
            second = 2 * (second + 1)
            heap[hole] = heap[second - 1]
            hole = second - 1
        _heap_push(heap, hole, 0, last)
    heap[n - 1] = value
    _heap_push(heap, n - 1, 0, value)


def _segment_draws(start: torch.Tensor, end: torch.Tensor, fanout: torch.Tensor,
                   state: torch.Tensor, weights: torch.Tensor | None,
                   replace: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """``NeighborDraw::draw_range`` for every segment ``[start, end)`` of edge positions (its
    ``fanout``, its generator's ``state``): (the drawn positions, segment after segment; the
    count of each segment). Raises on a negative or NaN weight of a segment with fanout >= 0."""
    deg = end - start
    if weights is None:
        avail = deg
    else:
        pos_cum = torch.cat([torch.zeros(1, dtype=torch.int64), (weights > 0).long().cumsum(0)])
        bad_cum = torch.cat([torch.zeros(1, dtype=torch.int64),
                             (~(weights >= 0)).long().cumsum(0)])
        bad = (bad_cum[end] - bad_cum[start]) > 0
        _check(not bool((bad & (fanout >= 0)).any()),
               "sample_neighbors: edge weights must be non-negative and not NaN")
        avail = pos_cum[end] - pos_cum[start]
    if replace:
        count = torch.where(avail > 0, fanout, torch.zeros_like(fanout))
    else:
        count = torch.minimum(fanout, avail)
    count = torch.where(fanout < 0, deg, count)
    total = int(count.sum())
    out = torch.empty(total, dtype=torch.int64)
    seg = torch.repeat_interleave(torch.arange(start.numel()), count)
    base = torch.cumsum(count, 0) - count
    k = torch.arange(total) - base[seg]  # the draw's rank in its segment
    copy = fanout < 0
    if weights is None:
        if replace:
            rand = ~copy
            sel = rand[seg]
            z = _draw(state[seg[sel]], k[sel] + 1)
            out[sel] = start[seg[sel]] + _below(z, deg[seg[sel]])
        else:
            copy = copy | (count == deg)
            floyd = ~copy & (count <= _FLOYD_MAX)
            _floyd(start, deg, count, state, floyd, base, out)
            for s in (~copy & ~floyd).nonzero().flatten().tolist():
                _partial_shuffle(int(start[s]), int(deg[s]), int(count[s]), state[s: s + 1],
                                 out, int(base[s]))
    else:
        for s in (~copy & (count > 0)).nonzero().flatten().tolist():
            a, b, c, at = int(start[s]), int(end[s]), int(count[s]), int(base[s])
            w = weights[a:b]
            if replace:
                cum = w.clamp(min=0).double().cumsum(0)
                z = _draw(state[s: s + 1].expand(c), torch.arange(1, c + 1))
                x = (1.0 - _open01(z)) * cum[-1]
                p = torch.searchsorted(cum, x, right=True).clamp(max=b - a - 1)
                out[at: at + c] = a + p
            else:
                out[at: at + c] = a + _weighted_no_replace(w, c, state[s: s + 1])
    sel = copy[seg]
    out[sel] = start[seg[sel]] + k[sel]
    return out, count


def _floyd(start, deg, count, state, which, base, out) -> None:
    """Floyd's subset sampling, vectorised over the segments ``which`` (one step per draw)."""
    idx = which.nonzero().flatten()
    if idx.numel() == 0:
        return
    c, d, st = count[idx], deg[idx], state[idx]
    width = int(c.max())
    pos = torch.full((idx.numel(), width), -1, dtype=torch.int64)
    for m in range(width):
        j = d - c + m
        t = _below(_draw(st, m + 1), j + 1)
        hit = (pos[:, :m] == t.view(-1, 1)).any(1)
        pos[:, m] = torch.where(hit, j, t)
    live = torch.arange(width).view(1, -1) < c.view(-1, 1)
    rows = torch.repeat_interleave(torch.arange(idx.numel()), c)
    at = base[idx][rows] + (torch.arange(int(c.sum())) - (torch.cumsum(c, 0) - c)[rows])
    out[at] = start[idx][rows] + pos[live]


def _partial_shuffle(start: int, deg: int, c: int, state: torch.Tensor, out: torch.Tensor,
                     at: int) -> None:
    """The first ``c`` steps of a Fisher-Yates shuffle of ``[0, deg)``."""
    k = torch.arange(c)
    r = _below(_draw(state.expand(c), k + 1), deg - k).tolist()
    perm: dict[int, int] = {}
    for i in range(c):
        j = i + r[i]
        perm[i], perm[j] = perm.get(j, j), perm.get(i, i)
        out[at + i] = start + perm[i]


def _weighted_no_replace(w: torch.Tensor, c: int, state: torch.Tensor) -> torch.Tensor:
    """Efraimidis-Spirakis with the kernel's heap (so its order): positions in ``w``."""
    pos = (w > 0).nonzero().flatten()
    u = _open01(_draw(state.expand(pos.numel()), torch.arange(1, pos.numel() + 1))).tolist()
    wd = w[pos].double().tolist()
    heap: list = []
    for k, uk, wk in zip(pos.tolist(), u, wd):
        key = math.log(uk) / wk
        if len(heap) < c:
            heap.append((key, k))
            _heap_push(heap, len(heap) - 1, 0, (key, k))
        elif key > heap[0][0]:
            _heap_pop_replace(heap, (key, k))
    return torch.tensor([k for _, k in heap[:c]], dtype=torch.int64)


def _check_sample(indptr, indices, weights, seeds, fanouts) -> None:
    for t in (indptr, indices, seeds):
        _check(t.device.type == "cpu" and t.dim() == 1,
               "sample_neighbors: indptr, indices and seeds must be 1-D CPU tensors")
    _check(indptr.dtype == torch.int64, f"sample_neighbors: indptr must be int64, got "
           f"{indptr.dtype}")
    _check(indptr.numel() >= 1, "sample_neighbors: indptr needs num_nodes + 1 entries")
    _check(indices.dtype in (torch.int64, torch.int32),
           f"sample_neighbors: indices must be int64 or int32, got {indices.dtype}")
    _check(int(indptr[-1]) == indices.numel(), f"sample_neighbors: indptr[-1] = "
           f"{int(indptr[-1])} but indices has {indices.numel()} entries")
    _check(seeds.dtype == torch.int64, f"sample_neighbors: seeds must be int64, got "
           f"{seeds.dtype}")
    _check(len(fanouts) > 0, "sample_neighbors: fanouts is empty; give one fanout per layer")
    for f in fanouts:
        _check(f >= -1, f"sample_neighbors: fanouts must be -1 (all neighbors) or >= 0, got {f}")
    if weights is not None:
        _check(weights.device.type == "cpu" and weights.dim() == 1 and
               weights.numel() == indices.numel(),
               "sample_neighbors: weights must be a 1-D CPU tensor with one entry per edge "
               f"({indices.numel()}), got shape {list(weights.shape)}")
        _check(weights.dtype == torch.float32,
               f"sample_neighbors: weights must be float32, got {weights.dtype}")
    n = indptr.numel() - 1
    _check_range(seeds, n, lambda lo, hi: f"sample_neighbors: seeds hold ids in [{lo}, {hi}] "
                 f"but the graph has {n} nodes (ids must be in [0, {n}))")


def _check_runs(runs, num_nodes: int, fanouts, num_types: int) -> list[int]:
    """The checks of the run table (sample_neighbors.cpp); returns each node type's base."""
    _check(all(t.device.type == "cpu" and t.dim() == 1 for t in runs),
           "sample_neighbors: typed_runs must hold 1-D CPU tensors")
    _check(runs[0].dtype == torch.int32,
           f"sample_neighbors: the run table must be int32, got {runs[0].dtype}")
    _check(all(t.dtype == torch.int64 for t in runs[1:]),
           "sample_neighbors: node_type_offset, run_ptr and run_types must be int64")
    _check(num_types >= 1, f"sample_neighbors: num_edge_types must be >= 1, got {num_types}")
    _check(len(fanouts) % num_types == 0, "sample_neighbors: typed fanouts must be a [hops, "
           f"num_edge_types] table ({num_types} entries a hop), got {len(fanouts)} entries")
    off, ptr, types = runs[1].tolist(), runs[2].tolist(), runs[3]
    node_types = len(off) - 1
    _check(node_types >= 1 and len(ptr) == node_types + 1,
           "sample_neighbors: node_type_offset and run_ptr need num_node_types + 1 entries")
    _check(off[0] == 0 and off[-1] == num_nodes and ptr[0] == 0 and ptr[-1] == types.numel(),
           f"sample_neighbors: node_type_offset must run from 0 to num_nodes ({num_nodes}) and "
           "run_ptr from 0 to the number of run_types")
    base, rows = [], 0
    for d in range(node_types):
        _check(off[d + 1] >= off[d] and ptr[d + 1] >= ptr[d],
               "sample_neighbors: node_type_offset and run_ptr must not decrease")
        base.append(rows)
        rows += (off[d + 1] - off[d]) * (ptr[d + 1] - ptr[d])
    _check(runs[0].numel() == rows, f"sample_neighbors: the run table has {runs[0].numel()} "
           f"entries, its layout needs {rows} (build it with typed_runs)")
    _check_range(types, num_types, lambda lo, hi: "sample_neighbors: run_types hold edge types "
                 f"in [{lo}, {hi}], outside [0, {num_types})")
    return base


def _typed_segments(indptr, runs, base, v: torch.Tensor, fan: torch.Tensor, seed: int,
                    hop: int):
    """The segments of typed draws of destinations ``v`` in one hop: per destination, per
    edge type entering its node type (ascending), the run of its in-edges of that type."""
    table, off, ptr, types = runs
    d = torch.bucketize(v, off[1:], right=True)
    k = ptr[d + 1] - ptr[d]
    owner = torch.repeat_interleave(torch.arange(v.numel()), k)
    j = torch.arange(owner.numel()) - (torch.cumsum(k, 0) - k)[owner]
    dv, vv = d[owner], v[owner]
    row = torch.tensor(base, dtype=torch.int64)[dv] + (vv - off[dv]) * k[owner]
    ends = indptr[vv] + table[row + j].long()
    starts = torch.where(j == 0, indptr[vv], torch.cat([ends[:1], ends[:-1]]))
    t = types[ptr[dv] + j]
    last = torch.cumsum(k, 0) - 1
    ok = bool(((ends >= starts) & (ends <= indptr[vv + 1])).all()) and \
        bool((ends[last[k > 0]] == indptr[v[k > 0] + 1]).all()) and \
        bool((indptr[v[k == 0] + 1] == indptr[v[k == 0]]).all())
    _check(ok, "sample_neighbors: the run table does not cover every destination's in-edges "
           "in order: build it with typed_runs from the same graph")
    f = fan[t]
    seeds = torch.tensor([_signed(seed if i == 0 else _mix_py(seed ^ (_TYPE_SALT * i)))
                          for i in range(fan.numel())], dtype=torch.int64)
    state = _rng_state(seeds[t], hop, vv)
    keep = f != 0
    return owner[keep], starts[keep], ends[keep], f[keep], state[keep]


def _relabel(n_id: torch.Tensor, src: torch.Tensor,
             num_nodes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Local ids of ``src`` over ``n_id`` (its first entry of an id wins), new ids appended
    in order of first appearance: (the new n_id, the local ids)."""
    m = n_id.numel()
    if num_nodes <= 4 * (m + src.numel()) + (1 << 20):  # a dense map: no sort of every id
        big = m + src.numel()
        first = torch.full((num_nodes,), big, dtype=torch.int64)
        first.scatter_reduce_(0, n_id, torch.arange(m), reduce="amin")
        known = first < big
        first.scatter_reduce_(0, src, torch.arange(m, big), reduce="amin")
        new = ((first < big) & ~known).nonzero().flatten()
        new = new[torch.argsort(first[new])]
        first[new] = m + torch.arange(new.numel())
        return torch.cat([n_id, new]), first[src]
    both = torch.cat([n_id, src])
    uniq, inv = torch.unique(both, return_inverse=True)
    first = torch.full((uniq.numel(),), both.numel(), dtype=torch.int64)
    first.scatter_reduce_(0, inv, torch.arange(both.numel()), reduce="amin")
    new = (first >= m).nonzero().flatten()
    new = new[torch.argsort(first[new])]
    local = first.clone()
    local[new] = m + torch.arange(new.numel())
    return torch.cat([n_id, uniq[new]]), local[inv[m:]]


def sample_neighbors(indptr: torch.Tensor, indices: torch.Tensor, weights: torch.Tensor | None,
                     seeds: torch.Tensor, fanouts: Sequence[int], replace: bool, seed: int,
                     num_threads: int = 0, return_edge_ids: bool = False,
                     type_runs: torch.Tensor | None = None,
                     node_type_offset: torch.Tensor | None = None,
                     run_ptr: torch.Tensor | None = None, run_types: torch.Tensor | None = None,
                     num_edge_types: int = 0):
    """Multi-hop neighbor sampling (``csrc/sampling/cpu/sample_neighbors_kernel.cpp``): the
    same n_id, counts, edges and edge ids."""
    fanouts = [int(f) for f in fanouts]
    _check_sample(indptr, indices, weights, seeds, fanouts)
    typed = type_runs is not None
    if typed:
        _check(node_type_offset is not None and run_ptr is not None and run_types is not None,
               "sample_neighbors: typed sampling needs type_runs, node_type_offset, run_ptr "
               "and run_types (typed_runs)")
        runs = [type_runs, node_type_offset, run_ptr, run_types]
        base = _check_runs(runs, indptr.numel() - 1, fanouts, num_edge_types)
    num_nodes = indptr.numel() - 1
    s = int(seed) & _MASK64
    n_id = seeds.clone()
    counts, edges, e_ids = [seeds.numel()], [], []
    hops = len(fanouts) // num_edge_types if typed else len(fanouts)
    for h in range(hops):
        v = n_id
        if typed:
            fan = torch.tensor(fanouts[h * num_edge_types: (h + 1) * num_edge_types])
            owner, start, end, f, state = _typed_segments(indptr, runs, base, v, fan, s, h)
        else:
            owner, start, end = torch.arange(v.numel()), indptr[v], indptr[v + 1]
            f = torch.full((v.numel(),), fanouts[h], dtype=torch.int64)
            state = _rng_state(s, h, v)
        pos, count = _segment_draws(start, end, f, state, weights, replace)
        dst = torch.repeat_interleave(owner, count)
        src = indices[pos].long()
        _check_range(src, num_nodes, lambda lo, hi: f"sample_neighbors: the graph's indices "
                     f"hold id {lo if lo < 0 else hi} outside [0, {num_nodes})")
        n_id, local = _relabel(n_id, src, num_nodes)
        edges.append(torch.stack([local, dst]))
        if return_edge_ids:
            e_ids.append(pos)
        counts.append(n_id.numel())
    return n_id, torch.tensor(counts, dtype=torch.int64), edges, e_ids


def random_walk_top_k(indptr: torch.Tensor, indices: torch.Tensor, targets: torch.Tensor,
                      num_walks: int, walk_length: int, top_k: int, seed: int, hop: int,
                      num_threads: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """PinSAGE walks (``csrc/sampling/cpu/random_walk_kernel.cpp``): the same walks, counts
    and order, all walks advanced one step at a time."""
    for t in (indptr, indices, targets):
        _check(t.device.type == "cpu" and t.dim() == 1,
               "random_walk_top_k: indptr, indices and targets must be 1-D CPU tensors")
    _check(indptr.dtype == torch.int64,
           f"random_walk_top_k: indptr must be int64, got {indptr.dtype}")
    _check(indptr.numel() >= 1, "random_walk_top_k: indptr needs num_nodes + 1 entries")
    _check(indices.dtype in (torch.int64, torch.int32),
           f"random_walk_top_k: indices must be int64 or int32, got {indices.dtype}")
    _check(int(indptr[0]) == 0 and int(indptr[-1]) == indices.numel(),
           f"random_walk_top_k: indptr must run from 0 to the number of indices "
           f"({indices.numel()}), got {int(indptr[0])} .. {int(indptr[-1])}")
    _check(bool((indptr[1:] >= indptr[:-1]).all()),
           "random_walk_top_k: indptr must be non-decreasing")
    _check(targets.dtype == torch.int64,
           f"random_walk_top_k: targets must be int64, got {targets.dtype}")
    _check(num_walks >= 1, f"random_walk_top_k: num_walks must be >= 1, got {num_walks}")
    _check(walk_length >= 1, f"random_walk_top_k: walk_length must be >= 1, got {walk_length}")
    _check(top_k >= 1, f"random_walk_top_k: top_k must be >= 1, got {top_k}")
    _check(num_walks <= 1 << 20 and walk_length <= 1 << 20,
           "random_walk_top_k: num_walks and walk_length must be at most 2^20")
    n = indptr.numel() - 1
    _check_range(targets, n, lambda lo, hi: f"random_walk_top_k: targets hold ids in [{lo}, "
                 f"{hi}] but the graph has {n} nodes (ids must be in [0, {n}))")
    base = _mix_py((int(seed) & _MASK64) ^ _WALK_SALT)
    owner = torch.arange(targets.numel()).repeat_interleave(num_walks)
    walk = torch.arange(num_walks).repeat(targets.numel())
    origin = targets[owner]
    state = _rng_state((walk + _signed(base)), int(hop), origin)
    cur, live = origin.clone(), torch.arange(owner.numel())
    seen_owner, seen_vertex = [], []
    for step in range(walk_length):
        start = indptr[cur[live]]
        deg = indptr[cur[live] + 1] - start
        live = live[deg > 0]
        start, deg = start[deg > 0], deg[deg > 0]
        if live.numel() == 0:
            break
        nxt = indices[start + _below(_draw(state[live], step + 1), deg)].long()
        _check_range(nxt, n, lambda lo, hi: f"random_walk_top_k: the graph's indices hold ids "
                     f"outside [0, {n})")
        cur[live] = nxt
        away = nxt != origin[live]
        seen_owner.append(owner[live[away]])
        seen_vertex.append(nxt[away])
    if not seen_owner:
        empty = torch.empty(0, dtype=torch.int64)
        return empty, empty.clone(), empty.clone()
    key = torch.cat(seen_owner) * max(n, 1) + torch.cat(seen_vertex)
    uniq, count = torch.unique(key, return_counts=True)  # sorted: by owner, then vertex
    own, vert = uniq // max(n, 1), uniq % max(n, 1)
    order = torch.argsort(-count, stable=True)
    order = order[torch.argsort(own[order], stable=True)]
    own, vert, count = own[order], vert[order], count[order]
    first = torch.searchsorted(own, own)  # the owner's first entry
    kept = (torch.arange(own.numel()) - first) < top_k
    return own[kept], vert[kept], count[kept]


def _edge_keys(indptr: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """The keys ``dst * num_nodes + src`` of a CSC graph's edges, in CSC order."""
    n = indptr.numel() - 1
    dst = torch.repeat_interleave(torch.arange(n), indptr.diff())
    return dst * n + indices.long()


def _slot_of(key: torch.Tensor, mask: int) -> torch.Tensor:
    return _mix(key) & mask


def edge_key_table(indptr: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """The open-addressing table of a CSC graph's edge keys: the native table's size, hash,
    probing and keys (placed in rounds, so a key may sit in another slot than natively)."""
    _check(indptr.device.type == "cpu" and indices.device.type == "cpu" and indptr.dim() == 1
           and indices.dim() == 1 and indptr.numel() >= 1,
           "edge_key_table: indptr and indices must be 1-D CPU tensors")
    _check(indptr.dtype == torch.int64, "edge_key_table: indptr must be int64")
    _check(indices.dtype in (torch.int64, torch.int32),
           f"edge_key_table: indices must be int64 or int32, got {indices.dtype}")
    edges = indices.numel()
    _check(int(indptr[0]) == 0 and int(indptr[-1]) == edges,
           "edge_key_table: indptr must run from 0 to the number of indices")
    slots = 2
    while slots < 2 * edges:
        slots *= 2
    table = torch.full((slots,), -1, dtype=torch.int64)
    key = torch.unique(_edge_keys(indptr, indices))
    h = _slot_of(key, slots - 1)
    while key.numel():
        free = table[h] == -1
        winner = torch.full((slots,), key.numel(), dtype=torch.int64)
        winner.scatter_reduce_(0, h[free], free.nonzero().flatten(), reduce="amin")
        won = torch.zeros(key.numel(), dtype=torch.bool)
        won[winner[winner < key.numel()]] = True
        table[h[won]] = key[won]
        key, h = key[~won], (h[~won] + 1) & (slots - 1)
    return table


def _in_table(table: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    mask = table.numel() - 1
    h = _slot_of(key, mask)
    found = torch.zeros(key.numel(), dtype=torch.bool)
    live = torch.arange(key.numel())
    while live.numel():
        at = table[h]
        hit = at == key[live]
        found[live[hit]] = True
        go = ~hit & (at != -1)
        live, h = live[go], (h[go] + 1) & mask
    return found


def _check_negative_args(indptr: torch.Tensor, indices: torch.Tensor, sources: torch.Tensor,
                         keys: torch.Tensor, num_nodes: int, k: int, mode: int,
                         max_tries: int) -> bool:
    """Checks :func:`negative_sample`'s arguments as the kernel does; True when the graph is
    given (a draw that is an edge is rejected and drawn again)."""
    for t in (indptr, indices, sources, keys):
        _check(t.device.type == "cpu" and t.dim() == 1,
               "negative_sample: indptr, indices, sources and keys must be 1-D CPU tensors")
    _check(num_nodes >= 1, f"negative_sample: num_nodes must be >= 1, got {num_nodes}")
    _check(k >= 1, f"negative_sample: k (negatives per positive) must be >= 1, got {k}")
    _check(mode in (0, 1), f"negative_sample: mode must be 0 (uniform) or 1 (per source), got "
           f"{mode}")
    _check(max_tries >= 1, f"negative_sample: max_tries must be >= 1, got {max_tries}")
    _check(keys.dtype == torch.int64, f"negative_sample: keys must be int64, got {keys.dtype}")
    _check(sources.dtype == torch.int64,
           f"negative_sample: sources must be int64, got {sources.dtype}")
    _check(mode == 0 or sources.numel() == keys.numel(), "negative_sample: per-source mode "
           f"needs one source per key ({sources.numel()} sources, {keys.numel()} keys)")
    if mode == 1:
        _check_range(sources, num_nodes, lambda lo, hi: f"negative_sample: sources hold ids in "
                     f"[{lo}, {hi}] but there are {num_nodes} nodes")
    reject = indptr.numel() > 0
    if reject:
        _check(indptr.dtype == torch.int64, "negative_sample: indptr must be int64")
        _check(indices.dtype in (torch.int64, torch.int32),
               f"negative_sample: indices must be int64 or int32, got {indices.dtype}")
        _check(indptr.numel() == num_nodes + 1, f"negative_sample: indptr has {indptr.numel()} "
               f"entries for {num_nodes} nodes (num_nodes + 1 expected)")
        _check(int(indptr[0]) == 0 and int(indptr[-1]) == indices.numel(),
               "negative_sample: indptr must run from 0 to the number of indices")
    return reject


def _negative_span(r: Sequence[int] | None, name: str, num_nodes: int) -> tuple[int, int]:
    """``(lo, count)`` of the ids a ``[lo, hi)`` range ``r`` allows (None: every node)."""
    if r is None:
        return 0, num_nodes
    r = [int(x) for x in r]
    _check(len(r) == 2 and 0 <= r[0] < r[1] <= num_nodes, f"negative_sample: {name} must "
           f"be [lo, hi) with 0 <= lo < hi <= num_nodes ({num_nodes}), got {r}")
    return r[0], r[1] - r[0]


def _checked_edge_table(edge_table: torch.Tensor) -> torch.Tensor:
    """``edge_table`` checked to be an :func:`edge_key_table` (1-D int64 CPU, 2^k >= 2 slots)."""
    _check(edge_table.device.type == "cpu" and edge_table.dim() == 1 and
           edge_table.dtype == torch.int64,
           "negative_sample: edge_table must be a 1-D int64 CPU tensor (edge_key_table)")
    t = edge_table.numel()
    _check(t >= 2 and t & (t - 1) == 0, "negative_sample: edge_table must have a power of "
           f"two >= 2 slots (edge_key_table), got {t}")
    return edge_table


def negative_sample(indptr: torch.Tensor, indices: torch.Tensor, sources: torch.Tensor,
                    keys: torch.Tensor, num_nodes: int, k: int, mode: int, seed: int,
                    max_tries: int = 64, num_threads: int = 0,
                    edge_table: torch.Tensor | None = None,
                    src_range: Sequence[int] | None = None,
                    dst_range: Sequence[int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Negative pairs (``csrc/sampling/cpu/negative_sample_kernel.cpp``): the same draws, all
    keys' tries advanced together."""
    reject = _check_negative_args(indptr, indices, sources, keys, num_nodes, k, mode, max_tries)
    src_lo, src_n = _negative_span(src_range, "src_range", num_nodes)
    dst_lo, dst_n = _negative_span(dst_range, "dst_range", num_nodes)
    table = _checked_edge_table(edge_table) if edge_table is not None and reject else None
    known = _edge_keys(indptr, indices) if reject and table is None else None
    base = _signed(_mix_py((int(seed) & _MASK64) ^ _NEG_SALT))
    n = keys.numel()
    state = _rng_state(base, 0, keys)
    used = torch.zeros(n, dtype=torch.int64)  # next() calls so far, per key
    out_src = torch.empty((n, k), dtype=torch.int64)
    out_dst = torch.empty((n, k), dtype=torch.int64)
    for j in range(k):
        live = torch.arange(n)
        for _ in range(max_tries):
            st = state[live]
            if mode == 0:
                used[live] += 1
                s = src_lo + _below(_draw(st, used[live]), src_n)
            else:
                s = sources[live]
            used[live] += 1
            d = dst_lo + _below(_draw(st, used[live]), dst_n)
            out_src[live, j], out_dst[live, j] = s, d
            if not reject:
                break
            key = d * num_nodes + s
            if table is not None:
                edge = _in_table(table, key)
            else:
                at = torch.searchsorted(known, key).clamp(max=max(known.numel() - 1, 0))
                edge = known[at] == key if known.numel() else torch.zeros_like(key, dtype=bool)
            live = live[(s == d) | edge]
            if live.numel() == 0:
                break
    return out_src.reshape(-1), out_dst.reshape(-1)


# ---------------------------------------------------------------------------------- split

# the online split of one sample: its own module (the kernel's steps, bit for bit)
from gnnscale.ops._torch_split import split_sample, split_sample_all  # noqa: E402, F401
