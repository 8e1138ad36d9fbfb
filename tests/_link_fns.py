"""Rank functions for the link-prediction equivalence tests (module level, so spawn can import
them): every strategy trains task=link on a small graph and is compared with one process."""

from __future__ import annotations

import torch

from gnnscale.cache.none import NoCache
from gnnscale.data.graph import GraphStore
from gnnscale.deps.depcache import DepCache
from gnnscale.deps.depcomm import DepComm
from gnnscale.distributed.topology import Topology
from gnnscale.models.sage import SAGE
from gnnscale.optim.adam import Adam
from gnnscale.partition import PartitionBook
from gnnscale.partition.provider import FixedPartition
from gnnscale.sampling.base import Block
from gnnscale.sampling.neighbor import NeighborSampler
from gnnscale.sampling.schedule import epoch_batches, sample_seed
from gnnscale.strategies.base import RunContext
from gnnscale.tasks.link import LinkTask

FANOUTS = [4, 3]
BATCH = 40
EPOCHS = 2
CPU = Topology(rank=0, world_size=1, local_rank=0, local_world_size=1,
               device=torch.device("cpu"))


def make_graph(n: int = 150, e: int = 500, f: int = 8) -> GraphStore:
    g = torch.Generator().manual_seed(21)
    ei = torch.randint(0, n, (2, e), generator=g)
    return GraphStore.from_edge_index(ei, n, symmetrize=True, self_loops="remove",
                                      x=torch.randn(n, f, generator=g), name="links")


def make_task(decoder: str = "mlp") -> tuple[LinkTask, GraphStore]:
    task = LinkTask(num_negatives=2, decoder=decoder, dim=8, decoder_hidden=8,
                    val_fraction=0.1, test_fraction=0.1, hits_k=[5, 20])
    return task, task.prepare(make_graph(), None, seed=0)


def make_model(task: LinkTask, graph: GraphStore) -> SAGE:
    torch.manual_seed(3)
    model = SAGE(graph.num_features, task.out_channels(graph), hidden=16,
                 num_layers=len(FANOUTS), dropout=0.0)
    task.attach(model)
    return model


def scattered(n: int, world: int) -> torch.Tensor:
    """A deliberately poor partition (many remote pairs) to stress the exchange."""
    return (torch.arange(n) * 7 + 3) % world


def make_ctx(topo, decoder: str = "mlp", deps=None, cut: str = "edge") -> RunContext:
    task, graph = make_task(decoder)
    provider = None
    if topo.world_size > 1 and cut == "vertex":  # masters and mirrors (CVC)
        from gnnscale.partition.cvc import CvcPartitioner

        provider = FixedPartition(CvcPartitioner().partition(graph, topo.world_size))
    elif topo.world_size > 1:
        part = scattered(graph.num_nodes, topo.world_size)
        provider = FixedPartition(PartitionBook.from_edge_cut(graph, part, topo.world_size))
    return RunContext(topo=topo, graph=graph, model=make_model(task, graph),
                      sampler=NeighborSampler(FANOUTS), cache_policy=NoCache(),
                      deps=deps or DepCache(), partition=provider, optim=Adam(lr=0.01), seed=0,
                      task=task)


def params(module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in module.parameters()]


def grads(module) -> list[torch.Tensor]:
    return [p.grad.clone() for p in module.parameters()]


def train(topo, kind: str, decoder: str = "mlp", evaluate: bool = False,
          opts: dict | None = None) -> dict:
    """EPOCHS epochs of strategy ``kind`` with options ``opts``; each step's loss and
    gradients (as this rank's ``train_step`` left them), the final parameters and, with
    ``evaluate``, the metrics."""
    opts = dict(opts or {})
    deps_name = opts.pop("deps", "depcomm")
    cut = opts.pop("cut", "edge")
    from gnnscale.strategies.data.strategy import DataParallel
    from gnnscale.strategies.factored.strategy import Factored
    from gnnscale.strategies.fullgraph.strategy import FullGraph
    from gnnscale.strategies.offload.strategy import Offload
    from gnnscale.strategies.split.strategy import SplitParallel

    deps = None
    if kind in ("split", "fullgraph", "offload"):
        deps = DepCache() if deps_name == "depcache" else DepComm()
    ctx = make_ctx(topo, decoder, deps, cut)
    cls = {"data": DataParallel, "factored": Factored, "split": SplitParallel,
           "fullgraph": FullGraph, "offload": Offload}[kind]
    if kind in ("data", "split"):
        opts.setdefault("prefetch", 0)
    strat = cls(ctx, **({"batch_size": BATCH} if kind in ("data", "factored", "split") else {}),
                **opts)
    strat.setup()
    losses, step_grads = [], []
    if hasattr(strat, "train_step"):
        inner = strat.train_step

        def recorded(*args):
            loss = inner(*args)
            losses.append(loss)
            step_grads.append(grads(strat.module))
            return loss

        strat.train_step = recorded
    for epoch in range(EPOCHS):
        m = strat.train_epoch(epoch)
        if not hasattr(strat, "train_step"):
            losses.append(m["train_loss"])
            step_grads.append(grads(strat.module))
    out = {"losses": losses, "grads": step_grads, "params": params(strat.module),
           "reports": strat.reports}
    if evaluate and strat.reports:
        out["metrics"] = strat.evaluate(64)
    strat.close()
    return out


