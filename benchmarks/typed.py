"""Suite ``typed``: typed (heterogeneous) sampling and a typed data-parallel epoch vs PyG.

Workload (issue 36 item 10; default / ``--quick``): ``dataset=hetero_sim`` (the generated
ogbn-mag-like graph: paper/author/institution/field_of_study, three featureless types,
reverse edge types) at scale 0.1 / 0.02, 2 layers with fanouts 10,5 per edge type (a number
per layer draws that many neighbours of every edge type, as PyG's ``num_neighbors``), batches
of 1024 training papers.

* **Sampling**: typed edges sampled per second (the sum of every block's edges over all edge
  types), gnnscale's native typed sampler on 1 thread against PyG's heterogeneous
  ``NeighborLoader`` (torch-sparse's ``hetero_neighbor_sample``, which runs on one thread) on
  a ``HeteroData`` of the same graph, the same targets and fanouts, alternated rounds.
* **Epoch**: a data-parallel R-GCN epoch on 2 ranks (hidden 64, 2 layers, 4 bases, Adam,
  featureless types in sparse embedding tables) through gnnscale's runner
  (``strategy=data model=rgcn``) against PyG's heterogeneous ``NeighborLoader`` + DDP with
  the same model built from PyG's layers (per-type ``Linear`` input, sparse ``nn.Embedding``
  tables for the featureless types, ``RGCNConv`` on ``batch.to_homogeneous()``), the same
  split of each global batch over the ranks. Medians over the epochs after the first.

PyG's heterogeneous loader needs torch-sparse or pyg-lib (``make sparse``); without them its
figures are null with the reason.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import torch

from benchmarks import compose_run, pyg_missing, ratio

WORLD = 2
FANOUTS = [10, 5]
BATCH = 1024
HIDDEN = 64
BASES = 4


def typed_graph(scale: float):
    """``hetero_sim`` at ``scale`` (generated in memory, as the dataset does)."""
    from gnnscale.data.hetero_sim import generate
    from gnnscale.data.schemas import HeteroSimConfig

    return generate(HeteroSimConfig(scale=scale))


def to_hetero_data(graph):
    """The graph as PyG's ``HeteroData``: per node type its features (or its node count), per
    edge type its ``edge_index`` in type-local ids."""
    from torch_geometric.data import HeteroData

    data = HeteroData()
    for t in graph.node_types:
        if t in graph.features:
            data[t].x = graph.features[t]
        data[t].num_nodes = graph.num_nodes_of(t)
    for et in graph.edge_types:
        indptr, indices, _ = graph.edge_type_csc(et)
        dst = torch.repeat_interleave(torch.arange(indptr.numel() - 1), indptr.diff())
        data[et].edge_index = torch.stack([indices.long(), dst])
    target = graph.target_types[0]
    data[target].y = graph.y[graph.node_type_offset[graph.node_types.index(target)]:][
        : graph.num_nodes_of(target)]
    return data


def _targets(graph, count: int) -> list[torch.Tensor]:
    """``count`` batches of training papers (global ids), a fixed permutation."""
    train = graph.train_idx
    perm = train[torch.randperm(train.numel(), generator=torch.Generator().manual_seed(0))]
    return [perm[i * BATCH:(i + 1) * BATCH] for i in range(min(count, perm.numel() // BATCH))]


def _sampling(graph, batches: list[torch.Tensor], rounds: int) -> dict:
    """Typed edges per second: gnnscale's sampler (1 thread) and PyG's loader, alternated."""
    from gnnscale.sampling.neighbor import NeighborSampler

    ours = NeighborSampler(FANOUTS, threads=1)

    def run_ours() -> int:
        return sum(ours.sample(graph, b, seed=i).num_edges for i, b in enumerate(batches))

    edges_ours = run_ours()
    out = {"gnnscale_edges_per_batch": edges_ours / len(batches)}
    reason = pyg_missing("heterogeneous NeighborLoader")
    loader = None
    if reason is None:
        from torch_geometric.loader import NeighborLoader

        torch.set_num_threads(1)
        data = to_hetero_data(graph)
        target = graph.target_types[0]
        base = int(graph.node_type_offset[graph.node_types.index(target)])
        loader = NeighborLoader(data, num_neighbors=FANOUTS, batch_size=BATCH,
                                input_nodes=(target, torch.cat(batches) - base), shuffle=False)

        def run_pyg() -> int:
            return sum(int(b[et].edge_index.shape[1]) for b in loader
                       for et in b.edge_types)

        edges_pyg = run_pyg()
        out["pyg_edges_per_batch"] = edges_pyg / len(batches)
    else:
        out["pyg_reason"] = reason
    t_ours, t_pyg = [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        run_ours()
        t_ours.append(time.perf_counter() - t0)
        if loader is not None:
            t0 = time.perf_counter()
            run_pyg()
            t_pyg.append(time.perf_counter() - t0)
    out["gnnscale_edges_per_s"] = edges_ours / statistics.median(t_ours)
    out["pyg_edges_per_s"] = edges_pyg / statistics.median(t_pyg) if t_pyg else None
    return out


def _pyg_rank(topo, scale: float, epochs: int) -> list[float]:
    """One rank of the PyG reference: R-GCN from PyG's layers on its heterogeneous loader,
    under DDP; returns its epoch wall times."""
    import torch.nn.functional as F
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch_geometric.loader import NeighborLoader
    from torch_geometric.nn import RGCNConv

    graph = typed_graph(scale)
    data = to_hetero_data(graph)
    target = graph.target_types[0]
    base = int(graph.node_type_offset[graph.node_types.index(target)])
    mine = torch.tensor_split(graph.train_idx - base, topo.world_size)[topo.rank]
    loader = NeighborLoader(data, num_neighbors=FANOUTS, batch_size=BATCH // topo.world_size,
                            input_nodes=(target, mine), shuffle=True, drop_last=True)
    node_types = list(data.node_types)
    relations = len(data.edge_types)

    class PygRGCN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.ModuleDict({t: nn.Linear(data[t].x.shape[1], HIDDEN)
                                      for t in node_types if "x" in data[t]})
            self.emb = nn.ModuleDict({t: nn.Embedding(data[t].num_nodes, HIDDEN, sparse=True)
                                      for t in node_types if "x" not in data[t]})
            self.convs = nn.ModuleList([RGCNConv(HIDDEN, HIDDEN, relations, num_bases=BASES),
                                        RGCNConv(HIDDEN, graph.num_classes, relations,
                                                 num_bases=BASES)])

        def forward(self, b) -> torch.Tensor:
            xs = {t: self.lin[t](b[t].x) if t in self.lin else self.emb[t](b[t].n_id)
                  for t in b.node_types}
            hom = b.to_homogeneous(node_attrs=[], edge_attrs=[])
            x = torch.cat([xs[t] for t in b.node_types])
            x = F.relu(self.convs[0](x, hom.edge_index, hom.edge_type))
            return self.convs[1](x, hom.edge_index, hom.edge_type)

    torch.manual_seed(0)
    module = PygRGCN()
    model = DDP(module)
    dense = [p for n, p in module.named_parameters() if not n.startswith("emb.")]
    sparse = [p for n, p in module.named_parameters() if n.startswith("emb.")]
    opt = torch.optim.Adam(dense, lr=0.01)
    opt_sparse = torch.optim.SparseAdam(sparse, lr=0.01)
    times = []
    for _ in range(epochs):
        t0 = time.perf_counter()
        for b in loader:
            opt.zero_grad()
            opt_sparse.zero_grad()
            n = b[target].batch_size
            out = model(b)  # the target type comes first in to_homogeneous's order
            offset = sum(b[t].num_nodes for t in b.node_types[:b.node_types.index(target)])
            F.cross_entropy(out[offset:offset + n], b[target].y[:n]).backward()
            opt.step()
            opt_sparse.step()
        times.append(time.perf_counter() - t0)
    return times


def _gnnscale(tmp: Path, scale: float, epochs: int) -> dict:
    from gnnscale.runner.run import run

    return run(compose_run([
        "dataset=hetero_sim", f"dataset.scale={scale}", "model=rgcn",
        f"model.hidden={HIDDEN}", f"model.num_layers={len(FANOUTS)}",
        f"model.num_bases={BASES}", "model.dropout=0.0", f"sampler.fanouts={FANOUTS}",
        "strategy=data", f"strategy.batch_size={BATCH}", f"epochs={epochs}",
        "eval_every=0", "checkpoint=false", f"dist.world_size={WORLD}", "logger=none"],
        tmp / "run", tmp / "data"))


def run(quick: bool = False) -> dict:
    scale = 0.02 if quick else 0.1
    epochs = 3 if quick else 4
    rounds = 3 if quick else 5
    graph = typed_graph(scale)
    batches = _targets(graph, 8 if quick else 20)
    config = {"dataset": f"hetero_sim x{scale}", "nodes": graph.num_nodes,
              "edges": graph.num_edges, "node_types": len(graph.node_types),
              "edge_types": len(graph.edge_types), "fanouts_per_edge_type": FANOUTS,
              "batch_size": BATCH, "sampling_batches": len(batches), "ranks": WORLD,
              "model": f"rgcn hidden {HIDDEN}, {len(FANOUTS)} layers, {BASES} bases",
              "epochs": epochs}
    results = {"sampling": _sampling(graph, batches, rounds)}
    torch.set_num_threads(max(1, torch.get_num_threads()))
    with tempfile.TemporaryDirectory() as d:
        res = _gnnscale(Path(d), scale, epochs)
    hist = res["history"][1:]
    epoch = {"gnnscale_epoch_s": statistics.median(h["epoch_time"] for h in hist),
             "gnnscale_sample_s": statistics.median(h["sample_time"] for h in hist),
             "gnnscale_compute_s": statistics.median(h["compute_time"] for h in hist),
             "gnnscale_steps": hist[-1]["steps"], "pyg_epoch_s": None}
    reason = pyg_missing("heterogeneous NeighborLoader")
    if reason is None:
        from gnnscale.distributed import spawn

        per_rank = spawn(_pyg_rank, WORLD, scale, epochs, timeout_s=3600)
        epoch["pyg_epoch_s"] = statistics.median([max(ts) for ts in zip(*per_rank)][1:])
    else:
        epoch["pyg_reason"] = reason
    results["epoch"] = epoch
    s = results["sampling"]
    return {"config": config, "results": results,
            "ratios": {"sampling_gnnscale_over_pyg": ratio(s["gnnscale_edges_per_s"],
                                                           s.get("pyg_edges_per_s")),
                       "epoch_pyg_over_gnnscale": ratio(epoch["pyg_epoch_s"],
                                                        epoch["gnnscale_epoch_s"])}}
