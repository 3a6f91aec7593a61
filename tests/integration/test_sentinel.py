"""Sentinel-managed primaries as nodes: docs/deployment.md's example, run (issue 17).

The example is read from the page itself, with the Sentinel addresses
replaced by a real Sentinel's (``redis-server sentinel.conf --sentinel``).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from redis.asyncio.sentinel import Sentinel

from redlock_async import ConfigurationError, NodeError, Redlock
from redlock_async.testing import RedisServer, SentinelServer

from ..conftest import eventually

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ("lock-a", "lock-b", "lock-c")


def documented_example() -> str:
    """The Sentinel section's Python block of docs/deployment.md."""
    text = (ROOT / "docs" / "deployment.md").read_text()
    section = text.split("## Sentinel", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


@pytest.fixture
def deployment() -> Iterator[tuple[dict[str, RedisServer], SentinelServer]]:
    """Three primaries, each its own service, and one Sentinel watching them."""
    masters = {service: RedisServer() for service in SERVICES}
    sentinel = SentinelServer(masters)
    started: list[RedisServer] = []
    try:
        for server in (*masters.values(), sentinel):
            started.append(server)
            server.start()
        yield masters, sentinel
    finally:
        for server in started:
            server.stop()


@pytest.fixture
async def example(
    deployment: tuple[dict[str, RedisServer], SentinelServer],
) -> AsyncIterator[dict[str, object]]:
    """What docs/deployment.md's example leaves behind (``sentinel``, ``nodes``, ``redlock``)."""
    _, sentinel = deployment
    code, count = re.subn(
        r"Sentinel\(\[[^\]]*\]", f"Sentinel([{sentinel.address!r}]", documented_example()
    )
    assert count == 1, "the example's Sentinel(...) call moved"
    scope: dict[str, object] = {}
    exec(compile(code, "docs/deployment.md", "exec"), scope)
    yield scope
    redlock = scope["redlock"]
    assert isinstance(redlock, Redlock)
    await redlock.aclose()
    manager = scope["sentinel"]
    assert isinstance(manager, Sentinel)
    for client in [*scope["nodes"], *manager.sentinels]:  # type: ignore[misc]
        await client.aclose()


async def test_the_documented_example_locks_on_sentinel_managed_primaries(
    example: dict[str, object], deployment: tuple[dict[str, RedisServer], SentinelServer]
) -> None:
    masters, _ = deployment
    redlock = example["redlock"]
    assert isinstance(redlock, Redlock)
    assert redlock.nodes == ("sentinel:lock-a", "sentinel:lock-b", "sentinel:lock-c")
    assert "sentinel:lock-a" in repr(redlock)
    first = redlock.lock("job", ttl=5.0, auto_extend=False)
    assert await first.acquire(timeout=30.0)
    second = redlock.lock("job", ttl=5.0, auto_extend=False)
    assert not await second.acquire(blocking=False)
    await first.release()
    assert await second.acquire(timeout=30.0)
    await second.release()

    # A dead primary costs its vote, and is named by its service.
    masters["lock-c"].kill()
    masters["lock-b"].kill()
    third = redlock.lock("job", ttl=5.0, auto_extend=False)
    assert not await third.acquire(blocking=False)
    assert set(third.errors) <= {"sentinel:lock-b", "sentinel:lock-c"}
    assert third.errors
    for name, error in third.errors.items():
        assert isinstance(error, NodeError)
        assert str(error).startswith(name), error
        assert "redis://" not in str(error), error


async def test_one_service_twice_and_replica_clients_are_refused(
    deployment: tuple[dict[str, RedisServer], SentinelServer],
) -> None:
    _, sentinel = deployment
    manager = _sentinel(sentinel.address)
    twice = [manager.master_for("lock-a"), manager.master_for("lock-a")]
    replica = manager.slave_for("lock-b")
    try:
        with pytest.raises(ConfigurationError, match="twice") as info:
            Redlock([*twice, manager.master_for("lock-b")])
        assert "sentinel:lock-a" in str(info.value)
        with pytest.raises(ConfigurationError, match="replica"):
            Redlock([replica, *twice[:1]])
        # The same service name through other Sentinels is another primary.
        elsewhere = _sentinel(("127.0.0.1", 1)).master_for("lock-a")
        async with Redlock([twice[0], elsewhere]) as redlock:
            assert redlock.quorum == 2
        await elsewhere.aclose()
    finally:
        for client in [*twice, replica, *manager.sentinels]:
            await client.aclose()


async def test_a_failover_is_followed_and_treated_as_a_restart(
    deployment: tuple[dict[str, RedisServer], SentinelServer],
) -> None:
    masters, sentinel = deployment
    replica = RedisServer(extra_args=["--replicaof", "127.0.0.1", str(masters["lock-a"].port)])
    replica.start()
    manager = _sentinel(sentinel.address)
    nodes = [manager.master_for(service) for service in SERVICES]
    try:
        async with Redlock(nodes) as redlock:
            lock = redlock.lock("job", ttl=3.0, auto_extend=False)
            assert await lock.acquire(timeout=30.0)
            await lock.release()
            # The replica has synced and Sentinel knows it: fail the primary over.
            assert await eventually(lambda: _replicas(sentinel, "lock-a") >= 1, within=60.0)
            masters["lock-a"].kill()
            assert await eventually(lambda: _promoted(sentinel, "lock-a", replica), within=60.0)
            # Another run_id: the new primary may lack grants, so it is quarantined.
            masters["lock-b"].kill()  # lock-a's vote is now needed
            lock = redlock.lock("job", ttl=3.0, auto_extend=False)
            assert not await lock.acquire(blocking=False)
            assert "quarantined after a restart" in str(lock.errors.get("sentinel:lock-a"))
            # ... until censuses have read it again, and the grants it may lack
            # (the 3 s one) have ended: then it counts again.
            assert await lock.acquire(timeout=60.0)
            await lock.release()
    finally:
        for client in [*nodes, *manager.sentinels]:
            await client.aclose()
        replica.stop()


def _sentinel(*addresses: tuple[str, int]) -> Sentinel:
    return Sentinel(list(addresses))  # type: ignore[no-untyped-call]


def _replicas(sentinel: SentinelServer, service: str) -> int:
    import redis

    with redis.Redis(port=sentinel.port) as client:
        master = client.sentinel_master(service)
    return int(master.get("num-slaves", 0))


def _promoted(sentinel: SentinelServer, service: str, replica: RedisServer) -> bool:
    """Sentinel names ``replica`` the primary, and no longer flags it down."""
    import redis

    with redis.Redis(port=sentinel.port) as client:
        master = client.sentinel_master(service)
    flags = set(str(master.get("flags", "")).split(","))
    return int(master.get("port", 0)) == replica.port and flags == {"master"}
