"""The feature store: a host tier (the whole feature table) and a per-rank device tier (cache).

``gather(ids)`` returns ``features[ids]`` on the rank's device. Each id is looked up in a dense
id -> slot array (O(1), -1 = not cached here, as GNNLab): hits come from the device tier; with
partitioned placement (an ``owner`` map and more than one rank) a local miss that another rank
caches is fetched from it through the :mod:`~gnnscale.cache.exchange` (``bytes_rank_to_rank``);
only global misses are read from the host table (``bytes_host_to_rank``). With a distributed
exchange ``gather`` is COLLECTIVE: every rank must call it the same number of times (the
data-parallel strategy runs steps in lockstep; a rank with nothing to load passes an empty id
tensor).

Accounting counts requested positions: ``hits`` = local + remote hits, ``misses`` = rows read
from the host, so ``bytes_host_to_rank == misses * row_bytes`` and
``bytes_rank_to_rank == remote_hits * row_bytes`` (counted by the receiving rank). Callers pass
unique ids (a mini-batch's ``input_nodes`` are unique); a repeated id is counted and moved again.

From a partitioned layout (``parts=``: the features are a part's
:class:`~gnnscale.partition.parts.RowView`, the rows of its own nodes and every node's owner) the
host tier holds this rank's own rows only, and a third tier, the remote owner, serves the rest:
a row no rank caches that this rank does not own is fetched from the rank owning it, over the
same exchange (one collective fetch per ``gather``, so ``gather`` is collective whenever there
are several ranks), counted as ``remote_owner_rows`` and ``bytes_remote_owner`` (by the
receiving rank); ``misses`` and ``bytes_host_to_rank`` count the rows read from this rank's own
table. When the view's ``remote`` is a :class:`~gnnscale.cache.served.ServedExchange`
(``strategy=factored``) the owners' row servers answer instead, and nothing is collective.
``fetch_remote=False`` fetches nothing from peers: a row another rank owns is then an
error naming it (``split`` loads only the rows its rank owns). A device tier holding rows this
rank does not own (replicated placement) is filled from their owners once, when the store is
built (collective, unless the owners serve).
The host tier is marked as read at random (:func:`gnnscale.data.pages.advise_random`): a table
memory-mapped from a processed copy larger than memory is then read a page per missing row.

On CUDA the device tier lives in GPU memory and host misses are gathered into pinned staging
memory and copied without blocking; on CPU the device tier is a rank-local contiguous copy.

A typed graph (several node or edge types) gets a :class:`TypedFeatureStore`: one
:class:`FeatureStore` per featured node type over that type's local ids (each type's rows have
their own width), caching the type's hottest rows under a replicated placement. Its ``gather``
returns a :class:`~gnnscale.sampling.base.TypedInputs` (the rows' node types and local ids, and
each featured type's rows); a featureless type's rows are not moved at all (a typed model
embeds them), only counted: ``embedding_rows_touched`` (distinct rows of featureless types an
epoch's gathers asked for: the embedding rows the epoch updates) and per-type
``bytes_host_to_rank.<type>``.
"""

from __future__ import annotations

import copy
import os
import time
from collections import deque
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch
import torch.distributed as dist

from gnnscale import ops
from gnnscale.cache.base import CachePolicy
from gnnscale.cache.disk import DiskTier, mapped_file, probe
from gnnscale.cache.exchange import DistExchange, Exchange
from gnnscale.cache.layout import DTYPES, derived_copy, open_copy, rounded_copy
from gnnscale.data.graph import GraphStore
from gnnscale.data.pages import advise_random
from gnnscale.distributed import device as device_seam
from gnnscale.distributed.collectives import all_gather_rows
from gnnscale.host import meminfo
from gnnscale.sampling.base import Sampler, TypedInputs
from gnnscale.sampling.schedule import Schedule

COUNTERS = ("requested", "hits", "local_hits", "remote_hits", "host_hits", "misses",
            "bytes_host_to_rank", "bytes_rank_to_rank", "remote_owner_rows",
            "bytes_remote_owner", "calls")
#: the disk tier's counters (a store with a disk tier only; also ``disk_time``: seconds its
#: reads took, ``disk_wait_time``: seconds gathers waited for them, ``disk_ahead_rows``: rows
#: gathers took from reads started ahead by :meth:`FeatureStore.read_ahead`)
DISK_COUNTERS = ("disk_reads", "disk_bytes_read", "disk_rows")
_CHUNK_ROWS = 1 << 16


