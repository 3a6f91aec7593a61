"""Configuration that only shows against real nodes: ttl bounds on extend(),
and node_timeout defaults per driver (issue 14)."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio

from redlock_async import ConfigurationError, NodeConnectionError, Redlock
from redlock_async.testing import RedisNodes

from ..conftest import MakeRedlock


async def test_extend_refuses_a_ttl_out_of_bounds_and_keeps_the_lock(
    make_redlock: MakeRedlock,
) -> None:
    redlock = make_redlock(drift_factor=0.5)
    lock = redlock.lock("bounds", ttl=10.0, auto_extend=False)
    assert await lock.acquire()
    # 1e17 s overflows Redis's PX: every node would refuse it, and the grant
    # would be lost. 0.003 s leaves no validity once the drift is taken off.
    for bad in (1e17, 0.003):
        with pytest.raises(ConfigurationError, match="ttl"):
            await lock.extend(bad)
        assert lock.held
        assert not lock.lost
    await lock.extend(20.0)
    assert lock.valid_for > 9.0  # 20 s less half of it for drift (ttl=10 gave 5 s)
    await lock.release()


async def test_concurrent_first_acquires_through_redis_py_fit_the_default_node_timeout(
    redis_nodes: RedisNodes,
) -> None:
    # Each round opens fresh clients: redis-py then connects (with a
    # handshake) once per concurrent command, which 50 ms did not always fit.
    for round_ in range(5):
        clients = [redis.asyncio.Redis.from_url(url) for url in redis_nodes.urls]
        redlock = Redlock(clients)
        try:
            locks = [redlock.lock(f"free:{round_}:{i}", auto_extend=False) for i in range(8)]
            granted = await asyncio.gather(*(lock.acquire(blocking=False) for lock in locks))
            assert all(granted), [dict(lock.errors) for lock in locks]
            for lock in locks:
                await lock.release()
        finally:
            await redlock.aclose()
            for client in clients:
                await client.aclose()
    await asyncio.sleep(0.05)  # let redis-py finish closing its sockets


async def test_a_killed_node_is_a_connection_error_through_a_client_we_created(
    redis_nodes: RedisNodes,
) -> None:
    from redlock_async._base._address import parse_url
    from redlock_async._engine._build import REDISPY_NODE_TIMEOUT, owned_client

    # The client the library builds for rediss:// URLs, here without TLS.
    clients = [owned_client(parse_url(url), REDISPY_NODE_TIMEOUT) for url in redis_nodes.urls]
    redlock = Redlock(clients)
    try:
        warm = redlock.lock("warm", auto_extend=False)
        assert await warm.acquire()
        await warm.release()
        redis_nodes[0].kill()
        redis_nodes[1].kill()
        lock = redlock.lock("dead", auto_extend=False)
        async with asyncio.timeout(5):
            assert not await lock.acquire(blocking=False)
        errors = lock.errors
        assert len(errors) == 2
        assert all(isinstance(error, NodeConnectionError) for error in errors.values()), errors
    finally:
        await redlock.aclose()
        for client in clients:
            await client.aclose()
    await asyncio.sleep(0.05)
