"""Ending a command on Ctrl-C (or SIGTERM) the way a shell tool should: its cleanup runs, then
exit 128 + N, without a traceback."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from ._output import error

__all__ = ["interruptible", "say_interrupted"]


def say_interrupted(signum: int) -> int:
    """Say on stderr that signal ``signum`` ended the command; its exit code (128 + N)."""
    error("interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}")
    return 128 + signum


async def interruptible(
    command: Coroutine[Any, Any, int],
    *,
    signals: Sequence[int] = (signal.SIGINT,),
    on_signal: Callable[[], None] | None = None,
) -> int:
    """Run ``command``; any of ``signals`` cancels it, calls ``on_signal`` first; the exit code.

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
