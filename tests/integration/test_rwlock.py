"""Read-write locks against real nodes, through both drivers."""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from redlock_async import LockNotAcquired, NodeConnectionError, Redlock, RedlockError
from redlock_async.testing import RedisNodes

from ..conftest import MakeRedlock, eventually, no_keys_left

W, R, WW = b"redlock:{doc}:w", b"redlock:{doc}:r", b"redlock:{doc}:ww"


def keys_without_expiry(nodes: RedisNodes) -> list[object]:
    found: list[object] = []
    for node in nodes:
        client = node.client()
        for key in client.keys("redlock:*"):
            # The epoch record is kept for good (docs/keys.md).
            if client.pttl(key) == -1 and "~epoch" not in str(key):
                found.append(key)
    return found


async def test_many_readers_share(redlock: Redlock, redis_nodes: RedisNodes) -> None:
    rw = redlock.rwlock("doc")
    readers = [rw.read(ttl=5.0) for _ in range(10)]
    assert all(await asyncio.gather(*(r.acquire(blocking=False) for r in readers)))
    assert all(r.held for r in readers)
    assert await eventually(lambda: redis_nodes[0].client().zcard(R) == 10)
    assert not await rw.write(ttl=5.0).acquire(blocking=False)
    await asyncio.gather(*(r.release() for r in readers))
    writer = rw.write(ttl=5.0)
    assert await writer.acquire(blocking=False)
    await writer.release()
    assert await no_keys_left(redis_nodes)


async def test_writer_excludes_readers_and_writers(redlock: Redlock) -> None:
    rw = redlock.rwlock("doc")
    writer = rw.write(ttl=5.0)
    assert await writer.acquire(blocking=False)
    assert not await rw.read(ttl=5.0).acquire(blocking=False)
    assert not await rw.write(ttl=5.0).acquire(blocking=False)
    # An exclusive lock of the same name is a different lock.
    other = redlock.lock("doc", ttl=5.0)
    assert await other.acquire(blocking=False)
    await other.release()
    await writer.release()
    reader = rw.read(ttl=5.0)
    assert await reader.acquire(blocking=False)
    await reader.release()


async def test_expired_reader_does_not_block_a_writer(
    redlock: Redlock, redis_nodes: RedisNodes
) -> None:
    rw = redlock.rwlock("doc")
    reader = rw.read(ttl=0.2, auto_extend=False)
    assert await reader.acquire()
    await asyncio.sleep(0.3)  # the reader "crashed": never released
    writer = rw.write(ttl=5.0)
    assert await writer.acquire(blocking=False)
    assert keys_without_expiry(redis_nodes) == []
    await writer.release()
    assert await eventually(lambda: keys_without_expiry(redis_nodes) == [])


async def test_reader_set_expires_with_its_longest_reader(
    redlock: Redlock, redis_nodes: RedisNodes
) -> None:
    rw = redlock.rwlock("doc")
    short, long = rw.read(ttl=0.3, auto_extend=False), rw.read(ttl=0.8, auto_extend=False)
    assert await short.acquire()
    assert await long.acquire()
    client = redis_nodes[0].client()
    assert await eventually(lambda: 500 < client.pttl(R) <= 800)
    # Nothing is left once both expire, without any release.
    assert await no_keys_left(redis_nodes, within=5.0)


async def test_read_renewal_renews_only_that_reader(
    redlock: Redlock, redis_nodes: RedisNodes
) -> None:
    rw = redlock.rwlock("doc")
    renewing = rw.read(ttl=0.6)
    idle = rw.read(ttl=0.6, auto_extend=False)
    assert await renewing.acquire()
    assert await idle.acquire()
    assert idle._grant is not None
    idle_token = idle._grant.token
    await asyncio.sleep(1.0)
    members = redis_nodes[0].client().zrange(R, 0, -1)
    assert renewing.held
    assert idle_token not in members  # expired and pruned, never renewed
    await renewing.release()


