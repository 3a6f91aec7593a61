"""FIFO fairness across the quorum (fair=True), against real nodes."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import sys
import textwrap
import time

import pytest

from redlock_async import Redlock
from redlock_async.testing import RedisNodes

from .. import _loops
from ..conftest import MakeRedlock, eventually

QUEUE = b"redlock:{job}:q"


def queued(nodes: RedisNodes) -> list[int]:
    return [int(node.client().zcard(QUEUE)) for node in nodes]


async def test_waiters_are_served_in_arrival_order(make_redlock: MakeRedlock) -> None:
    # Arrival order holds when every node records every waiter; a node that
    # misses an enqueue (its command timed out on a loaded CI machine) may
    # serve a later waiter first - fairness is best effort there, so give
    # the nodes time to answer.
    redlock = make_redlock(retry_delay=0.05, retry_jitter=0.05, node_timeout=1.0)
    holder = redlock.lock("job", ttl=10.0, fair=True)
    assert await holder.acquire()
    order: list[int] = []

    async def waiter(index: int) -> None:
        async with redlock.lock("job", ttl=10.0, fair=True, timeout=30.0):
            order.append(index)
            await asyncio.sleep(0.01)

    tasks = []
    for index in range(8):
        tasks.append(asyncio.ensure_future(waiter(index)))
        await asyncio.sleep(0.03)  # arrive one after another
    await holder.release()
    await asyncio.wait_for(asyncio.gather(*tasks), 30.0)
    assert order == list(range(8))


async def test_cancelled_waiter_leaves_the_queue(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    redlock = make_redlock(retry_delay=0.05, retry_jitter=0.05)
    holder = redlock.lock("job", ttl=10.0, fair=True)
    assert await holder.acquire()
    first = asyncio.ensure_future(redlock.lock("job", fair=True, timeout=30.0).acquire())
    await asyncio.sleep(0.05)
    second = asyncio.ensure_future(redlock.lock("job", fair=True, timeout=30.0).acquire())
    assert await eventually(lambda: queued(redis_nodes) == [2, 2, 2])
    first.cancel()
    assert await eventually(lambda: queued(redis_nodes) == [1, 1, 1])
    await holder.release()
    assert await asyncio.wait_for(second, 10.0)
    with pytest.raises(asyncio.CancelledError):
        await first


async def test_killed_waiter_process_stops_blocking(redis_nodes: RedisNodes) -> None:
    """A waiter in another process is SIGKILLed while queued first; the heartbeat drops it."""
    loop = _loops.name_of(asyncio.get_running_loop())  # the waiter runs on this test's loop
    script = textwrap.dedent(
        f"""
        from redlock_async import Redlock
        from tests import _loops
        async def main():
            async with Redlock({redis_nodes.urls!r}, retry_delay=0.05, retry_jitter=0.0) as rl:
                await rl.lock("job", fair=True, timeout=60.0).acquire()
        _loops.run(main(), {loop!r})
        """
    )
    async with Redlock(redis_nodes.urls, retry_delay=0.05, retry_jitter=0.05) as redlock:
        holder = redlock.lock("job", ttl=10.0, fair=True)
        assert await holder.acquire()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", script, stdout=asyncio.subprocess.DEVNULL, env=_loops.child_env()
        )
        try:
            assert await eventually(lambda: queued(redis_nodes) == [1, 1, 1], within=20.0)
            mine = asyncio.ensure_future(redlock.lock("job", fair=True, timeout=30.0).acquire())
            assert await eventually(lambda: queued(redis_nodes) == [2, 2, 2])
            os.kill(proc.pid, signal.SIGKILL)
            await proc.wait()
            await holder.release()
            started = time.monotonic()
            assert await asyncio.wait_for(mine, 20.0)
            # Dropped within the heartbeat (1 s by default) plus a retry, not never.
            assert time.monotonic() - started < 10.0
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()


async def test_fair_readers_queue_behind_a_waiting_writer(make_redlock: MakeRedlock) -> None:
    redlock = make_redlock(retry_delay=0.05, retry_jitter=0.05)
    rw = redlock.rwlock("job", fair=True)  # a default for both views
    reader = rw.read(ttl=10.0)
    assert reader.options.fair
    assert await asyncio.ensure_future(reader.acquire())
    events: list[str] = []

    async def write() -> None:
        async with rw.write(ttl=10.0, fair=True, timeout=30.0):
            events.append("write")
            await asyncio.sleep(0.05)

    async def read() -> None:
        async with rw.read(ttl=10.0, fair=True, timeout=30.0):
            events.append("read")

    writer = asyncio.ensure_future(write())
    await asyncio.sleep(0.1)
    late = asyncio.ensure_future(read())
    await asyncio.sleep(0.2)
    assert events == []  # the late reader waits behind the queued writer
    await reader.release()
    await asyncio.wait_for(asyncio.gather(writer, late), 30.0)
    assert events == ["write", "read"]


@pytest.mark.parametrize("fair", [False, True])
async def test_mutual_exclusion_history(make_redlock: MakeRedlock, fair: bool) -> None:
    redlocks = [make_redlock(retry_delay=0.005, retry_jitter=0.01) for _ in range(2)]
    intervals: list[tuple[float, float]] = []

    async def worker(index: int) -> None:
        for _ in range(10):
            lock = redlocks[index % 2].lock("job", ttl=5.0, fair=fair, timeout=30.0)
            async with lock:
                start = time.monotonic()
                await asyncio.sleep(0.001)
                intervals.append((start, time.monotonic()))

    await asyncio.wait_for(asyncio.gather(*(worker(i) for i in range(8))), 60.0)
    assert len(intervals) == 80
    intervals.sort()
    for (_, end), (start, _) in itertools.pairwise(intervals):
        assert end <= start, "two holders at once"


async def test_nodes_that_disagree_about_the_queue_do_not_deadlock(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    """One node holds a waiter the others never saw (it missed their updates)."""
    redlock = make_redlock(retry_delay=0.05, retry_jitter=0.05)
    ghost = redis_nodes[0].client()
    ghost.zadd(QUEUE, {b"x:ghost": 1.0})  # queued earliest, on this node only
    ghost.zadd(QUEUE + b"h", {b"x:ghost": 2**52})  # and "alive" for a long time
    order: list[int] = []

    async def waiter(index: int) -> None:
        async with redlock.lock("job", ttl=10.0, fair=True, timeout=30.0):
            order.append(index)
            await asyncio.sleep(0.01)

    tasks = []
    for index in range(4):
        tasks.append(asyncio.ensure_future(waiter(index)))
        await asyncio.sleep(0.03)
    await asyncio.wait_for(asyncio.gather(*tasks), 30.0)
    assert sorted(order) == list(range(4))  # nobody deadlocked
