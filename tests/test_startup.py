"""Start-up: the launcher composes a config without torch; every schema sits in a torch-free
schema module (``<folder>/schemas.py``, or ``config.py`` of an option's subpackage)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

from gnnscale import registry

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "gnnscale"


def test_every_schema_is_registered_in_a_schema_module():
    """``register(...)`` only in ``schemas.py``/``config.py``: load_all imports nothing else."""
    misplaced = []
    for path in PKG.rglob("*.py"):
        if path.name == "registry.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(
                    node.func, "id", None)) == "register" and node.args and isinstance(
                    node.args[0], ast.Constant) and node.args[0].value in registry.GROUPS:
                if path.stem not in ("schemas", "config"):
                    misplaced.append(str(path.relative_to(ROOT)))
    assert not misplaced, misplaced


def test_schemas_load_without_torch():
    """Every schema an option's yaml extends is in the ConfigStore, with neither torch nor
    numpy imported."""
    code = ("import sys; from gnnscale import registry; registry.load_all(); "
            "from hydra.core.config_store import ConfigStore; "
            "repo = ConfigStore.instance().repo['schema']; "
            "print(' '.join(f'{g}/{n[:-5]}' for g, v in repo.items() if isinstance(v, dict) "
            "for n in v)); "
            "print(sorted(m for m in ('torch', 'numpy', 'torch_geometric') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, check=True).stdout.split("\n")
    stored = set(out[0].split())
    wanted = {m.group(1) for yaml in (ROOT / "configs").glob("*/*.yaml")
              if (m := re.search(r"/schema/(\w+/\w+)@", yaml.read_text()))}
    assert wanted and wanted <= stored, sorted(wanted - stored)
    assert out[1] == "[]", out
