"""Typed training (issue 36's first slice): R-GCN with a typed input under strategy=data.

A typed graph's store gathers typed inputs; featureless types train sparse embedding rows (an
epoch updates only the rows it sampled); two and four ranks equal one process; launch checks
refuse a homogeneous model on a typed graph and R-GCN on a homogeneous one."""

import pytest
import torch

from gnnscale.cache.none import NoCache
from gnnscale.data.hetero_sim import HeteroSimDataset
from gnnscale.deps.depcache import DepCache
from gnnscale.distributed import spawn
from gnnscale.distributed.topology import Topology
from gnnscale.errors import ConfigError
from gnnscale.models.rgcn import RGCN
from gnnscale.optim.adam import Adam
from gnnscale.sampling.neighbor import NeighborSampler
from gnnscale.strategies.base import RunContext
from gnnscale.strategies.data.strategy import DataParallel
from gnnscale.tasks.node import NodeTask
from tests import _typed_fns, _typed_ranks

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny graphs: see conftest

CPU = Topology(0, 1, 0, 1, torch.device("cpu"))


def _strategy(graph, model) -> DataParallel:
    task = NodeTask()
    task.attach(model)
    task.graph = graph
    ctx = RunContext(topo=CPU, graph=graph, model=model, sampler=NeighborSampler([4, 4]),
                     cache_policy=NoCache(), deps=DepCache(), partition=None, seed=0,
                     optim=Adam(lr=0.01), task=task)
    strat = DataParallel(ctx, batch_size=256, prefetch=0)
    strat.setup()
    return strat


def test_rgcn_trains_on_hetero_sim_and_updates_only_the_sampled_embedding_rows():
    graph = HeteroSimDataset(scale=0.002).load()
    torch.manual_seed(0)
    model = RGCN(0, graph.num_classes, hidden=16, num_layers=2, dropout=0.0, num_bases=4)
    model.bind_graph(graph)
    strat = _strategy(graph, model)
    featureless = [t for t, d in graph.feature_dims.items() if d == 0]
    assert set(model.typed_input.embeddings) == set(featureless) == {
        "author", "institution", "field_of_study"}
    tables = {t: model.typed_input.embeddings[t].weight for t in featureless}
    before = {t: w.detach().clone() for t, w in tables.items()}
    first = strat.train_epoch(0)
    # the rows the epoch's gathers asked for: exactly the featureless rows its samples hold
    sampled = torch.cat([strat.sample(d).input_nodes for d in strat.schedule.draws(0, [0])])
    kinds = graph.node_type_of(sampled)
    total = 0
    for t in featureless:
        want = torch.unique(graph.to_local(t, sampled[kinds == graph.node_types.index(t)]))
        assert torch.equal(strat.store.touched(t), want), t
        changed = (tables[t].detach() != before[t]).any(1).nonzero().flatten()
        assert bool(torch.isin(changed, want).all()), f"{t}: an unsampled row moved"
        assert changed.numel() > 0
        total += want.numel()
    assert first["embedding_rows_touched"] == total
    rows = sum(graph.num_nodes_of(t) for t in featureless)
    assert first["embedding_rows_held"] == rows and first["embedding_bytes"] == rows * 16 * 4
    assert first["bytes_host_to_rank.paper"] == first["misses"] * 128 * 4
    losses = [first["train_loss"]] + [strat.train_epoch(e)["train_loss"] for e in (1, 2, 3)]
    assert losses[-1] < losses[0] * 0.9
    metrics = strat.evaluate(1024)
    assert 0.0 <= metrics["val_acc"] <= 1.0 and metrics["test_loss"] > 0
    state = strat.optimizer.state_dict()  # one state dict over Adam and SparseAdam
    strat.optimizer.load_state_dict(state)
    assert len(state["param_groups"]) == 2


