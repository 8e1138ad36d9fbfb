"""Rows fetched from their owners at the asker's own pace: a row server on every rank.

A rank that trains from a partitioned layout (``parts=``) holds its own feature rows only
(a :class:`~gnnscale.partition.parts.RowView`); the feature store fetches the others from their
owners. :class:`~gnnscale.cache.exchange.DistExchange` does that in lockstep (every rank calls
each fetch); :class:`ServedExchange` does it point to point, so a rank fetches whenever it
needs rows and its owners answer whatever they are doing (``strategy=factored``: trainers
gather at their own pace from the job queue while sampler ranks sample).

Each rank runs a server thread that answers requests for its own rows. A request travels on
the requests' process group: a header ``(count, tag)`` to the owner on tag 0 (received from any
rank), then the ``count`` ids on ``tag``; the owner answers on the replies' process group with a
status (1: served, 0: it could not read the rows, said in its log) on ``2 * tag`` and the rows
on ``2 * tag + 1``. The asker posts its receives before it sends the request, so an owner never
waits for it; each request of a process has its own tag, so several threads of one rank may
fetch at once. A fetch waits under the groups' deadline (``dist.timeout_s``): an owner that
stops answering ends the run. A server waits for the next request up to a week (the longest
``dist.timeout_s``): a rank whose rows nobody needs for a while is not an error.

:meth:`ServedExchange.close` says ``(-1, 0)`` (done) to every peer and waits until each peer has
said it too (a rank keeps serving while any other may still ask: a sampler rank serves the
trainers' evaluation from its close); the server thread then ends. With an exception in flight
it only says done, and the thread (a daemon) ends with the process.
"""

from __future__ import annotations

import itertools
import sys
import threading
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from gnnscale.cache.exchange import Exchange, Serve
from gnnscale.distributed.schemas import MAX_TIMEOUT_S

DONE = -1
_TAGS = 1 << 29  # tags cycle below this: 2 * tag + 1 fits gloo's 32-bit tags
_IDLE = timedelta(seconds=MAX_TIMEOUT_S)  # the server waits this long for a request


class ServedExchange(Exchange):
    """This rank's row server (its ``view``'s rows, in a thread) and its client: not collective.

    ``groups``: the requests' and the replies' process groups, of the same ranks (every rank
    of the world in rank order: :func:`served_groups`); owners are named by their rank in
    them."""

    def __init__(self, view: Any, groups: tuple[dist.ProcessGroup, dist.ProcessGroup]) -> None:
        self.view = view
        self.ask, self.reply = groups
        self.rank, self.world = self.ask.rank(), self.ask.size()
        self._tags = itertools.count(1)
        self._lock = threading.Lock()
        self.done: set[int] = set()  # peers that said they ask no more
        self.error: BaseException | None = None
        self.closed = False
        self.thread = threading.Thread(target=self._run, name="gnnscale-row-server",
                                       daemon=True)
        self.thread.start()

    # -- the server ------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while len(self.done) < self.world - 1:
                head = torch.empty(2, dtype=torch.int64)
                work = self.ask.recv_anysource([head], 0)
                work.wait(_IDLE)
                src = int(work._source_rank())
                count, tag = head.tolist()
                if count == DONE:
                    self.done.add(src)
                    continue
                self._answer(src, count, tag)
        except BaseException as err:  # noqa: BLE001 - raised by close on the rank's thread
            self.error = err

    def _answer(self, src: int, count: int, tag: int) -> None:
        ids = torch.empty(count, dtype=torch.int64)
        self.ask.recv([ids], src, tag).wait()
        try:
            rows = self.view.rows[self.view.positions(ids)].contiguous()
        except Exception as err:  # noqa: BLE001 - the asker fails, naming this rank
            print(f"rank {self.rank}'s row server could not serve rank {src}: {err}",
                  file=sys.stderr, flush=True)
            self.reply.send([torch.zeros(1, dtype=torch.int64)], src, 2 * tag).wait()
            return
        self.reply.send([torch.ones(1, dtype=torch.int64)], src, 2 * tag).wait()
        self.reply.send([rows], src, 2 * tag + 1).wait()

    # -- the client ------------------------------------------------------------------------------
    def _tag(self) -> int:
        with self._lock:
            return next(self._tags) % (_TAGS - 1) + 1

    def fetch(self, ids: torch.Tensor, owners: torch.Tensor, serve: Serve,
              num_features: int, dtype: torch.dtype) -> torch.Tensor:
        """Rows of ``ids`` from the servers of ``owners`` (all asked at once, then waited for);
        ``serve`` is unused: this rank's server answers its peers. Not collective."""
        if self.error is not None:
            raise RuntimeError(f"rank {self.rank}'s row server failed: {self.error}") \
                from self.error
        device = ids.device
        ids, owners = ids.cpu().long(), owners.cpu().long()
        out = torch.empty(ids.numel(), num_features, dtype=dtype)
        asked = []
        for owner in torch.unique(owners).tolist():
            pos = (owners == owner).nonzero().flatten()
            want = ids[pos].contiguous()
            if owner == self.rank:  # its own rows: no request
                out[pos] = self.view.rows[self.view.positions(want)].to(dtype)
                continue
            tag = self._tag()
            status = torch.empty(1, dtype=torch.int64)
            # in the servers' dtype (every rank's view of its own part file), rounded to
            # ``dtype`` on arrival (cache.feature_dtype: as the asker's rounded copy)
            rows = torch.empty(want.numel(), num_features, dtype=self.view.rows.dtype)
            head = torch.tensor([want.numel(), tag], dtype=torch.int64)
            works = [self.reply.recv([status], owner, 2 * tag),
                     self.reply.recv([rows], owner, 2 * tag + 1),
                     self.ask.send([head], owner, 0), self.ask.send([want], owner, tag)]
            asked.append((owner, pos, status, rows, works, head, want))
        for owner, pos, status, rows, works, *_ in asked:
            works[0].wait()
            if int(status) != 1:
                raise RuntimeError(f"rank {owner} could not serve {pos.numel()} feature rows "
                                   f"to rank {self.rank} (its log says why)")
            for work in works[1:]:
                work.wait()
            out[pos] = rows
        return out.to(device)

    # -- the end ---------------------------------------------------------------------------------
    def close(self) -> None:
        """Say done to every peer, then (unless an exception is in flight) wait until every
        peer has said it too, and raise what the server met. Idempotent."""
        if self.closed:
            return
        self.closed = True
        failing = sys.exc_info()[0] is not None
        stop = torch.tensor([DONE, 0], dtype=torch.int64)
        sends = []
        for peer in range(self.world):
            if peer != self.rank:
                try:
                    sends.append(self.ask.send([stop], peer, 0))
                except RuntimeError:
                    if not failing:
                        raise
        if failing:
            return
        for work in sends:
            work.wait()
        while self.thread.is_alive() and self.error is None:
            self.thread.join(timeout=0.5)
        if self.error is not None:
            missing = sorted(set(range(self.world)) - self.done - {self.rank})
            raise RuntimeError(f"rank {self.rank}'s row server failed while ranks {missing} "
                               f"could still ask it: {self.error}") from self.error


def served_groups(world: int) -> tuple[dist.ProcessGroup, dist.ProcessGroup]:
    """The requests' and the replies' gloo groups of every rank (collective: every rank of
    the world calls it, in the same order)."""
    from gnnscale.distributed.collectives import new_group
    from gnnscale.distributed.device import Purpose

    return (new_group(range(world), purpose=Purpose.host),
            new_group(range(world), purpose=Purpose.host))
