"""valkey-py's clients as nodes (``valkey.asyncio.Valkey``, ``ValkeyCluster``, Sentinel).

valkey-py is redis-py's fork: the same API, its own classes (clients,
pools, ``valkey.exceptions.*``). They talk to ``redis-server`` as redis-py's
do, so these run against the project's own throwaway nodes.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

import pytest
import valkey.asyncio
import valkey.exceptions
from valkey.asyncio.sentinel import Sentinel

from redlock_async import (
    ConfigurationError,
    LockBusy,
    NodeConnectionError,
    NodeResponseError,
    Redlock,
)
from redlock_async._base._keys import lock_key
from redlock_async.testing import (
    RedisClusterNodes,
    RedisNode,
    RedisNodes,
    RedisServer,
    SentinelServer,
)

from .._loops import child_env
from ..conftest import eventually, no_keys_left

Clients = Callable[..., list[valkey.asyncio.Valkey]]


@pytest.fixture
async def valkey_clients(redis_nodes: RedisNodes) -> AsyncIterator[Clients]:
    """``make(nodes=redis_nodes, **kwargs)``: a valkey client per node, closed at teardown."""
    made: list[valkey.asyncio.Valkey] = []

    def make(
        nodes: Sequence[RedisNode] | None = None, **kwargs: Any
    ) -> list[valkey.asyncio.Valkey]:
        group = redis_nodes if nodes is None else nodes
        clients = [valkey.asyncio.Valkey.from_url(node.url, **kwargs) for node in group]
        made.extend(clients)
        return clients

    yield make
    for client in made:
        await client.aclose()
    await asyncio.sleep(0.05)  # sockets closed without waiting: let the loop finish them


def shard_subscribers(nodes: RedisNodes, channel: bytes) -> list[int]:
    """How many connections each node has subscribed to ``channel``."""
    counts = []
    for node in nodes:
        ((_, count),) = node.client().pubsub_shardnumsub(channel)
        counts.append(int(count))
    return counts


async def test_a_plain_lock_through_valkey_clients(
    valkey_clients: Clients, redis_nodes: RedisNodes
) -> None:
    async with Redlock(valkey_clients()) as redlock:
        assert all(name.startswith("redis://127.0.0.1:") for name in redlock.nodes)
        async with redlock.lock("orders:42", ttl=5.0) as lock:
            assert lock.held
            assert not await redlock.lock("orders:42").acquire(blocking=False)
            with pytest.raises(LockBusy):
                async with redlock.lock("orders:42", timeout=0.2):
                    pass
            await lock.extend()
            assert await redlock.locked("orders:42")
        assert not await redlock.locked("orders:42")
    assert await no_keys_left(redis_nodes)


async def test_one_server_twice_is_refused(
    valkey_clients: Clients, redis_nodes: RedisNodes
) -> None:
    clients = valkey_clients()
    (again,) = valkey_clients(redis_nodes[:1])
    with pytest.raises(ConfigurationError, match="twice"):
        Redlock([*clients, again])


async def test_read_write_locks_through_valkey_clients(valkey_clients: Clients) -> None:
    async with Redlock(valkey_clients()) as redlock:
        rw = redlock.rwlock("report:7")

        async def try_write() -> bool:  # another task: this one may not upgrade its read
            lock = rw.write(ttl=5.0)
            got = await lock.acquire(blocking=False)
            if got:
                await lock.release()
            return got

        async with rw.read(ttl=5.0), rw.read(ttl=5.0):
            assert not await asyncio.create_task(try_write())
        async with rw.write(ttl=5.0):
            assert not await rw.read(ttl=5.0).acquire(blocking=False)
        assert await asyncio.create_task(try_write())


async def test_a_semaphore_through_valkey_clients(valkey_clients: Clients) -> None:
    async with Redlock(valkey_clients()) as redlock:
        first = redlock.semaphore("exports", limit=2, ttl=5.0)
        second = redlock.semaphore("exports", limit=2, ttl=5.0)
        assert await first.acquire(blocking=False)
        assert await second.acquire(blocking=False)
        assert not await redlock.semaphore("exports", limit=2).acquire(blocking=False)
        await first.release()
        third = redlock.semaphore("exports", limit=2, ttl=5.0)
        assert await third.acquire(blocking=False)
        await second.release()
        await third.release()


@pytest.mark.parametrize("decode_responses", [False, True])
async def test_waiters_are_woken_by_the_release(
    valkey_clients: Clients, redis_nodes: RedisNodes, decode_responses: bool
) -> None:
    # valkey-py has no sharded pub/sub of its own: the driver's must carry the wake-up.
    clients = valkey_clients(decode_responses=decode_responses)
    async with Redlock(clients, retry_delay=60.0, retry_jitter=0.0) as redlock:
        holder = redlock.lock("job", ttl=10.0)
        assert await holder.acquire()
        waiter = asyncio.ensure_future(redlock.lock("job", ttl=10.0).acquire(timeout=50.0))
        channel = b"redlock:{job}:wake"
        assert await eventually(lambda: shard_subscribers(redis_nodes, channel) == [1, 1, 1])
        await holder.release()
        # Only the announcement can hand over before the 60 s retry delay.
        assert await asyncio.wait_for(waiter, 30.0)
        # The last waiter gone, its subscription is dropped on every node.
        assert await eventually(lambda: shard_subscribers(redis_nodes, channel) == [0, 0, 0])


async def test_wake_ups_survive_a_lost_connection(
    valkey_clients: Clients, redis_nodes: RedisNodes
) -> None:
    async with Redlock(valkey_clients(), retry_delay=60.0, retry_jitter=0.0) as redlock:
        holder = redlock.lock("job", ttl=10.0)
        assert await holder.acquire()
        waiter = asyncio.ensure_future(redlock.lock("job", ttl=10.0).acquire(timeout=50.0))
        channel = b"redlock:{job}:wake"
        assert await eventually(lambda: shard_subscribers(redis_nodes, channel) == [1, 1, 1])
        for node in redis_nodes:
            node.reset_connections()  # every subscription is cut
        assert await eventually(lambda: shard_subscribers(redis_nodes, channel) == [1, 1, 1])
        await holder.release()
        assert await asyncio.wait_for(waiter, 30.0)


async def test_a_node_down_costs_its_vote(valkey_clients: Clients, redis_nodes: RedisNodes) -> None:
    async with Redlock(valkey_clients()) as redlock:
        redis_nodes[2].kill()
        async with redlock.lock("job", ttl=5.0) as lock:
            assert lock.held
        redis_nodes[1].kill()
        lock = redlock.lock("job", ttl=5.0)
        assert not await lock.acquire(blocking=False)
        assert set(lock.errors) == {redlock.nodes[1], redlock.nodes[2]}
        for name, error in lock.errors.items():
            # valkey.exceptions.ConnectionError is translated like redis-py's.
            assert isinstance(error, NodeConnectionError), error
            # (uvloop may report the reset connection itself: "the handler is closed")
            cause = error.__cause__
            assert isinstance(cause, valkey.exceptions.ConnectionError | RuntimeError), cause
            assert str(error).startswith(name)


async def test_scripts_flushed_from_the_nodes_are_sent_again(
    valkey_clients: Clients, redis_nodes: RedisNodes
) -> None:
    # NOSCRIPT comes as valkey.exceptions.NoScriptError: EVALSHA falls back to EVAL.
    async with Redlock(valkey_clients()) as redlock:
        lock = redlock.lock("job", ttl=5.0, auto_extend=False)
        for node in redis_nodes:
            node.client().script_flush()
        assert await lock.acquire(blocking=False)  # the granting script (a pipeline)
        for node in redis_nodes:
            node.client().script_flush()
        await lock.extend()
        for node in redis_nodes:
            node.client().script_flush()
        await lock.release()
    assert await no_keys_left(redis_nodes)


async def test_error_replies_keep_their_code(
    valkey_clients: Clients, redis_nodes: RedisNodes
) -> None:
    # Replicas refuse writes: valkey-py raises its ReadOnlyError, code stripped.
    replicas = [redis_nodes[0].client(), redis_nodes[2].client()]
    for replica in replicas:
        replica.replicaof("127.0.0.1", redis_nodes[1].direct_port)
    try:

        def synced() -> bool:
            return all(r.info("replication").get("master_link_status") == "up" for r in replicas)

        assert await eventually(synced)
        async with Redlock(valkey_clients()) as redlock:
            lock = redlock.lock("job", ttl=5.0)
            assert not await lock.acquire(blocking=False)  # one vote of three
            assert set(lock.errors) == {redlock.nodes[0], redlock.nodes[2]}
            for error in lock.errors.values():
                assert isinstance(error, NodeResponseError)
                assert str(error).startswith("READONLY")
                assert isinstance(error.__cause__, valkey.exceptions.ReadOnlyError)
    finally:
        for replica in replicas:
            replica.replicaof("no", "one")


async def test_a_valkey_cluster_is_a_node(redis_cluster: RedisClusterNodes) -> None:
    host, port = redis_cluster.startup_nodes[0]
    cluster = valkey.asyncio.ValkeyCluster(host=host, port=port)
    try:
        async with Redlock([cluster], retry_delay=60.0, retry_jitter=0.0) as redlock:
            assert redlock.nodes[0].startswith("cluster(")
            for name in ["orders:42", "a{b}c", "x}{y"]:
                lock = redlock.lock(name, ttl=5.0, auto_extend=False)
                assert await lock.acquire(), name
                assert not await redlock.lock(name).acquire(blocking=False)
                await lock.extend()
                assert await cluster.get(lock_key("redlock:", name)) is not None
                await lock.release()
                assert await cluster.get(lock_key("redlock:", name)) is None
            # A multilock's names live in several slots: one at a time there.
            async with redlock.multilock(["account:1", "account:2", "account:3"], ttl=5.0):
                assert not await redlock.lock("account:2").acquire(blocking=False)
            # Waiters are woken through the channel's own shard.
            holder = redlock.lock("woken", ttl=10.0)
            assert await holder.acquire()
            waiter = asyncio.ensure_future(redlock.lock("woken", ttl=10.0).acquire(timeout=50.0))
            await asyncio.sleep(0.5)  # subscribed (no way to see it from here but waiting)
            await holder.release()
            assert await asyncio.wait_for(waiter, 20.0)
    finally:
        await cluster.aclose()


SERVICES = ("lock-a", "lock-b", "lock-c")


@pytest.fixture
def deployment() -> Iterator[tuple[dict[str, RedisServer], SentinelServer]]:
    """Three primaries, each its own service, and one Sentinel watching them."""
    masters = {service: RedisServer() for service in SERVICES}
    sentinel = SentinelServer(masters)
    started: list[RedisServer] = []
    try:
        for server in (*masters.values(), sentinel):
            started.append(server)
            server.start()
        yield masters, sentinel
    finally:
        for server in started:
            server.stop()


async def test_sentinel_managed_primaries_through_valkey(
    deployment: tuple[dict[str, RedisServer], SentinelServer],
) -> None:
    masters, sentinel = deployment
    manager = Sentinel([sentinel.address])  # type: ignore[no-untyped-call]
    nodes = [manager.master_for(service) for service in SERVICES]
    replica = manager.slave_for("lock-a")
    try:
        with pytest.raises(ConfigurationError, match="replica"):
            Redlock([replica, *nodes[1:]])
        with pytest.raises(ConfigurationError, match="twice"):
            Redlock([*nodes, manager.master_for("lock-a")])
        async with Redlock(nodes) as redlock:
            assert redlock.nodes == ("sentinel:lock-a", "sentinel:lock-b", "sentinel:lock-c")
            lock = redlock.lock("job", ttl=5.0, auto_extend=False)
            assert await lock.acquire(timeout=30.0)
            assert not await redlock.lock("job").acquire(blocking=False)
            await lock.release()
            masters["lock-b"].kill()
            masters["lock-c"].kill()
            lock = redlock.lock("job", ttl=5.0, auto_extend=False)
            assert not await lock.acquire(blocking=False)
            assert set(lock.errors) <= {"sentinel:lock-b", "sentinel:lock-c"}
            assert lock.errors
    finally:
        for client in [*nodes, replica, *manager.sentinels]:
            await client.aclose()


def test_valkey_is_optional() -> None:
    # Imported only by applications that use it; the package works without it.
    check = """
import sys
{block}
import redis.asyncio, redis.exceptions
from redlock_async import Redlock, NodeConnectionError
from redlock_async._engine.redispy._errors import translate
redlock = Redlock([redis.asyncio.Redis(port=1), "redis://127.0.0.1:2/0"])
error = translate(redis.exceptions.ConnectionError("Error 111 connecting to x."), "n")
assert isinstance(error, NodeConnectionError), error
assert "valkey" not in sys.modules or sys.modules["valkey"] is None
"""
    for block in ["", "sys.modules['valkey'] = None  # as if not installed"]:
        subprocess.run(
            [sys.executable, "-c", check.format(block=block)],
            check=True,
            env=child_env(),
            timeout=60,
        )
