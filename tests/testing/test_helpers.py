"""The testing helpers themselves: real processes, real faults."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable

import pytest
import redis
from redis.asyncio import RedisCluster

from redlock_async.testing import RedisClusterNodes, RedisNodes, RedisServer, _server


def client(port: int, timeout: float = 1.0) -> redis.Redis:
    return redis.Redis(port=port, socket_timeout=timeout, socket_connect_timeout=timeout)


def raw_ping(port: int, timeout: float = 0.3) -> bytes:
    """One PING on a fresh socket, no client-side retries: faults show as they are."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(b"PING\r\n")
        return sock.recv(64)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); ask /proc whether it really runs.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def round_trip(port: int) -> float:
    c = client(port, timeout=5.0)
    try:
        c.ping()  # connect first: measure one command, not the handshake
        started = time.monotonic()
        c.ping()
        return time.monotonic() - started
    finally:
        c.close()


def test_nodes_answer_and_are_torn_down(redis_nodes_factory: Callable[[int], RedisNodes]) -> None:
    nodes = redis_nodes_factory(3)
    assert len(nodes) == 3
    for node in nodes:
        assert client(node.port).ping()
        assert client(node.direct_port).ping()
    pids = [node.server.pid for node in nodes]
    proxy_pid = nodes._proxy.pid if nodes._proxy else None
    nodes.close()
    for pid in [*pids, proxy_pid]:
        assert pid is not None
        assert not alive(pid)


def test_kill_and_restart(redis_nodes: RedisNodes) -> None:
    node = redis_nodes[0]
    node.client().set("k", "v")
    node.kill()
    with pytest.raises(ConnectionRefusedError):
        raw_ping(node.direct_port)
    node.restart()
    assert client(node.direct_port).get("k") is None  # restarted empty
    assert client(node.port).ping()  # the proxy reaches it again, same port


def test_pause_and_resume(redis_nodes: RedisNodes) -> None:
    node = redis_nodes[0]
    node.pause()
    try:
        with pytest.raises(TimeoutError):
            raw_ping(node.direct_port)
    finally:
        node.resume()
    assert client(node.direct_port).ping()


def test_delay_adds_latency(redis_nodes: RedisNodes) -> None:
    node = redis_nodes[0]
    node.delay(0.1)
    assert round_trip(node.port) >= 0.2  # 0.1 s each way
    node.heal()


def test_blackhole_then_heal(redis_nodes: RedisNodes) -> None:
    node = redis_nodes[0]
    node.blackhole()
    with socket.create_connection(("127.0.0.1", node.port), timeout=1.0):
        pass  # the TCP connect still succeeds
    with pytest.raises(TimeoutError):
        raw_ping(node.port)
    node.heal()
    assert client(node.port).ping()


def test_reset_aborts_open_connections(redis_nodes: RedisNodes) -> None:
    node = redis_nodes[0]
    with socket.create_connection(("127.0.0.1", node.port), timeout=2.0) as sock:
        sock.sendall(b"PING\r\n")
        assert sock.recv(64) == b"+PONG\r\n"
        node.reset_connections()
        with pytest.raises(ConnectionResetError):
            sock.sendall(b"PING\r\n")
            if not sock.recv(64):
                raise ConnectionResetError("closed")
    assert client(node.port).ping()  # new connections work


def test_refuse_then_heal_on_the_same_port(redis_nodes: RedisNodes) -> None:
    node = redis_nodes[0]
    port = node.port
    node.refuse()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
    node.heal()
    assert node.port == port
    assert client(port).ping()


def test_missing_binary_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    server = RedisServer(executable="/nonexistent/redis-server")
    with pytest.raises(RuntimeError, match="apt-get install redis-server"):
        server.start()
    server.stop()
    monkeypatch.setattr("shutil.which", lambda name: None)
    assert _server.find_redis_server() is None


async def test_cluster_fixture_serves_every_slot(redis_cluster: RedisClusterNodes) -> None:
    host, port = redis_cluster.startup_nodes[0]
    cluster = RedisCluster(host=host, port=port)
    try:
        for key in ("a", "b", "c", "{x}1", "zzz"):
            await cluster.set(key, key)
            assert await cluster.get(key) == key.encode()
    finally:
        await cluster.aclose()
