"""The ``redlock-async`` command line: ``run``, ``status``, ``bench``, ``demo``.

Nodes come from ``--url`` (repeatable), else ``REDLOCK_URLS`` (comma
separated), else ``redis://localhost:6379/0``. Exit codes are in
``EXIT_CODES`` and docs/cli.md. ``rich`` (the ``cli`` extra) draws live
progress and tables when it is installed and the output is a terminal; plain
text otherwise, so the command line needs nothing beyond the library.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import signal
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TextIO

from .._address import parse_url, redact_url
from .._errors import ConfigurationError, LockNotOwned, NodeError, describe_errors
from .._keys import KeyLayout, check_name, check_prefix, lock_key
from .._lock import Lock
from .._redlock import Redlock, owned_client

__all__ = ["EXIT_CODES", "main"]

DEFAULT_URL = "redis://localhost:6379/0"

EX_OK = 0
EX_FAILURE = 1  # demo: an update was lost
EX_USAGE = 2  # bad arguments or URLs (argparse uses 2 as well)
EX_UNAVAILABLE = 69  # status/bench: fewer than a quorum of nodes answered
EX_TEMPFAIL = 75  # run: the lock was not had within --timeout
EX_LOST = 76  # run: the lock was lost while CMD ran; CMD was stopped
EX_CANNOT_EXECUTE = 126
EX_NOT_FOUND = 127

EXIT_CODES = {
    EX_OK: "success (run: CMD exited 0)",
    EX_FAILURE: "demo: an update was lost",
    EX_USAGE: "bad arguments, URLs or lock name",
    EX_UNAVAILABLE: "status/bench: fewer than a quorum of nodes answered",
    EX_TEMPFAIL: "run: the lock was not acquired within --timeout (busy or nodes unreachable)",
    EX_LOST: "run: the lock was lost while CMD ran; CMD was stopped",
    EX_CANNOT_EXECUTE: "run: CMD is not executable",
    EX_NOT_FOUND: "run: CMD was not found",
}

# Signals `run` passes to CMD while it runs. Others keep their default action.
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT,
             signal.SIGUSR1, signal.SIGUSR2)  # fmt: skip

# Signals a terminal sends to its whole foreground process group.
_TERMINAL_SIGNALS = (signal.SIGINT, signal.SIGQUIT)


class _UsageError(Exception):
    """A one-line message for stderr, exit code 2."""


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0: {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1: {text!r}")
    return value


def _parser() -> argparse.ArgumentParser:
    nodes = argparse.ArgumentParser(add_help=False)
    group = nodes.add_argument_group("nodes")
    group.add_argument(
        "--url",
        action="append",
        metavar="URL",
        help="a node (repeat for each); default: $REDLOCK_URLS (comma separated), "
        f"else {DEFAULT_URL}",
    )
    group.add_argument("--prefix", default="redlock:", help="key prefix (default redlock:)")
    group.add_argument(
        "--node-timeout",
        type=_seconds,
        default=0.05,
        metavar="S",
        help="per-node, per-command timeout in seconds (default 0.05)",
    )
    codes = "\n".join(f"  {code:>3}  {what}" for code, what in EXIT_CODES.items())
    parser = argparse.ArgumentParser(
        prog="redlock-async",
        description="Distributed locks over a quorum of Redis nodes (Redlock).",
        epilog=f"exit codes:\n{codes}\n  else run: CMD's own code (128+N if a signal N ended it)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--url", action="append", metavar="URL", dest="top_url",
                        help="a node (repeatable); also accepted after the command")  # fmt: skip
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser(
        "run",
        parents=[nodes],
        help="run a command while holding a lock (a distributed flock)",
        description="Hold NAME (auto-extended) while CMD runs; exit with CMD's code. "
        "Signals (INT, TERM, HUP, QUIT, USR1, USR2) are passed to CMD. Exit 75 when the "
        "lock is not had within --timeout; if the lock is lost, CMD is stopped (SIGTERM, "
        "then SIGKILL after --grace) and the exit code is 76.",
    )
    run.add_argument("name", metavar="NAME", help="lock name")
    run.add_argument("--ttl", type=_seconds, default=30.0, metavar="S",
                     help="validity of one grant; renewed while CMD runs (default 30)")  # fmt: skip
    run.add_argument("--timeout", type=_seconds, default=None, metavar="S",
                     help="give up after S seconds (exit 75); 0: one attempt; "
                     "default: wait as long as it takes")  # fmt: skip
    run.add_argument("--fencing", action="store_true",
                     help="take a fencing token, passed as $REDLOCK_FENCING_TOKEN")  # fmt: skip
    run.add_argument("--grace", type=_seconds, default=10.0, metavar="S",
                     help="after a lost lock, SIGKILL CMD if SIGTERM did not stop it "
                     "within S seconds (default 10)")  # fmt: skip
    # Everything after the first "--" is CMD (main() splits it off before
    # parsing, so CMD's own options are never taken for ours).
    run.add_argument("cmd", nargs="*", metavar="-- CMD [ARG...]")

    status = commands.add_parser(
        "status",
        parents=[nodes],
        help="show who holds a lock, per node",
        description="Per node: exclusive holder, readers, writer, writer waiting, "
        "time to live, fencing counters, fair-queue length. Tokens are shortened.",
    )
    status.add_argument("name", metavar="NAME", help="lock name")
    status.add_argument("--json", action="store_true", help="machine-readable output")

    bench = commands.add_parser(
        "bench",
        parents=[nodes],
        help="measure acquire/release throughput and latency against the nodes",
        description="Acquire and release distinct throwaway lock names from concurrent "
        "tasks for --duration seconds; report grants/s and p50/p99 latencies.",
    )
    bench.add_argument("--concurrency", type=_positive_int, default=50, metavar="N",
                       help="concurrent tasks (default 50)")  # fmt: skip
    bench.add_argument("--duration", type=_seconds, default=5.0, metavar="S",
                       help="seconds to run (default 5)")  # fmt: skip
    bench.add_argument("--ttl", type=_seconds, default=10.0, metavar="S",
                       help="ttl of each grant (default 10)")  # fmt: skip
    bench.add_argument("--json", action="store_true", help="machine-readable output")

    demo = commands.add_parser(
        "demo",
        help="start throwaway local redis-server nodes and show workers contending for a lock",
        description="Needs redis-server on PATH. Starts N nodes and one more Redis as the "
        "shared resource, runs workers that increment a counter with a gap between read "
        "and write - first without the lock (updates are lost), then with it (none "
        "are) - and stops every node it started, on Ctrl-C too.",
    )
    demo.add_argument(
        "--nodes", type=_positive_int, default=3, help="redis-server nodes (default 3)"
    )
    demo.add_argument(
        "--workers", type=_positive_int, default=8, help="contending workers (default 8)"
    )
    demo.add_argument(
        "--increments", type=_positive_int, default=25, help="per worker (default 25)"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    cmd: list[str] | None = None
    if "run" in argv and "--" in argv and argv.index("run") < argv.index("--"):
        split = argv.index("--")
        argv, cmd = argv[:split], argv[split + 1 :]
    args = _parser().parse_args(argv)
    if cmd is not None:
        args.cmd = [*args.cmd, *cmd]
    try:
        if args.command == "run":
            return _run_command(args)
        if args.command == "status":
            return _run_async(_status(args))
        if args.command == "bench":
            return _run_async(_bench(args))
        return _demo(args.nodes, args.workers, args.increments)
    except (_UsageError, ConfigurationError) as exc:
        _error(str(exc))
        return EX_USAGE


def _run_async(coro: Any) -> int:
    try:
        return int(asyncio.run(coro))
    except KeyboardInterrupt:
        _error("interrupted")
        return 128 + signal.SIGINT


def _error(message: str) -> None:
    print(f"redlock-async: {message}", file=sys.stderr)


def _urls(args: argparse.Namespace) -> list[str]:
    urls: list[str] = [*(getattr(args, "top_url", None) or []), *(args.url or [])]
    if not urls:
        urls = [u.strip() for u in os.environ.get("REDLOCK_URLS", "").split(",") if u.strip()]
    return urls or [DEFAULT_URL]


def _redlock(args: argparse.Namespace) -> Redlock:
    # ConfigurationError names the (redacted) URL; main() prints it on one line.
    return Redlock(_urls(args), prefix=args.prefix, node_timeout=args.node_timeout)


def _describe(errors: Mapping[str, NodeError]) -> str:
    return describe_errors(errors) or "the lock is held elsewhere"


# -- run ---------------------------------------------------------------------


def _run_command(args: argparse.Namespace) -> int:
    cmd = list(args.cmd)
    if not cmd:
        raise _UsageError("run: no command given (usage: redlock-async run NAME -- CMD [ARG...])")
    check_name(args.name)
    if args.ttl <= 0:
        raise _UsageError("run: --ttl must be > 0")
    return int(asyncio.run(_run(args, cmd)))


async def _run(args: argparse.Namespace, cmd: list[str]) -> int:
    loop = asyncio.get_running_loop()
    async with _redlock(args) as redlock:
        lock = redlock.lock(
            args.name, ttl=args.ttl, timeout=args.timeout, fencing=args.fencing,
            cancel_on_lost=False,
        )  # fmt: skip
        # One handler per signal for the whole run: swapping handlers between
        # the wait and CMD's start would drop a signal that arrives in
        # between (or leave it to the default action: death, keys left on
        # the nodes). Until CMD has started, a signal gives up cleanly
        # (nothing left on the nodes) and exits like the signal would have;
        # from then on it is passed on to CMD.
        acquiring = asyncio.ensure_future(lock.acquire())
        received: list[int] = []  # signals that came before CMD started
        cmd_process: list[asyncio.subprocess.Process] = []  # CMD, once started
        # Not on a terminal, CMD gets its own process group: every signal
        # reaches it once (from us), and stopping it reaches its children
        # too. On a terminal it stays in the foreground group, so it can read
        # the terminal, and Ctrl-C / Ctrl-\\ reach it from the terminal itself.
        interactive = sys.stdin.isatty()

        def on_signal(signum: int) -> None:
            if not cmd_process:
                received.append(signum)
                acquiring.cancel()  # a no-op once the wait is over
            elif not (interactive and signum in _TERMINAL_SIGNALS):
                _signal(cmd_process[0], signum, group=not interactive)
            # else the terminal delivered it to CMD as well: CMD decides

        with _handling(loop, FORWARDED, on_signal):
            try:
                acquired = await acquiring
            except asyncio.CancelledError:
                if not received:
                    raise
                acquired = False
            if received:
                if acquired:  # the grant came with the signal: give it back
                    await _release(lock)
                _error(f"{signal.Signals(received[0]).name} while waiting for {args.name!r}")
                return 128 + received[0]
            if not acquired:
                waited = "one attempt" if args.timeout == 0 else f"{args.timeout}s"
                _error(f"lock {args.name!r} not acquired ({waited}): {_describe(lock.errors)}")
                return EX_TEMPFAIL

            env = dict(os.environ)
            env["REDLOCK_LOCK_NAME"] = args.name
            if lock.fencing_token is not None:
                env["REDLOCK_FENCING_TOKEN"] = str(lock.fencing_token)
            try:
                process = await _spawn(cmd, env, own_group=not interactive)
            except FileNotFoundError:
                await lock.release()
                _error(f"command not found: {cmd[0]}")
                return EX_NOT_FOUND
            except PermissionError:
                await lock.release()
                _error(f"command not executable: {cmd[0]}")
                return EX_CANNOT_EXECUTE
            cmd_process.append(process)
            for signum in received:  # came while CMD was starting: CMD's now
                on_signal(signum)

            exited = asyncio.ensure_future(process.wait())
            lost = asyncio.ensure_future(lock.lost_event.wait())
            await asyncio.wait({exited, lost}, return_when=asyncio.FIRST_COMPLETED)
            if not exited.done():
                why = lock._lost_error or f"lock {args.name!r} was lost"
                _error(f"{why}; stopping CMD")
                await _stop(process, exited, args.grace, group=not interactive)
                lost.cancel()
                return EX_LOST
            lost.cancel()
        code = process.returncode
        assert code is not None
        await _release(lock)
        return code if code >= 0 else 128 - code  # killed by signal N: 128+N, like a shell


async def _release(lock: Lock) -> None:
    try:
        await lock.release()
    except LockNotOwned as exc:  # expired or lost at the very end: CMD has finished
        _error(f"release: {exc}")
    except Exception as exc:  # the lock expires by itself; CMD's code still counts
        _error(f"release: {exc}")


async def _spawn(
    cmd: list[str], env: dict[str, str], *, own_group: bool
) -> asyncio.subprocess.Process:
    """Start CMD; with ``own_group``, as the leader of a new process group."""
    if not own_group:
        return await asyncio.create_subprocess_exec(*cmd, env=env)
    try:
        return await asyncio.create_subprocess_exec(*cmd, env=env, process_group=0)
    except ValueError as exc:
        # uvloop's loops refuse process_group (asyncio's take it since 3.11),
        # before starting anything: do the same setpgid(0, 0) in the child.
        if "process_group" not in str(exc):
            raise
        return await asyncio.create_subprocess_exec(*cmd, env=env, preexec_fn=os.setpgrp)


def _signal(process: asyncio.subprocess.Process, signum: int, *, group: bool) -> None:
    with contextlib.suppress(ProcessLookupError):
        if group:
            os.killpg(process.pid, signum)
        else:
            process.send_signal(signum)


async def _stop(
    process: asyncio.subprocess.Process, exited: asyncio.Future[int], grace: float, *, group: bool
) -> None:
    _signal(process, signal.SIGTERM, group=group)
    try:
        await asyncio.wait_for(asyncio.shield(exited), grace)
    except TimeoutError:
        _error(f"CMD still running {grace}s after SIGTERM; sending SIGKILL")
        _signal(process, signal.SIGKILL, group=group)
        await exited


@contextlib.contextmanager
def _handling(
    loop: asyncio.AbstractEventLoop, signals: Sequence[int], handler: Callable[[int], None]
) -> Iterator[None]:
    for signum in signals:
        loop.add_signal_handler(signum, handler, signum)
    try:
        yield
    finally:
        for signum in signals:
            loop.remove_signal_handler(signum)


# -- status ------------------------------------------------------------------


async def _status(args: argparse.Namespace) -> int:

    name = check_name(args.name)
    urls = _urls(args)
    check_prefix(args.prefix)
    for url in urls:
        parse_url(url)  # a ConfigurationError naming the (redacted) bad URL
    key = lock_key(args.prefix, name)
    layout = KeyLayout(args.prefix, name)
    writer, readers, writer_waiting = layout.writer, layout.readers, layout.writer_waiting
    timeout = max(args.node_timeout, 1.0)  # an operator's tool: patience over speed

    async def one(url: str) -> dict[str, Any]:
        row: dict[str, Any] = {"node": redact_url(url)}
        # From the parsed address, not the URL: redis-py reads a raw "/" or
        # "?" in a password differently, and its error quoted part of it.
        client = owned_client(parse_url(url), timeout)
        try:
            async with asyncio.timeout(timeout * 2):
                pipe = client.pipeline(transaction=False)
                pipe.get(key)
                pipe.pttl(key)
                pipe.get(writer)
                pipe.pttl(writer)
                pipe.eval(_READERS_LUA, 1, readers)
                pipe.exists(writer_waiting)
                pipe.get(key + b":fence")
                pipe.get(key + b":rwfence")
                pipe.zcard(key + b":q")
                pipe.zcard(key + b":rwq")
                (token, ttl, wtoken, wttl, (count, longest), waiting, fence, rwfence,
                 queued, rwqueued) = await pipe.execute()  # fmt: skip
        except Exception as exc:  # one node's trouble is one row, never a crash
            row["error"] = _node_error(exc, url)
            return row
        finally:
            await client.aclose()
        row.update(
            exclusive=_short(token),
            exclusive_ttl_ms=ttl if token is not None else None,
            writer=_short(wtoken),
            writer_ttl_ms=wttl if wtoken is not None else None,
            readers=int(count),
            readers_ttl_ms=int(longest) if count else None,
            writer_waiting=bool(waiting),
            fencing_counter=int(fence) if fence is not None else None,
            rw_fencing_counter=int(rwfence) if rwfence is not None else None,
            queued=int(queued) + int(rwqueued),
        )
        return row

    rows = await asyncio.gather(*(one(url) for url in urls))
    quorum = len(urls) // 2 + 1
    answered = sum(1 for row in rows if "error" not in row)
    summary = _status_summary(rows, quorum, answered)
    if args.json:
        report = {"name": name, "quorum": quorum, "answered": answered, "state": summary,
                  "nodes": rows}  # fmt: skip
        print(json.dumps(report, indent=2))
    else:
        _print_status(name, rows, quorum, summary)
    return EX_OK if answered >= quorum else EX_UNAVAILABLE


# Live readers and how long the longest of them has left, on the server's clock
# (reader entries are scored by their expiry in server milliseconds).
_READERS_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES')
local count = #live / 2
if count == 0 then return {0, 0} end
return {count, tonumber(live[#live]) - now}
"""


