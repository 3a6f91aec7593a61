"""A cleanup whose connection dies before its reply is sent again.

Deleting a key only if it still holds our token is safe to resend, so a node
whose connection broke under a release (or under a failed attempt's undo)
must not keep the key for a ttl: not when the connection is killed, and not
when the driver itself drops it - a node stalled past the stall limit, which
on resume reads the command from a closed connection and, lacking the script
(after a restart, a ``SCRIPT FLUSH``, a failover, or on first use), answers
NOSCRIPT to nobody, so the EVAL fallback never runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest
import redis.asyncio
import valkey.asyncio

from redlock_async import Redlock
from redlock_async._core._scripts import ACQUIRE
from redlock_async._engine import SERVER_ID
from redlock_async._engine._node import stall_limit
from redlock_async.testing import RedisNode, RedisNodes

from ..conftest import MakeRedlock, eventually, lock_keys, no_keys_left

_KEY = b"redlock:{job}"
# redis-py's default (conftest.make_redlock): its stall limit is 1 s.
_NODE_TIMEOUT = 0.25
# Past the stall limit: the driver has cut the command and dropped its connection.
_PAST_STALL = stall_limit(_NODE_TIMEOUT) + 0.5

MakeClients = Callable[[RedisNodes], list[redis.asyncio.Redis]]


async def test_a_release_whose_connection_is_killed_is_retried(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # node_timeout well above the time the release stays in flight below, so
    # the command to n1 is not abandoned as late before its connection dies.
    redlock = make_redlock(node_timeout=1.0)
    lock = redlock.lock("job", ttl=30.0, auto_extend=False)
    assert await lock.acquire()
    # Held on every node (the decision does not wait for the slowest one).
    assert await eventually(lambda: lock_keys(redis_nodes) == [[_KEY]] * 3)
    n1 = redis_nodes[0]
    n1.blackhole()  # the release to n1 stays in flight, held by the proxy
    try:
        release = asyncio.ensure_future(lock.release())
        await asyncio.sleep(0.2)
        assert lock_keys(redis_nodes)[0] == [_KEY]  # n1 has not seen it
        # Its connection dies before any reply: the held command is lost with it.
        assert n1.client().client_kill_filter(_type="normal") >= 1
    finally:
        n1.heal()
    await release  # n2 and n3 are a quorum: the release itself succeeds
    # Resent once the connection is back, the release removes n1's key too,
    # long before its 30 s ttl would.
    assert await no_keys_left(redis_nodes, within=5.0), lock_keys(redis_nodes)


@pytest.fixture(params=["redis-py", "valkey"])
async def clients(request: pytest.FixtureRequest) -> AsyncIterator[MakeClients]:
    """Clients of redis-py or valkey-py straight to each node (no proxy: the
    node's own sockets), no socket_timeout: the library bounds commands itself."""
    made: list[redis.asyncio.Redis] = []

    def make(nodes: RedisNodes) -> list[redis.asyncio.Redis]:
        kind = redis.asyncio.Redis if request.param == "redis-py" else valkey.asyncio.Valkey
        # valkey's clients share redis-py's API (the library accepts both).
        new: list[redis.asyncio.Redis] = [kind.from_url(node.direct_url) for node in nodes]
        made.extend(new)
        return new

    yield make
    for client in made:
        await client.aclose()
    await asyncio.sleep(0.05)  # sockets closed without waiting: let the loop finish them


def _without_release_script(node: RedisNode) -> None:
    """The node's script cache as after a restart or a failover: the release
    script is not there; the acquire (and redis-py's server probe) are, as
    after the first acquire since (it ran as EVAL, which caches it)."""
    direct = node.client()
    direct.script_flush()
    direct.script_load(ACQUIRE.source)
    direct.script_load(SERVER_ID.source)


async def test_a_release_cut_by_a_stall_reaches_a_node_without_the_script(
    clients: MakeClients, redis_nodes: RedisNodes
) -> None:
    async with Redlock(clients(redis_nodes), node_timeout=_NODE_TIMEOUT) as redlock:
        lock = redlock.lock("job", ttl=60.0, auto_extend=False)
        assert await lock.acquire(timeout=5.0)
        assert await eventually(lambda: lock_keys(redis_nodes) == [[_KEY]] * 3)
        stalled = redis_nodes[0]
        _without_release_script(stalled)
        stalled.pause()
        try:
            await lock.release()  # decided by the two others
            # The release to the stalled node is cut, its connection dropped;
            # the node has read its EVALSHA and will answer NOSCRIPT to nobody.
            await asyncio.sleep(_PAST_STALL)
        finally:
            stalled.resume()
        # Resent until it gets a reply (EVALSHA, then EVAL): the key goes
        # long before its 60 s ttl would.
        assert await eventually(lambda: not lock_keys([stalled])[0], within=10.0)


async def test_an_undo_cut_by_a_stall_reaches_a_node_without_the_script(
    clients: MakeClients, redis_nodes: RedisNodes
) -> None:
    async with Redlock(clients(redis_nodes), node_timeout=_NODE_TIMEOUT) as redlock:
        holder = redlock.lock("job", ttl=60.0, auto_extend=False)
        assert await holder.acquire(timeout=5.0)  # connections are up
        assert await eventually(lambda: lock_keys(redis_nodes) == [[_KEY]] * 3)
        stalled = redis_nodes[0]
        stalled.client().delete(_KEY)  # the holder's key is gone there (expired, say)
        _without_release_script(stalled)
        stalled.pause()
        try:
            # Refused by the two others: the attempt fails, and its undo
            # follows the acquire to the stalled node - both cut by the
            # stall limit. On resume the node runs the acquire (cached) and
            # answers the undo's EVALSHA, if it read it, NOSCRIPT to nobody.
            assert not await redlock.lock("job", ttl=60.0).acquire(blocking=False)
            await asyncio.sleep(2 * _PAST_STALL)
        finally:
            stalled.resume()
        # The undo is resent until the node answers it: no key of the failed
        # attempt stays there for its 60 s ttl.
        assert await eventually(lambda: not lock_keys([stalled])[0], within=10.0)
        await holder.release()


async def test_a_stalled_node_gets_one_probe_at_a_time_not_a_connection_per_resend(
    redis_nodes: RedisNodes,
) -> None:
    # Each release cut by the stall is resent until the node answers; to a
    # node that answers nothing, nothing goes out but a probe (a PING), one
    # at a time, and the resends fail unwritten - or each would open a
    # connection to it per stall limit, for as long as the keys may live.
    opened = [0]

    class Counted(redis.asyncio.Connection):
        """Counts the sockets it opens (the stalled node's client only)."""

        async def _connect(self) -> None:
            opened[0] += 1
            await super()._connect()  # type: ignore[no-untyped-call]

    stalled = redis_nodes[0]
    clients = [redis.asyncio.Redis.from_url(stalled.direct_url, connection_class=Counted)]
    clients += [redis.asyncio.Redis.from_url(node.direct_url) for node in redis_nodes[1:]]
    try:
        async with Redlock(clients, node_timeout=_NODE_TIMEOUT) as redlock:
            locks = [redlock.lock(f"job:{i}", ttl=60.0, auto_extend=False) for i in range(20)]
            for lock in locks:
                assert await lock.acquire(timeout=5.0)
            stalled.pause()
            try:
                await asyncio.gather(*(lock.release() for lock in locks))
                await asyncio.sleep(_PAST_STALL)  # every release to it has been cut
                before = opened[0]
                await asyncio.sleep(3 * stall_limit(_NODE_TIMEOUT))
                during = opened[0] - before
            finally:
                stalled.resume()
            assert during < len(locks), during
            # And once it answers, every release reaches it.
            assert await eventually(lambda: not lock_keys([stalled])[0], within=10.0)
    finally:
        for client in clients:
            await client.aclose()
