"""The command line, end to end: real processes against real redis-server nodes."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

import redlock_async
from redlock_async import Redlock
from redlock_async.testing import RedisNodes

from .. import _loops
from ..conftest import eventually, lock_keys

CLI = "redlock:cli:"  # the command line's own prefix (issue 40)

KEY = b"redlock:cli:{job}"  # the command line's own prefix (issue 40)


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The CLI's environment: this one without ``REDLOCK_URLS`` (a caller's must not
    leak into a test), plus ``extra``."""
    env = _loops.child_env()
    env.pop("REDLOCK_URLS", None)
    env.update(extra or {})
    return env


async def cli(*args: str, env: dict[str, str] | None = None) -> asyncio.subprocess.Process:
    """``python -m redlock_async ARGS``, on the event loop this test runs on."""
    loop = _loops.name_of(asyncio.get_running_loop())
    return await asyncio.create_subprocess_exec(
        *_loops.child_command(loop, "redlock_async"), *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=cli_env(env),
    )  # fmt: skip


async def finish(process: asyncio.subprocess.Process) -> tuple[int, str, str]:
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def urls(nodes: RedisNodes) -> list[str]:
    return [arg for node in nodes for arg in ("--url", node.url)]


def held_everywhere(nodes: RedisNodes) -> bool:
    return all(node.client().get(KEY) is not None for node in nodes)


async def test_run_passes_the_exit_code_and_the_fencing_token(redis_nodes: RedisNodes) -> None:
    script = 'echo "token=$REDLOCK_FENCING_TOKEN name=$REDLOCK_LOCK_NAME"; exit 3'
    code, out, _ = await finish(
        await cli("run", *urls(redis_nodes), "job", "--fencing", "--", "sh", "-c", script)
    )
    assert code == 3
    # A fencing token: the node's clock floor plus one (docs/fencing.md).
    token, name = out.split()
    assert name == "name=job"
    assert token.startswith("token=")
    assert int(token.removeprefix("token=")) > 10**15
    assert all(node.client().get(KEY) is None for node in redis_nodes)  # released


async def test_nodes_come_from_the_environment(redis_nodes: RedisNodes) -> None:
    env = {"REDLOCK_URLS": ",".join(node.url for node in redis_nodes)}
    runner = await cli("run", "job", "--", "sleep", "30", env=env)
    assert await eventually(lambda: held_everywhere(redis_nodes))
    runner.terminate()
    code, _, _ = await finish(runner)
    assert code == 128 + signal.SIGTERM  # sleep died of the forwarded SIGTERM


async def test_run_exits_75_when_the_lock_is_busy(redis_nodes: RedisNodes) -> None:
    async with Redlock(redis_nodes.urls, prefix=CLI) as redlock, redlock.lock("job", ttl=30.0):
        code, out, err = await finish(
            await cli("run", *urls(redis_nodes), "job", "--timeout", "0.3", "--", "echo", "ran")
        )
    assert code == 75
    assert out == ""  # CMD never ran
    assert "not acquired" in err


