"""How the holder of a lock is told of a loss: the loss record and the body's cancellation."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Final, NamedTuple

from .._base._errors import LockLost
from .._engine import Command, Engine, Settled, Tally

_log = logging.getLogger("redlock_async.lock")

__all__ = ["NO_LOSS", "Body", "Cleanup", "Loss"]


class Loss:
    """Whether a lock's grant was lost, why, and the event that tells waiters.

    A lock starts with :data:`NO_LOSS`, shared, and makes its own record only
    when one is needed (a loss, or ``lost_event`` asked for): most locks are
    never lost, and a record each was 48 bytes a held lock.
    """

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
        self.mark(error)  # logged by the lock (_observed.lost), rate-limited
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


NO_LOSS: Final = Loss()
"""Every lock's record until it needs its own (see ``Loss``): never marked nor
cleared, and its event never made."""


class Cleanup(NamedTuple):
    """The release of a lost grant, ordered after its acquire, resent until ``until``."""

    after: Tally | Settled
    release: Command
    until: float


class Body:
    """Which task runs a lock's ``async with`` body; stops it when the lock is lost.

    A lost grant's keys are not released while the body may still be working
    on what the lock protects: the next holder would get in at once, while
    a write of this body may still be on its way. The release waits until
    the body has stopped (``exited``), or until ``aclose()`` gives up waiting
    (``flush``); the keys expire with the ttl in any case.
    """

    __slots__ = ("_cancelled", "_task", "pending")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._task = asyncio.current_task(loop)  # entering `async with`: the body's task
        self._cancelled = False  # a cancel request of ours is pending
        self.pending: Cleanup | None = None  # the release held back until the body stops

    def stop(
        self,
        cleanup: Cleanup | None,
        cancel: bool,
        error: LockLost,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        """The lock is lost (``error``): hold ``cleanup`` back (None: nothing to
        release); ``cancel``: cancel the body.

        Not when the body is the caller: its extend() raises LockLost already.
        """
        self.pending = cleanup
        task = self._task
        if not cancel or task is None or task.done():
            return
        if task is not asyncio.current_task(loop):
            self._cancelled = True
            task.cancel(f"redlock_async: {error}")

    def flush(self, engine: Engine) -> None:
        """Send the held-back release now."""
        cleanup, self.pending = self.pending, None
        if cleanup is not None:
            engine.undo(*cleanup)

    def exited(self, engine: Engine) -> bool:
        """The body ended; True when a cancellation from outside is in flight.

        The held-back release goes out now. Our own cancel request is undone;
        if it was the only one, the CancelledError in flight is ours, and the
        lock turns it into LockLost.
        """
        self.flush(engine)
        task = self._task
        if not self._cancelled:
            return False
        self._cancelled = False
        return task is not None and task.uncancel() > 0