def reference_minibatch(trainers: int, decoder: str = "mlp", shared: bool = False) -> dict:
    """One process over the same schedule. ``shared=False`` (``data``, ``factored``): per step
    the mean of the ``trainers`` micro-batch losses, each sampled with its slot's seed;
    ``shared=True`` (``split``): the loss of the whole mini-batch, sampled once."""
    task, graph = make_task(decoder)
    model = make_model(task, graph)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    sampler = NeighborSampler(FANOUTS)
    losses, step_grads = [], []
    for epoch in range(EPOCHS):
        batches = epoch_batches(task.train_items(), BATCH, 0, epoch,
                                min_size=1 if shared else trainers)
        for step, batch in enumerate(batches):
            opt.zero_grad()
            parts = [batch] if shared else torch.tensor_split(batch, trainers)
            per = []
            for slot, items in enumerate(parts):
                mb = sampler.sample(graph, task.seeds(items, epoch),
                                    sample_seed(0, epoch, step, slot))
                out = model(graph.x[mb.input_nodes], mb.blocks)
                per.append(task.loss(out, task.target(items, epoch)))
            loss = torch.stack(per).mean()
            loss.backward()
            losses.append([float(v.detach()) for v in per] if not shared else float(loss.detach()))
            step_grads.append(grads(model))
            opt.step()
    return {"losses": losses, "grads": step_grads, "params": params(model)}


def full_blocks(graph: GraphStore) -> list[Block]:
    ei = graph.edge_index()
    block = Block(ei, (graph.num_nodes, graph.num_nodes), torch.arange(graph.num_nodes))
    return [block] * len(FANOUTS)


def reference_fullgraph(decoder: str = "mlp", evaluate: bool = False) -> dict:
    """One process: every epoch the embeddings of all nodes, then every training pair."""
    task, graph = make_task(decoder)
    model = make_model(task, graph)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    losses, step_grads = [], []
    for epoch in range(EPOCHS):
        opt.zero_grad()
        z = model(graph.x, full_blocks(graph))
        src, dst, label = task.pairs(task.train_items(), epoch)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(task.head(z[src], z[dst]),
                                                                    label)
        loss.backward()
        losses.append(float(loss.detach()))
        step_grads.append(grads(model))
        opt.step()
    out = {"losses": losses, "grads": step_grads, "params": params(model)}
    if evaluate:
        out["metrics"] = task.evaluate(model, graph, torch.device("cpu"), 64)
    return out


def exchange(topo) -> dict:
    """Pair scoring across ranks: rank ``r`` holds the rows of vertices ``v % world == r``;
    the scores, and the gradients the pairs send back, of a fixed pair list."""
    from gnnscale.tasks.link.pairs import RowLocator, gather_scores, pair_rows

    n, world = 40, topo.world_size
    g = torch.Generator().manual_seed(4)
    table = torch.randn(n, 3, generator=g)
    src, dst = torch.randint(0, n, (2, 200), generator=g)
    ids = (torch.arange(n) % world == topo.rank).nonzero().reshape(-1)
    ids = ids[torch.randperm(ids.numel(), generator=torch.Generator().manual_seed(topo.rank))]
    rows = table[ids].clone().requires_grad_(True)
    zu, zv, mine = pair_rows(rows, RowLocator.build(ids), src, dst, n)
    score = (zu * zv).sum(-1)
    (score * (mine.double() + 1).float()).sum().backward()
    return {"scores": gather_scores(score, mine, src.numel()), "ids": ids,
            "grad": rows.grad.clone()}
