"""What the commands print: one-line errors, tables, live progress.

``rich`` (the ``cli`` extra) draws tables and progress bars when it is
installed and the output is a terminal; plain text otherwise.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TextIO

__all__ = ["error", "library_warnings", "note", "print_table", "progress"]


def error(message: str) -> None:
    """Print ``redlock-async: MESSAGE`` on stderr."""
    print(f"redlock-async: {message}", file=sys.stderr, flush=True)


def note(message: str) -> None:
    """Print ``redlock-async: MESSAGE`` on stderr: what the command is doing, not an error."""
    print(f"redlock-async: {message}", file=sys.stderr, flush=True)


class _Warnings(logging.Handler):
    """The library's warnings on stderr, as the command's own lines (one prefix)."""

    def __init__(self, quiet: bool) -> None:
        super().__init__(logging.WARNING)
        self.quiet = quiet
        self.said: set[str] = set()  # configuration warnings printed (once per command)

    def emit(self, record: logging.LogRecord) -> None:
        # A lost grant: the command reports it itself, with what it did about
        # it (CMD stopped, exit 76); the library's record would say it twice.
        # Quiet: the command's failure says what failed, per node.
        outcome = getattr(record, "redlock_outcome", None)
        if self.quiet or outcome == "lost":
            return
        if outcome == "two_nodes":  # one per Redlock: `demo --nodes 2` makes one per worker
            if outcome in self.said:
                return
            self.said.add(outcome)
        try:
            message = record.getMessage().removeprefix("redlock_async: ")
        except Exception:
            self.handleError(record)
            return
        print(f"redlock-async: {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def library_warnings(*, quiet: bool) -> Iterator[None]:
    """While the command runs, the library's WARNINGs go to stderr as ``redlock-async: ...``
    (none with ``quiet``), not through Python's last-resort handler under a second prefix."""
    logger = logging.getLogger("redlock_async")
    handler = _Warnings(quiet)
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


@contextlib.contextmanager
def progress(
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
    ) as bar:  # fmt: skip
        task = bar.add_task("bench", total=total, grants=0)
        yield lambda done, grants: bar.update(task, completed=done, grants=grants)


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """``rows`` under ``headers`` on stdout: a rich table on a terminal, else aligned text."""
    if sys.stdout.isatty():
        with contextlib.suppress(ImportError):
            from rich import box
            from rich.table import Table

            # No vertical rules, and cells never cut: a node's URL or a
            # fencing counter shown as "127.0.0…" says nothing.
            table = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left")
            for header in headers:
                table.add_column(header, no_wrap=True, overflow="fold")
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


def _console(stream: TextIO) -> Any:
    # rich is optional: imported only once a terminal wants it.
    from rich.console import Console

    return Console(file=stream)
