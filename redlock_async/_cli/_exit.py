"""The command line's exit codes, and the error that ends a command with a usage message."""

from __future__ import annotations

import signal

__all__ = [
    "EXIT_CODES",
    "EX_BROKEN_PIPE",
    "EX_CANNOT_EXECUTE",
    "EX_FAILURE",
    "EX_FREE",
    "EX_HELD",
    "EX_INTERRUPTED",
    "EX_LOST",
    "EX_NOT_FOUND",
    "EX_OK",
    "EX_TEMPFAIL",
    "EX_UNAVAILABLE",
    "EX_UNKNOWN",
    "EX_USAGE",
    "STATUS_CODES",
    "UsageError",
]

EX_OK = 0
EX_FAILURE = 1  # demo: an update was lost
EX_USAGE = 2  # bad arguments or URLs, or no nodes given (argparse uses 2 as well)
EX_UNAVAILABLE = 69  # run/status/bench: fewer than a quorum of nodes answered
EX_TEMPFAIL = 75  # run: the lock was held elsewhere for the whole --timeout
EX_LOST = 76  # run: the lock was lost while CMD ran; CMD was stopped
EX_CANNOT_EXECUTE = 126
EX_NOT_FOUND = 127
EX_INTERRUPTED = 128 + signal.SIGINT  # Ctrl-C, as a shell reports it
# stdout was closed early (`status --json | head -c 10`): what a shell reports
# for a program that SIGPIPE ended, which is what a C tool would have been.
EX_BROKEN_PIPE = 128 + signal.SIGPIPE

# status: what a script can test (`if redlock-async status job; then ...`).
EX_HELD = 0
EX_FREE = 1  # like grep: 1 is "no", not "trouble"
EX_UNKNOWN = EX_UNAVAILABLE  # not 2: that is a usage error

EXIT_CODES = {
    EX_OK: "success (run: CMD exited 0; status: the lock is held)",
    EX_FAILURE: "status: the lock is free; demo: an update was lost",
    EX_USAGE: "bad arguments, URLs or lock name; no nodes given (neither --url nor "
    "REDLOCK_URLS): nothing was contacted or run",
    EX_UNAVAILABLE: "run: too few nodes answered to decide (down, slow, refusing); "
    "status: unknown (too few nodes answered); bench: no grant",
    EX_TEMPFAIL: "run: the lock was held elsewhere for the whole --timeout; "
    "--conflict-exit-code changes it",
    EX_LOST: "run: the lock was lost while CMD ran; CMD was stopped",
    EX_CANNOT_EXECUTE: "run: CMD is not executable (checked before locking anything)",
    EX_NOT_FOUND: "run: CMD was not found (checked before locking anything)",
    EX_INTERRUPTED: "interrupted (Ctrl-C); whatever the command started is stopped",
    EX_BROKEN_PIPE: "stdout was closed early (e.g. piped into head)",
}
"""What each exit code means, as ``--help`` lists them (docs/cli.md too)."""

STATUS_CODES = {
    EX_HELD: "held: one holder (or the readers) on a quorum of nodes",
    EX_FREE: "free: a quorum answered and no holder can have a quorum",
    EX_USAGE: "bad arguments, URLs or lock name; no nodes given",
    EX_UNKNOWN: "unknown: too few nodes answered to tell (silent nodes could make a holder's "
    "quorum)",
}
"""``status``'s exit codes, as its ``--help`` lists them."""


class UsageError(Exception):
    """A one-line message for stderr, exit code 2."""
