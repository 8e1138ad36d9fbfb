"""Suite ``sampler``: neighbor-sampling throughput vs PyG, and feature-gather bandwidth vs copy.

Workload (default / ``--quick``): a products-like graph generated here (community structure,
power-law degrees; ~245k nodes and ~12M directed edges / ~25k nodes and ~1.2M edges), 3 layers
with fanouts 15,10,5, batches of 1024 random targets, ``torch.get_num_threads()`` threads.
Sampling speed is sampled edges per second (the sum of every block's edges). The gather moves
random 100-float rows (500k ids from a 2.4M-row table / 50k from 240k) and is compared, as bytes
written per second, with a plain contiguous copy of the table and with ``torch.index_select``;
``gather_huge_pages`` repeats the gather from a copy of the table on transparent huge pages
(``empty_huge``), which spares most TLB misses of random row reads.
"""

from __future__ import annotations

import numpy as np
import torch

from benchmarks import median_time, ratio
from gnnscale.data.graph import GraphStore
from gnnscale.sampling.gather import empty_huge, gather_rows
from gnnscale.sampling.neighbor import NeighborSampler

FANOUTS = [15, 10, 5]
BATCH = 1024
# PyG NeighborLoader with torch-sparse on this 2-core machine class (issue 2), for reference only
PYG_REFERENCE_EDGES_PER_S = 0.66e6


def products_like(num_nodes: int, avg_degree: float, seed: int = 0) -> GraphStore:
    """A symmetric graph with num_nodes * avg_degree directed edges (no repeats, no self-loops):
    Chung-Lu with Pareto weights (exponent 2.3, capped at 60x the mean) and 90% of the edges
    inside communities of ~1000 nodes, like ogbn-products."""
    rng = np.random.default_rng(seed)
    comm = rng.integers(0, max(1, num_nodes // 1000), num_nodes)
    order = np.argsort(comm, kind="stable")
    starts = np.searchsorted(comm[order], np.arange(comm.max() + 2))
    w = rng.pareto(1.3, num_nodes) + 1.0
    cum = np.cumsum(np.minimum(w, 60 * w.mean())[order])

    def draw(count: int) -> np.ndarray:  # undirected keys lo * n + hi of `count` edges
        a = order[np.minimum(np.searchsorted(cum, rng.random(count) * cum[-1]), num_nodes - 1)]
        c = comm[a]
        lo = np.where(starts[c] > 0, cum[starts[c] - 1], 0.0)
        inside = rng.random(count) < 0.9
        target = np.where(inside, lo + rng.random(count) * (cum[starts[c + 1] - 1] - lo),
                          rng.random(count) * cum[-1])
        b = order[np.minimum(np.searchsorted(cum, target), num_nodes - 1)]
        keep = a != b
        return np.minimum(a, b)[keep] * num_nodes + np.maximum(a, b)[keep]

    def unique(x: np.ndarray) -> np.ndarray:  # np.unique is slow for int64 in numpy 2.4
        x = np.sort(x)
        return x[np.concatenate([[True], x[1:] != x[:-1]])]

    m = int(num_nodes * avg_degree / 2)
    keys = unique(draw(m))
    while keys.size < m:  # repeats were dropped: draw more until there are enough
        keys = unique(np.concatenate([keys, draw(int((m - keys.size) * 1.5) + 16)]))
    keys = rng.choice(keys, m, replace=False)
    edges = torch.from_numpy(np.stack([keys // num_nodes, keys % num_nodes]))
    return GraphStore.from_edge_index(edges, num_nodes, symmetrize=True, dedupe=False,
                                      name=f"products-like-{num_nodes}")


def _batches(graph: GraphStore, count: int, seed: int = 0) -> list[torch.Tensor]:
    perm = torch.randperm(graph.num_nodes, generator=torch.Generator().manual_seed(seed))
    return [perm[i * BATCH:(i + 1) * BATCH] for i in range(count)]


def _gnnscale_edges_per_s(graph: GraphStore, batches: list[torch.Tensor], repeats: int):
    sampler = NeighborSampler(FANOUTS)
    edges = sum(sampler.sample(graph, b, seed=i).num_edges for i, b in enumerate(batches))
    t = median_time(lambda: [sampler.sample(graph, b, seed=i) for i, b in enumerate(batches)],
                    repeats, warmup=0)
    return edges / t, edges / len(batches)


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


def run(quick: bool) -> dict:
    nodes, batches_n, repeats = (24_500, 8, 3) if quick else (245_000, 30, 5)
    rows, ids = (240_000, 50_000) if quick else (2_400_000, 500_000)
    graph = products_like(nodes, avg_degree=50.5, seed=0)
    batches = _batches(graph, batches_n)
    ours, edges_per_batch = _gnnscale_edges_per_s(graph, batches, repeats)
    pyg, reason = _pyg_edges_per_s(graph, batches, repeats)
    gather = _gather(rows, ids, repeats)
    results = {"gnnscale_edges_per_s": ours, "pyg_edges_per_s": pyg,
               "sampled_edges_per_batch": edges_per_batch, **gather}
    if reason:
        results["pyg_skipped"] = reason
    return {
        "config": {"num_nodes": graph.num_nodes, "num_edges": graph.num_edges,
                   "fanouts": FANOUTS, "batch_size": BATCH, "batches": batches_n,
                   "threads": torch.get_num_threads(), "gather_table": [rows, 100],
                   "gather_ids": ids, "repeats": repeats,
                   "pyg_reference_edges_per_s": PYG_REFERENCE_EDGES_PER_S},
        "results": results,
        "ratios": {
            "vs_pyg": ratio(ours, pyg),
            "vs_pyg_reference": ratio(ours, PYG_REFERENCE_EDGES_PER_S),
            "gather_vs_copy": ratio(gather["gather_gb_per_s"], gather["copy_gb_per_s"]),
            "gather_huge_pages_vs_copy": ratio(gather["gather_huge_pages_gb_per_s"],
                                               gather["copy_gb_per_s"]),
            "index_select_vs_copy": ratio(gather["index_select_gb_per_s"],
                                          gather["copy_gb_per_s"]),
            "gather_vs_index_select": ratio(gather["gather_gb_per_s"],
                                            gather["index_select_gb_per_s"]),
        },
    }
