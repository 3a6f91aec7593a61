"""A key left behind blocks everyone for a whole ttl: every path must clean up.

Each test here reproduces a leak an outside review found (it fails on the
code before the fix), against real redis-server processes.
"""

from __future__ import annotations

import asyncio

import anyio
import pytest

from redlock_async import LockLost, Redlock, RedlockError
from redlock_async._core._scripts import ACQUIRE, RELEASE
from redlock_async.testing import RedisNode, RedisNodes

from ..conftest import MakeRedlock, eventually, lock_keys, no_keys_left


async def test_aclose_tells_the_holder_and_releases(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    redlock = make_redlock()
    told: list[object] = []
    entered = asyncio.Event()

    async def holder() -> None:
        async with redlock.lock("job", ttl=30.0, on_lost=told.append) as lock:
            entered.set()
            await asyncio.sleep(30)  # cancelled by the loss, long before this
            assert lock.held

    task = asyncio.ensure_future(holder())
    await entered.wait()
    await redlock.aclose()
    with pytest.raises(LockLost, match="closed"):
        await task
    assert len(told) == 1
    assert await no_keys_left(redis_nodes, within=5.0)  # released, not left for the ttl


async def test_after_aclose_every_call_fails_at_once(make_redlock: MakeRedlock) -> None:
    redlock = make_redlock()
    held = redlock.lock("job", ttl=30.0)
    assert await held.acquire()
    await redlock.aclose()
    assert held.lost
    assert not held.held
    with anyio.fail_after(1.0):  # it used to wait out the whole validity
        with pytest.raises(LockLost):
            await held.extend()
        with pytest.raises(RedlockError):
            await redlock.lock("other").acquire()
    with pytest.raises(RedlockError):
        redlock.lock("other")


async def test_aclose_stops_a_waiter(make_redlock: MakeRedlock) -> None:
    redlock = make_redlock(retry_delay=0.05, retry_jitter=0.01)
    other = make_redlock()
    assert await other.lock("job", ttl=30.0).acquire()
    waiter = asyncio.ensure_future(redlock.lock("job", ttl=30.0).acquire())
    await asyncio.sleep(0.2)
    await redlock.aclose()
    with anyio.fail_after(2.0), pytest.raises(RedlockError, match="closed"):
        await waiter


@pytest.mark.parametrize("how", ["asyncio.timeout", "anyio cancel scope"])
async def test_a_release_cancelled_during_a_renewal_still_releases(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes, how: str
) -> None:
    # Slow nodes keep a renewal in flight most of the time; a cancellation
    # landing in __aexit__ while release() waited for it used to keep the
    # lock held - and renewed - for as long as the Lock object lived.
    for node in redis_nodes:
        node.delay(0.05)
    redlock = make_redlock(node_timeout=1.0)
    # Renewed every 0.5 s: a busy machine can delay a tick by a few tenths
    # without losing the lock (with ttl=0.6 it did, and no renewal ever flew).
    lock = redlock.lock("job", ttl=1.5)
    assert await lock.acquire()
    assert await eventually(
        lambda: lock._renewer is not None and lock._renewer.in_flight is not None, within=5.0
    )
    if how == "asyncio.timeout":
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.001):
                await lock.release()
    else:
        with anyio.move_on_after(0.001):
            await lock.release()
    assert not lock.held
    for node in redis_nodes:
        node.heal()
    # Renewals would keep the key alive; a release removes it well before
    # the 1.5 s it would take to expire by itself.
    assert await no_keys_left(redis_nodes, within=1.0)
    await asyncio.sleep(0.5)
    assert all(not keys for keys in lock_keys(redis_nodes))