async def test_run_stops_cmd_and_exits_76_when_the_lock_is_lost(
    redis_nodes: RedisNodes, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    # A CMD that ignores SIGTERM: only the SIGKILL after the grace stops it.
    script = f"trap '' TERM; echo $$ > {pid_file}; while true; do sleep 0.1; done"
    runner = await cli(
        "run", *urls(redis_nodes), "job", "--ttl", "1", "--grace", "0.5", "--", "sh", "-c", script
    )
    assert await eventually(lambda: pid_file.exists() and pid_file.read_text().strip() != "")
    child = int(pid_file.read_text())
    redis_nodes[0].kill()
    redis_nodes[1].kill()  # a majority gone: renewal cannot keep the lock
    code, _, err = await finish(runner)
    assert code == 76
    assert "renewals could not reach a quorum" in err  # says why
    assert "stopping CMD" in err
    # Once, under the command's own prefix (the library's warning said it again).
    assert err.count("was lost") == 1, err
    assert "redlock_async:" not in err
    assert "SIGKILL" in err
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)  # CMD is gone


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGUSR1])
async def test_run_passes_signals_to_cmd(
    redis_nodes: RedisNodes, tmp_path: Path, signum: signal.Signals
) -> None:
    ready = tmp_path / "ready"
    script = (
        "import signal, sys, time, pathlib\n"
        "signal.signal(signal.SIGINT, lambda s, f: sys.exit(40 + s))\n"
        "signal.signal(signal.SIGTERM, lambda s, f: sys.exit(40 + s))\n"
        "signal.signal(signal.SIGUSR1, lambda s, f: sys.exit(40 + s))\n"
        f"pathlib.Path({str(ready)!r}).write_text('x')\n"
        "time.sleep(60)\n"
    )
    runner = await cli("run", *urls(redis_nodes), "job", "--", sys.executable, "-c", script)
    assert await eventually(ready.exists)
    runner.send_signal(signum)
    code, _, _ = await finish(runner)
    assert code == 40 + signum  # CMD got it, handled it, and its code came back
    assert all(node.client().get(KEY) is None for node in redis_nodes)


async def test_a_signal_while_waiting_gives_up_cleanly(redis_nodes: RedisNodes) -> None:
    redlock = Redlock(redis_nodes.urls, prefix=CLI)
    async with redlock, redlock.lock("job", ttl=30.0) as lock:
        runner = await cli("run", "-v", *urls(redis_nodes), "job", "--", "echo", "ran")
        assert runner.stderr is not None
        # Until it waits (it cannot get the lock): a loaded machine takes its time to start it.
        while True:
            line = await asyncio.wait_for(runner.stderr.readline(), 60)
            assert line, "stderr ended before it waited"
            if line.startswith(b"redlock-async: waiting for lock"):
                break
        runner.send_signal(signal.SIGTERM)
        code, out, _ = await finish(runner)
        assert code == 128 + signal.SIGTERM
        assert out == ""
        token = [node.client().get(KEY) for node in redis_nodes]
        assert lock.held
        assert len(set(token)) == 1


async def test_a_signal_as_the_lock_is_granted_is_never_lost(redis_nodes: RedisNodes) -> None:
    # SIGTERM the moment the grant lands: before CMD starts, it gives up (and
    # gives the grant back); after, CMD gets it. Either way: exit 128+15 at
    # once, nothing left on the nodes - never a dropped signal (CMD runs on)
    # or a runner killed by it (keys left until they expire).
    clients = [node.client() for node in redis_nodes]
    for _ in range(5):
        runner = await cli("run", *urls(redis_nodes), "job", "--", "sleep", "30")
        for _ in range(30_000):  # polled closely: the window is a few milliseconds wide
            if all(client.get(KEY) is not None for client in clients):
                break
            await asyncio.sleep(0.001)
        runner.terminate()
        try:
            code, _, err = await asyncio.wait_for(finish(runner), 10)
        except TimeoutError:
            runner.kill()
            await runner.wait()
            pytest.fail("the runner dropped the SIGTERM: CMD ran on")
        assert code == 128 + signal.SIGTERM, err
        assert await eventually(lambda: not any(client.get(KEY) for client in clients))


async def test_run_reports_a_missing_command(redis_nodes: RedisNodes) -> None:
    code, _, err = await finish(await cli("run", *urls(redis_nodes), "job", "--", "no-such-cmd-x"))
    assert code == 127
    assert "no-such-cmd-x" in err
    assert all(node.client().get(KEY) is None for node in redis_nodes)


