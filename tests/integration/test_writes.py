"""The lean driver's writes: a lone command goes out at once, a burst in one write.

A connection with nothing on the wire whose last write carried one command
writes the next command as it is queued (``Conn.send``): a sequential
caller's commands leave a loop pass sooner (callgrind: about a fifth of the
client's instructions per acquire+release). Commands queued while replies
are awaited, or by many tasks in one loop pass, still leave together, one
write per node per pass. Counted at the transport, against real nodes.
"""

from __future__ import annotations

import asyncio
from typing import Any

import hiredis

from redlock_async import Redlock
from redlock_async._engine.resp._conn import Conn
from redlock_async.testing import RedisNodes

from ..conftest import eventually, no_keys_left


class CountingTransport:
    """A connection's transport, counting its writes and the commands in them."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.writes: list[int] = []  # commands per write
        self._parse = hiredis.Reader()  # a command is a RESP array, as a reply can be

    def write(self, data: bytes) -> None:
        self._parse.feed(data)
        commands = 0
        while self._parse.gets() is not False:
            commands += 1
        self.writes.append(commands)
        self.inner.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _count(redlock: Redlock) -> list[CountingTransport]:
    counters = []
    for node in redlock._core.nodes:
        conn = node._conn  # type: ignore[attr-defined]
        assert isinstance(conn, Conn)
        assert conn.transport is not None
        counter = CountingTransport(conn.transport)
        conn.transport = counter  # type: ignore[assignment]
        counters.append(counter)
    return counters


async def _warm(redlock: Redlock) -> None:
    """Connections made, scripts loaded, the epochs read: only locks' commands follow."""
    for i in range(3):
        lock = redlock.lock(f"warm:{i}", ttl=10.0, auto_extend=False)
        assert await lock.acquire()
        await lock.release()


class _Reply:
    """A sink for one command sent by hand: its reply, when it comes."""

    command = None

    def __init__(self) -> None:
        self.reply: asyncio.Future[object] = asyncio.get_running_loop().create_future()

    def settle(self, index: int, reply: object) -> None:
        self.reply.set_result(reply)


async def test_an_idle_connections_lone_command_is_written_as_it_is_queued(
    redis_nodes: RedisNodes,
) -> None:
    redlock = Redlock([node.url for node in redis_nodes])
    try:
        await _warm(redlock)
        counter = _count(redlock)[0]
        conn = redlock._core.nodes[0]._conn  # type: ignore[attr-defined]
        assert await eventually(lambda: not conn.pending)  # the last release's reply
        assert conn.alone
        first = _Reply()
        conn.send(b"*1\r\n$4\r\nPING\r\n", first)
        assert counter.writes == [1]  # written before any loop pass
        # Its reply awaited: the next command queues for the pass's write.
        second = _Reply()
        conn.send(b"*1\r\n$4\r\nPING\r\n", second)
        assert counter.writes == [1]
        assert conn.out
        assert await first.reply in (b"PONG", "PONG")
        assert await second.reply in (b"PONG", "PONG")
        assert counter.writes == [1, 1]
    finally:
        await redlock.aclose()


async def test_a_sequential_caller_writes_each_command_alone(redis_nodes: RedisNodes) -> None:
    redlock = Redlock([node.url for node in redis_nodes])
    try:
        await _warm(redlock)
        counters = _count(redlock)
        for i in range(20):
            lock = redlock.lock(f"seq:{i}", ttl=10.0, auto_extend=False)
            assert await lock.acquire()
            await lock.release()
        await asyncio.sleep(0.1)  # the last release's slowest replies
        for counter in counters:
            # An acquire and a release per cycle on every node, never together:
            # the caller sends nothing more before a quorum has answered.
            assert counter.writes == [1] * 40
    finally:
        await redlock.aclose()
    assert await no_keys_left(redis_nodes)


async def test_many_tasks_commands_leave_together(redis_nodes: RedisNodes) -> None:
    redlock = Redlock([node.url for node in redis_nodes])
    try:
        await _warm(redlock)
        counters = _count(redlock)

        async def cycle(task: int) -> None:
            for i in range(5):
                lock = redlock.lock(f"many:{task}:{i}", ttl=10.0, auto_extend=False)
                assert await lock.acquire()
                await lock.release()

        await asyncio.gather(*(cycle(task) for task in range(50)))
        await asyncio.sleep(0.1)
        for counter in counters:
            assert sum(counter.writes) == 500  # every acquire and release, once
            # 50 tasks' acquires queued in one pass: one write carries them all
            # (a first on an idle connection may go alone), and so on after.
            assert max(counter.writes) >= 49
            assert len(counter.writes) < 100
    finally:
        await redlock.aclose()
    assert await no_keys_left(redis_nodes)


async def test_after_a_shared_write_an_idle_connection_waits_for_company(
    redis_nodes: RedisNodes,
) -> None:
    redlock = Redlock([node.url for node in redis_nodes])
    ping = b"*1\r\n$4\r\nPING\r\n"
    try:
        await _warm(redlock)
        counter = _count(redlock)[0]
        conn = redlock._core.nodes[0]._conn  # type: ignore[attr-defined]
        assert await eventually(lambda: not conn.pending)
        burst = [_Reply() for _ in range(11)]
        for sink in burst:
            conn.send(ping, sink)  # the first alone, at once; ten queue behind it
        await asyncio.gather(*(sink.reply for sink in burst))
        assert counter.writes == [1, 10]
        assert not conn.alone
        # Many tasks were sending: the next command, on an idle connection,
        # waits for the pass's others - and, written alone, lets the one
        # after it go at once again.
        for expected in ([1, 10], [1, 10, 1, 1]):
            sink = _Reply()
            conn.send(ping, sink)
            assert counter.writes == expected
            await sink.reply
        assert counter.writes == [1, 10, 1, 1]
        assert conn.alone
    finally:
        await redlock.aclose()
