"""The virtual-time loop and the simulated network (issue 39), with a toy node and client.

No library code here: ``test_world.py`` runs the real client over them.
"""

from __future__ import annotations

import asyncio
import contextvars
import random
import time
from collections.abc import Hashable
from typing import Any

import pytest

from .loop import PROCESS, RealIO, SimLoop, Stuck
from .net import Network, Reader

# A toy RESP: commands are arrays of bulk strings; replies bulk strings, errors, pushes.


class ToyReader:
    def __init__(self) -> None:
        self.buf = b""

    def feed(self, data: bytes) -> None:
        self.buf += data

    def get(self) -> list[bytes] | None:
        if not self.buf.startswith(b"*") or b"\r\n" not in self.buf:
            return None
        head, rest = self.buf.split(b"\r\n", 1)
        words = []
        for _ in range(int(head[1:])):
            if b"\r\n" not in rest:
                return None
            size, rest = rest.split(b"\r\n", 1)
            length = int(size[1:])
            if len(rest) < length + 2:
                return None
            words.append(rest[:length])
            rest = rest[length + 2 :]
        self.buf = rest
        return words


class ToyCodec:
    NOREPLY = object()

    def reader(self) -> Reader:
        return ToyReader()

    def encode(self, reply: Any, proto: int) -> bytes:
        return b"+%s\r\n" % reply

    def proto(self, node: Any, conn: Hashable) -> int:
        return 2


class ToyNode:
    """PING -> PONG, ECHO x -> x, SUB: pushes every later PUB's message to that connection."""

    def __init__(self) -> None:
        self.ran: list[tuple[Hashable, list[bytes]]] = []
        self.outbox: dict[Hashable, list[bytes]] = {}
        self.subscribers: dict[Hashable, None] = {}
        self.gone: list[Hashable] = []

    def execute(self, args: list[bytes], conn: Hashable = 0) -> Any:
        self.ran.append((conn, args))
        if args[0] == b"SUB":
            self.subscribers[conn] = None
            return ToyCodec.NOREPLY
        if args[0] == b"PUB":
            for other in self.subscribers:
                self.outbox.setdefault(other, []).append(b"msg " + args[1])
            return b"%d" % len(self.subscribers)
        return b"PONG" if args[0] == b"PING" else args[1]

    def take(self, conn: Hashable) -> list[Any]:
        return self.outbox.pop(conn, [])

    def disconnect(self, conn: Hashable) -> None:
        self.subscribers.pop(conn, None)
        self.gone.append(conn)


def command(*words: bytes) -> bytes:
    return b"*%d\r\n" % len(words) + b"".join(b"$%d\r\n%s\r\n" % (len(w), w) for w in words)


class Client(asyncio.Protocol):
    def __init__(self) -> None:
        self.data = b""
        self.lost: list[Exception | None] = []
        self.got = asyncio.Event()

    def data_received(self, data: bytes) -> None:
        self.data += data
        self.got.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost.append(exc)


