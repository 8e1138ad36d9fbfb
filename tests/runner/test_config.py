"""Every option of every config group composes and builds; bad configs fail clearly."""

from pathlib import Path

import numpy as np
import pytest
import torch
from hydra.errors import ConfigCompositionException
from omegaconf.errors import ConfigKeyError, ValidationError

from gnnscale import registry
from gnnscale.distributed.launch import Topology
from gnnscale.runner.validate import ConfigError, check_config, check_data, settle_model
from gnnscale.runner.worker import build_context
from tests._tables import write_tables
from tests._train import CONFIGS, TINY, make_cfg

# configs/hardware holds the cost model's profiles (gnnscale.cost, tests/cost/test_cost.py), not a
# training config group.
OPTIONS = sorted((p.parent.name, p.stem) for p in CONFIGS.glob("*/*.yaml")
                 if p.parent.name != "hardware")
CPU = Topology(0, 1, 0, 1, torch.device("cpu"))


def test_every_group_has_options():
    groups = {g for g, _ in OPTIONS}
    assert set(registry.GROUPS) | {"experiment"} <= groups


@pytest.mark.parametrize("group,option", OPTIONS, ids=[f"{g}={o}" for g, o in OPTIONS])
def test_option_composes_and_builds(tmp_path: Path, group: str, option: str):
    if group in ("dataset", "experiment"):  # they choose their own data (and more)
        extra = []
        if option == "custom":
            np.savez(tmp_path / "g.npz", edge_index=np.array([[0, 1], [1, 0]]),
                     x=np.ones((2, 3), np.float32), y=np.array([0, 1]))
            extra = [f"dataset.path={tmp_path / 'g.npz'}"]
        if option == "saved":  # a processed folder (need not exist to compose and build)
            extra = [f"dataset.path={tmp_path / 'saved'}"]
        elif option == "tables":
            extra = [f"dataset.schema={write_tables(tmp_path / 'tables')}"]
        cfg = make_cfg(tmp_path, f"{group}={option}", *extra)
        if group == "experiment":
            check_config(cfg)
            return
    else:
        keep = [o for o in TINY if not o.startswith(f"{group}.")]
        if (group, option) == ("model", "custom"):  # a user's own module; hidden is its kwarg
            keep = [o for o in keep if not o.startswith("model.")]
            keep += ["model.target=tests._user_models.GraphConvNet"]
        if (group, option) == ("model", "to_hetero"):  # a user's model, for typed graphs
            keep += ["model.target=examples.models.SAGESkip"]
        if (group, option) == ("model", "gine"):  # edge_dim=auto is the dataset's: none here
            keep += ["model.edge_dim=4"]
        cfg = make_cfg(tmp_path, *keep, f"{group}={option}")
    node = cfg[group]
    if group == "model":
        settle_model(cfg)  # the launcher's: options left to the strategy (gcn_norm=auto)
        obj = registry.build(node, in_channels=8, out_channels=3)
        assert isinstance(obj, torch.nn.Module)
    elif group == "strategy" and option == "auto":  # the launcher composes its candidates
        from gnnscale.strategies.auto.candidates import candidate_config
        from gnnscale.strategies.auto.strategy import chosen_candidates

        names = chosen_candidates(cfg)
        assert names == ["data", "factored", "fullgraph", "offload", "split"]
        for name in names:
            cand = candidate_config(cfg, name, tmp_path / name, 1)
            obj = registry.build(cand.strategy, ctx=build_context(CPU, cand))
            assert type(obj).__module__ == f"gnnscale.strategies.{name}.strategy"
        return
    elif group == "strategy":
        ctx = build_context(CPU, cfg)
        obj = registry.build(node, ctx=ctx)
    else:
        obj = registry.build(node)
    assert obj is not None
    assert type(obj).__module__.startswith(f"{registry.GROUPS[group]}.")


def test_misspelt_key_fails_at_composition(tmp_path):
    with pytest.raises((ConfigCompositionException, ConfigKeyError, ValidationError)):
        make_cfg(tmp_path, "model.hiden=3")


