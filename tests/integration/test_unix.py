"""Nodes reached over unix sockets."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from redlock_async import Redlock
from redlock_async.testing import RedisServer, find_redis_server


@pytest.fixture
def unix_server(tmp_path: Path) -> object:
    if find_redis_server() is None:
        pytest.skip("needs a local redis-server binary for its unix socket")
    socket = tmp_path / "redis.sock"
    server = RedisServer(extra_args=["--unixsocket", str(socket), "--unixsocketperm", "700"])
    server.start()
    yield socket
    server.stop()


async def test_lock_over_a_unix_socket(unix_server: Path) -> None:
    async with Redlock([f"unix://{unix_server}?db=2"]) as redlock:
        lock = redlock.lock("job", ttl=5.0)
        assert await lock.acquire()
        check = subprocess.run(
            ["redis-cli", "-s", str(unix_server), "-n", "2", "exists", "redlock:{job}"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert check.stdout.strip() == "1"
        await lock.release()