async def test_writer_is_not_starved_by_a_reader_stream(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    redlock = make_redlock(retry_delay=0.05, retry_jitter=0.05)
    rw = redlock.rwlock("doc")
    read_ttl = 0.5
    stop = asyncio.Event()
    started_reads = 0

    async def reader_stream(offset: float) -> None:
        nonlocal started_reads
        await asyncio.sleep(offset)
        while not stop.is_set():
            reader = rw.read(ttl=read_ttl, auto_extend=False)
            if await reader.acquire(blocking=False):
                started_reads += 1
                await asyncio.sleep(read_ttl * 0.6)  # overlapping holds
                await reader.release()
            else:
                await asyncio.sleep(0.02)

    streams = [asyncio.ensure_future(reader_stream(i * 0.05)) for i in range(6)]
    await asyncio.sleep(0.6)
    assert started_reads >= 6  # the stream is flowing
    loop = asyncio.get_running_loop()
    began = loop.time()
    writer = rw.write(ttl=5.0, timeout=10.0)
    assert await writer.acquire()
    waited = loop.time() - began
    stop.set()
    await writer.release()
    await asyncio.gather(*streams)
    # Bound from the issue: about the longest read ttl plus one retry (generous x2).
    assert waited < 2 * (read_ttl + 0.1), waited


async def test_minority_down_works_majority_down_reports(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    redlock = make_redlock()
    rw = redlock.rwlock("doc")
    redis_nodes[0].kill()
    reader = rw.read(ttl=5.0)
    assert await reader.acquire(blocking=False)
    await reader.release()
    writer = rw.write(ttl=5.0)
    assert await writer.acquire(blocking=False)
    await writer.release()
    redis_nodes[1].kill()
    with pytest.raises(LockNotAcquired) as info:
        async with rw.write(ttl=5.0, timeout=0.2):
            pytest.fail("entered without the lock")
    assert set(info.value.errors) == set(redlock.nodes[:2])
    assert all(isinstance(e, NodeConnectionError) for e in info.value.errors.values())
    with pytest.raises(LockNotAcquired):
        async with rw.read(ttl=5.0, timeout=0.2):
            pytest.fail("entered without the lock")


@pytest.mark.parametrize("side", ["read", "write"])
async def test_cancelled_acquire_leaves_nothing(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes, side: str
) -> None:
    redlock = make_redlock(node_timeout=1.0, retry_delay=0.05, retry_jitter=0.0)
    rw = redlock.rwlock("doc")
    blocker = rw.read(ttl=5.0) if side == "write" else rw.write(ttl=5.0)
    assert await blocker.acquire()
    for node in redis_nodes:
        node.delay(0.03)
    for pause in (0.0, 0.04, 0.2):
        view = rw.write(ttl=5.0) if side == "write" else rw.read(ttl=5.0)
        task = asyncio.ensure_future(view.acquire())
        await asyncio.sleep(pause)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    for node in redis_nodes:
        node.heal()
    await blocker.release()
    assert await no_keys_left(redis_nodes)


async def test_giving_up_clears_the_writer_marker(
    redlock: Redlock, redis_nodes: RedisNodes
) -> None:
    rw = redlock.rwlock("doc")
    reader = rw.read(ttl=5.0)
    assert await asyncio.ensure_future(reader.acquire())  # held by another task
    assert not await rw.write(ttl=5.0).acquire(timeout=0.3)
    assert await eventually(lambda: all(n.client().exists(WW) == 0 for n in redis_nodes))
    # With the marker gone, readers may join again.
    other = rw.read(ttl=5.0)
    assert await other.acquire(blocking=False)
    await other.release()
    await reader.release()


async def test_upgrade_is_refused(redlock: Redlock) -> None:
    rw = redlock.rwlock("doc")
    async with rw.read(ttl=5.0):
        with pytest.raises(RedlockError, match="upgrad"):
            await rw.write(ttl=5.0).acquire()
    writer = rw.write(ttl=5.0)
    assert await writer.acquire(blocking=False)  # fine once the read lock is released
    await writer.release()


async def test_history_no_writer_overlaps_any_grant(make_redlock: MakeRedlock) -> None:
    """Many tasks on two Redlocks; every grant's interval is recorded and checked."""
    redlocks = [make_redlock(retry_delay=0.002, retry_jitter=0.004) for _ in range(2)]
    history: list[tuple[str, float, float]] = []
    deadline = time.monotonic() + 3.0
    rng = random.Random(7)

    async def worker(index: int) -> None:
        rw = redlocks[index % 2].rwlock("doc")
        while time.monotonic() < deadline:
            side = "write" if rng.random() < 0.3 else "read"
            view = rw.write(ttl=2.0) if side == "write" else rw.read(ttl=2.0)
            if not await view.acquire(timeout=1.0):
                continue
            start = time.monotonic()
            await asyncio.sleep(rng.random() * 0.005)
            end = time.monotonic()
            await view.release()
            history.append((side, start, end))

    await asyncio.gather(*(worker(i) for i in range(24)))
    writes = [h for h in history if h[0] == "write"]
    # Enough of both to make the overlap check mean something, even on a busy machine.
    assert len(writes) >= 5, len(history)
    assert len(history) - len(writes) >= 5, len(history)
    for side, start, end in writes:
        for other in history:
            if other == (side, start, end):
                continue
            assert other[2] <= start or other[1] >= end, f"overlap: {(side, start, end)} {other}"
