"""Suite ``link``: link-training throughput, positive edges per second, one process.

Workload (default / ``--quick``): the sampler suite's products-like graph (``products_sim``
statistics at 1/100 / 1/400 of ogbn-products: ~24.5k / ~6.1k nodes, mean degree ~50), 32
random features, a random 85/5/10 edge split, GraphSAGE 2 layers hidden 64 into 64-wide
embeddings, the dot decoder, one uniform negative per positive (edges rejected). ``data``
trains mini-batches of 4096 positives with fanouts 10,5 (the seeds are every endpoint of the
positives and their negatives); ``fullgraph`` computes every node's embedding once per epoch
and scores every training pair. Both run side by side on the same graph and task, epochs
alternated; figures are medians over the epochs after the first (warm-up). Node
classification under ``data`` with the same model, fanouts and number of seeds per step gives
the cost of the seeds alone (``node_seeds_per_s``), for reference. ``fullgraph_gathered`` is
``fullgraph`` with the decoder as it was before the fused pair product (both ends' rows
gathered into ``[pairs, 64]`` tensors, multiplied, summed; autograd's scatters back), side by
side with the fused one: the same losses bit for bit on one intra-op thread
(``results.fused_losses_equal``); on more, torch's scatter sums in an order that follows the
thread count, and the losses agree to float rounding (``results.fused_loss_max_rel_diff``).

PyG baseline (needs pyg-lib or torch-sparse, ``make sparse``; else its rows are null with the
reason in ``results.pyg_link_neighbor_loader.skipped``): ``LinkNeighborLoader`` on the same
message graph, over the same training positives, with the same fanouts, 4096 positives per
batch and one uniform negative per positive (``neg_sampling="binary"``, amount 1).

* Sampling alone (``link_sampling``): the first ``sampling_batches`` mini-batches of epoch 0's
  schedule, made by gnnscale (``gnnscale``: the seeds, i.e. the negatives drawn and every
  endpoint once, the sampled blocks and the pairs' rows and labels, as a ``data`` step gets
  them; ``gnnscale_one_thread``: the same with a 1-thread sampler; ``gnnscale_sample_only``:
  without the pairs' rows, as the strategy's sampler thread does) and by the loader over the
  same positives in the same batches (features left out on both sides), alternated, each
  figure the median of ``sampling_repeats`` passes after one warm-up pass. Reported: positive
  edges per second and sampled edges per second, with edges and nodes per batch.
* Training (``pyg_link_neighbor_loader.training``): an epoch of PyG's ``GraphSAGE`` (2 layers,
  hidden 64, out 64, no dropout) and a dot decoder, Adam lr 0.01, binary cross-entropy, over
  the loader with ``shuffle=True`` (features gathered by the loader, no workers), alternated
  with the epochs above; median of the epochs after the first.

Not the same semantics, to read the figures with: PyG samples each hop only for the nodes new
in the previous hop (its ``edge_index`` is one subgraph all layers share), while gnnscale's
blocks resample every node sampled so far at each hop (one block per layer), so gnnscale's
edges per batch are more for the same fanouts; PyG's negatives are drawn without rejecting
the graph's edges or self loops (gnnscale rejects them); both sample the neighbourhoods of the
negatives' endpoints too, merge the endpoints into unique seeds, and leave the training
positives in the message graph (no target-edge removal on either side).
"""

from __future__ import annotations

import statistics
import time

import torch

from benchmarks import pyg_missing, ratio
from benchmarks.sampler import PRODUCTS_LIKE
from gnnscale.cache.none import NoCache
from gnnscale.data.graph import GraphStore
from gnnscale.data.synthetic import generate
from gnnscale.deps.depcomm import DepComm
from gnnscale.distributed.topology import Topology
from gnnscale.models.sage import SAGE
from gnnscale.optim.adam import Adam
from gnnscale.sampling.neighbor import NeighborSampler
from gnnscale.sampling.schedule import epoch_batches, sample_seed
from gnnscale.strategies.base import RunContext
from gnnscale.tasks.link import LinkTask
from gnnscale.tasks.node import NodeTask

FANOUTS = [10, 5]
BATCH = 4096
HIDDEN = 64
CPU = Topology(0, 1, 0, 1, torch.device("cpu"))
PYG = "pyg_link_neighbor_loader"


class _GatheredLink(LinkTask):
    """The link task with the decoder's pairs gathered first (the formulation before the
    fused pair product): the baseline of the side-by-side ``fullgraph_gathered`` row."""

    def score_pairs(self, rows: torch.Tensor, src: torch.Tensor, dst: torch.Tensor
                    ) -> torch.Tensor:
        return self.score(rows[src], rows[dst])


