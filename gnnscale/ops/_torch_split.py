"""The torch-only path of ``split_sample`` and ``split_sample_all`` (``csrc/split/``): the
online split of one sample over ``world`` ranks, without the extension
(:mod:`gnnscale.ops._loader`, :mod:`gnnscale.ops.split`).

Each function returns what the native kernel (``csrc/split/cpu/split_sample_kernel.cpp``, whose
header documents the layout) returns, bit for bit: the same tensors, dtypes and order. The
plan's masks and lists are built with vectorised array operations (stable sorts where the kernel
groups by a key); the hybrid greedy, which re-measures its candidates after every pick, runs as
the kernel's sequential loop, with its floating-point sums in the kernel's order.
``num_threads`` is accepted and unused (the kernel's plan does not depend on it).
"""

from __future__ import annotations

import numpy as np
import torch

_I64 = np.int64


def _check(cond: bool, msg: str) -> None:
    if not cond:
        raise RuntimeError(msg)


def _check_split_sample(counts: torch.Tensor, edges: list[torch.Tensor], own_in: torch.Tensor,
                        own_part: torch.Tensor, world: int, rank: int, costs: torch.Tensor,
                        preagg: bool, read_in: bool) -> None:
    """The kernel's argument checks (``csrc/split/split_sample.cpp``), the same messages."""
    _check(world >= 1 and 0 <= rank < world, "split_sample: bad rank/world")
    _check(not (preagg and read_in),
           "split_sample: read_in (every rank reads its inputs) excludes preagg (which ships "
           "averaged input rows)")
    n_layers = len(edges)
    _check(counts.numel() == n_layers + 1, "split_sample: counts needs one entry per layer + 1")
    for e in edges:
        _check(e.dim() == 2 and e.size(0) == 2, "split_sample: edges must be (2, E)")
    n0 = int(counts.reshape(-1).long()[n_layers])
    _check(own_in.numel() >= n0 and own_part.numel() >= n0, "split_sample: owners too short")
    if n0 > 0:
        for own in (own_in, own_part):
            head = own.reshape(-1)[:n0].long()
            _check(int(head.min()) >= 0 and int(head.max()) < world,
                   "split_sample: owner out of [0, world)")
    _check(costs.numel() in (3 * (n_layers + 1), 3 * (n_layers + 1) + 1),
           "split_sample: costs must hold 3 * (L + 1) values (and optionally the fixed seconds "
           "of one exchange)")


def _np(t: torch.Tensor, dtype) -> np.ndarray:
    return t.detach().reshape(-1).contiguous().cpu().numpy().astype(dtype, copy=False)


def _tensor(a: np.ndarray) -> torch.Tensor:
    """A fresh int64 tensor of ``a`` (outputs never share memory with the plan)."""
    return torch.from_numpy(np.array(a, dtype=_I64, copy=True))


def _group(keys: np.ndarray, items: np.ndarray, world: int) -> tuple[np.ndarray, np.ndarray]:
    """``items`` stably grouped by ``keys`` in [0, world): (ptr [world + 1], items)."""
    order = np.argsort(keys, kind="stable")
    ptr = np.zeros(world + 1, dtype=_I64)
    np.cumsum(np.bincount(keys, minlength=world)[:world], out=ptr[1:])
    return ptr, items[order]