async def test_bad_and_unreachable_urls_are_one_line_errors_without_passwords() -> None:
    code, out, err = await finish(
        await cli("run", "--url", "redis://:hunter2@127.0.0.1:99999/0", "job", "--", "true")
    )
    assert code == 2
    assert "hunter2" not in out + err
    assert "***" in err
    assert len(err.strip().splitlines()) == 1
    code, _, err = await finish(
        await cli("--url", "redis://:hunter2@127.0.0.1:1/0", "run", "job", "--timeout", "0",
                  "--", "true")
    )  # fmt: skip
    assert code == 69  # no node answered: down, not busy
    assert "hunter2" not in err
    assert "***" in err
    code, out, err = await finish(
        await cli("status", "--url", "redis://:hunter2@127.0.0.1:1/0", "job", "--json")
    )
    assert code == 69  # fewer than a quorum answered
    assert "hunter2" not in out + err
    assert json.loads(out)["nodes"][0]["error"] is not None
    assert json.loads(out)["state"] == "unknown"
    assert json.loads(out)["summary"].startswith("unknown (only 0 of 1 nodes answered")


async def test_status_shows_the_holder_per_node(redis_nodes: RedisNodes) -> None:
    async with Redlock(redis_nodes.urls, prefix=CLI) as redlock:
        async with redlock.lock("job", ttl=30.0, fencing=True) as lock:
            code, out, err = await finish(await cli("status", *urls(redis_nodes), "job", "--json"))
            assert code == 0  # held
            report = json.loads(out)
            stored = redis_nodes[0].client().get(KEY)
            assert isinstance(stored, bytes)
            token = stored.decode()
            assert report["state"] == "held"
            assert report["kind"] == "exclusive"
            assert report["token"] == token  # whole, for scripts
            assert 0 < report["ttl_ms"] <= 30_000
            assert report["fencing_counter"] == lock.fencing_token
            # Who took it, from the token (issue 26): this test's process.
            holder = report["holder"]
            assert (holder["host"], holder["pid"]) == (socket.gethostname(), os.getpid())
            assert holder["since"] == int(token.rsplit(":", 1)[1]) / 1000
            assert abs(holder["since"] - time.time()) < 60
            assert 0 < holder["ttl"] <= 30.0
            assert (holder["kind"], holder["readers"]) == ("exclusive", 0)
            assert (report["quorum"], report["answered"], report["nodes_total"]) == (2, 3, 3)
            for node, row in zip(redis_nodes, report["nodes"], strict=True):
                assert row["node"] == node.url
                assert row["error"] is None
                assert row["exclusive"] == token
                assert 0 < row["exclusive_ttl_ms"] <= 30_000
                assert row["fencing_counter"] == lock.fencing_token
            assert err.splitlines()[0] == "redlock-async: 3 nodes (from --url): " + ", ".join(
                redis_nodes.urls
            )
            code, out, _ = await finish(await cli("status", *urls(redis_nodes), "job"))
            assert code == 0
            assert "held (exclusive)" in out
            assert f"by {socket.gethostname()}, pid {os.getpid()}, since " in out
            assert token[:8] in out
            assert token not in out
        rw = redlock.rwlock("job")
        async with rw.read(ttl=30.0), rw.read(ttl=30.0):
            code, out, _ = await finish(await cli("status", *urls(redis_nodes), "job", "--json"))
            report = json.loads(out)
            assert (code, report["state"], report["kind"]) == (0, "held", "read")
            assert report["readers"] == 2
            assert [row["readers"] for row in report["nodes"]] == [2, 2, 2]
            assert [len(row["live_readers"]) for row in report["nodes"]] == [2, 2, 2]
            holder = report["holder"]
            assert (holder["kind"], holder["readers"], holder["pid"]) == ("read", 2, os.getpid())
            code, out, _ = await finish(await cli("status", *urls(redis_nodes), "job"))
            assert f"read-locked by 2 readers, the longest-held {socket.gethostname()}, " in out
    code, out, _ = await finish(await cli("status", *urls(redis_nodes), "job", "--json"))
    assert (code, json.loads(out)["state"], json.loads(out)["holder"]) == (1, "free", None)
    code, out, _ = await finish(await cli("status", *urls(redis_nodes), "job"))
    assert code == 1
    assert "lock 'job': free" in out


