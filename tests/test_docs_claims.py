"""The docs' claims a newcomer checked (issue 53, item 7), each kept true against the code: by
running the thing where that is cheap, by reading the declarations or the source otherwise."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gnnscale import api, registry
from gnnscale.errors import UserError
from gnnscale.strategies.config import declared

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
STRATEGIES = ("data", "split", "factored", "fullgraph", "offload")


def _flat(path: Path) -> str:
    """A page's text with its line breaks and repeated spaces folded (claims span lines)."""
    return re.sub(r"\s+", " ", path.read_text())


# -- components/models.md ---------------------------------------------------------------------
def test_every_strategy_gathers_edge_features_as_models_md_says():
    page = _flat(DOCS / "components" / "models.md")
    assert "Every strategy gathers them" in page
    assert "refuses such a model" not in page
    for name in STRATEGIES:
        assert declared(api.compose([f"strategy={name}"]).strategy).takes_edge_features, name


def test_the_shared_typed_adapter_is_the_one_models_md_names():
    """hsage, hgat, hgt and to_hetero (a user's model converted by PyG's to_hetero) run
    through ``models/hetero.py``'s adapter; R-GCN, R-GAT and Simple-HGN do not (each runs its
    own typed layers)."""
    from hydra.utils import get_object

    from gnnscale.models.hetero import HeteroGNN

    page = _flat(DOCS / "components" / "models.md")
    assert "`hsage`, `hgat` and `hgt` run PyG's heterogeneous convs on sampled blocks through " \
           "one adapter" in page
    assert "`model=to_hetero` (`gnnscale/models/to_hetero.py`) runs through the same adapter" \
        in page
    typed = ("rgcn", "rgat", "simplehgn", "hsage", "hgat", "hgt", "to_hetero")
    through = {name for name in typed
               if issubclass(get_object(api.compose([f"model={name}"]).model._target_),
                             HeteroGNN)}
    assert through == {"hsage", "hgat", "hgt", "to_hetero"}


# -- python-api.md ----------------------------------------------------------------------------
class MyNet:  # the class's module is this test module, which ranks can import
    """Stands for a user's nn.Module class (only its dotted path is composed here)."""


def test_a_model_class_is_taken_as_python_api_md_says():
    page = _flat(DOCS / "python-api.md")
    assert "a class is refused with a message saying so" not in page
    cfg = api.config(["dist.world_size=2"], model=MyNet)
    assert cfg.model.target == f"{__name__}.MyNet"
    assert cfg.model._target_ == registry.options("model", cfg.model)._target_
    MyNet.__module__ = "__main__"  # as a class defined in a script
    try:
        with pytest.raises(UserError, match="defined in __main__"):
            api.config(["dist.world_size=2"], model=MyNet)
    finally:
        MyNet.__module__ = __name__


# -- README -----------------------------------------------------------------------------------
def test_readme_says_every_strategy_ran_under_torchrun_as_the_host_tests_run_them():
    readme = _flat(ROOT / "README.md")
    assert "have not run under torchrun" not in readme
    assert "every strategy under torchrun" in readme
    plan = (ROOT / "tests" / "integration" / "test_hosts.py").read_text().split("PLAN = {")[1]
    for name in STRATEGIES:  # the two-host torchrun runs (integration/test_hosts.py) train each
        assert f'"strategy={name}"' in plan, name
    table = _flat(DOCS / "distributed.md").split("### What has run where")[1]
    for name in STRATEGIES:
        row = next(ln for ln in table.split(" | `")[1:] if ln.startswith(f"{name}`"))
        assert "| yes" in row, name


def test_readme_names_the_folder_cora_is_read_from(tmp_path, shared_datasets):
    """The README's folder for Cora's raw files, under a data root, is where it is read from
    (``dataset=cora``: ``<data_root>/planetoid/Cora/raw``, the first folder searched)."""
    from gnnscale.data.planetoid import PlanetoidDataset

    readme = (ROOT / "README.md").read_text()
    assert "`data/planetoid/Cora/raw/`" in readme
    shared_datasets("planetoid")  # <tmp_path>/planetoid/Cora/raw, tmp_path the data root
    graph = PlanetoidDataset(root=str(tmp_path), name="Cora").process()
    assert graph.meta["source"] == str(tmp_path / "planetoid" / "Cora" / "raw")
    assert graph.num_nodes == 2708


# -- tasks/link.md and typed-graphs.md --------------------------------------------------------
TYPED_LINK = ("dataset=hetero_sim", "dataset.scale=0.0005", "model=rgcn", "model.hidden=16",
              "model.num_layers=2", "task=link", "task.edge_type=writes", "logger=none",
              "dist.world_size=2", "epochs=2", "checkpoint=false", "eval_batch_size=512")


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["split", "fullgraph", "offload"])
def test_typed_link_prediction_trains_outside_data_and_factored(tmp_path, strategy):
    """tasks/link.md and typed-graphs.md: typed link prediction is not refused outside
    ``data``/``factored``; it trains on two ranks and scores the held-out edges."""
    import math

    from gnnscale.runner.run import run
    from tests._train import make_cfg

    for page in (DOCS / "tasks" / "link.md", DOCS / "typed-graphs.md"):
        text = _flat(page)
        assert "trains under every strategy" in text or "trains it under every strategy" in \
            text, page
        assert "the other strategies refuse typed graphs" not in text, page
    extra = ("strategy.chunks=2",) if strategy == "offload" else ()
    res = run(make_cfg(tmp_path, *TYPED_LINK, f"strategy={strategy}", *extra))
    losses = [h["train_loss"] for h in res["history"]]
    assert len(losses) == 2 and all(math.isfinite(x) for x in losses)
    assert 0.0 <= res["summary"]["final_val_auc"] <= 1.0