async def test_a_cancelled_acquire_after_script_flush_leaves_no_key(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # The release script is cached and the acquire script is not: an acquire
    # resent as EVAL at the end of the pipeline used to run after its own
    # undo, leaving its key on every node.
    redlock = make_redlock()
    warm = redlock.lock("warm", ttl=5.0, auto_extend=False)
    assert await warm.acquire()
    await warm.release()
    for node in redis_nodes:
        node.client().script_flush()
        node.client().script_load(RELEASE.source)
    for _ in range(5):
        attempt = asyncio.ensure_future(redlock.lock("job", ttl=30.0).acquire())
        await asyncio.sleep(0)  # sent, no reply yet
        attempt.cancel()
        with pytest.raises(asyncio.CancelledError):
            await attempt
    assert await no_keys_left(redis_nodes, within=5.0)
    # And the next attempts work again.
    lock = redlock.lock("job", ttl=5.0, auto_extend=False)
    assert await lock.acquire(timeout=5.0)
    await lock.release()


async def test_an_acquire_cached_without_its_server_probe_is_not_refused_by_itself(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # redis-py path: server_id.lua not cached, acquire.lua cached. The acquire
    # ran in the first pipeline; resending it as EVAL answered 0 ("taken" -
    # by itself), nothing cleaned it up, and errors were empty.
    redlock = make_redlock()
    for node in redis_nodes:
        node.client().script_flush()
        node.client().script_load(ACQUIRE.source)
    lock = redlock.lock("job", ttl=30.0, auto_extend=False)
    assert await lock.acquire(timeout=5.0)
    await lock.release()
    assert await no_keys_left(redis_nodes, within=5.0)


async def test_a_release_reaches_a_node_that_was_paused_past_the_stall_limit(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # The node is paused with our acquire in its socket; the stall detector
    # drops the connection, so the release cannot go after the acquire on it.
    # When the node resumes it runs the acquire: the release must be resent,
    # after it, or the key blocks everyone for the whole ttl.
    redlock = make_redlock()
    paused = redis_nodes[0]
    paused.pause()
    try:
        lock = redlock.lock("job", ttl=30.0, auto_extend=False)
        assert await lock.acquire()  # granted by the two others
        await asyncio.sleep(1.0)  # past the stall limit (0.5 s): connection dropped
        await lock.release()
        await asyncio.sleep(1.0)
    finally:
        paused.resume()
    assert await eventually(lambda: not lock_keys([paused])[0], within=10.0)


async def test_a_release_whose_connection_breaks_is_resent(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # A compare-and-delete is safe to send again; a release lost with its
    # connection (CLIENT KILL, a reset) used to leave the key for the ttl.
    redlock = make_redlock(node_timeout=0.5)
    lock = redlock.lock("job", ttl=30.0, auto_extend=False)
    assert await lock.acquire()
    cut = redis_nodes[0]
    cut.blackhole()  # the release to this node goes nowhere ...
    await lock.release()  # decided by the two others
    cut.heal()
    cut.reset_connections()  # ... and its connection breaks before a reply
    assert await no_keys_left(redis_nodes, within=5.0)


@pytest.mark.parametrize("nodes_down", [0, 1])
async def test_redlock_is_usable_again_after_a_failed_node_comes_back(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes, nodes_down: int
) -> None:
    # Resends and reconnections do not wedge a node: after a pause, fresh
    # grants still work through every node.
    redlock: Redlock = make_redlock()
    for node in redis_nodes[:nodes_down]:
        node.pause()
    lock = redlock.lock("job", ttl=5.0, auto_extend=False)
    assert await lock.acquire()
    await lock.release()
    for node in redis_nodes[:nodes_down]:
        node.resume()
    await asyncio.sleep(0.2)
    for _ in range(3):
        again = redlock.lock("job", ttl=5.0, auto_extend=False)
        assert await again.acquire(timeout=5.0)
        await again.release()
    assert await no_keys_left(redis_nodes)


@pytest.mark.parametrize("spins", [1, 2])
async def test_aclose_while_an_acquire_is_in_flight_leaves_no_key(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes, spins: int
) -> None:
    # Closing a connection throws its unread replies away: an acquire the
    # servers had granted looked failed, and its cleanup was skipped because
    # the Redlock was closed - its key stayed on every node for the ttl.
    redlock = make_redlock()
    warm = redlock.lock("warm", ttl=5.0, auto_extend=False)
    assert await warm.acquire()  # connections are up
    await warm.release()
    attempt = asyncio.ensure_future(redlock.lock("job", ttl=30.0).acquire(blocking=False))
    for _ in range(spins):
        await asyncio.sleep(0)  # queued, or written
    await redlock.aclose()
    with pytest.raises(RedlockError, match="closed"):
        await attempt
    assert await no_keys_left(redis_nodes, within=2.0)


async def test_a_waiter_asleep_between_attempts_does_not_acquire_after_aclose(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # With clients passed in (left open by aclose), the next attempt used to
    # be granted after aclose() and renewed for good.
    redlock = make_redlock(retry_delay=0.3, retry_jitter=0.01, wake_on_release=False)
    other = make_redlock()
    holder = other.lock("job", ttl=30.0)
    assert await holder.acquire()
    waiter = redlock.lock("job", ttl=2.0)
    attempt = asyncio.ensure_future(waiter.acquire())
    await asyncio.sleep(0.1)  # refused once, now asleep
    await holder.release()
    await redlock.aclose()
    with pytest.raises(RedlockError, match="closed"):
        await attempt
    assert not waiter.held
    assert await no_keys_left(redis_nodes, within=3.0)


async def test_releases_to_a_node_that_is_down_are_not_resent(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # A release that never reached a connection (node down, backing off)
    # cannot have a key to clean up there: resending it only piled up timers
    # and a burst of pointless scripts when the node came back.
    redlock = make_redlock()
    down = redis_nodes[2]
    down.refuse()
    for _ in range(50):
        lock = redlock.lock("job", ttl=30.0, auto_extend=False)
        assert await lock.acquire()
        await lock.release()
    down.heal()
    calls_before = _script_calls(down)
    await asyncio.sleep(2.5)  # resends would come within ~1 s of backoff
    assert _script_calls(down) == calls_before


def _script_calls(node: RedisNode) -> int:
    stats = node.client().info("commandstats")
    return sum(
        int(value["calls"]) for name, value in stats.items() if name.startswith("cmdstat_eval")
    )