async def test_status_is_unknown_when_the_silent_nodes_could_hold_it(
    redis_nodes: RedisNodes,
) -> None:
    redis_nodes[1].kill()
    redis_nodes[2].kill()
    code, out, _ = await finish(await cli("status", *urls(redis_nodes), "job", "--json"))
    report = json.loads(out)
    assert (code, report["state"], report["answered"]) == (69, "unknown", 1)
    assert [row["error"] is None for row in report["nodes"]] == [True, False, False]
    assert report["nodes"][1]["exclusive"] is None  # every row has every key
    code, out, _ = await finish(await cli("status", *urls(redis_nodes), "job"))
    assert code == 69
    assert "unknown (only 1 of 3 nodes answered)" in out


async def bench_json(redis_nodes: RedisNodes, concurrency: int) -> dict[str, Any]:
    """``bench --json`` for half a second; its exit code must be 0."""
    code, out, _ = await finish(
        # A node timeout a loaded machine keeps: a healthy node fails no vote.
        await cli("bench", *urls(redis_nodes), "--node-timeout", "1", "--duration", "0.5",
                  "--concurrency", str(concurrency), "--json")
    )  # fmt: skip
    assert code == 0
    report: dict[str, Any] = json.loads(out)
    return report


async def test_bench_reports_its_figures(redis_nodes: RedisNodes) -> None:
    report = await bench_json(redis_nodes, 4)
    assert report["grants"] > 0
    assert report["grants_per_s"] > 0
    assert report["acquire_p50_ms"] <= report["acquire_p99_ms"]
    assert report["concurrency"] == 4
    assert report["node_errors"] == {}
    code, out, _ = await finish(await cli("bench", *urls(redis_nodes), "--duration", "0.3"))
    assert code == 0
    assert "grants_per_s" in out
    assert "acquire_p99_ms" in out
    assert all(not lock_keys(redis_nodes)[i] for i in range(len(redis_nodes)))


async def test_bench_counts_a_dead_nodes_failed_votes(redis_nodes: RedisNodes) -> None:
    """Every attempt is granted by the other two: the dead node's votes still count as errors."""
    redis_nodes[2].kill()
    report = await bench_json(redis_nodes, 2)
    assert report["grants"] > 0
    assert report["refused"] == 0
    errors = report["node_errors"]
    assert set(errors) == {"NodeConnectionError"}, errors
    # One failed vote per attempt at least (releases fail there too).
    assert errors["NodeConnectionError"] >= report["grants"]
    code, out, _ = await finish(await cli("bench", *urls(redis_nodes), "--duration", "0.3"))
    assert code == 0
    assert "NodeConnectionError: " in out
    assert "none" not in out.split("node_errors", 1)[1]


async def test_demo_runs_and_cleans_up() -> None:
    code, out, err = await finish(
        await cli("demo", "--nodes", "3", "--workers", "4", "--increments", "10")
    )
    assert code == 0, err
    lines = out.splitlines()
    with_lock = next(line for line in lines if line.startswith("with the lock"))
    assert "counter 40 (0 updates lost)" in with_lock
    assert lines[-1] == "stopped every node"
    ports = [
        int(url.rsplit(":", 1)[1].split("/")[0]) for url in lines[0].split(": ", 1)[1].split(", ")
    ]
    for port in ports:  # nothing listens there any more
        with pytest.raises(ConnectionRefusedError):
            await asyncio.open_connection("127.0.0.1", port)


@pytest.mark.parametrize("command", [[], ["run"], ["status"], ["bench"], ["demo"]])
async def test_every_command_has_help(command: list[str]) -> None:
    code, out, _ = await finish(await cli(*command, "--help"))
    assert code == 0
    assert out.startswith("usage: redlock-async")
    if not command:
        assert "75" in out
        assert "76" in out


