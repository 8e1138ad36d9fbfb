"""Suite ``factored_queue``: factored's shared queue against fixed routes, one trainer slowed.

A busy loop shares the core of trainer 1 (``strategy=factored``, 2 trainers, 1 sampler, ranks
pinned to cores); each round runs both queues at staleness 0 and 1, and the shared queue with
1 to 3 jobs per trainer and step at staleness 0 (``strategy.jobs_per_trainer``), alternating.
See :func:`benchmarks.factored.queue_comparison`.
"""

from __future__ import annotations

from benchmarks.factored import queue_comparison


def run(quick: bool = False) -> dict:
    """``{"config", "results", "ratios"}`` of :func:`~benchmarks.factored.queue_comparison`."""
    out = queue_comparison(quick)
    if "skipped" in out:
        return {"config": {}, "results": out, "ratios": {}}
    return {"config": out["config"], "results": {"rows": out["rows"]}, "ratios": out["ratios"]}