class _Plan:
    """The kernel's ``Splitter``: the sample, its owners, and (planned) which rank computes and
    needs which vertex, each block's local edges, received rows and (preagg) remote edges."""

    def __init__(self, counts: torch.Tensor, edges: list[torch.Tensor], own_in: torch.Tensor,
                 own_part: torch.Tensor, world: int, preagg: bool, costs: torch.Tensor,
                 budget: int, read_in: bool) -> None:
        L = len(edges)
        self.L, self.W, self.preagg, self.read_in = L, world, preagg, read_in
        cnt = _np(counts, _I64)
        own0 = _np(own_in, np.int32).astype(_I64)
        own1 = _np(own_part, np.int32).astype(_I64)
        self.n = [int(cnt[L - i]) for i in range(L + 1)]
        self.own = [(own0 if i == 0 else own1)[: self.n[i]] for i in range(L + 1)]
        self.src, self.dst = [], []
        for e in edges:
            e64 = e.detach().contiguous().cpu().long().numpy()
            self.src.append(np.ascontiguousarray(e64[0]))
            self.dst.append(np.ascontiguousarray(e64[1]))
        c = _np(costs, np.float64)
        self.comm_row = [float(x) for x in c[: L + 1]]
        self.edge = [float(x) for x in c[L + 1: 2 * (L + 1)]]
        self.vertex = [float(x) for x in c[2 * (L + 1): 3 * (L + 1)]]
        self.sync = float(c[3 * (L + 1)]) if c.size > 3 * (L + 1) else 0.0
        self.used = [0] * world
        self._plan(int(budget))

    # ------------------------------------------------------------------ plan
    def _plan(self, budget: int) -> None:
        L, W = self.L, self.W
        # comp[i]: (W, n_i) bool, the ranks computing each vertex (owners, then replicas)
        self.comp = []
        for i in range(L + 1):
            m = np.zeros((W, self.n[i]), dtype=bool)
            m[self.own[i], np.arange(self.n[i])] = True
            self.comp.append(m)
        if self.read_in:
            self.loaded = [np.zeros(0, dtype=_I64) for _ in range(W)]
        else:
            own = self.own[0]
            self.loaded = [np.flatnonzero(own == q).astype(_I64) for q in range(W)]
        self.need: list[np.ndarray] = [np.zeros((W, 0), dtype=bool)] * (L + 1)
        self.local: list[list[np.ndarray]] = [[] for _ in range(L)]
        self.same = [0] * L
        self.recv: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in range(L)]
        self.remote: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in range(L)]
        for i in range(L - 1, -1, -1):
            self._mark_needs(i)
            if i >= 1 and budget > 0:
                self._replicate(i, budget)
            self._group_received(i)

    def _mark_needs(self, i: int) -> None:
        W, n_lo, n_hi = self.W, self.n[i], self.n[i + 1]
        src, dst = self.src[i], self.dst[i]
        hi = self.comp[i + 1]
        need = np.zeros((W, n_lo), dtype=bool)
        need[:, :n_hi] = hi
        local = []
        for q in range(W):
            loc = np.flatnonzero(hi[q][dst]).astype(_I64)
            need[q, src[loc]] = True
            local.append(loc)
        self.need[i] = need
        self.local[i] = local
        # every edge is local to its destination's owner: the edges whose ends share an owner
        self.same[i] = int(np.count_nonzero(self.own[i][src] == self.own[i + 1][dst]))

    def _group_received(self, i: int) -> None:
        W, n_hi = self.W, self.n[i + 1]
        empty = (np.zeros(W + 1, dtype=_I64), np.zeros(0, dtype=_I64))
        if i == 0 and self.read_in:  # layer 0 is read, not received
            self.recv[i] = [empty] * W
            self.remote[i] = [empty] * W if self.preagg else []
            return
        own, src = self.own[i], self.src[i]
        recv, remote = [], []
        for q in range(W):
            c = self.comp[i][q]
            if self.preagg:
                rows = np.flatnonzero(~c[:n_hi] & self.comp[i + 1][q]).astype(_I64)
            else:
                rows = np.flatnonzero(~c & self.need[i][q]).astype(_I64)
            recv.append(_group(own[rows], rows, W))
            if self.preagg:
                loc = self.local[i][q]
                kept = loc[~c[src[loc]]]
                remote.append(_group(own[src[kept]], kept, W))
        self.recv[i], self.remote[i] = recv, remote

    def _replicate(self, i: int, budget: int) -> None:
        """The hybrid greedy of layer ``i`` (the kernel's ``Splitter::replicate``)."""
        W, n_cur = self.W, self.n[i]
        src, dst = self.src[i - 1], self.dst[i - 1]
        own_cur, own_below = self.own[i], self.own[i - 1]
        deg_np = np.bincount(dst, minlength=n_cur)[:n_cur].astype(_I64)
        ptr_np = np.zeros(n_cur + 1, dtype=_I64)
        np.cumsum(deg_np, out=ptr_np[1:])
        ins_np = src[np.argsort(dst, kind="stable")]
        ptr, ins, deg = ptr_np.tolist(), ins_np.tolist(), deg_np.tolist()
        comm_in, comm_out = self.comm_row[i - 1], self.comm_row[i]
        edge_cost, vertex_cost, sync = self.edge[i - 1], self.vertex[i - 1], self.sync
        used = self.used
        rest: list[list[int]] = [[] for _ in range(W)]
        whole = [False] * W
        base = [float(d) * edge_cost + vertex_cost for d in deg]  # (deg * edge) + vertex

        def cost_at(pres: np.ndarray | list, u: int) -> float:
            c = base[u]
            if not pres[u]:
                c += comm_in
            for k in range(ptr[u], ptr[u + 1]):
                if not pres[ins[k]]:
                    c += comm_in
            return c

        for q in range(W):
            if used[q] >= budget:
                continue
            cands = np.flatnonzero(self.need[i][q] & (own_cur != q)).tolist()
            n_cand = len(cands)
            if n_cand == 0:
                whole[q] = True
                continue
            floor_all, cheapest = 0.0, base[cands[0]]
            for u in cands:
                c = base[u]
                cheapest = min(cheapest, c)
                floor_all += c
            may_whole = (sync > 0.0 and used[q] + n_cand <= budget
                         and floor_all < n_cand * comm_out + 2 * sync)
            if cheapest >= comm_out and not may_whole:
                continue
            pres_np = own_below == q
            mine = np.flatnonzero(own_cur == q)
            pres_np[mine] = True
            pres_np[ins_np[np.repeat(ptr_np[mine], deg_np[mine]) + _ranges(deg_np[mine])]] = True
            present = pres_np.tolist()
            cand = sorted((cost_at(present, u), u) for u in cands)
            cp = self.comp[i][q]
            for _, u in cand:
                if not cost_at(present, u) < comm_out:
                    continue
                if not used[q] < budget:
                    break
                cp[u] = True
                used[q] += 1
                present[u] = True
                for k in range(ptr[u], ptr[u + 1]):
                    present[ins[k]] = True
            if sync <= 0.0:
                continue
            rest[q] = [u for _, u in cand if not cp[u]]
            n_rest = len(rest[q])
            if used[q] + n_rest > budget:
                continue
            total = 0.0
            for u in rest[q]:
                total += cost_at(present, u)
                present[u] = True
                for k in range(ptr[u], ptr[u + 1]):
                    present[ins[k]] = True
            whole[q] = total < n_rest * comm_out + 2 * sync
        if sync > 0.0 and all(whole):
            for q in range(W):
                self.comp[i][q][rest[q]] = True
                used[q] += len(rest[q])

    def stats(self) -> list[int]:
        """The kernel's ``edge_stats`` (entry ``W + 2``, a rank's replicas, left 0)."""
        W, L = self.W, self.L
        stats = [0] * (W + 3 + L)
        for i in range(L):
            for q in range(W):
                stats[q] += int(self.local[i][q].size)
                stats[W + 3 + i] += int(self.recv[i][q][0][W])
                if self.preagg:
                    stats[W + 3 + i] += int(self.remote[i][q][0][W])
            stats[W] += self.same[i]
            stats[W + 1] += int(self.src[i].size)
        return stats

    # ------------------------------------------------------------------ one rank's output
    def rank_output(self, stats: list[int], R: int, edge_pos: bool) -> list[torch.Tensor]:
        """Rank ``R``'s flat list (the kernel's ``rank_output``)."""
        stats = list(stats)
        stats[self.W + 2] = self.used[R]
        out = [_tensor(self.loaded[R]), torch.tensor(stats, dtype=torch.int64)]
        for i in range(self.L):
            out.extend(self._layer(i, R))
        if edge_pos:
            out.extend(_tensor(self.local[i][R]) for i in range(self.L))
        return out

    def _layer(self, i: int, R: int) -> list[torch.Tensor]:
        """Rank ``R``'s tensors of layer ``i`` (the kernel's per-layer part of
        ``rank_output``): destinations, sources, local edges, then the shuffle's rows."""
        W, preagg = self.W, self.preagg
        n_lo, n_hi = self.n[i], self.n[i + 1]
        comp, is_dst, need = self.comp[i][R], self.comp[i + 1][R], self.need[i][R]
        src, dst, own = self.src[i], self.dst[i], self.own[i]
        # receive side: rows of h, destinations first, then the real sources
        row = np.zeros(n_lo, dtype=_I64)
        if n_lo > 1:
            np.cumsum(comp[:-1], out=row[1:])
        n_h = int(np.count_nonzero(comp))
        dst_rows = np.flatnonzero(is_dst).astype(_I64)
        nd = int(dst_rows.size)
        dst_full = np.zeros(n_lo, dtype=bool)
        dst_full[:n_hi] = is_dst
        take = need & ~dst_full & (comp | (not preagg))
        real_rows = np.flatnonzero(take).astype(_I64)
        mr = int(real_rows.size)
        pos_src = np.zeros(n_lo, dtype=_I64)
        pos_src[dst_rows] = np.arange(nd, dtype=_I64)
        pos_src[real_rows] = nd + np.arange(mr, dtype=_I64)
        recv_counts, virt, vrecv, slot_of = self._receive(i, R, row, n_h, dst_rows, pos_src, mr)
        out = [_tensor(dst_rows), _tensor(np.concatenate([dst_rows, real_rows, virt]))]
        # the local block's edges in local rows
        loc = self.local[i][R]
        u, v = src[loc], dst[loc]
        e_dst = pos_src[v]
        if preagg:
            e_src = np.where(comp[u], pos_src[u], slot_of[own[u], e_dst])
        else:
            e_src = pos_src[u]
        out.append(_tensor(np.stack([e_src, e_dst])).reshape(2, -1))
        if i == 0 and self.read_in:  # read, not shuffled
            out += [torch.empty(0, dtype=torch.int64), torch.empty(0, dtype=torch.int64),
                    torch.zeros(W, dtype=torch.int64), _tensor(recv_counts),
                    torch.empty((3, 0), dtype=torch.int64)]
            return out
        out.append(_tensor(np.concatenate([row[dst_rows], row[real_rows], vrecv])))
        send, send_counts, agg = self._send(i, R, row, n_h)
        return [*out, send, send_counts, _tensor(recv_counts), agg]

    def _receive(self, i: int, R: int, row: np.ndarray, n_h: int, dst_rows: np.ndarray,
                 pos_src: np.ndarray, mr: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Rank ``R``'s receive side of layer ``i``, peer by peer: numbers the rows it receives
        in ``row`` (after its ``n_h`` own) and returns the counts per peer, the destination
        rows of the pre-aggregated (virtual) sources, their rows of h, and each peer's slot
        of a destination."""
        W, preagg, dst = self.W, self.preagg, self.dst[i]
        nd = int(dst_rows.size)
        recv_counts = np.zeros(W, dtype=_I64)
        n_recv = 0
        virt_rows: list[np.ndarray] = []
        virt_recv: list[np.ndarray] = []
        slot_of = np.zeros((W, nd), dtype=_I64)
        mv = 0
        rptr, ritems = self.recv[i][R]
        for p in range(W):
            if p == R:
                continue
            base = n_recv
            rows_p = ritems[rptr[p]:rptr[p + 1]]
            row[rows_p] = n_h + n_recv + np.arange(rows_p.size, dtype=_I64)
            n_recv += int(rows_p.size)
            if preagg:
                kptr, kitems = self.remote[i][R]
                ks = kitems[kptr[p]:kptr[p + 1]]
                has = np.unique(pos_src[dst[ks]])
                virt_rows.append(dst_rows[has])
                virt_recv.append(n_h + n_recv + np.arange(has.size, dtype=_I64))
                slot_of[p, has] = nd + mr + mv + np.arange(has.size, dtype=_I64)
                mv += int(has.size)
                n_recv += int(has.size)
            recv_counts[p] = n_recv - base
        virt = np.concatenate(virt_rows) if virt_rows else np.zeros(0, dtype=_I64)
        vrecv = np.concatenate(virt_recv) if virt_recv else np.zeros(0, dtype=_I64)
        return recv_counts, virt, vrecv, slot_of

    def _send(self, i: int, R: int, row: np.ndarray, n_h: int
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Rank ``R``'s send side of layer ``i``: rows of cat(h, aggregated slots), peer by peer,
        the counts per peer, and the pre-aggregation's (row, slot, slot size) table."""
        W, preagg, src, dst = self.W, self.preagg, self.src[i], self.dst[i]
        send: list[np.ndarray] = []
        send_counts = np.zeros(W, dtype=_I64)
        agg_row: list[np.ndarray] = []
        agg_slot: list[np.ndarray] = []
        n_slots = 0
        for q in range(W):
            if q == R:
                continue
            qptr, qitems = self.recv[i][q]
            part = row[qitems[qptr[R]:qptr[R + 1]]]
            count = int(part.size)
            send.append(part)
            if preagg:
                kptr, kitems = self.remote[i][q]
                ks = kitems[kptr[R]:kptr[R + 1]]
                dsts = dst[ks]
                has, slot = np.unique(dsts, return_inverse=True)
                send.append(n_h + n_slots + np.arange(has.size, dtype=_I64))
                agg_row.append(row[src[ks]])
                agg_slot.append(n_slots + slot.reshape(-1).astype(_I64))
                n_slots += int(has.size)
                count += int(has.size)
            send_counts[q] = count
        agg_r = np.concatenate(agg_row) if agg_row else np.zeros(0, dtype=_I64)
        agg_s = np.concatenate(agg_slot) if agg_slot else np.zeros(0, dtype=_I64)
        slot_count = np.bincount(agg_s, minlength=agg_s.size)[: agg_s.size].astype(_I64)
        return (_tensor(np.concatenate(send) if send else np.zeros(0, dtype=_I64)),
                _tensor(send_counts), _tensor(np.stack([agg_r, agg_s, slot_count])).reshape(3, -1))


def _ranges(lengths: np.ndarray) -> np.ndarray:
    """``cat(arange(n) for n in lengths)``."""
    total = int(lengths.sum()) if lengths.size else 0
    if total == 0:
        return np.zeros(0, dtype=_I64)
    starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.arange(total, dtype=_I64) - starts


def split_sample(counts: torch.Tensor, edges: list[torch.Tensor], own_in: torch.Tensor,
                 own_part: torch.Tensor, world: int, rank: int, preagg: bool,
                 costs: torch.Tensor, budget: int, num_threads: int = 0,
                 edge_pos: bool = False, read_in: bool = False) -> list[torch.Tensor]:
    """``torch.ops.gnnscale.split_sample`` without the extension: rank ``rank``'s flat list."""
    edges = list(edges)
    _check_split_sample(counts, edges, own_in, own_part, world, rank, costs, preagg, read_in)
    plan = _Plan(counts, edges, own_in, own_part, world, preagg, costs, budget, read_in)
    return plan.rank_output(plan.stats(), rank, edge_pos)


def split_sample_all(counts: torch.Tensor, edges: list[torch.Tensor], own_in: torch.Tensor,
                     own_part: torch.Tensor, world: int, preagg: bool, costs: torch.Tensor,
                     budget: int, num_threads: int = 0, edge_pos: bool = False,
                     read_in: bool = False) -> list[torch.Tensor]:
    """``torch.ops.gnnscale.split_sample_all`` without the extension: every rank's flat list,
    rank 0 first, one after another, from one plan."""
    edges = list(edges)
    _check_split_sample(counts, edges, own_in, own_part, world, 0, costs, preagg, read_in)
    plan = _Plan(counts, edges, own_in, own_part, world, preagg, costs, budget, read_in)
    stats = plan.stats()
    out: list[torch.Tensor] = []
    for r in range(world):
        out.extend(plan.rank_output(stats, r, edge_pos))
    return out
