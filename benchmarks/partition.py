"""Suite ``partition``: every partitioner at 4 and 16 parts on a products-like synthetic graph.

Reports ``results.<partitioner>.<parts>.{local_edge_ratio, replication_factor, balance_*,
partners_max, time_s}`` (time_s: median wall time of the assignment over repeats; the figures
are deterministic for the seed) and checks the issue's targets: METIS at 4 parts keeps >= 90%
of edges local with balances <= 1.05; CVC at 16 parts has <= 2 (sqrt(p) - 1) partners per part
and a lower replication factor than OEC. ``GNNSCALE_PARTITION_FULL=1`` adds METIS (4 parts) on
the full ``products_sim`` preset with its time and the process's peak memory.
"""

from __future__ import annotations

import math
import os
import resource
import statistics
import time

from benchmarks import ratio
from gnnscale.data import synthetic
from gnnscale.partition.cvc import CvcPartitioner
from gnnscale.partition.fennel import FennelPartitioner
from gnnscale.partition.hvc import HvcPartitioner
from gnnscale.partition.iec import IecPartitioner
from gnnscale.partition.ldg import LdgPartitioner
from gnnscale.partition.metis import MetisPartitioner
from gnnscale.partition.oec import OecPartitioner
from gnnscale.partition.random import RandomPartitioner
from gnnscale.partition.range import RangePartitioner

PARTITIONERS = {
    "metis": MetisPartitioner, "random": RandomPartitioner, "range": RangePartitioner,
    "ldg": LdgPartitioner, "fennel": FennelPartitioner, "oec": OecPartitioner,
    "iec": IecPartitioner, "cvc": CvcPartitioner, "hvc": HvcPartitioner,
}
FIGURES = ("local_edge_ratio", "replication_factor", "balance_vertices", "balance_edges",
           "balance_train", "partners_max", "partners_mean")
PARTS = (4, 16)


def _peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def measure(graph, name: str, num_parts: int, repeats: int) -> dict:
    """Quality figures of one partitioner plus the median assignment time."""
    part = PARTITIONERS[name](seed=0)
    book = part.partition(graph, num_parts)
    row = {k: book.quality[k] for k in FIGURES}
    times = [book.quality["time_s"]]
    for _ in range(repeats - 1):
        t0 = time.perf_counter()
        part.assign(graph, num_parts, None)
        times.append(time.perf_counter() - t0)
    row["time_s"] = statistics.median(times)
    return row


def full_metis() -> dict:
    """METIS, 4 parts, on the full products_sim preset: time and peak memory."""
    t0 = time.perf_counter()
    graph = synthetic.generate("products_sim", seed=0)
    gen_s = time.perf_counter() - t0
    graph.x = None  # features play no part in partitioning: free them first
    rss_before = _peak_rss_gib()
    book = MetisPartitioner(seed=0).partition(graph, 4)
    row = {k: book.quality[k] for k in FIGURES}
    row.update(time_s=book.quality["time_s"], generate_s=gen_s, num_nodes=graph.num_nodes,
               num_edges=graph.num_edges, peak_rss_gib_before=rss_before,
               peak_rss_gib=_peak_rss_gib())
    return row


def run(quick: bool = False) -> dict:
    scale = 0.01 if quick else 0.1
    repeats = 1 if quick else 3
    t0 = time.perf_counter()
    graph = synthetic.generate("products_sim", scale=scale, seed=0)
    gen_s = time.perf_counter() - t0
    results: dict = {}
    for name in PARTITIONERS:
        results[name] = {str(p): measure(graph, name, p, repeats) for p in PARTS}
    if os.environ.get("GNNSCALE_PARTITION_FULL") == "1":
        results["metis_full_products_sim"] = full_metis()
    m4, c16, o16 = results["metis"]["4"], results["cvc"]["16"], results["oec"]["16"]
    partner_bound = 2 * (math.isqrt(16) - 1)
    targets = {
        "metis4_local_edge_ratio_ge_0.90": m4["local_edge_ratio"] >= 0.90,
        "metis4_balances_le_1.05": max(m4["balance_vertices"], m4["balance_edges"],
                                       m4["balance_train"]) <= 1.05 + 1e-9,
        "cvc16_partners_le_6": c16["partners_max"] <= partner_bound,
        "cvc16_replication_below_oec16": c16["replication_factor"] < o16["replication_factor"],
    }
    ratios = {
        "cvc16_over_oec16_replication": ratio(c16["replication_factor"],
                                              o16["replication_factor"]),
        "metis4_over_random4_local_edge_ratio": ratio(m4["local_edge_ratio"],
                                                      results["random"]["4"]["local_edge_ratio"]),
        "ldg4_over_metis4_local_edge_ratio": ratio(results["ldg"]["4"]["local_edge_ratio"],
                                                   m4["local_edge_ratio"]),
        "fennel4_over_metis4_local_edge_ratio": ratio(results["fennel"]["4"]["local_edge_ratio"],
                                                      m4["local_edge_ratio"]),
    }
    config = {"graph": "products_sim", "scale": scale, "num_nodes": graph.num_nodes,
              "num_edges": graph.num_edges, "parts": list(PARTS), "repeats": repeats,
              "generate_s": gen_s, "seed": 0}
    return {"config": config, "results": results, "ratios": ratios, "targets": targets}
