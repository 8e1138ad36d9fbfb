"""The accuracy figure: summary groups matched to the published figures, one PNG drawn."""


from scripts import plots


def _row(group: str, mean: float, std: float = 0.5, seeds: int = 5) -> dict:
    return {"group": group, "metric": "acc", "mean": mean, "std": std, "seeds": seeds, "runs": []}


def test_accuracy_points_are_differences_from_the_published_figure(tmp_path):
    rows = [
        _row("Cora (row-normalised features) / GCN / DataParallel / 1 ranks", 81.9),
        _row("Cora (row-normalised features) / GCN / SplitParallel / 2 ranks", 82.0, seeds=3),
        _row("photo (split per seed) (largest component) / GCN, select=loss / DataParallel / "
             "2 ranks", 90.2),
        _row("photo (largest component) / GCN, select=loss / DataParallel / 1 ranks", 90.6),
        _row("photo / GCN / DataParallel / 1 ranks", 90.16),  # earlier protocols: not drawn
    ]
    points = plots.accuracy_points(rows)
    assert set(points) == {"Cora", "Photo"}
    diff, std, seeds = points["Cora"]["2 ranks split"]
    assert abs(diff - 0.5) < 1e-9 and std == 0.5 and seeds == 3
    assert abs(points["Cora"]["1 rank data"][0] - 0.4) < 1e-9
    assert abs(points["Photo"]["2 ranks data"][0] + 1.0) < 1e-9
    plots.accuracy(rows, tmp_path)
    assert (tmp_path / "accuracy.png").stat().st_size > 1000
