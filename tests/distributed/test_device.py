"""The device seam (gnnscale/distributed/device.py): one module decides devices, backends,
pinning and copies; every strategy runs through it with the host as device here, and on 1 and
2 GPUs (``pytest -m cuda``) against the CPU result where a GPU host runs the suite."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from gnnscale.distributed import device as seam
from gnnscale.distributed import spawn
from gnnscale.distributed.collectives import all_reduce_host, all_to_all_host, new_group
from tests._train import TINY, make_cfg

PACKAGE = Path(__file__).resolve().parents[2] / "gnnscale"
SEAM = PACKAGE / "distributed" / "device.py"
STRATEGIES = ("data", "split", "factored", "fullgraph", "offload")


def test_only_the_seam_calls_torch_cuda():
    callers = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
               if p != SEAM and re.search(r"\btorch\.cuda\b", p.read_text())]
    assert callers == [], f"torch.cuda outside the device seam: {callers}"


def test_group_backends_follow_what_the_group_carries():
    assert seam.group_backend(seam.Purpose.host, "nccl") == "gloo"
    assert seam.group_backend("host", "gloo") == "gloo"
    for purpose in ("world", "shuffle", "trainers"):
        assert seam.group_backend(purpose, "nccl") == "nccl"
        assert seam.group_backend(purpose, "gloo") == "gloo"
    with pytest.raises(ValueError):
        seam.group_backend("samples", "gloo")


def test_the_host_as_device_pins_nothing_and_copies_in_place():
    host = seam.HOST
    assert seam.bind("cpu", 3) == host
    assert not seam.is_accelerator(host) and seam.peak_allocated(host) is None
    t = torch.arange(6.0).view(2, 3).t()
    assert seam.pinned(t, host).is_contiguous() and not seam.pinned(t, host).is_pinned()
    assert not seam.host_empty((2, 3), host).is_pinned()
    assert seam.to_device(t, host) is t  # no copy on the host
    assert seam.rng_devices(host) == [] and seam.ddp_device_ids(host) is None
    seam.synchronize(host)
    seam.reset_peak(host)
    with pytest.raises(ValueError, match="not a GPU"):
        seam.free_bytes(host)


def _collectives(topo) -> dict:
    rank, world = topo.rank, topo.world_size
    with pytest.raises(TypeError, match="backend"):
        new_group(backend="gloo")
    host_group = new_group(purpose=seam.Purpose.host)
    out = {"comm": str(seam.comm_device()), "host_backend": dist.get_backend(host_group)}
    t = torch.tensor([rank + 1.0, 10.0 * rank])
    out["sum"] = all_reduce_host(t.clone()).tolist()
    out["max"] = all_reduce_host(t.clone(), op=dist.ReduceOp.MAX, group=host_group).tolist()
    send = torch.arange(world * 2) + 100 * rank  # two values to every rank
    out["a2a"] = all_to_all_host(torch.empty_like(send), send).tolist()
    return out


@pytest.mark.slow
def test_host_collectives_on_two_ranks():
    got = spawn(_collectives, 2)
    for rank, r in enumerate(got):
        assert r["comm"] == "cpu" and r["host_backend"] == "gloo"
        assert r["sum"] == [3.0, 10.0] and r["max"] == [2.0, 10.0]
        assert r["a2a"] == [2 * rank, 2 * rank + 1, 100 + 2 * rank, 101 + 2 * rank]


# ---- the GPU tier: each strategy on 1 and 2 GPUs against the CPU result --------------------------

def _losses(tmp_path: Path, strategy: str, world: int, device: str) -> list[float]:
    from gnnscale.runner.run import run

    extra = {"fullgraph": ["model=gcn"], "offload": ["model=gcn", "strategy.chunks=2"]}
    cfg = make_cfg(tmp_path, *TINY, f"strategy={strategy}", f"dist.world_size={world}",
                   f"dist.device={device}", "epochs=2", "checkpoint=false",
                   "model.dropout=0",  # masks come from other kernels on the two devices
                   *extra.get(strategy, []), run=f"{strategy}-{world}-{device}")
    return [h["train_loss"] for h in run(cfg)["history"]]


@pytest.mark.cuda
@pytest.mark.parametrize("world", [1, 2])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_strategy_on_gpus_matches_the_cpu(tmp_path, strategy, world):
    if not seam.cuda_available():
        pytest.skip("no CUDA device on this host")
    if world > torch.cuda.device_count():
        pytest.skip(f"needs {world} GPUs, this host has {torch.cuda.device_count()}")
    cpu = _losses(tmp_path, strategy, world, "cpu")
    gpu = _losses(tmp_path, strategy, world, "cuda")
    assert all(math.isfinite(v) for v in gpu)
    assert gpu == pytest.approx(cpu, rel=1e-3, abs=1e-4)
