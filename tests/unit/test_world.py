"""The World seam (issue 39): where a Redlock reads time, randomness and who it is.

The default world is the process's own; a Redlock made in another world
(``_world.context``) takes its clock, tokens, jitter, host and pid from it,
with no patch of ``time``, ``random``, ``os`` or ``socket``. No sockets here:
nothing connects until a command is sent.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import secrets
import socket
import time

from redlock_async import Redlock
from redlock_async._base import _world
from redlock_async._base._address import node_identity
from redlock_async._core import _holderinfo as info
from redlock_async._core._commands import FairEntry
from redlock_async._engine._backoff import Backoff

from ._worlds import made_world

URLS = ["redis://10.0.0.1:6379/0", "redis://10.0.0.2:6379/0", "redis://10.0.0.3:6379/0"]


def test_the_default_world_is_the_real_one() -> None:
    world = _world.current()
    assert world is _world.REAL
    assert world.monotonic is time.monotonic
    assert world.time_ns is time.time_ns
    assert world.token_bytes is secrets.token_bytes
    assert world.hostname is socket.gethostname
    assert world.getpid is os.getpid
    # The resolver is the socket module's at each call, so a resolver an
    # application installs there (tests/integration/test_connect.py) is heard.
    seen: list[str] = []

    def resolver(host: str, *args: object, **kwargs: object) -> list[tuple[object, ...]]:
        seen.append(host)
        return []

    real = socket.getaddrinfo
    socket.getaddrinfo = resolver  # type: ignore[assignment]
    try:
        assert world.getaddrinfo("example.invalid", 6379) == []
    finally:
        socket.getaddrinfo = real
    assert seen == ["example.invalid"]
    assert isinstance(world.rng, random.Random)


def test_a_redlock_made_in_the_real_world_uses_it() -> None:
    redlock = Redlock(URLS)
    engine = redlock._core
    assert engine.world is _world.REAL
    assert engine.clock is time.monotonic
    assert engine.rng is _world.REAL.rng
    token = engine.new_token()
    host, pid, since = info.parse(token) or ("", 0, 0.0)
    assert (host, pid) == (socket.gethostname(), os.getpid())
    assert abs(since - time.time()) < 5


def test_a_redlock_made_in_another_world_takes_all_of_it() -> None:
    world = made_world(seed=7, monotonic=lambda: 55.0)
    redlock = _world.context(world).run(Redlock, URLS)
    engine = redlock._core
    assert engine.world is world
    assert engine.clock() == 55.0
    assert engine.rng is world.rng
    assert engine._quorum.clock() == 55.0  # resend deadlines: the same clock
    token = engine.new_token()
    assert re.fullmatch(rb"[0-9a-f]{40}@sim-host:4242:1700000000123", token)
    assert info.parse(token) == ("sim-host", 4242, 1700000000.123)
    # The random part is the world's: the same seed, the same tokens.
    again = _world.context(made_world(seed=7)).run(Redlock, URLS)._core.new_token()
    other = _world.context(made_world(seed=8)).run(Redlock, URLS)._core.new_token()
    assert again == token
    assert other[:40] != token[:40]
    # Outside that context, the real world again.
    assert _world.current() is _world.REAL
    assert Redlock(URLS)._core.world is _world.REAL


def test_without_holder_info_tokens_are_the_worlds_bytes() -> None:
    world = made_world(seed=3)
    redlock = _world.context(world).run(Redlock, URLS, holder_info=False)
    expected = random.Random(3).randbytes(20 * 128).hex().encode()[:40]
    assert redlock._core.new_token() == expected


def test_tasks_started_in_a_worlds_context_see_it() -> None:
    world = made_world()

    async def main() -> tuple[_world.World, _world.World]:
        async def child() -> _world.World:
            return _world.current()

        inner = await asyncio.get_running_loop().create_task(child())
        return _world.current(), inner

    loop = asyncio.new_event_loop()
    try:
        task = loop.create_task(main(), context=_world.context(world))
        assert loop.run_until_complete(task) == (world, world)
    finally:
        loop.close()


def test_backoff_jitter_and_fair_tickets_come_from_the_world() -> None:
    def delays(seed: int) -> list[float]:
        backoff = _world.context(made_world(seed)).run(Backoff, 1.0, 8.0, (0.5, 1.5))
        return [backoff.fail() for _ in range(4)]

    assert delays(1) == delays(1)
    assert delays(1) != delays(2)
    world = made_world(seed=5)
    engine = _world.context(world).run(Redlock, URLS)._core
    entry = FairEntry.new(b"x:", engine)
    assert entry.ticket == b"1700000000123.000"
    assert entry.waiter == b"x:" + random.Random(5).randbytes(8).hex().encode()


def test_host_names_are_resolved_by_the_world() -> None:
    asked = []

    def getaddrinfo(host: str, port: int, **kwargs: object) -> list[tuple[object, ...]]:
        asked.append((host, port))
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.9.8.7", port))]

    world = made_world(getaddrinfo=getaddrinfo)
    found = _world.context(world).run(node_identity, "node-a.sim", 6380)
    assert found == frozenset({("tcp", "10.9.8.7", 6380)})
    assert asked == [("node-a.sim", 6380)]
    # An IP literal is never resolved.
    assert _world.context(world).run(node_identity, "10.0.0.1", 6379)
    assert asked == [("node-a.sim", 6380)]
