"""Multilocks against real redis-server nodes, through both drivers (and a Redis Cluster)."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Sequence

import pytest
from redis.asyncio import RedisCluster
from redis.crc import key_slot

from redlock_async import LockBusy, LockLost, MultiLock, Redlock
from redlock_async._base._keys import lock_key
from redlock_async._core._lock import Lock
from redlock_async.testing import RedisClusterNodes, RedisNode, RedisNodes

from ..conftest import MakeRedlock, eventually, lock_keys, no_keys_left, settle

NAMES = ("account:1", "account:2", "account:3")
KEYS = [lock_key("redlock:", name) for name in NAMES]


def stored(nodes: Sequence[RedisNode], key: bytes) -> list[object]:
    return [node.client().get(key) for node in nodes]


def all_hold(nodes: Sequence[RedisNode], token: bytes) -> bool:
    """Every node holds ``token`` on every name."""
    return all(stored(nodes, key) == [token] * len(nodes) for key in KEYS)


def token_of(lock: Lock) -> bytes:
    assert lock.held
    assert lock._grant is not None
    return lock._grant.token


async def test_every_name_lands_on_every_node_with_one_token(
    redlock: Redlock, redis_nodes: RedisNodes
) -> None:
    lock = redlock.multilock(reversed(NAMES), ttl=10.0, auto_extend=False)
    assert isinstance(lock, MultiLock)
    assert lock.names == NAMES  # sorted
    assert await lock.acquire()
    token = token_of(lock)
    assert await eventually(lambda: all_hold(redis_nodes, token))
    for key in KEYS:
        for node in redis_nodes:
            assert 9_000 < node.client().pttl(key) <= 10_000
    await lock.extend(ttl=20.0)
    assert await eventually(
        lambda: all(n.client().pttl(k) > 10_000 for n in redis_nodes for k in KEYS)
    )
    await lock.release()
    assert not lock.held
    assert await no_keys_left(redis_nodes)


async def test_all_or_none_a_name_held_by_a_plain_lock_refuses_the_set(
    redlock: Redlock, redis_nodes: RedisNodes
) -> None:
    plain = redlock.lock("account:2", ttl=10.0)
    assert await plain.acquire()
    multi = redlock.multilock(NAMES, ttl=10.0, timeout=0.3)
    assert not await multi.acquire(blocking=False)
    with pytest.raises(LockBusy):
        async with multi:
            pytest.fail("entered without the lock")
    await settle(0.1)
    # Nothing of the multilock was written anywhere: only the plain lock's key.
    assert lock_keys(redis_nodes) == [[KEYS[1]]] * 3
    await plain.release()
    assert await multi.acquire(blocking=False)  # free now: all of them
    await multi.release()
    assert await no_keys_left(redis_nodes)


async def test_a_multilock_excludes_plain_locks_of_each_name_and_back(
    redlock: Redlock, redis_nodes: RedisNodes
) -> None:
    async with redlock.multilock(NAMES[:2], ttl=10.0) as multi:
        assert multi.held
        for name in NAMES[:2]:
            assert not await redlock.lock(name).acquire(blocking=False), name
        other = redlock.lock(NAMES[2], ttl=10.0)  # not in the set
        assert await other.acquire(blocking=False)
        await other.release()
        # Another multilock overlapping in one name only is refused too.
        assert not await redlock.multilock(NAMES[1:]).acquire(blocking=False)
    for name in NAMES[:2]:
        plain = redlock.lock(name)
        assert await plain.acquire(blocking=False), name
        await plain.release()
    assert await no_keys_left(redis_nodes)


async def test_overlapping_multilocks_in_any_order_never_deadlock_nor_overlap(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # Two Redlocks (two processes' connections); every task names its set in
    # its own order; plain locks join in. Finishing at all is the no-deadlock proof.
    redlocks = [make_redlock(retry_delay=0.005, retry_jitter=0.02) for _ in range(2)]
    sets = [["a", "b"], ["b", "a"], ["b", "c"], ["c", "a"], ["c", "b", "a"], ["a"]]
    inside: Counter[str] = Counter()
    worst: Counter[str] = Counter()
    done = 0

    async def worker(index: int) -> None:
        nonlocal done
        rng = random.Random(index)
        redlock = redlocks[index % 2]
        names = sets[index % len(sets)]
        for _ in range(6):
            order = rng.sample(names, len(names))
            lock = redlock.multilock(order, ttl=5.0) if len(names) > 1 else redlock.lock(names[0])
            async with lock:
                for name in names:
                    inside[name] += 1
                    worst[name] = max(worst[name], inside[name])
                await asyncio.sleep(rng.uniform(0, 0.003))
                for name in names:
                    inside[name] -= 1
        done += 1

    await asyncio.gather(*(worker(i) for i in range(12)))
    assert done == 12
    assert max(worst.values()) == 1, worst
    assert await no_keys_left(redis_nodes)


async def test_a_cancelled_acquire_leaves_no_key_at_any_await(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    redlock = make_redlock(node_timeout=1.0)
    for node in redis_nodes:
        node.delay(0.03)
    # Cancelled after 0, 1, 2 ... loop iterations, then at times around the
    # replies: every await of acquire() is hit by one of them.
    for steps in range(8):
        task = asyncio.ensure_future(redlock.multilock(NAMES, ttl=5.0).acquire())
        for _ in range(steps):
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    for pause in (0.01, 0.03, 0.05, 0.07):
        lock = redlock.multilock(NAMES, ttl=5.0)
        task = asyncio.ensure_future(lock.acquire())
        await asyncio.sleep(pause)
        if not task.cancel():  # granted before the cancellation came
            assert task.result()
            await lock.release()
            continue
        with pytest.raises(asyncio.CancelledError):
            await task
    assert await no_keys_left(redis_nodes)


async def test_a_dead_node_costs_one_vote(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    redlock = make_redlock()
    redis_nodes[0].kill()
    lock = redlock.multilock(NAMES, ttl=10.0)
    assert await lock.acquire(blocking=False)
    token = token_of(lock)
    live = redis_nodes[1:]
    assert await eventually(lambda: all_hold(live, token))
    await lock.release()
    assert await no_keys_left(live)


async def test_auto_renewal_keeps_every_name(redlock: Redlock, redis_nodes: RedisNodes) -> None:
    async with redlock.multilock(NAMES, ttl=0.4) as lock:
        token = token_of(lock)
        await asyncio.sleep(1.2)  # three ttls
        assert lock.held
        assert not lock.lost
        for key in KEYS:
            assert stored(redis_nodes, key) == [token] * 3
    assert await no_keys_left(redis_nodes)


async def test_a_name_taken_away_on_a_quorum_loses_the_renewal(
    redlock: Redlock, redis_nodes: RedisNodes
) -> None:
    lock = redlock.multilock(NAMES, ttl=0.5, cancel_on_lost=False)
    with pytest.raises(LockLost):
        async with lock:
            for node in redis_nodes[:2]:
                node.client().set(KEYS[2], b"someone-else")
            assert await eventually(lambda: lock.lost)
    # The loss releases every key still ours; the foreign one is left alone.
    assert await eventually(lambda: lock_keys(redis_nodes) == [[KEYS[2]], [KEYS[2]], []])


async def test_cluster_names_in_different_slots(redis_cluster: RedisClusterNodes) -> None:
    host, port = redis_cluster.startup_nodes[0]
    cluster = RedisCluster(host=host, port=port)
    assert len({key_slot(key) for key in KEYS}) == 3  # one script could not cover them
    try:
        # The cluster alone: its vote decides, so every step of the split is seen.
        async with Redlock([cluster]) as redlock:
            lock = redlock.multilock(NAMES, ttl=0.6)
            async with lock:
                token = token_of(lock)
                for key in KEYS:
                    assert await cluster.get(key) == token
                for name in NAMES:
                    assert not await redlock.lock(name).acquire(blocking=False)
                await asyncio.sleep(1.0)  # renewed, one name at a time
                assert lock.held
                for key in KEYS:
                    assert await cluster.get(key) == token
            for key in KEYS:
                assert await cluster.get(key) is None
            # One name held elsewhere: refused there, the names taken before
            # it are given back, and the attempt fails as a whole.
            await cluster.set(KEYS[1], b"other", px=10_000)
            assert not await redlock.multilock(NAMES).acquire(blocking=False)
            assert await cluster.get(KEYS[0]) is None
            assert await cluster.get(KEYS[2]) is None
            await cluster.delete(KEYS[1])
            # A plain lock on one name refuses the multilock the same way, and back.
            async with redlock.lock(NAMES[2]):
                assert not await redlock.multilock(NAMES).acquire(blocking=False)
            assert await cluster.get(KEYS[0]) is None
    finally:
        await cluster.aclose()
