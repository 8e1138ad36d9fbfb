"""Tasks declare themselves torch-free (``tasks/<name>/config.py``): what they need of a dataset,
their checks, their metrics and how each reduces over ranks; the runner reduces a run's metrics
as its task and strategy declare, and no ``task_name`` string switch is left."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from gnnscale.data.metadata import DatasetMeta
from gnnscale.errors import ConfigError
from gnnscale.runner.metrics import declared_reductions, reduction, summary_columns
from gnnscale.schema import Reduce
from gnnscale.tasks.config import declared_task
from gnnscale.tasks.link.config import LinkTaskConfig
from gnnscale.tasks.node.config import NodeTaskConfig
from tests._train import TINY, make_cfg

ROOT = Path(__file__).resolve().parents[2]


def test_the_declarations_of_task_and_strategy_decide_each_reduction(tmp_path):
    """The same figure reduces as the run's strategy declares it (split: ``edge_skew`` the
    busiest rank's) or, undeclared (data), by its name; the link task's pair bytes are its
    own declaration; a declaration overrides the name rule (factored's summed ``*_time``)."""
    split = declared_reductions(make_cfg(tmp_path, *TINY, "task=link", "strategy=split"))
    data = declared_reductions(make_cfg(tmp_path, *TINY, "strategy=data"))
    factored = declared_reductions(make_cfg(tmp_path, *TINY, "strategy=factored"))
    assert reduction("edge_skew", split) == Reduce.max
    assert reduction("edge_skew", data) == Reduce.sum
    assert reduction("local_edge_ratio", split) == Reduce.mean
    assert split["bytes_pair_exchange"] == Reduce.sum and "bytes_pair_exchange" not in data
    assert reduction("sampler_busy_time", factored) == Reduce.sum
    assert reduction("sampler_busy_time", data) == Reduce.mean
    assert reduction("epoch_time", data) == Reduce.max == reduction("peak_memory", data)
    columns = summary_columns(make_cfg(tmp_path, *TINY, "task=link", "strategy=split"))
    assert "val_auc" in columns and "val_acc" not in columns and "edge_skew" in columns


def test_declared_task_is_found_from_the_config(tmp_path):
    assert declared_task(make_cfg(tmp_path, *TINY)) is NodeTaskConfig
    assert declared_task(make_cfg(tmp_path, *TINY, "task=link")) is LinkTaskConfig
    assert declared_task({}) is NodeTaskConfig  # a config without a task group
    assert LinkTaskConfig.derives_data and not NodeTaskConfig.derives_data
    assert LinkTaskConfig.auto_rankable and NodeTaskConfig.auto_rankable  # strategy=auto ranks both


def test_a_training_vertex_per_rank_only_where_each_rank_trains_its_own():
    """The node task refuses fewer training vertices than ranks when the strategy gives each
    rank items of its own (``items_per_rank``), and an empty training set always."""
    from gnnscale.strategies.data.config import DataParallelConfig
    from gnnscale.strategies.fullgraph.config import FullGraphConfig

    meta = DatasetMeta(name="g", num_nodes=10, num_edges=20, num_features=4, num_classes=2,
                       num_train=1, has_features=True, has_labels=True, has_train=True)
    assert DataParallelConfig.items_per_rank and not FullGraphConfig.items_per_rank
    cfg = {"dataset": {"name": "g"}}
    NodeTaskConfig.check_data(cfg, meta, ranks=1)
    with pytest.raises(ConfigError, match="use at most 1 ranks"):
        NodeTaskConfig.check_data(cfg, meta, ranks=2)
    with pytest.raises(ConfigError, match="lacks labels"):
        NodeTaskConfig.check_data(cfg, DatasetMeta(**{**meta.__dict__, "has_labels": False}))
    with pytest.raises(ConfigError, match="is empty"):
        NodeTaskConfig.check_data(cfg, DatasetMeta(**{**meta.__dict__, "num_train": 0}))
    LinkTaskConfig.check_data(cfg, DatasetMeta(**{**meta.__dict__, "has_labels": False}))
    with pytest.raises(ConfigError, match="link prediction needs features"):
        LinkTaskConfig.check_data(cfg, DatasetMeta(**{**meta.__dict__, "has_features": False}))


def test_declarations_are_read_without_torch():
    code = ("import sys; from omegaconf import OmegaConf; from gnnscale import registry; "
            "from gnnscale.tasks.config import declared_task; "
            "from gnnscale.strategies.config import declared; "
            "cfg = OmegaConf.create({'task': registry.option('task', 'link')}); "
            "d = declared_task(cfg); declared(registry.option('strategy', 'split')); "
            "assert d.name == 'link' and d.metric_reductions(), d; "
            "assert 'torch' not in sys.modules")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_no_module_switches_on_a_task_name_string():
    """Every decision asks the task's declarations: ``task_name`` is gone everywhere."""
    here = Path(__file__).resolve()
    found = [str(p.relative_to(ROOT)) for folder in ("gnnscale", "tests", "benchmarks", "scripts")
             for p in (ROOT / folder).rglob("*.py")
             if p != here and re.search(r"\btask_name\b", p.read_text())]
    found += [n for n in ("train.py",) if re.search(r"\btask_name\b", (ROOT / n).read_text())]
    assert not found, found
