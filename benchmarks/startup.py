"""Suite ``startup``: what a tiny run costs as a whole process, next to a plain PyG script.

The plain script (:data:`PLAIN`) imports PyG, loads Cora with ``Planetoid`` and trains
``GCNConv`` for one epoch; gnnscale runs ``train.py dataset=cora model=gcn epochs=1`` on 1 and
2 ranks for each strategy that runs on Cora, and a five-seed ``-m`` sweep of the 1-rank run.
Each gnnscale command is paired with a run of the plain script, the two alternating, so a
shared host's drift falls on both; a pair's ratio is gnnscale's wall time over the plain
script's, and the suite reports medians of the times and of the ratios, and each run's
``startup`` phases (results.json) for where the time went. Needs Cora's raw files (the
shared datasets folder, or ``data/cora/raw``); skipped with a reason without them.

Two rows need no data: ``config_error``, the wall time of a command whose config is wrong
(:data:`BAD`: it must exit with status 2, and its ``-X importtime`` log must show no torch),
alternated with ``python -c "import torch"`` for scale; and ``imports``, the wall time of
importing torch, torch with ``torch._dynamo`` (what PyG's ``import torch_geometric`` pulls in),
PyG itself and gnnscale's rank module, round-robin, so that the cost of PyG's dynamo import is
measured.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLAIN = '''
import sys, torch, torch.nn.functional as F
from torch_geometric.datasets import Planetoid
from torch_geometric.nn import GCNConv
data = Planetoid(sys.argv[1], "Cora")[0]
torch.manual_seed(0)
class GCN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = GCNConv(data.num_features, 16), GCNConv(16, 7)
    def forward(self, x, e):
        return self.c2(F.dropout(F.relu(self.c1(F.dropout(x, 0.5, self.training), e)),
                                 0.5, self.training), e)
model = GCN()
opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
model.train(); opt.zero_grad()
out = model(data.x, data.edge_index)
F.cross_entropy(out[data.train_mask], data.y[data.train_mask]).backward(); opt.step()
model.eval()
pred = model(data.x, data.edge_index).argmax(1)
print(float((pred[data.test_mask] == data.y[data.test_mask]).float().mean()))
'''
TINY = ["dataset=cora", "model=gcn", "epochs=1", "logger=none", "progress=false",
        "checkpoint=false"]
#: (label, extra overrides): each strategy that runs on Cora, on 1 and 2 ranks
VARIANTS = [("data_1rank", ["dist.world_size=1"]),
            ("data_2ranks", ["dist.world_size=2"]),
            ("split_2ranks", ["strategy=split", "deps=depcomm", "dist.world_size=2"]),
            ("factored_2ranks", ["strategy=factored", "dist.world_size=2"]),
            ("fullgraph_2ranks", ["strategy=fullgraph", "model.gcn_norm=graph",
                                  "dist.world_size=2"]),
            ("offload_2ranks", ["strategy=offload", "model.gcn_norm=graph",
                                "dist.world_size=2", "strategy.chunks=2"])]
QUICK = ["data_1rank", "data_2ranks"]
#: a config error the launcher decides alone (the issue's example); default world size 2, so
#: the fork server is started as for a real run
BAD = ["partitioner=metis", "partitioner.imbalance=0.9"]
#: import costs, each a whole ``python -c`` process
IMPORTS = {"python": "pass", "torch": "import torch",
           "torch_dynamo": "import torch, torch._dynamo",
           "torch_geometric": "import torch_geometric",
           "gnnscale_rank": "import gnnscale.runner.worker"}


def cora_raw() -> Path | None:
    """A folder holding Cora's raw Planetoid files, or None."""
    from gnnscale.data.convert import shared_datasets_dir

    shared = shared_datasets_dir()
    for folder in ([shared / "planetoid" / "Cora" / "raw"] if shared else []) + \
            [ROOT / "data" / "cora" / "raw"]:
        if folder.is_dir() and any(folder.glob("ind.cora.*")):
            return folder
    return None