class Proc:
    """The least a process needs to be one, for the loop."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.dead = False
        self.tasks: list[asyncio.Task[Any]] = []

    def adopt(self, task: asyncio.Task[Any]) -> None:
        self.tasks.append(task)


@pytest.fixture
def loop() -> Any:
    made = SimLoop()
    yield made
    made.close()


def setup(loop: SimLoop, jitter: float = 0.0) -> tuple[Network, ToyNode]:
    net = Network(loop, random.Random(1), ToyCodec(), latency=0.001, jitter=jitter)
    node = ToyNode()
    net.add("n1", "10.0.0.1", node)
    return net, node


async def connect(loop: SimLoop) -> tuple[asyncio.Transport, Client]:
    transport, client = await loop.create_connection(Client, "10.0.0.1", 6379)
    assert isinstance(client, Client)
    return transport, client


# The loop.


def test_an_hour_passes_at_once(loop: SimLoop) -> None:
    started = time.monotonic()
    assert loop.run_until_complete(asyncio.sleep(3600, "done")) == "done"
    assert loop.time() == 1000.0 + 3600
    assert time.monotonic() - started < 1


def test_timers_of_one_instant_run_in_the_order_set(loop: SimLoop) -> None:
    ran: list[int] = []
    for i in range(50):
        loop.call_at(1005.0 if i % 2 else 1003.0, ran.append, i)
    loop.run_until_complete(asyncio.sleep(10))
    assert ran == [*range(0, 50, 2), *range(1, 50, 2)]


def test_asyncio_timeout_and_tasks(loop: SimLoop) -> None:
    async def main() -> str:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(2.5):
                await asyncio.sleep(10)
        assert loop.time() == 1002.5
        task = asyncio.create_task(asyncio.sleep(1, "t"))
        return await task

    assert loop.run_until_complete(main()) == "t"
    assert loop.time() == 1003.5


def test_waiting_for_nothing_is_stuck_not_a_hang(loop: SimLoop) -> None:
    with pytest.raises(Stuck):
        loop.run_until_complete(loop.create_future())


def test_the_real_world_is_out_of_reach(loop: SimLoop) -> None:
    async def main() -> None:
        with pytest.raises(RealIO):
            await loop.create_connection(Client, "10.0.0.1", 6379)  # no network yet
        with pytest.raises(RealIO):
            await loop.getaddrinfo("localhost", 6379)
        with pytest.raises(RealIO):
            await loop.create_unix_connection(Client, "/tmp/redis.sock")
        with pytest.raises(RealIO):
            loop.run_in_executor(None, print)

    loop.run_until_complete(main())


def test_a_dead_owner_runs_nothing_more(loop: SimLoop) -> None:
    owner = Proc("p1")
    ran: list[str] = []

    async def body() -> None:
        try:
            loop.call_later(5, ran.append, "timer")
            await asyncio.sleep(10)
            ran.append("woke")
        finally:
            ran.append("finally")  # the cleanup a crash must not run

    context = contextvars.copy_context()
    context.run(PROCESS.set, owner)
    task = loop.create_task(body(), context=context)
    assert owner.tasks == [task]

    async def main() -> None:
        await asyncio.sleep(1)
        owner.dead = True
        loop.bury(owner)
        await asyncio.sleep(20)

    loop.run_until_complete(main())
    assert ran == []
    assert not task.done()
    task._log_destroy_pending = False  # type: ignore[attr-defined]
    task.get_coro().close()
    assert ran == ["finally"]  # only now, by hand


# The network.


def test_a_round_trip_takes_the_paths_latency(loop: SimLoop) -> None:
    net, node = setup(loop)

    async def main() -> None:
        transport, client = await connect(loop)
        assert loop.time() == pytest.approx(1000.002)  # SYN, SYN-ACK
        transport.write(command(b"PING"))
        await client.got.wait()
        assert loop.time() == pytest.approx(1000.004)
        assert client.data == b"+PONG\r\n"
        transport.close()
        await asyncio.sleep(1)
        assert client.lost == [None]
        assert node.gone == [1]

    loop.run_until_complete(main())
    assert net.trace == ["1000.003000 n1 sim#1 b'PING' -> b'PONG'"]


def test_bytes_arrive_in_order_whatever_the_jitter(loop: SimLoop) -> None:
    _, node = setup(loop, jitter=0.01)

    async def main() -> None:
        transport, client = await connect(loop)
        for i in range(200):
            transport.write(command(b"ECHO", b"%d" % i))
            await asyncio.sleep(0.0001)
        await asyncio.sleep(1)
        assert client.data == b"".join(b"+%d\r\n" % i for i in range(200))

    loop.run_until_complete(main())
    assert [args[1] for _, args in node.ran] == [b"%d" % i for i in range(200)]


def test_a_cut_holds_bytes_until_healed_one_way_or_both(loop: SimLoop) -> None:
    net, node = setup(loop)

    async def main() -> None:
        transport, client = await connect(loop)
        net.cut(["sim"], ["n1"], up=False)  # asymmetric: the node hears, we do not
        transport.write(command(b"ECHO", b"a"))
        await asyncio.sleep(1)
        assert len(node.ran) == 1
        assert client.data == b""
        net.cut(["sim"], ["n1"])  # now both ways
        transport.write(command(b"ECHO", b"b"))
        await asyncio.sleep(1)
        assert len(node.ran) == 1
        net.heal()
        await asyncio.sleep(1)
        assert client.data == b"+a\r\n+b\r\n"

    loop.run_until_complete(main())


def test_refused_blackholed_and_reset(loop: SimLoop) -> None:
    net, node = setup(loop)

    async def main() -> None:
        net.path("sim", "n1").refuse = True
        with pytest.raises(ConnectionRefusedError):
            await connect(loop)
        net.heal()
        with pytest.raises(ConnectionRefusedError):
            await loop.create_connection(Client, "10.0.0.9", 6379)  # nobody there
        transport, client = await connect(loop)
        net.path("sim", "n1").blackhole = True
        transport.write(command(b"PING"))
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.5):
                await connect(loop)  # hangs until the caller gives up
        await asyncio.sleep(1)
        assert node.ran == []
        assert client.data == b""
        net.heal()
        _, fresh = await connect(loop)
        net.reset("sim", "n1")
        await asyncio.sleep(0)
        assert [type(e) for e in fresh.lost] == [ConnectionResetError]
        assert [type(e) for e in client.lost] == [ConnectionResetError]

    loop.run_until_complete(main())


def test_dropped_replies_and_pushes(loop: SimLoop) -> None:
    net, node = setup(loop)

    async def main() -> None:
        sub, listener = await connect(loop)
        pub, publisher = await connect(loop)
        sub.write(command(b"SUB"))
        await asyncio.sleep(0.1)
        pub.write(command(b"PUB", b"hi"))
        await asyncio.sleep(0.1)
        assert listener.data == b"+msg hi\r\n"
        assert publisher.data == b"+1\r\n"
        net.path("sim", "n1").drop_replies = True
        pub.write(command(b"ECHO", b"x"))
        await asyncio.sleep(0.1)
        assert node.ran[-1][1] == [b"ECHO", b"x"]
        assert publisher.data == b"+1\r\n"

    loop.run_until_complete(main())


def test_a_paused_or_slow_node_queues_commands(loop: SimLoop) -> None:
    net, node = setup(loop)
    server = net.servers["10.0.0.1", 6379]

    async def main() -> None:
        transport, client = await connect(loop)  # accepted while paused, as by the kernel
        server.pause()
        transport.write(command(b"ECHO", b"1") + command(b"ECHO", b"2"))
        await asyncio.sleep(5)
        assert node.ran == []
        server.resume()
        await asyncio.sleep(0.01)
        assert client.data == b"+1\r\n+2\r\n"
        server.service = 0.5
        transport.write(command(b"ECHO", b"3") + command(b"ECHO", b"4"))
        await asyncio.sleep(0.6)
        assert client.data.endswith(b"+3\r\n")
        await asyncio.sleep(0.5)
        assert client.data.endswith(b"+4\r\n")

    loop.run_until_complete(main())


def test_a_timer_a_few_ulps_ahead_waits_a_nanosecond() -> None:
    """A callback that sets itself again for a delay that rounds to "now" (a
    deadline on a clock of another origin) still sees the clock move."""
    from .loop import CLOCK_RESOLUTION

    loop = SimLoop(1018.3328432205337)
    origin = -1303.0556  # a process's monotonic clock, another origin
    deadline = loop.time() + origin + 3e-13
    calls: list[float] = []

    def check() -> None:
        now = loop.time() + origin
        calls.append(now)
        if now < deadline and len(calls) < 1000:  # spinning: stop, and fail below
            loop.call_later(deadline - now, check)
        else:
            loop.stop()

    loop.call_later(deadline - (loop.time() + origin), check)
    loop.run_forever()
    loop.close()
    assert len(calls) <= 2
    assert loop.time() - 1018.3328432205337 <= 2 * CLOCK_RESOLUTION