def _strategy(kind: str, graph, task):
    from gnnscale.strategies.data.strategy import DataParallel
    from gnnscale.strategies.fullgraph.strategy import FullGraph

    torch.manual_seed(0)
    model = SAGE(graph.num_features, task.out_channels(graph), hidden=HIDDEN,
                 num_layers=len(FANOUTS), dropout=0.0)
    task.attach(model)
    ctx = RunContext(topo=CPU, graph=graph, model=model, sampler=NeighborSampler(FANOUTS),
                     cache_policy=NoCache(), deps=DepComm(), partition=None,
                     optim=Adam(lr=0.01), seed=0, task=task)
    strat = DataParallel(ctx, batch_size=BATCH, prefetch=1) if kind != "fullgraph" \
        else FullGraph(ctx)
    strat.setup()
    return strat


# -- PyG's LinkNeighborLoader ---------------------------------------------------------------------
def _pyg_loader(graph: GraphStore, pairs: torch.Tensor, features: bool, shuffle: bool):
    """LinkNeighborLoader over the positives ``pairs`` ([2, P]) of ``graph``: the suite's
    fanouts and batch, one uniform negative per positive."""
    from torch_geometric.data import Data
    from torch_geometric.loader import LinkNeighborLoader
    from torch_geometric.sampler import NegativeSampling

    data = Data(edge_index=graph.edge_index(), num_nodes=graph.num_nodes,
                x=graph.x if features else None)
    return LinkNeighborLoader(data, num_neighbors=FANOUTS, batch_size=BATCH,
                              edge_label_index=pairs.long(), shuffle=shuffle,
                              neg_sampling=NegativeSampling("binary", amount=1.0))


class _PygTrainer:
    """PyG's GraphSAGE and a dot decoder trained over a LinkNeighborLoader, one epoch a call."""

    def __init__(self, graph: GraphStore, pairs: torch.Tensor) -> None:
        from torch_geometric.nn.models import GraphSAGE

        self.loader = _pyg_loader(graph, pairs, features=True, shuffle=True)
        torch.manual_seed(0)
        self.model = GraphSAGE(graph.num_features, HIDDEN, len(FANOUTS), HIDDEN, dropout=0.0)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=0.01)

    def train_epoch(self, epoch: int) -> float:
        import torch.nn.functional as F

        torch.manual_seed(epoch)
        self.model.train()
        total = 0.0
        for b in self.loader:
            self.opt.zero_grad(set_to_none=True)
            z = self.model(b.x, b.edge_index)
            logits = (z[b.edge_label_index[0]] * z[b.edge_label_index[1]]).sum(-1)
            loss = F.binary_cross_entropy_with_logits(logits, b.edge_label)
            loss.backward()
            self.opt.step()
            total += float(loss.detach())
        return total


# -- sampling alone -------------------------------------------------------------------------------
def _sampling(graph: GraphStore, link: LinkTask, batches_n: int, repeats: int,
              pyg_reason: str | None) -> tuple[dict, dict | None, str | None]:
    """gnnscale's link mini-batches vs LinkNeighborLoader's over the same positives, passes
    alternated: ``(gnnscale figures, PyG figures or None, reason PyG is missing or None)``."""
    batches = epoch_batches(link.train_items(), BATCH, 0, 0)[:batches_n]
    positives = sum(int(b.numel()) for b in batches)
    samplers = {"gnnscale": NeighborSampler(FANOUTS),
                "gnnscale_one_thread": NeighborSampler(FANOUTS, threads=1),
                "gnnscale_sample_only": NeighborSampler(FANOUTS)}

    def ours(name: str) -> tuple[int, int]:
        sampler, edges, nodes = samplers[name], 0, 0
        for step, items in enumerate(batches):
            mb = sampler.sample(graph, link.seeds(items, 0), sample_seed(0, 0, step))
            if name != "gnnscale_sample_only":
                link.target(items, 0)
            edges, nodes = edges + mb.num_edges, nodes + int(mb.n_id.numel())
        return edges, nodes

    passes = {name: (lambda name=name: ours(name)) for name in samplers}
    loader = None
    if pyg_reason is None:
        try:
            loader = _pyg_loader(graph, link.train_pos[:, torch.cat(batches)], features=False,
                                 shuffle=False)

            def pyg() -> tuple[int, int]:
                edges, nodes = 0, 0
                for b in loader:
                    edges, nodes = edges + int(b.edge_index.shape[1]), nodes + int(b.num_nodes)
                return edges, nodes

            torch.manual_seed(0)
            pyg()  # fails here, before any timing, when the loader cannot sample
            passes[PYG] = pyg
        except Exception as e:  # noqa: BLE001 - an unusable backend is a skip, not a crash
            pyg_reason = f"LinkNeighborLoader failed: {type(e).__name__}: {e}"
    counts = {name: fn() for name, fn in passes.items()}  # warm-up pass, and the sizes
    times: dict[str, list[float]] = {name: [] for name in passes}
    for _ in range(repeats):
        for name, fn in passes.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    fig = {}
    for name in passes:
        t = statistics.median(times[name])
        edges, nodes = counts[name]
        fig[name] = {"positive_edges_per_s": positives / t, "sampled_edges_per_s": edges / t,
                     "sampled_edges_per_batch": edges / len(batches),
                     "sampled_nodes_per_batch": nodes / len(batches), "seconds": t}
    pyg_fig = fig.pop(PYG, None)
    return fig, pyg_fig, pyg_reason


