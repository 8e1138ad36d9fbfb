#!/usr/bin/env python
"""The prepared GPU check: ``python scripts/gpu_check.py [--quick] [--device cuda|cpu] [--out F]``
(``make gpu-check``; docs/gpu.md).

Made for a lent GPU machine as it is: no network, a Python with a CUDA torch and
torch-geometric but without hydra-core, omegaconf or pymetis, which come as wheels fetched
beforehand (``make gpu-wheels`` -> ``.gpu-wheels/``). Stages, each timed and recorded in one
JSON file:

1. ``wheels``: the wheels in ``.gpu-wheels`` of the modules this Python lacks, installed into a
   private folder (removed at exit) put first on the path; nothing when none are missing.
2. ``build``: the native ops compiled against this torch (``setup.py build_ext --inplace``).
3. ``tests``: ``pytest -m cuda`` (the GPU tier: every strategy on the GPU against the CPU).
4. ``epochs``: every strategy's epoch (data, split, factored, fullgraph, offload; one rank on
   the device) through the runner, for the node task (products-like graph, GraphSAGE 3 x 256,
   fanouts 15,10,5, batch 1024: the ``epoch`` suite's workload) and the link task (a smaller
   products-like graph, GraphSAGE 2 x 64, fanouts 10,5, 4096 positives a batch: the ``link``
   suite's), beside PyG's ``NeighborLoader`` / ``LinkNeighborLoader`` training PyG's
   GraphSAGE on the same graph, device and batches (needs pyg-lib or torch-sparse there; else
   its row holds the reason). Median epoch after the first, per-phase medians, volumes, peak
   memory; ``pyg_over_<strategy>`` = t(PyG) / t(strategy).

Whole run under 8 minutes, ``--quick`` under 3: rows that would start past the time budget
are recorded as skipped. On a host without CUDA it says so in one line and exits 0;
``--device cpu`` runs the same stages on the CPU (the GPU tier's tests then skip).
The driver imports no gnnscale module before its wheels are installed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
WHEELS = ROOT / ".gpu-wheels"
# module -> the distribution ``make gpu-wheels`` fetches for it
NEEDED = {"hydra": "hydra-core", "omegaconf": "omegaconf", "antlr4": "antlr4-python3-runtime",
          "pymetis": "pymetis"}
STRATEGIES = ("data", "split", "factored", "fullgraph", "offload")
WORKLOADS = {
    "node": {"hidden": 256, "layers": 3, "fanouts": [15, 10, 5], "batch": 1024},
    "link": {"hidden": 64, "layers": 2, "fanouts": [10, 5], "batch": 4096},
}
SIZES = {False: {"node": 0.2, "link": 0.01, "epochs": 3, "budget_s": 400.0},
         True: {"node": 0.02, "link": 0.004, "epochs": 2, "budget_s": 170.0}}


def _tail(text: str, n: int = 1500) -> str:
    return text[-n:]


class Check:
    """One run of the check: its options, deadline and report."""

    def __init__(self, args: argparse.Namespace) -> None:
        size = SIZES[args.quick]
        self.args = args
        self.scale = {"node": args.scale or size["node"], "link": args.link_scale or size["link"]}
        self.epochs = args.epochs or size["epochs"]
        self.start = time.monotonic()
        self.deadline = self.start + (args.budget_s or size["budget_s"])
        self.env = dict(os.environ)
        self.report: dict[str, Any] = {
            "device": args.device, "quick": args.quick, "scale": self.scale,
            "epochs": self.epochs, "budget_s": args.budget_s or size["budget_s"],
            "stages": {}, "ok": True}

    def left(self) -> float:
        """Seconds left before the deadline."""
        return self.deadline - time.monotonic()

    def stage(self, name: str, record: dict[str, Any]) -> None:
        """Record a stage, print its line, note a failure."""
        self.report["stages"][name] = record
        if record.get("status") == "failed":
            self.report["ok"] = False
        shown = {k: v for k, v in record.items() if k not in ("output", "rows")}
        print(f"gpu-check: {name}: {json.dumps(shown)}", flush=True)

    # -- 1. wheels --------------------------------------------------------------------------------
    def wheels(self, site: Path) -> bool:
        """Install the wheels of the missing modules; False when one cannot be had."""
        missing = [m for m in NEEDED if importlib.util.find_spec(m) is None]
        if not missing:
            self.stage("wheels", {"status": "ok", "installed": [], "missing": []})
            return True
        folder = Path(self.args.wheels)
        files = sorted(folder.glob("*.whl")) if folder.is_dir() else []
        if not files:
            self.stage("wheels", {"status": "failed", "missing": [NEEDED[m] for m in missing],
                                  "reason": f"no wheels in {folder}: run `make gpu-wheels` on a "
                                  "host with network access first (docs/gpu.md)"})
            return False
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index",
                            "--no-deps", "--no-compile", "--no-cache-dir", "--target", str(site),
                            *map(str, files)], capture_output=True, text=True)
        ok = p.returncode == 0
        if ok:
            sys.path.insert(0, str(site))
            importlib.invalidate_caches()
            self.env["PYTHONPATH"] = os.pathsep.join(
                [str(site), str(ROOT), *filter(None, [self.env.get("PYTHONPATH")])])
            still = [m for m in missing if importlib.util.find_spec(m) is None]
            ok = not still
        self.stage("wheels", {"status": "ok" if ok else "failed", "seconds":
                              time.perf_counter() - t0, "installed": [f.name for f in files],
                              "missing": [NEEDED[m] for m in missing],
                              **({} if ok else {"output": _tail(p.stdout + p.stderr)})})
        return ok

    # -- 2. build ---------------------------------------------------------------------------------
    def build(self) -> bool:
        """Compile the native ops against this torch."""
        if self.args.no_build:
            self.stage("build", {"status": "skipped", "reason": "--no-build"})
            return True
        t0 = time.perf_counter()
        env = {**self.env, "MAX_JOBS": str(os.cpu_count() or 1)}
        p = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"],
                           cwd=ROOT, env=env, capture_output=True, text=True)
        ok = p.returncode == 0
        self.stage("build", {"status": "ok" if ok else "failed",
                             "seconds": time.perf_counter() - t0,
                             **({} if ok else {"output": _tail(p.stdout + p.stderr)})})
        return ok

    # -- 3. tests ---------------------------------------------------------------------------------
    def tests(self) -> None:
        """``pytest -m cuda``, within the time left."""
        if self.args.no_tests:
            self.stage("tests", {"status": "skipped", "reason": "--no-tests"})
            return
        t0 = time.perf_counter()
        cmd = [sys.executable, "-m", "pytest", "-q", "-m", "cuda", "-p", "no:cacheprovider",
               *self.args.tests]
        limit = max(self.left() * (0.5 if self.args.quick else 0.4), 30.0)
        try:
            p = subprocess.run(cmd, cwd=ROOT, env=self.env, capture_output=True, text=True,
                               timeout=limit)
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            self.stage("tests", {"status": "failed", "seconds": time.perf_counter() - t0,
                                 "reason": f"over {limit:.0f}s", "output": _tail(out)})
            return
        counts = {k: int(v) for v, k in re.findall(
            r"(\d+) (passed|failed|skipped|deselected|errors?|xfailed|xpassed)", p.stdout)}
        # exit 5: nothing collected (no test carries the marker)
        ok = p.returncode in (0, 5)
        self.stage("tests", {"status": "ok" if ok else "failed", "returncode": p.returncode,
                             "seconds": time.perf_counter() - t0, "counts": counts,
                             "output": _tail(p.stdout + p.stderr)})

    # -- 4. epochs --------------------------------------------------------------------------------
    def epochs_stage(self, data_root: Path) -> None:
        """Every strategy's epoch and PyG's, node and link task, within the time left."""
        rows: dict[str, Any] = {}
        t0 = time.perf_counter()
        share = self.left() / len(WORKLOADS)  # each task its share of the time left
        for i, task in enumerate(WORKLOADS):
            task_end = self.deadline - (len(WORKLOADS) - 1 - i) * share
            for name in ("pyg", *self.args.strategies):
                key = f"{task}/{name}"
                if time.monotonic() >= task_end:
                    rows[key] = {"skipped": "over the time budget"}
                else:
                    r0 = time.perf_counter()
                    try:
                        rows[key] = (self.pyg_row(task, data_root) if name == "pyg"
                                     else self.strategy(task, name, data_root))
                    except Exception as e:  # noqa: BLE001 - a row's failure is recorded
                        rows[key] = {"failed": f"{type(e).__name__}: {e}"}
                    rows[key]["row_seconds"] = time.perf_counter() - r0
                shown = {k: rows[key][k] for k in ("epoch_s", "skipped", "failed")
                         if k in rows[key]}
                print(f"gpu-check: epochs: {key}: {json.dumps(shown)}", flush=True)
        ratios = {}
        for task in WORKLOADS:
            pyg = rows.get(f"{task}/pyg", {}).get("epoch_s")
            for name in self.args.strategies:
                ours = rows.get(f"{task}/{name}", {}).get("epoch_s")
                ratios[f"{task}/pyg_over_{name}"] = pyg / ours if pyg and ours else None
        failed = any("failed" in r for r in rows.values())
        self.stage("epochs", {"status": "failed" if failed else "ok",
                              "seconds": time.perf_counter() - t0, "rows": rows,
                              "ratios": ratios})
        self.report["rows"], self.report["ratios"] = rows, ratios

    def compose(self, task: str, strategy: str, data_root: Path, run_dir: Path) -> Any:
        """The run's config: the task's workload, one rank on the device."""
        from hydra import compose, initialize_config_dir
        from omegaconf import open_dict

        from gnnscale import registry

        registry.load_all()
        w = WORKLOADS[task]
        ov = ["dataset=products_sim", f"dataset.scale={self.scale[task]}", "model=sage",
              f"model.hidden={w['hidden']}", f"model.num_layers={w['layers']}",
              f"sampler.fanouts={w['fanouts']}", f"strategy={strategy}", f"task={task}",
              f"epochs={self.epochs}", "eval_every=0", "checkpoint=false", "logger=none",
              "dist.world_size=1", f"dist.device={self.args.device}"]
        if strategy in ("data", "split", "factored"):
            ov.append(f"strategy.batch_size={w['batch']}")
        with initialize_config_dir(str(ROOT / "configs"), version_base=None):
            cfg = compose("config", overrides=ov)
        with open_dict(cfg):
            cfg.run_dir, cfg.data_root, cfg.progress = str(run_dir), str(data_root), False
        return cfg

    def strategy(self, task: str, strategy: str, data_root: Path) -> dict[str, Any]:
        """One strategy's epochs through the runner: medians after the first epoch."""
        from gnnscale.runner.run import run

        cfg = self.compose(task, strategy, data_root, data_root / "runs" / f"{task}-{strategy}")
        hist = run(cfg)["history"]
        h = hist[1:] or hist
        med = lambda k: statistics.median(float(r.get(k, 0.0)) for r in h)
        return {"epoch_s": med("epoch_time"),
                "phases": {k: med(k) for k in ("sample_time", "load_time", "compute_time",
                                               "comm_time")},
                "edges_computed": med("edges_computed"), "steps": med("steps"),
                "bytes_host_to_rank": med("bytes_host_to_rank"),
                "peak_bytes": max(float(r.get("peak_device_bytes") or r.get("peak_memory") or 0)
                                  for r in hist),
                "train_loss": [float(r["train_loss"]) for r in hist],
                "epochs": [float(r["epoch_time"]) for r in hist]}

    def pyg_row(self, task: str, data_root: Path) -> dict[str, Any]:
        """:meth:`pyg` with this process's temp files in a folder removed after it: PyG writes
        the modules it generates for its convs there and leaves them (gnnscale's ranks get
        such a folder from their launcher)."""
        from gnnscale.distributed.launch import temp_dir_as

        with tempfile.TemporaryDirectory(prefix="gpu-check-pyg-") as tmp, temp_dir_as(tmp):
            return self.pyg(task, data_root)

    def pyg(self, task: str, data_root: Path) -> dict[str, Any]:
        """PyG's loader and GraphSAGE on the same graph and device (or the reason it cannot)."""
        import torch

        from benchmarks import pyg_missing
        from gnnscale import registry

        what = "NeighborLoader" if task == "node" else "LinkNeighborLoader"
        reason = pyg_missing(what)
        if reason:
            return {"skipped": reason}
        import torch.nn.functional as F
        from torch_geometric.data import Data
        from torch_geometric.loader import LinkNeighborLoader, NeighborLoader
        from torch_geometric.nn.models import GraphSAGE
        from torch_geometric.sampler import NegativeSampling

        w = WORKLOADS[task]
        cfg = self.compose(task, "data", data_root, data_root / "runs" / f"{task}-pyg")
        g = registry.build(cfg.dataset).load()
        dev = torch.device(self.args.device)
        torch.manual_seed(0)
        if task == "node":
            data = Data(x=g.x, y=g.y, edge_index=g.edge_index(), num_nodes=g.num_nodes)
            loader = NeighborLoader(data, num_neighbors=w["fanouts"], batch_size=w["batch"],
                                    input_nodes=g.train_idx, shuffle=True)
            out = g.num_classes
        else:
            from gnnscale.tasks.link import LinkTask

            link = LinkTask(dim=w["hidden"], num_negatives=1)
            message = link.prepare(g, None, seed=0)
            data = Data(x=message.x, edge_index=message.edge_index(),
                        num_nodes=message.num_nodes)
            loader = LinkNeighborLoader(data, num_neighbors=w["fanouts"], batch_size=w["batch"],
                                        edge_label_index=link.train_pos.long(), shuffle=True,
                                        neg_sampling=NegativeSampling("binary", amount=1.0))
            out = w["hidden"]
        model = GraphSAGE(g.num_features, w["hidden"], w["layers"], out).to(dev)
        opt = torch.optim.Adam(model.parameters(), lr=0.003)
        times, losses = [], []
        for _ in range(self.epochs):
            t0 = time.perf_counter()
            total = 0.0
            for b in loader:
                b = b.to(dev)
                opt.zero_grad(set_to_none=True)
                z = model(b.x, b.edge_index)
                if task == "node":
                    loss = F.cross_entropy(z[: b.batch_size], b.y[: b.batch_size])
                else:
                    s, d = b.edge_label_index
                    loss = F.binary_cross_entropy_with_logits((z[s] * z[d]).sum(-1),
                                                              b.edge_label)
                loss.backward()
                opt.step()
                total += float(loss.detach())
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            times.append(time.perf_counter() - t0)
            losses.append(total)
        return {"epoch_s": statistics.median(times[1:] or times), "epochs": times,
                "train_loss": losses, "loader": what}


