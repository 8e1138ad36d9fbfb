"""R-GCN's published figures on the shared typed datasets:
``python scripts/typed_accuracy.py [--quick] [--seeds 5] [--out docs/results/typed_accuracy.json]``.

Runs R-GCN (Schlichtkrull et al., 2018) on AIFB and MUTAG with the paper's protocol (the
settings of its code, tkipf/relational-gcn: 2 layers, 16 hidden units, featureless one-hot
input, 50 epochs of full-batch Adam at lr 0.01, no dropout; AIFB a full weight per relation
and no L2, MUTAG 30 bases and L2 5e-4 on the first layer; the test accuracy after the last
epoch; no validation split), over seeds, in these variants:

- ``ours_1rank``: gnnscale, ``model.featureless=onehot``, 1 rank, ``sampler=full`` and a
  batch larger than the training set (one full-batch step per epoch);
- ``ours_2ranks_data``: the same on 2 ranks with ``strategy=data`` (each rank half of the
  batch, gradients averaged: the same full-batch step), the only strategy that trains typed
  graphs today;
- ``ours_1rank_embedding``: 1 rank with the default featureless input (a learned 16-wide
  embedding row per vertex, trained by SparseAdam, undecayed, before layer 0's relation
  weights), to show what the input parameterisation costs;
- ``pyg``: PyG's own ``RGCNConv`` in a plain loop in the style of PyG's R-GCN example
  (``examples/rgcn.py``: ``RGCNConv(num_nodes, 16)`` fed ``x=None``, i.e. one-hot), same
  graph, split, settings and seeds, not through gnnscale. The graph is read by
  gnnscale's own reader (``gnnscale/data/entities.py``) because PyG's ``Entities`` needs
  ``rdflib`` and ``pandas``, which are not installed here; the split is the files' fixed one.

Every figure is mean +- sample std over the seeds, in percent. The JSON keeps every run.
``--quick``: AIFB only, one seed. Needs the shared datasets (``hetero/entities``).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: The paper's settings per dataset and its figure (test accuracy, %, mean +- std of 10 runs).
PROTOCOLS = {
    "aifb": {"num_bases": 0, "weight_decay": 0.0, "published": [95.83, 0.62]},
    "mutag": {"num_bases": 30, "weight_decay": 5e-4, "published": [73.23, 0.48]},
}
HIDDEN, EPOCHS, LR = 16, 50, 0.01
#: Variants run through gnnscale: name -> extra overrides.
VARIANTS = {
    "ours_1rank": ["model.featureless=onehot", "dist.world_size=1"],
    "ours_2ranks_data": ["model.featureless=onehot", "dist.world_size=2", "strategy=data"],
    "ours_1rank_embedding": ["model.featureless=embedding", "dist.world_size=1"],
}


def overrides(name: str, seed: int, data_root: Path) -> list[str]:
    """The paper's protocol as gnnscale options."""
    p = PROTOCOLS[name]
    return [f"dataset={name}", "task=node", "model=rgcn", f"model.hidden={HIDDEN}",
            "model.num_layers=2", "model.dropout=0", f"model.num_bases={p['num_bases']}",
            "sampler=full", "sampler.num_layers=2", "strategy.batch_size=100000",
            "optim=adam", f"optim.lr={LR}", f"optim.weight_decay={p['weight_decay']}",
            "optim.weight_decay_layers=[0]", f"epochs={EPOCHS}", "eval_every=0",
            "select=last", "checkpoint=false", "progress=false", f"seed={seed}",
            f"data_root={data_root}"]


def ours(name: str, variant: str, seed: int, data_root: Path, runs: Path) -> float:
    """Test accuracy (%) of one gnnscale run after the last epoch."""
    from gnnscale.api import train

    run = train(overrides(name, seed, data_root) + VARIANTS[variant],
                run_dir=runs / f"{name}-{variant}-{seed}")
    return 100.0 * next(h["test_acc"] for h in reversed(run.history) if "test_acc" in h)


