"""The command line as cron runs it: no default node, CMD looked up before the lock, busy
(75) told from down (69), and ``-q/--quiet`` (issue 26).

Cron does not pass the shell's exports and mails whatever reaches stderr:
each test reads what such a job would see. The subprocesses get an explicit
environment without ``REDLOCK_URLS`` (``cli_env``).
"""

from __future__ import annotations

import contextlib
import io
import re
import socket
from pathlib import Path
from typing import Any

import pytest

from redlock_async import Redlock
from redlock_async._base._address import redact_url
from redlock_async._cli import main
from redlock_async.testing import RedisNodes

from ..conftest import eventually
from .test_cli import cli, finish
from .test_cli import urls as node_urls

CLI = "redlock:cli:"  # the command line's own prefix (issue 40)

NO_NODES_COMMANDS = [
    ["run", "--timeout", "0", "job", "--", "sh", "-c", "touch {marker}"],
    ["status", "job"],
    ["bench", "--duration", "0.1"],
]


@pytest.mark.parametrize("command", NO_NODES_COMMANDS, ids=["run", "status", "bench"])
@pytest.mark.parametrize("quiet", [[], ["-q"]], ids=["", "quiet"])
def test_without_nodes_every_command_stops_before_contacting_anything(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, command: list[str], quiet: list[str]
) -> None:
    monkeypatch.delenv("REDLOCK_URLS", raising=False)
    marker = tmp_path / "ran"
    attempts: list[Any] = []

    def connect(self: socket.socket, address: Any) -> None:
        attempts.append(address)
        raise ConnectionRefusedError(f"this test allows no connection ({address})")

    # Every connection asyncio (and so every driver) makes goes through these.
    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main([*quiet, *(word.format(marker=marker) for word in command)])
    said = err.getvalue()
    assert code == 2
    assert "--url" in said
    assert "REDLOCK_URLS" in said
    assert len(said.splitlines()) == 1, said  # one line, even with -q: it failed
    assert attempts == []  # no node contacted, the old default localhost:6379 included
    assert not marker.exists()  # CMD did not run


async def test_without_nodes_run_runs_nothing(tmp_path: Path) -> None:
    # As cron starts it: a real process, no REDLOCK_URLS in its environment.
    marker = tmp_path / "ran"
    code, out, err = await finish(
        await cli("run", "--timeout", "0", "job", "sh", "-c", f"touch {marker}")
    )
    assert (code, out) == (2, "")
    assert "--url" in err
    assert "REDLOCK_URLS" in err
    assert not marker.exists()
    code, _, err = await finish(await cli("status", "job", env={"REDLOCK_URLS": ""}))
    assert code == 2
    assert "REDLOCK_URLS lists no URL" in err


def urls(nodes: RedisNodes) -> list[str]:
    """``--url`` for each node, and a node timeout a loaded machine keeps: one late reply
    with a node down would rightly read as "too few nodes answered"."""
    return [*node_urls(nodes), "--node-timeout", "1"]


def connections(clients: list[Any]) -> list[int]:
    """Connections each node has accepted so far (one client per node, kept open)."""
    return [int(client.info("stats")["total_connections_received"]) for client in clients]


@pytest.mark.parametrize("what", ["missing", "not-executable", "directory"])
async def test_a_command_that_cannot_run_is_refused_before_the_lock(
    redis_nodes: RedisNodes, tmp_path: Path, what: str
) -> None:
    if what == "missing":
        cmd, expected = "no-such-cmd-x", 127
    elif what == "not-executable":
        script = tmp_path / "job.sh"
        script.write_text("#!/bin/sh\necho ran\n")
        script.chmod(0o644)
        cmd, expected = str(script), 126
    else:
        cmd, expected = str(tmp_path), 126
    clients = [node.client() for node in redis_nodes]
    before = connections(clients)
    code, out, err = await finish(await cli("run", *urls(redis_nodes), "job", "--", cmd))
    assert (code, out) == (expected, "")
    assert connections(clients) == before  # no node was contacted: no key, no attempt
    assert cmd in err
    assert "nothing was locked" in err


async def test_busy_is_75_and_down_is_69(redis_nodes: RedisNodes) -> None:
    run = ("run", *urls(redis_nodes), "--timeout", "0.3", "job", "echo", "ran")
    async with Redlock(redis_nodes.urls, prefix=CLI) as redlock, redlock.lock("job", ttl=30.0):
        code, out, err = await finish(await cli(*run))
        assert (code, out) == (75, "")
        assert "held elsewhere" in err
        redis_nodes[2].kill()  # the two left hold it: still busy, not down
        code, out, err = await finish(await cli(*run))
        assert (code, out) == (75, ""), err
    redis_nodes[1].kill()  # one node of three left: no quorum can decide
    code, out, err = await finish(await cli(*run))
    assert (code, out) == (69, "")
    assert "too few nodes answered" in err
    assert "held elsewhere" not in err


