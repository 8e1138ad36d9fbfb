"""Every strategy across two separate hosts (network namespaces), 2 ranks each, equals one host.

The hosts (:mod:`tests._hosts`) are two network namespaces made here, joined by a veth pair,
each with its own copy of the processed dataset and its own run folders; each runs ``torchrun
--nnodes=2 --nproc-per-node=2`` with the c10d rendezvous on host 0. One launch per host trains
every strategy in turn (``tests._hosts_driver``: the ranks import torch and PyG once), then a
long run during which host 1 vanishes (every process of its namespace SIGKILLed): host 0 must
end within the run's deadline naming it. Where namespaces cannot be made the same runs use two
torchrun "nodes" on 127.0.0.1 (the namespace tests skip, saying why).

``data``, ``split``, ``factored``, ``offload`` and ``fullgraph`` (``deps=depcomm`` on the
edge-cut, and on a vertex-cut) train a second time from a 4-part layout (METIS edge-cut, CVC
vertex-cut), each host holding only its ranks' part folders (``parts=``), and no rank (a
factored sampler included) opens a file of another part.

Each strategy is compared with its single-host reference, trained in this process: the
full-graph strategies (``fullgraph`` edge- and vertex-cut, ``offload``) and ``split`` (one
whole mini-batch split over the ranks) with one process; ``data`` and ``factored`` (4 micro-
batches per step, sampled per slot) with ``data`` on 4 local ranks, which
``tests/integration/test_data_parallel.py`` checks against one process.
"""

from __future__ import annotations

import json
import re
import shutil
import time

import pytest

from gnnscale.distributed import free_port
from gnnscale.runner.run import run
from tests._hosts import Hosts, hosts_kind
from tests._train import make_cfg

pytestmark = pytest.mark.slow  # multi-rank / subprocess tests: the slow tier

BASE = ("dataset=synthetic", "dataset.preset=tiny", "model.hidden=16", "model.num_layers=2",
        "model.dropout=0", "eval_batch_size=512", "logger=none", "epochs=2",
        "checkpoint=false", "dist.timeout_s=60")
SAMPLING = ("sampler.fanouts=[5,5]", "strategy.batch_size=128")
GCN = ("model=gcn", "model.gcn_norm=graph")

#: run name -> overrides; every run on 2 hosts x 2 ranks
PLAN = {
    "run-data": (*BASE, "strategy=data", *SAMPLING),
    "run-split": (*BASE, "strategy=split", *SAMPLING),
    # host 0's two ranks train, host 1's two sample: host 0's ring is fed over the network
    "run-factored": (*BASE, "strategy=factored", *SAMPLING, "strategy.samplers=2",
                     "strategy.jobs_per_trainer=2"),
    "run-fullgraph-edge": (*BASE, *GCN, "strategy=fullgraph"),
    "run-fullgraph-vertex": (*BASE, *GCN, "strategy=fullgraph", "partitioner=cvc"),
    "run-offload": (*BASE, *GCN, "strategy=offload", "strategy.chunks=2"),
    # each host holds only its ranks' parts of a 4-part layout (and the global files)
    "run-data-parts": (*BASE, "strategy=data", *SAMPLING, "parts={host}/parts"),
    "run-split-parts": (*BASE, "strategy=split", *SAMPLING, "parts={host}/parts"),
    # host 1's samplers own parts 2 and 3: host 0's trainers fetch those rows from their
    # row servers while they sample
    "run-factored-parts": (*BASE, "strategy=factored", *SAMPLING, "strategy.samplers=2",
                           "strategy.jobs_per_trainer=2", "parts={host}/parts"),
    "run-fullgraph-edge-parts": (*BASE, *GCN, "strategy=fullgraph", "deps=depcomm",
                                 "parts={host}/parts"),
    "run-offload-parts": (*BASE, *GCN, "strategy=offload", "strategy.chunks=2",
                          "parts={host}/parts"),
    "run-fullgraph-vertex-parts": (*BASE, *GCN, "strategy=fullgraph", "partitioner=cvc",
                                   "parts={host}/parts-cvc"),
}
#: ``run-data`` again, stopped after one epoch, then resumed: host 1's run folder has no
#: checkpoint (rank 0 writes it), so its ranks resume from rank 0's, sent over the network
RESUME = [("run-resume", (*BASE[:-3], "epochs=1", "checkpoint=true", "dist.timeout_s=60",
                          "strategy=data", *SAMPLING)),
          ("run-resume", (*BASE[:-3], "epochs=2", "checkpoint=true", "resume=true",
                          "dist.timeout_s=60", "strategy=data", *SAMPLING))]
#: the run during which host 1 vanishes (long enough to be killed mid-epoch)
VANISH = ("run-vanish", (*BASE[:-3], "epochs=500", "eval_every=0", "checkpoint=false",
                         "dist.timeout_s=20", "strategy=data", *SAMPLING))