async def test_demo_stops_its_nodes_on_ctrl_c() -> None:
    # On either loop: workers cancelled inside a redis-py command used to hang
    # the demo at loop close (uvloop most often); now they stop between steps.
    demo = await cli("demo", "--nodes", "3", "--workers", "4", "--increments", "100000")
    assert demo.stdout is not None
    first = (await asyncio.wait_for(demo.stdout.readline(), 60)).decode()
    assert first.startswith("started 3 redis-server nodes: ")
    await asyncio.sleep(1.0)  # well into the run
    demo.send_signal(signal.SIGINT)
    code, out, err = await finish(demo)
    assert code == 128 + signal.SIGINT, err
    assert out.splitlines()[-1] == "stopped every node"
    for url in first.split(": ", 1)[1].split(", "):
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        with pytest.raises(ConnectionRefusedError):
            await asyncio.open_connection("127.0.0.1", port)


async def test_status_with_a_raw_special_password_neither_crashes_nor_quotes_it() -> None:
    # redis-py's own URL parser read the "/" as the end of the host and its
    # error quoted the password's first part; status now connects from the
    # address the library parsed.
    code, out, err = await finish(
        await cli("--url", "redis://:hunt/er?2x@127.0.0.1:1/0", "status", "job")
    )
    assert code == 69, (out, err)  # unreachable, said plainly
    assert "Traceback" not in err
    assert "hunt" not in out + err
    assert "er?2x" not in out + err


async def test_everything_after_name_is_the_command(redis_nodes: RedisNodes) -> None:
    show = 'echo "$0|$*|$REDLOCK_LOCK_NAME"'
    for argv in (
        ["run", *urls(redis_nodes), "job", "sh", "-c", show, "-x", "--ttl", "1"],
        ["run", "--ttl", "5", *urls(redis_nodes), "job", "sh", "-c", show, "-x", "--ttl", "1"],
        ["run", "job", "--ttl", "5", *urls(redis_nodes), "--", "sh", "-c", show, "-x", "--ttl",
         "1"],
    ):  # fmt: skip
        code, out, err = await finish(await cli(*argv))
        assert (code, out) == (0, "-x|--ttl 1|job\n"), err
    code, _, err = await finish(await cli("run", *urls(redis_nodes), "job", "ls", "-la"))
    assert code == 0, err
    assert all(node.client().get(KEY) is None for node in redis_nodes)


async def test_conflict_exit_code_and_verbose(redis_nodes: RedisNodes) -> None:
    async with Redlock(redis_nodes.urls, prefix=CLI) as redlock:
        async with redlock.lock("job", ttl=30.0):
            code, out, err = await finish(
                await cli("run", *urls(redis_nodes), "--conflict-exit-code", "9",
                          "--timeout", "0", "job", "echo", "ran")
            )  # fmt: skip
            assert (code, out) == (9, "")
            assert "not acquired (one attempt)" in err
            waiter = await cli("run", "-v", *urls(redis_nodes), "job", "echo", "ran")
            assert waiter.stderr is not None
            lines = [(await asyncio.wait_for(waiter.stderr.readline(), 60)).decode()
                     for _ in range(2)]  # fmt: skip
            assert lines[0].startswith("redlock-async: 3 nodes (from --url)")
            assert lines[1] == "redlock-async: waiting for lock 'job'… (held elsewhere)\n"
        code, out, err = await finish(waiter)  # the lock was released: it ran
        assert (code, out) == (0, "ran\n")  # stdout is CMD's alone
        said = err.splitlines()
        assert said[0].startswith("redlock-async: acquired lock 'job' after ")
        assert said[1:] == ["redlock-async: CMD exited with code 0",
                            "redlock-async: released lock 'job'"]  # fmt: skip


async def test_version() -> None:
    code, out, _ = await finish(await cli("--version"))
    assert (code, out) == (0, f"redlock-async {metadata.version('redlock-async')}\n")
    assert metadata.version("redlock-async") == redlock_async.__version__