def _node_error(exc: BaseException, url: str) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out"
    text = str(exc) or type(exc).__name__
    # redis-py quotes host and port, never the password; keep it that way.
    parsed_password = _password_of(url)
    if parsed_password:
        text = text.replace(parsed_password, "***")
    return text


def _password_of(url: str) -> str | None:
    from urllib.parse import urlsplit

    try:
        return urlsplit(url).password
    except ValueError:
        return None


def _short(token: bytes | None) -> str | None:
    if token is None:
        return None
    text = token.decode(errors="replace")
    return text[:8] + "…" if len(text) > 8 else text


def _status_summary(rows: Sequence[dict[str, Any]], quorum: int, answered: int) -> str:
    def count(pred: Callable[[dict[str, Any]], bool]) -> int:
        return sum(1 for row in rows if "error" not in row and pred(row))

    tokens = [row["exclusive"] for row in rows if row.get("exclusive")]
    top = max(set(tokens), key=tokens.count) if tokens else None
    if top is not None and tokens.count(top) >= quorum:
        return f"held (exclusive) by {top}"
    writers = [row["writer"] for row in rows if row.get("writer")]
    wtop = max(set(writers), key=writers.count) if writers else None
    if wtop is not None and writers.count(wtop) >= quorum:
        return f"write-locked by {wtop}"
    reading = count(lambda r: r["readers"] > 0)
    if reading >= quorum:
        return "read-locked"
    if answered < quorum:
        # The silent nodes could make up a quorum with a holder: nobody can say.
        return f"unknown (only {answered} of {len(rows)} nodes answered)"
    if tokens or writers or reading:
        return "partly held (no quorum: an attempt in flight, or leftovers expiring)"
    return "free"


