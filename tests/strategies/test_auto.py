"""strategy=auto: composing candidates, the choice rule, and end to end on the tiny graph."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from gnnscale.errors import ConfigError
from gnnscale.strategies.auto.candidates import candidate_config
from gnnscale.strategies.auto.choice import choose, seconds_per_loss
from gnnscale.strategies.auto.strategy import check_auto
from gnnscale.tasks.link import LinkTask
from gnnscale.tasks.link.config import LinkTaskConfig
from tests._train import TINY, make_cfg

ROOT = Path(__file__).resolve().parents[2]
#: every candidate profiled (the default budget, a fifth of the run, skips some on the tiny
#: graph, whose runs take a second)
NO_BUDGET = "strategy.profile_share=null"


def counted_launches(monkeypatch, run, cfg) -> dict:
    """``run(cfg)``'s results with ``launches``: how many times it started ranks."""
    from gnnscale.distributed.local import Launcher

    launches = []
    real = Launcher.launch

    def launch(self, fn, *args):
        launches.append(fn.__name__)
        return real(self, fn, *args)

    monkeypatch.setattr(Launcher, "launch", launch)
    res = run(cfg)
    return {**res, "launches": len(launches)}


class UnrankableConfig(LinkTaskConfig):
    """A link task whose loss, say, depends on the batch: not rankable by ``strategy=auto``."""

    name = "unrankable"
    auto_rankable = False


class UnrankableTask(LinkTask):
    """Its task class (``declared_task`` reads ``schema``)."""

    schema = UnrankableConfig


def _row(name, epoch_time, drop, status="ran", projected=None):
    row = {"name": name, "status": status, "epoch_time": epoch_time,
           "loss_drop_per_epoch": drop}
    if projected is not None:
        row["projected_epoch_time"] = projected
    return row


def test_choice_rule_divides_epoch_time_by_loss_drop():
    rows = [_row("data", 2.0, 0.8),        # 2.5 s per unit of loss
            _row("split", 1.5, 0.5),       # 3.0
            _row("fullgraph", 0.2, 0.05),  # 4.0: fastest epoch, far less progress per epoch
            _row("factored", 0.1, 0.0),    # did not learn: never chosen
            {"name": "offload", "status": "refused", "reason": "no"}]
    name, why = choose(rows)
    assert name == "data"
    assert "runner-up split" in why and "1.20x" in why
    rows[2]["loss_drop_per_epoch"] = 0.1  # 2.0 s per unit of loss: now full-graph wins
    assert choose(rows)[0] == "fullgraph"
    assert seconds_per_loss(1.0, -0.1) == math.inf


def test_choice_rule_modelled_uses_the_projected_time():
    rows = [_row("data", 1.0, 1.0, projected=0.5), _row("split", 2.0, 1.0, projected=0.1)]
    assert choose(rows, "measured")[0] == "data"
    assert choose(rows, "modelled")[0] == "split"


def test_no_runnable_candidate_is_an_error():
    with pytest.raises(ConfigError, match="no candidate"):
        choose([{"name": "data", "status": "refused", "reason": "x"},
                _row("split", 1.0, -0.2)])


def test_candidates_keep_user_keys_and_get_their_best_settings(tmp_path):
    cfg = make_cfg(tmp_path, *TINY, "strategy=auto", "model.hidden=16",
                   "+strategy.options={offload: {chunks: 4}}")
    run_dir = tmp_path / "c"
    data = candidate_config(cfg, "data", run_dir, 2)
    assert data.strategy.batch_size == 128 and data.model.hidden == 16 and data.epochs == 2
    assert data.deps._target_.endswith("DepCache")
    assert data.cache._target_.endswith("PresamplePolicy") and data.cache.ratio == 0.1
    full = candidate_config(cfg, "fullgraph", run_dir, 2)
    assert full.deps._target_.endswith("Hybrid") and full.cache._target_.endswith("NoCache")
    assert "batch_size" not in full.strategy
    assert candidate_config(cfg, "offload", run_dir, 2).strategy.chunks == 4
    vertex_cut = make_cfg(tmp_path, *TINY, "strategy=auto", "partitioner=oec")
    assert candidate_config(vertex_cut, "fullgraph", run_dir, 1).deps._target_.endswith(
        "DepComm")
    given = make_cfg(tmp_path, *TINY, "strategy=auto", "deps=hybrid", "cache=degree")
    split = candidate_config(given, "split", run_dir, 1)  # the user's choices win
    assert split.deps._target_.endswith("Hybrid") and split.cache._target_.endswith("DegreePolicy")


