"""Suite ``sampler``: neighbor-sampling throughput (1 thread, all threads, all threads beside a
busy core) vs PyG, and feature-gather bandwidth vs copy.

Workload (default / ``--quick``): the package's synthetic generator
(:mod:`gnnscale.data.synthetic`, preset ``products_sim`` scaled to ~245k / ~24.5k nodes with
the statistics of ogbn-products: average degree 50.5, ~1000-node communities, power-law
degrees; ~12.4M / ~1.24M directed edges), 3 layers with fanouts 15,10,5, batches of 1024 random
targets. Sampling speed is sampled edges per second (the sum of every block's edges), measured
side by side in one run with 1 thread, with all ``torch.get_num_threads()`` threads on idle
cores, and with all threads while a spinning process the suite starts (and stops) keeps one
core busy, as a trainer or a second rank does in real use (1 thread is measured beside the busy
core too, for reference). The gather moves random 100-float
rows (500k ids from a 2.4M-row table / 50k from 240k) and is compared, as bytes written per
second, with a plain contiguous copy of the table and with ``torch.index_select``;
``gather_huge_pages`` repeats the gather from a copy of the table on transparent huge pages
(``empty_huge``), which spares most TLB misses of random row reads.

Negative sampling (link prediction, ``gnnscale.ops.sampling.negative_sample``): negatives per
second for 1M / 100k positives of the same graph, ``uniform`` and ``per_source``, with and
without rejecting the graph's edges, 1 thread vs all threads, alternated.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from contextlib import contextmanager

import torch

from benchmarks import median_time, ratio
from gnnscale.data.graph import GraphStore
from gnnscale.data.synthetic import generate
from gnnscale.ops.sampling import negative_sample
from gnnscale.sampling.gather import empty_huge, gather_rows
from gnnscale.sampling.neighbor import NeighborSampler
from gnnscale.tasks.link.negatives import sorted_csc

FANOUTS = [15, 10, 5]
BATCH = 1024
# PyG NeighborLoader with torch-sparse on this 2-core machine class (issue 2), for reference only
PYG_REFERENCE_EDGES_PER_S = 0.66e6
# ogbn-products' shape at 1/10 (default) and 1/100 (--quick) of its size; one feature column
# only, since the suite samples and never reads features
PRODUCTS_LIKE = dict(preset="products_sim", num_features=1, degree_exponent=2.3, p_intra=0.9)


def products_like(scale: float) -> GraphStore:
    """The synthetic products-like graph at ``scale`` (0.1: ~245k nodes, 12.4M edges)."""
    return generate(scale=scale, seed=0, **PRODUCTS_LIKE)


@contextmanager
def busy_core():
    """A process spinning on one core for the duration of the block."""
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)  # let it start and settle on a core
        yield spinner.pid
    finally:
        spinner.kill()
        spinner.wait()


def _batches(graph: GraphStore, count: int, seed: int = 0) -> list[torch.Tensor]:
    perm = torch.randperm(graph.num_nodes, generator=torch.Generator().manual_seed(seed))
    return [perm[i * BATCH:(i + 1) * BATCH] for i in range(count)]


def _sample_all(sampler: NeighborSampler, graph: GraphStore, batches: list[torch.Tensor]):
    return [sampler.sample(graph, b, seed=i) for i, b in enumerate(batches)]


def _edges_per_s(graph: GraphStore, batches: list[torch.Tensor], repeats: int,
                 threads: int) -> dict:
    """Sampled edges per second with 1 thread and with ``threads``, measured alternately (so
    both see the same machine), then both again beside a busy core."""
    one, every = NeighborSampler(FANOUTS, threads=1), NeighborSampler(FANOUTS, threads=threads)
    a, b = _sample_all(one, graph, batches), _sample_all(every, graph, batches)
    assert all(torch.equal(x.n_id, y.n_id) for x, y in zip(a, b)), "thread-dependent samples"
    edges = sum(mb.num_edges for mb in a)
    t_one, t_all = [], []
    for _ in range(repeats):
        t_one.append(median_time(lambda: _sample_all(one, graph, batches), 1, warmup=0))
        t_all.append(median_time(lambda: _sample_all(every, graph, batches), 1, warmup=0))
    t_one_busy, t_busy = [], []
    with busy_core():
        _sample_all(every, graph, batches)
        for _ in range(repeats):
            t_busy.append(median_time(lambda: _sample_all(every, graph, batches), 1, warmup=0))
            t_one_busy.append(median_time(lambda: _sample_all(one, graph, batches), 1, warmup=0))
    return {"one_thread": edges / statistics.median(t_one),
            "all_threads": edges / statistics.median(t_all),
            "all_threads_busy_core": edges / statistics.median(t_busy),
            "one_thread_busy_core": edges / statistics.median(t_one_busy)}, edges / len(batches)


def _pyg_edges_per_s(graph: GraphStore, batches: list[torch.Tensor], repeats: int):
    """PyG NeighborLoader on the same graph and targets, or (None, reason)."""
    try:
        import pyg_lib  # noqa: F401
    except ImportError:
        try:
            import torch_sparse  # noqa: F401
        except ImportError:
            return None, ("neither pyg-lib nor torch-sparse is installed, so PyG's "
                          "NeighborLoader cannot sample (see `make sparse`)")
    from torch_geometric.data import Data
    from torch_geometric.loader import NeighborLoader

    data = Data(edge_index=graph.edge_index(), num_nodes=graph.num_nodes)
    loader = NeighborLoader(data, num_neighbors=FANOUTS, batch_size=BATCH,
                            input_nodes=torch.cat(batches), shuffle=False)
    edges = sum(batch.edge_index.shape[1] for batch in loader)
    t = median_time(lambda: [None for _ in loader], repeats, warmup=0)
    return edges / t, None


def _gather(rows: int, ids: int, repeats: int) -> dict:
    gen = torch.Generator().manual_seed(0)
    table = torch.rand(rows, 100, generator=gen)
    idx = torch.randint(0, rows, (ids,), generator=gen)
    out = torch.empty(ids, 100)
    copy = torch.empty_like(table)
    assert torch.equal(gather_rows(table, idx, out=out), table[idx])
    t_gather = median_time(lambda: gather_rows(table, idx, out=out), repeats)
    t_alloc = median_time(lambda: gather_rows(table, idx), repeats)
    t_copy = median_time(lambda: copy.copy_(table), repeats)
    t_select = median_time(lambda: torch.index_select(table, 0, idx, out=out), repeats)
    huge = empty_huge(rows, 100)
    huge.copy_(table)
    t_huge = median_time(lambda: gather_rows(huge, idx, out=out), repeats)
    moved = out.numel() * out.element_size()
    return {
        "gather_gb_per_s": moved / t_gather / 1e9,
        "gather_huge_pages_gb_per_s": moved / t_huge / 1e9,
        "gather_alloc_gb_per_s": moved / t_alloc / 1e9,
        "copy_gb_per_s": table.numel() * table.element_size() / t_copy / 1e9,
        "index_select_gb_per_s": moved / t_select / 1e9,
    }


def _negatives(graph: GraphStore, positives: int, repeats: int, threads: int) -> dict:
    """Negatives per second (4 per positive) for each kind, with and without edge rejection,
    with 1 thread and ``threads``, measured alternately."""
    indptr, indices = sorted_csc(graph.indptr, graph.indices)
    keys = torch.arange(positives)
    gen = torch.Generator().manual_seed(0)
    src = torch.randint(0, graph.num_nodes, (positives,), generator=gen)
    out = {}
    for kind in ("uniform", "per_source"):
        for reject in (False, True):
            kw = dict(sources=src if kind == "per_source" else None,
                      indptr=indptr if reject else None, indices=indices if reject else None)
            t1, tn = [], []
            for _ in range(repeats):
                t1.append(median_time(lambda kw=kw: negative_sample(
                    graph.num_nodes, keys, 4, 0, num_threads=1, **kw), 1))
                tn.append(median_time(lambda kw=kw: negative_sample(
                    graph.num_nodes, keys, 4, 0, num_threads=threads, **kw), 1))
            name = f"{kind}{'_reject_edges' if reject else ''}"
            out[name] = {"one_thread": 4 * positives / statistics.median(t1),
                         "all_threads": 4 * positives / statistics.median(tn)}
    return out


def run(quick: bool) -> dict:
    scale, batches_n, repeats = (0.01, 16, 7) if quick else (0.1, 30, 5)
    rows, ids = (240_000, 50_000) if quick else (2_400_000, 500_000)
    threads = torch.get_num_threads()
    graph = products_like(scale)
    batches = _batches(graph, batches_n)
    speed, edges_per_batch = _edges_per_s(graph, batches, repeats, threads)
    ours = speed["all_threads"]
    pyg, reason = _pyg_edges_per_s(graph, batches, repeats)
    gather = _gather(rows, ids, repeats)
    positives = 100_000 if quick else 1_000_000
    negatives = _negatives(graph, positives, repeats, threads)
    results = {"edges_per_s": speed, "gnnscale_edges_per_s": ours, "pyg_edges_per_s": pyg,
               "sampled_edges_per_batch": edges_per_batch, **gather,
               "negatives_per_s": negatives}
    if reason:
        results["pyg_skipped"] = reason
    return {
        "config": {"num_nodes": graph.num_nodes, "num_edges": graph.num_edges,
                   "fanouts": FANOUTS, "batch_size": BATCH, "batches": batches_n,
                   "threads": threads, "gather_table": [rows, 100],
                   "gather_ids": ids, "repeats": repeats, "negative_positives": positives,
                   "negatives_per_positive": 4, "graph": PRODUCTS_LIKE | {"scale": scale},
                   "pyg_reference_edges_per_s": PYG_REFERENCE_EDGES_PER_S},
        "results": results,
        "ratios": {
            "busy_over_one_thread": ratio(speed["all_threads_busy_core"], speed["one_thread"]),
            "all_over_one_thread": ratio(speed["all_threads"], speed["one_thread"]),
            # the same comparison with the busy core in both (how much the threads still add)
            "busy_over_one_thread_busy": ratio(speed["all_threads_busy_core"],
                                               speed["one_thread_busy_core"]),
            "vs_pyg": ratio(ours, pyg),
            "vs_pyg_reference": ratio(ours, PYG_REFERENCE_EDGES_PER_S),
            "gather_vs_copy": ratio(gather["gather_gb_per_s"], gather["copy_gb_per_s"]),
            "gather_huge_pages_vs_copy": ratio(gather["gather_huge_pages_gb_per_s"],
                                               gather["copy_gb_per_s"]),
            "index_select_vs_copy": ratio(gather["index_select_gb_per_s"],
                                          gather["copy_gb_per_s"]),
            "gather_vs_index_select": ratio(gather["gather_gb_per_s"],
                                            gather["index_select_gb_per_s"]),
            "negatives_reject_over_plain": ratio(
                negatives["uniform_reject_edges"]["all_threads"],
                negatives["uniform"]["all_threads"]),
            "negatives_all_over_one_thread": ratio(
                negatives["uniform_reject_edges"]["all_threads"],
                negatives["uniform_reject_edges"]["one_thread"]),
        },
    }
