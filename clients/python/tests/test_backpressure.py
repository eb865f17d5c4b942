"""A slow consumer keeps the client flat: at most ``max_buffered`` events wait in the client,
the client stops reading tokenrelay's output past that (so tokenrelay pauses the HTTP
transfer), and every event still arrives, in order. Against the interop stack's resource
server (``/public/events``: ``count`` events padded to ``size`` bytes, no interval)."""

import asyncio
import time
import tracemalloc

import pytest
from stack_config import write_config

import tokenrelay

COUNT = 1500
SIZE = 4096  # about 6 MB of event data in all
BOUND = 16
CONSUMER_DELAY = 0.001  # the slow consumer (the scenario under test, not a wait for an outcome)


def _query():
    return {"count": COUNT, "interval": 0, "size": SIZE, "ping": 0}


def _seq(event):
    return int(event.id)


def _check(seqs, high_water, peak_growth):
    assert seqs == list(range(1, COUNT + 1)), "every event, in order"
    assert high_water <= BOUND
    # Unbounded, the reader buffers nearly the whole stream (> 6 MB of data, twice that as
    # Python objects); bounded, the client holds BOUND events and one 64 KiB read.
    assert peak_growth < 2 * 1024 * 1024, f"client grew by {peak_growth} bytes"


def test_sync_slow_consumer_keeps_the_client_flat(stack, real_bin, tmp_path):
    with tokenrelay.Relay(config=write_config(stack, tmp_path), binary=real_bin) as relay:
        relay.ping()
        tracemalloc.start()
        try:
            baseline = tracemalloc.get_traced_memory()[0]
            seqs = []
            with relay.subscribe("/public/events", query=_query(), auth=False, max_buffered=BOUND) as sub:
                while len(seqs) < COUNT:
                    seqs.append(_seq(sub.get(timeout=60)))
                    time.sleep(CONSUMER_DELAY)
                high_water = sub.high_water
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        relay.ping()  # the relay still answers after the subscription is closed
    _check(seqs, high_water, peak - baseline)


def test_async_slow_consumer_keeps_the_client_flat(stack, real_bin, tmp_path):
    async def main():
        async with tokenrelay.AsyncRelay(config=write_config(stack, tmp_path), binary=real_bin) as relay:
            await relay.ping()
            tracemalloc.start()
            try:
                baseline = tracemalloc.get_traced_memory()[0]
                seqs = []
                async with await relay.subscribe(
                        "/public/events", query=_query(), auth=False, max_buffered=BOUND) as sub:
                    while len(seqs) < COUNT:
                        seqs.append(_seq(await sub.get(timeout=60)))
                        await asyncio.sleep(CONSUMER_DELAY)
                    high_water = sub.high_water
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            await relay.ping()
            return seqs, high_water, peak - baseline

    _check(*asyncio.run(asyncio.wait_for(main(), 180)))


def test_max_buffered_must_be_positive(stack, real_bin, tmp_path):
    with tokenrelay.Relay(config=write_config(stack, tmp_path), binary=real_bin) as relay:
        with pytest.raises(ValueError):
            relay.subscribe("/public/events", auth=False, max_buffered=0)


def _wait_full(sub, count):
    """Waits (on the subscription's own condition, not a clock) until `count` items wait."""
    with sub._changed:
        assert sub._changed.wait_for(lambda: len(sub._items) >= count, timeout=60)


def test_close_releases_a_full_unread_subscription(stack, real_bin, tmp_path):
    relay = tokenrelay.Relay(config=write_config(stack, tmp_path), binary=real_bin)
    sub = relay.subscribe("/public/events", query={"count": 2000, "interval": 0, "ping": 0}, auth=False, max_buffered=4)
    _wait_full(sub, 4)  # the reader now waits for room: tokenrelay's output backs up
    assert relay.close() == 0, "shutdown was answered and exit decided the code"
    assert not relay._reader.is_alive(), "the reader was released, not left waiting"


def test_closing_a_full_unread_subscription_lets_other_calls_through(stack, real_bin, tmp_path):
    with tokenrelay.Relay(config=write_config(stack, tmp_path), binary=real_bin) as relay:
        sub = relay.subscribe("/public/events", query={"count": 2000, "interval": 0, "ping": 0}, auth=False, max_buffered=4)
        _wait_full(sub, 4)
        sub.close()
        relay.ping(timeout=60)


def test_async_close_releases_a_full_unread_subscription(stack, real_bin, tmp_path):
    async def main():
        relay = await tokenrelay.AsyncRelay(config=write_config(stack, tmp_path), binary=real_bin).start()
        sub = await relay.subscribe("/public/events", query={"count": 2000, "interval": 0, "ping": 0},
                                    auth=False, max_buffered=4)
        while sub.high_water < 4:  # the reader fills it; each wait is on the reader's progress
            await asyncio.wait_for(sub._readable.wait(), 60)
            await asyncio.sleep(0)
        code = await relay.close()
        reader = relay._tasks[0]
        assert reader.done() and not reader.cancelled(), "the reader ended on its own"
        return code

    assert asyncio.run(asyncio.wait_for(main(), 120)) == 0
