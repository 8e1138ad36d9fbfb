"""Suite ``beyond_ram``: a generated graph whose processed copy is larger than this machine's
memory, generated, processed, partitioned and trained (``strategy=data``, 2 ranks) with every
phase's peak memory measured.

The graph is ``products_sim`` resized (:data:`FULL`: 24M nodes, 192M undirected edges, 256
float32 features a node: 24.6 GB of features, 3.1 GB of CSC indices, 28 GB processed) and
``--scale`` shrinks it (nodes and communities; the degree, features and steps stay):
``python -m benchmarks beyond_ram --quick`` runs scale 0.002 in about a minute.

    python -m benchmarks.beyond_ram --scale 1 --root /work/big --out docs/results/beyond_ram.json

Each phase runs in a child process (``nice -n 19``) watched every 0.25 s: the peak resident
memory of every process of the phase (``VmHWM``: it counts the mapped file pages a process
touched, ``RssAnon``: its own memory, sampled) and the bytes it read from storage
(``read_bytes`` of ``/proc/<pid>/io``: page-cache misses only, readahead included).

* ``process``: ``SyntheticDataset.load`` under ``dataset.memory_budget``: the generator writes
  straight into the staging folder (no raw copy): edges sampled and deduplicated in key
  buckets on disk, the CSC built out of core, the features written in row chunks, then the
  staged files moved into the processed copy. Its sub-phases (``edges``, ``csc``,
  ``features``, ``save``) get their own peak of anonymous memory and time.
* ``partition``: the ``ldg`` streaming partitioner's book (vertex -> part, 2 parts) over the
  memory-mapped graph, O(N + P) state, and its quality (local-edge ratio, balance) counted
  a chunk of columns at a time.
* ``train``: ``train.py strategy=data dist.world_size=2 epochs=1`` over the processed copy:
  the features are the memory-mapped ``.npy`` (the feature store's host tier; no cache), so
  every row gathered is read from the file. The split holds ``steps`` global batches of
  training nodes (one epoch = ``steps`` steps a rank); ``eval_every=-1``: no evaluation (the
  layer-wise inference over every vertex would hold a hidden row per vertex: more than the
  machine's memory). Disk bytes per step: the ranks' ``read_bytes`` over the epoch's window
  (located from the epoch line's arrival), over the steps.

The features file's pages are dropped from the page cache before training (``evict``:
``POSIX_FADV_DONTNEED``; dropping the whole cache needs root), so the epoch starts cold for
the features; the topology (CSC) may stay cached, as it would on a host that holds the graph
in memory. Rows the epoch reads twice, or that share a 4 KiB page with a row read before, hit
the cache the run fills itself; ``page_cache_gib_at_start`` (``Cached`` in ``/proc/meminfo``)
and ``disk_bytes_over_row_bytes`` (disk bytes over the gathered rows' bytes) say how much.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: not part of ``python -m benchmarks all``: the full run writes ~30 GB and takes about an hour
IN_ALL = False

#: the full-size graph (scale 1) and the run's fixed knobs
FULL = {"num_nodes": 24_000_000, "num_features": 256, "avg_degree": 16.0, "steps": 20,
        "batch_size": 1024, "fanouts": [10, 10], "memory_budget": "4GiB"}
PRESET_NODES = 2_449_029  # products_sim's nodes at scale 1
QUICK_SCALE = 0.002


def dataset_overrides(scale: float) -> dict:
    """``dataset.*`` keys of the graph at ``scale`` (the split sized to the steps)."""
    nodes = max(2_000, int(round(FULL["num_nodes"] * scale)))
    train = FULL["steps"] * FULL["batch_size"]
    if train * 2 > nodes:
        raise SystemExit(f"--scale {scale} gives {nodes:,} nodes: too few for {train:,} "
                         "training nodes; raise it")
    return {"preset": "products_sim", "scale": nodes / PRESET_NODES,
            "num_features": FULL["num_features"], "avg_degree": FULL["avg_degree"],
            "train_ratio": train / nodes,
            "val_ratio": FULL["batch_size"] / nodes,
            "test_ratio": FULL["batch_size"] / nodes,
            "memory_budget": FULL["memory_budget"]}


# ---- watching a phase ----------------------------------------------------------------------

def _status(pid: int) -> dict[str, int]:
    out = {}
    try:
        for line in open(f"/proc/{pid}/status"):
            k, _, v = line.partition(":")
            if k in ("VmHWM", "VmRSS", "RssAnon", "PPid"):
                out[k] = int(v.split()[0]) * (1 if k == "PPid" else 1024)
    except OSError:
        pass
    return out


def _read_bytes(pid: int) -> int | None:
    try:
        for line in open(f"/proc/{pid}/io"):
            if line.startswith("read_bytes:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _tree(root: int) -> list[int]:
    """``root`` and its descendants (by PPid)."""
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            kids.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


def _folder_bytes(folder: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


#: phases run under ``nice -n 19`` (``--no-nice``: at the caller's priority, for a host whose
#: other jobs would starve them)
NICE = True


def watch(cmd: list[str], env: dict, disk: Path | None = None, period: float = 0.25) -> dict:
    """Run ``cmd`` under ``nice -n 19`` (:data:`NICE`); per process of its tree the peak
    ``VmHWM``, peak sampled ``RssAnon`` and last ``read_bytes``; the series of every process's
    read bytes; its output lines with their arrival times; the peak bytes under ``disk``."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([*(["nice", "-n", "19"] if NICE else []), *cmd],
                            stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO)
    lines: list[tuple[float, str]] = []

    def read() -> None:
        for line in proc.stdout:
            lines.append((time.perf_counter() - t0, line.rstrip("\n")))
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    procs: dict[int, dict] = {}
    series: list[tuple[float, dict[int, int]]] = []
    disk_peak, last_disk = 0, -10.0
    while True:
        done = proc.poll() is not None
        now = time.perf_counter() - t0
        for pid in _tree(proc.pid):
            st, rb = _status(pid), _read_bytes(pid)
            if not st:
                continue
            row = procs.setdefault(pid, {"hwm": 0, "anon": 0, "read_bytes": 0,
                                         "cmd": _cmdline(pid), "ppid": st.get("PPid", 0)})
            row["hwm"] = max(row["hwm"], st.get("VmHWM", 0))
            row["anon"] = max(row["anon"], st.get("RssAnon", 0))
            if rb is not None:
                row["read_bytes"] = rb
        series.append((now, {pid: r["read_bytes"] for pid, r in procs.items()}))
        if disk is not None and now - last_disk >= 2.0:
            disk_peak, last_disk = max(disk_peak, _folder_bytes(disk)), now
        if done:
            break
        time.sleep(period)
    reader.join(timeout=10)
    rusage_peak = 0
    try:  # the tree's largest peak as the kernel kept it (ru_maxrss, KiB)
        import resource
        rusage_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    except (ImportError, OSError):
        pass
    if disk is not None:
        disk_peak = max(disk_peak, _folder_bytes(disk))
    return {"rc": proc.returncode, "wall_s": time.perf_counter() - t0, "procs": procs,
            "series": series, "lines": lines, "disk_peak_bytes": disk_peak,
            "children_maxrss_bytes": rusage_peak}


