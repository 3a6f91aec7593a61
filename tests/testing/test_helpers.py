"""The testing helpers themselves: real processes, real faults."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from redis.asyncio import RedisCluster
from redis.crc import key_slot

from redlock_async.testing import (
    AclUser,
    RedisClusterNodes,
    RedisNodes,
    RedisServer,
    find_redis_server,
    plugin,
)
from redlock_async.testing._docker import docker_available

from ._util import alive, all_gone, client, kill_leftovers


@pytest.fixture
def reaped() -> Iterator[list[int]]:
    """Pids that must be gone once the fixtures requested after this one are torn down.

    Fixtures are torn down in reverse order of setup, so this one checks last.
    """
    pids: list[int] = []
    yield pids
    assert pids
    try:
        assert all_gone(pids), f"still running after teardown: {[p for p in pids if alive(p)]}"
    finally:
        kill_leftovers(pids)


def node_pids(nodes: RedisNodes) -> list[int]:
    pids = [node.server.pid for node in nodes]
    proxy = nodes._proxy  # the one proxy process behind the group
    return [pid for pid in [*pids, proxy.pid if proxy else None] if pid is not None]


def test_nodes_answer_and_are_torn_down(reaped: list[int], redis_nodes: RedisNodes) -> None:
    reaped += node_pids(redis_nodes)
    assert len(redis_nodes) == 3
    assert redis_nodes.urls == [f"redis://127.0.0.1:{node.port}/0" for node in redis_nodes]
    assert redis_nodes.direct_urls == [node.server.url for node in redis_nodes]
    assert 6379 not in {node.port for node in redis_nodes} | {n.direct_port for n in redis_nodes}
    for node in redis_nodes:
        assert node.port != node.direct_port
        for url in (node.url, node.direct_url):
            inspect = redis.Redis.from_url(url, socket_timeout=1.0)
            assert inspect.ping()
            inspect.close()
        node.client().set(b"k", b"v")
        assert node.client().keys("*") == [b"k"]


@pytest.mark.redis_nodes(5)
def test_marker_sets_the_node_count(redis_nodes: RedisNodes) -> None:
    assert len(redis_nodes) == 5
    assert len({node.direct_port for node in redis_nodes}) == 5


def test_factory_groups_are_independent(
    reaped: list[int], redis_nodes_factory: Callable[[int], RedisNodes]
) -> None:
    first, second = redis_nodes_factory(2), redis_nodes_factory(1)
    reaped += node_pids(first) + node_pids(second)
    assert len(first) == 2
    assert len(second) == 1
    assert first._proxy is not second._proxy
    first[0].kill()
    assert second[0].client().ping()


def test_kill_makes_connections_fail(redis_nodes: RedisNodes) -> None:
    node = redis_nodes[0]
    pid = node.server.pid
    assert pid is not None
    node.kill()
    assert not node.server.is_running
    assert not alive(pid)
    for port in (node.direct_port, node.port):
        down = client(port)
        with pytest.raises(redis.ConnectionError):
            down.ping()
        down.close()


def test_restart_is_empty_on_the_same_port(redis_nodes: RedisNodes) -> None:
    node = redis_nodes[0]
    port, direct_port, pid = node.port, node.direct_port, node.server.pid
    node.client().set(b"k", b"v")
    node.restart()
    assert (node.port, node.direct_port) == (port, direct_port)
    assert node.server.pid != pid
    assert node.client().get(b"k") is None
    assert node.client().dbsize() == 0
    through_proxy = client(node.port)
    assert through_proxy.ping()
    through_proxy.close()


def test_pause_times_out_and_resume_restores(redis_nodes: RedisNodes) -> None:
    node = redis_nodes[0]
    node.client().set(b"k", b"v")
    paused = client(node.port, timeout=0.3)
    node.pause()
    try:
        with pytest.raises(redis.TimeoutError):
            paused.ping()
    finally:
        node.resume()
        paused.close()
    resumed = client(node.port)
    assert resumed.get(b"k") == b"v"  # a pause keeps the data
    resumed.close()


def test_a_failing_test_still_tears_everything_down(tmp_path: Path) -> None:
    """The fixture in a pytest run of its own, whose test fails on purpose."""
    (tmp_path / "test_inner.py").write_text(
        textwrap.dedent(
            """
            import json, os, pytest

            @pytest.mark.redis_nodes(2)
            def test_fails(redis_nodes):
                pids = [node.server.pid for node in redis_nodes] + [redis_nodes._proxy.pid]
                with open(os.environ["PIDS_FILE"], "w") as out:
                    json.dump(pids, out)
                redis_nodes[1].pause()  # teardown copes with a paused server
                assert False, "on purpose"
            """
        )
    )
    # Warnings are errors there too; pytest-asyncio is not needed (and would want config).
    args = [sys.executable, "-m", "pytest", "-q", "-W", "error", "--strict-markers"]
    args += ["-p", "no:cacheprovider", "-p", "no:asyncio"]
    entry_points = importlib.metadata.entry_points(group="pytest11")
    if "redlock_async" not in {ep.name for ep in entry_points}:
        args += ["-p", "redlock_async.testing.plugin"]  # not installed: load it by name
    env = {**os.environ, "PIDS_FILE": str(tmp_path / "pids.json")}
    done = subprocess.run(
        [*args, "test_inner.py"], cwd=tmp_path, env=env, capture_output=True, timeout=60
    )
    output = done.stdout.decode(errors="replace")
    pids: list[int] = json.loads((tmp_path / "pids.json").read_text())
    try:
        assert done.returncode == 1, output
        assert "1 failed" in output
        assert "on purpose" in output
        assert len(pids) == 3
        assert all_gone(pids)
    finally:
        kill_leftovers(pids)


def test_server_on_its_own(tmp_path: Path) -> None:
    with RedisServer() as server:
        assert server.is_running
        assert server.url == f"redis://127.0.0.1:{server.port}/0"
        assert server.dir is not None
        assert server.dir.is_dir()
        pid, workdir = server.pid, server.dir
        assert pid is not None
    assert not server.is_running
    assert not alive(pid)
    assert not workdir.exists()
    server.stop()  # idempotent


READER = AclUser("reader", "p@ss:w/rd", "~app:* +get +ping")


@pytest.mark.redis_nodes(2, acl_user=READER)
def test_nodes_with_an_acl_user(redis_nodes: RedisNodes) -> None:
    node = redis_nodes[0]
    assert node.url == f"redis://reader:p%40ss%3Aw%2Frd@127.0.0.1:{node.port}/0"
    assert READER.password not in repr(node) + repr(redis_nodes) + repr(READER)
    node.client().set(b"app:x", b"1")  # the harness keeps the open default user
    for url in (node.url, node.direct_url):
        as_user = redis.Redis.from_url(url, socket_timeout=5.0)
        assert as_user.get(b"app:x") == b"1"
        with pytest.raises(redis.exceptions.NoPermissionError):
            as_user.set(b"app:x", b"2")
        as_user.close()
    node.restart()  # the user comes back with the server
    as_user = redis.Redis.from_url(node.url, socket_timeout=5.0)
    assert as_user.ping()
    with pytest.raises(redis.exceptions.NoPermissionError):
        as_user.info()
    as_user.close()


def test_server_with_an_acl_user() -> None:
    with RedisServer(acl_users=[READER]) as server:
        assert server.url == f"redis://127.0.0.1:{server.port}/0"  # the default user's
        as_user = redis.Redis.from_url(READER.url(server.port), socket_timeout=5.0)
        assert as_user.ping()
        with pytest.raises(redis.exceptions.NoPermissionError):
            as_user.set(b"app:x", b"2")
        as_user.close()


def test_missing_binary_says_how_to_install() -> None:
    server = RedisServer(executable="/nonexistent/redis-server")
    with pytest.raises(RuntimeError, match=r"apt-get install redis-server.*brew install redis"):
        server.start()
    assert server.dir is None  # nothing was left behind
    server.stop()


def test_neither_redis_nor_docker_fails_the_fixture(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A docker client whose engine does not answer, and no redis-server, on PATH.
    docker = tmp_path / "docker"
    docker.write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n")
    docker.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_redis_server() is None
    assert not docker_available()
    with pytest.raises(RuntimeError, match="apt-get install redis-server"):
        RedisNodes().start(1)
    with pytest.raises(pytest.fail.Exception, match="brew install redis"):
        plugin._start(1)


async def test_cluster_serves_every_slot(
    reaped: list[int], redis_cluster: RedisClusterNodes
) -> None:
    reaped += redis_cluster.pids
    assert len(redis_cluster.startup_nodes) == 3
    host, port = redis_cluster.startup_nodes[0]
    keys = ["a", "b", "c", "{x}1", "zzz", "orders:42"]
    assert len({key_slot(key.encode()) for key in keys}) == len(keys)
    cluster = RedisCluster(host=host, port=port, socket_timeout=5.0)
    try:
        for key in keys:
            assert await cluster.set(key, key)
            assert await cluster.get(key) == key.encode()
        owners = {getattr(cluster.get_node_from_key(key), "port", None) for key in keys}
        assert len(owners) > 1  # the keys really spread over several masters
    finally:
        await cluster.aclose()
