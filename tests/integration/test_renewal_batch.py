"""Batched renewals on real nodes: many grants per call, each grant judged on its own."""

from __future__ import annotations

import asyncio
import gc
import weakref

import pytest
from redis.asyncio import RedisCluster

from redlock_async import Lock, LockLost, Redlock
from redlock_async._base._keys import KeyLayout, lock_key
from redlock_async._engine import Settled, Tally
from redlock_async.testing import RedisClusterNodes, RedisNode, RedisNodes

from ..conftest import MakeRedlock, eventually, settle

NAMES = [f"batch:{i}" for i in range(20)]


def key(name: str) -> bytes:
    return lock_key("redlock:", name)


async def acquire_all(locks: list[Lock]) -> None:
    assert all(await asyncio.gather(*(lock.acquire() for lock in locks)))


def pttls(node: RedisNode, keys: list[bytes]) -> list[int]:
    """Each key's PTTL on ``node``, in one round trip (a blocking client: keep it short)."""
    pipe = node.client().pipeline(transaction=False)
    for k in keys:
        pipe.pttl(k)
    return [int(ttl) for ttl in pipe.execute()]


def script_calls(nodes: RedisNodes) -> list[int]:
    """EVALSHA + EVAL calls each running node served since the last CONFIG RESETSTAT."""
    calls = []
    for node in nodes:
        if node.server.is_running:
            stats = node.client().info("commandstats")
            calls.append(
                sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("evalsha", "eval"))
            )
    return calls