def test_typed_input_maps_each_type_to_hidden_in_row_order():
    graph = _typed_fns.make_typed_graph()
    model = _typed_fns.make_model(graph)
    from gnnscale.cache.store import typed_inputs

    ids = torch.tensor([3, 70, 110, 0, 105])  # paper, author, field, paper, field
    rows = model.encode(typed_inputs(graph, ids))
    ti = model.typed_input
    assert rows.shape == (5, 8)
    torch.testing.assert_close(rows[0], ti.linears["paper"](graph.features["paper"][3]))
    torch.testing.assert_close(rows[1], ti.linears["author"](graph.features["author"][10]))
    torch.testing.assert_close(rows[2], ti.embeddings["field"].weight[10])
    torch.testing.assert_close(rows[4], ti.embeddings["field"].weight[5])


def test_launch_refuses_a_homogeneous_model_on_a_typed_graph_and_rgcn_on_a_homogeneous_one(
        tmp_path):
    from gnnscale.runner.validate import validate
    from tests._train import TINY, make_cfg

    cfg = make_cfg(tmp_path, "dataset=hetero_sim", "dataset.scale=0.002", "logger=none")
    with pytest.raises(ConfigError, match=r"typed graph: SAGE would ignore its types.*rgcn"):
        validate(cfg)
    cfg = make_cfg(tmp_path, *TINY, "model=rgcn")
    with pytest.raises(ConfigError, match=r"R-GCN trains typed graphs.*has one of each"):
        validate(cfg)
    validate(make_cfg(tmp_path, "dataset=hetero_sim", "dataset.scale=0.002", "model=rgcn",
                      "logger=none"))


@pytest.mark.slow
@pytest.mark.parametrize("world", [2, 4])
def test_typed_data_parallel_matches_one_process(world):
    """On 2 ranks every typed model (R-GAT reading edge features), on 4 R-GCN and R-GAT: each
    step's losses and gradients (the embedding table's included) and the final parameters
    equal one process's."""
    models = _typed_ranks.PLANS[world]["data"]
    runs = [r["data"] for r in _typed_ranks.runs(world)]
    for i, model in enumerate(models):
        ranks = [r[i] for r in runs]
        ref = _typed_ranks.reference(_typed_fns.typed_reference_steps, world, _typed_fns.STEPS,
                                     model)
        assert ref["losses"][-1][0] != ref["losses"][0][0], model  # it trains
        for step in range(_typed_fns.STEPS):
            for rank in range(world):
                assert ranks[rank]["losses"][step] == pytest.approx(ref["losses"][step][rank],
                                                                    rel=1e-5), model
                for got, want in zip(ranks[rank]["grads"][step], ref["grads"][step]):
                    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)
        for rank in range(world):
            for got, want in zip(ranks[rank]["params"], ref["params"]):
                torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)


