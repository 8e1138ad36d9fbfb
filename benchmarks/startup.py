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
measured; and ``refusal``, a custom model the launcher refuses (:data:`REFUSAL`: a global
pooling under ``strategy=split``, status 2 naming the line of its forward): wall and CPU seconds
(the launcher and its fork server together), and whether ``torch._dynamo``'s body ran.
``python -m benchmarks.startup launch [--root CLONE]`` runs the rows that need no dataset
alone: the refusal, the config error and a synthetic 2-rank run of one epoch, wall and CPU
(``--root``: the ``train.py`` of another clone, for a before/after).
"""

from __future__ import annotations

import json
import os
import resource
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
#: a custom model no layer-wise strategy can run (examples/models.py): refused at launch
REFUSAL = ["dataset=synthetic", "dataset.preset=tiny", "model=custom",
           "model.target=examples.models.MeanPooled", "model.num_layers=1", "sampler.fanouts=[5]",
           "strategy=split"]
#: a whole 2-rank run that needs no download (the synthetic graph is generated)
TINY_RUN = ["dataset=synthetic", "dataset.preset=tiny", "epochs=1", "dist.world_size=2",
            "logger=none", "progress=false", "checkpoint=false"]
#: import costs, each a whole ``python -c`` process
IMPORTS = {"python": "pass", "torch": "import torch",
           "torch_dynamo": "import torch, torch._dynamo",
           "torch_geometric": "import torch_geometric",
           "gnnscale_then_pyg": "import gnnscale, torch_geometric",
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


def children_cpu() -> float:
    """User + system CPU seconds of every waited-for child process so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(cmd: list[str], status: int, repeats: int, root: Path,
          env: dict[str, str] | None = None) -> dict:
    """Wall and CPU seconds (medians; CPU: the process and the children it waited for, its
    fork server and ranks included) of ``cmd`` run ``repeats`` times in ``root``; each must end
    with ``status``, a refusal (2) with one ``error:`` line."""
    walls, cpus, load = [], [], os.getloadavg()
    for _ in range(repeats):
        cpu0, t0 = children_cpu(), time.perf_counter()
        proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=600,
                              env={**os.environ, **(env or {})})
        walls.append(time.perf_counter() - t0)
        cpus.append(children_cpu() - cpu0)
        if proc.returncode != status or (status == 2 and not proc.stderr.startswith("error: ")):
            raise RuntimeError(f"{' '.join(cmd)}: expected status {status}, got "
                               f"{proc.returncode}: {proc.stderr[-2000:]}")
    return {"wall_s": statistics.median(walls), "cpu_s": statistics.median(cpus),
            "wall_runs": walls, "cpu_runs": cpus, "last_stderr": proc.stderr[-600:],
            "load_average_before": load, "load_average_after": os.getloadavg()}


def dynamo_ran(cmd: list[str], root: Path) -> bool:
    """Whether ``cmd``'s launcher ran torch._dynamo's body (``-X importtime`` lists
    ``torch._dynamo.convert_frame`` only then; ranks started with spawn, not the fork
    server, so the log is the launcher's)."""
    log = subprocess.run([sys.executable, "-X", "importtime", *cmd[1:]], cwd=root,
                         capture_output=True, text=True, timeout=600,
                         env={**os.environ, "GNNSCALE_START_METHOD": "spawn"}).stderr
    return "torch._dynamo.convert_frame" in {line.rsplit("|", 1)[-1].strip()
                                             for line in log.splitlines()
                                             if line.startswith("import time")}