def _ms(value: int | None) -> str:
    return "-" if value is None else f"{value / 1000:.1f}s"


def _print_status(name: str, rows: Sequence[dict[str, Any]], quorum: int, summary: str) -> None:
    headers = ["node", "exclusive", "ttl", "writer", "ttl", "readers", "writer waiting",
               "fence", "rw fence", "queued"]  # fmt: skip
    table: list[list[str]] = []
    for row in rows:
        if "error" in row:
            table.append([row["node"], "unreachable"] + ["-"] * 8)
            continue
        table.append([
            row["node"], row["exclusive"] or "-", _ms(row["exclusive_ttl_ms"]),
            row["writer"] or "-", _ms(row["writer_ttl_ms"]),
            f"{row['readers']} ({_ms(row['readers_ttl_ms'])})" if row["readers"] else "0",
            "yes" if row["writer_waiting"] else "no",
            "-" if row["fencing_counter"] is None else str(row["fencing_counter"]),
            "-" if row["rw_fencing_counter"] is None else str(row["rw_fencing_counter"]),
            str(row["queued"]),
        ])  # fmt: skip
    _print_table(f"lock {name!r}: {summary} (quorum {quorum} of {len(rows)})", headers, table)
    for row in rows:
        if "error" in row:
            print(f"{row['node']}: {row['error']}")


