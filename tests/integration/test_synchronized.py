"""``@redlock.synchronized(...)``: whole coroutines under a lock, against real nodes."""

from __future__ import annotations

import asyncio

import pytest

from redlock_async import ConfigurationError, LockNotAcquired, Redlock
from redlock_async.testing import RedisNodes

from ..conftest import MakeRedlock


async def test_calls_on_the_same_name_run_one_at_a_time(make_redlock: MakeRedlock) -> None:
    redlock = make_redlock(retry_delay=0.01, retry_jitter=0.01)
    counters = {"a": 0, "b": 0}

    @redlock.synchronized("counter:{name}", ttl=5.0, timeout=30.0)
    async def bump(name: str) -> int:
        value = counters[name]
        await asyncio.sleep(0.002)  # a gap: two calls inside at once lose an update
        counters[name] = value + 1
        return value + 1

    results = await asyncio.gather(*(bump("a") for _ in range(10)), *(bump("b") for _ in range(5)))
    assert counters == {"a": 10, "b": 5}
    assert sorted(results[:10]) == list(range(1, 11))
    assert bump.__name__ == "bump"  # wrapped properly


async def test_different_arguments_lock_different_names(make_redlock: MakeRedlock) -> None:
    redlock = make_redlock()
    inside: set[int] = set()
    both_inside = asyncio.Event()

    @redlock.synchronized(lambda order, **_: f"orders:{order}", ttl=5.0, timeout=5.0)
    async def charge(order: int, amount: int = 0) -> None:
        inside.add(order)
        if len(inside) == 2:
            both_inside.set()
        await asyncio.wait_for(both_inside.wait(), 10)  # only possible if not serialized

    await asyncio.gather(charge(1), charge(2, amount=5))


async def test_a_busy_name_raises_lock_not_acquired(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    redlock = make_redlock()
    ran = []

    @redlock.synchronized("job:{{literal}}:{n}", ttl=5.0, timeout=0.2)
    async def job(n: int) -> None:
        ran.append(n)

    async with redlock.lock("job:{literal}:7", ttl=10.0):
        with pytest.raises(LockNotAcquired):
            await job(7)
        await job(8)  # another name: free
    assert ran == [8]


async def test_mistakes_are_reported_at_decoration(redis_nodes: RedisNodes) -> None:
    async with Redlock(redis_nodes.urls) as redlock:
        with pytest.raises(ConfigurationError, match="'nope'"):

            @redlock.synchronized("x:{nope}")
            async def f(order: int) -> None: ...

        with pytest.raises(ConfigurationError, match="coroutine"):

            @redlock.synchronized("x")  # type: ignore[arg-type]
            def g() -> None: ...

        with pytest.raises(ConfigurationError, match="ttl"):
            redlock.synchronized("x", ttl=-1.0)

        async def h() -> None: ...

        with pytest.raises(ConfigurationError, match="template"):
            redlock.synchronized("x:{")(h)