def test_a_task_whose_loss_is_not_comparable_is_refused(tmp_path):
    """A task declaring ``auto_rankable = False`` (its loss means something else under each
    strategy) is refused, naming it; node and link are ranked."""
    from omegaconf import OmegaConf, open_dict

    from gnnscale.strategies.auto.config import AutoConfig

    cfg = make_cfg(tmp_path, *TINY, "strategy=auto", "task=link")
    AutoConfig.check_config(cfg, None)
    with open_dict(cfg):
        cfg.task = OmegaConf.create({"_target_": f"{__name__}.UnrankableTask"})
    with pytest.raises(ConfigError, match="task=unrankable declares not comparable"):
        AutoConfig.check_config(cfg, None)


@pytest.mark.parametrize(("override", "match"), [
    ("strategy.candidates=[data,nope]", "strategy.candidates"),
    ("strategy.candidates=[data,data]", "strategy.candidates"),
    ("strategy.criterion=modelled", "strategy.hardware"),
    ("strategy.profile_epochs=1", "profile_epochs must be >= 2"),
    ("strategy.rematch_rounds=-1", "rematch_rounds"),
    ("+strategy.options={split: {batch_size: 8}}", "not candidates"),
])
def test_bad_auto_settings_are_refused(tmp_path, override, match):
    extra = ("strategy.candidates=[data]",) if "options" in override else ()
    cfg = make_cfg(tmp_path, *TINY, "strategy=auto", *extra, override)
    with pytest.raises(ConfigError, match=match):
        check_auto(cfg)


def test_unknown_candidate_option_is_refused(tmp_path):
    cfg = make_cfg(tmp_path, *TINY, "strategy=auto", "+strategy.options={data: {nope: 1}}")
    with pytest.raises(ConfigError, match="strategy.options.data"):
        candidate_config(cfg, "data", tmp_path / "c", 1)


@pytest.mark.slow
def test_auto_profiles_every_candidate_and_trains_the_chosen_one(tmp_path, monkeypatch):
    from gnnscale.runner.run import run

    # partitioned cache placement: strategy=factored refuses it (it caches on trainers only)
    cfg = make_cfg(tmp_path, *TINY, "strategy=auto", "dist.world_size=2", "epochs=2",
                   "strategy.profile_epochs=2", "cache=presample", NO_BUDGET,
                   "strategy.profile_steps=2", "cache.placement=partitioned",
                   "strategy.rematch_rounds=0")
    res = counted_launches(monkeypatch, run, cfg)
    assert res["launches"] == 1  # every candidate and then the pick, in one launch
    run_dir = Path(cfg.run_dir)
    decision = json.loads((run_dir / "auto.json").read_text())
    rows = {r["name"]: r for r in decision["candidates"]}
    assert list(rows) == ["data", "factored", "fullgraph", "offload", "split"]  # the registry
    assert rows["factored"]["status"] == "refused"
    assert "placement" in rows["factored"]["reason"]
    ran = [r for r in rows.values() if r["status"] == "ran"]
    assert {r["name"] for r in ran} == {"data", "split", "fullgraph", "offload"}
    for r in ran:
        assert len(r["epoch_times"]) == 2 and r["epoch_time"] == r["epoch_times"][1]
        profiled = json.loads((run_dir / "auto" / r["name"] / "results.json").read_text())
        assert all("val_acc" not in h for h in profiled["history"])  # no evaluation
        # a sampling candidate's profiled epochs are its first strategy.profile_steps (2)
        assert r["window_steps"] == (1 if r["name"] in ("fullgraph", "offload") else 2)
        assert r["steps_per_epoch"] >= r["window_steps"]
    chosen = decision["chosen"]
    assert chosen == choose(decision["candidates"])[0]
    saved = json.loads((run_dir / "results.json").read_text())
    assert saved["auto"]["strategy"] == chosen and saved["auto"]["chosen_by"] == "auto"
    assert saved["config"]["strategy"]["_target_"].split(".")[-2] == chosen
    assert [h["epoch"] for h in saved["history"]] == [0, 1] == [h["epoch"] for h in
                                                                 res["history"]]