def refusal(repeats: int, work: Path, root: Path = ROOT) -> dict:
    """:func:`timed` :data:`REFUSAL` (status 2, one line naming the line of the model's
    forward), and whether its launcher ran torch._dynamo's body; ``launcher_alone``: the same
    without the rank fork server (``GNNSCALE_START_METHOD=spawn``), the launcher's own
    seconds, which bound a refusal's wall time on an idle host (the server has its own core)."""
    cmd = [sys.executable, str(root / "train.py"), f"hydra.run.dir={work / 'refused'}",
           f"data_root={work / 'refused-data'}", *REFUSAL]
    row = timed(cmd, 2, repeats, root)
    if "models.py:" not in row["last_stderr"]:
        raise RuntimeError(f"the refusal does not name the forward's line: {row['last_stderr']}")
    alone = timed(cmd, 2, repeats, root, {"GNNSCALE_START_METHOD": "spawn"})  # no fork server
    return {"command": " ".join(REFUSAL), **row, "dynamo_ran": dynamo_ran(cmd, root),
            "launcher_alone": {k: alone[k] for k in ("wall_s", "cpu_s", "wall_runs",
                                                     "cpu_runs")}}


def run_launch(quick: bool = False, root: Path = ROOT) -> dict:
    """Whole ``train.py`` processes of ``root``, no dataset download: :func:`refusal`; the
    config error :data:`BAD`; and :data:`TINY_RUN`, a synthetic 2-rank run of one epoch (with
    its ``startup`` phases), each :func:`timed`, with the host's load."""
    repeats = 3 if quick else 5
    work = Path(tempfile.mkdtemp(prefix="gnnscale-startup-"))
    try:
        train = [sys.executable, str(root / "train.py")]
        results = {"refusal": refusal(repeats, work, root)}
        results["config_error"] = {"command": " ".join(BAD), **timed(
            [*train, f"hydra.run.dir={work / 'bad'}", f"data_root={work / 'bad-data'}", *BAD],
            2, repeats, root)}
        run = [*train, f"hydra.run.dir={work / 'tiny'}", f"data_root={work / 'data'}",
               *TINY_RUN]
        subprocess.run(run, cwd=root, capture_output=True, timeout=600)  # the dataset, once
        results["tiny_2ranks"] = {"command": " ".join(TINY_RUN), **timed(run, 0, repeats, root),
                                  "startup": json.loads((work / "tiny" / "results.json")
                                                        .read_text()).get("startup", {})}
        return {"config": {"repeats": repeats, "root": str(root), "cpus": os.cpu_count()},
                "results": results,
                "ratios": {f"{k}_wall_over_cpu": v["wall_s"] / v["cpu_s"]
                           for k, v in results.items()}}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def import_costs(repeats: int) -> dict:
    """Median wall time of each :data:`IMPORTS` process, round-robin; what PyG's import of
    ``torch._dynamo`` costs is ``torch_dynamo - torch``."""
    times: dict[str, list[float]] = {k: [] for k in IMPORTS}
    for _ in range(repeats):
        for key, code in IMPORTS.items():
            times[key].append(wall([sys.executable, "-c", code], ROOT))
    out = {f"{k}_s": statistics.median(v) for k, v in times.items()}
    out["dynamo_s"] = out["torch_dynamo_s"] - out["torch_s"]
    out["deferral_saves_s"] = out["torch_geometric_s"] - out["gnnscale_then_pyg_s"]
    out["dynamo_share_of_pyg"] = out["dynamo_s"] / (out["torch_geometric_s"] - out["python_s"])
    return out


def run(quick: bool = False) -> dict:
    load_before = os.getloadavg()
    repeats = 3 if quick else 5
    work = Path(tempfile.mkdtemp(prefix="gnnscale-startup-"))
    try:
        fixed = {"config_error": config_error(repeats + 2, work),
                 "refusal": refusal(repeats, work),
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


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.startup launch [--quick] [--out PATH] [--root CLONE]``: only the
    whole-process rows that need no dataset (:func:`run_launch`), of this clone or of
    ``CLONE`` (another checkout, for a before/after)."""
    from benchmarks.__main__ import run_part

    argv = sys.argv[1:] if argv is None else list(argv)
    root = ROOT
    if "--root" in argv:
        i = argv.index("--root")
        root = Path(argv[i + 1]).resolve()
        del argv[i:i + 2]
    return run_part("startup", "launch", lambda quick: run_launch(quick, root), argv,
                    main.__doc__ or "")


if __name__ == "__main__":
    sys.exit(main())
