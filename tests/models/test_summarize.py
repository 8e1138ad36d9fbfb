"""scripts/summarize.py: groups runs that differ only in seed, labels them, merges tables."""

import json
from pathlib import Path

import pytest

from scripts import summarize


def _run(root: Path, name: str, seed: int, value: float | None, residual: bool = False,
         history: list[dict] | None = None, **extra) -> None:
    d = root / name
    d.mkdir(parents=True)
    cfg = {"seed": seed, "run_dir": str(d), "dataset": {"name": "tolokers"},
           "model": {"_target_": "gnnscale.models.gcn.GCN", "residual": residual},
           "strategy": {"_target_": "gnnscale.strategies.data.strategy.DataParallel"},
           "dist": {"world_size": 1}, **extra}
    (d / "results.json").write_text(json.dumps(
        {"config": cfg, "summary": {"metric": "rocauc", "test_at_best_val": value},
         "history": history or []}))


def test_groups_labels_and_unfinished_runs(tmp_path, capsys):
    _run(tmp_path, "a0", 0, 0.80)
    _run(tmp_path, "a1", 1, 0.82)
    _run(tmp_path, "r0", 0, 0.83, residual=True)
    _run(tmp_path, "r1", 1, None, residual=True)  # unfinished: left out, seeds stay aligned
    _run(tmp_path, "r2", 2, 0.85, residual=True)
    out = tmp_path / "acc.json"
    assert summarize.main([str(tmp_path), "--out", str(out)]) == 0
    rows = {r["group"]: r for r in json.loads(out.read_text())}
    plain = rows["tolokers / GCN / DataParallel / 1 ranks"]
    assert plain["mean"] == pytest.approx(81.0) and plain["seeds"] == 2
    res = rows["tolokers / GCN (residual) / DataParallel / 1 ranks"]
    assert [(r["seed"], r["value"]) for r in res["runs"]] == [(0, 83.0), (2, 85.0)]
    assert "84.00 +- 1.41" in capsys.readouterr().out


def test_merge_replaces_only_the_groups_measured_again(tmp_path):
    out = tmp_path / "acc.json"
    out.write_text(json.dumps([{"group": "kept", "mean": 1.0},
                               {"group": "tolokers / GCN / DataParallel / 1 ranks", "mean": 0}]))
    _run(tmp_path / "runs", "a0", 0, 0.80)
    summarize.main([str(tmp_path / "runs"), "--out", str(out), "--merge"])
    rows = {r["group"]: r for r in json.loads(out.read_text())}
    assert rows["kept"]["mean"] == 1.0
    assert rows["tolokers / GCN / DataParallel / 1 ranks"]["mean"] == pytest.approx(80.0)


def test_tail_averages_the_last_evaluated_epochs(tmp_path, capsys):
    hist = [{"epoch": 0, "test_rocauc": 0.5}, {"epoch": 1},  # epoch 1 not evaluated
            {"epoch": 2, "test_rocauc": 0.7}, {"epoch": 3, "test_rocauc": 0.9}]
    _run(tmp_path, "a0", 0, 0.80, history=hist)
    _run(tmp_path, "a1", 1, 0.82, history=hist[:3])
    out = tmp_path / "acc.json"
    assert summarize.main([str(tmp_path), "--out", str(out), "--tail", "2"]) == 0
    (row,) = json.loads(out.read_text())
    assert [r["tail"] for r in row["runs"]] == [pytest.approx(80.0), pytest.approx(60.0)]
    assert row["tail"]["epochs"] == 2 and row["tail"]["mean"] == pytest.approx(70.0)
    assert "70.00 +- 14.14" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        summarize.main([str(tmp_path), "--tail", "0"])


def test_protocols_are_their_own_groups(tmp_path):
    """Runs reported at another epoch (select) or on the largest component never pool."""
    _run(tmp_path, "m0", 0, 0.80)
    _run(tmp_path, "l0", 0, 0.90, select="loss")
    _run(tmp_path, "c0", 0, 0.70, select="loss", dataset={"name": "tolokers",
                                                          "largest_component": True})
    out = tmp_path / "acc.json"
    assert summarize.main([str(tmp_path), "--out", str(out)]) == 0
    groups = {r["group"]: r["mean"] for r in json.loads(out.read_text())}
    assert groups == {
        "tolokers / GCN / DataParallel / 1 ranks": pytest.approx(80.0),
        "tolokers / GCN, select=loss / DataParallel / 1 ranks": pytest.approx(90.0),
        "tolokers (largest component) / GCN, select=loss / DataParallel / 1 ranks":
            pytest.approx(70.0)}


def test_a_split_per_seed_pools_the_seeds(tmp_path):
    """``dataset.split_seed=${seed}`` resolves to each seed: those runs still form one group,
    apart from runs sharing one split (whose seed 0 also has split_seed 0)."""
    for seed, value in ((0, 0.80), (1, 0.84)):
        _run(tmp_path, f"s{seed}", seed, value, dataset={"name": "photo", "split_seed": seed})
        (tmp_path / f"s{seed}" / ".hydra").mkdir()
        (tmp_path / f"s{seed}" / ".hydra" / "config.yaml").write_text(
            "dataset:\n  split_seed: ${seed}\n")
    for seed, value in ((0, 0.70), (1, 0.74)):  # one split for every seed
        _run(tmp_path, f"f{seed}", seed, value, dataset={"name": "photo", "split_seed": 0})
    out = tmp_path / "acc.json"
    assert summarize.main([str(tmp_path), "--out", str(out)]) == 0
    rows = {r["group"]: r for r in json.loads(out.read_text())}
    per_seed = rows["photo (split per seed) / GCN / DataParallel / 1 ranks"]
    assert per_seed["seeds"] == 2 and per_seed["mean"] == pytest.approx(82.0)
    assert rows["photo / GCN / DataParallel / 1 ranks"]["mean"] == pytest.approx(72.0)


def test_runs_from_before_an_option_pool_with_its_default(tmp_path):
    """A results.json written before ``select``/``early_stop`` existed groups with new runs that
    leave them at their defaults; a run that sets one does not."""
    _run(tmp_path, "old0", 0, 0.80)
    _run(tmp_path, "new1", 1, 0.84, select="metric", early_stop={"rule": "none", "patience": 0})
    _run(tmp_path, "stop2", 2, 0.90, early_stop={"rule": "patience", "patience": 50})
    out = tmp_path / "acc.json"
    assert summarize.main([str(tmp_path), "--out", str(out)]) == 0
    rows = {r["group"]: r for r in json.loads(out.read_text())}
    assert len(rows) == 2
    (pooled,) = [r for r in rows.values() if r["seeds"] == 2]
    assert pooled["mean"] == pytest.approx(82.0)
    assert "early_stop.rule=patience" in [g for g, r in rows.items() if r["seeds"] == 1][0]


def test_groups_with_one_label_are_told_apart(tmp_path):
    _run(tmp_path, "a0", 0, 0.80, optim={"lr": 0.01})
    _run(tmp_path, "b0", 0, 0.70, optim={"lr": 0.001})
    out = tmp_path / "acc.json"
    assert summarize.main([str(tmp_path), "--out", str(out)]) == 0
    groups = {r["group"]: r["mean"] for r in json.loads(out.read_text())}
    base = "tolokers / GCN / DataParallel / 1 ranks"
    assert groups == {f"{base} [optim.lr=0.01]": pytest.approx(80.0),
                      f"{base} [optim.lr=0.001]": pytest.approx(70.0)}