def test_unknown_option_fails_at_composition(tmp_path):
    with pytest.raises(ConfigCompositionException, match="nope"):
        make_cfg(tmp_path, "dataset=nope")


def test_wrong_type_fails_at_composition(tmp_path):
    with pytest.raises((ConfigCompositionException, ValidationError)):
        make_cfg(tmp_path, "model.hidden=lots")


def test_fanouts_must_match_layers(tmp_path):
    """Decided by the config alone: no dataset is read."""
    cfg = make_cfg(tmp_path, *TINY, "sampler.fanouts=[5,5,5]")
    with pytest.raises(ConfigError, match="one fanout per layer"):
        check_config(cfg)
    assert not (tmp_path / "data").exists()


def test_eval_every_minus_one_trains_without_evaluating(tmp_path):
    """eval_every=-1: training only (no layer-wise inference over the whole graph, even after
    the last epoch); below -1 is refused by the config alone."""
    from gnnscale.runner.run import run

    with pytest.raises(ConfigError, match="eval_every must be >= -1"):
        check_config(make_cfg(tmp_path, *TINY, "eval_every=-2"))
    res = run(make_cfg(tmp_path, *TINY, "epochs=1", "eval_every=-1", "checkpoint=false"))
    assert [h["epoch"] for h in res["history"]] == [0]
    assert not any("val_acc" in h or "eval_time" in h for h in res["history"])
    assert res["summary"].get("final_val_acc") is None and res["history"][-1]["train_loss"] > 0


def test_world_larger_than_training_set(tmp_path):
    cfg = make_cfg(tmp_path, *TINY)
    graph = registry.build(cfg.dataset).load()
    cfg.dist.world_size = graph.train_idx.numel() + 1
    cfg.strategy.batch_size = cfg.dist.world_size
    with pytest.raises(ConfigError, match="at most"):
        check_data(cfg, graph)


def test_batch_smaller_than_world(tmp_path):
    cfg = make_cfg(tmp_path, *TINY, "strategy.batch_size=1", "dist.world_size=2")
    with pytest.raises(ConfigError, match="smaller than dist.world_size"):
        check_config(cfg)


def test_cache_auto_needs_cuda(tmp_path):
    """cache.auto sizes the cache from free GPU memory: on CPU it says what to set instead."""
    from gnnscale.strategies.data.strategy import DataParallel

    cfg = make_cfg(tmp_path, *TINY, "cache=degree", "cache.auto=true")
    ctx = build_context(CPU, cfg)
    strat = DataParallel(ctx)
    with pytest.raises(ValueError, match="cache.ratio or cache.bytes"):
        strat.setup()


@pytest.mark.parametrize("override", ["cache.placement=sideways", "optim=adagrad",
                                      "optim.lr=fast"])
def test_closed_choices_fail_at_composition(tmp_path, override):
    with pytest.raises((ConfigCompositionException, ValidationError)):
        make_cfg(tmp_path, *TINY, override)


def test_component_values_checked_before_spawning(tmp_path):
    cfg = make_cfg(tmp_path, *TINY, "optim.lr=-1")
    with pytest.raises(ConfigError, match="optim.lr must be > 0"):
        check_config(cfg)


@pytest.mark.slow
def test_sample_frequency_weights_from_train_py(tmp_path):
    """metis with vertex_weights=sample_frequency: split measures the frequencies and runs."""
    from gnnscale.runner.run import run

    res = run(make_cfg(tmp_path, *TINY, "strategy=split", "dist.world_size=2", "epochs=1",
                       "partitioner.vertex_weights=sample_frequency", "checkpoint=false"))
    assert res["history"][-1]["local_edge_ratio"] > 0.5


def test_empty_training_set_is_named_not_use_at_most_0_ranks(tmp_path, tiny_graph):
    """No "use at most 0 ranks": an empty training set says so, before any rank starts."""
    import dataclasses

    import torch

    empty = dataclasses.replace(tiny_graph, train_idx=torch.empty(0, dtype=torch.long))
    cfg = make_cfg(tmp_path, *TINY, "dist.world_size=2")
    with pytest.raises(ConfigError, match="training set of .* is empty") as err:
        check_data(cfg, empty)
    assert "at most 0" not in str(err.value)
