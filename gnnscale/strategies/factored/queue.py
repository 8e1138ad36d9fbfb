"""The global queue of the factored strategy: sampled mini-batches sent sampler -> trainer.

A job is one trainer's micro-batch of one step. A sampler packs its sample into a fixed-size
header and one flat int64 tensor and sends both point-to-point (``isend`` on a gloo group:
shared memory / loopback on one host, TCP across hosts); at most ``depth`` jobs per trainer
may be in flight from one sampler (back-pressure: the sampler waits for the oldest). The
trainer receives its jobs in step order from the sampler the schedule names.

Header (int64): ``epoch, step, len(n_id), num_targets`` then per layer
``num_edges, num_src, num_dst, ids, weighted`` where ``ids`` is 0 (no ``src_ids``), 1
(``src_ids`` is ``n_id[:num_src]``, not sent) or 2 (``src_ids`` sent after the edges), and
``weighted`` is 1 when the block carries ``edge_weight`` (float32, sent exactly as the bits of
its float64 values, one int64 per edge, after every layer's ``src_ids``). A header alone with
``len(n_id) = -1`` is a *taken* marker (dynamic switching): the job was kept and trained by the
sampler named in the fourth field, and the trainer has no job this step.
"""

from __future__ import annotations

import time
from collections import deque

import torch
import torch.distributed as dist

from gnnscale.sampling.base import Block, MiniBatch

HEAD = 4
PER_LAYER = 5
STATS_TAG = 1  # end-of-epoch sampler statistics travel on their own tag


def header_size(num_layers: int) -> int:
    """Entries of a job header for a model of ``num_layers`` layers."""
    return HEAD + PER_LAYER * num_layers


def pack(mb: MiniBatch, epoch: int, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(header, body)`` of one sampled micro-batch."""
    head = [epoch, step, mb.n_id.numel(), mb.num_targets]
    parts = [mb.n_id.long()]
    extra, weights = [], []
    for b in mb.blocks:
        ids = 0
        if b.src_ids is not None:
            prefix = mb.n_id[: b.num_src]
            ids = 1 if torch.equal(b.src_ids.long(), prefix.long()) else 2
            if ids == 2:
                extra.append(b.src_ids.long())
        if b.edge_weight is not None:
            if b.edge_weight.dtype != torch.float32:
                raise TypeError(f"factored queue: edge_weight must be float32, got "
                                f"{b.edge_weight.dtype}")
            weights.append(b.edge_weight.reshape(-1).double().view(torch.int64))
        head += [b.num_edges, b.num_src, b.num_dst, ids, int(b.edge_weight is not None)]
        parts.append(b.edge_index.long().reshape(-1))
    return torch.tensor(head, dtype=torch.int64), torch.cat(parts + extra + weights)


def taken_marker(num_layers: int, epoch: int, step: int, taker: int) -> torch.Tensor:
    """The header that tells a trainer its job ``(epoch, step)`` was taken by rank ``taker``."""
    head = torch.zeros(header_size(num_layers), dtype=torch.int64)
    head[:HEAD] = torch.tensor([epoch, step, -1, taker])
    return head


def body_size(header: torch.Tensor) -> int:
    """Entries of the body a ``header`` announces."""
    h = header.tolist()
    layers = h[HEAD:]
    size = h[2]
    for i in range(0, len(layers), PER_LAYER):
        e, ns, _, ids, weighted = layers[i: i + PER_LAYER]
        size += 2 * e + (ns if ids == 2 else 0) + (e if weighted else 0)
    return size


def unpack(header: torch.Tensor, body: torch.Tensor) -> tuple[int, int, MiniBatch]:
    """``(epoch, step, MiniBatch)`` from a received header and body."""
    h = header.tolist()
    epoch, step, n, targets = h[:HEAD]
    n_id, pos, blocks, explicit, weighted = body[:n], n, [], [], []
    layers = h[HEAD:]
    for i in range(0, len(layers), PER_LAYER):
        e, ns, nd, ids, has_weight = layers[i: i + PER_LAYER]
        blocks.append(Block(body[pos: pos + 2 * e].view(2, e), (ns, nd),
                            n_id[:ns] if ids == 1 else None))
        if ids == 2:
            explicit.append((len(blocks) - 1, ns))
        if has_weight:
            weighted.append((len(blocks) - 1, e))
        pos += 2 * e
    for layer, ns in explicit:
        blocks[layer].src_ids = body[pos: pos + ns]
        pos += ns
    for layer, e in weighted:
        blocks[layer].edge_weight = body[pos: pos + e].view(torch.float64).float()
        pos += e
    return epoch, step, MiniBatch(n_id, blocks, targets)


class JobSender:
    """A sampler's side: non-blocking sends, at most ``depth`` jobs in flight per trainer."""

    def __init__(self, group: dist.ProcessGroup, depth: int) -> None:
        self.group, self.depth = group, depth
        self.in_flight: dict[int, deque] = {}
        self.bytes = 0
        self.wait_seconds = 0.0
        self.peak_in_flight = 0  # most jobs ever in flight to one trainer (<= depth)

    def send(self, dst: int, header: torch.Tensor, body: torch.Tensor | None) -> None:
        """Send one job to trainer ``dst`` without waiting, bounded by the queue depth."""
        pending = self.in_flight.setdefault(dst, deque())
        if len(pending) >= self.depth:
            self._wait(pending.popleft())
        works = [dist.isend(header, dst, group=self.group)]
        if body is not None:  # None: a taken marker, header only
            works.append(dist.isend(body, dst, group=self.group))
        pending.append((works, header, body))  # the tensors live until the send completes
        self.peak_in_flight = max(self.peak_in_flight, len(pending))
        self.bytes += (header.numel() + (0 if body is None else body.numel())) * 8

    def drain(self) -> None:
        """Wait for every job in flight (the queue is empty at the epoch's end)."""
        for pending in self.in_flight.values():
            while pending:
                self._wait(pending.popleft())

    def _wait(self, item) -> None:
        t0 = time.perf_counter()
        for work in item[0]:
            work.wait()
        self.wait_seconds += time.perf_counter() - t0


def receive_parts(src: int, num_layers: int, group: dist.ProcessGroup
                  ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The next job's ``(header, body)`` from ``src`` (body None for a taken marker)."""
    header = torch.empty(header_size(num_layers), dtype=torch.int64)
    dist.recv(header, src, group=group)
    if int(header[2]) < 0:
        return header, None
    body = torch.empty(body_size(header), dtype=torch.int64)
    dist.recv(body, src, group=group)
    return header, body


def receive(src: int, num_layers: int, group: dist.ProcessGroup
            ) -> tuple[int, int, MiniBatch | None, int]:
    """A trainer's side: ``(epoch, step, MiniBatch, bytes)`` of the next job from ``src``; the
    MiniBatch is None for a taken marker."""
    header, body = receive_parts(src, num_layers, group)
    if body is None:
        return int(header[0]), int(header[1]), None, header.numel() * 8
    epoch, step, mb = unpack(header, body)
    return epoch, step, mb, (header.numel() + body.numel()) * 8
