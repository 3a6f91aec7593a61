"""The command line's arguments: the parser, and where ``run``'s command begins.

``run NAME CMD [ARG...]`` takes everything from the first word after NAME as
CMD, with or without ``--`` (like ``flock``, ``timeout`` or ``nice``), so
CMD's own options are never taken for ours. argparse cannot say that (its
REMAINDER swallows our options after NAME too), so :func:`split_command`
cuts CMD off before argparse sees the rest.
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Callable, Sequence

from ._exit import EX_TEMPFAIL, EX_UNAVAILABLE, EXIT_CODES, STATUS_CODES

__all__ = ["parser", "split_command"]

# Options that take a value, for split_command (flags take none). A test
# checks this against the parser, so a new option cannot be forgotten here.
VALUE_OPTIONS = frozenset(
    {"--url", "--prefix", "--node-timeout", "--ttl", "--timeout", "--grace",
     "--conflict-exit-code"}
)  # fmt: skip


def split_command(argv: Sequence[str]) -> tuple[list[str], list[str] | None]:
    """``argv`` without ``run``'s CMD, and CMD (None when the command is not ``run``).

    CMD starts at the first word after NAME that is not an option (or after
    ``--``); options of ``run`` go before CMD. An unknown option before CMD
    stays with ours, so argparse reports it rather than running it.
    """
    args = list(argv)
    index = _skip_options(args, 0)
    if index >= len(args) or args[index] != "run":
        return args, None
    index += 1
    seen_name = False
    while index < len(args):
        word = args[index]
        if word == "--":
            if seen_name:
                return args[:index], args[index + 1 :]
            # "run [OPTIONS] -- NAME CMD...": NAME is the next word.
            if index + 1 >= len(args):
                return args[:index], []
            return [*args[:index], args[index + 1]], args[index + 2 :]
        if word.startswith("-") and word != "-":
            index = _skip_options(args, index)
            continue
        if seen_name:
            return args[:index], args[index:]
        seen_name = True
        index += 1
    return args, []


def _skip_options(args: list[str], index: int) -> int:
    """The index of the first word from ``index`` on that is not an option or its value."""
    while index < len(args) and args[index].startswith("-") and args[index] not in ("-", "--"):
        word = args[index]
        takes_value = word in VALUE_OPTIONS  # "--ttl=5" carries its own
        index += 2 if takes_value else 1
    return index


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0: {text!r}")
    return value


def _whole(low: int, high: int | None, says: str) -> Callable[[str], int]:
    """An argparse type: a whole number in [low, high]; ``says`` words the range."""

    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be {says}: {text!r}")
        return value

    return convert


_positive_int = _whole(1, None, ">= 1")
_exit_code = _whole(0, 255, "0..255")


def _codes(codes: dict[int, str]) -> str:
    return "\n".join(
        textwrap.fill(what, 79, initial_indent=f"  {code:>3}  ", subsequent_indent=" " * 7)
        for code, what in codes.items()
    )


def _fill(text: str) -> str:
    # Pre-wrapped, never at a hyphen: "--conflict-exit-" / "code" reads badly.
    return textwrap.fill(text, 79, break_on_hyphens=False)


_QUIET_HELP = "nothing on stderr unless something failed"


def parser(version: str) -> argparse.ArgumentParser:
    """The parser of ``redlock-async``; ``--version`` prints ``version``."""
    quiet = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    quiet.add_argument("-q", "--quiet", action="store_true", help=_QUIET_HELP)
    nodes = argparse.ArgumentParser(add_help=False, allow_abbrev=False, parents=[quiet])
    group = nodes.add_argument_group("nodes")
    group.add_argument(
        "--url",
        action="append",
        metavar="URL",
        help="a node (repeat for each); else $REDLOCK_URLS (comma separated); one of the "
        "two is required: there is no default node",
    )
    # Its own prefix by default: a restart locks a prefix out for the longest
    # ttl used on it, and run's default ttl (30 s) is long for web locks
    # (docs/guide.md, "ttl and restarts: one prefix per workload").
    group.add_argument(
        "--prefix",
        default="redlock:cli:",
        help="key prefix (default redlock:cli:, apart from applications' locks; "
        "pass an application's prefix, e.g. redlock:, to see its locks with status)",
    )
    group.add_argument(
        "--node-timeout",
        type=_seconds,
        default=0.05,
        metavar="S",
        help="per-node, per-command timeout in seconds (default 0.05)",
    )
    top = argparse.ArgumentParser(
        prog="redlock-async",
        description=_fill(
            "Distributed locks over a quorum of Redis nodes (Redlock). Nodes come from "
            "--url (repeated) or REDLOCK_URLS (comma separated); with neither, every "
            "command but demo stops with exit 2. Every command but demo says on stderr "
            "which nodes it talks to; -q/--quiet: nothing on stderr unless something failed."
        ),
        epilog=f"exit codes:\n{_codes(EXIT_CODES)}\n"
        "  else run: CMD's own code (128+N if a signal N ended it)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    top.add_argument("--version", action="version", version=f"redlock-async {version}")
    top.add_argument("--url", action="append", metavar="URL", dest="top_url",
                     help="a node (repeatable); also accepted after the command")  # fmt: skip
    top.add_argument("-q", "--quiet", action="store_true", dest="top_quiet",
                     help=_QUIET_HELP + "; also accepted after the command")  # fmt: skip
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser(
        "run",
        parents=[nodes],
        allow_abbrev=False,
        usage="redlock-async run [OPTIONS] NAME [--] CMD [ARG...]",
        help="run a command while holding a lock (a distributed flock)",
        description=_fill(
            "Hold NAME (auto-extended) while CMD runs; exit with CMD's code. CMD starts "
            "at the first word after NAME that is not an option ('--' before it is "
            "accepted, not needed), so options of run go before CMD. Signals (INT, "
            "TERM, HUP, QUIT, USR1, USR2) are passed to CMD. CMD is looked up before "
            "anything is locked (127: not found, 126: not executable). Exit 75 (or "
            "--conflict-exit-code) when the lock was held elsewhere for the whole "
            f"--timeout, {EX_UNAVAILABLE} when too few nodes answered to decide; if the "
            "lock is lost, CMD is stopped (SIGTERM, then SIGKILL after --grace) and the "
            "exit code is 76."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("name", metavar="NAME", help="lock name")
    run.add_argument("--ttl", type=_seconds, default=30.0, metavar="S",
                     help="validity of one grant; renewed while CMD runs (default 30)")  # fmt: skip
    run.add_argument("--timeout", type=_seconds, default=None, metavar="S",
                     help="give up after S seconds; 0: one attempt; "
                     "default: wait as long as it takes")  # fmt: skip
    run.add_argument("--conflict-exit-code", type=_exit_code, default=EX_TEMPFAIL,
                     metavar="N", help="exit code when the lock was held elsewhere for the "
                     f"whole --timeout (default {EX_TEMPFAIL}); not when too few nodes "
                     f"answered (that is {EX_UNAVAILABLE})")  # fmt: skip
    run.add_argument("--fencing", action="store_true",
                     help="take a fencing token, passed as $REDLOCK_FENCING_TOKEN")  # fmt: skip
    run.add_argument("--grace", type=_seconds, default=10.0, metavar="S",
                     help="after a lost lock, SIGKILL CMD if SIGTERM did not stop it "
                     "within S seconds (default 10)")  # fmt: skip
    run.add_argument("-v", "--verbose", action="store_true",
                     help="say on stderr when waiting for, acquiring and releasing the "
                     "lock (stdout stays CMD's); not with -q")  # fmt: skip

    status = commands.add_parser(
        "status",
        parents=[nodes],
        allow_abbrev=False,
        help="show who holds a lock, per node; the exit code says held/free/unknown",
        description="Per node: exclusive holder, readers, writer, writer waiting, "
        "time to live, fencing counters, fair-queue length; then the verdict over "
        "the quorum. Tokens are shortened in the table, full in --json.",
        epilog=f"exit codes:\n{_codes(STATUS_CODES)}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    status.add_argument("name", metavar="NAME", help="lock name")
    status.add_argument("--json", action="store_true", help="machine-readable output")

    bench = commands.add_parser(
        "bench",
        parents=[nodes],
        allow_abbrev=False,
        help="measure acquire/release throughput and latency against the nodes",
        description="Acquire and release distinct throwaway lock names from concurrent "
        "tasks for --duration seconds; report grants/s and p50/p99 latencies. "
        "Ctrl-C stops it early (exit 130; every grant taken is released).",
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
        parents=[quiet],
        allow_abbrev=False,
        help="start throwaway local redis-server nodes and show workers contending for a lock",
        description="Needs redis-server on PATH. Starts N nodes and one more Redis as the "
        "shared resource, runs workers that increment a counter with a gap between read "
        "and write - first without the lock (updates are lost), then with it (none "
        "are) - and stops every node it started, on Ctrl-C and SIGTERM too.",
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
    return top
