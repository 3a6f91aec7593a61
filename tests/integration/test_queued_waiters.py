"""Waiters queued in their process's line, and attempts at the deadline.

An outside review's findings, each fixed since. A blocking ``acquire()``
that finds waiters of its process already in its lock's line joins it
without a first attempt: its ``unavailable_timeout`` must still count
(docs/guarantees.md: "while no quorum answers: U + node_timeout"), from
the moment it joins. And a deadline that comes while a waiter is not
attempting (its subscription awaiting a silent node's confirmation) must
leave the last attempt's verdict standing - "busy" (409), not an attempt
cut before any vote reported as "unavailable" (503).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest

from redlock_async import LockBusy, LockNotAcquired, QuorumUnavailable, Redlock
from redlock_async.testing import RedisNodes

from ..conftest import MakeRedlock

SHORT = 0.5  # the second waiter's unavailable_timeout


@contextlib.asynccontextmanager
async def a_waiter_in_line(redlock: Redlock, nodes: RedisNodes) -> AsyncIterator[None]:
    """A quorum down (2 of 3 refuse connections; the third node is up, so the
    lock's channel is still heard there and passive waiters do not poll), and
    a first waiter of the process for "job" with no limit at all, in line."""
    nodes[0].refuse()
    nodes[1].refuse()
    first_task = asyncio.ensure_future(
        redlock.lock("job", timeout=None, unavailable_timeout=None).acquire()
    )
    try:
        await asyncio.sleep(0.5)  # it attempted, failed, and is in line
        assert not first_task.done()
        yield
    finally:
        first_task.cancel()
        await asyncio.gather(first_task, return_exceptions=True)


async def test_a_waiter_queued_behind_another_still_gives_up_after_its_unavailable_timeout(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    redlock = make_redlock()
    async with a_waiter_in_line(redlock, redis_nodes):
        # The second waiter of the process for the same lock: no timeout, but
        # an unavailable_timeout of SHORT. Before de59e06 it attempted at once
        # (its outage began) and gave up after SHORT; now it joins the line
        # without an attempt and waits for the first waiter to leave.
        second = redlock.lock("job", timeout=None, unavailable_timeout=SHORT)
        start = time.monotonic()
        try:
            async with asyncio.timeout(SHORT + 4.0):
                ok = await second.acquire()
        except TimeoutError:
            raise AssertionError(
                f"acquire(timeout=None, unavailable_timeout={SHORT}) with no quorum answering "
                f"did not return within {SHORT + 4.0}s (queued behind another waiter, it never "
                "attempted, so its outage never began)"
            ) from None
        waited = time.monotonic() - start
        assert not ok
        assert waited < SHORT + 2.0, waited


async def test_async_with_queued_behind_another_raises_quorum_unavailable_in_time(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # Same, through `async with` with a finite timeout: the bound is
    # U + node_timeout, not T (T is far longer here).
    redlock = make_redlock()
    async with a_waiter_in_line(redlock, redis_nodes):
        start = time.monotonic()
        raised: BaseException | None = None
        try:
            async with asyncio.timeout(20.0):
                async with redlock.lock("job", timeout=8.0, unavailable_timeout=SHORT):
                    raise AssertionError("entered the body without a quorum")
        except QuorumUnavailable as error:
            raised = error
        waited = time.monotonic() - start
        assert raised is not None
        # Documented bound: U + node_timeout after the first attempt; the
        # waiter was free to attempt at once, as before de59e06.
        assert waited < SHORT + 2.0, f"gave up after {waited:.2f}s, unavailable_timeout={SHORT}"


async def test_a_reader_joining_a_run_of_waiting_readers_reports_busy_not_unavailable(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # A writer of another process holds "rw"; node 2 is blackholed, so its
    # SSUBSCRIBE is never confirmed (the other two nodes answer: a quorum).
    redis_nodes[2].blackhole()
    holder = make_redlock()
    writer = holder.rwlock("rw").write(ttl=30.0)
    assert await writer.acquire(timeout=5.0)
    waiters = make_redlock()
    node_timeout = waiters.config.node_timeout
    first = waiters.rwlock("rw").read(timeout=None)
    first_task = asyncio.ensure_future(first.acquire())
    try:
        await asyncio.sleep(1.0)  # refused (busy), in line, attempting
        assert not first_task.done()
        # A second reader of the process joins the run of readers at once
        # (active), no first attempt; its subscription waits node_timeout for
        # node 2 - past its own deadline - and only then it attempts: the
        # attempt is cut at once, no vote in, and it reports "unavailable"
        # for a name two of three nodes say is held elsewhere (a 409 read as
        # a 503). Before de59e06 its first attempt came first: LockBusy.
        timeout = node_timeout / 2
        second = waiters.rwlock("rw").read(timeout=timeout)
        ok = await second.acquire()
        assert not ok
        refused = second._refused
        assert refused is not None, "no attempt was made"
        last = refused.tallies[-1]
        assert last.no >= 2, (
            f"the last attempt heard {last.no} refusals of {last.n} nodes; "
            f"lock.errors={dict(second.errors)}"
        )
    finally:
        first_task.cancel()
        await asyncio.gather(first_task, return_exceptions=True)
        await writer.release()


async def test_a_busy_plain_lock_with_one_node_blackholed_reports_busy_not_unavailable(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # Pre-existing (also before de59e06), the same mechanism: a waiter's
    # first attempt is refused by two nodes (held elsewhere); its
    # subscription waits for node 2's confirmation up to the deadline; then
    # it "tries once more at once" with no time left - the attempt is cut
    # before any vote, and `async with` raises QuorumUnavailable with no
    # per-node error at all, for a name held elsewhere.
    redis_nodes[2].blackhole()
    holder = make_redlock()
    held = holder.lock("job", ttl=30.0)
    assert await held.acquire(timeout=5.0)
    waiter = make_redlock()
    # Its census of the nodes' epochs done first (a first grant reads them),
    # so that only the subscription stands between its attempts.
    warm = waiter.lock("warm-up", ttl=5.0)
    assert await warm.acquire(timeout=5.0)
    await warm.release()
    timeout = waiter.config.node_timeout / 2
    try:
        # What a web handler sees: 503 ("our Redis is down") for a 409.
        with pytest.raises(LockNotAcquired) as raised:
            async with waiter.lock("job", timeout=timeout):
                raise AssertionError("entered the body of a held lock")
        error = raised.value
        assert isinstance(error, LockBusy), f"{type(error).__name__}: {error}"
        lock = waiter.lock("job", timeout=timeout)
        ok = await lock.acquire()
        assert not ok
        refused = lock._refused
        assert refused is not None
        last = refused.tallies[-1]
        assert last.no >= 2, (
            f"the last attempt heard {last.no} refusals of {last.n} nodes "
            f"({refused.count} attempts); lock.errors={dict(lock.errors)}"
        )
    finally:
        await held.release()
