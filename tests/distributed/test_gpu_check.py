"""The prepared GPU check (scripts/gpu_check.py): one line and exit 0 without CUDA, clear errors,
the wheels stage, and every stage end to end on the CPU (``--device cpu``)."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from scripts import gpu_check

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_check.py"


def _run(*args: str, tmp: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp)}
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this host has CUDA")
def test_without_cuda_it_says_so_in_one_line_and_exits_0(tmp_path):
    out = tmp_path / "check.json"
    p = _run("--quick", "--out", str(out), tmp=tmp_path)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpu-check: no CUDA device on this host")
    assert not out.exists() and p.stderr == ""


def test_a_bad_option_is_one_error_line_and_exit_2(tmp_path):
    p = _run("--scale", "0", tmp=tmp_path)
    assert p.returncode == 2 and p.stderr.strip() == "error: --scale must be > 0, got 0.0"


def test_missing_modules_without_wheels_fail_the_stage_with_the_remedy(tmp_path, monkeypatch,
                                                                      capsys):
    monkeypatch.setattr(gpu_check, "NEEDED", {"no_such_module_gnnscale": "no-such-dist"})
    check = gpu_check.Check(gpu_check.parse(["--quick", "--wheels", str(tmp_path / "empty")]))
    assert not check.wheels(tmp_path / "site")
    stage = check.report["stages"]["wheels"]
    assert stage["status"] == "failed" and stage["missing"] == ["no-such-dist"]
    assert "make gpu-wheels" in stage["reason"] and not check.report["ok"]
    assert "gpu-check: wheels:" in capsys.readouterr().out


@pytest.mark.slow
def test_every_stage_runs_end_to_end_on_the_cpu(tmp_path):
    out = tmp_path / "check.json"
    p = _run("--device", "cpu", "--quick", "--no-build", "--strategies", "data", "fullgraph",
             "--tests", "tests/distributed/test_device.py::test_strategy_on_gpus_matches_the_cpu",
             "--scale", "0.0005", "--link-scale", "0.0003", "--epochs", "2",
             "--budget-s", "600", "--out", str(out), tmp=tmp_path, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["ok"] and doc["device"] == "cpu" and doc["env"]["gpu"] is None
    stages = doc["stages"]
    assert stages["wheels"]["status"] == "ok" and stages["build"]["status"] == "skipped"
    assert stages["tests"]["status"] == "ok" and stages["tests"]["counts"]["skipped"] == 10
    for task in ("node", "link"):
        for name in ("data", "fullgraph"):
            row = doc["rows"][f"{task}/{name}"]
            assert row["epoch_s"] > 0 and len(row["epochs"]) == 2, row
            assert all(math.isfinite(v) for v in row["train_loss"])
            assert row["edges_computed"] > 0
        pyg = doc["rows"][f"{task}/pyg"]
        assert "epoch_s" in pyg or "pyg-lib or torch-sparse" in pyg["skipped"]
        assert set(doc["ratios"]) >= {f"{task}/pyg_over_data", f"{task}/pyg_over_fullgraph"}
    assert p.stdout.splitlines()[-1].startswith("gpu-check: ok in ")
    # nothing left in the temp folder (torch's own compile cache aside, as in test_temp_hygiene)
    left = [q for q in tmp_path.iterdir() if not q.name.startswith("torchinductor_")]
    assert left == [out]


def _wheel(folder: Path, module: str) -> Path:
    """A minimal pure-Python wheel holding ``module`` (a zip with the dist-info pip reads)."""
    import zipfile

    folder.mkdir(parents=True)
    path = folder / f"{module}-0.1-py3-none-any.whl"
    info = f"{module}-0.1.dist-info"
    files = {f"{module}.py": "VALUE = 42\n",
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                              "Tag: py3-none-any\n"}
    record = "".join(f"{name},,\n" for name in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as z:
        for name, text in {**files, f"{info}/RECORD": record}.items():
            z.writestr(name, text)
    return path


def test_the_wheels_of_missing_modules_are_installed_privately_and_put_first(
        tmp_path, monkeypatch):
    module = "gnnscale_gpu_check_probe"
    wheel = _wheel(tmp_path / "wheels", module)
    monkeypatch.setattr(gpu_check, "NEEDED", {module: "probe"})
    monkeypatch.setattr(sys, "path", list(sys.path))  # restored after the test
    check = gpu_check.Check(gpu_check.parse(["--wheels", str(wheel.parent)]))
    site = tmp_path / "site"
    assert check.wheels(site)
    stage = check.report["stages"]["wheels"]
    assert stage["status"] == "ok" and stage["installed"] == [wheel.name]
    assert sys.path[0] == str(site) and check.env["PYTHONPATH"].split(os.pathsep)[0] == str(site)
    assert __import__(module).VALUE == 42
    sys.modules.pop(module)