@pytest.mark.redis_nodes(3)
async def test_down_names_the_node_that_answered(driver: str, redis_nodes: RedisNodes) -> None:
    # Issue 38: with two nodes of three stopped, exit 69 said "0 of 3 nodes
    # answered" while the third answered every command. Through either
    # driver (a parameter only redis-py reads makes the CLI use it).
    query = "?socket_keepalive=true" if driver == "redis-py" else ""
    nodes = [f"{node.url}{query}" for node in redis_nodes]
    run = ("run", *(arg for url in nodes for arg in ("--url", url)), "--node-timeout", "1",
           "--timeout", "0", "job", "echo", "ran")  # fmt: skip
    redis_nodes[0].stop()
    redis_nodes[2].stop()
    healthy = redact_url(nodes[1])
    for _ in range(2):
        code, out, err = await finish(await cli(*run))
        assert (code, out) == (69, ""), err
        assert "0 of 3 nodes answered" not in err
        found = re.search(
            r"\d of 3 nodes said yes(?: \(([^)]*)\))?, 2 failed \(([^)]*)\)"
            r"(?:, 1 not waited for \(([^)]*)\))?; 2 needed",
            err,
        )
        assert found, err
        granted, failed, waiting = found.groups()
        assert healthy in (granted, waiting), err  # said yes, or not waited for
        assert set(failed.split(", ")) == {redact_url(nodes[0]), redact_url(nodes[2])}, err


async def test_conflict_exit_code_changes_only_the_busy_code(redis_nodes: RedisNodes) -> None:
    run = ("run", *urls(redis_nodes), "--conflict-exit-code", "9", "--timeout", "0", "job",
           "echo", "ran")  # fmt: skip
    async with Redlock(redis_nodes.urls, prefix=CLI) as redlock, redlock.lock("job", ttl=30.0):
        assert (await finish(await cli(*run)))[:2] == (9, "")
    redis_nodes[1].kill()
    redis_nodes[2].kill()
    code, out, err = await finish(await cli(*run))
    assert (code, out) == (69, ""), err


async def test_quiet_says_nothing_when_nothing_failed(redis_nodes: RedisNodes) -> None:
    for argv in (
        ["-q", "run", *urls(redis_nodes), "job", "echo", "ok"],
        ["run", "--quiet", *urls(redis_nodes), "job", "echo", "ok"],
    ):
        assert await finish(await cli(*argv)) == (0, "ok\n", "")
    code, out, err = await finish(await cli("status", "-q", *urls(redis_nodes), "job"))
    assert (code, err) == (1, "")  # free: an answer, not a failure
    assert "lock 'job': free" in out
    code, out, err = await finish(
        await cli("bench", "-q", *urls(redis_nodes), "--duration", "0.2", "--json")
    )
    assert (code, err) == (0, "")
    redis_nodes[2].kill()  # one node down, a quorum left: the job runs, nothing failed
    code, out, err = await finish(await cli("-q", "run", *urls(redis_nodes), "job", "echo", "ok"))
    assert (code, out, err) == (0, "ok\n", "")
    # Busy, declared a success by --conflict-exit-code 0: nothing failed either.
    async with Redlock(redis_nodes.urls, prefix=CLI) as redlock, redlock.lock("job", ttl=30.0):
        code, out, err = await finish(
            await cli("-q", "run", *urls(redis_nodes), "--conflict-exit-code", "0",
                      "--timeout", "0", "job", "echo", "ran")
        )  # fmt: skip
    assert (code, out, err) == (0, "", "")


async def test_quiet_still_reports_a_failure_once(redis_nodes: RedisNodes) -> None:
    run = ("-q", "run", *urls(redis_nodes), "--timeout", "0", "job", "echo", "ran")
    async with Redlock(redis_nodes.urls, prefix=CLI) as redlock, redlock.lock("job", ttl=30.0):
        code, out, err = await finish(await cli(*run))
    assert (code, out) == (75, "")
    assert err.startswith("redlock-async: not acquired (one attempt): ")
    assert len(err.splitlines()) == 1
    redis_nodes[1].kill()
    redis_nodes[2].kill()
    code, out, err = await finish(await cli(*run))
    assert (code, out) == (69, "")
    assert "too few nodes answered" in err
    assert len(err.splitlines()) == 1  # the nodes' errors in it, not in warnings before it
    code, _, err = await finish(await cli("-q", "run", "-v", *urls(redis_nodes), "job", "true"))
    assert code == 2
    assert "-q/--quiet and -v/--verbose" in err


async def test_quiet_reports_a_lost_lock_in_one_line(
    redis_nodes: RedisNodes, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    runner = await cli("-q", "run", *urls(redis_nodes), "job", "--ttl", "1", "--",
                       "sh", "-c", f"echo $$ > {pid_file}; exec sleep 30")  # fmt: skip
    assert await eventually(lambda: pid_file.exists() and pid_file.read_text().strip() != "")
    redis_nodes[0].kill()
    redis_nodes[1].kill()
    code, out, err = await finish(runner)
    assert (code, out) == (76, "")
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("redlock-async: lock 'job' was lost: ")
    assert lines[0].endswith("; stopping CMD")
