"""A real Redis Cluster (3 local masters) used as one Redlock node."""

from __future__ import annotations

import asyncio
import os

import pytest
from redis.asyncio import RedisCluster
from redis.asyncio.cluster import ClusterNode
from redis.crc import key_slot

from redlock_async import ConfigurationError, Redlock
from redlock_async._base._keys import KeyLayout, lock_key
from redlock_async.testing import RedisClusterNodes, RedisNodes

NAMES = ["orders:42", "}starts-with-brace", "a{b}c", "{}", "x}{y"]


async def test_cluster_as_a_node(redis_cluster: RedisClusterNodes) -> None:
    host, port = redis_cluster.startup_nodes[0]
    cluster = RedisCluster(host=host, port=port)
    try:
        redlock = Redlock([cluster])
        for name in NAMES:
            lock = redlock.lock(name, ttl=5.0, auto_extend=False)
            assert await lock.acquire(), name
            assert not await redlock.lock(name).acquire(blocking=False)
            await lock.extend()
            key = lock_key("redlock:", name)
            assert await cluster.get(key) is not None
            who = await redlock.holder(name)  # holder.lua: three keys of one slot
            assert who is not None
            assert who.pid == os.getpid()
            await lock.release()
            assert await cluster.get(key) is None
            assert await redlock.holder(name) is None
        await redlock.aclose()
    finally:
        await cluster.aclose()


async def test_cluster_beside_plain_nodes(
    redis_cluster: RedisClusterNodes, redis_nodes: RedisNodes
) -> None:
    host, port = redis_cluster.startup_nodes[0]
    cluster = RedisCluster(host=host, port=port)
    try:
        async with Redlock([cluster, redis_nodes[0].url, redis_nodes[1].url]) as redlock:
            async with redlock.lock("mixed", ttl=5.0) as lock:
                assert lock.held
                redis_nodes[0].kill()
            # Released on the cluster and the surviving node.
            assert await cluster.get(lock_key("redlock:", "mixed")) is None
    finally:
        await cluster.aclose()


@pytest.mark.parametrize("name", NAMES)
def test_every_key_of_a_name_shares_a_slot(name: str) -> None:
    key = lock_key("redlock:", name)
    layout = KeyLayout("redlock:", name)
    others = [getattr(layout, field) for field in KeyLayout.NAMES]
    assert len(others) == 12
    assert {key_slot(k) for k in others} == {key_slot(key)}


async def test_cluster_waiters_are_woken(redis_cluster: RedisClusterNodes) -> None:
    host, port = redis_cluster.startup_nodes[0]
    cluster = RedisCluster(host=host, port=port)
    try:
        async with Redlock([cluster], retry_delay=60.0, retry_jitter=0.0) as redlock:
            holder = redlock.lock("woken", ttl=10.0)
            assert await holder.acquire()
            waiter = asyncio.ensure_future(redlock.lock("woken", ttl=10.0).acquire(timeout=50.0))
            await asyncio.sleep(0.3)  # subscribed (no way to see it from here but waiting)
            await holder.release()
            # Only the announcement can hand over before the 60 s retry delay.
            assert await asyncio.wait_for(waiter, 20.0)
    finally:
        await cluster.aclose()


async def test_a_cluster_node_is_named_by_its_startup_addresses(
    redis_cluster: RedisClusterNodes,
) -> None:
    (host, port), (host2, port2) = redis_cluster.startup_nodes[:2]
    cluster = RedisCluster(startup_nodes=[ClusterNode(host, port), ClusterNode(host2, port2)])
    try:
        redlock = Redlock([cluster])
        # From construction on, before it ever connected.
        (name,) = redlock.nodes
        assert name.startswith(f"cluster({host}:{port},{host2}:{port2})#"), name
        assert "?" not in repr(redlock)
        await redlock.aclose()
    finally:
        await cluster.aclose()


async def test_two_clients_of_one_cluster_are_refused(redis_cluster: RedisClusterNodes) -> None:
    (host, port), (host2, port2) = redis_cluster.startup_nodes[:2]
    one, other = RedisCluster(host=host, port=port), RedisCluster(host=host2, port=port2)
    try:
        # Not yet connected: their startup nodes differ, nothing tells them apart...
        # A node timeout a loaded machine keeps: both clients must connect.
        redlock = Redlock([one, other], node_timeout=2.0)
        lock = redlock.lock("job", ttl=5.0, auto_extend=False)
        # One attempt connects both (the shard refuses the second copy of the
        # token: the grant fails, which is no harm but no use either).
        await lock.acquire(blocking=False)
        await lock.release() if lock.held else None
        # ...until both have connected: the next lock is refused, naming both.
        with pytest.raises(ConfigurationError, match="same Redis Cluster twice") as refused:
            redlock.lock("job")
        assert f"cluster({host}:{port})#" in str(refused.value)
        assert f"cluster({host2}:{port2})#" in str(refused.value)
        await redlock.aclose()
        # Connected clients are refused at construction, like two URLs of one
        # server (a connected client's startup nodes are the whole cluster).
        with pytest.raises(ConfigurationError, match="same Redis server twice"):
            Redlock([one, other])
    finally:
        await one.aclose()
        await other.aclose()
