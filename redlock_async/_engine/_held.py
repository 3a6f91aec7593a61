"""The nodes a view keeps out while grants they may have lost can be valid."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

__all__ = ["SUSPECT", "Held"]

_log = logging.getLogger("redlock_async.node")

# Logged once a census finds the grants a node may have lost (``_epochs.py``),
# whether its watch refuses its yes votes or a view keeps it out (``Held``).
SUSPECT = (
    "redlock_async: %s lost its data while grants it may have held can still be valid; "
    "its votes do not count for %.1fs, until the records of the views naming its old epoch "
    "expire (1.25 x the longest ttl used lately on this prefix: long-ttl locks belong under "
    "a prefix of their own; docs/guarantees.md)"
)


class Held:
    """The nodes kept out of a view (``_epochs.py``; one slot's, ``_slots.py``)
    while grants they may have lost can still be valid, and when each comes in.
    Out of the view, a node answers STALE: none of its votes counts, and
    nothing is written there."""

    __slots__ = ("_admit_now", "_timers", "ends")

    def __init__(self, admit: Callable[[int, bytes], None]) -> None:
        self._admit_now = admit  # puts a node's epoch in the view (Epochs.admit)
        self.ends: dict[int, tuple[bytes, float]] = {}  # index -> (epoch, when it comes in)
        self._timers: dict[int, asyncio.TimerHandle] = {}

    def hold(self, index: int, epoch: bytes, until: float, now: float, name: str) -> None:
        """Node ``index``, of ``epoch``, joins the view at loop time ``until``
        (at once if that has passed; never earlier than a hold already set)."""
        held = self.ends.get(index)
        if held is not None and held[0] == epoch and held[1] >= until:
            return
        if until <= now:
            self._admit_now(index, epoch)
            return
        if held is None:
            _log.warning(SUSPECT, name, until - now)
        self.drop(index)
        self.ends[index] = (epoch, until)
        loop = asyncio.get_running_loop()  # a census's reply: on the quorum's loop
        self._timers[index] = loop.call_at(until, self._admit, index)

    def _admit(self, index: int) -> None:
        self._timers.pop(index, None)
        held = self.ends.pop(index, None)
        if held is not None:
            self._admit_now(index, held[0])

    def drop(self, index: int) -> None:
        self.ends.pop(index, None)
        timer = self._timers.pop(index, None)
        if timer is not None:
            timer.cancel()

    def clear(self, *, cancel: bool = False) -> None:
        """Forget every hold (``cancel``: their timers too; after a move to
        another loop they are the old loop's, and never run)."""
        if cancel:
            for timer in self._timers.values():
                timer.cancel()
        self.ends.clear()
        self._timers.clear()
