"""Ending a command on Ctrl-C (or SIGTERM) the way a shell tool should: its cleanup runs, then
exit 128 + N, without a traceback."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Collection, Coroutine, Iterator, Sequence
from typing import Any

from ._output import error

__all__ = ["interruptible", "run_interruptible", "say_interrupted"]

# Blocks and unblocks signals; None where the platform has no such call (Windows).
_SIGMASK = getattr(signal, "pthread_sigmask", None)


def say_interrupted(signum: int) -> int:
    """Say on stderr that signal ``signum`` ended the command; its exit code (128 + N)."""
    error("interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}")
    return 128 + signum


async def interruptible(
    command: Coroutine[Any, Any, int],
    *,
    signals: Sequence[int] = (signal.SIGINT,),
    on_signal: Callable[[], None] | None = None,
    unblock: Collection[int] = (),
) -> int:
    """Run ``command``; any of ``signals`` cancels it, calls ``on_signal`` first; the exit code.

    ``unblock``: the signals :func:`run_interruptible` blocked, unblocked
    once the handlers are in.

    The command's own cleanup (``finally``, ``async with``) runs on the
    cancellation. The exit code is 128 + N once a signal N came, even when
    the cancellation was lost on the way: Python 3.11's ``wait_for``, which
    redis-py uses, can swallow one that lands as its inner call completes -
    which is also why commands that run long stop through ``on_signal``.
    """
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(command)
    received: list[int] = []

    def handle(signum: int) -> None:
        received.append(signum)
        if on_signal is not None:
            on_signal()
        task.cancel()

    previous = {signum: signal.getsignal(signum) for signum in signals}
    for signum in signals:
        loop.add_signal_handler(signum, handle, signum)
    _unblock(unblock)  # held back by run_interruptible until now: delivered here
    try:
        code = await task
    except asyncio.CancelledError:
        if not received:
            raise
    finally:
        for signum in signals:
            loop.remove_signal_handler(signum)
            # Back to what was there (remove_signal_handler would leave
            # SIG_DFL: a SIGTERM then would skip the caller's cleanup).
            handler = previous[signum]
            if handler is not None:
                signal.signal(signum, handler)
    if received:
        return say_interrupted(received[0])
    return code


def run_interruptible(
    command: Callable[[], Coroutine[Any, Any, int]],
    *,
    signals: Sequence[int] = (signal.SIGINT,),
    on_signal: Callable[[], None] | None = None,
) -> int:
    """``asyncio.run(interruptible(command(), ...))``, with ``signals`` held back
    until :func:`interruptible`'s handlers are in place.

    A Ctrl-C while the loop is being built raised KeyboardInterrupt inside
    its constructor: the half-made loop, and the coroutine never started,
    printed tracebacks at exit. Blocked (where the platform can) until the
    loop handles them, such a signal arrives a moment later, as one the
    command was running for. The command is made inside the block too.
    """
    with _blocked(signals) as blocked:
        return asyncio.run(
            interruptible(command(), signals=signals, on_signal=on_signal, unblock=blocked)
        )


@contextlib.contextmanager
def _blocked(signals: Sequence[int]) -> Iterator[frozenset[int]]:
    """Block ``signals``; yields those it blocked (not those blocked already:
    a mask inherited from the parent stays as it was)."""
    if _SIGMASK is None:  # nothing to hold back with
        yield frozenset()
        return
    blocked = frozenset(signals) - _SIGMASK(signal.SIG_BLOCK, signals)
    try:
        yield blocked
    finally:
        # Unblocked already once the loop's handlers were in (see interruptible);
        # this covers a failure before that. A signal still pending arrives
        # here, as KeyboardInterrupt (or the caller's SIGTERM handler).
        _unblock(blocked)


def _unblock(signals: Collection[int]) -> None:
    if _SIGMASK is not None and signals:
        _SIGMASK(signal.SIG_UNBLOCK, signals)