@pytest.mark.parametrize("candidates", ["[data,fullgraph]", "[data]"])
def test_the_pick_trains_in_the_profile_launch_equal_to_a_plain_run_of_it(tmp_path,
                                                                            monkeypatch,
                                                                            candidates):
    """The chosen candidate trains in the launch that profiled every candidate (one launch in
    all), from fresh parameters: its losses, metrics and trained parameters equal those of a
    plain run of the pick's config in a launch of its own, bit for bit (2 ranks, gloo)."""
    import torch
    from omegaconf import OmegaConf

    from gnnscale.runner.checkpoint import load_run
    from gnnscale.runner.run import run

    cfg = make_cfg(tmp_path, *TINY, "strategy=auto", "dist.world_size=2", "epochs=2",
                   "dist.threads_per_rank=1", "checkpoint=true", NO_BUDGET,
                   f"strategy.candidates={candidates}", "strategy.profile_epochs=2",
                   "strategy.rematch_rounds=0", run="auto")
    res = counted_launches(monkeypatch, run, cfg)
    assert res["launches"] == 1  # the profiles, the choice and the pick's run
    decision = json.loads((Path(cfg.run_dir) / "auto.json").read_text())
    assert {r["status"] for r in decision["candidates"]} == {"ran"}
    pick = decision["chosen"]
    assert res["auto"]["strategy"] == pick and res["settled"] is not None
    plain_cfg = OmegaConf.create({**res["config"], "run_dir": str(tmp_path / "plain")})
    assert plain_cfg.strategy._target_.split(".")[-2] == pick
    plain = counted_launches(monkeypatch, run, plain_cfg)
    assert plain["launches"] == 1
    keys = ("epoch", "train_loss", "val_acc", "test_acc", "val_loss")
    assert [[h.get(k) for k in keys] for h in res["history"]] == \
        [[h.get(k) for k in keys] for h in plain["history"]]
    assert len(res["history"]) == 2 and "val_acc" in res["history"][-1]
    ours = load_run(Path(cfg.run_dir) / "checkpoint.pt")["model"]
    theirs = load_run(tmp_path / "plain" / "checkpoint.pt")["model"]
    assert ours.keys() == theirs.keys()
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)


