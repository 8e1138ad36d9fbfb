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
