"""Nodes reached over unix sockets."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from redlock_async import Redlock
from redlock_async.testing import RedisServer, find_redis_server


@pytest.fixture
def unix_socket(tmp_path: Path) -> Iterator[Path]:
    if find_redis_server() is None:
        pytest.skip("needs a local redis-server binary for its unix socket")
    socket = tmp_path / "redis.sock"
    server = RedisServer(extra_args=["--unixsocket", str(socket), "--unixsocketperm", "700"])
    server.start()
    try:
        yield socket
    finally:
        server.stop()


async def test_lock_over_a_unix_socket(unix_socket: Path) -> None:
    inspect = redis.Redis(unix_socket_path=str(unix_socket), db=2)
    try:
        async with Redlock([f"unix://{unix_socket}?db=2"]) as redlock:
            lock = redlock.lock("job", ttl=5.0)
            assert await lock.acquire()
            assert inspect.exists("redlock:{job}") == 1
            await lock.release()
            assert inspect.exists("redlock:{job}") == 0
    finally:
        inspect.close()