def _host_rows(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """``table[ids]`` on the host: the native multi-threaded gather when it is built."""
    if table.device.type == "cpu" and ops.available():
        return ops.gather_rows(table, ids)
    return torch.index_select(table, 0, ids)




def _checked_ids(cached_ids: Any, n: int) -> torch.Tensor:
    """``cached_ids`` as a flat long tensor on the CPU, checked to be distinct ids in ``[0, n)``."""
    cached = torch.as_tensor(cached_ids).long().cpu().reshape(-1)
    if cached.numel():
        if int(cached.min()) < 0 or int(cached.max()) >= n:
            raise ValueError(f"cached_ids must lie in [0, {n})")
        if torch.unique(cached).numel() != cached.numel():
            raise ValueError("cached_ids holds duplicates")
    return cached


class FeatureStore:
    """Serves feature rows of global vertex ids from the local cache, peers or the host."""

    def __init__(self, features: Any, cached_ids: torch.Tensor, *,
                 device: torch.device | str = "cpu", topo: Any = None,
                 owner: torch.Tensor | None = None, exchange: Exchange | None = None,
                 record_visits: bool = False, fetch_remote: bool = True,
                 group: dist.ProcessGroup | None = None, disk: DiskTier | None = None,
                 out_dtype: torch.dtype | None = None,
                 host_ids: torch.Tensor | None = None) -> None:
        if features.dim() != 2:
            raise ValueError(f"features must be a [N, F] table, got shape "
                             f"{tuple(features.shape)}")
        self._num_nodes = int(features.shape[0])
        self.device = torch.device(device)
        self.rank = topo.rank if topo is not None else 0
        self.world_size = topo.world_size if topo is not None else 1
        #: a part's rows (parts=): global id -> row of :attr:`host` (-1: another rank owns it)
        self.local: torch.Tensor | None = None
        #: every node's owning rank (parts=, several ranks): the remote owner tier
        self.home: torch.Tensor | None = None
        self.owner_exchange: Exchange | None = None
        features = self._adopt_part(features, exchange, group)
        self.host = features if features.is_contiguous() else features.contiguous()
        advise_random(self.host)
        #: the disk tier: rows in no memory tier read from the feature file (None: from
        #: :attr:`host`, the memory map)
        self.disk = disk
        if disk is not None and (disk.num_rows, disk.num_features) != tuple(self.host.shape):
            raise ValueError(f"the disk tier holds {disk.num_rows} x {disk.num_features} rows, "
                             f"the host table {tuple(self.host.shape)}")
        self.disk_probe = 0.0  # the device's reads/s at the tier's depth (set by the builder)
        #: the dtype :meth:`gather` returns (None: the tiers'): float32 over 16-bit tiers
        self.out_dtype = out_dtype
        self.disk_last = dict.fromkeys(DISK_COUNTERS, 0) | {"disk_time": 0.0}
        self.disk_totals = dict(self.disk_last) | {"disk_wait_time": 0.0, "disk_ahead_rows": 0}
        #: steps whose disk reads :meth:`read_ahead` starts early (``cache.disk_ahead``)
        self.ahead = 0
        self._pending: deque = deque()
        self._reader: ThreadPoolExecutor | None = None
        n = self.num_nodes
        cached = _checked_ids(cached_ids, n)
        self.cached_ids = cached
        slot = torch.full((n,), -1, dtype=torch.int32)
        slot[cached] = torch.arange(cached.numel(), dtype=torch.int32)
        self.slot = slot.to(self.device)
        self.cache = self._load_device_tier(cached)
        #: the host tier (``cache.host_bytes``): rows in host memory (pinned on a GPU) between
        #: the cache tier and the disk; global id -> slot (-1: not held), None: no host tier
        self.host_slot: torch.Tensor | None = None
        self.host_ids = torch.empty(0, dtype=torch.long)
        self.host_cache: torch.Tensor | None = None
        if host_ids is not None:
            self._load_host_tier(torch.as_tensor(host_ids).long().cpu().reshape(-1), slot)
        if not fetch_remote:
            self.owner_exchange = None  # the tier's fill above was the last fetch from peers
        self.owner: torch.Tensor | None = None
        self.exchange: Exchange | None = None
        if owner is not None:
            self._set_owner(owner, cached, exchange, group, fetch_remote)
        self.visits = (torch.zeros(n, dtype=torch.int64, device=self.device)
                       if record_visits else None)
        self.last: dict[str, int] = dict.fromkeys(COUNTERS, 0)
        self.totals: dict[str, int] = dict.fromkeys(COUNTERS, 0)
        if self.disk is not None:
            self.disk.take_stats()  # the cache tier's fill is not an epoch's
            self.disk_totals["disk_wait_time"] = 0.0
            self.disk_totals["disk_ahead_rows"] = 0

    def _adopt_part(self, features: Any, exchange: Exchange | None,
                    group: dist.ProcessGroup | None) -> Any:
        """The host table of ``features``: a part's :class:`RowView` sets :attr:`local` (its own
        rows) and, where owners serve the others, :attr:`home` and :attr:`owner_exchange`;
        a plain table is returned as it is."""
        held = getattr(features, "held", None)
        if held is None:
            return features
        # a RowView of a part: its own rows, the others on their owners
        self.view = features
        home = features.owner
        self.local = torch.full((self._num_nodes,), -1, dtype=torch.int32)
        self.local[held.long()] = torch.arange(held.numel(), dtype=torch.int32)
        served = getattr(self.view, "remote", None)  # owners that answer at any time
        if home is not None and (self.world_size > 1 or served is not None):
            self.home = torch.as_tensor(home).to(torch.int32).to(self.device)
            self.owner_exchange = exchange if exchange is not None else \
                served if served is not None else DistExchange(group)
        return features.rows

    def _set_owner(self, owner: torch.Tensor, cached: torch.Tensor, exchange: Exchange | None,
                   group: dist.ProcessGroup | None, fetch_remote: bool) -> None:
        """Checks the owner map against the ids this rank caches and, on several ranks, sets
        :attr:`owner` and (``fetch_remote``) the :attr:`exchange` that asks the owners."""
        n = self.num_nodes
        owner = torch.as_tensor(owner).cpu()
        if owner.shape != (n,):
            raise ValueError(f"owner must have one entry per vertex ({n}), got "
                             f"{tuple(owner.shape)}")
        mine = (owner == self.rank).nonzero().flatten()
        if not torch.equal(torch.sort(mine).values, torch.sort(cached).values):
            raise ValueError(f"owner map disagrees with cached_ids on rank {self.rank}: "
                             "owner[v] == rank must hold exactly for the ids this rank caches")
        if owner.numel() and int(owner.max()) >= self.world_size:
            raise ValueError(f"owner names rank {int(owner.max())} but world size is "
                             f"{self.world_size}")
        if self.world_size > 1:
            self.owner = owner.to(torch.int32).to(self.device)
            if fetch_remote:
                self.exchange = exchange if exchange is not None else DistExchange(group)

    # -- properties --------------------------------------------------------------------------
    @property
    def num_nodes(self) -> int:
        """Vertices in the feature table (all of them, also where this rank holds a part's)."""
        return self._num_nodes

    @property
    def num_features(self) -> int:
        """Features per row."""
        return int(self.host.shape[1])

    @property
    def row_bytes(self) -> int:
        """Bytes of one feature row."""
        return self.num_features * self.host.element_size()

    @property
    def num_cached(self) -> int:
        """Rows in this rank's device tier."""
        return int(self.cached_ids.numel())

    @property
    def cache_bytes(self) -> int:
        """Bytes of this rank's device tier."""
        return self.num_cached * self.row_bytes

    @property
    def whole_table(self) -> bool:
        """Whether this rank's host tier holds every row (not a part's rows only), so any row
        can be read without a peer."""
        return self.local is None

    @property
    def collective(self) -> bool:
        """True when ``gather`` must be called in lockstep by every rank."""
        return isinstance(self.exchange, DistExchange) or \
            isinstance(self.owner_exchange, DistExchange)

    # -- tiers -------------------------------------------------------------------------------
    def _load_device_tier(self, cached: torch.Tensor) -> torch.Tensor:
        cache = torch.empty(cached.numel(), self.num_features, dtype=self.host.dtype,
                            device=self.device)
        if self.owner_exchange is not None:  # parts=: rows of other owners fetched (collective)
            rounds = _agreed_rounds(cached.numel(), self.owner_exchange)
            for k in range(rounds):
                ids = cached[k * _CHUNK_ROWS:(k + 1) * _CHUNK_ROWS].to(self.device)
                cache[k * _CHUNK_ROWS:k * _CHUNK_ROWS + ids.numel()] = self._owned_or_fetched(ids)
            return cache
        order = torch.argsort(cached) if self.disk is not None else None  # in file order
        for start in range(0, cached.numel(), _CHUNK_ROWS):
            at = order[start:start + _CHUNK_ROWS] if order is not None else \
                torch.arange(start, min(start + _CHUNK_ROWS, cached.numel()))
            part = cached[at]
            rows = part if self.local is None else self.view.positions(part)  # parts=: its own
            cache[at.to(self.device)] = self._host_read(rows).to(self.device)
        return cache

    def _load_host_tier(self, ids: torch.Tensor, device_slot: torch.Tensor) -> None:
        """Read the host tier's rows ``ids`` once, in file order (sequential runs where the
        rows are), into host memory (pinned when the device is a GPU)."""
        n = self.num_nodes
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= n):
            raise ValueError(f"host_ids must lie in [0, {n})")
        if torch.unique(ids).numel() != ids.numel() or bool((device_slot[ids] >= 0).any()):
            raise ValueError("host_ids must be distinct and disjoint from cached_ids")
        if self.local is not None and bool((self.local[ids] < 0).any()):
            raise ValueError("from a part (parts=) the host tier holds this rank's own rows only")
        self.host_ids = ids
        slot = torch.full((n,), -1, dtype=torch.int32)
        slot[ids] = torch.arange(ids.numel(), dtype=torch.int32)
        self.host_slot = slot
        self.host_cache = device_seam.host_empty((ids.numel(), self.num_features), self.device,
                                                 self.host.dtype)
        order = torch.argsort(ids)  # in file order
        for start in range(0, ids.numel(), _CHUNK_ROWS):
            at = order[start:start + _CHUNK_ROWS]
            part = ids[at]
            rows = part if self.local is None else self.view.positions(part)
            self.host_cache[at] = self._host_read(rows)

    @property
    def host_tier_bytes(self) -> int:
        """Bytes of this rank's host tier."""
        return int(self.host_ids.numel()) * self.row_bytes

    def _host_read(self, rows: torch.Tensor) -> torch.Tensor:
        """Rows of :attr:`host` (its positions): from the disk tier when there is one (read
        ahead by :meth:`prefetch` when it asked for these), the wait counted."""
        if self.disk is not None:
            t0 = time.perf_counter()
            out = self._prefetched(rows)
            if out is None:
                out = self.disk.read(rows)
            else:
                self.disk_totals["disk_ahead_rows"] += int(rows.numel())
            self.disk_totals["disk_wait_time"] += time.perf_counter() - t0
            return out
        return _host_rows(self.host, rows)

    # -- reads behind compute ----------------------------------------------------------------
    def prefetch(self, ids: torch.Tensor) -> None:
        """Start reading, in the background, the rows of a later ``gather(ids)`` that this
        rank will read from its disk tier (those in no cache and, from a part, its own); that
        gather then takes them (or waits for them) instead of reading. No disk tier: nothing."""
        if self.disk is None:
            return
        ids = torch.as_tensor(ids).long().cpu()
        want = ids[self.slot.cpu()[ids] < 0]
        if self.host_slot is not None:  # held by the host tier
            want = want[self.host_slot[want] < 0]
        if self.exchange is not None and self.owner is not None:  # fetched from the peer
            want = want[self.owner.cpu()[want] < 0]
        if self.local is not None:  # a part's: its own rows only, at their positions
            want = self.view.positions(want[self.local[want] >= 0])
        if self._reader is None:
            self._reader = ThreadPoolExecutor(1, thread_name_prefix="gnnscale-ahead")
        self._pending.append((want, self._reader.submit(self.disk.read, want)))
        while len(self._pending) > 8:  # never taken: a gather asked for other rows
            self._pending.popleft()

    def _prefetched(self, rows: torch.Tensor) -> torch.Tensor | None:
        for k, (want, fut) in enumerate(self._pending):
            if want.numel() == rows.numel() and torch.equal(want, rows):
                for _ in range(k + 1):  # the older ones were never asked for
                    self._pending.popleft()
                return fut.result()
        return None

    def read_ahead(self, feed: Iterable, depth: int | None = None,
                   key: Callable[[Any], torch.Tensor] | None = None
                   ) -> Generator[Any, None, None]:
        """``feed`` passed through ``depth`` items late, each item's rows :meth:`prefetch` ed
        when it enters the window: the disk reads of the next ``depth`` steps run while this
        one computes (``depth`` default: ``cache.disk_ahead``). ``key(item)``: the ids the
        item's step will gather (default ``item[0].input_nodes``: ``(MiniBatch, ...)`` items;
        ``split`` passes each plan's loaded rows)."""
        depth = self.ahead if depth is None else depth
        rows_of = key if key is not None else (lambda item: item[0].input_nodes)
        if self.disk is None or depth <= 0:
            yield from feed
            return
        window: deque = deque()
        source = iter(feed)
        try:
            for item in source:
                self.prefetch(rows_of(item))
                window.append(item)
                if len(window) > depth:
                    yield window.popleft()
            while window:
                yield window.popleft()
        finally:
            for _, fut in self._pending:
                fut.cancel()
            self._pending.clear()
            close = getattr(source, "close", None)
            if close is not None:  # the sampler's feed stops its producer
                close()

    def _owned_or_fetched(self, ids: torch.Tensor) -> torch.Tensor:
        """Rows of ``ids``: this rank's own from its table, the others from their owners
        (one collective fetch)."""
        out = torch.empty(ids.numel(), self.num_features, dtype=self.host.dtype,
                          device=self.device)
        away = self.local[ids.cpu()].to(self.device) < 0
        out[~away] = self._from_host(ids[~away])
        out[away] = self.owner_exchange.fetch(  # peers ask this rank for its own rows only
            ids[away], self.home[ids[away]], lambda req: self._from_host(req).to(self.device),
            self.num_features, self.host.dtype)
        return out

    def _from_host(self, ids: torch.Tensor) -> torch.Tensor:
        ids = ids.cpu()
        if self.local is not None:  # a part's rows: their positions in this rank's table
            ids = self.view.positions(ids)
        if not device_seam.is_accelerator(self.device):
            return self._host_read(ids)
        if self.disk is not None:
            return device_seam.to_device(self.disk.read(ids), self.device)
        staging = device_seam.host_empty((ids.numel(), self.num_features), self.device,
                                         self.host.dtype)
        torch.index_select(self.host, 0, ids, out=staging)
        return device_seam.to_device(staging, self.device)

    def serve(self, ids: torch.Tensor) -> torch.Tensor:
        """Rows of ids this rank caches (answers peers' requests); from a part (``parts=``):
        the rows it caches or owns."""
        ids = ids.to(self.device).long()
        slots = self.slot[ids]
        if self.local is not None:
            out = torch.empty(ids.numel(), self.num_features, dtype=self.host.dtype,
                              device=self.device)
            hit = slots >= 0
            out[hit] = self.cache[slots[hit].long()]
            out[~hit] = self._from_host(ids[~hit]).to(self.device)
            return out
        if ids.numel() and bool((slots < 0).any()):
            bad = ids[slots < 0][:5].tolist()
            raise RuntimeError(f"rank {self.rank} was asked for vertices {bad} it does not cache:"
                               " the ranks' owner maps differ")
        return self.cache[slots.long()]

    # -- gather ------------------------------------------------------------------------------
    def gather(self, ids: torch.Tensor) -> torch.Tensor:
        """``features[ids]`` on this rank's device, in order, as :attr:`out_dtype` (16-bit
        tiers up-cast here); collective if :attr:`collective`."""
        out = self._gather(ids)
        return out if self.out_dtype in (None, out.dtype) else out.to(self.out_dtype)

    def _gather(self, ids: torch.Tensor) -> torch.Tensor:
        ids = torch.as_tensor(ids)
        if ids.dim() != 1 or ids.is_floating_point() or ids.dtype == torch.bool:
            raise ValueError(f"ids must be a 1-D integer tensor, got {ids.dtype} with shape "
                             f"{tuple(ids.shape)}")
        ids = ids.to(self.device).long()
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= self.num_nodes):
            raise IndexError(f"ids must lie in [0, {self.num_nodes}), got "
                             f"[{int(ids.min())}, {int(ids.max())}]")
        slots = self.slot[ids]
        hit = slots >= 0
        if (self.exchange is None and self.owner_exchange is None and self.host_slot is None
                and ids.numel() and not bool(hit.any())):
            out = self._from_host(ids)  # every row from the host: no buffer to scatter into
            if self.visits is not None:
                self.visits += torch.bincount(ids, minlength=self.num_nodes)
            self._account(int(ids.numel()), 0, 0, int(ids.numel()))
            return out
        out = torch.empty(ids.numel(), self.num_features, dtype=self.host.dtype,
                          device=self.device)
        out[hit] = self.cache[slots[hit].long()]
        miss_pos = (~hit).nonzero().flatten()
        host_hits = 0
        if self.host_slot is not None and miss_pos.numel():  # the host tier, before the disk
            assert self.host_cache is not None
            hslot = self.host_slot[ids[miss_pos].cpu()]
            held = hslot >= 0
            hpos = miss_pos[held.to(self.device)]
            out[hpos] = device_seam.to_device(self.host_cache[hslot[held].long()], self.device)
            host_hits = int(hpos.numel())
            miss_pos = miss_pos[~held.to(self.device)]
        remote = 0
        if self.exchange is not None:
            owners = self.owner[ids[miss_pos]]
            is_remote = owners >= 0
            rpos = miss_pos[is_remote]
            rows = self.exchange.fetch(ids[rpos], owners[is_remote], self.serve,
                                       self.num_features, self.host.dtype)
            out[rpos] = rows
            remote = int(rpos.numel())
            miss_pos = miss_pos[~is_remote]
        away = 0
        if self.owner_exchange is not None:  # parts=: every rank fetches, also nothing
            far = self.local[ids[miss_pos].cpu()].to(self.device) < 0
            fpos = miss_pos[far]
            out[fpos] = self.owner_exchange.fetch(ids[fpos], self.home[ids[fpos]], self.serve,
                                                  self.num_features, self.host.dtype)
            away = int(fpos.numel())
            miss_pos = miss_pos[~far]
        if miss_pos.numel():
            out[miss_pos] = self._from_host(ids[miss_pos])
        if self.visits is not None:
            self.visits += torch.bincount(ids, minlength=self.num_nodes)
        self._account(int(ids.numel()), int(hit.sum()), remote, int(miss_pos.numel()), away,
                      host_hits)
        return out

    # -- accounting --------------------------------------------------------------------------
    def _account(self, requested: int, local: int, remote: int, host: int,
                 away: int = 0, host_hits: int = 0) -> None:
        self.last = {
            "requested": requested, "hits": local + remote + host_hits, "local_hits": local,
            "remote_hits": remote, "host_hits": host_hits, "misses": host,
            "bytes_host_to_rank": (host + host_hits) * self.row_bytes,
            "bytes_rank_to_rank": remote * self.row_bytes, "remote_owner_rows": away,
            "bytes_remote_owner": away * self.row_bytes, "calls": 1,
        }
        for k, v in self.last.items():
            self.totals[k] += v
        if self.disk is not None:
            self._take_disk()

    def _take_disk(self) -> None:
        """Move the disk tier's counters (its reads since the last call, also those serving
        peers) into :attr:`disk_last` and :attr:`disk_totals`."""
        assert self.disk is not None
        taken = vars(self.disk.take_stats())
        self.disk_last = dict(taken)
        for k, v in taken.items():
            self.disk_totals[k] += v

    def _disk_rates(self, counts: dict[str, float], requested: int) -> dict[str, float]:
        """The disk tier's counters and rates: ``disk_rows_per_s`` (rows over the seconds
        waited for them), ``rows_per_read``, ``disk_bytes_per_row_byte`` (bytes read from
        the device over the bytes of the rows gathered), ``disk_rate`` (the share of
        requested rows read from disk) and ``disk_probe_reads_per_s``."""
        reads, rows = counts["disk_reads"], counts["disk_rows"]
        out = dict(counts)
        out["disk_rows_per_s"] = rows / counts["disk_time"] if counts["disk_time"] else 0.0
        out["rows_per_read"] = rows / reads if reads else 0.0
        out["disk_bytes_per_row_byte"] = (counts["disk_bytes_read"] / (rows * self.row_bytes)
                                          if rows else 0.0)
        out["disk_rate"] = rows / requested if requested else 0.0
        out["disk_probe_reads_per_s"] = self.disk_probe
        return out

    def last_stats(self) -> dict[str, float]:
        """Counters of the latest ``gather`` plus its ``cache_hit_rate`` (and, with a disk
        tier, its disk counters and rates)."""
        out = _with_rates(self.last)
        if self.disk is not None:
            out.update(self._disk_rates(self.disk_last, self.last["requested"]))
        return out

    def epoch_stats(self, reduce: bool = False) -> dict[str, float]:
        """Counters since :meth:`reset_epoch`; ``reduce=True`` sums them over ranks (collective)."""
        totals = dict(self.totals)
        if reduce and dist.is_initialized() and dist.get_world_size() > 1:
            t = torch.tensor([totals[k] for k in COUNTERS], dtype=torch.int64,
                             device=device_seam.comm_device())
            dist.all_reduce(t)
            totals = dict(zip(COUNTERS, t.tolist()))
        out = _with_rates(totals)
        if self.disk is not None:  # this rank's own (the runner sums them over ranks)
            self._take_disk()
            out.update(self._disk_rates(self.disk_totals, self.totals["requested"]))
        return out

    def reset_epoch(self) -> None:
        """Zero the counters :meth:`epoch_stats` reports."""
        self.totals = dict.fromkeys(COUNTERS, 0)
        if self.disk is not None:
            self.disk.take_stats()
            self.disk_totals = dict.fromkeys(DISK_COUNTERS, 0) | {
                "disk_time": 0.0, "disk_wait_time": 0.0, "disk_ahead_rows": 0}


