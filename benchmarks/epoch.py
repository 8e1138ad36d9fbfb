"""Suite ``epoch``: one data-parallel epoch of gnnscale vs a plain PyG reference.

Workload (issue 3): products-like synthetic graph, GraphSAGE 3 layers, hidden 256, fanouts
15,10,5, global batch 1024, 2 ranks. gnnscale runs through the real runner
(``strategy=data``); the reference is PyG's NeighborLoader + DDP with PyG's own GraphSAGE on
the same graph, fanouts and split of the batch over ranks. It needs torch-sparse or pyg-lib
(``make sparse``); without them its figure is null with the reason. Epoch times are medians
over the epochs after the first (warm-up).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import torch

from benchmarks import compose_run, pyg_missing, ratio

WORLD = 2
FANOUTS = [15, 10, 5]


def _pyg_rank(topo, graph_dir: str, epochs: int, batch: int, hidden: int) -> list[float]:
    """One rank of the PyG reference: returns its epoch wall times."""
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch_geometric.data import Data
    from torch_geometric.loader import NeighborLoader
    from torch_geometric.nn.models import GraphSAGE

    from gnnscale.data import processed

    g = processed.load(graph_dir)
    data = Data(x=g.x, y=g.y, edge_index=g.edge_index(), num_nodes=g.num_nodes)
    mine = torch.tensor_split(g.train_idx, topo.world_size)[topo.rank]
    loader = NeighborLoader(data, num_neighbors=FANOUTS, batch_size=batch // topo.world_size,
                            input_nodes=mine, shuffle=True, drop_last=True)
    torch.manual_seed(0)
    model = DDP(GraphSAGE(g.num_features, hidden, len(FANOUTS), g.num_classes))
    opt = torch.optim.Adam(model.parameters(), lr=0.003)
    times = []
    for _ in range(epochs):
        t0 = time.perf_counter()
        for b in loader:
            opt.zero_grad()
            out = model(b.x, b.edge_index)[: b.batch_size]
            F.cross_entropy(out, b.y[: b.batch_size]).backward()
            opt.step()
        times.append(time.perf_counter() - t0)
    return times


def _gnnscale(tmp: Path, scale: float, epochs: int, batch: int, hidden: int) -> dict:
    from gnnscale import registry
    from gnnscale.runner.run import run

    cfg = compose_run([
        "dataset=products_sim", f"dataset.scale={scale}", "model=sage",
        f"model.hidden={hidden}", "model.num_layers=3", f"sampler.fanouts={FANOUTS}",
        f"strategy.batch_size={batch}", f"epochs={epochs}", "eval_every=0", "checkpoint=false",
        f"dist.world_size={WORLD}", "logger=none"], tmp / "run", tmp / "data")
    res = run(cfg)
    graph = registry.build(cfg.dataset).load()
    return {"history": res["history"], "processed_dir": str(registry.build(cfg.dataset)
                                                          .processed_dir), "graph": graph}


def run(quick: bool = False) -> dict:
    scale = 0.01 if quick else 0.1
    epochs = 3 if quick else 4
    batch, hidden = 1024, 256
    config = {"dataset": f"products_sim x{scale}", "model": "sage", "layers": 3,
              "hidden": hidden, "fanouts": FANOUTS, "batch_size": batch, "ranks": WORLD,
              "epochs": epochs, "threads_per_rank": max(1, torch.get_num_threads() // WORLD)}
    with tempfile.TemporaryDirectory() as d:
        ours = _gnnscale(Path(d), scale, epochs, batch, hidden)
        hist = ours["history"][1:]
        g = ours["graph"]
        config.update(nodes=g.num_nodes, edges=g.num_edges, train=int(g.train_idx.numel()))
        results = {
            "gnnscale_epoch_s": statistics.median(h["epoch_time"] for h in hist),
            "gnnscale_sample_s": statistics.median(h["sample_time"] for h in hist),
            "gnnscale_load_s": statistics.median(h["load_time"] for h in hist),
            "gnnscale_compute_s": statistics.median(h["compute_time"] for h in hist),
            "gnnscale_comm_s": statistics.median(h["comm_time"] for h in hist),
            "edges_computed": hist[-1]["edges_computed"],
            "final_test_acc": ours["history"][-1].get("test_acc"),
            "pyg_epoch_s": None,
        }
        reason = pyg_missing("NeighborLoader")
        if reason is None:
            from gnnscale.distributed import spawn

            per_rank = spawn(_pyg_rank, WORLD, ours["processed_dir"], epochs, batch, hidden,
                             timeout_s=3600, cores="auto")
            times = [max(ts) for ts in zip(*per_rank)][1:]
            results["pyg_epoch_s"] = statistics.median(times)
        else:
            results["pyg_reason"] = reason
    return {"config": config, "results": results,
            "ratios": {"pyg_over_gnnscale": ratio(results["pyg_epoch_s"],
                                                  results["gnnscale_epoch_s"])}}
