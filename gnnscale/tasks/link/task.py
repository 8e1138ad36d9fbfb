"""``task=link``: link prediction. The model's output rows are node embeddings; a decoder
(the task's head: ``dot`` or ``mlp``) scores a pair of them; the loss is the binary
cross-entropy of the positive edges (label 1) and of ``num_negatives`` sampled negatives per
positive (label 0); with ``self_pairs`` each node's ``(v, v)`` is a positive too (the graph
auto-encoder reconstructs ``A + I``). The metrics are ROC-AUC, average precision, Hits@K and
MRR with OGB's evaluator semantics (:mod:`gnnscale.tasks.link.metrics`), computed on every rank's
scores.

Training items are the training positives' ids (columns of ``train_pos``); a mini-batch of
them needs the output rows of every endpoint of its positives and of their negatives (drawn
afresh each epoch, keyed by ``(seed, epoch, edge id)``: the same on any number of ranks), so
a sampling strategy samples those vertices as its seeds, and splits and queues stay as they
are. Where the rows are spread over ranks, pairs are scored by the rank holding the source's
row (:mod:`gnnscale.tasks.link.pairs`).

On a typed graph the positives are the edges of one edge type (``task.edge_type``), the
negatives' source and target are drawn within that type's source and destination node types
(:func:`~gnnscale.tasks.link.negatives.type_ranges`) and avoid its edges, and the score is
the decoder's of the two endpoints' rows, as on a homogeneous graph.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F

from gnnscale.data.graph import GraphStore
from gnnscale.deps.shuffle import ShuffleStats
from gnnscale.distributed.collectives import group_rank, group_size
from gnnscale.errors import ConfigError
from gnnscale.sampling.schedule import mix_seed
from gnnscale.tasks.base import Predicted, Predicting, Task, eval_mode
from gnnscale.tasks.link import edge_types, metrics
from gnnscale.tasks.link.config import LinkTaskConfig
from gnnscale.tasks.link.decoders import make_decoder
from gnnscale.tasks.link.edge_split import SplitOptions, load_split, type_csc
from gnnscale.tasks.link.negatives import draw, exclusion, type_ranges
from gnnscale.tasks.link.pairs import RowLocator, gather_scores, pair_index

TRAIN_NEG = 21  # seed stream of the training negatives
MEMO = 16  # micro-batches whose pairs are kept (a prefetching sampler runs a few ahead)


@dataclass
class LinkTarget:
    """A micro-batch's pairs as rows of its seeds (``index[0]``, ``index[1]``) and labels."""

    index: torch.Tensor
    label: torch.Tensor

    def to(self, device: torch.device | str, non_blocking: bool = False) -> LinkTarget:
        """On ``device``."""
        return LinkTarget(self.index.to(device, non_blocking=non_blocking),
                          self.label.to(device, non_blocking=non_blocking))


