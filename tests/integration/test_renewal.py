"""Auto-renewal, and telling the holder when a lock is lost (real nodes)."""

from __future__ import annotations

import asyncio
import gc
import time

import pytest

from redlock_async import Lock, LockLost, Redlock
from redlock_async.testing import RedisNodes

from ..conftest import MakeRedlock, no_keys_left, settle

KEY = b"redlock:{job}"


def script_calls(nodes: RedisNodes) -> int:
    """EVALSHA + EVAL calls the nodes served since the last CONFIG RESETSTAT."""
    total = 0
    for node in nodes:
        if not node.server.is_running:
            continue
        stats = node.client().info("commandstats")
        for name in ("cmdstat_evalsha", "cmdstat_eval"):
            total += int(stats.get(name, {}).get("calls", 0))
    return total


async def reset_stats(nodes: RedisNodes) -> None:
    # Commands of the last fan-out may still be landing on the slowest node
    # (decisions do not wait for it); let them, then start counting.
    await settle(0.05)
    for node in nodes:
        if node.server.is_running:
            node.client().config_resetstat()


async def test_short_ttl_lock_stays_held_for_many_ttls(
    redlock: Redlock, redis_nodes: RedisNodes
) -> None:
    lock = redlock.lock("job", ttl=0.6)
    assert await lock.acquire()
    for _ in range(6):
        await asyncio.sleep(0.5)
        assert lock.held
        assert not await redlock.lock("job").acquire(blocking=False)
    assert all(node.client().pttl(KEY) > 0 for node in redis_nodes)
    await lock.release()
    assert not lock.lost
    assert await redlock.lock("job", auto_extend=False).acquire(blocking=False)


async def test_minority_down_keeps_the_lock(redlock: Redlock, redis_nodes: RedisNodes) -> None:
    async with redlock.lock("job", ttl=0.6) as lock:
        redis_nodes[0].kill()
        await asyncio.sleep(2.0)
        assert lock.held
        assert not lock.lost


@pytest.mark.parametrize("fault", ["kill", "pause"])
async def test_majority_lost_cancels_the_body(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes, fault: str
) -> None:
    redlock = make_redlock()
    called: list[Lock] = []
    body_done = False
    lock = redlock.lock("job", ttl=1.0, on_lost=called.append)
    try:
        with pytest.raises(LockLost) as raised:
            async with lock:
                await asyncio.sleep(0.1)
                assert lock._grant is not None
                validity_end = lock._grant.validity_end
                for node in redis_nodes[:2]:
                    getattr(node, fault)()
                await asyncio.sleep(5.0)  # cancelled long before this ends
                body_done = True
        assert not body_done
        # The reason names the failed renewals and the nodes that failed them.
        assert "could not reach a quorum" in str(raised.value)
        assert len(raised.value.errors) >= 2
        assert lock.lost
        assert not lock.held
        assert lock.lost_event.is_set()
        assert called == [lock]
        # Reported lost no later than the validity it had when the nodes went away.
        assert time.monotonic() <= validity_end + 0.5  # loose: only guards against "never"
    finally:
        for node in redis_nodes[:2]:
            if fault == "pause":
                node.resume()


async def test_lost_is_flagged_before_validity_ends(
    redlock: Redlock, redis_nodes: RedisNodes
) -> None:
    lock = redlock.lock("job", ttl=1.0, cancel_on_lost=False)
    assert await lock.acquire()
    await asyncio.sleep(0.1)
    assert lock._grant is not None
    validity_end = lock._grant.validity_end
    redis_nodes[0].kill()
    redis_nodes[1].kill()
    await lock.lost_event.wait()
    assert time.monotonic() < validity_end


async def test_without_cancel_the_body_finishes_and_exit_raises(
    redlock: Redlock, redis_nodes: RedisNodes
) -> None:
    finished = False
    lock = redlock.lock("job", ttl=0.6, cancel_on_lost=False)
    with pytest.raises(LockLost):
        async with lock:
            redis_nodes[0].kill()
            redis_nodes[1].kill()
            await lock.lost_event.wait()
            await asyncio.sleep(0.1)
            finished = True
    assert finished


async def test_outside_cancellation_stays_a_cancellation_and_releases(
    redlock: Redlock, redis_nodes: RedisNodes
) -> None:
    entered = asyncio.Event()

    async def body() -> None:
        async with redlock.lock("job", ttl=0.6):
            entered.set()
            await asyncio.sleep(10)

    task = asyncio.ensure_future(body())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await no_keys_left(redis_nodes)


async def test_no_renewal_after_release(redlock: Redlock, redis_nodes: RedisNodes) -> None:
    lock = redlock.lock("job", ttl=0.3)
    assert await lock.acquire()
    await asyncio.sleep(0.4)  # at least one renewal ran
    await lock.release()
    await reset_stats(redis_nodes)
    await asyncio.sleep(0.6)
    assert script_calls(redis_nodes) == 0


async def test_no_renewal_after_loss(redlock: Redlock, redis_nodes: RedisNodes) -> None:
    lock = redlock.lock("job", ttl=0.3)
    assert await lock.acquire()
    redis_nodes[0].kill()
    redis_nodes[1].kill()
    await lock.lost_event.wait()
    await settle(0.1)
    await reset_stats(redis_nodes)
    await asyncio.sleep(0.6)
    assert script_calls(redis_nodes) == 0


async def test_no_renewal_after_the_lock_is_garbage_collected(
    redlock: Redlock, redis_nodes: RedisNodes
) -> None:
    lock = redlock.lock("job", ttl=0.3)
    assert await lock.acquire()
    del lock
    gc.collect()
    await reset_stats(redis_nodes)
    await asyncio.sleep(0.6)
    assert script_calls(redis_nodes) == 0


async def test_no_renewal_after_the_redlock_is_closed(redis_nodes: RedisNodes) -> None:
    redlock = Redlock(redis_nodes.urls)
    lock = redlock.lock("job", ttl=0.3)
    assert await lock.acquire()
    await redlock.aclose()
    await reset_stats(redis_nodes)
    await asyncio.sleep(0.6)
    assert script_calls(redis_nodes) == 0
    assert lock.lost  # closing released it: the holder is told, like any loss


async def test_blocked_event_loop_reports_the_loss(redlock: Redlock) -> None:
    lock = redlock.lock("job", ttl=0.3)
    with pytest.raises(LockLost, match="event loop"):
        async with lock:
            time.sleep(0.5)  # noqa: ASYNC251 - the point: the loop cannot renew while blocked
            await asyncio.sleep(0)  # the first chance to notice
            await asyncio.sleep(1)
            pytest.fail("the body should have been cancelled")
    assert lock.lost


async def test_a_release_during_a_renewal_in_flight_leaves_no_key(
    redlock: Redlock, redis_nodes: RedisNodes
) -> None:
    lock = redlock.lock("job", ttl=0.3)
    assert await lock.acquire()
    for _ in range(20):
        await asyncio.sleep(0.01)
        if lock._renewer is not None and lock._renewer.in_flight is not None:
            break
    await lock.release()
    assert await no_keys_left(redis_nodes)
