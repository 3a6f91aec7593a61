"""The lean driver loads each script lazily, in the write of its first EVALSHA.

Read from the servers themselves (``INFO commandstats`` and ``errorstats``,
reset at the start): how many ``SCRIPT LOAD`` each node ran, and whether any
command was ever answered ``NOSCRIPT`` - which would mean an ``EVALSHA`` went
out on a connection that had not loaded its script (a granting script's vote
then fails). Each test starts from empty script caches.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import redis

from redlock_async import Redlock
from redlock_async.testing import RedisNode, RedisNodes

from ..conftest import eventually, no_keys_left, settle


def _fresh(nodes: Sequence[RedisNode]) -> None:
    """Empty every node's script cache and counters."""
    for node in nodes:
        client = node.client()
        client.script_flush()
        client.config_resetstat()


def _stats(client: redis.Redis, section: str) -> dict[str, Any]:
    stats: dict[str, Any] = client.info(section)
    return stats


def script_loads(node: RedisNode) -> int:
    """``SCRIPT LOAD`` calls the node ran since the counters were reset."""
    stats = _stats(node.client(), "commandstats")
    return int(stats.get("cmdstat_script|load", stats.get("cmdstat_script", {})).get("calls", 0))


def noscripts(node: RedisNode) -> int:
    """``NOSCRIPT`` replies the node sent since the counters were reset."""
    return int(_stats(node.client(), "errorstats").get("errorstat_NOSCRIPT", {}).get("count", 0))


def lean(nodes: RedisNodes, **kwargs: Any) -> Redlock:
    return Redlock(nodes.urls, **kwargs)


async def test_a_new_connection_loads_only_the_scripts_it_runs(redis_nodes: RedisNodes) -> None:
    # The handshake used to load every script (eleven) before the first
    # grant of a process could be answered.
    _fresh(redis_nodes)
    async with lean(redis_nodes) as redlock:
        lock = redlock.lock("job", ttl=5.0, auto_extend=False)
        assert await lock.acquire(blocking=False)
        assert lock._grant is not None
        replies = lock._grant.acquired.replies
        assert await eventually(lambda: replies == [1, 1, 1])  # every node, first attempt
        await lock.release()
        await settle(0.1)
        # census.lua (the Redlock's first grant reads the nodes' epochs),
        # acquire.lua and release.lua, each once, on each node.
        assert [script_loads(node) for node in redis_nodes] == [3, 3, 3]
        assert [noscripts(node) for node in redis_nodes] == [0, 0, 0]


async def test_every_script_is_loaded_before_its_first_run(redis_nodes: RedisNodes) -> None:
    # Connections already open when a script is first used load it then:
    # through the hot path (a fan-out to every node) and through a fan-out to
    # some nodes only (the fencing write-back goes to the granting nodes).
    _fresh(redis_nodes)
    async with lean(redis_nodes) as redlock:
        warm = redlock.lock("warm", ttl=5.0, auto_extend=False)
        assert await warm.acquire(blocking=False)
        await warm.release()
        # One node's counter ahead of the others': the token is written back.
        redis_nodes[0].client().set("redlock:{fenced}:fence", 2 * 10**15)
        kinds = [
            redlock.lock("fenced", ttl=5.0, auto_extend=False, fencing=True),
            redlock.lock("fair", ttl=5.0, auto_extend=False, fair=True),
            redlock.rwlock("report").read(ttl=5.0, auto_extend=False),
            redlock.rwlock("other").write(ttl=5.0, auto_extend=False),
        ]
        for lock in kinds:
            assert await lock.acquire(blocking=False), lock
            await lock.extend()
            await lock.release()
        await settle(0.1)
        assert [noscripts(node) for node in redis_nodes] == [0, 0, 0]


async def test_a_new_connection_loads_the_scripts_in_use(redis_nodes: RedisNodes) -> None:
    # After a reconnect, the first command loads its own script; the
    # release goes out on the hot path and must find its script too.
    _fresh(redis_nodes)
    async with lean(redis_nodes) as redlock:
        warm = redlock.lock("warm", ttl=5.0, auto_extend=False)
        assert await warm.acquire(blocking=False)
        await warm.release()
        await settle(0.1)
        redis_nodes[0].client().script_flush()
        redis_nodes[0].reset_connections()  # our connection to it breaks
        await settle(0.1)
        for attempt in range(3):
            lock = redlock.lock(f"job{attempt}", ttl=5.0, auto_extend=False)
            assert await lock.acquire(blocking=False)
            await lock.release()
        await settle(0.1)
        assert noscripts(redis_nodes[0]) == 0
        # The three in use (census.lua, acquire.lua, release.lua) twice:
        # before the flush, and on the new connection.
        assert script_loads(redis_nodes[0]) == 6


async def test_a_flushed_cache_is_loaded_again_once(redis_nodes: RedisNodes) -> None:
    # A burst of commands already written when the cache was flushed: every
    # one is answered NOSCRIPT, and the scripts are loaded again once per
    # flush seen, not once per NOSCRIPT.
    _fresh(redis_nodes)
    async with lean(redis_nodes) as redlock:
        warm = redlock.lock("warm", ttl=5.0, auto_extend=False)
        assert await warm.acquire(blocking=False)
        await warm.release()
        await settle(0.1)
        for node in redis_nodes:
            node.client().script_flush()
        locks = [redlock.lock(f"job{i}", ttl=5.0, auto_extend=False) for i in range(50)]
        granted = await asyncio.gather(*(lock.acquire(blocking=False) for lock in locks))
        assert not any(granted)  # a granting script is never resent
        # Every acquire, on every node (a release sent where the NOSCRIPT had
        # not come back yet gets one too, and is resent as EVAL).
        assert await eventually(lambda: all(noscripts(n) >= 50 for n in redis_nodes))
        # census.lua, acquire.lua and release.lua before the flush, and once
        # more after.
        assert await eventually(lambda: all(script_loads(n) == 6 for n in redis_nodes))
        again = redlock.lock("again", ttl=5.0, auto_extend=False)
        assert await again.acquire(blocking=False)
        await again.release()
    assert await no_keys_left(redis_nodes)