class LinkTask(Task):
    """Link prediction (see the module docstring); options are ``task=link``'s schema."""

    schema = LinkTaskConfig
    loss_name = "binary cross-entropy of the training edges and their sampled negatives"

    def __init__(self, split: str = "auto", val_fraction: float = 0.05,
                 test_fraction: float = 0.1, split_seed: int | None = None,
                 directed: str = "auto", num_negatives: int = 1, negatives: str = "uniform",
                 eval_negatives: int = 1, eval_negative_kind: str = "uniform",
                 reject_edges: bool = True, self_pairs: bool = False, decoder: str = "dot",
                 decoder_hidden: int = 256,
                 decoder_layers: int = 2, dim: int = 64,
                 hits_k: list[int] | tuple[int, ...] = (20, 50, 100),
                 edge_type: str | list[str] | None = None) -> None:
        super().__init__()
        if num_negatives < 1:
            raise ConfigError(f"task.num_negatives={num_negatives}: at least one negative per "
                              "positive edge")
        self.options = dict(split=split, val_fraction=val_fraction,
                            test_fraction=test_fraction, directed=directed,
                            eval_negatives=eval_negatives,
                            eval_negative_kind=eval_negative_kind, reject_edges=reject_edges)
        self.split_seed = split_seed
        self.k, self.kind, self.reject = int(num_negatives), negatives, bool(reject_edges)
        self.self_pairs = bool(self_pairs)
        self.decoder, self.decoder_hidden, self.decoder_layers = decoder, decoder_hidden, \
            decoder_layers
        self.dim, self.hits_k = int(dim), [int(k) for k in hits_k]
        self.edge_type_option = edge_type
        #: a typed graph's target edge type, and the id ranges its negatives are drawn in
        self.edge_type: tuple[str, str, str] | None = None
        self.ranges: dict[str, tuple[int, int]] = {}
        self.seed = 0
        self.stats = ShuffleStats()  # bytes of endpoint rows exchanged (sharded loss, eval)
        self._locator: tuple | None = None
        self._memo: OrderedDict = OrderedDict()  # the last micro-batches' pairs (_drawn)
        self._memo_lock = threading.Lock()

    # -- set-up ---------------------------------------------------------------------------------
    def prepare(self, graph: GraphStore, root: str | None = None, seed: int = 0) -> GraphStore:
        """The message graph (val/test edges removed) with the split edges, processed once;
        on a typed graph, of the edge type ``task.edge_type`` names
        (:mod:`gnnscale.tasks.link.edge_types`)."""
        self.seed = int(seed)
        target = edge_types.resolve(self.edge_type_option, graph.edge_types, graph.name)
        if graph.is_typed and self.self_pairs and target[0] != target[2]:
            raise ConfigError(f"task.self_pairs=true: edge type {edge_types.key(target)} joins "
                              "two node types, so (v, v) is no pair of it; use "
                              "task.self_pairs=false")
        opts = SplitOptions(seed=int(seed if self.split_seed is None else self.split_seed),
                            edge_type=target if graph.is_typed else None, **self.options)
        g = load_split(graph, opts)
        self.graph = g
        self.train_pos = g.links["train_pos"]
        lo, hi = 0, g.num_nodes
        if g.is_typed:
            self.edge_type = target
            src, dst = type_ranges(g.node_type_offset, g.node_types, target)
            self.ranges = {"src_range": src, "dst_range": dst}
            lo, hi = src
        if self.self_pairs:  # the auto-encoder reconstructs A + I: every (v, v) is positive
            loops = torch.arange(lo, hi).repeat(2, 1)
            self.train_pos = torch.cat([self.train_pos.long(), loops], 1)
        if not self.reject:
            self.exclude = (None, None, None)
        elif g.is_typed:  # negatives avoid the message graph's edges of the target type
            self.exclude = exclusion(*type_csc(g, g.edge_type_index(target)))
        else:
            self.exclude = exclusion(g.indptr, g.indices)
        return g

    def out_channels(self, graph: GraphStore) -> int:
        """The embedding width ``task.dim``."""
        return self.dim

    def make_head(self) -> torch.nn.Module:
        """The decoder."""
        return make_decoder(self.decoder, self.dim, self.decoder_hidden, self.decoder_layers)

    def check(self, graph: GraphStore, world: int) -> None:
        """Features (a typed graph's model embeds its featureless types), and a training
        edge per rank at least."""
        if graph.x is None and not graph.is_typed:
            raise ConfigError(f"dataset {graph.name} has no node features: task=link encodes "
                              "nodes from their features")
        n = int(graph.links["train_pos"].shape[1])
        if n < world:
            raise ConfigError(f"the link split of {graph.name} has {n} training edges but "
                              f"dist.world_size={world}: use at most {n} ranks")

    # -- mini-batches ---------------------------------------------------------------------------
    def train_items(self) -> torch.Tensor:
        """Ids of the training positives (columns of ``train_pos``, then with
        ``self_pairs`` one ``(v, v)`` per node)."""
        return torch.arange(self.train_pos.shape[1])

    def num_terms(self, items: torch.Tensor) -> int:
        """A positive and its negatives per item."""
        return int(items.numel()) * (1 + self.k)

    def pairs(self, items: torch.Tensor, epoch: int
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(src, dst, label)`` of the positives ``items`` then their negatives (each
        positive's ``num_negatives`` in a row), drawn for ``epoch``."""
        return self._drawn(items, epoch, seeds=False)[:3]

    def _drawn(self, items: torch.Tensor, epoch: int, seeds: bool = True
               ) -> tuple[torch.Tensor, ...]:
        """:meth:`pairs` and (with ``seeds``) their endpoints once, ascending: drawn once per
        micro-batch (a step asks for its seeds, then, maybe on another thread, its target);
        the endpoints are sorted only when asked for (a full-graph epoch scores its pairs from
        every row and needs none)."""
        key = (epoch, items.numpy().tobytes())
        with self._memo_lock:
            out = self._memo.get(key)
        if out is not None:
            if seeds and out[3] is None:
                out = (*out[:3], torch.unique(torch.cat([out[0], out[1]])))
                with self._memo_lock:
                    self._memo[key] = out
            return out
        pos = self.train_pos[:, items].long()
        nsrc, ndst = draw(self.graph.num_nodes, pos[0], items, self.k, self.kind,
                          mix_seed(self.seed, TRAIN_NEG, epoch), *self.exclude, **self.ranges)
        label = torch.cat([torch.ones(pos.shape[1]), torch.zeros(nsrc.numel())])
        src, dst = torch.cat([pos[0], nsrc]), torch.cat([pos[1], ndst])
        out = (src, dst, label, torch.unique(torch.cat([src, dst])) if seeds else None)
        with self._memo_lock:
            self._memo[key] = out
            while len(self._memo) > MEMO:
                self._memo.popitem(last=False)
        return out

    def seeds(self, items: torch.Tensor, epoch: int) -> torch.Tensor:
        """Every endpoint of the positives and negatives, once, ascending."""
        return self._drawn(items, epoch)[3]

    def target(self, items: torch.Tensor, epoch: int) -> LinkTarget:
        """The pairs as rows of :meth:`seeds`, with their labels."""
        src, dst, label, seeds = self._drawn(items, epoch)
        return LinkTarget(torch.stack([torch.searchsorted(seeds, src),
                                       torch.searchsorted(seeds, dst)]), label)

    def score(self, zu: torch.Tensor, zv: torch.Tensor) -> torch.Tensor:
        """The decoder's logits of row pairs (on the decoder's device when it has weights:
        offloading strategies hold their rows on the host)."""
        weight = next(self.head.parameters(), None)
        if weight is not None and zu.device != weight.device:
            zu, zv = zu.to(weight.device), zv.to(weight.device)
        return self.head(zu, zv)

    def score_pairs(self, rows: torch.Tensor, src: torch.Tensor, dst: torch.Tensor
                    ) -> torch.Tensor:
        """:meth:`score` of ``rows[src]`` and ``rows[dst]``, the gather fused into the
        decoder where the rows sit with it (the same bits, :mod:`gnnscale.tasks.link.decoders`)."""
        weight = next(self.head.parameters(), None)
        if weight is not None and rows.device != weight.device:
            return self.score(rows[src], rows[dst])
        return self.head.score_pairs(rows, src, dst)

    def loss(self, rows: torch.Tensor, target: LinkTarget, total: int | None = None
             ) -> torch.Tensor:
        """Binary cross-entropy of the micro-batch's pairs: the mean, or the sum over
        ``total``."""
        logits = self.score_pairs(rows, target.index[0], target.index[1])
        label = target.label.to(logits.dtype)
        if total is None:
            return F.binary_cross_entropy_with_logits(logits, label)
        return F.binary_cross_entropy_with_logits(logits, label, reduction="sum") / total

    def locator(self, row_ids: torch.Tensor, group: dist.ProcessGroup | None) -> RowLocator:
        """Who holds which row (remembered for the same ``row_ids`` tensor: a full-graph
        strategy's masters are the same every epoch)."""
        key = self._locator
        if key is None or key[0] is not row_ids or key[1] is not group:
            self._locator = (row_ids, group, RowLocator.build(row_ids, group))
        return self._locator[2]

    def sharded_loss(self, rows: torch.Tensor, row_ids: torch.Tensor, items: torch.Tensor,
                     epoch: int, group: dist.ProcessGroup | None = None) -> torch.Tensor:
        """The summed cross-entropy of the pairs this rank scores, over every pair of
        ``items`` (collective: the endpoint rows it lacks come from their holders)."""
        src, dst, label = self.pairs(items, epoch)
        table, a, b, mine = pair_index(rows, self.locator(row_ids, group), src, dst,
                                       self.graph.num_nodes, group, self.stats)
        logits = self.score_pairs(table, a, b)
        return F.binary_cross_entropy_with_logits(
            logits, label[mine].to(logits.device, logits.dtype), reduction="sum") / src.numel()

    # -- evaluation -----------------------------------------------------------------------------
    def eval_pairs(self, splits: tuple[str, ...]) -> list[tuple[str, torch.Tensor, torch.Tensor]]:
        """``(split, positives, negatives)`` of the splits the task has edges for."""
        links = self.graph.links
        return [(s, links[f"{s}_pos"].long(), links[f"{s}_neg"].long()) for s in splits
                if f"{s}_pos" in links and links[f"{s}_pos"].shape[1]]

    def evaluate(self, model: torch.nn.Module, graph: GraphStore, device: torch.device,
                 batch_size: int, splits: tuple[str, ...] = ("val", "test"),
                 group: dist.ProcessGroup | None = None) -> dict[str, float]:
        """Embeddings of every endpoint by layer-wise full-neighbour inference (each rank its
        share), then the scored pairs and their metrics (collective)."""
        from gnnscale.evaluation.evaluate import layerwise_logits

        todo = self.eval_pairs(splits)
        if not todo:
            return {}
        nodes = torch.unique(torch.cat([torch.cat([p, q], 1) for _, p, q in todo], 1))
        rows = layerwise_logits(model, graph, nodes, device, batch_size, group)
        mine = torch.tensor_split(nodes, group_size(group))[group_rank(group)]
        return self._scored(rows, mine, todo, group)

    def evaluate_owned(self, model: torch.nn.Module, forward: Callable[[], torch.Tensor],
                       masters: torch.Tensor, splits: tuple[str, ...],
                       group: dist.ProcessGroup | None) -> dict[str, float]:
        """The same metrics from each rank's rows of its masters."""
        todo = self.eval_pairs(splits)
        if not todo:
            return {}
        return self._scored(eval_mode(model, forward), masters, todo, group)

    def _scored(self, rows: torch.Tensor, row_ids: torch.Tensor, todo: list,
                group: dist.ProcessGroup | None) -> dict[str, float]:
        """Score every pair of ``todo`` from rows spread over ``group``; the metrics."""
        src = torch.cat([torch.cat([p[0], q[0]]) for _, p, q in todo])
        dst = torch.cat([torch.cat([p[1], q[1]]) for _, p, q in todo])
        with torch.no_grad():
            table, a, b, mine = pair_index(rows, RowLocator.build(row_ids, group), src, dst,
                                           self.graph.num_nodes, group, self.stats)
            scores = gather_scores(self.score_pairs(table, a, b), mine, src.numel(), group)
        out, at = {}, 0
        groups = self.graph.meta.get("neg_groups", {})
        for s, p, q in todo:
            pos, neg = scores[at: at + p.shape[1]], scores[at + p.shape[1]: at + p.shape[1]
                                                             + q.shape[1]]
            at += p.shape[1] + q.shape[1]
            out.update(self.metrics(s, pos, neg, int(groups.get(s, 0))))
        return out

    def metrics(self, split: str, pos: torch.Tensor, neg: torch.Tensor, group_k: int
                ) -> dict[str, float]:
        """``<split>_{auc,ap,hits@K,mrr,loss}`` of the positives' and negatives' logits;
        MRR when each positive has its own ``group_k`` negatives."""
        scores = torch.cat([pos, neg])
        labels = torch.cat([torch.ones_like(pos), torch.zeros_like(neg)])
        out = {f"{split}_auc": metrics.roc_auc(scores, labels),
               f"{split}_ap": metrics.average_precision(scores, labels),
               f"{split}_loss": float(F.binary_cross_entropy_with_logits(scores, labels))}
        for k in self.hits_k:
            out[f"{split}_hits@{k}"] = metrics.hits_at_k(pos, neg, k)
        if group_k:
            out[f"{split}_mrr"] = metrics.mrr(pos, neg.reshape(pos.numel(), group_k))
        return out

    def predict(self, on: Predicting, **options: Any) -> Predicted:
        """Scores of given pairs (``pairs=``) and each source's ``top_k`` destinations
        (:func:`gnnscale.tasks.link.predict.predict`)."""
        from gnnscale.tasks.link.predict import predict

        return predict(self, on, **options)
