"""Layer-wise full-neighborhood inference over all nodes (as PyG and DGL examples do).

Layer ``l`` is computed for every vertex from layer ``l-1`` of all its in-neighbors, so the
accuracy does not depend on sampling. Ranks split the vertices of each layer and all-gather
the hidden features; the last layer is computed only for the evaluated vertices.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from gnnscale.data.graph import GraphStore
from gnnscale.distributed.launch import Topology
from gnnscale.models.base import GNN
from gnnscale.sampling.neighbor import NeighborSampler


def _all_gather_rows(part: torch.Tensor, world: int) -> torch.Tensor:
    """Concatenate every rank's rows in rank order (row counts may differ by one)."""
    if world == 1:
        return part
    n = torch.tensor([part.shape[0]], device=part.device)
    sizes = [torch.zeros_like(n) for _ in range(world)]
    dist.all_gather(sizes, n)
    most = int(max(s.item() for s in sizes))
    pad = part.new_zeros((most, *part.shape[1:]))
    pad[: part.shape[0]] = part
    bufs = [torch.empty_like(pad) for _ in range(world)]
    dist.all_gather(bufs, pad)
    return torch.cat([b[: int(s.item())] for b, s in zip(bufs, sizes)])


@torch.no_grad()
def layerwise_logits(model: GNN, graph: GraphStore, nodes: torch.Tensor, topo: Topology,
                     batch_size: int = 4096) -> torch.Tensor:
    """Logits of this rank's share of ``nodes`` (``torch.tensor_split(nodes, world)[rank]``)."""
    was_training = model.training
    model.eval()
    one_hop = NeighborSampler(fanouts=[-1])
    h = graph.x
    world, rank = topo.world_size, topo.rank
    for layer in range(model.num_layers):
        last = layer == model.num_layers - 1
        targets = nodes if last else torch.arange(graph.num_nodes)
        mine = torch.tensor_split(targets, world)[rank]
        outs = []
        for chunk in torch.split(mine, batch_size):
            mb = one_hop.sample(graph, chunk, 0)
            x = h[mb.n_id].to(topo.device, non_blocking=True)
            outs.append(model.layer(layer, x, mb.blocks[0].to(topo.device)))
        out = torch.cat(outs) if outs else h.new_zeros((0, 0))
        h = out if last else _all_gather_rows(out, world).cpu()
    model.train(was_training)
    return h


def evaluate(model: GNN, graph: GraphStore, topo: Topology, batch_size: int = 4096,
             splits: tuple[str, ...] = ("val", "test")) -> dict[str, float]:
    """``<split>_acc`` for each split, identical on every rank (collective)."""
    idx = [getattr(graph, f"{s}_idx") for s in splits]
    present = [(s, i) for s, i in zip(splits, idx) if i is not None and i.numel()]
    if not present:
        return {}
    nodes = torch.cat([i for _, i in present])
    logits = layerwise_logits(model, graph, nodes, topo, batch_size)
    mine = torch.tensor_split(torch.arange(nodes.numel()), topo.world_size)[topo.rank]
    correct = (logits.argmax(-1).cpu() == graph.y[nodes[mine]]).float()
    which = torch.repeat_interleave(torch.arange(len(present)),
                                    torch.tensor([i.numel() for _, i in present]))[mine]
    counts = torch.zeros(len(present), dtype=torch.float64).index_add_(0, which,
                                                                       correct.double())
    if topo.world_size > 1:
        dist.all_reduce(counts)
    return {f"{s}_acc": float(counts[k]) / i.numel() for k, (s, i) in enumerate(present)}
