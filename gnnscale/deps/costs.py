"""Probe the per-dimension costs of NeutronStar's model on this machine.

``t_vertex``: seconds per multiply-add of a dense vertex update (rows x in x out);
``t_edge``: seconds per edge per feature of an aggregation as the models run it: a sparse CSR
product (a sum or mean: SAGE, GCN), or a gather-scatter of one message row per edge
(``sparse=False``: attention and max); the gather-scatter costs 4-8x the product per edge;
``t_comm``: seconds per float shuffled between ranks (all_to_all; 0 on one rank);
``t_sync``: seconds of one exchange whatever it carries (a one-float-per-peer all_to_all: the
latency and the wait for the slowest peer that every exchange pays; 0 on one rank).
Ranks agree by taking the maximum of each figure.
"""

from __future__ import annotations

import statistics
import time
import warnings
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.distributed import ProcessGroup

from gnnscale.distributed.collectives import all_reduce_host
from gnnscale.distributed.device import comm_device


@dataclass
class Costs:
    """Per-dimension seconds: a vertex-update multiply-add, an edge per feature, a float sent;
    and the fixed seconds of one exchange (``t_sync``)."""

    t_vertex: float
    t_edge: float
    t_comm: float
    t_sync: float = 0.0


def _times(fn, repeats: int) -> list[float]:
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def _best(fn, repeats: int = 5) -> float:
    return min(_times(fn, repeats))


def probe_costs(dim: int = 128, rows: int = 4096, edges: int = 32768,
                group: ProcessGroup | None = None,
                sparse: bool = True) -> Costs:
    """Time a dense update, an aggregation (a CSR product, or with ``sparse=False`` a
    gather-scatter) and an all_to_all; collective when distributed."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(rows, dim, generator=g)
    w = torch.randn(dim, dim, generator=g)
    src = torch.randint(0, rows, (edges,), generator=g)
    dst = torch.randint(0, rows, (edges,), generator=g)
    t_vertex = _best(lambda: x @ w) / (rows * dim * dim)
    if sparse:  # what a sum/mean conv runs (PyG's fused product, fullgraph's fixed product)
        order = torch.argsort(dst, stable=True)
        crow = torch.zeros(rows + 1, dtype=torch.int64)
        crow[1:] = torch.bincount(dst, minlength=rows).cumsum(0)
        with warnings.catch_warnings():  # torch's "beta state" / invariant-check notices
            warnings.simplefilter("ignore", UserWarning)
            adj = torch.sparse_csr_tensor(crow, src[order], torch.ones(edges), (rows, rows),
                                          check_invariants=False)
            t_edge = _best(lambda: torch.sparse.mm(adj, x)) / (edges * dim)
    else:
        t_edge = _best(lambda: torch.zeros_like(x).index_add_(0, dst, x[src])) / (edges * dim)
    t_comm = t_sync = 0.0
    if dist.is_initialized() and dist.get_world_size(group) > 1:
        world = dist.get_world_size(group)
        # hidden rows travel from the group's device: time them from there
        send = torch.randn(world * rows // 4, dim, generator=g).to(comm_device(group))
        recv = torch.empty_like(send)
        t_comm = _best(lambda: dist.all_to_all_single(recv, send, group=group)) / send.numel()
        # an exchange's fixed cost: the median (not the best) of a tiny all_to_all, as an
        # epoch's exchanges meet peers that are late as often as not
        one, got = send[:world, :1].contiguous(), recv[:world, :1].contiguous()
        t_sync = statistics.median(
            _times(lambda: dist.all_to_all_single(got, one, group=group), 9))
        agreed = torch.tensor([t_vertex, t_edge, t_comm, t_sync], dtype=torch.float64)
        all_reduce_host(agreed, op=dist.ReduceOp.MAX, group=group)
        t_vertex, t_edge, t_comm, t_sync = agreed.tolist()
    return Costs(t_vertex, t_edge, t_comm, t_sync)


def layer_costs(costs: Costs, dims: list[int], comm_weight: float = 1.0) -> torch.Tensor:
    """3 x (L + 1) figures for layers 0..L (``dims[i]`` = width of layer i's rows).

    Row ``i`` of each third: shuffling one layer-i row (forward and backward), one edge of
    conv ``i`` (forward and backward, about 3 passes over the row), one vertex of conv ``i``.
    """
    L = len(dims) - 1
    comm = [comm_weight * 2 * d * costs.t_comm for d in dims]
    edge = [3 * d * costs.t_edge for d in dims]
    vertex = [3 * dims[i] * dims[i + 1] * costs.t_vertex if i < L else 0.0
              for i in range(L + 1)]
    return torch.tensor(comm + edge + vertex, dtype=torch.float64)
