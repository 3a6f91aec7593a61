"""The command line's exit codes, and the error that ends a command with a usage message."""

from __future__ import annotations

import signal

__all__ = [
    "EXIT_CODES",
    "EX_CANNOT_EXECUTE",
    "EX_FAILURE",
    "EX_INTERRUPTED",
    "EX_LOST",
    "EX_NOT_FOUND",
    "EX_OK",
    "EX_TEMPFAIL",
    "EX_UNAVAILABLE",
    "EX_USAGE",
    "UsageError",
]

EX_OK = 0
EX_FAILURE = 1  # demo: an update was lost
EX_USAGE = 2  # bad arguments or URLs (argparse uses 2 as well)
EX_UNAVAILABLE = 69  # status/bench: fewer than a quorum of nodes answered
EX_TEMPFAIL = 75  # run: the lock was not had within --timeout
EX_LOST = 76  # run: the lock was lost while CMD ran; CMD was stopped
EX_CANNOT_EXECUTE = 126
EX_NOT_FOUND = 127
EX_INTERRUPTED = 128 + signal.SIGINT  # Ctrl-C, as a shell reports it

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
"""What each exit code means, as ``--help`` lists them (docs/cli.md too)."""


class UsageError(Exception):
    """A one-line message for stderr, exit code 2."""