def _cmdline(pid: int) -> str:
    try:
        args = open(f"/proc/{pid}/cmdline").read().split("\0")
    except OSError:
        return ""
    if "-c" in args[:-1]:  # a script given inline: its first line
        i = args.index("-c")
        first = (args[i + 1].strip().splitlines() or [""])[0]
        args = [*args[:i + 1], first[:60] + " ...", *args[i + 2:]]
    return " ".join(args).strip()[:120]


def _last_json(w: dict, what: str) -> dict:
    if w["rc"]:
        tail = "\n".join(line for _, line in w["lines"][-15:])
        raise RuntimeError(f"{what} failed (status {w['rc']}):\n{tail}")
    for _, line in reversed(w["lines"]):
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError(f"{what} printed no result")


# ---- the phases ------------------------------------------------------------------------------

PROCESS_CHILD = r"""
import json, sys, threading, time
root, ds = sys.argv[1], json.loads(sys.argv[2])
from gnnscale.data import bounded, processed, synthetic
from benchmarks._proc import status
phase, phases, times = ["other"], {}, {}
def sample():
    while True:
        a = status()["RssAnon"]
        phases[phase[0]] = max(phases.get(phase[0], 0), a)
        time.sleep(0.05)
def watch(owner, name, label):
    f = getattr(owner, name)
    def run(*a, **k):
        old, phase[0] = phase[0], label
        t = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            times[label] = times.get(label, 0.0) + time.perf_counter() - t
            phase[0] = old
    setattr(owner, name, run)
for owner, name, label in ((synthetic, "_streamed_csc", "edges"),
                           (bounded, "external_csc", "csc"),
                           (bounded.Stage, "features", "features"),
                           (processed, "save", "save")):
    watch(owner, name, label)
base = status()
threading.Thread(target=sample, daemon=True).start()
t0 = time.perf_counter()
d = synthetic.SyntheticDataset(root=root, **ds)
g = d.load()
end = status()
meta = json.loads((d.processed_dir / "meta.json").read_text())
files = {p.name: p.stat().st_size for p in d.processed_dir.iterdir() if p.suffix == ".npy"}
print(json.dumps({"time_s": time.perf_counter() - t0, "base_anon_bytes": base["RssAnon"],
                  "peak_hwm_bytes": end["VmHWM"], "end_anon_bytes": end["RssAnon"],
                  "phase_anon_peak_bytes": phases, "phase_time_s": times,
                  "num_nodes": g.num_nodes, "num_edges": g.num_edges,
                  "num_features": int(g.x.shape[1]), "processed_dir": str(d.processed_dir),
                  "processed_files": files, "processed_bytes": sum(files.values()),
                  "checksum": meta["checksum"]}))
"""

