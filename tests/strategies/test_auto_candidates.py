"""strategy=auto's composed options (candidates.option_node): cached per process, composed
again once a yaml file on the search path is edited, added or removed."""

import os

import pytest

from gnnscale.errors import ConfigError
from gnnscale.strategies.auto import candidates as cands
from tests._train import TINY, make_cfg

MINE = "defaults:\n  - /schema/strategy/data@_here_\n  - _self_\nprefetch: {}\n"


@pytest.fixture
def user_path(tmp_path, monkeypatch):
    """A user's own config folder on the running app's search path, holding the strategy
    option ``mine`` (data-parallel, prefetch 64); counts the composes."""
    folder = tmp_path / "my_configs"
    (folder / "strategy").mkdir(parents=True)
    (folder / "strategy" / "mine.yaml").write_text(MINE.format(64))
    monkeypatch.setattr(cands, "running_searchpath",
                        lambda: [f"hydra.searchpath=[file://{folder}]"])
    composed = []
    real = cands.compose

    def counted(overrides, *a, **k):
        composed.append(list(overrides))
        return real(overrides, *a, **k)

    monkeypatch.setattr(cands, "compose", counted)
    monkeypatch.setattr(cands, "_COMPOSED", {})
    return folder / "strategy" / "mine.yaml", composed


def _edit(file, text):
    """Rewrite ``file``, its mtime moved on even on a coarse-clock file system."""
    before = file.stat().st_mtime_ns
    file.write_text(text)
    os.utime(file, ns=(before + 10**9, before + 10**9))


def test_an_edited_option_is_composed_again(user_path, tmp_path):
    file, composed = user_path
    assert cands.option_node("strategy", "mine").prefetch == 64
    assert cands.option_node("strategy", "mine").prefetch == 64
    assert len(composed) == 1  # unchanged files: the cached composition
    _edit(file, MINE.format(4096))
    assert cands.option_node("strategy", "mine").prefetch == 4096
    assert len(composed) == 2
    # what auto trains: the candidate's config from the edited file
    cfg = make_cfg(tmp_path, *TINY, "strategy=auto")
    assert "mine" in dict(cands.candidates(cfg))
    _edit(file, MINE.format(512))
    assert cands.candidate_config(cfg, "mine", tmp_path / "c", 2).strategy.prefetch == 512
    assert len([k for k in cands._COMPOSED if k[:2] == ("strategy", "mine")]) == 1


def test_a_removed_option_is_not_served_from_the_cache(user_path):
    file, _ = user_path
    assert cands.option_node("strategy", "mine").prefetch == 64
    file.unlink()
    with pytest.raises(ConfigError, match="no option 'mine' in config group 'strategy'"):
        cands.option_node("strategy", "mine")


def test_identity_covers_the_package_and_user_folders(user_path):
    file, _ = user_path
    ident = cands.yaml_identity(cands.running_searchpath())
    files = {f for f, _, _ in ident}
    assert str(file) in files
    assert any(f.endswith(os.path.join("strategy", "data.yaml")) for f in files)
    assert cands.yaml_identity([]) == tuple(
        i for i in ident if not i[0].startswith(str(file.parent.parent)))