def owner_rows(view: Any, ids: torch.Tensor, group: dist.ProcessGroup | None = None
               ) -> torch.Tensor:
    """Rows of the global ``ids`` of a part's :class:`~gnnscale.partition.parts.RowView`
    (``parts=``): the ones it holds read from it, the others fetched from their owners (the
    remote owner tier without a store: collective on ``group``, in rounds every rank agrees
    on; every rank calls it, also with no ids; not collective when the view's ``remote`` is a
    :class:`~gnnscale.cache.served.ServedExchange`). Used by the layer-wise evaluation."""
    from gnnscale.distributed.collectives import group_size

    ids = ids.long().cpu()
    out = torch.empty(ids.numel(), *view.shape[1:], dtype=view.dtype)
    mine = view.holds(ids)
    out[mine] = view.rows[view.positions(ids[mine])]
    served = getattr(view, "remote", None)  # owners that answer at any time: not collective
    if view.owner is None or served is None and (not dist.is_initialized() or
                                                 group_size(group) == 1):
        if not bool(mine.all()):
            view.positions(ids)  # names the first row it does not hold
        return out
    exchange = served if served is not None else DistExchange(group)
    dev = torch.device("cpu") if served is not None else device_seam.comm_device(group)

    def serve(req: torch.Tensor) -> torch.Tensor:  # peers ask this rank for its own rows only
        return view.rows[view.positions(req.cpu())].to(dev)

    where = (~mine).nonzero().flatten()
    for k in range(_agreed_rounds(where.numel(), exchange)):
        pos = where[k * _CHUNK_ROWS:(k + 1) * _CHUNK_ROWS]
        chunk = ids[pos]
        out[pos] = exchange.fetch(chunk.to(dev), view.owner[chunk].int().to(dev), serve,
                                  int(view.shape[1]), view.dtype).cpu()
    return out