PARTITION_CHILD = r"""
import json, sys, time
import numpy as np, torch
folder, out, parts = sys.argv[1], sys.argv[2], int(sys.argv[3])
from gnnscale.data import processed
from gnnscale.partition.ldg import LdgPartitioner
from benchmarks._proc import status
base = status()
t0 = time.perf_counter()
g = processed.load(folder)  # memory-mapped, verified by its stamp
t_load = time.perf_counter() - t0
t1 = time.perf_counter()
part = LdgPartitioner(seed=0, imbalance=1.05, order="natural").assign(g, parts).numpy()
t_assign = time.perf_counter() - t1
np.save(out, part)
after_assign = status()
# quality a chunk of columns at a time: O(N + chunk), never O(E)
t2 = time.perf_counter()
indptr, indices = g.indptr.numpy(), g.indices.numpy()
local = 0
edges = np.zeros(parts, dtype=np.int64)
step = 1 << 20
for a in range(0, g.num_nodes, step):
    b = min(g.num_nodes, a + step)
    lo, hi = int(indptr[a]), int(indptr[b])
    dst_part = np.repeat(part[a:b], np.diff(indptr[a:b + 1]))
    local += int((part[indices[lo:hi]] == dst_part).sum())
    edges += np.bincount(dst_part, minlength=parts)
verts = np.bincount(part, minlength=parts)
end = status()
print(json.dumps({"load_s": t_load, "assign_s": t_assign, "quality_s": time.perf_counter() - t2,
                  "base_anon_bytes": base["RssAnon"], "peak_hwm_bytes": end["VmHWM"],
                  "anon_after_assign_bytes": after_assign["RssAnon"],
                  "end_anon_bytes": end["RssAnon"],
                  "local_edge_ratio": local / max(1, g.num_edges),
                  "balance_vertices": float(verts.max() / verts.mean()),
                  "balance_edges": float(edges.max() / edges.mean()),
                  "vertices": verts.tolist(), "edges": edges.tolist()}))
"""


