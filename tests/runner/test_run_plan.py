"""The checked run as one value (``RunPlan``), built once per launch, and the one builder of a
run's task, graph and model that every context goes through."""

from __future__ import annotations

import dataclasses
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf, open_dict

from gnnscale.distributed.launch import Topology
from gnnscale.errors import ConfigError
from gnnscale.runner import validate as validate_module
from gnnscale.runner.plan import RunPlan
from gnnscale.runner.validate import check_config, validate
from gnnscale.strategies import base
from gnnscale.strategies.config import declared
from gnnscale.tasks.base import HEAD
from gnnscale.tasks.config import declared_task
from tests._train import TINY, make_cfg

CPU = Topology(0, 1, 0, 1, torch.device("cpu"))
ROOT = Path(__file__).resolve().parents[2]
#: a full-graph strategy on the tiny graph (offload plans chunks in the launcher)
OFFLOAD = ("dataset=synthetic", "dataset.preset=tiny", "model.hidden=16", "model.num_layers=2",
           "strategy=offload", "deps=depcache", "sampler=full", "logger=none",
           "dist.world_size=2", "strategy.chunks=2")


def params(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A model's parameters by name, detached copies."""
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    """Whether two models hold the same parameters, bit for bit."""
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture
def built_models(monkeypatch) -> list[torch.nn.Module]:
    """Every model the one builder (``strategies.base.build_model``) builds from now on."""
    seen: list[torch.nn.Module] = []
    inner = base.build_model

    def recording(*args, **kwargs):
        model = inner(*args, **kwargs)
        seen.append(model)
        return model

    monkeypatch.setattr(base, "build_model", recording)
    return seen


def test_importing_the_plan_imports_no_torch():
    code = ("import sys, gnnscale.runner.plan, gnnscale.runner.validate; "
            "print(sorted(m for m in ('torch', 'torch_geometric') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]", out.stderr


def test_validate_returns_one_frozen_plan_that_pickles(tmp_path):
    cfg = make_cfg(tmp_path, *OFFLOAD[:4], "model=gcn", "strategy=fullgraph", "deps=depcache",
                   "sampler=full", "logger=none")
    settled = check_config(cfg.copy())
    plan = validate(cfg)
    assert isinstance(plan, RunPlan)
    assert plan.strategy is declared(cfg.strategy) and plan.task is declared_task(cfg)
    assert plan.strategy_options.name == "fullgraph" and plan.task_options.name == "node"
    assert dict(plan.settled) == settled and "model.gcn_norm" in plan.settled
    assert plan.config.model.gcn_norm == plan.settled["model.gcn_norm"]
    assert plan.meta is not None and plan.meta.num_nodes > 0 and plan.parts is None
    assert plan.checked.loaded is None  # the plan holds no graph
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.settled = {}  # type: ignore[misc]
    with open_dict(cfg):  # the launcher's own config changing later does not reach it
        cfg.seed = 7
    assert plan.config.seed == 0
    again = pickle.loads(pickle.dumps(plan))
    assert again.strategy is plan.strategy and again.task is plan.task
    assert again.meta == plan.meta and dict(again.settled) == dict(plan.settled)
    assert OmegaConf.to_container(again.config) == OmegaConf.to_container(plan.config)


def test_a_launch_plans_once_and_its_rank_builds_from_that_plan(tmp_path, monkeypatch,
                                                                built_models):
    """``declared``, ``declared_task`` and ``Checked.build`` are read while planning, once;
    the rank is handed that plan (it plans nothing itself) and builds its model from it."""
    from gnnscale.runner import worker
    from gnnscale.runner.run import run

    calls = {"check_plan": 0, "RunPlan.of": 0, "build_context": []}
    check_plan, of, build_context = validate_module.check_plan, RunPlan.of.__func__, \
        worker.build_context

    def counted_check_plan(cfg):
        calls["check_plan"] += 1
        return check_plan(cfg)

    def counted_of(cls, *args, **kwargs):
        calls["RunPlan.of"] += 1
        return of(cls, *args, **kwargs)

    def recorded_context(topo, cfg, phases=None, plan=None):
        calls["build_context"].append(plan)
        return build_context(topo, cfg, phases, plan)

    monkeypatch.setattr(validate_module, "check_plan", counted_check_plan)
    monkeypatch.setattr(RunPlan, "of", classmethod(counted_of))
    monkeypatch.setattr(worker, "build_context", recorded_context)
    cfg = make_cfg(tmp_path, *TINY, "epochs=1", "eval_every=-1", "dist.world_size=1")
    run(cfg)
    assert calls["check_plan"] == 1 and calls["RunPlan.of"] == 0
    [plan] = calls["build_context"]
    assert isinstance(plan, RunPlan) and plan.meta is not None
    assert len(built_models) == 1  # the rank's model, from the plan
    again = RunPlan.of(plan.config).build()  # the same seed: the same initial parameters
    first = torch.load(Path(cfg.run_dir) / "checkpoint.pt", weights_only=False)
    assert not same(params(again.model), first["model"])  # it trained
    assert same(params(again.model), params(RunPlan.of(plan.config).build().model))


def test_every_context_builds_the_same_model_through_the_one_builder(tmp_path, built_models):
    """The ranks (``build_context``), a finished run (``RunPlan.from_run``), embed's ranks and
    auto's initial losses build through ``strategies.base.build_model``: for a seed, the same
    initial parameters in each."""
    from gnnscale.runner import checkpoint
    from gnnscale.runner.embed import embed
    from gnnscale.runner.worker import build_context
    from gnnscale.strategies.auto.strategy import initial_loss

    cfg = make_cfg(tmp_path, *TINY, "task=link", "task.dim=16")
    plan = validate(cfg)
    ref = plan.build()
    assert HEAD in dict(ref.model.named_children())  # link: the decoder trains with it
    want = params(ref.model)
    ctx = build_context(CPU, plan.config, plan=plan)
    assert same(params(ctx.model), want)
    assert ctx.graph.num_edges == ref.graph.num_edges  # the message graph, prepared
    initial_loss(plan.config, ref.task, ref.graph)
    assert same(params(built_models[-1]), want)

    run_dir = Path(cfg.run_dir)  # a finished run of these initial parameters
    checkpoint.save(run_dir / checkpoint.FILENAME, {
        "model": want, "optimizer": {"state": {}, "param_groups": []}, "epoch": 0,
        "rng": [checkpoint.rng_state()], "history": [{"epoch": 0, "train_loss": 0.0,
                                                      "epoch_time": 0.0}],
        "config": plan.config_dict()})
    finished = RunPlan.from_run(run_dir)
    assert finished.strategy is plan.strategy and finished.run is not None
    before = len(built_models)
    graph, model, task = finished.load()
    assert len(built_models) == before + 1 and same(params(model), want)
    assert task.name == "link" and graph.num_edges == ref.graph.num_edges
    before = len(built_models)
    embed(str(run_dir), str(tmp_path / "z.npy"), progress=False)
    assert len(built_models) == before + 2  # the launcher's load, then its one rank's
    assert all(same(params(m), want) for m in built_models[before:])


def test_offloads_launcher_plan_builds_the_ranks_task_and_model(tmp_path, built_models):
    """``offload``'s launcher-side plan of every rank's chunks builds through the one builder:
    the task prepared (link: the message graph, as the ranks plan it) and its head attached;
    its budget figure is the ranks' own."""
    from gnnscale import registry
    from gnnscale.runner.validate import check_data
    from gnnscale.runner.worker import build_context

    cfg = make_cfg(tmp_path, *OFFLOAD, "task=link", "task.dim=16",
                   "strategy.device_budget_gb=1e-7")
    raw = registry.build(cfg.dataset).load()  # the dataset as loaded, not yet the task's
    with pytest.raises(ConfigError, match="at least") as err:
        check_data(cfg, raw)
    need = int(str(err.value).split("the transition buffer: ")[1].split(" bytes")[0])
    [model] = built_models
    assert HEAD in dict(model.named_children())
    with open_dict(cfg):
        cfg.strategy.device_budget_gb = None
    plan = RunPlan.of(cfg)
    assert same(params(model), params(plan.build().model))
    bounds = []
    for rank in range(2):
        topo = Topology(rank, 2, rank, 2, torch.device("cpu"))
        strat = registry.build(cfg.strategy, ctx=build_context(topo, cfg, plan=plan))
        strat.plan()
        bounds.append(strat.bound)
    assert need == max(bounds)


def test_one_compose_and_one_entry_in_the_package():
    """Hydra's compose is called by ``gnnscale/compose.py`` alone (the API, the partition
    command line, a sweep's check and auto's candidates call it), and ``train.py`` runs the
    package's one entry, ``gnnscale/__main__.py``'s ``main``."""
    import ast

    composing = {"compose", "initialize_config_dir", "initialize", "initialize_config_module"}
    callers = []
    for path in sorted((ROOT / "gnnscale").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "hydra" and \
                    composing & {a.name for a in node.names}:
                callers.append(str(path.relative_to(ROOT)))
    assert set(callers) == {"gnnscale/compose.py"}
    train = ast.parse((ROOT / "train.py").read_text())
    defined = [n.name for n in ast.walk(train) if isinstance(n, ast.FunctionDef)]
    imported = [(n.module, a.name) for n in ast.walk(train) if isinstance(n, ast.ImportFrom)
                for a in n.names]
    assert defined == [] and imported == [("gnnscale.__main__", "main")]