# -- bench -------------------------------------------------------------------


async def _bench(args: argparse.Namespace) -> int:
    if args.ttl <= 0:
        raise _UsageError("bench: --ttl must be > 0")
    run_id = secrets.token_hex(4)
    acquire_ms: list[float] = []
    release_ms: list[float] = []
    refused = 0
    failures: dict[str, int] = {}
    async with _redlock(args) as redlock:
        deadline = time.perf_counter() + args.duration

        async def worker(index: int) -> None:
            nonlocal refused
            name = f"bench:{run_id}:{index}"  # distinct names: throughput, not contention
            while time.perf_counter() < deadline:
                lock = redlock.lock(name, ttl=args.ttl, auto_extend=False)
                started = time.perf_counter()
                ok = await lock.acquire(blocking=False)
                acquired = time.perf_counter()
                if not ok:
                    refused += 1
                    for error in lock.errors.values():
                        kind = type(error).__name__
                        failures[kind] = failures.get(kind, 0) + 1
                    await asyncio.sleep(0.01)  # do not spin on dead nodes
                    continue
                acquire_ms.append((acquired - started) * 1000)
                try:
                    await lock.release()
                except Exception as exc:
                    failures[type(exc).__name__] = failures.get(type(exc).__name__, 0) + 1
                release_ms.append((time.perf_counter() - acquired) * 1000)

        started = time.perf_counter()
        tasks = [asyncio.ensure_future(worker(i)) for i in range(args.concurrency)]
        with _progress(args.duration, enabled=not args.json) as tick:
            while not all(task.done() for task in tasks):
                await asyncio.wait(tasks, timeout=0.1)
                tick(time.perf_counter() - started, len(acquire_ms))
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - started
    report = {
        "nodes": [redact_url(u) for u in _urls(args)],
        "concurrency": args.concurrency,
        "duration_s": round(elapsed, 3),
        "grants": len(acquire_ms),
        "grants_per_s": round(len(acquire_ms) / elapsed, 1) if elapsed else 0.0,
        "refused": refused,
        "acquire_p50_ms": round(_percentile(acquire_ms, 50), 3),
        "acquire_p99_ms": round(_percentile(acquire_ms, 99), 3),
        "release_p50_ms": round(_percentile(release_ms, 50), 3),
        "release_p99_ms": round(_percentile(release_ms, 99), 3),
        "node_errors": failures,
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        rows = [[key, str(value)] for key, value in report.items()]
        _print_table("redlock-async bench", ["metric", "value"], rows)
    return EX_OK if report["grants"] else EX_UNAVAILABLE


def _percentile(samples: Sequence[float], q: float) -> float:
    if not samples:
        return 0.0
    ordered = sorted(samples)
    return ordered[max(0, min(len(ordered) - 1, round(q / 100 * len(ordered)) - 1))]


@contextlib.contextmanager
def _progress(
    total: float, *, enabled: bool, unit: str = "grants"
) -> Iterator[Callable[[float, int], None]]:
    """A live progress bar on a terminal (rich if installed, else one redrawn line)."""
    stream: TextIO = sys.stderr
    if not enabled or not stream.isatty():
        yield lambda done, grants: None
        return
    try:
        from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
    except ImportError:

        def line(done: float, grants: int) -> None:
            share = min(1.0, done / total) if total else 1.0
            bar = "#" * int(share * 30)
            stream.write(f"\r[{bar:<30}] {share:4.0%} {grants:,} {unit}")
            stream.flush()

        yield line
        stream.write("\n")
        return
    with Progress(
        BarColumn(), TextColumn("{task.fields[grants]:,} " + unit),
        TimeRemainingColumn(), console=_console(stream), transient=True,
    ) as progress:  # fmt: skip
        task = progress.add_task("bench", total=total, grants=0)
        yield lambda done, grants: progress.update(task, completed=done, grants=grants)


def _console(stream: TextIO) -> Any:
    from rich.console import Console

    return Console(file=stream)


def _print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    if sys.stdout.isatty():
        with contextlib.suppress(ImportError):
            from rich.table import Table

            table = Table(*headers, title=title)
            for row in rows:
                table.add_row(*row)
            _console(sys.stdout).print(table)
            return
    cells = [list(headers), *[list(row) for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    print(title)
    for n, row in enumerate(cells):
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
        if n == 0:
            print("  ".join("-" * width for width in widths))


# -- demo --------------------------------------------------------------------


def _demo(n_nodes: int, workers: int, increments: int) -> int:
    from ..testing import RedisServer, find_redis_server

    if find_redis_server() is None:
        _error(
            "demo needs redis-server on PATH "
            "(Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis)"
        )
        return EX_FAILURE
    servers = [RedisServer() for _ in range(n_nodes + 1)]  # the last one is the "resource"
    try:
        for server in servers:
            server.start()
        print(f"started {n_nodes} redis-server nodes: " + ", ".join(s.url for s in servers[:-1]))
        print(f"resource (a counter nobody may update concurrently): {servers[-1].url}")
        return asyncio.run(
            _contend([s.url for s in servers[:-1]], servers[-1].url, workers, increments)
        )
    except KeyboardInterrupt:
        _error("interrupted")
        return 128 + signal.SIGINT
    finally:
        for server in servers:
            with contextlib.suppress(Exception):
                server.stop()
        print("stopped every node")


async def _contend(urls: list[str], resource_url: str, workers: int, increments: int) -> int:
    import redis.asyncio

    resource = redis.asyncio.Redis.from_url(resource_url)
    expected = workers * increments
    try:

        async def run(locked: bool) -> int:
            await resource.set("counter", 0)
            done = 0
            label = "with the lock:   " if locked else "without the lock:"

            async def worker(redlock: Redlock) -> None:
                nonlocal done
                for _ in range(increments):
                    if locked:
                        async with redlock.lock("demo:counter", ttl=5.0):
                            await bump()
                    else:
                        await bump()
                    done += 1

            async def bump() -> None:
                # A read-modify-write with a gap: two workers inside at once lose an update.
                value = int(await resource.get("counter") or 0)
                await asyncio.sleep(0.001)
                await resource.set("counter", value + 1)

            redlocks = [Redlock(urls, retry_delay=0.01, retry_jitter=0.02) for _ in range(workers)]
            tasks = [asyncio.ensure_future(worker(r)) for r in redlocks]
            try:
                with _progress(float(expected), enabled=True, unit="increments") as tick:
                    while not all(task.done() for task in tasks):
                        await asyncio.wait(tasks, timeout=0.1)
                        tick(float(done), done)
                await asyncio.gather(*tasks)
            finally:
                for task in tasks:
                    task.cancel()
                for r in redlocks:
                    await r.aclose()
            counter = int(await resource.get("counter") or 0)
            print(
                f"{label} {workers} workers x {increments} increments -> "
                f"counter {counter} ({expected - counter} updates lost)"
            )
            return counter

        await run(locked=False)
        locked = await run(locked=True)
        return EX_OK if locked == expected else EX_FAILURE
    finally:
        await resource.aclose()