def _meminfo() -> dict[str, int]:
    out = {}
    for line in open("/proc/meminfo"):
        k, _, v = line.partition(":")
        out[k] = int(v.split()[0]) * 1024
    return out


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")


def run_process(root: Path, ds: dict) -> dict:
    w = watch([sys.executable, "-c", PROCESS_CHILD, str(root), json.dumps(ds)], _env(),
              disk=root)
    row = _last_json(w, "process")
    row.update(_peaks(w))
    return row


def run_partition(folder: str, out: Path, parts: int = 2) -> dict:
    w = watch([sys.executable, "-c", PARTITION_CHILD, folder, str(out), str(parts)], _env())
    row = _last_json(w, "partition")
    row.update(_peaks(w))
    return row


def evict(file: Path) -> bool:
    """Drop ``file``'s pages from the page cache (``POSIX_FADV_DONTNEED`` after a sync: no
    root needed, unlike ``drop_caches``); False where the call is missing."""
    if not hasattr(os, "posix_fadvise"):
        return False
    fd = os.open(file, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return True


def drop_caches() -> bool:
    """Drop the whole page cache (``echo 3 > /proc/sys/vm/drop_caches`` after a sync: root
    only); False where it is not allowed."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError:
        return False
    return True


def warm(file: Path) -> None:
    """Read ``file`` whole into the page cache (the features held in memory)."""
    with open(file, "rb") as f:
        while f.read(64 << 20):
            pass


def run_train(root: Path, ds: dict, steps: int, features: Path | None = None,
              extra: tuple[str, ...] = (), start: str = "evict", name: str = "run",
              strategy: str = "data") -> dict:
    """``train.py`` over the processed copy with ``extra`` overrides. ``start``: ``evict``
    drops ``features`` (its ``x.npy``) from the page cache first, so the epoch starts cold for
    the features (the topology may stay cached); ``drop`` drops the whole page cache (root);
    ``warm`` reads ``features`` into the page cache first (the features held in memory).
    ``strategy``: ``data`` (the suite's), ``split`` or ``factored`` (2 ranks: 1 sampler, 1
    trainer)."""
    over = [f"dataset.{k}={v}" for k, v in ds.items()]
    run_dir = root / name
    fanouts = ",".join(str(f) for f in FULL["fanouts"])
    cmd = [sys.executable, "train.py", "dataset=products_sim", *over, "model=sage",
           f"model.num_layers={len(FULL['fanouts'])}", f"sampler.fanouts=[{fanouts}]",
           f"strategy={strategy}",
           f"strategy.batch_size={FULL['batch_size']}", "dist.world_size=2", "epochs=1",
           "eval_every=-1", "checkpoint=false",
           "progress=false", f"data_root={root}", f"hydra.run.dir={run_dir}", *extra]
    if "\nverbose:" in (REPO / "configs" / "config.yaml").read_text():
        cmd.append("verbose=true")  # the epoch line on stdout: the epoch's window
    else:  # the routine lines print with the progress bars only
        cmd[cmd.index("progress=false")] = "progress=true"
    evicted = False
    if start == "drop":
        evicted = drop_caches()
    elif start == "warm" and features is not None:
        warm(features)
    elif features is not None:
        evicted = evict(features)
    cache = _meminfo()
    w = watch(cmd, _env())
    if w["rc"]:
        tail = "\n".join(line for _, line in w["lines"][-15:])
        raise RuntimeError(f"train failed (status {w['rc']}):\n{tail}")
    res = json.loads((run_dir / "results.json").read_text())
    h = res["history"][0]
    epoch_line = next(t for t, line in w["lines"]
                      if any(p.lstrip().startswith("epoch   0") for p in line.split("\r")))
    t_end = epoch_line - float(h.get("eval_time", 0.0))
    t_start = t_end - float(h["epoch_time"])
    # the ranks: the fork server's children (a process's read_bytes also counts its reaped
    # children's, so the fork server and the launcher count the ranks' reads again at exit)
    server = {pid for pid, r in w["procs"].items() if "forkserver" in r["cmd"]}
    ranks = {pid: r for pid, r in w["procs"].items() if r["ppid"] in server}
    read = _window([(t, sum(v for pid, v in snap.items() if pid in ranks))
                    for t, snap in w["series"]], t_start, t_end)
    rank_steps = float(h["steps"]) / 2  # summed over the two ranks
    row_bytes = 4 * FULL["num_features"]
    out = {
        "steps_per_rank": rank_steps,
        "epoch_time_s": float(h["epoch_time"]),
        "step_time_s": float(h["epoch_time"]) / max(rank_steps, 1),
        "sample_time_s": float(h.get("sample_time", 0.0)),
        "load_time_s": float(h.get("load_time", 0.0)),
        "compute_time_s": float(h.get("compute_time", 0.0)),
        "eval_time_s": float(h.get("eval_time", 0.0)),
        "rows_gathered": float(h.get("misses", 0.0)),
        "bytes_host_to_rank": float(h.get("bytes_host_to_rank", 0.0)),
        "disk_read_bytes_epoch": read,
        "disk_read_bytes_per_step": read / max(rank_steps, 1),
        "rows_gathered_per_step": float(h.get("misses", 0.0)) / max(rank_steps, 1),
        "row_bytes": row_bytes,
        "disk_bytes_over_row_bytes": read / max(1.0, float(h.get("bytes_host_to_rank", 0))),
        "disk_read_bytes_ranks_whole_run": sum(r["read_bytes"] for r in ranks.values()),
        "features_evicted_at_start": evicted,
        "page_cache_gib_at_start": cache.get("Cached", 0) / 2**30,
        "mem_available_gib_at_start": cache.get("MemAvailable", 0) / 2**30,
        "wall_s": w["wall_s"],
        "final_val_acc": res["summary"].get("final_val_acc"),
        "rank_pids": sorted(ranks),
        "start": start, "overrides": list(extra),
        "rank_peak_rss_bytes": [ranks[p]["hwm"] for p in sorted(ranks)],
        "rank_peak_anon_bytes": [ranks[p]["anon"] for p in sorted(ranks)],
        "train_loss": float(h["train_loss"]),
        **{k: float(h[k]) for k in DISK_KEYS if k in h},
    }
    out.update(_peaks(w))
    return out


#: the disk tier's figures copied from the epoch's metrics
DISK_KEYS = ("disk_reads", "disk_bytes_read", "disk_rows", "disk_time", "disk_rows_per_s",
             "rows_per_read", "disk_bytes_per_row_byte", "disk_rate", "disk_probe_reads_per_s",
             "cache_hit_rate", "hits", "requested", "disk_wait_time", "disk_ahead_rows",
             "local_hits", "host_hits", "local_hit_rate", "host_hit_rate")


def tier_variants(feature_bytes: int, depth: int = 64) -> dict[str, tuple[tuple[str, ...], str]]:
    """The feature store's variants side by side: ``{name: (overrides, start)}``: the memory
    map cold (today's path); the disk tier cold with 4 KiB blocks, with the device's block,
    without reads ahead, on a BFS-ordered copy (float32 and bfloat16), with a host cache of 20%
    of the feature bytes (``cache=degree``, replicated: each rank its own; also split as a 5%
    cache tier and a 15% host tier); and the features
    held in memory (the page cache warmed, no disk tier)."""
    cache20 = max(1, int(0.2 * feature_bytes))
    disk = ("cache.disk=true", f"cache.disk_depth={depth}")  # block: the device's (512 here)
    cache = ("cache=degree", f"cache.bytes={cache20}")
    return {
        "mmap_cold": (("cache=none", "cache.disk=false"), "drop"),
        "disk_b4096_cold": (("cache=none", *disk, "cache.disk_block=4096"), "drop"),
        "disk_cold": (("cache=none", *disk), "drop"),
        "disk_no_ahead_cold": (("cache=none", *disk, "cache.disk_ahead=0"), "drop"),
        "disk_bfs_cold": (("cache=none", *disk, "cache.disk_order=bfs"), "drop"),
        "disk_bf16_bfs_cold": (("cache=none", *disk, "cache.disk_order=bfs",
                                "cache.feature_dtype=bfloat16"), "drop"),
        "disk_cache20_cold": ((*cache, *disk), "drop"),
        "disk_bfs_cache20_cold": ((*cache, *disk, "cache.disk_order=bfs"), "drop"),
        # the same 20%, as a 5% cache tier and a 15% host tier (cache.host_bytes)
        "disk_cache5_host15_cold": (("cache=degree", f"cache.bytes={max(1, cache20 // 4)}",
                                     f"cache.host_bytes={cache20 - cache20 // 4}", *disk),
                                    "drop"),
        "memory_warm": (("cache=none", "cache.disk=false"), "warm"),
    }


def layout_rows_per_read(processed_dir: str, batches: int = 20) -> dict:
    """Rows per read and per block of the suite's mini-batches (the data strategy's first
    ``batches`` global batches of 1,024 training seeds, fanouts of the suite; one rank's
    micro-batch of 512 seeds each) in the file's order and in each locality order, computed
    from the blocks they touch (nothing read)."""
    import torch

    from gnnscale.cache.disk import DiskTier
    from gnnscale.cache.layout import locality_order, rows_per_read
    from gnnscale.data import processed
    from gnnscale.sampling.neighbor import NeighborSampler

    graph = processed.load(processed_dir)
    tier = DiskTier.of_file(Path(processed_dir) / "x.npy")
    sampler = NeighborSampler(FULL["fanouts"])
    gen = torch.Generator().manual_seed(0)
    train = graph.train_idx[torch.randperm(graph.train_idx.numel(), generator=gen)]
    half = FULL["batch_size"] // 2
    inputs = [sampler.sample(graph, train[k * half:(k + 1) * half], seed=k).input_nodes
              for k in range(batches)]
    out = {"none": rows_per_read(tier, inputs)}
    for order in ("degree", "bfs"):
        t0 = time.perf_counter()
        ranked = locality_order(graph, order)
        index = torch.empty_like(ranked)
        index[ranked] = torch.arange(ranked.numel())
        out[order] = {**rows_per_read(tier, inputs, index),
                      "order_s": time.perf_counter() - t0}
    return out


def run_tiers(work: Path, ds: dict, processed_dir: str, repeats: int = 1,
              only: tuple[str, ...] = (), strategy: str = "data",
              extra: tuple[str, ...] = ()) -> dict:
    """Each of :func:`tier_variants` ``repeats`` times over the processed copy (trained by
    ``strategy``, ``extra`` overrides added to each), plus the device probe at queue depths
    1..128 on ``x.npy``'s own device."""
    from gnnscale.cache.disk import probe_sweep

    x = Path(processed_dir) / "x.npy"
    drop_caches()
    from gnnscale.cache.disk import logical_block
    from gnnscale.ops import io as io_ops

    out: dict = {"probe_reads_per_s": {str(d): r for d, r in probe_sweep(str(x)).items()},
                 "reader": io_ops.backend(), "block": logical_block(str(x)), "variants": {},
                 "strategy": strategy, "extra": list(extra)}
    _log(f"probe: {out['probe_reads_per_s']}")
    out["layout"] = layout_rows_per_read(processed_dir)
    _log(f"layout: {out['layout']}")
    feature_bytes = x.stat().st_size
    for rep in range(repeats):
        for name, (over, start) in tier_variants(feature_bytes).items():
            if only and name not in only:
                continue
            shutil.rmtree(work / f"run-{name}", ignore_errors=True)
            row = run_train(work, ds, FULL["steps"], x, (*over, *extra), start, f"run-{name}",
                            strategy)
            out["variants"].setdefault(name, []).append(row)
            _log(f"{name} #{rep}: step {row['step_time_s']:.2f}s load {row['load_time_s']:.1f}s "
                 f"rows/s {row.get('disk_rows_per_s', 0):.0f} read/step "
                 f"{row['disk_read_bytes_per_step'] / 2**20:.1f} MiB wait "
                 f"{row.get('disk_wait_time', 0):.2f}s")
    return out


def _window(series: list[tuple[float, int]], t0: float, t1: float) -> int:
    """Bytes read between ``t0`` and ``t1`` (series interpolated linearly)."""
    def at(t: float) -> float:
        if not series:
            return 0.0
        if t <= series[0][0]:
            return series[0][1]
        for (ta, ba), (tb, bb) in zip(series, series[1:]):
            if ta <= t <= tb:
                return ba + (bb - ba) * (t - ta) / max(tb - ta, 1e-9)
        return series[-1][1]
    return int(at(t1) - at(t0))


def _peaks(w: dict) -> dict:
    procs = w["procs"]
    return {"peak_rss_bytes": max((r["hwm"] for r in procs.values()), default=0),
            "peak_anon_bytes": max((r["anon"] for r in procs.values()), default=0),
            "peak_rss_sum_bytes": sum(r["hwm"] for r in procs.values()),
            "disk_peak_bytes": w["disk_peak_bytes"], "phase_wall_s": w["wall_s"],
            "processes": {str(pid): {"peak_rss_bytes": r["hwm"], "peak_anon_bytes": r["anon"],
                                     "read_bytes": r["read_bytes"], "cmd": r["cmd"]}
                          for pid, r in procs.items() if r["hwm"] > 64 << 20}}


# ---- the suite -------------------------------------------------------------------------------

def run(quick: bool = False, scale: float | None = None, root: str | None = None,
        keep: bool = False, resume: dict | None = None, tiers: bool = False,
        repeats: int = 1, only: tuple[str, ...] = (), strategy: str = "data",
        extra: tuple[str, ...] = ()) -> dict:
    """Every phase at ``scale`` (default: 1, or :data:`QUICK_SCALE` with ``quick``) under
    ``root`` (default: a folder in the run's temp dir), removed afterwards unless ``keep``.
    ``resume``: the ``results`` of an earlier run of the same scale and root (kept): its
    phases are taken as they are and the graph on disk reused; the others run. ``tiers``:
    instead of the partition and train phases, the feature store's variants side by side
    (:func:`run_tiers`, ``repeats`` times each, ``only`` those named, by ``strategy`` with
    ``extra`` overrides)."""
    import tempfile

    scale = float(scale if scale is not None else QUICK_SCALE if quick else 1.0)
    base = Path(root) if root else Path(tempfile.mkdtemp(prefix="gnnscale-beyond-ram-"))
    work = base / f"beyond_ram-{scale:g}"
    ds = dataset_overrides(scale)
    mem = _meminfo()["MemTotal"]
    results: dict = {k: v for k, v in (resume or {}).items() if k != "train"}
    t0 = time.perf_counter()
    try:
        if "process" not in results:
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
            results["process"] = run_process(work, ds)
            _log(f"process: {results['process']['time_s']:.0f}s")
        if tiers:
            results["tiers"] = run_tiers(work, ds, results["process"]["processed_dir"],
                                         repeats, only, strategy, extra)
            return {"config": {"scale": scale, "dataset": ds, "mem_total_bytes": mem,
                               **{k: FULL[k] for k in ("steps", "batch_size", "fanouts")},
                               "num_nodes": results["process"]["num_nodes"],
                               "num_edges": results["process"]["num_edges"],
                               "processed_bytes": results["process"]["processed_bytes"],
                               "total_s": time.perf_counter() - t0},
                    "results": results, "ratios": {}}
        if "partition" not in results:
            results["partition"] = run_partition(results["process"]["processed_dir"],
                                                 work / "ldg_book.npy")
            _log(f"partition: {results['partition']['phase_wall_s']:.0f}s")
        shutil.rmtree(work / "run", ignore_errors=True)
        results["train"] = run_train(work, ds, FULL["steps"],
                                     Path(results["process"]["processed_dir"]) / "x.npy")
        _log(f"train: {results['train']['wall_s']:.0f}s")
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    processed_bytes = results["process"]["processed_bytes"]
    peaks = {k: r["peak_rss_bytes"] for k, r in results.items()}
    ratios = {"processed_over_ram": processed_bytes / mem,
              **{f"{k}_peak_rss_over_ram": v / mem for k, v in peaks.items()}}
    targets = {"processed_larger_than_ram": processed_bytes > mem,
               **{f"{k}_peak_rss_below_ram": v < mem for k, v in peaks.items()}}
    config = {"scale": scale, "dataset": ds, **{k: FULL[k] for k in ("steps", "batch_size",
                                                                     "fanouts")},
              "num_nodes": results["process"]["num_nodes"],
              "num_edges": results["process"]["num_edges"],
              "num_features": results["process"]["num_features"],
              "processed_bytes": processed_bytes, "mem_total_bytes": mem,
              "partitioner": "ldg (natural order, imbalance 1.05), 2 parts",
              "model": f"sage, {len(FULL['fanouts'])} layers",
              "strategy": "data, 2 ranks, no feature cache",
              "total_s": time.perf_counter() - t0}
    return {"config": config, "results": results, "ratios": ratios, "targets": targets}


def _log(text: str) -> None:
    print(f"[beyond_ram {time.strftime('%H:%M:%S')}] {text}", flush=True)


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.beyond_ram [--scale S] [--root DIR] [--keep] [--out PATH]``."""
    import benchmarks
    from benchmarks.__main__ import show
    from gnnscale.distributed.guard import run_temp_dir

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", type=float, default=1.0, help="graph size (1: the full graph)")
    p.add_argument("--root", default=None, help="folder for the graph (default: a temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the graph afterwards")
    p.add_argument("--resume", default=None,
                   help="JSON of an earlier run's results (same scale, --root, --keep): its "
                        "process and partition phases are reused, training runs again")
    p.add_argument("--out", default=None)
    p.add_argument("--tiers", action="store_true",
                   help="the feature store's variants side by side (memory map, disk tier, "
                        "disk tier + 20%% host cache, in memory) instead of partition + train")
    p.add_argument("--repeats", type=int, default=1, help="runs of each variant (--tiers)")
    p.add_argument("--only", default="", help="comma-separated variants to run (--tiers)")
    p.add_argument("--strategy", default="data", choices=["data", "split", "factored"],
                   help="the strategy the variants train with (--tiers; 2 ranks)")
    p.add_argument("--extra", default="",
                   help="space-separated overrides added to every variant (--tiers)")
    p.add_argument("--no-nice", action="store_true",
                   help="run the phases at this process's priority, not nice 19")
    p.add_argument("--io-library", default=None,
                   help="a library of csrc/io built alone (GNNSCALE_IO_LIBRARY), for an "
                        "extension built before csrc/io: the disk tier's native reader")
    args = p.parse_args(argv)
    global NICE
    NICE = not args.no_nice
    if args.io_library:
        os.environ["GNNSCALE_IO_LIBRARY"] = str(Path(args.io_library).resolve())
    run_temp_dir()
    resume = None
    if args.resume:
        resume = json.loads(Path(args.resume).read_text())
        resume = resume.get("results", resume)
    report = {"suite": "beyond_ram", "quick": args.scale < 1,
              **run(scale=args.scale, root=args.root, keep=args.keep, resume=resume,
                    tiers=args.tiers, repeats=args.repeats,
                    only=tuple(v for v in args.only.split(",") if v),
                    strategy=args.strategy, extra=tuple(args.extra.split())),
              "env": benchmarks.env()}
    if resume:
        report["resumed_phases"] = sorted(k for k in resume if k != "train")
    show(report)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=2))
    return 0 if math.isfinite(report["config"]["total_s"]) else 1


if __name__ == "__main__":
    sys.exit(main())
