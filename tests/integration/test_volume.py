"""Volume never drops a release: past the client's own bounds, commands wait, then land.

100,000 held locks released in one ``asyncio.gather`` on three healthy nodes
used to leave 34,465 keys on every node until their ttl, every ``release()``
returning without error: the lean driver failed the commands beyond its
in-flight bound (65,536 per connection), and ``aclose()`` stopped waiting for
the releases of held locks after a fixed stall limit. Now what is beyond a
bound waits for room (backpressure) and every release is confirmed.

The default tier lowers the lean driver's bound (``_conn.MAX_PENDING``) so a
burst of a few thousand exceeds it; ``REDLOCK_TEST_REAL_SCALE=1`` runs the
100,000 of the report against the real bound (about a minute per case with
the lean driver, several with redis-py).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Sequence

import pytest
import redis.asyncio

from redlock_async import Lock, Redlock
from redlock_async._engine.resp import _conn
from redlock_async.testing import RedisNode, RedisNodes

from ..conftest import MakeRedlock, lock_keys, no_keys_left

# Far past the lowered bound of the lean driver, and past redis-py's window
# (at most 256 commands in flight per node) ...
BURST = {"resp": 4000, "redis-py": 1000}
# ... and past what redis-py answers in aclose()'s old fixed wait (one stall
# limit: 1 s at its 0.25 s node_timeout).
CLOSING = {"resp": 4000, "redis-py": 3000}
LOWERED = 64
# What is tested is volume, not slowness: through the test proxy, on two
# cores shared with other test runs, a reply now and then takes longer than
# the default node_timeout, and that vote would rightly time out.
NODE_TIMEOUT = 1.0
REAL_SCALE = 100_000

real_scale = pytest.mark.skipif(
    os.environ.get("REDLOCK_TEST_REAL_SCALE") != "1",
    reason="100,000 locks: set REDLOCK_TEST_REAL_SCALE=1",
)


@pytest.fixture
def lower_bound(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """Lowers the lean driver's in-flight bound so that BURST exceeds it 30 times."""
    return lambda: monkeypatch.setattr(_conn, "MAX_PENDING", LOWERED)


async def held_locks(redlock: Redlock, n: int, tag: str) -> list[Lock]:
    """``n`` locks held at once, each on its own name, none renewed (ttl 300 s)."""
    # Connected first: a cold connection's connect and handshake count as the
    # node's silence, and through the test proxy on a busy machine they can
    # outlast node_timeout.
    warm = redlock.lock(f"{tag}:warm", auto_extend=False)
    assert await warm.acquire()
    await warm.release()
    locks = [redlock.lock(f"{tag}:{i}", ttl=300.0, auto_extend=False) for i in range(n)]
    # Blocking, with a deadline far off: one-shots past the admission line
    # are refused after a vote limit's wait (by design), and through redis-py
    # (50 attempts in flight) a burst of thousands needs longer than that.
    granted = await asyncio.gather(*(lock.acquire(timeout=120.0) for lock in locks))
    held = [lock for lock, ok in zip(locks, granted, strict=True) if ok]
    # Granting all of a burst is test_load.py's business; here, enough of
    # them must be held to pass the bound under test many times over.
    assert len(held) > 0.9 * n, f"{n - len(held)} of {n} not granted"
    return held


def lagging(nodes: Sequence[RedisNode], quorum: int) -> list[bytes]:
    """Keys still on more nodes than a release's quorum can leave behind."""
    counts: dict[bytes, int] = {}
    for keys in lock_keys(nodes):
        for key in keys:
            counts[key] = counts.get(key, 0) + 1
    return [key for key, count in counts.items() if count > len(nodes) - quorum]


async def release_all(
    redlock: Redlock,
    nodes: Sequence[RedisNode],
    locks: list[Lock],
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="redlock_async"):
        outcomes = await asyncio.gather(*(lock.release() for lock in locks))
    assert outcomes == [None] * len(locks)
    # Each release returned once a quorum confirmed it: no key is left on a
    # quorum; the last node's replies may still be a write behind ...
    assert lagging(nodes, redlock.quorum)[:3] == []
    assert [r.getMessage() for r in caplog.records][:3] == []  # e.g. "not confirmed"
    # ... and land at once, not when the keys' 300 s ttl ends.
    assert await no_keys_left(nodes, within=5.0), [len(keys) for keys in lock_keys(nodes)]


