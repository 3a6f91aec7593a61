"""Waiters woken by releases (sharded pub/sub), against real nodes."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import pytest

from redlock_async import Redlock
from redlock_async.testing import RedisNodes

from ..conftest import MakeRedlock, eventually

CHANNEL = b"redlock:{job}:wake"


def subscribers(nodes: RedisNodes) -> list[int]:
    counts = []
    for node in nodes:
        ((_, count),) = node.client().pubsub_shardnumsub(CHANNEL)
        counts.append(int(count))
    return counts


async def test_waiter_is_woken_by_the_release(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # A retry delay far longer than the test: only a wake-up can hand over in time.
    redlock = make_redlock(retry_delay=60.0, retry_jitter=0.0)
    holder = redlock.lock("job", ttl=10.0)
    assert await holder.acquire()
    waiter = asyncio.ensure_future(redlock.lock("job", ttl=10.0).acquire(timeout=50.0))
    assert await eventually(lambda: subscribers(redis_nodes) == [1, 1, 1])
    await holder.release()
    assert await asyncio.wait_for(waiter, 30.0)


async def test_subscriptions_are_shared_and_dropped(redis_nodes: RedisNodes) -> None:
    async with Redlock(redis_nodes.urls, retry_delay=60.0, retry_jitter=0.0) as redlock:
        holder = redlock.lock("job", ttl=10.0)
        assert await holder.acquire()
        waiters = [
            asyncio.ensure_future(redlock.lock("job", ttl=10.0).acquire(timeout=50.0))
            for _ in range(20)
        ]
        # Twenty waiters, one subscription per node.
        assert await eventually(lambda: subscribers(redis_nodes) == [1, 1, 1])
        for node in redis_nodes:
            clients = node.client().client_list()
            assert sum(1 for c in clients if int(c.get("ssub", 0)) > 0) == 1
        # Some give up (cancelled); the rest are handed the lock one by one.
        for task in waiters[:5]:
            task.cancel()
        await holder.release()
        done, rest = await asyncio.wait(
            waiters[5:], timeout=30.0, return_when=asyncio.FIRST_COMPLETED
        )
        assert len(done) == 1  # one of them was woken and won
        assert done.pop().result() is True
        for task in rest:
            task.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)
        assert await eventually(lambda: subscribers(redis_nodes) == [0, 0, 0])
        hub = redlock._core.wake
        assert hub is not None
        assert hub._channels == {}


async def test_every_waiter_is_served_in_turn(redis_nodes: RedisNodes) -> None:
    async with Redlock(redis_nodes.urls, retry_delay=60.0, retry_jitter=0.0) as redlock:
        served = 0

        async def worker() -> None:
            nonlocal served
            async with redlock.lock("job", ttl=10.0, timeout=50.0):
                served += 1
                await asyncio.sleep(0.005)

        await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(8))), 30.0)
        assert served == 8


async def test_without_wake_ups_waiters_poll(make_redlock: MakeRedlock) -> None:
    redlock = make_redlock(wake_on_release=False, retry_delay=0.05, retry_jitter=0.05)
    assert redlock._core.wake is None
    holder = redlock.lock("job", ttl=10.0)
    assert await holder.acquire()
    waiter = asyncio.ensure_future(redlock.lock("job", ttl=10.0).acquire(timeout=10.0))
    await asyncio.sleep(0.2)
    await holder.release()
    assert await waiter


async def test_rwlock_waiters_are_woken(make_redlock: MakeRedlock, redis_nodes: RedisNodes) -> None:
    redlock = make_redlock(retry_delay=60.0, retry_jitter=0.0)
    rw = redlock.rwlock("job")
    reader = rw.read(ttl=10.0)
    assert await asyncio.ensure_future(reader.acquire())  # held by another task
    writer = rw.write(ttl=10.0)
    writer_task = asyncio.ensure_future(writer.acquire(timeout=50.0))
    assert await eventually(lambda: subscribers(redis_nodes) == [1, 1, 1])
    await reader.release()  # the last reader leaving wakes the writer
    assert await asyncio.wait_for(writer_task, 30.0)
    late_reader = asyncio.ensure_future(rw.read(ttl=10.0).acquire(timeout=50.0))
    assert await eventually(lambda: subscribers(redis_nodes) == [1, 1, 1])
    await writer.release()  # the writer's release wakes the reader
    assert await asyncio.wait_for(late_reader, 30.0)


async def test_a_node_reachable_only_after_the_wait_began_wakes_the_waiter(
    redis_nodes: RedisNodes,
) -> None:
    # The waiter's subscription on n3 cannot be made when it starts waiting;
    # it must be made once n3 answers, not left to the 60 s retry delay.
    n3 = redis_nodes[2]
    async with Redlock(redis_nodes.urls, retry_delay=60.0, retry_jitter=0.0) as redlock:
        holder = redlock.lock("job", ttl=10.0)
        n3.refuse()
        assert await holder.acquire()  # on n1 and n2
        waiter = asyncio.ensure_future(redlock.lock("job", ttl=10.0).acquire(timeout=50.0))
        assert await eventually(lambda: subscribers(redis_nodes) == [1, 1, 0])
        n3.heal()
        assert await eventually(lambda: subscribers(redis_nodes) == [1, 1, 1])
        await holder.release()
        assert await asyncio.wait_for(waiter, 30.0)


async def test_wake_ups_survive_a_lost_connection(redis_nodes: RedisNodes) -> None:
    async with Redlock(redis_nodes.urls, retry_delay=60.0, retry_jitter=0.0) as redlock:
        holder = redlock.lock("job", ttl=10.0)
        assert await holder.acquire()
        waiter = asyncio.ensure_future(redlock.lock("job", ttl=10.0).acquire(timeout=50.0))
        assert await eventually(lambda: subscribers(redis_nodes) == [1, 1, 1])
        for node in redis_nodes:
            node.reset_connections()  # every subscription is cut
        assert await eventually(lambda: subscribers(redis_nodes) == [1, 1, 1])
        await holder.release()
        assert await asyncio.wait_for(waiter, 30.0)


def shard_channels(nodes: RedisNodes) -> list[list[bytes | str]]:
    """Every node's subscribed shard channels, straight from the server."""
    return [list(node.client().pubsub_shardchannels()) for node in nodes]