async def test_many_locks_renew_in_a_few_calls_per_node(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    redlock = make_redlock()
    names = [f"many:{i}" for i in range(100)]
    locks = [redlock.lock(name, ttl=0.6) for name in names]
    await acquire_all(locks)
    await settle(0.05)
    for node in redis_nodes:
        node.client().config_resetstat()
    await asyncio.sleep(1.5)  # about seven renewals of each lock
    calls = script_calls(redis_nodes)
    assert all(lock.held for lock in locks)
    assert not any(lock.lost for lock in locks)
    # One call per grant: at least 100 x 6 = 600 per node. Batched: at most
    # one per grid step (ttl/64 = 9.4 ms) in which a renewal falls due, and
    # the random spread lets them wander over all ~21 steps of a 0.2 s
    # period: about 160 in 1.5 s, however many locks.
    assert max(calls) < 300, calls
    # Renewed where it counts: on a quorum of nodes (on a busy machine a
    # node may miss a few renewals; its copy then expires).
    held = [
        [0 < ttl <= 600 for ttl in pttls(node, [key(n) for n in names])] for node in redis_nodes
    ]
    assert all(sum(column) >= 2 for column in zip(*held, strict=True))


async def test_a_key_taken_on_a_majority_loses_that_lock_alone(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    redlock = make_redlock()
    told: list[Lock] = []
    locks = [redlock.lock(name, ttl=1.0, on_lost=told.append) for name in NAMES]
    await acquire_all(locks)
    victim = locks[7]
    for node in redis_nodes[:2]:
        node.client().set(key(victim.name), b"someone-else", px=10_000)
    await asyncio.wait_for(victim.lost_event.wait(), 5.0)
    await asyncio.sleep(1.0)  # the others renew on
    assert told == [victim]
    with pytest.raises(LockLost, match="refused the renewal"):
        await victim.extend()
    others = [lock for lock in locks if lock is not victim]
    assert all(lock.held for lock in others)
    assert not any(lock.lost for lock in others)
    # Neither the renewal nor the cleanup touched the other holder's keys.
    for node in redis_nodes[:2]:
        assert node.client().get(key(victim.name)) == b"someone-else"


async def test_held_locks_keep_neither_their_acquire_tally_nor_the_tasks_that_took_them(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # Each lock taken in a task of its own, as asyncio.gather makes: the
    # tasks end, the locks are held on. What a held lock kept of those (its
    # acquire's tally, 0.4 KB; the task, 0.8 KB) is gone; what it needs of
    # them - where a cleanup must go - is kept, and a loss still cleans up.
    redlock = make_redlock()
    names = [f"kept:{i}" for i in range(50)]
    locks = [redlock.lock(name, ttl=3.0) for name in names]
    tasks = [asyncio.create_task(lock.acquire()) for lock in locks]
    assert all(await asyncio.gather(*tasks))
    ended = [weakref.ref(task) for task in tasks]
    del tasks
    # Its votes replace the tally once every node has answered (at the
    # grant, or at its first renewal).
    assert await eventually(
        lambda: all(isinstance(lock._grant and lock._grant.acquired, Settled) for lock in locks)
    )

    def tasks_freed() -> bool:
        gc.collect()
        return all(task() is None for task in ended)

    assert await eventually(tasks_freed)  # once their done callbacks have run
    for lock in locks:
        assert lock.held
        assert not any(isinstance(ref, Tally) for ref in gc.get_referents(lock._grant))
    victim = locks[7]
    for node in redis_nodes[:2]:
        node.client().set(key(victim.name), b"someone-else", px=10_000)
    await asyncio.wait_for(victim.lost_event.wait(), 10.0)  # at its next renewal
    # The third node's copy was ours: the cleanup after the loss released it.
    assert await eventually(lambda: redis_nodes[2].client().get(key(victim.name)) is None)
    assert all(lock.held for lock in locks if lock is not victim)


async def test_a_key_of_another_type_fails_that_lock_alone(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # The key's error is that grant's failed vote on that node; the call
    # (and every other grant in it) goes on (redis.pcall in extend_many.lua).
    redlock = make_redlock()
    told: list[Lock] = []
    locks = [redlock.lock(name, ttl=1.0, on_lost=told.append) for name in NAMES]
    await acquire_all(locks)
    victim = locks[3]
    for node in redis_nodes[:2]:
        client = node.client()
        client.delete(key(victim.name))
        client.hset(key(victim.name), "x", "1")
    await asyncio.wait_for(victim.lost_event.wait(), 5.0)
    assert told == [victim]
    with pytest.raises(LockLost, match="could not reach a quorum") as raised:
        await victim.extend()
    assert len(raised.value.errors) == 2
    assert all("WRONGTYPE" in str(error) for error in raised.value.errors.values())
    others = [lock for lock in locks if lock is not victim]
    assert all(lock.held for lock in others)
    assert not any(lock.lost for lock in others)


async def test_a_node_down_loses_none(make_redlock: MakeRedlock, redis_nodes: RedisNodes) -> None:
    redlock = make_redlock()
    told: list[Lock] = []
    locks = [redlock.lock(name, ttl=0.6, on_lost=told.append) for name in NAMES]
    await acquire_all(locks)
    redis_nodes[0].kill()
    await asyncio.sleep(2.0)  # more than three ttls
    assert told == []
    assert all(lock.held for lock in locks)
    held = [
        [0 < ttl <= 600 for ttl in pttls(node, [key(n) for n in NAMES])] for node in redis_nodes[1:]
    ]
    assert all(all(column) for column in zip(*held, strict=True))


async def test_readers_writers_and_locks_renew_together(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    redlock = make_redlock()
    reader = redlock.rwlock("doc").read(ttl=0.6)
    writer = redlock.rwlock("report").write(ttl=0.6)
    plain = redlock.lock("plain", ttl=0.6)
    await acquire_all([reader, writer, plain])
    await asyncio.sleep(2.0)  # more than three ttls
    assert reader.held
    assert writer.held
    assert plain.held
    client = redis_nodes[0].client()
    assert 0 < client.pttl(KeyLayout("redlock:", "doc").readers) <= 600
    assert 0 < client.pttl(KeyLayout("redlock:", "report").writer) <= 600
    assert 0 < client.pttl(key("plain")) <= 600


async def test_a_cluster_node_renews_each_grant_on_its_own(
    redis_cluster: RedisClusterNodes,
) -> None:
    # A cluster refuses one script over keys of several slots: grants whose
    # nodes include a cluster are renewed one by one, and stay held.
    host, port = redis_cluster.startup_nodes[0]
    cluster = RedisCluster(host=host, port=port)
    try:
        async with Redlock([cluster], node_timeout=0.25) as redlock:
            told: list[Lock] = []
            locks = [redlock.lock(name, ttl=1.0, on_lost=told.append) for name in NAMES[:8]]
            await acquire_all(locks)
            await asyncio.sleep(2.0)  # several renewals each
            assert told == []
            assert all(lock.held for lock in locks)
            for lock in locks:
                await lock.release()
    finally:
        await cluster.aclose()
