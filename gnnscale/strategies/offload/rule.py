"""HongTu's choice between caching and recomputing intermediate data (section 4.2), decided per
batch of chunks and layer from measured costs, in the terms of its Eq. 4.

Eq. 4 prices a transfer plan as rows over the throughput of the link each crosses: host to
device, device to device (here rank to rank) and reuse in place on the device. For batch ``b``
of layer ``k`` (rows of width ``w``, ``4w`` bytes each) this rank's chunk costs, in its
backward pass:

- **cache**: the aggregate of its ``D`` destinations written to the host in the forward pass
  and loaded back with the destinations' own rows: ``D*4w / T_d2h + 2*D*4w / T_h2d``;
- **recompute**: the chunk's inputs reloaded as the forward pass loaded them (``L`` rows from
  the host, ``R`` rows reused from the previous batch's buffer, ``S`` rows shared by peers)
  plus the aggregation run again: ``L*4w / T_h2d + R*4w / T_reuse + S*4w / T_r2r + t_agg``.
  Reuse needs the previous batch's buffer on the device, which only a recomputed previous
  batch leaves there; after a cached one the ``R`` rows come from the host too.

The throughputs and ``t_agg`` (per chunk and layer) are measured in the first training
epoch's forward pass, which caches every aggregate it may; the costs are agreed over ranks
(maximum: a batch runs on all ranks at once and every rank of a recomputed batch exchanges
rows), and a dynamic programme over the batches in run order (the state: the previous batch's
mode) picks each layer's cheapest sequence of modes. Every rank derives the same choice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from gnnscale.deps.shuffle import ShuffleStats
from gnnscale.strategies.offload.tiers import TransferStats
from gnnscale.strategies.offload.transfers import BatchTransfer

FLOAT = 4
CACHE, RECOMPUTE = "cache", "recompute"


@dataclass
class Rates:
    """This rank's measured throughputs in bytes per second (inf: nothing was timed)."""

    h2d: float
    d2h: float
    r2r: float
    reuse: float

    @staticmethod
    def measured(stats: TransferStats, shuffle: ShuffleStats) -> Rates:
        """The rates of the copies counted in ``stats`` and the exchanges in ``shuffle``."""
        def rate(nbytes: float, seconds: float) -> float:
            return nbytes / seconds if seconds > 0 and nbytes > 0 else math.inf
        return Rates(rate(stats.host_to_device, stats.h2d_seconds),
                     rate(stats.device_to_host, stats.d2h_seconds),
                     rate(shuffle.bytes_sent, shuffle.seconds),
                     rate(stats.reused, stats.reuse_seconds))


def batch_costs(t: BatchTransfer, width: int, agg_seconds: float, rates: Rates,
                agg_width: int | None = None) -> tuple[float, float, float]:
    """Seconds of this rank's chunk of a batch: (cache, recompute after a recomputed batch,
    recompute after a cached one or first); ``agg_width``: the aggregate's
    (:meth:`GNN.aggregate_width`, default ``width``)."""
    row = width * FLOAT
    agg = (width if agg_width is None else agg_width) * FLOAT
    dst = t.dst.numel()
    cache = dst * agg / rates.d2h + dst * (agg + row) / rates.h2d
    shared = sum(t.recv_counts) * row / rates.r2r + agg_seconds
    again = t.rows_loaded * row / rates.h2d + t.rows_reused * row / rates.reuse + shared
    cold = (t.rows_loaded + t.rows_reused) * row / rates.h2d + shared
    return cache, again, cold


def decide(costs: torch.Tensor) -> list[str]:
    """The cheapest modes of one layer's batches (``costs``: batches x (cache, recompute
    after recompute, recompute after cache), in run order); ties go to caching."""
    c = costs.tolist()
    best = {CACHE: c[0][0], RECOMPUTE: c[0][2]}
    back: list[dict[str, str]] = []
    for cache, again, cold in c[1:]:
        via = {CACHE: CACHE if best[CACHE] <= best[RECOMPUTE] else RECOMPUTE,
               RECOMPUTE: CACHE if best[CACHE] + cold <= best[RECOMPUTE] + again
               else RECOMPUTE}
        best = {CACHE: best[via[CACHE]] + cache,
                RECOMPUTE: best[CACHE] + cold if via[RECOMPUTE] == CACHE
                else best[RECOMPUTE] + again}
        back.append(via)
    mode = CACHE if best[CACHE] <= best[RECOMPUTE] else RECOMPUTE
    modes = [mode]
    for via in reversed(back):
        mode = via[mode]
        modes.append(mode)
    return modes[::-1]


def modelled(costs: torch.Tensor, modes: list[str]) -> float:
    """Seconds the costs give a sequence of modes."""
    total, prev = 0.0, CACHE
    for (cache, again, cold), mode in zip(costs.tolist(), modes):
        total += cache if mode == CACHE else (again if prev == RECOMPUTE else cold)
        prev = mode
    return total


def report(costs: torch.Tensor, modes: list[str]) -> dict:
    """The layer's choice and the modelled seconds of it and of either mode throughout."""
    n = len(modes)
    return {"cached": modes.count(CACHE), "recomputed": modes.count(RECOMPUTE),
            "modes": "".join("c" if m == CACHE else "r" for m in modes),
            "modelled_s": modelled(costs, modes),
            "modelled_all_cache_s": modelled(costs, [CACHE] * n),
            "modelled_all_recompute_s": modelled(costs, [RECOMPUTE] * n)}
