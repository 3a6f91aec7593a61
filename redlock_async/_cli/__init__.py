"""The ``redlock-async`` command line: ``run``, ``status``, ``bench``, ``demo``.

This module parses the arguments and hands each command to its own module:
``_run`` (a process supervisor holding a lock), ``_status``, ``_bench``,
``_demo``. Nodes come from ``--url`` (repeatable), else ``REDLOCK_URLS``
(comma separated), else ``redis://localhost:6379/0`` (``_nodes``). Exit
codes are in ``EXIT_CODES`` (``_exit``) and docs/cli.md. ``rich`` (the
``cli`` extra) draws live progress and tables when it is installed and the
output is a terminal; plain text otherwise (``_output``), so the command
line needs nothing beyond the library.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Coroutine, Sequence
from typing import Any

from .._errors import ConfigurationError
from ._bench import bench
from ._demo import demo
from ._exit import EX_USAGE, EXIT_CODES, UsageError
from ._nodes import DEFAULT_URL
from ._output import error, interrupted
from ._run import run_command
from ._status import status

__all__ = ["EXIT_CODES", "main"]


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
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``); the exit code."""
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
            return run_command(args)
        if args.command == "status":
            return _run_async(status(args))
        if args.command == "bench":
            return _run_async(bench(args))
        return demo(args.nodes, args.workers, args.increments)
    except (UsageError, ConfigurationError) as exc:
        error(str(exc))
        return EX_USAGE


def _run_async(coro: Coroutine[Any, Any, int]) -> int:
    try:
        return int(asyncio.run(coro))
    except KeyboardInterrupt:
        return interrupted()
