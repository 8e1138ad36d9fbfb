"""Run a producer ahead of the consumer in a background thread (bounded queue).

Native sampling ops release the GIL, so sampling the next batches overlaps compute.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

_DONE = object()


class Prefetcher:
    """Iterate ``fn(item)`` for ``items`` computed ``depth`` ahead; yields ``(result, seconds)``.

    ``depth=0`` computes inline. An exception in the producer is re-raised in the consumer.
    """

    def __init__(self, fn: Callable[[Any], Any], items: Iterable[Any], depth: int = 2) -> None:
        self.fn, self.items, self.depth = fn, list(items), depth
        self._stop = threading.Event()

    def _produce(self, q: queue.Queue) -> None:
        try:
            for item in self.items:
                if self._stop.is_set():
                    return
                t0 = time.perf_counter()
                out = self.fn(item)
                q.put((out, time.perf_counter() - t0))
            q.put(_DONE)
        except BaseException as err:  # noqa: BLE001 - handed to the consumer
            q.put(err)

    def __iter__(self) -> Iterator[tuple[Any, float]]:
        if self.depth <= 0:
            for item in self.items:
                t0 = time.perf_counter()
                out = self.fn(item)
                yield out, time.perf_counter() - t0
            return
        q: queue.Queue = queue.Queue(maxsize=self.depth)
        thread = threading.Thread(target=self._produce, args=(q,), daemon=True)
        thread.start()
        try:
            while True:
                got = q.get()
                if got is _DONE:
                    return
                if isinstance(got, BaseException):
                    raise got
                yield got
        finally:
            self._stop.set()
            while thread.is_alive():  # unblock a producer waiting on a full queue
                try:
                    q.get_nowait()
                except queue.Empty:
                    thread.join(timeout=0.05)


class StreamFeed:
    """``fn(item)`` over a stream of ``items`` (it may be endless), ``depth`` ahead of the
    consumer in one thread that lives across epochs: the next epoch's first items are
    prepared while this one's last steps train, so an epoch does not start by waiting for
    them. :meth:`take` yields the next ``n`` results as ``(result, seconds)``.

    ``fn`` may run collectives (the items are the same on every rank): :meth:`close` lets
    the producer finish exactly ``taken + depth + 1`` items, the most it can have started,
    before it stops. Every rank takes the same number of items before closing, so every rank's
    producer runs the same collectives and none is left waiting for a peer's. An exception in
    the producer is re-raised in the consumer.
    """

    def __init__(self, fn: Callable[[Any], Any], items: Iterable[Any], depth: int = 2) -> None:
        if depth < 1:
            raise ValueError(f"StreamFeed: depth must be >= 1, got {depth}")
        self.fn, self.depth = fn, depth
        self.taken = 0
        self._stop_at: float = float("inf")
        self._lock = threading.Lock()
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._done = False
        self._thread = threading.Thread(target=self._produce, args=(iter(items),), daemon=True)
        self._thread.start()

    def _produce(self, items: Iterator[Any]) -> None:
        try:
            for index, item in enumerate(items):
                with self._lock:
                    if index >= self._stop_at:
                        break
                t0 = time.perf_counter()
                out = self.fn(item)
                self._queue.put((out, time.perf_counter() - t0))
            self._queue.put(_DONE)
        except BaseException as err:  # noqa: BLE001 - handed to the consumer
            self._queue.put(err)

    def take(self, n: int) -> Iterator[tuple[Any, float]]:
        """The next ``n`` results in order (fewer if the stream ends)."""
        for _ in range(n):
            if self._done:
                return
            got = self._queue.get()
            if got is _DONE:
                self._done = True
                return
            if isinstance(got, BaseException):
                self._done = True
                raise got
            self.taken += 1
            yield got

    def close(self) -> None:
        """Stop after ``taken + depth + 1`` items (see the class docstring), dropping the
        results nobody takes."""
        with self._lock:
            self._stop_at = self.taken + self.depth + 1
        while self._thread.is_alive():
            try:
                self._queue.get(timeout=0.05)
            except queue.Empty:
                pass
        self._done = True
