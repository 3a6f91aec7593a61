"""The fault-injecting proxy, against real redis-server processes."""

from __future__ import annotations

import os
import select
import signal
import socket
import time

import pytest
import redis

from redlock_async.testing import Proxy, RedisNode, RedisNodes, RedisServer

from ._util import all_gone, client, single

pytestmark = pytest.mark.redis_nodes(1)


@pytest.fixture
def node(redis_nodes: RedisNodes) -> RedisNode:
    return redis_nodes[0]


def round_trip(port: int) -> float:
    c = client(port, timeout=5.0)
    try:
        c.ping()  # connect first: measure one command, not the handshake
        started = time.monotonic()
        c.ping()
        return time.monotonic() - started
    finally:
        c.close()


def test_delay_adds_latency_each_way(node: RedisNode) -> None:
    node.delay(0.1)
    assert round_trip(node.port) >= 0.19  # 0.1 s each way; a lower bound only
    node.heal()
    healed = client(node.port)
    assert healed.ping()
    healed.close()


def test_delay_with_spacing_answers_slowly_but_steadily(node: RedisNode) -> None:
    # Chunks leave at least `spacing` apart: a backlog builds, replies keep coming.
    node.delay(0.0, spacing=0.1)
    with socket.create_connection(("127.0.0.1", node.port), timeout=5.0) as sock:
        started = time.monotonic()
        for i in range(5):
            sock.sendall(b"ECHO w%d\r\n" % i)
            time.sleep(0.02)  # one chunk each
        received = b""
        arrivals = []
        while received.count(b"\r\n") < 10:
            chunk = sock.recv(4096)
            assert chunk, "connection closed early"
            received += chunk
            arrivals.append(time.monotonic() - started)
    assert received == b"".join(b"$2\r\nw%d\r\n" % i for i in range(5))
    assert arrivals[-1] >= 0.3  # five chunks 0.1 s apart, not 0.1 s in all
    node.heal()


def test_delay_with_jitter_keeps_order(node: RedisNode) -> None:
    node.delay(0.0, jitter=0.05)
    with socket.create_connection(("127.0.0.1", node.port), timeout=5.0) as sock:
        expected = b""
        for i in range(30):
            # One chunk each (the pause keeps them apart), each with its own random lag.
            word = b"w%02d" % i
            sock.sendall(b"ECHO " + word + b"\r\n")
            expected += b"$3\r\n" + word + b"\r\n"
            time.sleep(0.002)
        received = b""
        while len(received) < len(expected):
            chunk = sock.recv(4096)
            assert chunk, "connection closed early"
            received += chunk
    assert received == expected


def test_blackhole_then_heal(node: RedisNode) -> None:
    before = client(node.port, timeout=0.3)
    assert before.ping()
    node.blackhole()
    with socket.create_connection(("127.0.0.1", node.port), timeout=1.0):
        pass  # the TCP connect still succeeds, as to a host that went dark
    fresh = client(node.port, timeout=0.3)
    for one in (before, fresh):
        with pytest.raises(redis.TimeoutError):
            one.ping()
        one.close()
    node.heal()
    healed = client(node.port)
    assert healed.ping()
    healed.close()


def test_drop_replies(node: RedisNode) -> None:
    node.proxy.drop_replies()
    # A raw socket: redis-py's connection handshake would already time out.
    with socket.create_connection(("127.0.0.1", node.port), timeout=0.3) as sock:
        sock.sendall(b"SET k v\r\n")
        with pytest.raises(TimeoutError):
            sock.recv(64)
    assert node.client().get(b"k") == b"v"  # the request did reach the server
    node.heal()
    healed = client(node.port)
    assert healed.get(b"k") == b"v"
    healed.close()


def _replies_arriving(
    socks: list[socket.socket], count: int, replies: list[bytes]
) -> list[list[float]]:
    """When each of ``count`` identical replies was complete on each socket.

    The sockets are read together (select): read one after the other, the
    second's replies, interleaved with the first's, would all be waiting by
    the time it is read, and seem to arrive at once."""
    times: list[list[float]] = [[] for _ in socks]
    received = [b"" for _ in socks]
    while any(len(t) < count for t in times):
        ready, _, _ = select.select(socks, [], [], 5.0)
        assert ready, "no reply within 5 s"
        now = time.monotonic()
        for i, sock in enumerate(socks):
            if sock in ready:
                chunk = sock.recv(4096)
                assert chunk, "connection closed early"
                received[i] += chunk
                times[i] += [now] * (received[i].count(replies[i]) - len(times[i]))
    return times


def test_throttle_serialises_replies_across_connections(node: RedisNode) -> None:
    node.proxy.throttle(0.02)
    first = socket.create_connection(("127.0.0.1", node.port), timeout=5.0)
    second = socket.create_connection(("127.0.0.1", node.port), timeout=5.0)
    with first, second:
        started = time.monotonic()
        # One write each, pipelined: the server answers all 20 at once.
        first.sendall(b"PING\r\n" * 10)
        second.sendall(b"ECHO abc\r\n" * 10)
        pongs, echoes = _replies_arriving([first, second], 10, [b"+PONG\r\n", b"$3\r\nabc\r\n"])
    # One reply per 0.02 s over both connections: 20 replies take 0.38 s at
    # least, and they come one by one, not in one chunk.
    assert max(pongs[-1], echoes[-1]) - started >= 0.35
    assert pongs[-1] - pongs[0] >= 0.15
    assert echoes[-1] - echoes[0] >= 0.15


def test_heal_delivers_what_the_throttle_holds_at_once(node: RedisNode) -> None:
    node.proxy.throttle(1.0)
    with socket.create_connection(("127.0.0.1", node.port), timeout=5.0) as sock:
        sock.sendall(b"PING\r\n" * 10)  # 10 s of replies at one a second
        time.sleep(0.3)  # the proxy holds them all by now
        node.heal()
        started = time.monotonic()
        _replies_arriving([sock], 10, [b"+PONG\r\n"])
        assert time.monotonic() - started < 2.0
        sock.sendall(b"PING\r\n")  # and what follows is not throttled
        _replies_arriving([sock], 1, [b"+PONG\r\n"])


def test_reset_aborts_open_connections(node: RedisNode) -> None:
    conn = single(node.port)
    assert conn.ping()
    node.reset_connections()
    with pytest.raises(redis.ConnectionError):
        conn.ping()  # the same connection: it was cut
    conn.close()
    fresh = client(node.port)
    assert fresh.ping()
    fresh.close()


def test_refuse_then_heal_on_the_same_port(node: RedisNode) -> None:
    port = node.port
    before = single(port)
    assert before.ping()
    node.refuse()
    with pytest.raises(redis.ConnectionError):
        before.ping()  # open connections are cut
    before.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
    node.heal()
    assert node.port == port
    healed = client(port)
    assert healed.ping()
    healed.close()


def test_proxy_process_ends_with_stdin_and_on_sigterm() -> None:
    with RedisServer() as server, Proxy() as proxy:
        listener = proxy.add(server.port)
        c = client(listener.port)
        assert c.ping()
        c.close()
        pid = proxy.pid
        assert pid is not None
    assert all_gone([pid])  # stdin closed: it exits

    with RedisServer() as server:
        proxy = Proxy()
        proxy.start()
        listener = proxy.add(server.port)
        pid = proxy.pid
        assert pid is not None
        os.kill(pid, signal.SIGTERM)
        with pytest.raises(RuntimeError, match="exited"):
            for _ in range(100):  # until the process has gone
                listener.heal()
                time.sleep(0.01)
        proxy.close()
        assert all_gone([pid])
