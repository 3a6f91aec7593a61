"""Throwaway servers die with the process that started them, however it dies.

Each case runs a real process that starts nodes, reports their pids and
directories, then ends without calling ``stop()``: ``os._exit`` (what
pytest-timeout's thread method and a crashed xdist worker do), SIGTERM (a
cancelled CI job) or SIGKILL. Before the watchdog, every server kept running
with its ``redlock-node-*`` directory.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from redlock_async.testing._watchdog import _names

CHILD = """
import json, os, signal, sys, time
from redlock_async.testing import RedisNodes
nodes = RedisNodes().start(3)
print(json.dumps([[n.server.pid, str(n.server.dir)] for n in nodes]), flush=True)
sys.stdin.readline()  # the test has seen them running: now die
how = sys.argv[1]
if how == "exit":
    os._exit(3)
if how == "sigterm":
    os.kill(os.getpid(), signal.SIGTERM)
if how == "sigkill":
    os.kill(os.getpid(), signal.SIGKILL)
if how == "thread":
    import threading
    # A server started from a thread that has since ended must live on
    # (PR_SET_PDEATHSIG would have killed it with the thread).
    more = []
    t = threading.Thread(target=lambda: more.append(RedisNodes().start(1)))
    t.start(); t.join()
    extra = more[0][0].server
    print(json.dumps([extra.pid, str(extra.dir)]), flush=True)
    time.sleep(0.5)
    for n in [*nodes, *more[0]]:
        assert n.server.is_running, "a server died before its process"
    os._exit(3)
time.sleep(60)
"""


def gone(servers: list[tuple[int, str]], within: float = 10.0) -> list[str]:
    """What is still there after ``within`` seconds: running servers, directories."""
    deadline = time.monotonic() + within
    while True:
        left = [f"pid {pid}" for pid, d in servers if _names(pid, os.path.realpath(d))]
        left += [d for _, d in servers if Path(d).exists()]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def cleanup(servers: list[tuple[int, str]], proc: subprocess.Popen[bytes] | None = None) -> None:
    """The test's own cleanup, for when the watchdog failed: kill what is left."""
    for pid, d in servers:
        if _names(pid, os.path.realpath(d)):
            os.kill(pid, signal.SIGKILL)
    if proc is not None:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def run_child(how: str) -> tuple[list[tuple[int, str]], subprocess.Popen[bytes]]:
    """Start the child, check its servers run, then tell it to die ``how``."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, how], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert proc.stdout is not None
    assert proc.stdin is not None
    servers = [(int(pid), d) for pid, d in json.loads(proc.stdout.readline())]
    try:
        assert len(servers) == 3
        assert all(_names(pid, os.path.realpath(d)) for pid, d in servers)  # they run
    except BaseException:
        cleanup(servers, proc)
        raise
    proc.stdin.write(b"go\n")
    proc.stdin.close()
    return servers, proc


@pytest.mark.parametrize("how", ["exit", "sigterm", "sigkill"])
def test_servers_end_with_their_process(how: str) -> None:
    servers, proc = run_child(how)
    try:
        proc.wait(timeout=30)
        assert proc.returncode != 0
        assert gone(servers) == []
    finally:
        cleanup(servers, proc)


def test_a_server_started_from_a_thread_outlives_the_thread() -> None:
    servers, proc = run_child("thread")
    assert proc.stdout is not None
    extra = json.loads(proc.stdout.readline())
    servers.append((int(extra[0]), extra[1]))
    try:
        proc.wait(timeout=30)
        assert proc.returncode == 3  # 1 would mean a server died with its thread
        assert gone(servers) == []
    finally:
        cleanup(servers, proc)


def test_the_plugin_nodes_end_with_a_pytest_that_dies(tmp_path: Path) -> None:
    """A pytest run whose test calls ``os._exit`` in the middle of a fixture's life."""
    record = tmp_path / "servers.json"
    (tmp_path / "test_dies.py").write_text(
        "import json, os\n"
        "def test_dies(redis_nodes):\n"
        "    servers = [[n.server.pid, str(n.server.dir)] for n in redis_nodes]\n"
        f"    open({str(record)!r}, 'w').write(json.dumps(servers))\n"
        "    os._exit(7)\n"
    )
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    if "redlock_async" not in {ep.name for ep in importlib.metadata.entry_points(group="pytest11")}:
        args += ["-p", "redlock_async.testing.plugin"]
    done = subprocess.run([*args, "test_dies.py"], cwd=tmp_path, timeout=100, check=False)
    assert done.returncode == 7
    servers = [(int(pid), d) for pid, d in json.loads(record.read_text())]
    assert servers
    try:
        assert gone(servers) == []
    finally:
        cleanup(servers)