def test_close_leaders_are_those_within_the_margin_or_the_noise():
    from gnnscale.strategies.auto.choice import close_leaders, pooled, spread

    def row(name, times, drop):
        r = _row(name, sorted(times[1:])[len(times[1:]) // 2], drop)
        r.update(epoch_times=times, seconds_per_loss=seconds_per_loss(r["epoch_time"], drop))
        return r

    quiet = [row("data", [9.0, 1.0, 1.0, 1.0], 1.0), row("factored", [9.0, 1.2, 1.2, 1.2], 1.0),
             row("fullgraph", [1.0, 0.1, 0.1, 0.1], 0.01)]
    assert spread(quiet[0]) == 0.0  # the warm-up epoch is not noise
    assert close_leaders(quiet, 0.10) is None          # 20% apart, no noise: clear lead
    assert close_leaders(quiet, 0.25)[:2] == ("data", "factored")
    noisy = [row("data", [9.0, 0.8, 1.0, 1.2], 1.0), quiet[1]]  # spread 40% > the 20% gap
    a, b, why = close_leaders(noisy, 0.10)
    assert (a, b) == ("data", "factored") and "spread 40%" in why
    assert close_leaders([quiet[0]], 0.5) is None
    more = [dict(row("data", [5.0, 2.0, 2.0, 2.0], 0.5), run_dir="r1")]
    p = pooled(quiet[0], more)
    assert p["timed_epochs"] == [1.0, 1.0, 1.0, 2.0, 2.0, 2.0]
    assert p["epoch_time"] == 1.5 and p["loss_drop_per_epoch"] == 0.75
    assert p["seconds_per_loss"] == 2.0 and len(p["profile_runs"]) == 2


def test_a_cut_schedule_trains_the_first_steps_of_the_same_permutation():
    """``Schedule.max_steps`` (how auto profiles a sampling candidate) keeps each epoch's own
    permutation and stops after its first steps; unset, the whole epoch again."""
    import torch

    from gnnscale.sampling.schedule import Schedule

    sched = Schedule(torch.arange(100), batch_size=16, seed=3)
    whole = sched.batches(1)
    sched.max_steps = 2
    assert sched.num_steps(1) == 2 and len(list(sched.draws(1))) == 2
    assert all(torch.equal(a, b) for a, b in zip(sched.batches(1), whole[:2], strict=True))
    sched.max_steps = None
    assert sched.num_steps(1) == len(whole) == 7


def test_the_budget_stops_new_candidates_once_spent():
    """``profile_s`` caps the seconds; else ``profile_share`` of the whole run: profiling
    may take share / (1 - share) of the best candidate's projected training."""
    from gnnscale.strategies.auto.choice import over_budget

    assert over_budget(9.9, None, {"profile_s": 10}) is None
    assert "10.0 s of 10.0 s: strategy.profile_s=10" in over_budget(10.0, None,
                                                                       {"profile_s": 10})
    share = {"profile_s": None, "share": 0.2}
    assert over_budget(100.0, None, share) is None  # nothing projected yet: go on
    assert over_budget(2.4, 10.0, share) is None  # 0.25 x 10 s = 2.5 s
    assert "2.6 s of 2.5 s" in over_budget(2.6, 10.0, share)
    assert over_budget(1e9, 1.0, {"profile_s": None, "share": None}) is None


def test_a_spent_budget_skips_the_candidates_left(tmp_path, capfd):
    """Past ``strategy.profile_s`` no further candidate starts: the first profiled (a sampling
    one: they go first) is the pick, the others' rows say why they were skipped."""
    from gnnscale.runner.run import run

    cfg = make_cfg(tmp_path, *TINY, "strategy=auto", "dist.world_size=1", "epochs=1",
                   "strategy.profile_epochs=2", "strategy.candidates=[fullgraph,data]",
                   "strategy.profile_s=0.001", "strategy.profile_steps=2")
    res = run(cfg)
    decision = json.loads((Path(cfg.run_dir) / "auto.json").read_text())
    rows = {r["name"]: r for r in decision["candidates"]}
    assert [r["name"] for r in decision["candidates"]] == ["fullgraph", "data"]
    assert rows["data"]["status"] == "ran" and rows["data"]["window_steps"] == 2
    assert rows["fullgraph"]["status"] == "skipped"
    assert "the profiling budget is spent" in rows["fullgraph"]["reason"]
    assert decision["chosen"] == res["auto"]["strategy"] == "data"
    assert decision["profile_seconds"] > 0 and res["auto"]["profile_seconds"] > 0
    out = capfd.readouterr().out
    assert "budget: at most 0.001 s of profiling (strategy.profile_s)" in out
    assert "[auto] fullgraph: skipped: the profiling budget is spent" in out


def test_a_spent_budget_ends_the_first_profile_once_the_loss_decreases(tmp_path, capfd):
    """The first candidate profiled stops at the end of the first epoch that shows a loss
    decrease once the budget is spent: no other candidate will start, so its later epochs
    would rank it against nothing; it is the pick."""
    from gnnscale.runner.run import run

    cfg = make_cfg(tmp_path, *TINY, "strategy=auto", "dist.world_size=1", "epochs=1",
                   "strategy.profile_epochs=3", "strategy.candidates=[fullgraph,data]",
                   "strategy.profile_s=0.001")
    res = run(cfg)
    rows = {r["name"]: r for r in json.loads((Path(cfg.run_dir) / "auto.json").read_text())[
        "candidates"]}
    data = rows["data"]
    assert len(data["epoch_times"]) == 1 and data["losses"][0] < data["initial_loss"]
    assert "the profiling budget is spent" in data["ended_early"]
    assert rows["fullgraph"]["status"] == "skipped" and res["auto"]["strategy"] == "data"
    assert "[auto] data: profiled 1 epoch(s)" in capfd.readouterr().out


def test_a_crashing_candidate_is_skipped_and_the_launch_goes_on(tmp_path, monkeypatch):
    """A candidate that crashes in a rank ends the profile launch: its row says crashed (the
    traceback in ``crash.txt``) and the ranks start again for the candidates after it."""
    from gnnscale.runner.run import run
    from gnnscale.strategies.fullgraph.strategy import FullGraph

    def broken(self):
        raise RuntimeError("planted crash")

    monkeypatch.setattr(FullGraph, "setup", broken)
    cfg = make_cfg(tmp_path, *TINY, "strategy=auto", "dist.world_size=1", "epochs=1",
                   "strategy.profile_epochs=2", "strategy.candidates=[fullgraph,offload,data]",
                   "strategy.rematch_rounds=0", NO_BUDGET)
    res = counted_launches(monkeypatch, run, cfg)
    rows = {r["name"]: r for r in json.loads((Path(cfg.run_dir) / "auto.json").read_text())[
        "candidates"]}
    assert rows["fullgraph"]["status"] == "crashed" and "planted crash" in rows["fullgraph"][
        "reason"]
    assert "planted crash" in (Path(cfg.run_dir) / "auto" / "fullgraph" / "crash.txt").read_text()
    assert rows["data"]["status"] == rows["offload"]["status"] == "ran"  # before and after it
    assert res["launches"] == 2  # data and fullgraph; offload and the pick
    assert res["auto"]["strategy"] in ("data", "offload")


def test_auto_rematches_close_leaders_in_alternating_order(tmp_path):
    from gnnscale.runner.run import run

    cfg = make_cfg(tmp_path, *TINY, "strategy=auto", "dist.world_size=1", "epochs=1",
                   "strategy.profile_epochs=2", "strategy.candidates=[data,fullgraph]",
                   "strategy.rematch_within=1000", "strategy.rematch_rounds=2", NO_BUDGET)
    run(cfg)
    run_dir = Path(cfg.run_dir)
    decision = json.loads((run_dir / "auto.json").read_text())
    m = decision["rematch"]
    assert sorted(m["between"]) == ["data", "fullgraph"] and m["rounds"] == 2
    a, b = m["between"]
    assert m["order"] == [a, b, b, a]
    for r in decision["candidates"]:
        assert len(r["profile_runs"]) == 3 and len(r["timed_epochs"]) == 3
        for k in (1, 2):
            assert (run_dir / "auto" / f"{r['name']}-rematch{k}" / "results.json").is_file()
    assert decision["chosen"] == choose(decision["candidates"])[0]
    assert "after a rematch" in decision["why"]


@pytest.mark.slow
def test_auto_is_one_value_of_a_hydra_sweep(tmp_path):
    cmd = [sys.executable, str(ROOT / "train.py"), "-m", "strategy=auto,data", *TINY,
           "dist.world_size=1", "epochs=1", "progress=false",
           f"data_root={tmp_path / 'data'}", f"hydra.sweep.dir={tmp_path / 'sweep'}"]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    auto_dir, data_dir = tmp_path / "sweep" / "0", tmp_path / "sweep" / "1"
    decision = json.loads((auto_dir / "auto.json").read_text())
    assert len(decision["candidates"]) == 5 and decision["chosen"]
    assert json.loads((auto_dir / "results.json").read_text())["auto"]["chosen_by"] == "auto"
    assert "auto" not in json.loads((data_dir / "results.json").read_text())


def test_initial_loss_is_measured_with_training_dropout(tmp_path):
    """The loss drop compares training losses (dropout on) with an initial loss measured the
    same way, not in eval mode, or small models with dropout never seem to learn."""
    import torch
    import torch.nn.functional as F

    from gnnscale import registry
    from gnnscale.evaluation.evaluate import layerwise_logits
    from gnnscale.runner.worker import build_task
    from gnnscale.strategies.auto.strategy import initial_loss

    cfg = make_cfg(tmp_path, *TINY, "strategy=auto", "model.dropout=0.8")
    task, graph = build_task(cfg)
    with_dropout = initial_loss(cfg, task, graph)
    assert initial_loss(cfg, task, graph) == with_dropout  # keyed: the same masks every time
    torch.manual_seed(cfg.seed)
    model = registry.build(cfg.model, in_channels=graph.num_features,
                           out_channels=graph.num_classes)
    model.bind_graph(graph)
    logits = layerwise_logits(model, graph, graph.train_idx, torch.device("cpu"))
    eval_mode = float(F.cross_entropy(logits, graph.y[graph.train_idx]))
    assert with_dropout != pytest.approx(eval_mode, rel=1e-3)


@pytest.mark.slow
def test_resume_trains_on_the_recorded_choice_without_profiling(tmp_path):
    from gnnscale.runner.run import run

    common = (*TINY, "strategy=auto", "strategy.candidates=[data,fullgraph]",
              "strategy.profile_epochs=2", "strategy.rematch_rounds=0", NO_BUDGET)
    first = run(make_cfg(tmp_path, *common, "epochs=1"))
    chosen = first["auto"]["strategy"]
    profiled = sorted(p.name for p in (tmp_path / "run" / "auto").iterdir())
    assert json.loads((tmp_path / "run" / "auto.json").read_text())["chosen"] == chosen
    again = run(make_cfg(tmp_path, *common, "epochs=2", "resume=true"))
    assert again["auto"] == {"strategy": chosen, "chosen_by": "auto", "resumed": True,
                             "decision": "auto.json"}
    assert [h["epoch"] for h in again["history"]] == [0, 1]
    assert again["history"][0] == first["history"][0]
    assert sorted(p.name for p in (tmp_path / "run" / "auto").iterdir()) == profiled


def test_link_initial_loss_is_the_link_loss_by_hand(tmp_path):
    """Under task=link the initial loss is the link task's own: the binary cross-entropy of
    the decoder (the ranks' initial head) over the training edges and the negatives epoch 0
    draws, from the initial embeddings in training mode (keyed dropout of epoch 0)."""
    import torch
    import torch.nn.functional as F

    from gnnscale import registry
    from gnnscale.evaluation.evaluate import layerwise_logits
    from gnnscale.runner.worker import build_task
    from gnnscale.strategies.auto.strategy import initial_loss

    cfg = make_cfg(tmp_path, *TINY, "task=link", "strategy=auto", "task.decoder=mlp",
                   "task.decoder_hidden=16", "task.num_negatives=2", "task.dim=16")
    task, graph = build_task(cfg)
    got = initial_loss(cfg, task, graph)
    torch.manual_seed(cfg.seed)  # as every rank: the model, then the task's head
    model = registry.build(cfg.model, in_channels=graph.num_features, out_channels=16)
    task.attach(model)
    model.bind_graph(graph)
    model.set_dropout_key(cfg.seed, 0)
    with torch.no_grad():
        z = layerwise_logits(model, graph, torch.arange(graph.num_nodes), torch.device("cpu"),
                             train_mode=True)
        items = task.train_items()
        src, dst, label = task.pairs(items, 0)
        assert src.numel() == 3 * items.numel() and int(label.sum()) == items.numel()
        by_hand = float(F.binary_cross_entropy_with_logits(task.head(z[src], z[dst]), label))
        assert got == pytest.approx(by_hand, rel=1e-5)
        some = items[::7]  # on a sample of the training edges too
        s, d, lab = task.pairs(some, 0)
        assert task.initial_loss(model, graph, some) == pytest.approx(
            float(F.binary_cross_entropy_with_logits(task.head(z[s], z[d]), lab)), rel=1e-5)


def _auto_link(tmp_path, world: int, *extra: str) -> tuple[dict, dict]:
    """``strategy=auto task=link`` on the tiny graph: the results and ``auto.json``."""
    from gnnscale.runner.run import run

    cfg = make_cfg(tmp_path, *TINY, "task=link", "strategy=auto", f"dist.world_size={world}",
                   "epochs=1", "strategy.profile_epochs=2", "strategy.rematch_rounds=0",
                   "strategy.batch_size=2048", "task.dim=16", NO_BUDGET, *extra)
    res = run(cfg)
    return res, json.loads((Path(cfg.run_dir) / "auto.json").read_text())


def _check_link_decision(res: dict, decision: dict, out: str) -> None:
    """Ranked by link's loss, from an initial loss equal to a full-graph epoch 0's (the
    initial parameters on every training edge); the choice said and trained."""
    assert decision["task"] == "link" and "binary cross-entropy" in decision["loss"]
    rows = {r["name"]: r for r in decision["candidates"]}
    assert decision["initial_loss"] == pytest.approx(rows["fullgraph"]["losses"][0], rel=1e-4)
    for r in rows.values():
        assert r["status"] == "ran" and "val_auc" not in r  # profiled without evaluation
        assert r["loss_drop_per_epoch"] == pytest.approx(
            (decision["initial_loss"] - r["losses"][-1]) / 2)
    chosen = decision["chosen"]
    assert chosen == choose(decision["candidates"])[0]
    line = next(ln for ln in out.splitlines() if ln.startswith("[auto] chose"))
    assert line == f"[auto] chose {decision['why']}"
    assert line.startswith(f"[auto] chose {chosen} for task=link: ")
    assert res["auto"]["strategy"] == chosen and res["auto"]["task"] == "link"
    assert res["config"]["strategy"]["_target_"].split(".")[-2] == chosen
    assert res["config"]["task"]["_target_"].endswith("LinkTask") and "val_auc" in \
        res["history"][-1]


def test_auto_ranks_link_prediction_by_its_loss(tmp_path, capfd):
    res, decision = _auto_link(tmp_path, 1, "strategy.candidates=[data,fullgraph]")
    assert [r["name"] for r in decision["candidates"]] == ["data", "fullgraph"]
    _check_link_decision(res, decision, capfd.readouterr().out)
    # rank 0 (here the launcher) keeps the profiles and the decision in the run's train.log
    _check_link_decision(res, decision, (tmp_path / "run" / "train.log").read_text())


@pytest.mark.parametrize("task", ["node", "link"])
def test_auto_trains_gcn_each_candidate_with_its_own_settled_options(tmp_path, task):
    """``model=gcn`` leaves ``gcn_norm`` to the strategy: each candidate's config settles it
    as its own run would (a sampler's blocks, the full graph's degrees), its initial loss is
    that model's, and the chosen run trains with it."""
    from gnnscale.runner.run import run

    link = ("task=link", "task.dim=16") if task == "link" else ()
    cfg = make_cfg(tmp_path, *TINY, "model=gcn", *link, "strategy=auto", "dist.world_size=1",
                   "epochs=1", "strategy.profile_epochs=2", "strategy.rematch_rounds=0",
                   "strategy.candidates=[data,fullgraph]", NO_BUDGET)
    assert cfg.model.gcn_norm == "auto"
    norms = {name: candidate_config(cfg, name, tmp_path / name, 1).model.gcn_norm
             for name in ("data", "fullgraph")}
    assert norms == {"data": "block", "fullgraph": "graph"}
    res = run(cfg)
    decision = json.loads((Path(cfg.run_dir) / "auto.json").read_text())
    rows = {r["name"]: r for r in decision["candidates"]}
    assert decision["task"] == task and {r["status"] for r in rows.values()} == {"ran"}
    for name, row in rows.items():
        ran = json.loads((Path(row["run_dir"]) / "results.json").read_text())
        assert ran["config"]["model"]["gcn_norm"] == norms[name]
        assert row["initial_loss"] == decision["initial_losses"][name]
        assert row["loss_drop_per_epoch"] == pytest.approx(
            (row["initial_loss"] - row["losses"][-1]) / 2)
    # the full-graph candidate's epoch 0 is its initial parameters on every training item
    assert rows["fullgraph"]["initial_loss"] == pytest.approx(rows["fullgraph"]["losses"][0],
                                                              rel=1e-4)
    assert res["config"]["model"]["gcn_norm"] == norms[decision["chosen"]]


@pytest.mark.slow
def test_auto_profiles_every_candidate_under_link_on_two_ranks(tmp_path, capfd):
    res, decision = _auto_link(tmp_path, 2)
    assert [r["name"] for r in decision["candidates"]] == ["data", "factored", "fullgraph",
                                                           "offload", "split"]
    # rank 0 says the decision, and keeps it in train.log (its standard output is the fork
    # server's, not this test's)
    _check_link_decision(res, decision, (tmp_path / "run" / "train.log").read_text())


def test_typed_linear_maps_count_each_types_relations():
    """R-GCN's update per destination: its type's relations plus the root weight; averaged
    over the node types by node count."""
    from gnnscale.cost.volumes import typed_linear_maps

    graph = {"node_types": {"a": 10, "b": 30},
             "edge_type_list": [["a", "r", "b"], ["b", "s", "b"], ["b", "t", "a"]]}
    rgcn = {"_target_": "gnnscale.models.rgcn.RGCN"}
    assert typed_linear_maps(graph, rgcn) == pytest.approx((10 * 2 + 30 * 3) / 40)
    assert typed_linear_maps(graph, {**rgcn, "root_weight": False}) == pytest.approx(70 / 40)


def test_auto_ranks_typed_candidates_by_the_cost_model_and_equals_the_pick(tmp_path):
    """On a typed graph auto profiles the strategies that train types, projects each with the
    typed volumes (hidden-wide layer 0, the featured types' encodings, embedding rows) and
    trains the pick, which equals that strategy run directly."""
    from gnnscale.compare.runs import load_run
    from gnnscale.cost.volumes import typed_linear_maps, volumes_of_run
    from gnnscale.runner.run import run

    typed = ("dataset=hetero_sim", "dataset.scale=0.0005", "model=rgcn", "model.hidden=16",
             "logger=none", "dist.world_size=1", "epochs=1", "eval_batch_size=512")
    cfg = make_cfg(tmp_path, *typed, "strategy=auto", "strategy.profile_epochs=2",
                   "strategy.candidates=[data,fullgraph]", "strategy.rematch_rounds=0",
                   "strategy.criterion=modelled", "strategy.hardware=gsplit_pcie", NO_BUDGET)
    res = run(cfg)
    decision = json.loads((Path(cfg.run_dir) / "auto.json").read_text())
    rows = {r["name"]: r for r in decision["candidates"]}
    assert all(r["status"] == "ran" and r["projected_epoch_time"] > 0 for r in rows.values())
    chosen = decision["chosen"]
    assert chosen == choose(decision["candidates"], "modelled")[0] == res["auto"]["strategy"]
    for name, r in rows.items():
        run_ = load_run(r["run_dir"])
        v = volumes_of_run(run_)
        assert [w[2:] for w in v.layers] == [(16, 16), (16, 16), (16, 10)]  # hidden-wide input
        assert v.layer_maps == [typed_linear_maps(run_.graph, run_.config["model"])] * 3
        assert v.embedding_bytes > 0 and [e[1:] for e in v.encode] == [(128, 16)]
        gathered = [h.get("bytes_host_to_rank.paper") for h in run_.history]
        if name == "fullgraph":  # reads no rows per epoch: encodes every row once a pass
            assert gathered == [None, None]
            assert v.encode[0][0] == run_.graph["node_types"]["paper"]
        else:  # the rows it gathered, 128 floats each, and those its cache served
            served = sum(h["requested"] for h in run_.history) / sum(
                h["misses"] for h in run_.history)
            assert served > 1  # cache=presample, data's preferred one
            assert v.encode[0][0] == pytest.approx(
                sum(gathered) / len(gathered) / (4 * 128) * served)
    direct = make_cfg(tmp_path, *typed, f"strategy={chosen}", f"deps={rows[chosen]['deps']}",
                      f"cache={rows[chosen]['cache']}", run="direct")
    alone = run(direct)
    assert [h["train_loss"] for h in res["history"]] == [h["train_loss"]
                                                         for h in alone["history"]]
    assert res["summary"]["final_val_acc"] == alone["summary"]["final_val_acc"]
