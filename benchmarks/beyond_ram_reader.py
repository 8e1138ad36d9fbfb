"""The disk tier's reader against the device probe, side by side in one process.

``python -m benchmarks.beyond_ram_reader [--rows N] [--repeats R] [--depth D] [--out PATH]``

A feature file of the beyond-RAM graph's shape (``--rows`` x 256 float32 rows written as
``x.npy``: 1.2M rows, 1.23 GB, the scale-0.05 graph's; its header puts rows 128 bytes past a
block, as there) is read cold (``O_DIRECT``: the page cache answers nothing) at the device's
logical block and one queue depth, in rounds; each round runs, one after the other:

- ``probe``: :func:`gnnscale.cache.disk.probe`, random block-sized reads (the device's rate);
- ``fused``: :meth:`DiskTier.read` of a gather of ``--batch`` distinct random rows (a rank's
  micro-batch of the beyond-RAM run) with the native one-call gather
  (:func:`gnnscale.ops.io.read_rows`);
- ``ranges``: the same gather planned in torch and read by the native ``read_ranges``
  (the reader before ``read_rows``);
- ``python``: the same with the Python ``os.preadv`` pool (no extension).

Rows/s counts the whole call (planning, reads, copying the rows out), against the probe's
reads/s of the same round; the ratios are medians over rounds of each round's ratio, beside
the medians of the rates. The host's 1-minute load is recorded before and after each round.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

VARIANTS = ("fused", "ranges", "python")


def write_file(path: Path, rows: int, cols: int = 256) -> None:
    """An ``.npy`` of ``rows`` x ``cols`` float32 random rows, written in chunks, then evicted
    from the page cache."""
    header = np.lib.format.header_data_from_array_1_0(np.empty((0, cols), np.float32))
    header["shape"] = (rows, cols)
    gen = np.random.default_rng(0)
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, header)
        chunk = 1 << 16
        for lo in range(0, rows, chunk):
            n = min(chunk, rows - lo)
            f.write(gen.standard_normal((n, cols), dtype=np.float32).tobytes())
        f.flush()
        os.fsync(f.fileno())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


def run(path: Path, repeats: int = 5, depth: int = 64, batch: int = 38000,
        probe_reads: int = 20000) -> dict:
    """``repeats`` rounds of the probe and each reader variant on ``path``."""
    from gnnscale.cache.disk import DiskTier, probe
    from gnnscale.ops import io as io_ops

    tiers = {v: DiskTier.of_file(path, depth=depth, fused=v == "fused") for v in VARIANTS}
    if not io_ops.rows_available():
        raise SystemExit("error: the native read_rows op is not built: python -m "
                         "gnnscale.native build")
    block = tiers["fused"].block
    n = tiers["fused"].num_rows
    gen = np.random.default_rng(1)
    rounds: list[dict] = []
    for r in range(repeats):
        load0 = os.getloadavg()[0]
        row: dict = {"probe_reads_per_s": probe(str(path), depth=depth, reads=probe_reads,
                                                seed=100 + r, block=block)}
        for v in VARIANTS:
            ids = torch.from_numpy(gen.choice(n, size=batch, replace=False))
            io_ops.FORCE_PYTHON = v == "python"
            try:
                t0 = time.perf_counter()
                tiers[v].read(ids)
                wall = time.perf_counter() - t0
            finally:
                io_ops.FORCE_PYTHON = False
            s = tiers[v].take_stats()
            row[v] = {"rows_per_s": batch / wall, "wall_s": wall, "io_s": s.disk_time,
                      "reads": s.disk_reads, "bytes_read": s.disk_bytes_read,
                      "rows_per_read": batch / s.disk_reads}
        row["load_1min"] = [load0, os.getloadavg()[0]]
        rounds.append(row)
        print(f"[reader] round {r}: probe {row['probe_reads_per_s']:.0f} reads/s, "
              + ", ".join(f"{v} {row[v]['rows_per_s']:.0f} rows/s" for v in VARIANTS)
              + f" (load {load0:.1f})", flush=True)
    for t in tiers.values():
        t.close()

    def med(xs: list[float]) -> float:
        return float(statistics.median(xs))

    results: dict = {"probe_reads_per_s": med([x["probe_reads_per_s"] for x in rounds])}
    ratios: dict = {}
    for v in VARIANTS:
        results[v] = {k: med([x[v][k] for x in rounds])
                      for k in ("rows_per_s", "wall_s", "io_s", "rows_per_read")}
        ratios[f"{v}_over_probe"] = med([x[v]["rows_per_s"] / x["probe_reads_per_s"]
                                         for x in rounds])
    ratios["fused_over_ranges"] = med([x["fused"]["rows_per_s"] / x["ranges"]["rows_per_s"]
                                       for x in rounds])
    results["rounds"] = rounds
    config = {"file": str(path), "rows": n, "row_bytes": tiers["fused"].row_bytes,
              "block": block, "depth": depth, "batch": batch, "probe_reads": probe_reads,
              "repeats": repeats, "direct": tiers["fused"].direct,
              "uring": bool(torch.ops.gnnscale.io_uring_available()),
              "load_1min": [min(x["load_1min"][0] for x in rounds),
                            max(x["load_1min"][1] for x in rounds)]}
    return {"config": config, "results": results, "ratios": ratios}


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.beyond_ram_reader``: module docstring."""
    import benchmarks
    from benchmarks.__main__ import show

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_200_000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--depth", type=int, default=64)
    p.add_argument("--batch", type=int, default=38000, help="rows a gather")
    p.add_argument("--file", default=None, help="an existing [N, F] .npy to read instead")
    p.add_argument("--dir", default=None, help="folder for the written file (default: a temp "
                   "dir on the current folder's file system)")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=args.dir or ".", prefix="reader-") as tmp:
        path = Path(args.file) if args.file else Path(tmp) / "x.npy"
        if not args.file:
            write_file(path, args.rows)
        report = {"suite": "beyond_ram_reader",
                  **run(path, repeats=args.repeats, depth=args.depth, batch=args.batch),
                  "env": benchmarks.env()}
    show({k: v for k, v in report.items() if k != "results"} | {
        "results": {k: v for k, v in report["results"].items() if k != "rounds"}})
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