def wall(cmd: list[str], cwd: Path, env: dict | None = None) -> float:
    """Seconds of one whole command; raises with its output when it fails."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env, timeout=600)
    took = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return took


def paired(plain: list[str], ours: list[str], repeats: int, cwd: Path) -> dict:
    """Alternate ``plain`` and ``ours`` ``repeats`` times: medians and pair-by-pair ratios."""
    a, b = [], []
    for i in range(repeats):
        first, second = (plain, ours) if i % 2 == 0 else (ours, plain)
        t_first, t_second = wall(first, cwd), wall(second, cwd)
        a.append(t_first if first is plain else t_second)
        b.append(t_second if first is plain else t_first)
    ratios = [y / x for x, y in zip(a, b)]
    return {"plain_s": statistics.median(a), "gnnscale_s": statistics.median(b),
            "ratio_median": statistics.median(ratios), "ratio_min": min(ratios),
            "ratio_max": max(ratios), "plain_runs": a, "gnnscale_runs": b}


def config_error(repeats: int, work: Path) -> dict:
    """Wall time of :data:`BAD` (status 2, torch never imported), alternated with ``import
    torch`` for scale."""
    bad = [sys.executable, str(ROOT / "train.py"), f"hydra.run.dir={work / 'bad'}",
           f"data_root={work / 'bad-data'}", *BAD]
    torch = [sys.executable, "-c", "import torch"]
    ours, ref = [], []
    for i in range(repeats):
        for cmd in ((bad, torch) if i % 2 == 0 else (torch, bad)):
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
            took = time.perf_counter() - t0
            if cmd is bad:
                if proc.returncode != 2 or not proc.stderr.startswith("error: "):
                    raise RuntimeError(f"{' '.join(BAD)}: expected status 2 and one error line, "
                                       f"got {proc.returncode}: {proc.stderr[-2000:]}")
                ours.append(took)
            else:
                ref.append(took)
    log = subprocess.run([sys.executable, "-X", "importtime", *bad[1:]], cwd=ROOT,
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "GNNSCALE_START_METHOD": "spawn"}).stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in log.splitlines()
                if line.startswith("import time")}
    return {"command": " ".join(BAD), "gnnscale_s": statistics.median(ours),
            "import_torch_s": statistics.median(ref), "runs": ours,
            "torch_imported": "torch" in imported, "pyg_imported": "torch_geometric" in imported}


def import_costs(repeats: int) -> dict:
    """Median wall time of each :data:`IMPORTS` process, round-robin; what PyG's import of
    ``torch._dynamo`` costs is ``torch_dynamo - torch``."""
    times: dict[str, list[float]] = {k: [] for k in IMPORTS}
    for _ in range(repeats):
        for key, code in IMPORTS.items():
            times[key].append(wall([sys.executable, "-c", code], ROOT))
    out = {f"{k}_s": statistics.median(v) for k, v in times.items()}
    out["dynamo_s"] = out["torch_dynamo_s"] - out["torch_s"]
    out["dynamo_share_of_pyg"] = out["dynamo_s"] / (out["torch_geometric_s"] - out["python_s"])
    return out


def run(quick: bool = False) -> dict:
    load_before = os.getloadavg()
    repeats = 3 if quick else 5
    work = Path(tempfile.mkdtemp(prefix="gnnscale-startup-"))
    try:
        fixed = {"config_error": config_error(repeats + 2, work),
                 "imports": import_costs(repeats)}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    raw = cora_raw()
    if raw is None:
        return {"config": {}, "results": {**fixed, "skipped": "Cora's raw files are not here "
                                          "(put ind.cora.* in data/cora/raw)"}, "ratios": {}}
    work = Path(tempfile.mkdtemp(prefix="gnnscale-startup-"))
    try:
        shutil.copytree(raw, work / "pyg" / "Cora" / "raw")
        data_root = work / "data"
        shutil.copytree(raw, data_root / "cora" / "raw")
        script = work / "plain.py"
        script.write_text(PLAIN)
        plain = [sys.executable, str(script), str(work / "pyg")]
        train = [sys.executable, str(ROOT / "train.py"), f"data_root={data_root}", *TINY]
        wall(plain, work)  # process Cora once for both, outside the timings
        wall([*train, "dist.world_size=1", f"hydra.run.dir={work / 'warm'}"], ROOT)
        results, phases = {}, {}
        for label, extra in VARIANTS:
            if quick and label not in QUICK:
                continue
            run_dir = work / label
            results[label] = paired(plain, [*train, *extra, f"hydra.run.dir={run_dir}"],
                                    repeats, ROOT)
            saved = json.loads((run_dir / "results.json").read_text())
            phases[label] = saved.get("startup", {})
        sweep = [sys.executable, str(ROOT / "train.py"), "-m", f"data_root={data_root}", *TINY,
                 "dist.world_size=1", "seed=0,1,2,3,4", f"hydra.sweep.dir={work / 'sweep'}"]
        one = [*train, "dist.world_size=1", f"hydra.run.dir={work / 'one'}"]
        results["sweep5_vs_one_run"] = {
            k.replace("plain", "one_run").replace("gnnscale", "sweep5"): v
            for k, v in paired(one, sweep, max(2, repeats - 2), ROOT).items()}
        results["startup_phases"] = phases
        results.update(fixed)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ratios = {f"{k}_vs_plain_pyg": v["ratio_median"] for k, v in results.items()
              if isinstance(v, dict) and "ratio_median" in v and k != "sweep5_vs_one_run"}
    ratios["sweep5_vs_one_run"] = results["sweep5_vs_one_run"]["ratio_median"]
    ratios["config_error_vs_import_torch"] = (results["config_error"]["gnnscale_s"]
                                              / results["config_error"]["import_torch_s"])
    return {"config": {"repeats": repeats, "command": " ".join(TINY), "cpus": os.cpu_count(),
                       "load_average_before": load_before, "load_average_after": os.getloadavg()},
            "results": results, "ratios": ratios}
