"""``unavailable_timeout`` against real nodes, through both drivers: busy is not down.

Every node refusing connections (the proxy stops listening) or stopped: the
wait ends after ``unavailable_timeout``, well before ``timeout``. A name
held elsewhere, with every node up or a minority down, is waited for the
whole ``timeout``. Nodes back within ``unavailable_timeout`` grant it.
Exact times are tests/unit/test_unavailable.py's (virtual time); here the
bounds are loose: "well below the timeout", and "not before it".
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Unpack

import pytest

from redlock_async import Lock, LockBusy, QuorumUnavailable, Redlock
from redlock_async._core._lock import LockKeywords
from redlock_async.testing import RedisNodes

from ..conftest import MakeRedlock

TIMEOUT = 5.0
SHORT = 0.3  # unavailable_timeout, well below TIMEOUT
# A busy wait's unavailable_timeout: well below its timeout, yet more than one
# attempt long, so that one vote late on a loaded machine is not an outage.
BUSY_TIMEOUT, BUSY_UNAVAILABLE = 1.0, 0.3


async def timed(lock: Lock, **call: float | None) -> tuple[bool, float]:
    """``lock.acquire(**call)``: what it returned, and after how long (wall clock)."""
    start = time.monotonic()
    async with asyncio.timeout(60.0):  # a wait that never ends fails the test
        ok = await lock.acquire(**call)  # type: ignore[arg-type]
    return ok, time.monotonic() - start


def holder_and_waiter(make_redlock: MakeRedlock) -> tuple[Redlock, Redlock]:
    """Two Redlocks on the same nodes: one holds, the other waits.

    A generous node_timeout for the waiter: on a loaded machine (CI runs
    tests beside each other) a busy node's answer may take longer than the
    0.25 s default through redis-py, and would then read as "down".
    """
    return make_redlock(), make_redlock(node_timeout=2.0)


async def waits_as_busy(other: Redlock) -> None:
    """A held name: ``other`` waits its whole timeout, then reports it busy."""
    lock = other.lock("job", timeout=BUSY_TIMEOUT, unavailable_timeout=BUSY_UNAVAILABLE)
    ok, waited = await timed(lock)
    assert not ok
    assert waited >= BUSY_TIMEOUT - 0.01, waited
    with pytest.raises(LockBusy):
        async with other.lock("job", timeout=0.5, unavailable_timeout=BUSY_UNAVAILABLE):
            pytest.fail("entered the body without the lock")


def refuse_all(redis_nodes: RedisNodes) -> None:
    for node in redis_nodes:
        node.refuse()


async def test_every_node_refusing_gives_up_well_before_the_timeout(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    redlock = make_redlock()
    refuse_all(redis_nodes)
    lock = redlock.lock("job", timeout=TIMEOUT, unavailable_timeout=SHORT)
    ok, waited = await timed(lock)
    assert not ok
    assert waited < TIMEOUT / 2, waited
    # The last attempt is decided once two of three nodes failed (no quorum
    # can follow): the third may not have failed yet.
    assert len(lock.errors) >= 2, lock.errors
    assert set(lock.errors) <= set(redlock.nodes), lock.errors
    with pytest.raises(QuorumUnavailable, match=r"unavailable_timeout=0\.3s") as raised:
        async with redlock.lock("job", timeout=TIMEOUT, unavailable_timeout=SHORT):
            pytest.fail("entered the body without the lock")
    errors = raised.value.errors
    assert len(errors) >= 2, errors
    assert set(errors) <= set(redlock.nodes), errors


async def test_stopped_nodes_end_the_wait_too(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    for node in redis_nodes:
        node.stop()  # the proxies stay: connections are accepted, then cut
    redlock = make_redlock()
    ok, waited = await timed(redlock.lock("job", timeout=TIMEOUT, unavailable_timeout=SHORT))
    assert not ok
    assert waited < TIMEOUT / 2, waited


async def test_no_timeout_with_every_node_down_returns_after_unavailable_timeout(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    redlock = make_redlock(unavailable_timeout=SHORT)  # the Redlock's default for its locks
    refuse_all(redis_nodes)
    ok, _ = await timed(redlock.lock("job", timeout=None))
    assert not ok
    with pytest.raises(QuorumUnavailable):
        async with asyncio.timeout(60.0), redlock.lock("job"):
            pytest.fail("entered the body without the lock")


async def test_a_busy_lock_waits_its_whole_timeout(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    holder, other = holder_and_waiter(make_redlock)
    async with holder.lock("job"):
        await waits_as_busy(other)


async def test_a_minority_down_is_not_an_outage(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    holder, other = holder_and_waiter(make_redlock)
    async with holder.lock("job"):
        redis_nodes[0].refuse()
        await waits_as_busy(other)
    # Free, with the minority still down: granted.
    ok, _ = await timed(other.lock("job", timeout=TIMEOUT))
    assert ok


async def test_nodes_back_within_unavailable_timeout_grant_it(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    redlock = make_redlock()
    refuse_all(redis_nodes)
    lock = redlock.lock("job", timeout=None, unavailable_timeout=20.0)
    waiting = asyncio.ensure_future(timed(lock))
    await asyncio.sleep(0.5)
    assert not waiting.done()
    for node in redis_nodes:
        node.heal()
    ok, _ = await waiting
    assert ok
    assert lock.held
    await lock.release()


def _write(redlock: Redlock, **options: Unpack[LockKeywords]) -> Lock:
    return redlock.rwlock("rw").write(**options)


def _read(redlock: Redlock, **options: Unpack[LockKeywords]) -> Lock:
    return redlock.rwlock("rw").read(**options)


def _multilock(redlock: Redlock, **options: Unpack[LockKeywords]) -> Lock:
    return redlock.multilock(["a", "b"], **options)


def _semaphore(redlock: Redlock, **options: Unpack[LockKeywords]) -> Lock:
    return redlock.semaphore("s", 2, **options)


def _fair(redlock: Redlock, **options: Unpack[LockKeywords]) -> Lock:
    options["fair"] = True
    return redlock.lock("f", **options)


@pytest.mark.parametrize("make", [_write, _read, _multilock, _semaphore, _fair])
async def test_every_kind_gives_up_when_every_node_refuses(
    make: Callable[..., Lock], make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    redlock = make_redlock()
    refuse_all(redis_nodes)
    start = time.monotonic()
    with pytest.raises(QuorumUnavailable):
        async with asyncio.timeout(60.0), make(redlock, timeout=TIMEOUT, unavailable_timeout=SHORT):
            pytest.fail("entered the body without the lock")
    assert time.monotonic() - start < TIMEOUT / 2
