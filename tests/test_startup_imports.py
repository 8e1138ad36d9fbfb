"""Start-up cost: what a launch imports and composes (docs/benchmarks.md, "Start-up").

``import torch_geometric`` imports ``torch._dynamo`` (~1.5 s of CPU) that a run does not use:
gnnscale defers its body to its first use (gnnscale/lazy.py), the tracer records the user's
lines without torch's recorder (which imports dynamo, inductor and export), and a single run's
config is composed once. Each check runs in a fresh interpreter, as a launch does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _py(code: str, **env: str) -> dict:
    """Run ``code`` in a fresh interpreter at the clone's root; it prints one JSON line."""
    import os

    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={**os.environ, **env})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


RAN = "'torch._dynamo.convert_frame' in sys.modules"  # the package body imports it


def test_pyg_the_rank_module_and_a_traced_refusal_leave_dynamos_body_unrun():
    """What a launch refusing a user's model and a rank import: PyG, the rank module, the
    tracer naming the line of the forward it cannot stage."""
    got = _py("import sys, json, gnnscale.lazy\n"
              "gnnscale.lazy.defer_heavy_imports()  # as gnnscale's commands do, first\n"
              "import torch_geometric, gnnscale.runner.worker\n"
              "from examples.models import MeanPooled, SAGEJK\n"
              "from gnnscale.models.contract import describe\n"
              "ok, bad = describe(SAGEJK(8, 4)), describe(MeanPooled(8, 4))\n"
              f"print(json.dumps([ok.traced, bad.why_not_layer_wise, {RAN},"
              " 'torch._inductor' in sys.modules, type(sys.modules['torch._dynamo']).__name__]))")
    assert got[0] is True
    assert "models.py:" in got[1] and "global_mean_pool" in got[1], got[1]
    assert got[2:] == [False, False, "_Deferred"]


def test_importing_gnnscale_leaves_the_import_system_as_it_was():
    """A library imported into a user's process defers nothing: only gnnscale's own commands
    (train.py, python -m gnnscale, gnnscale.predict, gnnscale.embed) do."""
    got = _py("import sys, json, gnnscale, gnnscale.api, torch_geometric\n"
              f"print(json.dumps([{RAN}, type(sys.modules['torch._dynamo']).__name__,"
              " [type(f).__name__ for f in sys.meta_path]]))")
    assert got[0] is True and got[1] == "module" and "_Defer" not in got[2], got


def test_the_fork_server_runs_dynamos_body_once_for_its_ranks():
    """DDP reads torch._dynamo when built: the rank fork server (which imports
    distributed/fork_server.py first, before torch) runs its body before it forks, not each
    rank after; the 1-rank launcher, which imports that module after torch, does not."""
    got = _py("import sys, json, gnnscale.distributed.fork_server, gnnscale.runner.worker\n"
              f"print(json.dumps([{RAN}, type(sys.modules['torch._dynamo']).__name__]))")
    assert got == [True, "module"]


def test_dynamo_works_when_used():
    """torch.compile, a submodule imported first (the package's body runs before it, one copy
    of it), a scan of sys.modules (inspect.getmodule) that must not run the body mid-import,
    and ``from torch._dynamo import *``."""
    got = _py(
        "import sys, json, inspect, gnnscale.lazy\n"
        "gnnscale.lazy.defer_heavy_imports()\n"
        "import torch, torch_geometric\n"
        "inspect.getmodule(torch.ones); import torch.distributed.tensor\n"
        f"before = {RAN}\n"
        "import torch._dynamo.utils as u\n"
        "pkg = sys.modules['torch._dynamo']\n"
        "one = u is pkg.utils is sys.modules['torch._dynamo.utils']\n"
        "from torch._dynamo import *  # noqa\n"
        "y = torch.compile(lambda a: a * 2 + 1, backend='eager')(torch.ones(3))\n"
        "print(json.dumps([before, one, type(pkg).__name__, callable(pkg.optimize),"
        " y.tolist(), u.__spec__.name]))")
    assert got == [False, True, "module", True, [3.0, 3.0, 3.0], "torch._dynamo.utils"]


def test_compose_once_only_for_a_plain_command_line():
    from gnnscale.runner.warm import compose_once

    for argv in (["-m", "seed=0,1"], ["--cfg", "job"], ["hydra.mode=MULTIRUN"],
                 ["+hydra.mode=RUN"], ["--config-dir", "mine"]):
        assert compose_once(argv) is False, argv  # returns before touching Hydra


def test_a_single_run_composes_its_config_once(tmp_path):
    """train.py composes a refused config once (Hydra's hydra.main would compose it twice) and
    still says what to fix in one line, status 2."""
    got = _py(
        "import json, runpy, sys\n"
        "from hydra._internal.hydra import Hydra\n"
        "calls, orig = [], Hydra.compose_config\n"
        "def counted(self, *a, **k):\n"
        "    calls.append(1)\n"
        "    return orig(self, *a, **k)\n"
        "Hydra.compose_config = counted\n"
        "sys.argv = ['train.py', 'partitioner=metis', 'partitioner.imbalance=0.9',"
        f" 'hydra.run.dir={tmp_path / 'run'}', 'data_root={tmp_path / 'data'}']\n"
        "try:\n"
        "    runpy.run_path('train.py', run_name='__main__')\n"
        "except SystemExit as e:\n"
        "    status = e.code\n"
        "print(json.dumps([len(calls), status]))",
        GNNSCALE_START_METHOD="spawn")
    assert got == [1, 2]


def test_torch_free_checks_come_before_a_custom_models_import(tmp_path):
    """A custom model and a wrong partitioner option: the partitioner's error, said before
    torch, PyG or the user's module is imported."""
    got = _py(
        "import json, sys\n"
        "from gnnscale.errors import ConfigError\n"
        "from gnnscale.runner.validate import check_config\n"
        "from tests._train import make_cfg\n"
        f"cfg = make_cfg(__import__('pathlib').Path({str(tmp_path)!r}), 'dataset=synthetic',"
        " 'model=custom', 'model.target=examples.models.MeanPooled', 'model.num_layers=1',"
        " 'sampler.fanouts=[5]', 'strategy=split', 'partitioner=metis',"
        " 'partitioner.imbalance=0.9')\n"
        "try:\n"
        "    check_config(cfg)\n"
        "    said = None\n"
        "except ConfigError as err:\n"
        "    said = str(err)\n"
        "print(json.dumps([said, 'torch' in sys.modules, 'examples.models' in sys.modules]))")
    assert "imbalance" in got[0], got[0]
    assert got[1:] == [False, False]
