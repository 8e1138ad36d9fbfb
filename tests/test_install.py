"""Installing into a user's environment (issue 54): the version ranges and their one-line
check, the one translation unit the native build compiles (every csrc/ file, rewritten only on
change), the configs and C++ sources found in a clone and shipped in the wheel. The whole
install into a fresh venv with a 2-rank training is ``scripts/check_install.sh`` (minutes:
it installs torch and the dependencies), named in the README."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import gnnscale
from gnnscale import native, paths

ROOT = Path(__file__).resolve().parents[1]


def test_version_ranges_are_checked_in_one_line(monkeypatch):
    assert gnnscale._satisfies((2, 13, 0), ">=2.2,<2.16")
    assert not gnnscale._satisfies((2, 16), ">=2.2,<2.16")
    assert not gnnscale._satisfies((2, 1, 2), ">=2.2,<2.16")
    assert gnnscale._release("2.13.0+cu126") == (2, 13, 0)
    monkeypatch.setattr(gnnscale, "supported_ranges", lambda: (">=2.2,<2.5", ">=3.10,<3.11"))
    line = gnnscale.check_versions()
    assert line is not None and "\n" not in line
    assert "torch" in line and "(supported: >=2.2,<2.5)" in line and "Python" in line
    assert "python -m gnnscale.native build" in line
    monkeypatch.setattr(gnnscale, "supported_ranges", lambda: (">=2.2,<2.16", ">=3.10"))
    assert gnnscale.check_versions() is None


def test_pyproject_declares_ranges_and_no_build_torch():
    text = (ROOT / "pyproject.toml").read_text()
    build = text.split("[build-system]")[1].split("[project]")[0]
    assert "torch" not in build.split("requires =")[1].split("\n")[0]
    assert '"torch>=2.2,<2.16"' in text and 'requires-python = ">=3.10,<3.15"' in text


def test_the_unity_source_includes_every_cpp(tmp_path):
    csrc = tmp_path / "csrc"
    for rel in ("extension.cpp", "a/x.cpp", "a/cpu/y.cpp", "a/x.h"):
        (csrc / rel).parent.mkdir(parents=True, exist_ok=True)
        (csrc / rel).write_text("// x\n")
    unity = native.unity_source(csrc, tmp_path / "build")
    listed = [ln.split('"')[1] for ln in unity.read_text().splitlines() if ln.startswith("#")]
    assert listed == [str(csrc / r) for r in ("a/cpu/y.cpp", "a/x.cpp", "extension.cpp")]
    stamp = unity.stat().st_mtime_ns
    os.utime(unity, ns=(stamp - 10**9, stamp - 10**9))
    native.unity_source(csrc, tmp_path / "build")  # unchanged: not rewritten (no rebuild)
    assert unity.stat().st_mtime_ns == stamp - 10**9
    (csrc / "b").mkdir()
    (csrc / "b" / "z.cpp").write_text("// new\n")  # a new file is picked up
    assert str(csrc / "b" / "z.cpp") in native.unity_source(csrc, tmp_path / "build").read_text()


def test_the_clone_layout_is_found():
    assert paths.CONFIGS == ROOT / "configs" and (paths.CONFIGS / "config.yaml").is_file()
    assert paths.CSRC == ROOT / "csrc" and native.csrc_dir() == ROOT / "csrc"
    assert all(p.suffix == ".cpp" for p in native.sources(native.csrc_dir()))


def test_user_config_dirs_must_exist(monkeypatch, tmp_path):
    monkeypatch.setenv(paths.USER_DIRS_ENV, str(tmp_path))
    assert paths.searchpath_overrides() == [f"hydra.searchpath=[file://{tmp_path}]"]
    monkeypatch.setenv(paths.USER_DIRS_ENV, str(tmp_path / "nope"))
    with pytest.raises(ValueError, match="not a folder"):
        paths.user_config_dirs()


@pytest.mark.slow
def test_the_wheel_ships_configs_sources_and_the_entry_point(tmp_path):
    """A pure-Python wheel (GNNSCALE_SKIP_NATIVE=1: no compile) holds every config and C++
    file, declares the console script and the ranges; it builds without downloading torch."""
    env = {**os.environ, "GNNSCALE_SKIP_NATIVE": "1"}
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", str(ROOT), "-w", str(tmp_path)],
                   check=True, env=env, timeout=600, capture_output=True)
    (wheel,) = tmp_path.glob("gnnscale-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    configs = {f"gnnscale/configs/{p.relative_to(ROOT / 'configs').as_posix()}"
               for p in (ROOT / "configs").rglob("*.yaml")}
    sources = {f"gnnscale/_csrc/{p.relative_to(ROOT / 'csrc').as_posix()}"
               for p in (ROOT / "csrc").rglob("*") if p.suffix in (".cpp", ".h")}
    assert configs <= names and sources <= names
    meta = zipfile.ZipFile(wheel).read("gnnscale-0.1.0.dist-info/METADATA").decode()
    assert "Requires-Dist: torch<2.16,>=2.2" in meta and "Requires-Python: <3.15,>=3.10" in meta
    entry = zipfile.ZipFile(wheel).read("gnnscale-0.1.0.dist-info/entry_points.txt").decode()
    assert "gnnscale-train = gnnscale.__main__:main" in entry


def test_a_failed_build_is_one_line_and_the_torch_only_ops_go_on(monkeypatch, capsys):
    def fail(**_):
        raise RuntimeError("error: command 'c++' failed: No such file or directory\nmore")

    monkeypatch.setattr(native, "build", fail)
    assert native.main(["build"]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("error: the native build failed (error: command")
    assert "torch-only ops" in err and "C++20 compiler" in err
