"""task=link on one edge type of a typed graph: the split keeps every type and the edge
features and holds out the target type's val/test edges and their reverses; negatives are
drawn in the edge type's node types; bad edge types are refused in one line; R-GCN under
strategy=data on one and two ranks and under factored equals one process; under split, fullgraph
and offload R-GCN, R-GAT (typed edge features) and a user's SAGE converted by PyG's to_hetero on
one, two and four ranks equal one process (split: the whole mini-batch; fullgraph and offload:
the whole message graph, keyed dropout on)."""

import pytest
import torch

from gnnscale.data import graph as graph_module
from gnnscale.data import processed
from gnnscale.data.graph import GraphStore
from gnnscale.distributed import spawn
from gnnscale.distributed.topology import Topology
from gnnscale.errors import ConfigError
from gnnscale.tasks.link import LinkTask, edge_types
from gnnscale.tasks.link.edge_split import type_edges
from tests import _typed_link_fns as T

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny graphs: see conftest

CPU = Topology(0, 1, 0, 1, torch.device("cpu"))
TOL = dict(rtol=1e-4, atol=1e-6)


def _keys(g: GraphStore) -> torch.Tensor:
    """``(type, src, dst)`` of every edge as one int64, CSC order."""
    n = g.num_nodes
    src, dst = g.edge_index()
    t = torch.zeros_like(src) if g.type_per_edge is None else g.type_per_edge.long()
    return (t * n + src) * n + dst


def _pair_keys(pairs: torch.Tensor, n: int) -> torch.Tensor:
    return pairs[0].long() * n + pairs[1].long()


def test_split_keeps_types_and_edge_features_and_holds_out_reverses(tmp_path):
    g = T.typed_graph_with_edge_attr()
    task, m = T.make_task()
    n = g.num_nodes
    assert m.is_typed and m.edge_types == g.edge_types and m.feature_dims == g.feature_dims
    assert torch.equal(m.node_type_offset, g.node_type_offset)
    writes = g.edge_type_index(("author", "writes", "paper"))
    rev = g.edge_type_index(("paper", "rev_writes", "author"))
    links = m.links
    held = torch.cat([links["val_pos"], links["test_pos"]], 1)
    before, after = g.num_edges_per_type(), m.num_edges_per_type()
    for k in range(len(g.edge_types)):  # only the target type and its reverse lose edges
        assert after[k] == before[k] - (held.shape[1] if k in (writes, rev) else 0)
    # every kept edge has its own edge features
    okeys, order = torch.sort(_keys(g))
    at = order[torch.searchsorted(okeys, _keys(m))]
    assert torch.equal(okeys[torch.searchsorted(okeys, _keys(m))], _keys(m))
    torch.testing.assert_close(m.edge_attr, g.edge_attr[at], rtol=0, atol=0)
    # held-out edges gone from the target type and their reverses from the reverse type
    kept_writes = _pair_keys(type_edges(m, writes), n)
    kept_rev = _pair_keys(type_edges(m, rev), n)
    assert not torch.isin(_pair_keys(held, n), kept_writes).any()
    assert not torch.isin(_pair_keys(held.flip(0), n), kept_rev).any()
    assert torch.isin(_pair_keys(links["train_pos"], n), kept_writes).all()
    assert torch.isin(_pair_keys(links["train_pos"].flip(0), n), kept_rev).all()
    # negatives: source an author, target a paper, never a writes edge of the graph
    (a_lo, a_hi), (p_lo, p_hi) = task.ranges["src_range"], task.ranges["dst_range"]
    assert (a_lo, p_lo) == (60, 0) and (a_hi, p_hi) == (100, 60)
    src, dst, label = task.pairs(task.train_items(), 0)
    for s, d in (links["val_neg"], links["test_neg"], (src[label == 0], dst[label == 0])):
        assert ((s >= a_lo) & (s < a_hi) & (d >= p_lo) & (d < p_hi)).all()
    every = _pair_keys(type_edges(g, writes), n)
    assert not torch.isin(_pair_keys(links["val_neg"], n), every).any()
    assert not torch.isin(_pair_keys(torch.stack([src[label == 0], dst[label == 0]]), n),
                          kept_writes).any()
    # stored and read back with its types, edge features and split
    processed.save(m, tmp_path / "p")
    back = processed.load(tmp_path / "p")
    assert back.edge_types == m.edge_types and torch.equal(back.edge_attr, m.edge_attr)
    assert back.meta["link_edge_type"] == ["author", "writes", "paper"]
    assert torch.equal(back.links["val_neg"], links["val_neg"])


