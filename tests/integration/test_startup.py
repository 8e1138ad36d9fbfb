"""Start-up: the launcher composes and checks a config without torch. Every schema sits in a
torch-free schema module (``<folder>/schemas.py``, or ``config.py`` of an option's
subpackage), and what the launcher reads from it (processed folders, model facts, strategy
declarations) is what the implementations say."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gnnscale import registry
from gnnscale.data.metadata import DatasetMeta
from gnnscale.runner.validate import settle_model
from tests._tables import write_tables
from tests._train import TINY, make_cfg

ROOT = Path(__file__).resolve().parents[2]
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


@pytest.mark.slow
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


def dataset_options(tmp_path: Path) -> list[list[str]]:
    npz = tmp_path / "g.npz"
    np.savez(npz, edge_index=np.array([[0, 1], [1, 0]]), x=np.ones((2, 3), np.float32),
             y=np.array([0, 1]))
    options = [[f"dataset={p.stem}"] for p in sorted((ROOT / "configs" / "dataset").glob("*.yaml"))
               if p.stem not in ("custom", "saved", "tables")]
    return options + [["dataset=custom", f"dataset.path={npz}"],
                      ["dataset=saved", f"dataset.path={tmp_path / 'saved'}"],
                      ["dataset=tables", f"dataset.schema={write_tables(tmp_path / 'tables')}"],
                      ["dataset=synthetic", "dataset.preset=tiny", "dataset.scale=0.5",
                       "dataset.p_intra=0.7", "dataset.feature_norm=row"],
                      ["dataset=computers", "dataset.largest_component=true",
                       "dataset.split_seed=3"],
                      ["dataset=tolokers", "dataset.split=4"],
                      ["dataset=arxiv", "dataset.symmetrize=false"]]


def test_a_dataset_schema_names_its_loaders_processed_folder(tmp_path):
    """The launcher finds meta.json where the loader writes it, for every dataset option."""
    for overrides in dataset_options(tmp_path):
        cfg = make_cfg(tmp_path, *overrides)
        schema = registry.options("dataset", cfg.dataset)
        assert schema.processed_dir() == registry.build(cfg.dataset).processed_dir, overrides


def test_metadata_is_the_loaded_graphs(tmp_path):
    """meta.json read without torch says what the loaded graph says."""
    from gnnscale.runner.validate import dataset_meta

    cfg = make_cfg(tmp_path, *TINY)
    assert DatasetMeta.read(registry.options("dataset", cfg.dataset).processed_dir()) is None
    meta, graph = dataset_meta(cfg)  # processes it
    assert graph is not None and meta == DatasetMeta.of(graph)
    again, loaded = dataset_meta(cfg)  # read from meta.json
    assert loaded is None and again == meta
    assert meta.num_train == graph.train_idx.numel() > 0


MODELS = [["model=sage"], ["model=sage", "model.aggr=max"], ["model=sage", "model.residual=true",
          "model.norm=layer"], ["model=gcn"], ["model=gcn", "model.gcn_norm=graph"],
          ["model=gat", "model.hidden=32"], ["model=gin", "model.norm=batch"],
          ["model=sage", "model.aggr=sum", "model.num_layers=1"]]


@pytest.mark.parametrize("overrides", MODELS, ids=[" ".join(m) for m in MODELS])
def test_a_model_schema_answers_as_the_built_model(tmp_path, overrides):
    """What the launcher reads from the config (no model built) is what the model says."""
    cfg = make_cfg(tmp_path, *overrides, "model.hidden=32")
    settle_model(cfg)  # the launcher settles gcn_norm=auto for the strategy first
    schema = registry.options("model", cfg.model)
    model = registry.build(cfg.model, in_channels=12, out_channels=5)
    for key in ("splittable", "preaggregatable", "linear_aggregate", "batch_norm"):
        assert getattr(schema, key) == getattr(model, key), key
    assert schema.why_not_splittable() == model.why_not_splittable()
    assert schema.why_not_weighted() == type(model).why_not_weighted(model.options())
    assert schema.widths(12, 5) == model.widths(12)


def test_a_strategy_takes_its_declarations_from_its_schema():
    """One source: every declaration of each strategy class is its schema's, and the launcher
    finds the schema from the config's ``_target_``."""
    from hydra.utils import get_object

    from gnnscale.strategies.config import DECLARATIONS, declared

    for name, schema in registry.schemas("strategy").items():
        cls = get_object(schema._target_)
        assert cls.schema is schema and schema.name == name
        for key in DECLARATIONS:
            if not callable(getattr(cls, key)):  # DataParallel.samples is a method
                assert getattr(cls, key) == getattr(schema, key), (name, key)
        assert declared({"_target_": schema._target_}) is schema