def _assert_factored_matches_one_process(ranks: list[dict], model: str = "rgcn") -> None:
    """Every trainer's per-job losses, per-step gradients (the embedding table's included)
    and final parameters equal one process averaging the step's jobs."""
    trainers = [r for r in ranks if r["trainer"]]
    jobs, steps = trainers[0]["jobs"], trainers[0]["steps"]
    ref = _typed_ranks.reference(_typed_fns.typed_reference_steps, jobs, steps, model)
    for step in range(steps):
        got: dict[int, float] = {}
        for r in trainers:
            got.update(r["losses"][step])
        assert sorted(got) == list(range(jobs))
        for slot, loss in got.items():
            assert loss == pytest.approx(ref["losses"][step][slot], rel=1e-5)
        for r in trainers:
            assert len(r["grads"][step]) == len(ref["grads"][step])
            for g, want in zip(r["grads"][step], ref["grads"][step]):
                torch.testing.assert_close(g, want, rtol=1e-4, atol=1e-6)
    for r in trainers:
        for got_p, want in zip(r["params"], ref["params"]):
            torch.testing.assert_close(got_p, want, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("model", ["rgcn", "hsage", "hgt"])  # hgat: hsage's HeteroConv path
def test_typed_factored_on_one_rank_matches_one_process(model):
    _assert_factored_matches_one_process([_typed_fns.typed_factored_steps(CPU, "shared",
                                                                          "auto", model)], model)


def test_factored_refuses_switching_and_routed_staleness_with_embedding_tables():
    from gnnscale.strategies.factored.config import check_sparse_tables

    with pytest.raises(ConfigError, match="strategy.switching=false"):
        check_sparse_tables("hetero_sim", 0, True, "shared")
    with pytest.raises(ConfigError, match="strategy.queue=shared or strategy.staleness=0"):
        check_sparse_tables("hetero_sim", 1, False, "routes")
    check_sparse_tables("hetero_sim", 1, False, "shared")  # the shared queue reduces them


@pytest.mark.slow
@pytest.mark.parametrize("queue,world,samplers", [("shared", 3, "1"), ("shared", 4, "1"),
                                                   ("routes", 4, "2")])
def test_typed_factored_matches_one_process(queue, world, samplers):
    """The shared queue cuts a step into 2 jobs per trainer (2 trainers on 3 ranks, 3 on 4),
    routes into 1 per trainer (2 trainers); the 4-rank runs come from the typed tests' shared
    spawn."""
    if world == 4:
        at = _typed_ranks.FACTORED.index((queue, samplers))
        ranks = [r["factored"][at] for r in _typed_ranks.runs(4)]
    else:
        ranks = spawn(_typed_fns.typed_factored_steps, world, queue, samplers)
    _assert_factored_matches_one_process(ranks)


def _featureless_graph():
    """One featureless node type, two relations and their reverses (AIFB's shape, tiny)."""
    from gnnscale.data.graph import GraphStore

    g = torch.Generator().manual_seed(5)
    return GraphStore.from_typed(
        {"entity": 50}, {("entity", "a", "entity"): torch.randint(0, 50, (2, 120), generator=g),
                         ("entity", "b", "entity"): torch.randint(0, 50, (2, 80), generator=g)},
        y={"entity": torch.randint(0, 3, (50,), generator=g)}, num_classes=3,
        train_idx={"entity": torch.arange(0, 30)}, test_idx={"entity": torch.arange(40, 50)},
        add_reverse=True, name="featureless-tiny")


def test_onehot_input_is_pyg_rgcnconv_fed_ids_and_trains_full_batch():

    from gnnscale.evaluation.evaluate import layerwise_logits
    from gnnscale.sampling.full import FullNeighborSampler

    graph = _featureless_graph()
    torch.manual_seed(0)
    model = RGCN(0, 3, hidden=8, num_layers=2, dropout=0.0, num_bases=2, featureless="onehot")
    model.bind_graph(graph)
    assert model.typed_input is None and model.convs[0].in_channels_l == 50
    assert not any(p.is_sparse for p in model.parameters())
    # the whole graph through the two convs, as PyG's R-GCN example runs them (x=None)
    ei, et = graph.edge_index(), graph.type_per_edge.long()
    want = model.convs[1](torch.relu(model.convs[0](None, ei, et)), ei, et)[graph.test_idx]
    got = layerwise_logits(model, graph, graph.test_idx, torch.device("cpu"), 16)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    task = NodeTask()
    task.attach(model)
    task.graph = graph
    ctx = RunContext(topo=CPU, graph=graph, model=model, sampler=FullNeighborSampler(2),
                     cache_policy=NoCache(), deps=DepCache(), partition=None, seed=0,
                     optim=Adam(lr=0.05), task=task)
    strat = DataParallel(ctx, batch_size=64, prefetch=0)
    strat.setup()
    losses = [strat.train_epoch(e)["train_loss"] for e in range(5)]
    assert losses[-1] < losses[0] * 0.8
    with pytest.raises(ValueError, match="featureless=onehot needs every node type featureless"):
        RGCN(0, 3, hidden=8, num_layers=2, featureless="onehot").bind_graph(
            _typed_fns.make_typed_graph())
