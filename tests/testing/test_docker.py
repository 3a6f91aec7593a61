"""The Docker fallback (no redis-server on PATH): its logic without a Docker daemon.

Which backend is picked, and which container operation each handle calls, are
checked here with fake ``docker`` / ``redis-server`` executables on PATH and a
fake container object that records calls: they prove the choice and the
mapping, nothing about locks. The container testcontainers would start is
built with its Docker client stubbed out. The tests at the end run a real
engine, only when asked (``REDLOCK_TEST_DOCKER=1``; CI's docker-fallback job).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import redis

from redlock_async import Redlock
from redlock_async.testing import RedisNodes, _docker, plugin
from redlock_async.testing._docker import (
    COMMAND,
    IMAGE,
    DockerRedisServer,
    make_container,
    pick_backend,
)

from ._util import client


@pytest.fixture
def path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty PATH of our own: the executables each test puts there, nothing else."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    return bin_dir


def executable(bin_dir: Path, name: str, exit_code: int = 0) -> None:
    script = bin_dir / name
    script.write_text(f"#!/bin/sh\nexit {exit_code}\n")
    script.chmod(0o755)


def no_testcontainers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Imports of testcontainers' Redis module fail, as when it is not installed."""
    monkeypatch.setitem(sys.modules, "testcontainers.community.redis", None)


# which backend


def test_redis_server_on_path_comes_first(path: Path) -> None:
    executable(path, "redis-server")
    executable(path, "docker")
    assert pick_backend() == "redis-server"
    assert pick_backend(acl=True) == "redis-server"


def test_without_redis_server_an_engine_that_answers_is_used(path: Path) -> None:
    executable(path, "docker", exit_code=0)  # `docker info` succeeds
    assert pick_backend() == "docker"


def test_acl_users_need_a_local_redis_server(path: Path) -> None:
    executable(path, "docker", exit_code=0)
    with pytest.raises(RuntimeError, match="ACL users need a local redis-server"):
        pick_backend(acl=True)


@pytest.mark.parametrize("engine", ["answers not", "no client"])
def test_neither_says_what_to_install(engine: str, path: Path) -> None:
    if engine == "answers not":
        executable(path, "docker", exit_code=1)
    hint = r"apt-get install redis-server.*brew install redis.*redlock-async\[docker\]"
    with pytest.raises(RuntimeError, match=hint):
        pick_backend()