VANISH_DEADLINE_S = 20

#: run name -> (its single-host reference, that reference's overrides)
REFERENCE = {
    "run-data": ("data-4", (*BASE, "strategy=data", *SAMPLING, "dist.world_size=4",
                            "dist.threads_per_rank=1")),
    "run-split": ("split-1", (*BASE, "strategy=split", *SAMPLING, "dist.world_size=1")),
    "run-factored": ("data-4", None),
    "run-fullgraph-edge": ("fullgraph-1", (*BASE, *GCN, "strategy=fullgraph",
                                           "dist.world_size=1")),
    "run-fullgraph-vertex": ("fullgraph-1", None),
    "run-offload": ("fullgraph-1", None),
    "run-data-parts": ("data-4", None),
    "run-split-parts": ("split-1", None),
    "run-factored-parts": ("data-4", None),
    "run-fullgraph-edge-parts": ("fullgraph-1", None),
    "run-offload-parts": ("fullgraph-1", None),
    "run-fullgraph-vertex-parts": ("fullgraph-1", None),
}


def _losses(res: dict) -> list[float]:
    return [h["train_loss"] for h in res["history"]]


@pytest.fixture(scope="module")
def two_hosts(tmp_path_factory) -> dict:
    """Train :data:`PLAN` then :data:`VANISH` on two hosts, and the references here."""
    root = tmp_path_factory.mktemp("hosts")
    ref_root = root / "reference"
    from gnnscale.partition.cli import run as partition
    from gnnscale.strategies.base import build_task

    build_task(make_cfg(ref_root, *PLAN["run-data"]))  # the processed dataset, once
    plan = root / "plan.json"
    plan.write_text(json.dumps([[name, list(o)] for name, o in [*PLAN.items(), *RESUME, VANISH]]))
    kind = hosts_kind()[0]
    out: dict = {"kind": kind, "root": root}
    t0 = time.monotonic()
    print(f"\nhosts start at {time.time():.2f}")
    with Hosts(root, kind) as hosts:
        for i in range(2):  # each host its own copy of the processed data
            shutil.copytree(ref_root / "data", hosts.folder(i) / "data")
        layout = root / "layout"  # and its ranks' parts of one 4-part layout
        partition(make_cfg(ref_root, *BASE, "dist.world_size=4", f"parts={layout}"),
                  log=lambda _m: None)
        for i in range(2):
            shutil.copytree(layout, hosts.folder(i) / "parts", ignore=shutil.ignore_patterns(
                *(f"part-{q}" for q in range(4) if q // 2 != i)))
        vertex = root / "layout-cvc"  # and of a 4-part vertex-cut layout
        partition(make_cfg(ref_root, *BASE, "partitioner=cvc", "dist.world_size=4",
                           f"parts={vertex}"), log=lambda _m: None)
        for i in range(2):
            shutil.copytree(vertex, hosts.folder(i) / "parts-cvc", ignore=shutil.ignore_patterns(
                *(f"part-{q}" for q in range(4) if q // 2 != i)))
        port = free_port()
        logs = [root / f"host{i}.log" for i in range(2)]
        agents = [hosts.torchrun(i, port, ["-m", "tests._hosts_driver", str(plan),
                                           str(hosts.folder(i))], log=logs[i])
                  for i in range(2)]
        refs = {}  # meanwhile, the single-host references
        for name, overrides in {v[0]: v[1] for v in REFERENCE.values() if v[1]}.items():
            refs[name] = run(make_cfg(ref_root, *overrides, run=name))
        out["references"] = refs
        vanish = hosts.folder(0) / VANISH[0] / "metrics.jsonl"
        deadline = time.monotonic() + 300
        while not vanish.exists() and agents[0].poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        out["plan_s"] = time.monotonic() - t0
        if vanish.exists():
            time.sleep(0.3)  # well inside an epoch's steps
            out["killed"] = hosts.kill_host(1)
            killed_at = time.monotonic()
            try:
                agents[0].wait(timeout=VANISH_DEADLINE_S + 60)
            except Exception:  # noqa: BLE001 - reported by the test
                pass
            out["ended_after_s"] = time.monotonic() - killed_at
        out["returncodes"] = [a.poll() for a in agents]
    out["logs"] = [log.read_text() for log in logs]
    out["total_s"] = time.monotonic() - t0
    print(f"two hosts ({kind}): plan {out['plan_s']:.1f}s, host 0 ended "
          f"{out.get('ended_after_s', float('nan')):.1f}s after host 1 vanished, total "
          f"{out['total_s']:.1f}s")
    for i, text in enumerate(out["logs"]):  # with -s: what each host did, and when
        print("\n".join(f"host {i}: {line}" for line in text.splitlines()
                        if re.search(r"hosts-driver|HostLost|resuming from", line)))
    return out


def _results(two_hosts: dict, name: str) -> dict:
    path = two_hosts["root"] / "host0" / name / "results.json"
    assert path.exists(), f"{name} wrote no results on host 0:\n" + "\n".join(two_hosts["logs"])
    return json.loads(path.read_text())


@pytest.mark.parametrize("name", list(PLAN))
def test_strategy_across_hosts_equals_one_host(two_hosts, name):
    if two_hosts["kind"] != "netns":
        pytest.skip(f"network namespaces unavailable ({hosts_kind()[1]}): the loopback "
                    "variant runs")
    _check(two_hosts, name)


@pytest.mark.parametrize("name", list(PLAN))
def test_strategy_across_loopback_nodes_equals_one_host(two_hosts, name):
    if two_hosts["kind"] == "netns":
        pytest.skip("network namespaces available: the namespace variant runs")
    _check(two_hosts, name)


def _check(two_hosts: dict, name: str) -> None:
    res = _results(two_hosts, name)
    ref_name, _ = REFERENCE[name]
    ref = two_hosts["references"][ref_name]
    assert res["summary"]["world_size"] == 4
    assert _losses(res) == pytest.approx(_losses(ref), rel=1e-4), name
    assert res["summary"]["final_test_acc"] == pytest.approx(ref["summary"]["final_test_acc"],
                                                            abs=2e-3), name
    # host 1 wrote nothing of rank 0's: its run folder holds no results
    assert not (two_hosts["root"] / "host1" / name / "results.json").exists()
    if name.endswith("-parts"):  # each rank opened its own host's folder, and its own part
        layout = next(o for o in PLAN[name] if o.startswith("parts=")).rsplit("/", 1)[1]
        assert len(res["parts"]["ranks"]) == 4  # every rank's files, samplers' too
        if name in ("run-data-parts", "run-factored-parts"):  # rows of the other parts came
            assert res["history"][-1]["bytes_remote_owner"] > 0  # from their owners
        for r, rank in enumerate(res["parts"]["ranks"]):
            mine = str(two_hosts["root"] / f"host{r // 2}" / layout)
            opened = list(rank["files"]) + list(rank["mapped"])
            assert all(f.startswith(mine + "/") for f in opened), (name, r, opened)
            assert any(f"/part-{r}/" in f for f in rank["mapped"]), (name, r)
            assert not any(f"/part-{q}/" in f for q in range(4) if q != r for f in opened)


def test_vanished_host_ends_the_run_naming_it(two_hosts):
    """Every process of host 1 SIGKILLed mid-epoch: host 0's torchrun ends non-zero within the
    run's deadline (dist.timeout_s), its ranks naming host 1 and its ranks."""
    assert "killed" in two_hosts, "the vanish run never started:\n" + "\n".join(
        two_hosts["logs"])
    log = two_hosts["logs"][0]
    assert two_hosts["returncodes"][0] not in (None, 0), log
    assert two_hosts["ended_after_s"] < VANISH_DEADLINE_S + 15, two_hosts["ended_after_s"]
    named = re.search(r"HostLost: the host of ranks 2-3 \(torchrun node 1, ([\d.]+), host ",
                      log)
    assert named, log[-4000:]
    if two_hosts["kind"] == "netns":
        assert named.group(1).startswith("10.213.") and named.group(1).endswith(".2")


def test_resume_across_hosts_takes_rank_0s_checkpoint(two_hosts):
    """Host 1 has no checkpoint of its own (rank 0 writes it): resumed after epoch 0, the run
    equals the uninterrupted one, host 1's ranks taking rank 0's checkpoint."""
    resumed, whole = _results(two_hosts, "run-resume"), _results(two_hosts, "run-data")
    assert _losses(resumed) == pytest.approx(_losses(whole), rel=1e-5)
    assert not (two_hosts["root"] / "host1" / "run-resume" / "checkpoint.pt").exists()
    assert "resuming from rank 0's checkpoint (epoch 0)" in two_hosts["logs"][1]


def test_partition_books_are_rank_0s_on_every_host(two_hosts):
    """Host 1 never partitions: its ranks take rank 0's books (sent over the network when its
    own data folder lacks them) and keep them in its own cache, byte for byte rank 0's."""
    books = {}
    for i in range(2):
        folder = two_hosts["root"] / f"host{i}" / "data" / "partitions"
        books[i] = {p.parent.name: json.loads(p.read_text())["checksum"]
                    for p in folder.rglob("book.json") if "-p4-" in p.parent.name}
    # METIS's (split, fullgraph's edge-cut, offload) and CVC's (fullgraph's vertex-cut)
    assert {name.split("-")[0] for name in books[0]} == {"metis", "cvc"}, books
    assert books[1] == books[0]
