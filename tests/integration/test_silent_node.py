"""A node gone silent (blackholed, paused) costs its vote and nothing else.

Through the lean driver, once the stall check has dropped a silent node's
connection, nothing but probes (a new connection's handshake) is written to
it until it answers one: its commands fail at once as never sent - no entry
waiting for a connection, no deadline, no pending vote - and the node votes
again once it answers. What it may have run before it went silent is still
cleaned up when it is back. Real redis-server processes, both loops.
"""

from __future__ import annotations

import asyncio

from redlock_async import Redlock
from redlock_async._engine._node import Unsent
from redlock_async._engine._tally import PENDING
from redlock_async._engine.resp._node import RespNode
from redlock_async.testing import RedisNodes

from ..conftest import MakeRedlock, eventually, lock_keys, no_keys_left


def _resp_node(redlock: Redlock) -> RespNode:
    node = redlock._core.nodes[0]
    assert isinstance(node, RespNode)  # a redis:// URL: the lean driver
    return node


async def _pair(redlock: Redlock, name: str) -> None:
    lock = redlock.lock(name, ttl=30.0, auto_extend=False)
    # The healthy majority decides (retried: on a busy machine a healthy node
    # may miss node_timeout too, and two of three must answer).
    assert await lock.acquire(timeout=5.0)
    await lock.release()


async def _until_silent(redlock: Redlock, tag: str) -> None:
    """Run pairs until the stall check has dropped node 0's connection.

    The check runs when a vote of the node times out, so it needs traffic.
    """
    node = _resp_node(redlock)
    i = 0
    while not node._silent:
        i += 1
        await _pair(redlock, f"{tag}:{i}")
        await asyncio.sleep(0.02)


async def test_a_silent_node_is_written_nothing_and_nothing_waits_for_it(
    redis_nodes: RedisNodes,
) -> None:
    redlock = Redlock([node.url for node in redis_nodes])
    try:
        redis_nodes[0].blackhole()
        await _until_silent(redlock, "warm")
        node = _resp_node(redlock)
        quorum = redlock._core._quorum
        for i in range(200):
            lock = redlock.lock(f"job:{i}", ttl=30.0, auto_extend=False)
            assert await lock.acquire(timeout=5.0)
            grant = lock._grant
            assert grant is not None
            await lock.release()
            await asyncio.sleep(0)  # node 0's outcome, failed at once, is settled
            # Its vote failed unsent (never written), not timed out pending:
            # no connection takes commands, none waits for one, and no
            # fan-out keeps a deadline for it.
            assert isinstance(grant.acquired.replies[0], Unsent)
            assert node._conn is None
            assert node._waiting == []
            assert all(tally.replies[0] is not PENDING for tally in quorum._due)
    finally:
        await redlock.aclose()
    assert await no_keys_left(redis_nodes)


async def test_a_silent_node_votes_again_once_it_answers(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    redlock = make_redlock()
    redis_nodes[0].blackhole()
    for i in range(30):  # past the stall limit: the lean driver drops the connection
        await _pair(redlock, f"warm:{i}")
        await asyncio.sleep(0.02)
    redis_nodes[0].heal()
    i = 0

    async def node_0_holds_a_grant() -> bool:
        nonlocal i
        i += 1
        lock = redlock.lock(f"healed:{i}", ttl=30.0, auto_extend=False)
        assert await lock.acquire(timeout=5.0)
        held = bool(lock_keys(redis_nodes[:1], f"redlock:{{healed:{i}}}")[0])
        await lock.release()
        return held

    # Within its reconnection backoff (2 s at most) and a probe's round trip.
    for _ in range(500):
        if await node_0_holds_a_grant():
            break
        await asyncio.sleep(0.02)
    else:
        raise AssertionError("node 0 never voted again after it was healed")
    assert await no_keys_left(redis_nodes)


async def test_a_release_reaches_a_node_that_ran_its_acquire_before_it_went_silent(
    redis_nodes: RedisNodes,
) -> None:
    # Node 0 is paused with our acquire in its socket; its connection is
    # dropped; the release comes while the node is silent, so it cannot be
    # written. When the node resumes it runs the acquire: the release must
    # still reach it, after the acquire (it used to fail as never sent, and
    # the key blocked everyone for its whole ttl).
    redlock = Redlock([node.url for node in redis_nodes])
    paused = redis_nodes[0]
    try:
        await _pair(redlock, "warm")  # connected: the acquire below is written at once
        paused.pause()
        lock = redlock.lock("job", ttl=30.0, auto_extend=False)
        assert await lock.acquire(timeout=5.0)  # granted by the two others
        assert lock._grant is not None
        assert not isinstance(lock._grant.acquired.replies[0], Unsent)  # written to node 0
        await _until_silent(redlock, "other")
        await lock.release()  # never written to node 0
        await asyncio.sleep(1.0)  # a probe or two go unanswered meanwhile
        paused.resume()
        assert await eventually(lambda: not lock_keys([paused])[0], within=10.0)
    finally:
        paused.resume()
        await redlock.aclose()
    assert await no_keys_left(redis_nodes)