def run(quick: bool) -> dict:
    scale, epochs = (0.0025, 4) if quick else (0.01, 5)
    sampling_batches, sampling_repeats = (8, 3) if quick else (32, 5)
    graph = generate(scale=scale, seed=0, **{**PRODUCTS_LIKE, "num_features": 32})
    link = LinkTask(dim=HIDDEN, num_negatives=1)
    message = link.prepare(graph, None, seed=0)
    positives = int(link.train_items().numel())
    sampling, pyg_sampling, pyg_reason = _sampling(
        message, link, sampling_batches, sampling_repeats, pyg_missing("LinkNeighborLoader"))
    node = NodeTask()
    node_graph = node.prepare(message)
    gathered = _GatheredLink(dim=HIDDEN, num_negatives=1)
    gathered.prepare(graph, None, seed=0)
    strategies = {"data": _strategy("data", message, link),
                  "fullgraph": _strategy("fullgraph", message, link),
                  "fullgraph_gathered": _strategy("fullgraph", message, gathered),
                  "node_data": _strategy("data", node_graph, node)}
    if pyg_reason is None:
        try:
            strategies[PYG] = _PygTrainer(message, link.train_pos)
        except Exception as e:  # noqa: BLE001 - as in _sampling
            pyg_reason = f"PyG training failed to start: {type(e).__name__}: {e}"
    times: dict[str, list[float]] = {k: [] for k in strategies}
    losses: dict[str, list[float]] = {k: [] for k in strategies}
    seeds = {}
    for epoch in range(epochs):
        for name, strat in strategies.items():
            t0 = time.perf_counter()
            out = strat.train_epoch(epoch)
            times[name].append(time.perf_counter() - t0)
            if isinstance(out, dict):
                losses[name].append(out.get("train_loss"))
    batch = link.train_items()[:BATCH]
    seeds["link_per_step"] = int(link.seeds(batch, 0).numel())
    for name, strat in strategies.items():
        if name != PYG:
            strat.close()
    median = {k: statistics.median(v[1:]) for k, v in times.items()}
    pyg_train = median.pop(PYG, None)
    node_seeds = node_graph.train_idx.numel()
    results = {
        "positive_edges_per_s": {"data": positives / median["data"],
                                 "fullgraph": positives / median["fullgraph"],
                                 "fullgraph_gathered": positives
                                 / median["fullgraph_gathered"]},
        "fused_losses_equal": losses["fullgraph"] == losses["fullgraph_gathered"],
        "fused_loss_max_rel_diff": max((abs(a - b) / max(abs(b), 1e-30) for a, b in zip(
            losses["fullgraph"], losses["fullgraph_gathered"])), default=0.0),
        "fullgraph_losses": losses["fullgraph"],
        "epoch_seconds": median,
        "node_seeds_per_s": node_seeds / median["node_data"],
        "link_seeds_per_step": seeds["link_per_step"],
        "link_sampling": sampling,
        PYG: {"sampling": pyg_sampling,
              "training": None if pyg_train is None else {
                  "positive_edges_per_s": positives / pyg_train, "epoch_seconds": pyg_train}},
    }
    if pyg_reason:
        results[PYG]["skipped"] = pyg_reason
    pyg_rate = (pyg_sampling or {}).get("positive_edges_per_s")
    return {
        "config": {"num_nodes": graph.num_nodes, "num_edges": graph.num_edges,
                   "message_edges": message.num_edges, "train_positives": positives,
                   "fanouts": FANOUTS, "batch_size": BATCH, "epochs": epochs,
                   "graph": PRODUCTS_LIKE | {"scale": scale, "num_features": 32},
                   "node_train_vertices": int(node_seeds),
                   "sampling_batches": sampling_batches, "sampling_repeats": sampling_repeats,
                   "threads": torch.get_num_threads()},
        "results": results,
        "ratios": {
            "fullgraph_over_data": ratio(results["positive_edges_per_s"]["fullgraph"],
                                         results["positive_edges_per_s"]["data"]),
            "fused_over_gathered_decoder": ratio(
                results["positive_edges_per_s"]["fullgraph"],
                results["positive_edges_per_s"]["fullgraph_gathered"]),
            "gnnscale_over_pyg_link_sampling": ratio(
                sampling["gnnscale"]["positive_edges_per_s"], pyg_rate),
            "gnnscale_one_thread_over_pyg_link_sampling": ratio(
                sampling["gnnscale_one_thread"]["positive_edges_per_s"], pyg_rate),
            "gnnscale_over_pyg_link_sampled_edges": ratio(
                sampling["gnnscale"]["sampled_edges_per_s"],
                (pyg_sampling or {}).get("sampled_edges_per_s")),
            "gnnscale_over_pyg_link_training": ratio(
                results["positive_edges_per_s"]["data"],
                None if pyg_train is None else positives / pyg_train),
        },
    }
