"""Rank-to-rank fetch of cached feature rows for partitioned placement.

A :class:`DistExchange` is collective: every rank calls :meth:`fetch` once per gather, also with
no ids to ask for, because ids and rows move with three ``all_to_all_single`` calls (counts,
requested ids, rows back; supported on gloo and nccl). :class:`LocalExchange` serves the same
requests in one process from the stores of simulated ranks (benchmarks and single-process
evaluation); it is not collective.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist

Serve = Callable[[torch.Tensor], torch.Tensor]


class Exchange:
    """Fetches rows of ``ids`` from the ranks in ``owners`` (one owner per id)."""

    def fetch(self, ids: torch.Tensor, owners: torch.Tensor, serve: Serve,
              num_features: int, dtype: torch.dtype) -> torch.Tensor:
        """Rows ``[len(ids), num_features]`` of ``dtype``, row ``i`` from rank ``owners[i]``;
        ``serve`` answers the ids peers ask of this rank."""
        raise NotImplementedError


class DistExchange(Exchange):
    """Batched request/response over ``torch.distributed`` (collective on ``group``)."""

    def __init__(self, group: dist.ProcessGroup | None = None) -> None:
        if not dist.is_initialized():
            raise RuntimeError("DistExchange needs an initialised torch.distributed process "
                               "group (start ranks with gnnscale.distributed.spawn or torchrun)")
        self.group = group
        self.world_size = dist.get_world_size(group)

    def fetch(self, ids: torch.Tensor, owners: torch.Tensor, serve: Serve,
              num_features: int, dtype: torch.dtype) -> torch.Tensor:
        """Three ``all_to_all_single`` calls (counts, ids by owner, the rows ``serve`` reads for
        peers); collective: every rank calls it, also with no ids."""
        device = ids.device
        order = torch.argsort(owners, stable=True)
        send_ids = ids[order].contiguous()
        send_counts = torch.bincount(owners.long(), minlength=self.world_size)
        recv_counts = torch.empty_like(send_counts)
        dist.all_to_all_single(recv_counts, send_counts, group=self.group)
        send_sizes, recv_sizes = send_counts.tolist(), recv_counts.tolist()
        requested = torch.empty(sum(recv_sizes), dtype=ids.dtype, device=device)
        dist.all_to_all_single(requested, send_ids, recv_sizes, send_sizes, group=self.group)
        served = serve(requested).contiguous()
        received = torch.empty(ids.numel(), num_features, dtype=dtype, device=device)
        dist.all_to_all_single(received, served, send_sizes, recv_sizes, group=self.group)
        rows = torch.empty_like(received)
        rows[order] = received
        return rows


class LocalExchange(Exchange):
    """Serves requests from the in-process stores of all simulated ranks (``serve`` unused)."""

    def __init__(self, stores: Sequence) -> None:
        self.stores = stores

    def fetch(self, ids: torch.Tensor, owners: torch.Tensor, serve: Serve,
              num_features: int, dtype: torch.dtype) -> torch.Tensor:
        """Reads each owner's rows straight from its in-process store; not collective."""
        rows = torch.empty(ids.numel(), num_features, dtype=dtype, device=ids.device)
        for rank in torch.unique(owners).tolist():
            sel = owners == rank
            rows[sel] = self.stores[rank].serve(ids[sel]).to(ids.device)
        return rows
