"""Every call returns within its bound, whatever the process's other locks are doing.

Real nodes behind the fault proxy, through both drivers:

- every admission slot held by attempts that wait ``node_timeout`` (4 s)
  for a blackholed node's tie-breaking vote: a timed acquire on a free name
  gives up at its timeout saying why, a one-shot goes out at once (they
  used to wait the 4 s);
- one node down, one healthy, one answering a backlog slowly (one reply per
  20 ms, never silent): a timed acquire returns at its timeout, a one-shot
  within ``vote_limit`` (they used to wait for the whole backlog).

Each bound is checked with a second of margin: far from what the broken
behaviour takes (4 s and more), far enough from the bound for a busy machine.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager

import pytest

from redlock_async import Lock, QuorumUnavailable, Redlock
from redlock_async._base._keys import KeyLayout
from redlock_async._engine import stall_limit
from redlock_async.testing import RedisNodes

from ..conftest import MakeRedlock, eventually, no_keys_left

MARGIN = 1.0  # seconds: a busy machine's slack on top of each bound


async def timed(call: Awaitable[bool]) -> tuple[bool, float]:
    started = time.monotonic()
    result = await call
    return result, time.monotonic() - started


async def warm(redlock: Redlock) -> None:
    """Open the connections first: a fault set afterwards hits an established stream."""
    lock = redlock.lock("warm", auto_extend=False)
    assert await lock.acquire(timeout=10.0)
    await lock.release()


@contextmanager
def held_elsewhere(redis_nodes: RedisNodes, index: int, names: list[str]) -> Iterator[None]:
    """``names`` held by someone else on node ``index`` only (removed afterwards)."""
    client = redis_nodes[index].client()
    keys = [KeyLayout("redlock:", name).lock for name in names]
    with client.pipeline(transaction=False) as pipe:
        for key in keys:
            pipe.set(key, b"someone-else", px=60_000)
        pipe.execute()
    try:
        yield
    finally:
        client.delete(*keys)


async def test_a_full_admission_does_not_hold_timed_or_one_shot_acquires_past_their_bound(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    node_timeout = 4.0
    redlock = make_redlock(node_timeout=node_timeout)
    await warm(redlock)
    admission = redlock._core.admission
    slots = admission.free  # 1024 (lean driver) or the redis-py pool's share
    names = [f"stuck:{i}" for i in range(slots)]
    with held_elsewhere(redis_nodes, 2, names):
        redis_nodes[0].blackhole()
        # Each attempt: node 1 yes, node 2 no, node 0's vote would break the
        # tie - it holds its slot for node_timeout.
        locks = [redlock.lock(name, auto_extend=False) for name in names]
        stuck = [asyncio.ensure_future(lock.acquire(timeout=30.0)) for lock in locks]
        try:
            assert await eventually(lambda: admission.free == 0, within=10.0)
            await full_admission_bounds(redlock)
        finally:
            for task in stuck:
                task.cancel()
            await asyncio.gather(*stuck, return_exceptions=True)
    redis_nodes[0].heal()
    assert await no_keys_left(redis_nodes, within=30.0)


async def full_admission_bounds(redlock: Redlock) -> None:
    """Free names, while every admission slot waits for a dead tie-breaker."""
    timed_lock = redlock.lock("free:timed", auto_extend=False)
    ok, took = await timed(timed_lock.acquire(timeout=0.3))
    assert took < 0.3 + MARGIN, f"waited {took:.2f}s for admission (timeout=0.3)"
    assert not ok
    assert all("not sent" in str(e) for e in timed_lock.errors.values()), timed_lock.errors
    assert len(timed_lock.errors) == 3

    one_shot = redlock.lock("free:one-shot", auto_extend=False)
    ok, took = await timed(one_shot.acquire(blocking=False))
    assert took < MARGIN, f"a one-shot waited {took:.2f}s behind other names' attempts"
    assert ok, one_shot.errors  # nodes 1 and 2 grant a free name at once
    await one_shot.release()

    started = time.monotonic()
    with pytest.raises(QuorumUnavailable, match="too many attempts in flight"):
        async with redlock.lock("free:with", timeout=0.3, auto_extend=False):
            pytest.fail("entered the body without the lock")
    assert time.monotonic() - started < 0.3 + MARGIN


BACKLOG = 200  # acquires; node 2 answers one reply per 20 ms: 4 s to get through them
# Short: a command stuck behind the backlog past redis-py's stall bound is
# abandoned, and what it set is left to expire (see settle_backlog).
TTL = 3.0


async def backlogged(make_redlock: MakeRedlock, redis_nodes: RedisNodes) -> Redlock:
    """Node 0 refuses connections, node 1 is healthy, node 2 answers one reply
    per 20 ms (never silent for node_timeout): every vote waits on node 2."""
    redlock = make_redlock(node_timeout=0.25)
    await warm(redlock)
    redis_nodes[0].refuse()
    redis_nodes[2].throttle(0.02)
    return redlock


async def release_granted(locks: list[Lock], results: list[tuple[bool, float]]) -> None:
    # All at once: each waits up to vote_limit for node 2, and one after
    # another they would outlast the ttl.
    await asyncio.gather(
        *(lock.release() for lock, (ok, _) in zip(locks, results, strict=True) if ok)
    )


async def settle_backlog(redlock: Redlock, redis_nodes: RedisNodes) -> None:
    """Nothing left behind once the faults end: undone, or expired with the ttl."""
    redis_nodes[2].heal()
    redis_nodes[0].heal()
    assert await no_keys_left(redis_nodes, within=TTL + 10.0)


async def test_a_timed_acquire_returns_at_its_timeout_while_a_node_answers_a_backlog(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    redlock = await backlogged(make_redlock, redis_nodes)
    locks = [redlock.lock(f"backlog:{i}", ttl=TTL, auto_extend=False) for i in range(BACKLOG)]
    results = await asyncio.gather(*(timed(lock.acquire(timeout=0.5)) for lock in locks))
    slowest = max(took for _, took in results)
    # The bound: its timeout (an attempt still undecided then is cut), and
    # a node_timeout for good measure.
    assert slowest < 0.5 + 0.25 + MARGIN, f"slowest acquire(timeout=0.5) took {slowest:.2f}s"
    await release_granted(locks, results)
    await settle_backlog(redlock, redis_nodes)


async def test_a_one_shot_returns_within_the_vote_limit_while_a_node_answers_a_backlog(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    redlock = await backlogged(make_redlock, redis_nodes)
    # No more than the admission slots hold (redis-py: 50, half its pool):
    # one-shots beyond them wait for slots, a vote_limit per wave at worst.
    count = min(BACKLOG, redlock._core.admission.free)
    locks = [redlock.lock(f"backlog:{i}", ttl=TTL, auto_extend=False) for i in range(count)]
    results = await asyncio.gather(*(timed(lock.acquire(blocking=False)) for lock in locks))
    slowest = max(took for _, took in results)
    # vote_limit: node_timeout, then stall_limit (1.25 s in all); node 2's
    # votes fail then, answering or not.
    bound = 0.25 + stall_limit(0.25)
    assert slowest < bound + MARGIN, f"slowest one-shot took {slowest:.2f}s (bound {bound}s)"
    assert not all(ok for ok, _ in results), "node 2 cannot have answered all in time"
    await release_granted(locks, results)
    await settle_backlog(redlock, redis_nodes)