def test_edge_type_is_resolved_and_bad_input_refused_in_one_line():
    assert edge_types.REVERSE == graph_module.REVERSE
    types = T.make_typed_graph().edge_types
    with pytest.raises(ConfigError, match=r"needs task.edge_type.*one of writes, cites, "
                                          r"has_topic$"):
        edge_types.resolve(None, types, "g")
    for name in ("writes", "author__writes__paper", "author,writes,paper"):
        assert edge_types.resolve(name, types) == ("author", "writes", "paper")
    assert edge_types.resolve(None, types[:1] + types[3:4]) == types[0]  # one + its reverse
    assert edge_types.reverse_of(types[3], types) == types[0]
    with pytest.raises(ConfigError, match="wrote is not an edge type of g: its edge types are "
                                          "writes, cites"):
        edge_types.resolve("wrote", types, "g")
    two = [("a", "r", "b"), ("b", "r", "a")]
    with pytest.raises(ConfigError, match="ambiguous.*a__r__b, b__r__a"):
        edge_types.resolve("r", two)
    with pytest.raises(ConfigError, match="task.self_pairs=true: edge type "
                                          "author__writes__paper joins two node types"):
        LinkTask(edge_type="writes", self_pairs=True).prepare(T.make_typed_graph())
    few = GraphStore.from_typed({"u": 5, "i": 5}, {("u", "buys", "i"): torch.tensor(
        [[0, 1, 2], [1, 2, 3]])}, features={"u": torch.randn(5, 2), "i": torch.randn(5, 2)},
        add_reverse=True, name="few")
    with pytest.raises(ConfigError, match="few's edge type u__buys__i has 3 edges, too few"):
        LinkTask().prepare(few)
    homo = GraphStore.from_edge_index(torch.tensor([[0, 1], [1, 0]]), 2)
    with pytest.raises(ConfigError, match="task.edge_type=writes is not an edge type"):
        LinkTask(edge_type="writes").prepare(homo)


def _assert_equal(got: dict, ref: dict, world: int, rank: int) -> None:
    assert len(got["losses"]) == len(ref["losses"])
    for step, loss in enumerate(got["losses"]):
        assert loss == pytest.approx(ref["losses"][step][rank], rel=1e-5)
        for a, b in zip(got["grads"][step], ref["grads"][step]):
            torch.testing.assert_close(a, b, **TOL)
    for a, b in zip(got["params"], ref["params"]):
        torch.testing.assert_close(a, b, **TOL)
    assert got["metrics"] == pytest.approx(ref["metrics"], rel=1e-5)
    assert {"val_auc", "test_auc", "val_ap", "val_mrr"} <= set(got["metrics"])


def test_typed_link_data_parallel_on_one_rank_equals_one_process():
    _assert_equal(T.typed_link_data_steps(CPU), T.typed_link_reference(1), 1, 0)


@pytest.mark.slow
def test_typed_link_data_parallel_on_two_ranks_equals_one_process():
    ranks = spawn(T.typed_link_data_steps, 2)
    ref = T.typed_link_reference(2)
    for rank, got in enumerate(ranks):
        _assert_equal(got, ref, 2, rank)


@pytest.mark.slow
def test_typed_link_factored_equals_one_process():
    """1 sampler rank and 2 trainers on fixed routes: each trainer's micro-batch as one
    process's."""
    ranks = spawn(T.typed_link_data_steps, 3, "factored")
    trainers = [r for r in ranks if r["reports"]]
    assert len(trainers) == 2
    ref = T.typed_link_reference(2)
    for rank, got in enumerate(trainers):
        _assert_equal(got, ref, 2, rank)