def _env(torch: Any, device: str) -> dict[str, Any]:
    gpu = None
    if device == "cuda":
        p = torch.cuda.get_device_properties(0)
        gpu = {"name": p.name, "memory_bytes": p.total_memory,
               "multiprocessors": p.multi_processor_count}
    try:
        import torch_geometric

        pyg = torch_geometric.__version__
    except ImportError:
        pyg = None
    return {"python": platform.python_version(), "torch": torch.__version__,
            "cuda": torch.version.cuda, "torch_geometric": pyg, "gpu": gpu,
            "cpus": os.cpu_count(), "load_average": os.getloadavg(),
            "time": time.strftime("%Y-%m-%dT%H:%M:%S")}


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small graphs, under 3 minutes")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--out", default=None, help="the JSON (default outputs/gpu-check[-quick]"
                   "[-cpu].json)")
    p.add_argument("--wheels", default=str(WHEELS), help="folder of the wheels to install")
    p.add_argument("--no-build", action="store_true", help="use the native ops already built")
    p.add_argument("--no-tests", action="store_true", help="skip pytest -m cuda")
    p.add_argument("--tests", nargs="*", default=[], help="test paths (default: the suite)")
    p.add_argument("--strategies", nargs="+", choices=STRATEGIES, default=list(STRATEGIES),
                   help="the strategies whose epochs run (default: all)")
    p.add_argument("--scale", type=float, default=None, help="node task graph scale")
    p.add_argument("--link-scale", type=float, default=None, help="link task graph scale")
    p.add_argument("--epochs", type=int, default=None, help="epochs per row (>= 2)")
    p.add_argument("--budget-s", type=float, default=None, help="time budget in seconds")
    args = p.parse_args(argv)
    for key in ("scale", "link_scale", "budget_s"):
        value = getattr(args, key)
        if value is not None and not value > 0:
            p.exit(2, f"error: --{key.replace('_', '-')} must be > 0, got {value}\n")
    if args.epochs is not None and args.epochs < 1:
        p.exit(2, f"error: --epochs must be >= 1, got {args.epochs}\n")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        import torch
    except ImportError:
        print(f"gpu-check: no torch in {sys.executable}: nothing checked")
        return 0
    if args.device == "cuda" and not torch.cuda.is_available():
        print(f"gpu-check: no CUDA device on this host (torch {torch.__version__}): nothing "
              "checked (--device cpu runs the same check on the CPU)")
        return 0
    check = Check(args)
    check.report["env"] = _env(torch, args.device)
    out = Path(args.out) if args.out else ROOT / "outputs" / (
        "gpu-check" + ("-quick" if args.quick else "") + ("-cpu" if args.device == "cpu"
                                                          else "") + ".json")
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        if check.wheels(Path(tmp) / "site") and check.build():
            sys.path.insert(0, str(ROOT))
            check.tests()
            check.epochs_stage(Path(tmp) / "data")
        else:
            check.report["ok"] = False
    check.report["seconds"] = time.monotonic() - check.start
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(check.report, indent=1))
    print(f"gpu-check: {'ok' if check.report['ok'] else 'FAILED'} in "
          f"{check.report['seconds']:.0f}s -> {out}")
    return 0 if check.report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
