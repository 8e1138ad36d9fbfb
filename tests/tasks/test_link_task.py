"""task=link's parts: metrics against numpy references of OGB's semantics, the native negative
sampler, the edge split (leaks, message graph, storage), the decoders and the loss."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from gnnscale.data.graph import GraphStore
from gnnscale.errors import ConfigError
from gnnscale.ops.sampling import negative_sample
from gnnscale.tasks.link import LinkTask, metrics
from gnnscale.tasks.link.edge_split import SplitOptions, is_undirected, load_split, split_graph
from gnnscale.tasks.link.negatives import draw, sorted_csc
from gnnscale.tasks.link.pairs import RowLocator, pair_rows


# -- references of OGB's / scikit-learn's semantics, in plain numpy --------------------------
def ref_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    pos, neg = scores[labels == 1], scores[labels == 0]
    wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return wins / (len(pos) * len(neg))


def ref_ap(scores: np.ndarray, labels: np.ndarray) -> float:
    total, ap, prev_recall = labels.sum(), 0.0, 0.0
    for t in sorted(set(scores.tolist()), reverse=True):
        picked = scores >= t
        tp = (labels[picked] == 1).sum()
        precision, recall = tp / picked.sum(), tp / total
        ap += (recall - prev_recall) * precision
        prev_recall = recall
    return ap


def ref_hits(pos: np.ndarray, neg: np.ndarray, k: int) -> float:
    if len(neg) < k:
        return 1.0
    kth = np.sort(neg)[::-1][k - 1]
    return float((pos > kth).mean())


def ref_mrr(pos: np.ndarray, neg: np.ndarray) -> float:
    ranks = []
    for p, row in zip(pos, neg):
        optimistic, pessimistic = (row > p).sum(), (row >= p).sum()
        ranks.append(0.5 * (optimistic + pessimistic) + 1)
    return float(np.mean(1.0 / np.array(ranks)))


@pytest.mark.parametrize("seed", range(4))
def test_metrics_match_references_with_ties(seed):
    rng = np.random.default_rng(seed)
    pos = rng.integers(0, 6, 30).astype(float)  # few distinct values: many ties
    neg = rng.integers(0, 5, (30, 4)).astype(float)
    scores = np.concatenate([pos, neg.reshape(-1)])
    labels = np.concatenate([np.ones(30), np.zeros(120)])
    t = lambda a: torch.from_numpy(np.asarray(a))  # noqa: E731
    assert metrics.roc_auc(t(scores), t(labels)) == pytest.approx(ref_auc(scores, labels))
    assert metrics.average_precision(t(scores), t(labels)) == pytest.approx(ref_ap(scores, labels))
    for k in (1, 5, 20, 200):
        assert metrics.hits_at_k(t(pos), t(neg.reshape(-1)), k) == pytest.approx(
            ref_hits(pos, neg.reshape(-1), k))
    assert metrics.mrr(t(pos), t(neg)) == pytest.approx(ref_mrr(pos, neg))


def test_metrics_extremes():
    one = torch.ones(3)
    assert metrics.average_precision(torch.tensor([3.0, 2.0, 1.0]),
                                     torch.tensor([1, 1, 0])) == pytest.approx(1.0)
    assert metrics.mrr(torch.tensor([5.0]), torch.tensor([[1.0, 2.0]])) == 1.0
    assert metrics.mrr(torch.tensor([1.0]), torch.tensor([[1.0, 1.0]])) == pytest.approx(0.5)
    assert metrics.hits_at_k(one, one, 1) == 0.0  # strictly above the K-th negative


# -- the negative sampler ---------------------------------------------------------------------
def test_negatives_are_keyed_not_batched():
    keys = torch.arange(100)
    s, d = negative_sample(50, keys, 3, seed=9)
    s2, d2 = negative_sample(50, keys[40:60], 3, seed=9)
    assert torch.equal(s[120:180], s2) and torch.equal(d[120:180], d2)
    s3, _ = negative_sample(50, keys, 3, seed=10)
    assert not torch.equal(s, s3)
    s4, d4 = negative_sample(50, keys, 3, seed=9, num_threads=1)
    assert torch.equal(s, s4) and torch.equal(d, d4)


def test_per_source_keeps_source_and_rejects_edges():
    g = GraphStore.from_edge_index(torch.randint(0, 30, (2, 300),
                                                 generator=torch.Generator().manual_seed(1)),
                                   30, symmetrize=True)
    indptr, indices = sorted_csc(g.indptr, g.indices)
    src = torch.randint(0, 30, (200,), generator=torch.Generator().manual_seed(2))
    s, d = draw(30, src, torch.arange(200), 2, "per_source", 5, indptr, indices)
    assert torch.equal(s, src.repeat_interleave(2))
    edges = set(map(tuple, g.edge_index().t().tolist()))
    assert not any((a, b) in edges or a == b for a, b in zip(s.tolist(), d.tolist()))


def test_uniform_negatives_cover_the_nodes():
    s, d = negative_sample(10, torch.arange(5000), 2, seed=0)
    counts = torch.bincount(torch.cat([s, d]), minlength=10).double()
    assert counts.min() > 0.8 * counts.mean() and counts.max() < 1.2 * counts.mean()


def test_negative_sampler_refuses_bad_input():
    with pytest.raises(RuntimeError, match="k"):
        negative_sample(10, torch.arange(3), 0, seed=0)
    with pytest.raises(RuntimeError, match="sources"):
        negative_sample(10, torch.arange(3), 1, seed=0, sources=torch.tensor([1, 2, 30]))


def test_sorted_csc_sorts_each_segment():
    indptr = torch.tensor([0, 3, 5])
    indices = torch.tensor([2, 0, 1, 1, 0])
    _, got = sorted_csc(indptr, indices)
    assert got.tolist() == [0, 1, 2, 0, 1]


# -- the edge split ---------------------------------------------------------------------------
def ring_graph(n: int = 60, extra: int = 120, seed: int = 0) -> GraphStore:
    g = torch.Generator().manual_seed(seed)
    ring = torch.stack([torch.arange(n), (torch.arange(n) + 1) % n])
    ei = torch.cat([ring, torch.randint(0, n, (2, extra), generator=g)], 1)
    return GraphStore.from_edge_index(ei, n, symmetrize=True, self_loops="remove",
                                      x=torch.randn(n, 5, generator=g),
                                      y=torch.randint(0, 3, (n,), generator=g), num_classes=3)


def keys(e: torch.Tensor, n: int) -> set:
    return set((e[0] * n + e[1]).tolist())


def test_random_split_keeps_pairs_together_and_nothing_leaks():
    g = ring_graph()
    n = g.num_nodes
    m = split_graph(g, SplitOptions(split="random", seed=3))
    L = m.links
    undirected_pairs = g.num_edges // 2
    assert L["val_pos"].shape[1] == int(0.05 * undirected_pairs)
    assert L["test_pos"].shape[1] == int(0.1 * undirected_pairs)
    assert sum(L[k].shape[1] for k in ("train_pos", "val_pos", "test_pos")) == undirected_pairs
    message = keys(m.edge_index(), n)
    for name in ("val_pos", "test_pos"):
        held = L[name]
        assert not (keys(held, n) | keys(held.flip(0), n)) & message  # both directions removed
        assert not keys(held, n) & keys(L["train_pos"], n)
    assert m.num_edges == g.num_edges - 2 * (L["val_pos"].shape[1] + L["test_pos"].shape[1])
    whole = keys(g.edge_index(), n)
    for name in ("val_neg", "test_neg"):  # stored negatives: never an edge, never a loop
        neg = L[name]
        assert neg.shape[1] == L[name.replace("neg", "pos")].shape[1]
        assert not keys(neg, n) & whole and bool((neg[0] != neg[1]).all())
    again = split_graph(g, SplitOptions(split="random", seed=3))
    assert all(torch.equal(L[k], again.links[k]) for k in L)
    other = split_graph(g, SplitOptions(split="random", seed=4))
    assert not torch.equal(L["val_pos"], other.links["val_pos"])
    assert is_undirected(m)


def test_given_split_refuses_a_leak_and_is_scored_as_given():
    g = ring_graph()
    train = torch.tensor([[0, 1, 2], [1, 2, 3]])
    val = torch.tensor([[3, 2], [4, 1]])  # (2, 1) is train's (1, 2) reversed: a leak
    g.links = {"train_pos": train, "val_pos": val, "test_pos": torch.tensor([[5], [6]])}
    with pytest.raises(ConfigError, match="val_pos holds 1 edges that are also training"):
        split_graph(g, SplitOptions(split="given"))
    g.links["val_pos"] = torch.tensor([[3], [4]])
    g.links["test_neg"] = torch.tensor([[5, 5], [20, 30]])
    m = split_graph(g, SplitOptions(split="auto", eval_negatives=2))
    assert torch.equal(m.links["train_pos"], train)
    assert torch.equal(m.links["test_neg"], g.links["test_neg"])
    assert m.meta["neg_groups"] == {"val": 2, "test": 2}  # (5 -> 20, 5 -> 30): test's own
    assert {(3, 4), (4, 3), (5, 6), (6, 5)}.isdisjoint(map(tuple, m.edge_index().t().tolist()))


def test_a_node_without_training_edges_is_fine():
    g = GraphStore.from_edge_index(torch.tensor([[0, 1, 2, 3], [1, 2, 3, 4]]), 6,
                                   symmetrize=True, x=torch.ones(6, 2))
    g.links = {"train_pos": torch.tensor([[0, 1], [1, 2]]), "val_pos": torch.tensor([[2], [3]]),
               "test_pos": torch.tensor([[3], [4]])}
    m = split_graph(g, SplitOptions())
    assert m.links["train_pos"].shape[1] == 2  # vertex 5 has no edge at all


def test_split_is_stored_once_and_verified(tmp_path):
    from gnnscale.data import processed

    g = ring_graph()
    processed.save(g, tmp_path / "ring" / "processed")
    loaded = processed.load(tmp_path / "ring" / "processed")
    opts = SplitOptions(split="random", seed=1)
    first = load_split(loaded, opts)
    folder = first.meta["processed_dir"]
    assert "ring-link-" in folder
    second = load_split(loaded, opts)
    assert second.meta["processed_dir"] == folder
    assert torch.equal(first.links["test_neg"], second.links["test_neg"])
    with open(f"{folder}/val_pos.npy", "r+b") as f:  # tamper with a stored split
        f.seek(-8, 2)
        f.write(b"\x07" * 8)
    with pytest.raises(processed.ProcessedDataError, match="val_pos.npy"):
        processed.load(folder)


def test_custom_npz_carries_a_published_split(tmp_path):
    from gnnscale.data.custom import CustomDataset

    g = ring_graph()
    ei = g.edge_index().numpy()
    np.savez(tmp_path / "g.npz", edge_index=ei, x=g.x.numpy(),
             train_pos=ei[:, :50], val_pos=np.array([[0], [30]]), val_neg=np.array([[0], [32]]),
             test_pos=np.array([[1], [33]]), test_neg=np.array([[1], [34]]))
    loaded = CustomDataset(root=str(tmp_path / "data"), path=str(tmp_path / "g.npz")).load()
    assert set(loaded.links) == {"train_pos", "val_pos", "val_neg", "test_pos", "test_neg"}
    task = LinkTask()
    m = task.prepare(loaded, str(tmp_path / "data"), seed=0)
    assert m.meta["link_split"] == "given"
    assert torch.equal(m.links["val_neg"], torch.tensor([[0], [32]]))  # (0, 31) is an edge
    np.savez(tmp_path / "bad.npz", edge_index=ei, x=g.x.numpy(), train_pos=ei[:1, :5])
    with pytest.raises(ConfigError, match=r"train_pos must have shape \[2, E\]"):
        CustomDataset(root=str(tmp_path / "data"), path=str(tmp_path / "bad.npz")).load()


def test_ogb_link_layout_is_read(tmp_path):
    import gzip

    from gnnscale.data.ogbl import OgbLinkDataset

    raw = tmp_path / "ogbl_citation2" / "raw"
    split = tmp_path / "ogbl_citation2" / "split" / "time"
    raw.mkdir(parents=True)
    split.mkdir(parents=True)
    edges = np.array([[0, 1], [1, 2], [2, 3], [3, 4], [4, 0]])
    for name, rows in (("edge.csv.gz", edges), ("num-node-list.csv.gz", [[6]]),
                       ("node-feat.csv.gz", np.ones((6, 3)))):
        with gzip.open(raw / name, "wt") as f:
            f.write("\n".join(",".join(str(v) for v in r) for r in rows) + "\n")
    torch.save({"source_node": torch.tensor([0, 1]), "target_node": torch.tensor([1, 2])},
               split / "train.pt")
    for name, s, t in (("valid.pt", 2, 5), ("test.pt", 5, 3)):
        torch.save({"source_node": np.array([s]), "target_node": np.array([t]),
                    "target_node_neg": np.array([[0, 1, 4]])}, split / name)
    g = OgbLinkDataset(root=str(tmp_path), name="citation2").load()
    assert g.links["val_pos"].tolist() == [[2], [5]]
    assert g.links["test_neg"].tolist() == [[5, 5, 5], [0, 1, 4]]
    m = LinkTask().prepare(g, str(tmp_path), seed=0)
    assert m.meta["neg_groups"] == {"val": 3, "test": 3}
    assert (5, 3) not in set(map(tuple, m.edge_index().t().tolist()))


# -- the task: loss, pairs, decoders ----------------------------------------------------------
def test_link_loss_matches_a_direct_computation():
    g = ring_graph()
    task = LinkTask(num_negatives=2, decoder="mlp", dim=4, decoder_hidden=8)
    m = task.prepare(g, None, seed=0)
    torch.manual_seed(0)
    model = torch.nn.Module()
    task.attach(model)
    items = torch.tensor([3, 0, 7])
    seeds = task.seeds(items, epoch=1)
    rows = torch.randn(seeds.numel(), 4)
    got = task.loss(rows, task.target(items, 1))
    src, dst, label = task.pairs(items, 1)
    assert src.numel() == 9 and label.tolist() == [1, 1, 1] + [0] * 6
    assert torch.equal(src[:3], m.links["train_pos"][0, items])
    table = dict(zip(seeds.tolist(), rows))
    zu = torch.stack([table[v] for v in src.tolist()])
    zv = torch.stack([table[v] for v in dst.tolist()])
    want = F.binary_cross_entropy_with_logits(task.head(zu, zv), label)
    assert float(got.detach()) == pytest.approx(float(want.detach()), rel=1e-6)
    assert any(True for _ in model.parameters())  # the MLP decoder trains with the model


def test_pair_rows_on_one_rank():
    rows = torch.arange(12.0).reshape(6, 2)
    row_ids = torch.tensor([10, 2, 7, 4, 5, 1])
    zu, zv, mine = pair_rows(rows, RowLocator.build(row_ids), torch.tensor([2, 5]),
                             torch.tensor([1, 10]), 11)
    assert mine.tolist() == [0, 1]
    assert torch.equal(zu, rows[[1, 4]]) and torch.equal(zv, rows[[5, 0]])
    with pytest.raises(ValueError, match="endpoint 3"):
        pair_rows(rows, RowLocator.build(row_ids), torch.tensor([3]), torch.tensor([1]), 11)


# -- composition: the task group and its one-line refusals --------------------------------------
@pytest.mark.parametrize("override,message", [
    ("task.num_negatives=0", "at least one negative"),
    ("task.eval_negatives=0", "at least one negative"),
    ("task.val_fraction=0.95", "leaves no training edge"),
    ("task.test_fraction=0", "must lie in"),
    ("metric=acc", "not a metric of task=link"),
    ("task.hits_k=[0]", "K >= 1"),
])
def test_bad_link_configs_fail_before_anything_loads(tmp_path, override, message):
    from gnnscale.runner.validate import check_config
    from tests._train import TINY, make_cfg

    cfg = make_cfg(tmp_path, *TINY, "task=link", override)
    with pytest.raises(ConfigError, match=message):
        check_config(cfg)


def test_node_task_refuses_link_metrics(tmp_path):
    from gnnscale.runner.validate import check_config
    from tests._train import TINY, make_cfg

    with pytest.raises(ConfigError, match="not a metric of task=node"):
        check_config(make_cfg(tmp_path, *TINY, "metric=mrr"))


def test_link_needs_features(tmp_path):
    from gnnscale.runner.validate import validate
    from tests._train import TINY, make_cfg

    g = ring_graph()
    np.savez(tmp_path / "g.npz", edge_index=g.edge_index().numpy())
    keep = [o for o in TINY if not o.startswith("dataset")]
    cfg = make_cfg(tmp_path, *keep, "task=link", "dataset=custom",
                   f"dataset.path={tmp_path / 'g.npz'}", "dist.world_size=1")
    with pytest.raises(ConfigError, match="no node features"):
        validate(cfg)


def test_self_pairs_are_training_positives():
    task = LinkTask(self_pairs=True)
    g = task.prepare(ring_graph(), None, seed=0)
    edges = g.links["train_pos"].shape[1]
    assert task.train_items().numel() == edges + g.num_nodes
    src, dst, label = task.pairs(torch.tensor([edges, edges + 5]), 0)
    assert src[:2].tolist() == dst[:2].tolist() == [0, 5] and label[:2].tolist() == [1, 1]
