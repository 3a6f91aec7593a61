"""Misbehaving nodes cost one vote each: never a crash, a hang or a leaked key."""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time

import pytest

from redlock_async import (
    LockLost,
    NodeConnectionError,
    NodeResponseError,
    NodeTimeoutError,
    Redlock,
)
from redlock_async._core._scripts import ALL_SCRIPTS, STATUS
from redlock_async._engine._node import Unsent
from redlock_async._engine._tally import PENDING, Tally
from redlock_async.testing import RedisNodes

from ..conftest import MakeRedlock, eventually, no_keys_left, settle

KEY = b"redlock:{job}"


async def test_blackholed_node_does_not_stall(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    redlock = make_redlock()
    redis_nodes[0].blackhole()
    for _ in range(5):
        # A hang would show as a test timeout; each call is bounded by
        # node_timeout because the healthy majority decides.
        lock = redlock.lock("job", ttl=5.0, auto_extend=False)
        assert await asyncio.wait_for(lock.acquire(blocking=False), 5)
        await asyncio.wait_for(lock.release(), 5)
    # With a majority blackholed, the vote fails instead of hanging.
    redis_nodes[1].blackhole()
    lock = redlock.lock("job", ttl=5.0)
    assert not await asyncio.wait_for(lock.acquire(blocking=False), 5)
    errors = lock._errors
    assert set(errors) == set(redlock.nodes[:2])
    assert all(isinstance(e, NodeTimeoutError) for e in errors.values())
    redis_nodes[0].heal()
    redis_nodes[1].heal()
    # The dead connections are replaced (after backoff) once the nodes answer again.
    lock = redlock.lock("job", ttl=5.0, auto_extend=False)
    assert await lock.acquire(timeout=10.0)
    await lock.release()
    assert await no_keys_left(redis_nodes[1:])


async def test_blackhole_does_not_pile_up_commands(redis_nodes: RedisNodes) -> None:
    redlock = Redlock([node.url for node in redis_nodes])
    try:
        redis_nodes[0].blackhole()
        node = redlock._core.nodes[0]
        for _ in range(40):
            lock = redlock.lock("job", ttl=5.0, auto_extend=False)
            assert await lock.acquire(blocking=False)
            await lock.release()
            await asyncio.sleep(0.02)
        # The stalled connection was dropped; commands now fail fast while it backs off.
        conn = node._conn  # type: ignore[attr-defined]
        assert conn is None or len(conn.pending) < 80
    finally:
        await redlock.aclose()


def _connections(redlock: Redlock) -> list[object]:
    return [node._conn for node in redlock._core.nodes]  # type: ignore[attr-defined]


async def test_commands_queued_before_our_loop_stalls_do_not_drop_connections(
    redis_nodes: RedisNodes, caplog: pytest.LogCaptureFixture
) -> None:
    # A blocking call in user code stops the loop after an attempt queued its
    # commands but before they were written. Nodes are not silent for that.
    redlock = Redlock(redis_nodes.urls, node_timeout=0.05)  # connections drop after 0.5 s
    try:
        warm = redlock.lock("warm", ttl=5.0, auto_extend=False)
        assert await warm.acquire()
        await warm.release()
        connections = _connections(redlock)
        lock = redlock.lock("job", ttl=5.0, auto_extend=False)
        with caplog.at_level(logging.WARNING, logger="redlock_async"):
            attempt = asyncio.ensure_future(lock.acquire(timeout=5.0))
            await asyncio.sleep(0)  # the attempt queues its commands...
            time.sleep(1.0)  # noqa: ASYNC251 - ...and the loop stops before writing them
            assert await attempt
            await lock.release()
        assert "dropping its connection" not in caplog.text
        assert _connections(redlock) == connections
    finally:
        await redlock.aclose()
    assert await no_keys_left(redis_nodes)


async def test_replies_unread_during_our_loop_stall_do_not_drop_connections(
    redis_nodes: RedisNodes, caplog: pytest.LogCaptureFixture
) -> None:
    # The node replied in time, but our loop was blocked and the deadline
    # check ran before the loop read the socket again.
    redlock = Redlock(redis_nodes.urls, node_timeout=0.05)  # connections drop after 0.5 s
    loop = asyncio.get_running_loop()
    try:
        warm = redlock.lock("warm", ttl=5.0, auto_extend=False)
        assert await warm.acquire()
        await warm.release()
        await asyncio.sleep(0.1)  # old deadline timers are done
        connections = _connections(redlock)

        def block_then_reply() -> None:
            # Runs just before the deadline check, in the same loop iteration:
            # node 0 answers (resumed) while the loop is blocked here.
            threading.Timer(0.05, redis_nodes[0].resume).start()
            time.sleep(0.6)

        lock = redlock.lock("job", ttl=5.0, auto_extend=False)
        with caplog.at_level(logging.WARNING, logger="redlock_async"):
            redis_nodes[0].pause()
            assert await lock.acquire(blocking=False)  # nodes 1 and 2 are a quorum
            grant = lock._grant
            assert grant is not None
            acquired = grant.acquired
            assert isinstance(acquired, Tally)  # not renewed: the whole tally is kept
            # 2 ms early, not less: uvloop's timers count whole milliseconds,
            # and timers due in the same one run in the order they were made
            # (the deadline check first).
            loop.call_at(acquired.deadline - 0.002, block_then_reply)
            # Block past the deadline with node 0 still paused: the next
            # iteration then finds both timers due and no reply on the socket.
            time.sleep(0.2)  # noqa: ASYNC251 - the fault
            await asyncio.sleep(0.2)
            assert acquired.replies[0] == 1  # node 0's late yes arrived
            await lock.release()
        assert "dropping its connection" not in caplog.text
        assert _connections(redlock) == connections
    finally:
        redis_nodes[0].resume()
        await redlock.aclose()
    assert await no_keys_left(redis_nodes)


async def test_refused_connections_are_failed_votes_and_recover(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    redlock = make_redlock()
    redis_nodes[0].kill()
    redis_nodes[1].kill()
    lock = redlock.lock("job", ttl=5.0)
    assert not await lock.acquire(blocking=False)
    assert all(isinstance(e, NodeConnectionError) for e in lock._errors.values())
    redis_nodes[0].restart()
    redis_nodes[1].restart()
    lock = redlock.lock("job", ttl=5.0, auto_extend=False)
    assert await lock.acquire(timeout=10.0)
    await lock.release()


async def test_connection_reset_costs_one_attempt(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    redlock = make_redlock()
    lock = redlock.lock("job", ttl=5.0, auto_extend=False)
    assert await lock.acquire()
    await lock.release()
    for node in redis_nodes:
        node.reset_connections()
    lock = redlock.lock("job", ttl=5.0, auto_extend=False)
    assert await lock.acquire(timeout=5.0)
    await lock.release()


async def test_foreign_key_of_another_type(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    redlock = make_redlock()
    redis_nodes[0].client().rpush(KEY, b"not a lock")
    lock = redlock.lock("job", ttl=5.0, auto_extend=False)
    assert await lock.acquire(blocking=False)  # that node says no; two others say yes
    await lock.release()
    redis_nodes[1].client().rpush(KEY, b"not a lock")
    lock = redlock.lock("job", ttl=5.0)
    assert not await lock.acquire(blocking=False)
    assert redis_nodes[0].client().lrange(KEY, 0, -1) == [b"not a lock"]


async def test_error_replies_are_reported_per_node(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    redlock = make_redlock()
    oom = redis_nodes[0].client()
    oom.config_set("maxmemory", 1)
    oom.config_set("maxmemory-policy", "noeviction")
    replica = redis_nodes[1].client()
    replica.replicaof("127.0.0.1", redis_nodes[2].direct_port)
    try:
        lock = redlock.lock("job", ttl=5.0)
        assert not await lock.acquire(blocking=False)
        errors = lock._errors
        assert isinstance(errors[redlock.nodes[0]], NodeResponseError)
        assert "OOM" in str(errors[redlock.nodes[0]])
        assert isinstance(errors[redlock.nodes[1]], NodeResponseError)
        assert "READONLY" in str(errors[redlock.nodes[1]])
    finally:
        oom.config_set("maxmemory", 0)
        replica.replicaof("NO", "ONE")
    assert await no_keys_left(redis_nodes[:1])


async def test_script_flush_costs_at_most_one_attempt(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # A granting script is never resent (the lean driver's vote fails and the
    # scripts are loaded again); the others fall back to EVAL.
    redlock = make_redlock(retry_delay=0.01, retry_jitter=0.01)
    lock = redlock.lock("job", ttl=5.0, auto_extend=False)
    assert await lock.acquire()
    await lock.release()
    for node in redis_nodes:
        node.client().script_flush()
    lock = redlock.lock("job", ttl=5.0, auto_extend=False)
    assert await lock.acquire(timeout=5.0)
    for node in redis_nodes:
        node.client().script_flush()
    await lock.extend()  # EVAL fallback
    await lock.release()  # EVAL fallback
    assert await no_keys_left(redis_nodes)
    again = redlock.lock("job", ttl=5.0, auto_extend=False)
    assert await again.acquire(timeout=5.0)
    await again.release()


def test_script_hashes_match_the_server(redis_nodes: RedisNodes) -> None:
    client = redis_nodes[0].client()
    for script in (*ALL_SCRIPTS, STATUS):  # STATUS runs from the CLI only
        assert client.script_load(script.source).encode() == script.sha


async def test_extend_renews_and_never_recreates(redlock: Redlock, redis_nodes: RedisNodes) -> None:
    lock = redlock.lock("job", ttl=1.0, auto_extend=False)
    assert await lock.acquire()
    await lock.extend(ttl=20.0)
    assert lock.valid_for > 19.0
    # The decision needs two votes; the third node's reply may still be on
    # its way under load, so wait for it rather than for a fixed 50 ms.
    assert await eventually(lambda: all(node.client().pttl(KEY) > 15_000 for node in redis_nodes))
    for node in redis_nodes:
        node.client().delete(KEY)
    with pytest.raises(LockLost):
        await lock.extend()
    assert lock.lost
    assert not lock.held
    assert await no_keys_left(redis_nodes)


async def test_extend_after_the_key_was_taken(redlock: Redlock, redis_nodes: RedisNodes) -> None:
    lock = redlock.lock("job", ttl=0.2, auto_extend=False)
    assert await lock.acquire()
    await asyncio.sleep(0.3)
    for node in redis_nodes:
        node.client().set(KEY, b"new-holder", px=10_000)
    with pytest.raises(LockLost):
        await lock.extend()
    assert [node.client().get(KEY) for node in redis_nodes] == [b"new-holder"] * 3


async def test_password_protected_nodes(redis_nodes: RedisNodes) -> None:
    for node in redis_nodes:
        node.client().config_set("requirepass", "s3cret-pw")
    good = Redlock([node.url.replace("redis://", "redis://:s3cret-pw@") for node in redis_nodes])
    bad = Redlock([node.url.replace("redis://", "redis://:wrong-pw@") for node in redis_nodes])
    try:
        lock = good.lock("job", ttl=5.0, auto_extend=False)
        assert await lock.acquire()
        await lock.release()
        lock = bad.lock("job", ttl=5.0)
        assert not await lock.acquire(blocking=False)
        text = repr(lock._errors) + repr(bad) + str(list(lock._errors.values()))
        assert "s3cret" not in text
        assert "wrong-pw" not in text
    finally:
        await good.aclose()
        await bad.aclose()


async def test_selected_database(redis_nodes: RedisNodes) -> None:
    redlock = Redlock([node.url.rsplit("/", 1)[0] + "/3" for node in redis_nodes])
    try:
        lock = redlock.lock("job", ttl=5.0, auto_extend=False)
        assert await lock.acquire()
        await settle(0.05)
        assert redis_nodes[0].client().keys("*") == []  # not in db 0
        await lock.release()
    finally:
        await redlock.aclose()


async def test_closed_redlock_refuses_new_locks(redis_nodes: RedisNodes) -> None:
    redlock = Redlock(redis_nodes.urls)
    lock = redlock.lock("job", ttl=5.0)
    assert await lock.acquire()
    await redlock.aclose()
    with pytest.raises(Exception, match="closed"):
        redlock.lock("job")
    with pytest.raises(Exception, match="closed"):
        await lock.acquire()


async def test_release_that_cannot_be_confirmed_does_not_raise(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes, caplog: pytest.LogCaptureFixture
) -> None:
    redlock = make_redlock()
    lock = redlock.lock("job", ttl=5.0, auto_extend=False)
    assert await lock.acquire()
    redis_nodes[0].kill()
    redis_nodes[1].kill()
    await lock.release()  # nobody said the grant was gone: a warning, not an error
    assert "not confirmed" in caplog.text
    assert not lock.held


async def test_commands_beyond_the_in_flight_bound_wait_for_room(
    redis_nodes: RedisNodes, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A frozen node keeps every command pending; past the bound, new ones
    # wait unwritten for room (backpressure), never failed for the volume.
    from redlock_async._engine.resp import _conn

    # node_timeout=0.5: node 0's connection is dropped only after 2 s of
    # silence, far beyond this test, even on a loaded machine.
    redlock = Redlock(redis_nodes.urls, node_timeout=0.5)
    try:
        warm = redlock.lock("warm", ttl=5.0, auto_extend=False)
        assert await warm.acquire()
        await warm.release()
        conn = _connections(redlock)[0]
        assert conn is not None
        monkeypatch.setattr(_conn, "MAX_PENDING", 6)
        redis_nodes[0].pause()
        locks = [redlock.lock(f"job{i}", ttl=30.0, auto_extend=False) for i in range(10)]
        # One after another: the others answer each, node 0 answers none.
        for lock in locks:
            assert await lock.acquire(blocking=False)
        tallies = [lock._grant.acquired for lock in locks]  # type: ignore[union-attr]
        assert [tally.replies[0] for tally in tallies] == [PENDING] * 10
        # Six on the wire, four waiting for room; none failed.
        assert len(conn.pending) == 10  # type: ignore[attr-defined]
        assert len(conn.held) == 4  # type: ignore[attr-defined]
        for lock in locks:
            await lock.release()  # confirmed by the others; node 0's share waits
        assert len(conn.held) == 14  # type: ignore[attr-defined]
        assert _connections(redlock)[0] is conn  # waiting is not a disconnect
        redis_nodes[0].resume()
        # Node 0 answers the six, which makes room for the rest, in order:
        # every grant and every release lands there too.
        assert await eventually(lambda: all(t.replies[0] == 1 for t in tallies))
        assert await eventually(lambda: not conn.pending)  # type: ignore[attr-defined]
        assert not conn.held  # type: ignore[attr-defined]
        assert await no_keys_left(redis_nodes, within=5.0)  # long before the 30 s ttl
    finally:
        await redlock.aclose()


async def test_a_silent_node_does_not_pile_up_commands_waiting_for_room(
    redis_nodes: RedisNodes, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What waits for room is bounded in time: the stall check drops the
    # connection of a node silent for the stall limit (0.5 s here), failing
    # what was written (it may have run) and what waited (as never sent).
    from redlock_async._engine.resp import _conn

    redlock = Redlock(redis_nodes.urls, node_timeout=0.05)
    try:
        warm = redlock.lock("warm", ttl=5.0, auto_extend=False)
        assert await warm.acquire()
        await warm.release()
        conn = _connections(redlock)[0]
        monkeypatch.setattr(_conn, "MAX_PENDING", 6)
        redis_nodes[0].pause()
        tallies = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10.0
        # Commands keep coming (their votes time out, and each look at a
        # silent node is a stall check) until the connection is dropped.
        while _connections(redlock)[0] is conn and loop.time() < deadline:
            lock = redlock.lock("job", ttl=5.0, auto_extend=False)
            assert await lock.acquire(blocking=False)
            assert lock._grant is not None
            tallies.append(lock._grant.acquired)
            await lock.release()
            await asyncio.sleep(0.02)
        assert _connections(redlock)[0] is not conn
        replies = [tally.replies[0] for tally in tallies]
        # Stalled: each vote timed out, or (the last ones, on a loaded machine)
        # was failed by the drop itself; none was answered.
        assert all(isinstance(reply, NodeTimeoutError | NodeConnectionError) for reply in replies)
        # Room for 3 acquires and their releases at most; fewer when a timed
        # out release's resend takes a place (a loaded machine, CI): the
        # written ones come first, then every one that waited, never sent.
        written = list(itertools.takewhile(lambda reply: not isinstance(reply, Unsent), replies))
        waited = replies[len(written) :]
        assert 1 <= len(written) <= 3, replies
        assert waited
        assert all(isinstance(reply, Unsent) for reply in waited), replies
        redis_nodes[0].resume()
    finally:
        await redlock.aclose()
    assert await no_keys_left(redis_nodes)  # node 0's expire with their 5 s ttl, or are resent
