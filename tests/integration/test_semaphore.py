"""Semaphores against real nodes, through both drivers: the limit, cleanup, faults, renewal."""

from __future__ import annotations

import asyncio
import random

import pytest
from redis.asyncio import RedisCluster

from redlock_async import QuorumUnavailable, Redlock, SemaphoreLock
from redlock_async._base._keys import KeyLayout
from redlock_async.testing import RedisClusterNodes, RedisNodes

from ..conftest import MakeRedlock, eventually, lock_keys, no_keys_left

FOREIGN = b"someone-else"


def slot(index: int, name: str = "jobs") -> bytes:
    return f"redlock:{{{name}}}:sem:{index}".encode()


async def test_the_limit_holds_under_contention_from_two_redlocks(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    limit = 3
    redlocks = [make_redlock(retry_delay=0.02, retry_jitter=0.02) for _ in range(2)]
    inside: set[int] = set()
    most = 0
    rounds = 0

    async def worker(me: int) -> None:
        nonlocal most, rounds
        rng = random.Random(me)
        for _ in range(5):
            async with redlocks[me % 2].semaphore("jobs", limit, ttl=5.0) as held:
                assert held.slot is not None
                assert held.slot not in inside  # one holder per slot
                inside.add(held.slot)
                most = max(most, len(inside))
                assert len(inside) <= limit
                await asyncio.sleep(rng.uniform(0.0, 0.02))
                inside.discard(held.slot)
                rounds += 1

    await asyncio.gather(*(worker(i) for i in range(12)))
    assert rounds == 60
    assert most >= 2  # the semaphore did let several in at once
    assert await no_keys_left(redis_nodes)


async def test_a_full_semaphore_refuses_and_a_release_lets_the_next_in(
    make_redlock: MakeRedlock,
) -> None:
    redlock = make_redlock()
    first, second = redlock.semaphore("jobs", 2), redlock.semaphore("jobs", 2)
    assert await first.acquire(blocking=False)
    assert await second.acquire(blocking=False)
    assert {first.slot, second.slot} == {0, 1}
    assert not await redlock.semaphore("jobs", 2).acquire(blocking=False)
    waiter = redlock.semaphore("jobs", 2, ttl=5.0)
    task = asyncio.ensure_future(waiter.acquire(timeout=30.0))
    await asyncio.sleep(0.1)
    assert not task.done()
    freed = first.slot
    await first.release()
    assert await task  # woken by the release (or its retry delay)
    assert waiter.slot == freed
    await second.release()
    await waiter.release()


async def test_a_dead_node_costs_a_vote_two_cost_the_quorum(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    redlock = make_redlock()
    redis_nodes[2].kill()
    held = redlock.semaphore("jobs", 2, ttl=5.0)
    assert await held.acquire(blocking=False)
    assert set(held.errors) == set()
    await held.release()
    redis_nodes[1].kill()
    with pytest.raises(QuorumUnavailable):
        async with redlock.semaphore("jobs", 2, timeout=0.2):
            pass


async def test_holders_on_different_majorities_cannot_exceed_the_limit(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # The state {A,B}, {B,C} of two holders under a limit of two, written
    # directly: A and C each have room for one more, a majority - counting
    # holders per node would let a third in.
    a, b, c = (node.client() for node in redis_nodes)
    a.set(slot(0), FOREIGN, px=60_000)
    b.set(slot(0), FOREIGN, px=60_000)
    b.set(slot(1), FOREIGN, px=60_000)
    c.set(slot(1), FOREIGN, px=60_000)
    redlock = make_redlock(retry_delay=0.01, retry_jitter=0.01)
    third = redlock.semaphore("jobs", 2)
    assert not await third.acquire(timeout=0.5)
    assert await eventually(lambda: [len(keys) for keys in lock_keys(redis_nodes)] == [1, 2, 1])


@pytest.mark.parametrize("pause", [0.0, 0.02, 0.07, 0.12, 0.3])
async def test_cancelling_at_every_await_leaves_no_slot(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes, pause: float
) -> None:
    # Full, as {A,B} {B,C} holders leave it: A and C reserve different slots
    # and B, which answers late, none. Every attempt waits for B's vote,
    # fails, sleeps and tries again; cancelled anywhere in that cycle, it
    # must leave nothing of its own on any node.
    a, b, c = (node.client() for node in redis_nodes)
    a.set(slot(0), FOREIGN, px=60_000)
    b.set(slot(0), FOREIGN, px=60_000)
    b.set(slot(1), FOREIGN, px=60_000)
    c.set(slot(1), FOREIGN, px=60_000)
    redis_nodes[1].delay(0.05)
    redlock = make_redlock(node_timeout=1.0, retry_delay=0.05, retry_jitter=0.0)
    # A ttl longer than eventually() waits: a slot left behind cannot expire meanwhile.
    task = asyncio.ensure_future(redlock.semaphore("jobs", 2, ttl=60.0).acquire())
    await asyncio.sleep(pause)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    def only_foreign() -> bool:
        return lock_keys(redis_nodes) == [[slot(0)], [slot(0), slot(1)], [slot(1)]]

    await asyncio.sleep(0.1)  # B's late reply, and the release after it
    assert await eventually(only_foreign)


async def test_auto_renewal_keeps_the_slot(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    redlock = make_redlock()
    others = [make_redlock().semaphore("jobs", 1, ttl=0.3) for _ in range(3)]
    async with redlock.semaphore("jobs", 1, ttl=0.3) as held:
        for _ in range(4):
            await asyncio.sleep(0.3)  # a ttl each: renewed meanwhile
            assert held.held
            assert not any([await other.acquire(blocking=False) for other in others])
        assert held.slot == 0
    assert await no_keys_left(redis_nodes)


async def test_a_semaphore_and_a_lock_of_one_name_are_different_locks(
    redlock: Redlock,
) -> None:
    held: SemaphoreLock = redlock.semaphore("jobs", 1)
    assert await held.acquire(blocking=False)
    lock = redlock.lock("jobs")
    assert await lock.acquire(blocking=False)
    await lock.release()
    await held.release()


async def test_a_redis_cluster_node_runs_every_slot_in_one_script(
    redis_cluster: RedisClusterNodes,
) -> None:
    # All slot keys share the hash tag {NAME}: one cluster slot, one script.
    host, port = redis_cluster.startup_nodes[0]
    cluster = RedisCluster(host=host, port=port)
    try:
        async with Redlock([cluster]) as redlock:
            held = [redlock.semaphore("a{b}c", 3, ttl=5.0) for _ in range(3)]
            assert all([await lock.acquire(blocking=False) for lock in held])
            assert not await redlock.semaphore("a{b}c", 3).acquire(blocking=False)
            assert {lock.slot for lock in held} == {0, 1, 2}
            await held[0].extend()
            for lock in held:
                await lock.release()
            keys = [KeyLayout("redlock:", "a{b}c").semaphore_slot(i) for i in range(3)]
            assert [await cluster.get(key) for key in keys] == [None] * 3
    finally:
        await cluster.aclose()
