"""The ``redlock-async`` command line: ``run``, ``status``, ``bench``, ``demo``.

This module runs a command and ends it the way a shell tool should: the
arguments are parsed in ``_args``, and each command lives in its own module:
``_run`` (a process supervisor holding a lock), ``_status``, ``_bench``,
``_demo``. Nodes come from ``--url`` (repeatable), else ``REDLOCK_URLS``
(comma separated); with neither, every command but ``demo`` stops with exit
2 before contacting anything (``_nodes``). Every command says which nodes on
stderr; ``-q`` keeps stderr for failures. Exit codes are in ``EXIT_CODES`` (``_exit``)
and docs/cli.md; Ctrl-C ends any command with 130, a closed stdout with
141, never with a traceback. ``rich`` (the ``cli`` extra) draws live progress
and tables when it is installed and the output is a terminal; plain text
otherwise (``_output``), so the command line needs nothing beyond the library.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Coroutine, Sequence
from importlib import metadata
from typing import Any

from .._base._errors import ConfigurationError
from ._args import parser, split_command
from ._bench import bench
from ._demo import demo
from ._exit import EX_BROKEN_PIPE, EX_USAGE, EXIT_CODES, UsageError
from ._interrupt import run_interruptible, say_interrupted
from ._output import error, library_warnings
from ._run import run_command
from ._status import status

__all__ = ["EXIT_CODES", "main"]


def version() -> str:
    """The installed package's version (its metadata), else the imported one's."""
    try:
        return metadata.version("redlock-async")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        from .. import __version__

        return __version__


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``); the exit code."""
    try:
        code = _main(list(sys.argv[1:] if argv is None else argv))
        # Flushed here, inside the try: a pipe closed early shows at the
        # flush, and at exit it would be an "Exception ignored" message.
        sys.stdout.flush()
        return code
    except KeyboardInterrupt:  # Ctrl-C outside a command's own handling (parsing, start-up)
        return say_interrupted(signal.SIGINT)
    except BrokenPipeError:
        # The reader left (`status --json | head -c 10`): nothing more can be
        # said on stdout, and Python's final flush must not try again.
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return EX_BROKEN_PIPE


def _main(argv: list[str]) -> int:
    argv, cmd = split_command(argv)
    args = parser(version()).parse_args(argv)
    args.cmd = cmd or []
    args.quiet = args.quiet or args.top_quiet
    try:
        if args.quiet and getattr(args, "verbose", False):
            raise UsageError("-q/--quiet and -v/--verbose cannot be used together")
        with library_warnings(quiet=args.quiet):
            if args.command == "run":
                return run_command(args)
            if args.command == "status":
                return _run_async(lambda: status(args))
            if args.command == "bench":
                return _run_async(lambda: bench(args))
            return demo(args.nodes, args.workers, args.increments, quiet=args.quiet)
    except (UsageError, ConfigurationError) as exc:
        error(str(exc))
        return EX_USAGE


def _run_async(command: Callable[[], Coroutine[Any, Any, int]]) -> int:
    # Ctrl-C cancels the command, whose own cleanup runs (bench stops its
    # tasks and releases), then exits 130; one while the loop is being
    # built waits for it (run_interruptible).
    return int(run_interruptible(command))
