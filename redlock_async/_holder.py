"""How the holder of a lock is told of a loss: the loss record and the body's cancellation."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from ._errors import LockLost

_log = logging.getLogger("redlock_async")

__all__ = ["Body", "Loss"]


class Loss:
    """Whether a lock's grant was lost, why, and the event that tells waiters."""

    __slots__ = ("_event", "error")

    def __init__(self) -> None:
        self.error: LockLost | None = None
        self._event: asyncio.Event | None = None  # made on first use: most locks never need it

    @property
    def lost(self) -> bool:
        return self.error is not None

    def event(self) -> asyncio.Event:
        if self._event is None:
            self._event = asyncio.Event()
            if self.error is not None:
                self._event.set()
        return self._event

    def mark(self, error: LockLost) -> None:
        self.error = error
        if self._event is not None:
            self._event.set()

    def tell(self, error: LockLost, on_lost: Callable[..., object] | None, lock: object) -> None:
        """A held grant was lost: record it, log it, set the event, call ``on_lost(lock)``."""
        self.mark(error)
        _log.warning("redlock_async: %s", error)
        if on_lost is not None:
            try:
                on_lost(lock)
            except Exception:
                _log.exception("redlock_async: on_lost callback of %r failed", lock)

    def clear(self) -> None:
        """A new grant: the old loss is history."""
        self.error = None
        if self._event is not None:
            self._event.clear()


class Body:
    """Which task runs a lock's ``async with`` body; cancels it when the lock is lost."""

    __slots__ = ("_cancelled", "_task")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._task = asyncio.current_task(loop)  # entering `async with`: the body's task
        self._cancelled = False  # a cancel request of ours is pending

    def cancel(self, reason: str, loop: asyncio.AbstractEventLoop) -> None:
        """Cancel the body, unless it is the caller (its extend() raises LockLost already)."""
        task = self._task
        if task is not None and not task.done() and task is not asyncio.current_task(loop):
            self._cancelled = True
            task.cancel(reason)

    def exited(self) -> bool:
        """The body ended; True when a cancellation from outside is in flight.

        Our own cancel request is undone; if it was the only one, the
        CancelledError in flight is ours, and the lock turns it into LockLost.
        """
        task = self._task
        if not self._cancelled:
            return False
        self._cancelled = False
        return task is not None and task.uncancel() > 0