def _agreed_rounds(count: int, exchange: Exchange, chunk: int = _CHUNK_ROWS) -> int:
    """The rounds of ``chunk`` ids that every rank of ``exchange`` runs to fetch ``count`` rows
    (the most any rank needs: collective)."""
    rounds = -(-count // chunk)
    if not isinstance(exchange, DistExchange):
        return rounds
    most = torch.tensor([rounds], dtype=torch.int64,
                        device=device_seam.comm_device(exchange.group))
    dist.all_reduce(most, op=dist.ReduceOp.MAX, group=exchange.group)
    return int(most)


def _with_rates(counts: dict[str, int]) -> dict[str, float]:
    req = counts["requested"]
    out: dict[str, float] = dict(counts)
    out["cache_hit_rate"] = counts["hits"] / req if req else 0.0
    out["local_hit_rate"] = counts["local_hits"] / req if req else 0.0
    out["host_hit_rate"] = counts["host_hits"] / req if req else 0.0
    return out


# -- choosing what to cache ------------------------------------------------------------------
def hottest(hotness: torch.Tensor, k: int, candidates: torch.Tensor | None = None) -> torch.Tensor:
    """The ``k`` hottest ids (of ``candidates`` if given), ties to the lower id; sorted by heat."""
    ids = torch.arange(hotness.numel()) if candidates is None else candidates.long()
    if k <= 0 or ids.numel() == 0:
        return torch.empty(0, dtype=torch.long)
    order = torch.argsort(hotness[ids], descending=True, stable=True)
    return ids[order[:k]]


def select_cached(hotness: torch.Tensor, capacity: int, *, placement: str = "replicated",
                  part: torch.Tensor | None = None, rank: int = 0) -> torch.Tensor:
    """Ids rank ``rank`` caches: global hottest (replicated) or hottest of its partition."""
    if placement == "replicated":
        return hottest(hotness, capacity)
    if placement != "partitioned":
        raise ValueError(f"placement must be replicated or partitioned, got {placement!r}")
    if part is None:
        raise ValueError("cache.placement=partitioned needs a partition map (part[v] = rank)")
    return hottest(hotness, capacity, (part == rank).nonzero().flatten())


def owner_map(cached_by_rank: list[torch.Tensor], num_nodes: int) -> torch.Tensor:
    """``owner[v]`` = the rank caching ``v`` (-1 = none); the sets must be disjoint."""
    owner = torch.full((num_nodes,), -1, dtype=torch.int32)
    for rank, ids in enumerate(cached_by_rank):
        if bool((owner[ids] >= 0).any()):
            raise ValueError(f"rank {rank} caches vertices another rank already caches: "
                             "partitioned caches must be disjoint")
        owner[ids] = rank
    return owner


def partition_map(part: Any, num_nodes: int, world: int) -> torch.Tensor:
    """``part`` as a LongTensor ``[N]`` (a tensor or a partition book with ``.part``)."""
    if part is None:
        raise ValueError("cache.placement=partitioned needs a partition map: pass part "
                         "(the partition book's vertex -> part) or use placement=replicated")
    p = torch.as_tensor(getattr(part, "part", part)).long().cpu()
    if p.shape != (num_nodes,):
        raise ValueError(f"the partition map has shape {tuple(p.shape)}, expected ({num_nodes},)")
    parts = int(p.max()) + 1 if p.numel() else 0
    if p.numel() and int(p.min()) < 0:
        raise ValueError("the partition map holds negative parts")
    if parts != world:
        raise ValueError(f"the partition map has {parts} parts but there are {world} ranks: "
                         "partition into world_size parts for partitioned placement")
    return p


def build_feature_store(graph: GraphStore, policy: CachePolicy, *, topo: Any = None,
                        device: torch.device | str | None = None,
                        schedule: Schedule | None = None, sampler: Sampler | None = None,
                        part: Any = None, seed: int = 0,
                        features: torch.Tensor | None = None, peak_bytes: int | None = None,
                        visits: torch.Tensor | None = None, record_visits: bool = False,
                        fetch_remote: bool = True,
                        hotness: torch.Tensor | None = None,
                        group: dist.ProcessGroup | None = None) -> FeatureStore:
    """Size the cache, rank vertices by ``policy`` and fill this rank's store.

    Replicated: every rank caches the same global hottest ``capacity`` vertices (PaGraph).
    Partitioned: rank ``r`` caches the hottest ``capacity`` vertices with ``part[v] == r``
    (Quiver/GSplit); the owner map is exchanged, so this call is collective when
    ``world_size > 1``. ``schedule`` (the run's) and ``sampler`` feed the sampling policies,
    replayed with one micro-batch per rank of ``topo``; ``seed`` feeds ``random``;
    ``peak_bytes`` feeds ``cache.auto``; ``visits`` feeds ``oracle``.
    ``fetch_remote=False`` keeps the owner map (``store.owner``) but serves a miss from the
    host, never from the peer caching it (``split`` routes work to the owner instead).
    ``hotness`` (float ``[N]``), when given, replaces ``policy.hotness``: it was computed
    elsewhere (``strategy=factored``'s samplers pre-sample for ``cache=presample``).
    ``group``: the process group of the ranks of ``topo`` (None: the world), on which the
    exchanges run.
    """
    if graph.is_typed and features is None:
        if getattr(policy, "host_bytes", None):
            raise ValueError("cache.host_bytes is not supported on typed graphs yet: their "
                             "cache tier is the host tier on CPU; unset cache.host_bytes")
        return build_typed_store(graph, policy, topo=topo, device=device, schedule=schedule,
                                 sampler=sampler, part=part, seed=seed, peak_bytes=peak_bytes,
                                 visits=visits, hotness=hotness)
    x = graph.x if features is None else features
    if x is None:
        raise ValueError(f"graph {graph.name!r} has no features to cache")
    rank = topo.rank if topo is not None else 0
    world = topo.world_size if topo is not None else 1
    device = torch.device(device if device is not None else
                          (topo.device if topo is not None else "cpu"))
    n = graph.num_nodes
    row_bytes = int(x.shape[1]) * _stored_size(x, policy)  # a row as the tiers hold it
    p = partition_map(part, n, world) if policy.placement == "partitioned" else None
    capacity = policy.capacity(n, row_bytes, device=device, peak_bytes=peak_bytes)
    if hotness is not None and hotness.shape != (n,):
        raise ValueError(f"hotness must have one entry per vertex ({n}), got shape "
                         f"{tuple(hotness.shape)}")
    host_budget = int(getattr(policy, "host_bytes", None) or 0)
    heat = hotness
    if capacity > 0 or host_budget > 0:
        if heat is None:
            heat = policy.hotness(graph, schedule=schedule, sampler=sampler, seed=seed,
                                  visits=visits, world_size=world)
    if capacity > 0:
        mine = select_cached(heat, capacity, placement=policy.placement, part=p, rank=rank)
    else:
        mine = torch.empty(0, dtype=torch.long)
    owner = _exchanged_owner(mine, p, world, n, group)
    rows = getattr(x, "rows", x)  # a part's RowView: the rows of its own file
    whole = graph if rows is graph.x else None
    out_dtype, x = _feature_dtype(x, policy, whole)
    rows = getattr(x, "rows", x)
    host_ids = None
    if host_budget > 0:
        assert heat is not None
        host_ids = host_tier_ids(heat, host_budget // (int(x.shape[1]) * x.element_size()),
                                 mine, owner if fetch_remote else None,
                                 getattr(x, "held", None))
    in_memory = _in_memory_bytes(x, host_ids, capacity * row_bytes, device)
    disk = choose_disk(rows, policy, in_memory, graph=whole, part=p)
    store = FeatureStore(x, mine, device=device, topo=topo, owner=owner,
                         record_visits=record_visits, fetch_remote=fetch_remote, group=group,
                         disk=disk, out_dtype=out_dtype, host_ids=host_ids)
    if disk is not None:
        store.ahead = int(getattr(policy, "disk_ahead", 0))
        store.disk_probe = probe(disk.path, block=disk.block, depth=disk.depth,
                                 reads=min(4096, max(256, 16 * disk.depth)))
    return store


def _exchanged_owner(mine: torch.Tensor, part_map: torch.Tensor | None, world: int, n: int,
                     group: dist.ProcessGroup | None) -> torch.Tensor | None:
    """Partitioned over several ranks: every vertex's caching rank, from every rank's
    ``mine`` (collective); None otherwise."""
    if part_map is None or world <= 1:
        return None
    if not dist.is_initialized():
        raise RuntimeError("partitioned placement over several ranks needs torch.distributed "
                           "(or build the stores yourself with a LocalExchange)")
    return owner_map(all_gather_rows(mine, fill=-1, group=group), n)


def _in_memory_bytes(x: Any, host_ids: torch.Tensor | None, cache_bytes: int,
                     device: torch.device) -> int:
    """Memory the features take on this host: the host tier, and the cache tier on a CPU."""
    in_memory = 0 if host_ids is None else int(host_ids.numel()) * int(x.shape[1]) * \
        x.element_size()
    if not device_seam.is_accelerator(device):
        in_memory += cache_bytes
    return in_memory


def host_tier_ids(hotness: torch.Tensor, rows: int, cached: torch.Tensor,
                  owner: torch.Tensor | None = None, held: torch.Tensor | None = None
                  ) -> torch.Tensor:
    """The host tier's ids: the ``rows`` hottest vertices that this rank's cache tier does not
    hold, no peer's cache tier serves (``owner`` >= 0) and, from a part, that it owns
    (``held``)."""
    n = hotness.numel()
    free = torch.ones(n, dtype=torch.bool)
    free[cached.long().cpu()] = False
    if owner is not None:
        free &= torch.as_tensor(owner).cpu() < 0
    if held is not None:
        own = torch.zeros(n, dtype=torch.bool)
        own[torch.as_tensor(held).long().cpu()] = True
        free &= own
    return hottest(hotness, int(rows), free.nonzero().flatten())


def _stored_size(x: Any, policy: CachePolicy) -> int:
    """Bytes of one feature as every tier holds it: ``cache.feature_dtype``'s for a float
    table (a byte budget holds twice the rows in 16 bits), else the table's own."""
    want = DTYPES[getattr(policy, "feature_dtype", "float32") or "float32"]
    if want != torch.float32 and x.dtype.is_floating_point:
        return torch.empty(0, dtype=want).element_size()
    return int(x.element_size())


def _feature_dtype(x: Any, policy: CachePolicy, graph: GraphStore | None
                   ) -> tuple[torch.dtype | None, Any]:
    """``cache.feature_dtype``: the dtype gathers return and the table every tier holds: a
    16-bit copy of the processed features (written once beside the processed folder, mapped),
    of a part folder's rows (a view of the copy, :func:`~gnnscale.cache.layout.rounded_copy`;
    rows peers serve are rounded on arrival, equal to the copy's), or of an in-memory table;
    ``(None, x)`` when the table already has that dtype."""
    want = DTYPES[getattr(policy, "feature_dtype", "float32") or "float32"]
    if want == torch.float32 or x.dtype == want:
        return None, x
    if not x.dtype.is_floating_point:
        raise ValueError(f"cache.feature_dtype={policy.feature_dtype} rounds float features; "
                         f"these are {x.dtype}")
    if getattr(x, "held", None) is not None:  # a part's rows: a rounded copy beside its folder
        view = copy.copy(x)
        view.rows = rounded_copy(x.rows, want)
        return x.dtype, view
    if not x.is_floating_point():
        raise ValueError(f"cache.feature_dtype={policy.feature_dtype} rounds float features; "
                         f"these are {x.dtype}")
    if graph is not None and graph.meta.get("processed_dir") and mapped_file(x) is not None:
        path, _ = derived_copy(graph, "none", want)
        return x.dtype, open_copy(path, want)
    return x.dtype, x.to(want)


def host_memory() -> int:
    """Bytes of this host's memory (``MemTotal``)."""
    total = meminfo("MemTotal").get("MemTotal")
    return total if total is not None else os.sysconf("SC_PAGE_SIZE") * os.sysconf(
        "SC_PHYS_PAGES")


def choose_disk(table: torch.Tensor, policy: CachePolicy, cache_bytes: int = 0, *,
                graph: GraphStore | None = None, part: torch.Tensor | None = None
                ) -> DiskTier | None:
    """The disk tier for ``table`` by ``policy.disk``: None (auto) when the table is larger
    than the memory a rank may hold of it (``policy.memory_budget``, else the host's memory),
    ``True`` always, ``False`` never; the budget must hold the ``cache_bytes`` the tiers keep
    in host memory (the host tier's, and the cache tier's on a CPU). Only a table
    memory-mapped from a file can be read from disk.
    ``policy.disk_order`` other than ``none`` reads a copy of ``graph``'s processed features
    laid out in that order (parts first by ``part`` when given; :mod:`gnnscale.cache.layout`),
    a whole graph's table only."""
    mode = getattr(policy, "disk", False)
    budget = getattr(policy, "memory_budget", None)
    if budget is not None and cache_bytes > budget:
        raise ValueError(f"the memory budget ({budget:,} bytes) cannot hold the feature cache "
                         f"({cache_bytes:,} bytes): give at least cache.memory_budget="
                         f"{cache_bytes} or a smaller cache.ratio / cache.bytes / "
                         f"cache.host_bytes")
    if mode is False or table.dim() != 2 or table.numel() == 0:
        return None
    if mode is None:
        limit = budget if budget is not None else host_memory()
        if table.numel() * table.element_size() <= limit:
            return None
    kw = {"block": policy.disk_block, "depth": policy.disk_depth}
    order = getattr(policy, "disk_order", "none")
    if order != "none":
        if graph is None:
            raise ValueError(f"cache.disk_order={order} lays out a whole graph's processed "
                             "feature file; a part's rows (parts=) are read in their own "
                             "order: set cache.disk_order=none")
        path, index = derived_copy(graph, order, table.dtype, part)
        return DiskTier.of_file(path, table.dtype, index=index, **kw)
    tier = DiskTier.of(table, **kw)
    if tier is None and mode is True:
        raise ValueError("cache.disk=true reads the features from their file, but this "
                         "feature table is not memory-mapped from one (load the dataset from "
                         "its processed folder, or set cache.disk=false)")
    return tier


# -- typed graphs ----------------------------------------------------------------------------
class TypedFeatureStore:
    """Serves a typed graph's input rows: one :class:`FeatureStore` per featured node type (over
    its type-local ids); featureless types' rows are only counted (see the module docstring)."""

    def __init__(self, graph: GraphStore, stores: dict[str, FeatureStore],
                 device: torch.device | str = "cpu") -> None:
        self.node_types = tuple(graph.node_types)
        self.offset = graph.node_type_offset.long().clone()
        self.num_nodes = graph.num_nodes
        self.stores = stores
        self.device = torch.device(device)
        self.featureless = {t: graph.num_nodes_of(t) for t in self.node_types if t not in stores}
        self._touched = {t: torch.zeros(n, dtype=torch.bool) for t, n in self.featureless.items()}

    @property
    def whole_table(self) -> bool:
        """Whether every type's host tier holds all of that type's rows."""
        return all(s.whole_table for s in self.stores.values())

    @property
    def collective(self) -> bool:
        """Never: every type's store serves misses from the host (replicated placement)."""
        return False

    @property
    def num_cached(self) -> int:
        """Rows in this rank's device tiers, all types together."""
        return sum(s.num_cached for s in self.stores.values())

    @property
    def cache_bytes(self) -> int:
        """Bytes of this rank's device tiers, all types together."""
        return sum(s.cache_bytes for s in self.stores.values())

    def gather(self, ids: torch.Tensor) -> TypedInputs:
        """The typed inputs of the global ``ids`` on this rank's device, rows in order."""
        ids = torch.as_tensor(ids)
        if ids.dim() != 1 or ids.is_floating_point() or ids.dtype == torch.bool:
            raise ValueError(f"ids must be a 1-D integer tensor, got {ids.dtype} with shape "
                             f"{tuple(ids.shape)}")
        ids = ids.cpu().long()
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= self.num_nodes):
            raise IndexError(f"ids must lie in [0, {self.num_nodes}), got "
                             f"[{int(ids.min())}, {int(ids.max())}]")
        node_type = torch.searchsorted(self.offset[1:-1], ids, right=True)
        local = ids - self.offset[node_type]
        features = {}
        for k, t in enumerate(self.node_types):
            rows = local[node_type == k]
            if t in self.stores:
                features[t] = self.stores[t].gather(rows)
            else:
                self._touched[t][rows] = True
        return TypedInputs(ids, node_type, local, features).to(self.device)

    def epoch_stats(self, reduce: bool = False) -> dict[str, float]:
        """The featured types' counters summed (plus ``bytes_host_to_rank.<type>``) and
        ``embedding_rows_touched``, since :meth:`reset_epoch`; ``reduce`` as
        :meth:`FeatureStore.epoch_stats`."""
        totals = dict.fromkeys(COUNTERS, 0)
        out: dict[str, float] = {}
        for t, store in self.stores.items():
            stats = store.epoch_stats(reduce)
            for k in COUNTERS:
                totals[k] += int(stats[k])
            out[f"bytes_host_to_rank.{t}"] = float(stats["bytes_host_to_rank"])
        touched = sum(int(m.sum()) for m in self._touched.values())
        out.update(_with_rates(totals))
        out["embedding_rows_touched"] = float(touched)
        return out

    def read_ahead(self, feed: Iterable, depth: int | None = None,
                   key: Callable[[Any], torch.Tensor] | None = None
                   ) -> Generator[Any, None, None]:
        """``feed`` as it is: a typed store reads no rows ahead."""
        yield from feed

    def touched(self, node_type: str) -> torch.Tensor:
        """The local ids of ``node_type`` (featureless) gathered since :meth:`reset_epoch`."""
        return self._touched[node_type].nonzero().flatten()

    def reset_epoch(self) -> None:
        """Zero the counters :meth:`epoch_stats` reports."""
        for store in self.stores.values():
            store.reset_epoch()
        for m in self._touched.values():
            m.zero_()


