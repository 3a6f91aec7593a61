"""How the command line ends: Ctrl-C (130) and a reader that left (141), quietly.

Each test runs ``python -m redlock_async`` as a process, as a terminal or a
pipeline would, and reads what a person would see on stderr.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from redlock_async import Redlock
from redlock_async.testing import RedisNodes

from .. import _loops
from ..conftest import eventually, no_keys_left
from .test_cli import CLI, cli, cli_env, finish, urls


def quiet(err: str) -> bool:
    """No traceback, and nothing Python printed while shutting down."""
    return "Traceback" not in err and "Exception ignored" not in err and "Error" not in err


async def until_line(process: asyncio.subprocess.Process, start: str) -> None:
    """Read the process's stderr up to a line starting with ``start``."""
    assert process.stderr is not None
    while True:
        line = (await asyncio.wait_for(process.stderr.readline(), 60)).decode()
        assert line, f"stderr ended before {start!r}"
        if line.startswith(start):
            return


def children(pid: int) -> set[int]:
    """The redis-server processes whose parent is ``pid`` (Linux /proc); not
    the testing watchdog, a Python process that outlives them by design."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                status = (entry / "status").read_text()
            except OSError:  # gone meanwhile
                continue
            if f"\nPPid:\t{pid}\n" in status and status.startswith("Name:\tredis-server"):
                found.add(int(entry.name))
    return found


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_a_reader_that_leaves_early_ends_status_quietly(redis_nodes: RedisNodes) -> None:
    # `status --json | head -c 10`: the reader is gone before the report is
    # written, so every write fails (EPIPE) - deterministically, not a race.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        loop = _loops.name_of(asyncio.get_running_loop())
        process = await asyncio.create_subprocess_exec(
            *_loops.child_command(loop, "redlock_async"), "status", *urls(redis_nodes), "job",
            "--json", stdout=write_end, stderr=asyncio.subprocess.PIPE,
            env=cli_env(),
        )  # fmt: skip
    finally:
        os.close(write_end)
    _, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 128 + signal.SIGPIPE
    assert quiet(err.decode()), err.decode()


async def test_ctrl_c_stops_bench_and_leaves_nothing(redis_nodes: RedisNodes) -> None:
    bench = await cli("bench", *urls(redis_nodes), "--duration", "600", "--concurrency", "20")
    await until_line(bench, "redlock-async: 3 nodes")
    assert await eventually(lambda: any(n.client().keys(b"redlock:*") for n in redis_nodes))
    bench.send_signal(signal.SIGINT)
    code, out, err = await finish(bench)
    assert code == 130
    assert out == ""  # no report for a run cut short
    assert err.strip().splitlines()[-1] == "redlock-async: interrupted"
    assert quiet(err), err
    assert await no_keys_left(redis_nodes)  # every grant in hand was released


async def test_ctrl_c_stops_status_waiting_for_a_node(redis_nodes: RedisNodes) -> None:
    redis_nodes[2].pause()  # answers nothing: status waits for it
    try:
        status = await cli("status", *urls(redis_nodes), "--node-timeout", "600", "job")
        await until_line(status, "redlock-async: 3 nodes")
        status.send_signal(signal.SIGINT)
        code, out, err = await finish(status)
    finally:
        redis_nodes[2].resume()
    assert (code, out) == (130, "")
    assert quiet(err), err


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
async def test_a_signal_while_run_waits_ends_it_quietly(
    redis_nodes: RedisNodes, signum: signal.Signals
) -> None:
    async with Redlock(redis_nodes.urls, prefix=CLI) as redlock, redlock.lock("job", ttl=30.0):
        runner = await cli("run", "-v", *urls(redis_nodes), "job", "echo", "ran")
        await until_line(runner, "redlock-async: waiting for lock 'job'")
        runner.send_signal(signum)
        code, out, err = await finish(runner)
    assert (code, out) == (128 + signum, "")
    assert err.strip() == f"redlock-async: {signum.name} while waiting for 'job'"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
async def test_demo_stops_every_node_it_started(signum: signal.Signals) -> None:
    demo = await cli("demo", "--nodes", "3", "--workers", "4", "--increments", "100000")
    assert demo.stdout is not None
    first = (await asyncio.wait_for(demo.stdout.readline(), 60)).decode()
    assert first.startswith("started 3 redis-server nodes: ")
    started = children(demo.pid)
    assert len(started) == 4  # three nodes and the resource
    demo.send_signal(signum)
    code, out, err = await finish(demo)
    assert code == 128 + signum
    assert out.splitlines()[-1] == "stopped every node"
    assert quiet(err), err
    assert all(gone(pid) for pid in started)


# A command whose Ctrl-C comes before the event loop is up to handle it: the
# signal is sent while the command is being made, inside run_interruptible.
_EARLY_SIGNAL = """
import asyncio, os, signal, sys
from redlock_async._cli._interrupt import run_interruptible

async def command() -> int:
    await asyncio.sleep(30)
    return 0

def make():
    os.kill(os.getpid(), signal.SIG{name})  # the loop is not built yet
    return command()

sys.exit(run_interruptible(make, signals=(signal.SIGINT, signal.SIGTERM)))
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
async def test_a_signal_before_the_loop_is_up_ends_the_command_quietly(
    signum: signal.Signals,
) -> None:
    # It raised KeyboardInterrupt while asyncio.run built its loop (the demo,
    # Ctrl-C just after "started 3 redis-server nodes"): the half-made loop
    # and the unstarted coroutine printed tracebacks. Held back until the
    # loop's handlers are in, it ends the command like any other.
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _EARLY_SIGNAL.format(name=signum.name[3:]),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=cli_env(),
    )
    code, out, err = await finish(process)
    assert (code, out) == (128 + signum, "")
    assert quiet(err), err
    assert err.strip() == (
        "redlock-async: interrupted"
        if signum == signal.SIGINT
        else "redlock-async: stopped by SIGTERM"
    )


# A process started with SIGTERM blocked (a parent's mask is inherited across
# exec) runs a command through run_interruptible, then reports the mask.
_INHERITED_MASK = """
import signal
from redlock_async._cli._interrupt import run_interruptible


signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})  # as inherited
during = []

async def command() -> int:
    during.append(signal.SIGTERM in signal.pthread_sigmask(signal.SIG_BLOCK, []))
    return 0

run_interruptible(command, signals=(signal.SIGINT, signal.SIGTERM))
after = signal.pthread_sigmask(signal.SIG_BLOCK, [])
print(during[0], signal.SIGTERM in after, signal.SIGINT in after)
"""


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="no signal masks")
async def test_run_interruptible_leaves_the_signal_mask_as_it_found_it() -> None:
    # run_interruptible blocks its signals until the loop's handlers are in,
    # then unblocks them (SIG_UNBLOCK): a signal the caller had blocked came
    # out unblocked too, during the command and after it.
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _INHERITED_MASK,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=cli_env(),
    )
    code, out, err = await finish(process)
    assert code == 0, err
    # Still blocked while the command ran and once it returned; SIGINT,
    # unblocked before, is unblocked after.
    assert out.split() == ["True", "True", "False"]