#: ``(strategy, options)`` on 2 ranks, each with keyed dropout (a replica's row must draw
#: its owner's mask): split on both sampling layouts; the full-graph strategies on an edge cut
#: (depcomm, depcache) and a vertex cut (R-GCN's per-relation partial sums); R-GAT reads the
#: typed edge features (not on a vertex cut: its softmax spans a vertex's in-edges)
STRATEGY_CASES = {
    2: [("split", {"dropout": 0.5}), ("split", {"dropout": 0.5, "sample_on": "leader"}),
        ("split", {"dropout": 0.5, "model": "rgat"}),
        ("split", {"dropout": 0.5, "model": "to_hetero"}),
        ("fullgraph", {"dropout": 0.5}), ("fullgraph", {"dropout": 0.5, "deps": "depcache"}),
        ("fullgraph", {"dropout": 0.5, "cut": "vertex"}),
        ("fullgraph", {"dropout": 0.5, "model": "rgat"}),
        ("fullgraph", {"dropout": 0.5, "model": "to_hetero"}),
        ("offload", {"chunks": 3, "dropout": 0.5}),
        ("offload", {"chunks": 2, "dropout": 0.5, "model": "rgat"}),
        ("offload", {"chunks": 2, "dropout": 0.5, "model": "to_hetero"})],
    # on 4 ranks (ranks 2 and 3 own no author or field row) R-GCN only
    4: [("split", {"dropout": 0.5}), ("fullgraph", {"dropout": 0.5}),
        ("fullgraph", {"dropout": 0.5, "cut": "vertex"}),
        ("offload", {"chunks": 3, "dropout": 0.5})],
}
STRATEGY_TOL = dict(rtol=1e-4, atol=1e-5)  # Adam's steps scale rounding noise of tiny gradients
_REFS: dict[tuple, dict] = {}


def _reference(kind: str, opts: dict) -> dict:
    """The one-process reference of a case, once per session: split's whole mini-batches, or
    the full-graph strategies' whole message graph (with the case's dropout, keyed)."""
    model = opts.get("model", "rgcn")
    key = (kind == "split", opts.get("dropout", 0.0), model)
    if key not in _REFS:
        _REFS[key] = T.typed_link_split_reference(model, opts.get("dropout", 0.0)) \
            if kind == "split" else \
            T.typed_link_fullgraph_reference(opts.get("dropout", 0.0), model)
    return _REFS[key]


def _assert_strategy_equal(got: dict, case: tuple[str, dict]) -> None:
    """Every step's loss and (reduced) gradients, the final parameters and the evaluation's
    metrics equal the case's one-process reference."""
    ref = _reference(*case)
    assert len(got["losses"]) == len(ref["losses"]) == len(got["grads"]), case
    assert got["losses"] == pytest.approx(ref["losses"], rel=1e-5), case
    for step, (g, w) in enumerate(zip(got["grads"], ref["grads"], strict=True)):
        for a, b in zip(g, w, strict=True):
            torch.testing.assert_close(a, b, **STRATEGY_TOL,
                                       msg=lambda m, s=step: f"{case} {s}: {m}")
    for a, b in zip(got["params"], ref["params"], strict=True):
        torch.testing.assert_close(a, b, **STRATEGY_TOL, msg=lambda m: f"{case} params: {m}")
    assert got["metrics"].keys() >= ref["metrics"].keys() >= {"val_auc", "test_auc", "val_mrr"}
    for key, value in ref["metrics"].items():
        assert got["metrics"][key] == pytest.approx(value, rel=1e-4, abs=1e-6), (case, key)


def test_typed_link_split_fullgraph_offload_on_one_rank_equal_one_process():
    cases = [("split", {"dropout": 0.5}), ("fullgraph", {"dropout": 0.5}),
             ("offload", {"chunks": 3, "dropout": 0.5})]
    for case, got in zip(cases, T.typed_link_strategy_cases(CPU, cases), strict=True):
        _assert_strategy_equal(got, case)
    # keyed dropout is on: the reference with it is not the one without
    assert _reference("fullgraph", {"dropout": 0.5})["losses"] != \
        _reference("fullgraph", {})["losses"]


@pytest.mark.slow
@pytest.mark.parametrize("world", [2, 4])
def test_typed_link_split_fullgraph_offload_equal_one_process(world):
    """Every case of STRATEGY_CASES on ``world`` ranks, in one spawn: on every rank each
    step's loss and gradients, the parameters and the metrics equal one process's."""
    cases = STRATEGY_CASES[world]
    ranks = spawn(T.typed_link_strategy_cases, world, cases, timeout_s=300.0)
    for got in ranks:
        for case, res in zip(cases, got, strict=True):
            _assert_strategy_equal(res, case)
