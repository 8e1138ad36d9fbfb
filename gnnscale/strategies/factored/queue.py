"""The global queue of the factored strategy: sampled mini-batches sent sampler -> trainer.

A job is one trainer's micro-batch of one step. A sampler encodes its sample with the
mini-batch codec (:mod:`gnnscale.sampling.codec`: an int64 header and one flat int64 body) and
sends both point-to-point (``isend`` on a gloo group: shared memory / loopback on one host, TCP
across hosts); at most ``depth`` jobs per trainer may be in flight from one sampler
(back-pressure: the sampler waits for the oldest). The trainer receives its jobs in step order
from the sampler the schedule names.

Header (int64): ``epoch, step``, then the codec's header (``len(n_id), num_targets``, then per
layer ``num_edges, num_src, num_dst, flags``). A header alone with ``len(n_id) = -1`` is a
*taken* marker (dynamic switching): the job was kept and trained by the sampler named in the
fourth field, and the trainer has no job this step.
"""

from __future__ import annotations

import time
from collections import deque

import torch
import torch.distributed as dist

from gnnscale.sampling import codec
from gnnscale.sampling.base import MiniBatch

HEAD = 2  # epoch, step: the codec's header follows
STATS_TAG = 1  # end-of-epoch sampler statistics travel on their own tag


def header_size(num_layers: int) -> int:
    """Entries of a job header for a model of ``num_layers`` layers."""
    return HEAD + codec.header_size(num_layers)


def pack(mb: MiniBatch, epoch: int, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(header, body)`` of one sampled micro-batch."""
    head, parts = codec.encode_parts(mb)
    return (torch.tensor([epoch, step] + head, dtype=torch.int64),
            torch.cat([p.long() for p in parts]))


def taken_marker(num_layers: int, epoch: int, step: int, taker: int) -> torch.Tensor:
    """The header that tells a trainer its job ``(epoch, step)`` was taken by rank ``taker``."""
    head = torch.zeros(header_size(num_layers), dtype=torch.int64)
    head[:HEAD + 2] = torch.tensor([epoch, step, -1, taker])
    return head


def body_size(header: torch.Tensor) -> int:
    """Entries of the body a ``header`` announces."""
    return codec.body_size(header.tolist()[HEAD:])


def unpack(header: torch.Tensor, body: torch.Tensor) -> tuple[int, int, MiniBatch]:
    """``(epoch, step, MiniBatch)`` from a received header and body."""
    h = header.tolist()
    return h[0], h[1], codec.decode(h[HEAD:], body)


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