async def test_cancelled_while_subscribing_leaves_no_subscription(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A plain asyncio.timeout around acquire() can cancel it while it waits for
    # the nodes to confirm its subscription: the waiter must leave anyway.
    redlock = make_redlock(retry_delay=60.0, retry_jitter=0.0)
    names = [f"job{i}" for i in range(3)]
    for name in names:
        assert await redlock.lock(name, ttl=60.0).acquire()
    hub = redlock._core.wake
    assert hub is not None
    subscribe = hub.subscribe
    entered: dict[asyncio.Task[Any], asyncio.Event] = {}
    hits = 0

    async def spy(*args: Any, **kwargs: Any) -> Any:
        nonlocal hits
        task = asyncio.current_task()
        assert task is not None
        entered[task].set()
        try:
            return await subscribe(*args, **kwargs)
        except asyncio.CancelledError:
            hits += 1
            raise

    monkeypatch.setattr(hub, "subscribe", spy)
    rng = random.Random(14)

    async def cancel_soon(task: asyncio.Task[Any]) -> None:
        await asyncio.wait_for(entered[task].wait(), 10.0)
        for _ in range(rng.randrange(8)):  # a random point of the subscription
            await asyncio.sleep(0)
        task.cancel()

    for _ in range(25):
        tasks = []
        for name in rng.sample(names * 2, 4):  # some waiters share a channel
            task = asyncio.ensure_future(redlock.lock(name, ttl=10.0).acquire(timeout=50.0))
            entered[task] = asyncio.Event()
            tasks.append(task)
        await asyncio.gather(*(cancel_soon(task) for task in tasks))
        results = await asyncio.gather(*tasks, return_exceptions=True)
        assert all(isinstance(r, asyncio.CancelledError) for r in results), results
    assert hits >= 10  # most cancellations landed inside subscribe()
    assert hub._channels == {}
    left = shard_channels  # PUBSUB SHARDCHANNELS on every node
    assert await eventually(lambda: left(redis_nodes) == [[], [], []]), left(redis_nodes)


async def test_acquire_timeout_bounds_the_subscription(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # A blackholed node never confirms a subscription: acquire(timeout=) must
    # not wait node_timeout for it.
    redlock = make_redlock(node_timeout=1.0, retry_delay=60.0, retry_jitter=0.0)
    assert await redlock.lock("job", ttl=30.0).acquire()  # held elsewhere
    redis_nodes[2].blackhole()
    try:
        started = time.monotonic()
        assert not await redlock.lock("job", ttl=10.0).acquire(timeout=0.05)
        assert time.monotonic() - started < 0.5  # node_timeout + timeout would be 1.05
    finally:
        redis_nodes[2].heal()