def pyg_reference(name: str, seed: int, data_root: Path) -> float:
    """Test accuracy (%) of PyG's RGCNConv in the R-GCN example's loop, the paper's settings."""
    import torch.nn.functional as F
    from torch_geometric.nn import RGCNConv

    from gnnscale.data.entities import EntitiesDataset

    graph = EntitiesDataset(root=str(data_root), name=name).process()
    p = PROTOCOLS[name]
    edge_index, edge_type = graph.edge_index(), graph.type_per_edge.long()
    relations, bases = len(graph.edge_types), p["num_bases"] or None
    train_idx, test_idx, y = graph.train_idx, graph.test_idx, graph.y

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = RGCNConv(graph.num_nodes, HIDDEN, relations, num_bases=bases)
            self.conv2 = RGCNConv(HIDDEN, graph.num_classes, relations, num_bases=bases)

        def forward(self) -> torch.Tensor:
            x = F.relu(self.conv1(None, edge_index, edge_type))
            return self.conv2(x, edge_index, edge_type)

    torch.manual_seed(seed)
    model = Net()
    optimizer = torch.optim.Adam([
        {"params": model.conv1.parameters(), "weight_decay": p["weight_decay"]},
        {"params": model.conv2.parameters(), "weight_decay": 0.0}], lr=LR)
    for _ in range(EPOCHS):
        model.train()
        optimizer.zero_grad()
        out = model()
        F.cross_entropy(out[train_idx], y[train_idx]).backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        pred = model().argmax(-1)
    return 100.0 * float((pred[test_idx] == y[test_idx]).float().mean())


def summary(values: list[float]) -> dict:
    """Runs, mean and sample std."""
    return {"runs": [round(v, 4) for v in values], "mean": statistics.mean(values),
            "std": statistics.stdev(values) if len(values) > 1 else 0.0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="AIFB only, one seed")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--datasets", nargs="+", default=list(PROTOCOLS), choices=list(PROTOCOLS))
    ap.add_argument("--variants", nargs="+", default=[*VARIANTS, "pyg"],
                    choices=[*VARIANTS, "pyg"])
    ap.add_argument("--data-root", default=None,
                    help="where the processed graphs go (default: a temporary folder)")
    ap.add_argument("--out", default=None,
                    help="JSON file to write (default docs/results/typed_accuracy.json; "
                         "--quick writes none unless given)")
    ap.add_argument("--merge", action="store_true",
                    help="keep the other variants' results already in --out")
    args = ap.parse_args()
    datasets = ["aifb"] if args.quick else args.datasets
    seeds = list(range(1 if args.quick else args.seeds))
    out = args.out or (None if args.quick else str(ROOT / "docs/results/typed_accuracy.json"))
    with tempfile.TemporaryDirectory(prefix="typed-acc-") as tmp:
        data_root = Path(args.data_root or Path(tmp) / "data").absolute()
        runs = Path(tmp) / "runs"
        results: dict = {}
        for name in datasets:
            entry: dict = {"published": PROTOCOLS[name]["published"], "variants": {}}
            for variant in args.variants:
                t0, values = time.perf_counter(), []
                for seed in seeds:
                    values.append(pyg_reference(name, seed, data_root) if variant == "pyg"
                                  else ours(name, variant, seed, data_root, runs))
                    print(f"{name} {variant} seed {seed}: {values[-1]:.2f}", flush=True)
                entry["variants"][variant] = {**summary(values),
                                              "seconds": round(time.perf_counter() - t0, 1)}
                s = entry["variants"][variant]
                print(f"{name} {variant}: {s['mean']:.2f} +- {s['std']:.2f} "
                      f"({', '.join(f'{v:.2f}' for v in values)})", flush=True)
            results[name] = entry
    if out:
        doc = {"protocol": {"model": "R-GCN, 2 layers, 16 hidden, no dropout",
                            "training": f"{EPOCHS} epochs of full-batch Adam, lr {LR}",
                            "per_dataset": {k: {kk: v[kk] for kk in ("num_bases", "weight_decay")}
                                            for k, v in PROTOCOLS.items()},
                            "weight_decay_on": "layer 0 only (the paper's code)",
                            "metric": "test accuracy (%) after the last epoch",
                            "seeds": seeds},
               "host": {"machine": platform.machine(), "torch": torch.__version__},
               "results": results}
        if args.merge and Path(out).is_file():
            old = json.loads(Path(out).read_text())["results"]
            for name, entry in results.items():
                old.setdefault(name, entry)["variants"].update(entry["variants"])
            doc["results"] = old
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(doc, indent=2) + "\n")
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
