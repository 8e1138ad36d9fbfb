"""The prefetchers: a feed that outlives an epoch, stopped where every rank agrees."""

import threading
import time

import pytest

from gnnscale.sampling.prefetch import Prefetcher, StreamFeed


def test_prefetcher_yields_every_item_in_order():
    assert [out for out, _ in Prefetcher(lambda x: x * 2, range(5), 2)] == [0, 2, 4, 6, 8]
    assert [out for out, _ in Prefetcher(lambda x: x * 2, range(5), 0)] == [0, 2, 4, 6, 8]


def test_a_stream_feed_runs_on_into_the_next_epoch_and_stops_at_taken_plus_depth_plus_one():
    """Epochs take their items from one endless stream in order; the producer prepares the
    next epoch's first items before they are asked for, and on close finishes exactly
    taken + depth + 1 items, however far it had got, so ranks whose items are collectives
    all run the same ones."""
    for depth in (1, 2, 3):
        calls: list[int] = []
        lock = threading.Lock()

        def fn(x: int) -> int:
            with lock:
                calls.append(x)
            return x * x

        feed = StreamFeed(fn, iter(range(10**9)), depth)
        first = [out for out, _ in feed.take(3)]
        deadline = time.monotonic() + 5
        while len(calls) < 3 + depth + 1 and time.monotonic() < deadline:
            time.sleep(0.01)  # the producer runs ahead on its own: the next epoch's items
        assert len(calls) == 3 + depth + 1  # depth queued, one blocked on the full queue
        second = [out for out, _ in feed.take(4)]
        assert first == [0, 1, 4] and second == [9, 16, 25, 36]
        feed.close()
        assert calls == list(range(7 + depth + 1))  # exactly taken + depth + 1, in order


def test_a_slow_stream_feed_is_run_up_to_the_agreed_item_on_close():
    """A producer behind the others (it has started fewer items) still runs up to
    taken + depth + 1 before it stops: the item count does not depend on timing."""
    started = threading.Event()
    calls: list[int] = []

    def slow(x: int) -> int:
        started.set()
        time.sleep(0.02)
        calls.append(x)
        return x

    feed = StreamFeed(slow, iter(range(100)), 2)
    assert [out for out, _ in feed.take(1)] == [0]
    feed.close()
    assert calls == [0, 1, 2, 3]


def test_a_stream_feed_hands_on_the_producers_error_and_a_short_stream_ends():
    def boom(x: int) -> int:
        if x == 2:
            raise RuntimeError("producer failed on purpose")
        return x

    feed = StreamFeed(boom, iter(range(10)), 2)
    with pytest.raises(RuntimeError, match="on purpose"):
        list(feed.take(5))
    feed.close()
    short = StreamFeed(lambda x: x, iter(range(3)), 2)
    assert [out for out, _ in short.take(5)] == [0, 1, 2]
    short.close()
    with pytest.raises(ValueError, match="depth must be >= 1"):
        StreamFeed(lambda x: x, iter(range(3)), 0)