def test_an_engine_without_testcontainers_names_the_extra(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    executable(path, "docker", exit_code=0)
    no_testcontainers(monkeypatch)
    extra = r"testcontainers >= 4\.15.*pip install 'redlock-async\[docker\]'"
    with pytest.raises(RuntimeError, match=extra):
        pick_backend()
    with pytest.raises(RuntimeError, match=extra):
        RedisNodes().start(1)
    with pytest.raises(pytest.fail.Exception, match=extra) as failed:
        plugin._start(1)  # what the fixtures do with it: fail the test, with that message
    assert failed.value.__context__ is None  # shown once, not under the chain that led to it


# what each handle does to the container


class FakeEngine:
    """Stands for the docker SDK's container: records the calls."""

    def __init__(self, calls: list[object]) -> None:
        self.calls = calls

    def pause(self) -> None:
        self.calls.append("pause")

    def unpause(self) -> None:
        self.calls.append("unpause")

    def kill(self) -> None:
        self.calls.append("kill")


class FakeContainer:
    """Stands for testcontainers' RedisContainer: records the calls."""

    def __init__(self, port: int, calls: list[object], *, fails: bool = False) -> None:
        self.calls = calls
        self.fails = fails
        calls.append(("make", port))

    def start(self) -> FakeContainer:
        self.calls.append("start")
        if self.fails:
            raise TimeoutError("the wait strategy gave up")
        return self

    def stop(self) -> None:
        self.calls.append("remove")

    def get_wrapped_container(self) -> FakeEngine:
        return FakeEngine(self.calls)


def test_each_handle_maps_onto_one_container_operation() -> None:
    calls: list[object] = []
    server = DockerRedisServer(lambda port: FakeContainer(port, calls))
    port = server.port
    assert calls == [("make", port), "start"]  # started and waited for at once
    assert server.url == f"redis://127.0.0.1:{port}/0"
    assert server.pid is None
    assert server.is_running
    server.wait_ready()
    steps: list[tuple[str, list[object]]] = [
        ("pause", ["pause"]),
        ("pause", []),  # already paused
        ("resume", ["unpause"]),
        ("resume", []),  # not paused
        ("pause", ["pause"]),
        ("kill", ["unpause", "kill"]),  # unpaused first: engines may refuse a paused one
        ("kill", []),  # already dead
        ("pause", []),
        ("restart", ["remove", ("make", port), "start"]),  # a new container, the same port
        ("pause", ["pause"]),
        ("stop", ["unpause", "remove"]),
        ("stop", []),  # idempotent
        ("resume", []),
    ]
    for handle, expected in steps:
        calls.clear()
        getattr(server, handle)()
        assert calls == expected, handle
    assert not server.is_running
    assert server.port == port


def test_a_container_that_never_answers_is_removed() -> None:
    calls: list[object] = []
    with pytest.raises(TimeoutError):
        DockerRedisServer(lambda port: FakeContainer(port, calls, fails=True))
    assert calls[1:] == ["start", "remove"]


def test_nodes_over_containers(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """RedisNodes on the Docker backend: one container per node, all removed at close,
    and the ones already started removed when a later one fails."""
    executable(path, "docker", exit_code=0)
    calls: list[object] = []
    monkeypatch.setattr(_docker, "make_container", lambda port: FakeContainer(port, calls))
    nodes = RedisNodes().start(2)
    try:
        ports = [node.direct_port for node in nodes]
        assert calls == [("make", ports[0]), "start", ("make", ports[1]), "start"]
        assert nodes.urls == [f"redis://127.0.0.1:{node.port}/0" for node in nodes]
        assert all(node.port != node.direct_port for node in nodes)  # through the proxy
        calls.clear()
        nodes[1].kill()
        nodes[0].pause()
        assert calls == ["kill", "pause"]
    finally:
        calls.clear()
        nodes.close()
    assert calls == ["unpause", "remove", "remove"]  # node 0 was paused, node 1 killed

    calls.clear()
    made = iter([False, True])
    monkeypatch.setattr(
        _docker, "make_container", lambda port: FakeContainer(port, calls, fails=next(made))
    )
    with pytest.raises(TimeoutError):
        RedisNodes().start(2)
    assert [call for call in calls if not isinstance(call, tuple)] == [
        "start",
        "start",
        "remove",  # the one that failed
        "remove",  # the one started before it
    ]


def test_the_container_it_would_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """testcontainers' RedisContainer, configured: built, not started (no engine here)."""
    from testcontainers.community.redis import PingWaitStrategy, RedisContainer

    # The constructor connects to the engine; a stub client lets it be built without one.
    monkeypatch.setattr("testcontainers.core.container.DockerClient", lambda **_: object())
    container = make_container(54321)
    assert isinstance(container, RedisContainer)
    assert container.image.endswith(IMAGE)
    assert container._command == COMMAND
    assert COMMAND[1:3] == ["--save", ""]  # no snapshots: restarted means empty
    assert container.ports == {"6379": 54321}  # published on the port we chose
    assert isinstance(container._wait_strategy, PingWaitStrategy)


# a real engine, when asked

real_docker = pytest.mark.skipif(
    os.environ.get("REDLOCK_TEST_DOCKER") != "1",
    reason="needs a Docker engine: set REDLOCK_TEST_DOCKER=1 (CI's docker-fallback job)",
)


@real_docker
def test_a_real_container_takes_the_faults() -> None:
    server = DockerRedisServer()
    try:
        direct = client(server.port)
        direct.set(b"k", b"v")
        server.pause()
        paused = client(server.port, timeout=0.3)
        with pytest.raises(redis.TimeoutError):
            paused.ping()
        paused.close()
        server.resume()
        assert direct.get(b"k") == b"v"  # a pause keeps the data
        server.kill()
        with pytest.raises(redis.ConnectionError):
            client(server.port).ping()
        port = server.port
        server.restart()
        assert server.port == port
        again = client(server.port)
        assert again.ping()
        assert again.get(b"k") is None  # empty
        again.close()
        direct.close()
    finally:
        server.stop()


@real_docker
async def test_a_lock_over_container_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_docker, "find_redis_server", lambda: None)  # the fallback, always
    nodes = RedisNodes().start(3)
    try:
        assert all(node.server.pid is None for node in nodes)  # containers, not processes
        async with Redlock(nodes.urls) as redlock:
            nodes[0].kill()  # a minority down: still granted
            async with redlock.lock("job") as lock:
                assert lock.held
    finally:
        nodes.close()
