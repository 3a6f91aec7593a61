"""A node that is not Redis (an HTTP port, say): backoff, one clear error, no tracebacks."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator

import pytest

from redlock_async import Redlock
from redlock_async.testing import RedisNodes


class NotRedis:
    """A TCP server on a free port that answers anything like an HTTP server."""

    def __init__(self) -> None:
        self.connections = 0
        self.port = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        with contextlib.suppress(OSError):
            if await reader.read(1024):
                writer.write(b"HTTP/1.1 400 Bad Request\r\n\r\n")
                await writer.drain()
        writer.close()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


@pytest.fixture
async def not_redis() -> AsyncIterator[NotRedis]:
    fake = NotRedis()
    server = await asyncio.start_server(fake.handle, "127.0.0.1", 0)
    fake.port = server.sockets[0].getsockname()[1]
    async with server:
        yield fake


def protocol_errors(errors: object, fake: NotRedis) -> list[str]:
    assert isinstance(errors, dict)
    return [str(error) for name, error in errors.items() if str(fake.port) in name]


def asyncio_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.name == "asyncio" and r.levelno >= logging.ERROR
    ]


@pytest.mark.redis_nodes(2)
async def test_a_node_that_is_not_redis_backs_off_and_says_why(
    redis_nodes: RedisNodes, not_redis: NotRedis, caplog: pytest.LogCaptureFixture
) -> None:
    async with Redlock([*redis_nodes.urls, not_redis.url]) as redlock:
        loop = asyncio.get_running_loop()
        end = loop.time() + 1.0
        grants = 0
        while loop.time() < end:
            lock = redlock.lock(f"job{grants}", ttl=5.0, auto_extend=False)
            assert await lock.acquire(blocking=False), lock.errors  # on the two real nodes
            grants += 1
            await lock.release()
            await asyncio.sleep(0.005)
        # One connection per command before: a handful with backoff.
        assert grants > 20
        assert not_redis.connections <= 12, (not_redis.connections, grants)
        holder = redlock.lock("busy", ttl=5.0)
        assert await holder.acquire(blocking=False)
        waiter = redlock.lock("busy", ttl=5.0)
        assert not await waiter.acquire(blocking=False)
        (message,) = protocol_errors(dict(waiter.errors), not_redis)
        assert "does not speak the Redis protocol" in message
    assert asyncio_errors(caplog) == []


async def test_a_single_node_that_is_not_redis_fails_promptly(
    not_redis: NotRedis, caplog: pytest.LogCaptureFixture
) -> None:
    # N = 1: the wake-up connection meets the same server (no traceback either).
    async with Redlock([not_redis.url]) as redlock:
        lock = redlock.lock("job", ttl=5.0)
        started = time.monotonic()
        assert not await lock.acquire(timeout=0.5)
        assert time.monotonic() - started < 2.0
        (message,) = protocol_errors(dict(lock.errors), not_redis)
        assert "does not speak the Redis protocol" in message
        assert not_redis.connections <= 15
    assert asyncio_errors(caplog) == []