async def close_holding(redlock: Redlock, nodes: Sequence[RedisNode], locks: list[Lock]) -> None:
    await redlock.aclose()
    assert all(lock.lost for lock in locks)
    # aclose() waits for every node that answers: nothing is left, now.
    assert [len(keys) for keys in lock_keys(nodes)] == [0] * len(nodes)


async def test_a_burst_of_releases_beyond_the_clients_bound_is_all_confirmed(
    make_redlock: MakeRedlock,
    redis_nodes: RedisNodes,
    driver: str,
    lower_bound: Callable[[], None],
    caplog: pytest.LogCaptureFixture,
) -> None:
    redlock = make_redlock(node_timeout=NODE_TIMEOUT)
    locks = await held_locks(redlock, BURST[driver], "burst")
    lower_bound()  # the releases, not the acquires, meet the bound
    await release_all(redlock, redis_nodes, locks, caplog)


async def test_aclose_with_more_locks_held_than_the_clients_bound_releases_them_all(
    make_redlock: MakeRedlock,
    redis_nodes: RedisNodes,
    driver: str,
    lower_bound: Callable[[], None],
    caplog: pytest.LogCaptureFixture,
) -> None:
    redlock = make_redlock()  # aclose() waited one stall limit: 1 s here with redis-py
    locks = await held_locks(redlock, CLOSING[driver], "close")
    lower_bound()
    # Each lost lock logs a warning; that is aclose()'s documented behaviour.
    with caplog.at_level(logging.ERROR, logger="redlock_async"):
        await close_holding(redlock, redis_nodes, locks)


# At this scale a burst keeps the loop busy for a minute (collecting 100,000
# locks' garbage alone stalls it for a second now and then), and redis-py
# tasks see a reply a loop iteration or two after it arrived: a vote judged
# right after a stall can take a busy node for a silent one. What is tested
# here is volume, so the nodes get time.
REAL_SCALE_NODE_TIMEOUT = 5.0


async def direct_redlock(
    driver: str, nodes: RedisNodes
) -> tuple[Redlock, list[redis.asyncio.Redis]]:
    """A Redlock straight on the servers: at this scale the test proxy is the bottleneck."""
    timeout = REAL_SCALE_NODE_TIMEOUT
    if driver == "resp":
        return Redlock([node.direct_url for node in nodes], node_timeout=timeout), []
    clients = [redis.asyncio.Redis.from_url(node.direct_url) for node in nodes]
    return Redlock(clients, node_timeout=timeout), clients


@real_scale
@pytest.mark.slow
@pytest.mark.timeout(1200)
async def test_100000_releases_at_once_at_the_real_bound(
    driver: str, redis_nodes: RedisNodes, caplog: pytest.LogCaptureFixture
) -> None:
    redlock, clients = await direct_redlock(driver, redis_nodes)
    try:
        locks = await held_locks(redlock, REAL_SCALE, "real")
        assert len(locks) > _conn.MAX_PENDING
        await release_all(redlock, redis_nodes, locks, caplog)
    finally:
        await redlock.aclose()
        for client in clients:
            await client.aclose()


@real_scale
@pytest.mark.slow
@pytest.mark.timeout(1200)
async def test_aclose_with_100000_locks_held_at_the_real_bound(
    driver: str, redis_nodes: RedisNodes, caplog: pytest.LogCaptureFixture
) -> None:
    redlock, clients = await direct_redlock(driver, redis_nodes)
    try:
        locks = await held_locks(redlock, REAL_SCALE, "real")
        assert len(locks) > _conn.MAX_PENDING
        with caplog.at_level(logging.ERROR, logger="redlock_async"):
            await close_holding(redlock, redis_nodes, locks)
    finally:
        await redlock.aclose()
        for client in clients:
            await client.aclose()
