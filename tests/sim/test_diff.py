"""The simulated node held to the redis-server installed here (``diff.py``).

A short sweep must agree step for step; each planted difference (a quirk
of ``SimNode``) must make it disagree; every command the library's two
drivers send, read off the server's MONITOR, must be one the node models.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator

import pytest
import redis.asyncio

from redlock_async import Redlock
from redlock_async.testing import RedisServer
from tests.sim.__main__ import main
from tests.sim.commands import Spec, resolve
from tests.sim.diff import run
from tests.sim.handshake import HANDSHAKES, compare
from tests.sim.node import QUIRKS
from tests.sim.real import RealConn, RealServer
from tests.sim.replies import Status
from tests.sim.steps import SCRIPTS


@pytest.fixture(scope="module")
def real() -> Iterator[RealServer]:
    with RealServer() as server:
        yield server


def test_the_node_agrees_with_redis_server(real: RealServer) -> None:
    labels: set[str] = set()
    for seed in range(1, 5):
        report = run(real, seed, 1500)
        assert report.disagreement is None, str(report.disagreement)
        assert report.unaligned <= report.steps // 20  # a busy machine, not a blind check
        labels |= set(report.labels)
    assert set(SCRIPTS) <= labels  # every script of the library was run


@pytest.mark.parametrize("quirk", sorted(QUIRKS))
def test_a_planted_difference_fails_the_check(real: RealServer, quirk: str) -> None:
    for seed in range(1, 4):
        report = run(real, seed, 3000, quirks=frozenset({quirk}))
        if report.disagreement is not None:
            return
    pytest.fail(f"the check missed the planted difference {quirk!r}")


def test_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", "--seed", "7", "--steps", "300"]) == 0
    assert "agree" in capsys.readouterr().out
    assert main(["diff", "--seed", "7", "--steps", "3000", "--quirk", "lua_false_as_zero"]) == 1
    assert "seed 7, step" in capsys.readouterr().out
    # The rest of the command line (runner.py's): tests/sim/test_sweep.py.
    assert main(["mutants"]) == 0
    assert "quorum-n2" in capsys.readouterr().out.split()
    assert main(["pending"]) == 0
    lines = capsys.readouterr().out.splitlines()  # none once nothing awaits a fix
    assert all(line.startswith(("fault ", "checker ", "schedule ")) for line in lines), lines


def test_the_handshakes_without_a_password(real: RealServer) -> None:
    assert compare(real.port, None, HANDSHAKES) == []


def test_the_handshakes_with_a_password() -> None:
    with RedisServer(extra_args=["--requirepass", "s3cret"]) as server:
        assert compare(server.port, b"s3cret", HANDSHAKES) == []


async def _both_drivers(port: int) -> None:
    """A lock's life on each driver: kinds, fencing, fairness, wake-ups, holders."""
    client = redis.asyncio.Redis(port=port)
    try:
        for node in (f"redis://127.0.0.1:{port}/0", client):
            async with Redlock([node], node_timeout=1.0) as redlock:
                async with redlock.lock("a", ttl=5.0, fencing=True, fair=True, timeout=5.0):
                    await redlock.holder("a")
                held = redlock.lock("w", ttl=5.0)
                assert await held.acquire(timeout=5.0)
                await held.extend()
                second = redlock.lock("w", ttl=5.0, timeout=3.0)
                waiter = asyncio.create_task(second.acquire())
                await asyncio.sleep(0.2)  # the waiter subscribes to the wake-up channel
                await held.release()
                assert await waiter
                await second.release()
                rw = redlock.rwlock("d")
                async with rw.read(ttl=5.0), rw.read(ttl=5.0):
                    pass
                async with rw.write(ttl=5.0, fencing=True):
                    pass
                async with redlock.semaphore("s", limit=2, ttl=5.0):
                    pass
                async with redlock.multilock(["m1", "m2"], ttl=5.0):
                    await redlock.locked("m1")
    finally:
        await client.aclose()


def test_every_command_the_drivers_send_is_modelled() -> None:
    # A server of its own: the sweeps above leave random keys under the same
    # prefix and names ("a": a held lock or a fair line there made the lock
    # below, with no timeout, wait out the 120 s test timeout in CI).
    with RealServer() as real:
        monitor = RealConn(real.port)
        try:
            monitor.send([b"MONITOR"])
            asyncio.run(_both_drivers(real.port))
            lines = monitor.pending(0.2)
        finally:
            monitor.close()
    seen: set[tuple[bytes, ...]] = set()
    for line in lines:
        assert isinstance(line, Status)
        quoted = re.findall(r'"((?:[^"\\]|\\.)*)"', line)
        if quoted:
            seen.add(tuple(word.encode() for word in quoted[:2]))
    names = {command[0].upper() for command in seen}
    assert {b"EVALSHA", b"HELLO", b"SSUBSCRIBE", b"SET", b"PTTL", b"ZADD"} <= names
    for command in seen:
        assert isinstance(resolve(list(command)), Spec), command  # raises NotModelled if not