def typed_inputs(graph: GraphStore, ids: torch.Tensor) -> TypedInputs:
    """The typed inputs of the global ``ids`` read straight from the graph (host, uncounted):
    for evaluation and measurements outside a run's store."""
    ids = torch.as_tensor(ids).cpu().long()
    node_type = graph.node_type_of(ids)
    local = ids - graph.node_type_offset.long()[node_type]
    features = {t: _host_rows(x, local[node_type == graph.node_types.index(t)])
                for t, x in graph.features.items()}
    return TypedInputs(ids, node_type, local, features)


def build_typed_store(graph: GraphStore, policy: CachePolicy, *, topo: Any = None,
                      device: torch.device | str | None = None,
                      schedule: Schedule | None = None, sampler: Sampler | None = None,
                      part: Any = None, seed: int = 0, peak_bytes: int | None = None,
                      visits: torch.Tensor | None = None,
                      hotness: torch.Tensor | None = None) -> TypedFeatureStore:
    """A typed graph's store: per featured node type, a :class:`FeatureStore` caching the
    type's hottest rows by ``policy`` (one ranking over the global ids, sliced per type; each
    type's capacity from its own row width), its table as ``cache.feature_dtype`` (rounded in
    memory when the store is built). Replicated placement only."""
    if policy.placement == "partitioned":
        raise ValueError("cache.placement=partitioned is not supported on typed graphs yet: "
                         "use cache.placement=replicated")
    world = topo.world_size if topo is not None else 1
    device = torch.device(device if device is not None else
                          (topo.device if topo is not None else "cpu"))
    n = graph.num_nodes
    if hotness is not None and hotness.shape != (n,):
        raise ValueError(f"hotness must have one entry per vertex ({n}), got shape "
                         f"{tuple(hotness.shape)}")
    heat = hotness
    stores: dict[str, FeatureStore] = {}
    for t, x in graph.features.items():
        lo = int(graph.node_type_offset[graph.node_types.index(t)])
        row_bytes = int(x.shape[1]) * _stored_size(x, policy)  # as its tiers hold it
        capacity = policy.capacity(int(x.shape[0]), max(row_bytes, 1), device=device,
                                   peak_bytes=peak_bytes) if row_bytes else 0
        mine = torch.empty(0, dtype=torch.long)
        if capacity > 0:
            if heat is None:
                heat = policy.hotness(graph, schedule=schedule, sampler=sampler, seed=seed,
                                      visits=visits, world_size=world)
            mine = hottest(heat[lo:lo + x.shape[0]], capacity)
        # cache.feature_dtype: each type's table rounded once, in memory (a typed store has
        # no disk tier), its gathers up-cast
        out_dtype, x = _feature_dtype(x, policy, None) if row_bytes else (None, x)
        stores[t] = FeatureStore(x, mine, device=device, topo=topo, out_dtype=out_dtype)
    return TypedFeatureStore(graph, stores, device=device)
