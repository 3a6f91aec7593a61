"""The exclusive lock against real redis-server nodes, through both drivers."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence

import pytest

from redlock_async import (
    LockNotAcquired,
    LockNotOwned,
    NodeConnectionError,
    Redlock,
    RedlockError,
)
from redlock_async._core._lock import Lock
from redlock_async._engine._tally import PENDING
from redlock_async.testing import RedisNode, RedisNodes

from ..conftest import MakeRedlock, eventually, no_keys_left, settle

KEY = b"redlock:{job}"


def stored(nodes: Sequence[RedisNode], key: bytes = KEY) -> list[object]:
    return [node.client().get(key) for node in nodes]


def grant_token(lock: Lock) -> bytes:
    assert lock._grant is not None
    return lock._grant.token


async def test_grant_lands_on_every_node(redlock: Redlock, redis_nodes: RedisNodes) -> None:
    lock = redlock.lock("job", ttl=10.0, auto_extend=False)
    assert await lock.acquire()
    assert lock.held
    assert 9.0 < lock.valid_for <= 10.0
    await settle(0.05)
    token = grant_token(lock)
    assert len(token) > 40  # 40 random hex characters, then @HOST:PID:MS
    assert await eventually(lambda: stored(redis_nodes) == [token] * 3)
    for node in redis_nodes:
        assert 9_000 < node.client().pttl(KEY) <= 10_000
    await lock.release()
    assert not lock.held
    assert lock.valid_for == 0.0
    assert await no_keys_left(redis_nodes)


async def test_mutual_exclusion_under_contention(make_redlock: MakeRedlock) -> None:
    # Two Redlocks: separate connections, as two processes would have.
    redlocks = [make_redlock(retry_delay=0.005, retry_jitter=0.01) for _ in range(2)]
    counter = 0
    inside = 0

    async def worker(redlock: Redlock) -> None:
        nonlocal counter, inside
        for _ in range(15):
            async with redlock.lock("counter", ttl=5.0, auto_extend=False):
                inside += 1
                assert inside == 1, "two holders at once"
                value = counter
                await asyncio.sleep(random.random() / 1000)
                counter = value + 1
                inside -= 1

    await asyncio.gather(*(worker(redlocks[i % 2]) for i in range(8)))
    assert counter == 8 * 15


async def test_non_blocking_attempt_on_a_held_lock(redlock: Redlock) -> None:
    holder = redlock.lock("job", ttl=10.0)
    assert await holder.acquire()
    other = redlock.lock("job", ttl=10.0)
    assert await other.acquire(blocking=False) is False
    assert not other.held
    assert other._errors == {}  # refused by the nodes, not failed
    await holder.release()
    assert await other.acquire(blocking=False)
    await other.release()


async def test_timeout_gives_up_and_async_with_raises(redlock: Redlock) -> None:
    holder = redlock.lock("job", ttl=10.0)
    assert await holder.acquire()
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await redlock.lock("job").acquire(timeout=0.3) is False
    # uvloop's clock counts whole milliseconds: two readings (and the timer
    # that ends the wait, due on that clock) can each lose up to one, and a
    # float rounding on top: 2 ms below the 0.3 it really is.
    assert loop.time() - started >= 0.3 - 2.5e-3
    entered = False
    with pytest.raises(LockNotAcquired):
        async with redlock.lock("job", timeout=0.2):
            entered = True
    assert not entered
    await holder.release()


async def test_waiter_gets_the_lock_after_release(redlock: Redlock) -> None:
    holder = redlock.lock("job", ttl=10.0)
    assert await holder.acquire()
    waiter = asyncio.ensure_future(redlock.lock("job", ttl=10.0, timeout=10.0).acquire())
    await asyncio.sleep(0.3)
    assert not waiter.done()
    await holder.release()
    assert await waiter


async def test_acquiring_a_held_object_again_is_an_error(redlock: Redlock) -> None:
    lock = redlock.lock("job")
    assert await lock.acquire()
    with pytest.raises(RedlockError, match="new Lock object"):
        await lock.acquire()
    await lock.release()
    # Released: the same object may take a new grant.
    assert await lock.acquire()
    await lock.release()


async def test_release_without_a_grant(redlock: Redlock) -> None:
    with pytest.raises(LockNotOwned):
        await redlock.lock("job").release()


async def test_minority_down_still_acquires(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    redlock = make_redlock()
    redis_nodes[2].kill()
    lock = redlock.lock("job", ttl=5.0)
    assert await lock.acquire(blocking=False)
    await lock.release()


async def test_majority_down_raises_with_per_node_errors(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # One attempt (timeout=0), judged once every node answered: a node
    # timeout a loaded machine keeps, so that each dead node's refusal, not
    # a timeout or a deadline, is what the error says.
    redlock = make_redlock(node_timeout=2.0)
    redis_nodes[0].kill()
    redis_nodes[1].kill()
    with pytest.raises(LockNotAcquired) as info:
        async with redlock.lock("job", ttl=5.0, timeout=0):
            pytest.fail("entered the body without the lock")
    errors = info.value.errors
    assert set(errors) == set(redlock.nodes[:2])
    assert all(isinstance(e, NodeConnectionError) for e in errors.values())
    assert await no_keys_left(redis_nodes[2:])  # the partial grant was rolled back


async def test_one_slow_node_neither_delays_nor_leaks(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    redlock = make_redlock()
    redis_nodes[0].delay(0.15)  # slower than node_timeout (0.05 s) each way
    for _ in range(3):
        lock = redlock.lock("job", ttl=5.0, auto_extend=False)
        assert await lock.acquire(blocking=False)
        # Granted before the slow node answered: the decision did not wait for it.
        assert lock._grant is not None
        assert lock._grant.acquired.replies[0] is PENDING
        assert lock._grant.acquired.yes == 2
        await lock.release()
    assert await no_keys_left(redis_nodes)


async def test_cancelled_acquire_leaves_no_key(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    redlock = make_redlock(node_timeout=1.0)
    for node in redis_nodes:
        node.delay(0.05)
    for pause in (0.0, 0.02, 0.06, 0.09):
        task = asyncio.ensure_future(redlock.lock("job", ttl=5.0).acquire())
        await asyncio.sleep(pause)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert await no_keys_left(redis_nodes)


async def test_cancelled_by_asyncio_timeout_leaves_no_key(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    redlock = make_redlock(node_timeout=1.0)
    redis_nodes[1].delay(0.1)
    redis_nodes[2].delay(0.1)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await redlock.lock("job", ttl=5.0).acquire()
    assert await no_keys_left(redis_nodes)


async def test_release_of_expired_grant_spares_the_new_holder(
    redlock: Redlock, redis_nodes: RedisNodes
) -> None:
    first = redlock.lock("job", ttl=0.2, auto_extend=False)
    assert await first.acquire()
    await asyncio.sleep(0.3)
    assert not first.held
    second = redlock.lock("job", ttl=10.0)
    assert await second.acquire(blocking=False)
    with pytest.raises(LockNotOwned):
        await first.release()
    await settle(0.05)
    assert await eventually(lambda: stored(redis_nodes) == [grant_token(second)] * 3)
    await second.release()


async def test_n_equals_one_is_a_single_instance_lock(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    redlock = make_redlock(redis_nodes[:1])
    assert redlock.quorum == 1
    lock = redlock.lock("job", ttl=5.0)
    assert await lock.acquire()
    assert not await redlock.lock("job").acquire(blocking=False)
    await lock.release()


@pytest.mark.redis_nodes(5)
@pytest.mark.parametrize("n", [3, 5])
async def test_quorum_matrix(make_redlock: MakeRedlock, redis_nodes: RedisNodes, n: int) -> None:
    """Pre-occupy every subset of nodes: acquire succeeds exactly when a quorum is free."""
    group = redis_nodes[:n]
    # This counts votes: no node is slow here, so a stall on a loaded machine
    # must not turn into a missing vote.
    redlock = make_redlock(group, node_timeout=2.0)
    for mask in range(2**n):
        busy = [i for i in range(n) if mask >> i & 1]
        for i in busy:
            group[i].client().set(KEY, b"someone-else", px=60_000)
        lock = redlock.lock("job", ttl=5.0, auto_extend=False)
        ok = await lock.acquire(blocking=False)
        assert ok == (n - len(busy) >= n // 2 + 1), busy
        if ok:
            await lock.release()
        # No acquire of ours may still be on its way to a node (redis-py
        # nodes run commands as tasks, in no set order): one landing after
        # the keys are wiped below would occupy a node in the next round.
        await redlock._core.drain(5.0)  # every fan-out of ours has settled
        # Foreign keys untouched; ours gone, whether granted or rolled back.
        expected = [b"someone-else" if i in busy else None for i in range(n)]
        assert await eventually(lambda: stored(group) == expected), busy  # noqa: B023
        for node in group:
            node.client().delete(KEY)
