"""Entries due at loop times, with one timer for all: the renewal schedule's mechanics.

Entries due at the same time share a bucket (renewals fall due on a grid,
so there are few distinct times); a heap orders the buckets' times, and
one ``TimerHandle`` waits for the earliest. When it fires, the due buckets
are handed out in slices (:meth:`Timetable.take`), so the owner can work
through them a chunk per loop iteration.

Removal is lazy: an entry records the bucket it waits in (``slot``); one
taken out early (a lock released) just clears it and is skipped when its
bucket comes due. So that released entries cannot pile up until then (a
web app releasing thousands of locks a second with a 30 s ttl), they are
swept out once they are most of the timetable.
"""

from __future__ import annotations

import asyncio
import heapq
import math
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

__all__ = ["Entry", "Timetable"]

# Stale entries (taken out early) tolerated before a sweep.
_STALE_SWEEP = 1024


class Entry(Protocol):
    slot: list[Any] | None
    """The bucket it waits in; None when taken out (due, or early)."""


_E = TypeVar("_E", bound=Entry)


class Timetable(Generic[_E]):
    """Entries by due time (loop time); ``on_due()`` is told when some fall due."""

    def __init__(self, on_due: Callable[[], None]) -> None:
        self._on_due = on_due
        self._buckets: dict[float, list[_E]] = {}
        self._dues: list[float] = []  # heap of the buckets' due times
        self._timer: asyncio.TimerHandle | None = None
        self._when = math.inf  # when the timer fires
        self._due: deque[tuple[float, list[_E]]] = deque()  # fallen due, not all taken yet
        self.entries = 0  # in buckets, stale ones included
        self.stale = 0

    def _new_bucket(self, due: float, loop: asyncio.AbstractEventLoop) -> list[_E]:
        """An empty bucket for ``due``, in the heap, the timer armed if it is the soonest."""
        bucket: list[_E] = []
        self._buckets[due] = bucket
        heapq.heappush(self._dues, due)
        if due < self._when:
            self._arm(due, loop)
        return bucket

    @property
    def due(self) -> bool:
        """Entries have fallen due and wait to be taken."""
        return bool(self._due)

    def add(self, entry: _E, due: float, loop: asyncio.AbstractEventLoop) -> None:
        """``entry`` falls due at loop time ``due`` (it is in no bucket now)."""
        bucket = self._buckets.get(due)
        if bucket is None:
            bucket = self._new_bucket(due, loop)
        bucket.append(entry)
        entry.slot = bucket
        self.entries += 1

    def add_all(self, entries: list[_E], due: float, loop: asyncio.AbstractEventLoop) -> None:
        """``add`` for each of ``entries`` (none in a bucket now), all due at ``due``."""
        bucket = self._buckets.get(due)
        if bucket is None:
            bucket = self._new_bucket(due, loop)
        for entry in entries:
            entry.slot = bucket
        bucket += entries
        self.entries += len(entries)

    def discard(self, entry: _E) -> None:
        """Take ``entry`` out before it falls due."""
        if entry.slot is None:
            return
        entry.slot = None
        self.stale += 1
        if self.stale > _STALE_SWEEP and 2 * self.stale > self.entries:
            self._sweep()

    def take(self, limit: int) -> list[tuple[float, list[_E]]]:
        """Up to ``limit`` entries fallen due, each slice with its due time; their slots cleared."""
        slices: list[tuple[float, list[_E]]] = []
        queue = self._due
        while queue and limit > 0:
            due, bucket = queue[0]
            cut = max(0, len(bucket) - limit)
            taken = bucket[cut:]
            del bucket[cut:]
            if not bucket:
                queue.popleft()
            live: list[_E] = []
            for entry in taken:
                # Not when it left this bucket (taken out, maybe added again -
                # even to this same bucket, hence the slot is cleared at once).
                if entry.slot is bucket:
                    entry.slot = None
                    live.append(entry)
            self.entries -= len(taken)
            self.stale -= len(taken) - len(live)
            limit -= len(live)
            slices.append((due, live))
        return slices

    def _arm(self, due: float, loop: asyncio.AbstractEventLoop) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_at(due, self._fire, loop)
        self._when = due

    def _fire(self, loop: asyncio.AbstractEventLoop) -> None:
        # A timer may run a hair before its time (the loop's clock resolution).
        now = max(loop.time(), self._when)
        self._timer = None
        self._when = math.inf
        dues, buckets = self._dues, self._buckets
        while dues and dues[0] <= now:
            due = heapq.heappop(dues)
            self._due.append((due, buckets.pop(due)))
        if dues:
            self._arm(dues[0], loop)
        self._on_due()

    def _sweep(self) -> None:
        buckets = self._buckets
        for due, bucket in list(buckets.items()):
            _keep_live(bucket)
            if not bucket:
                del buckets[due]
        for _, bucket in self._due:
            _keep_live(bucket)
        self._dues = list(buckets)
        heapq.heapify(self._dues)
        self.entries = sum(map(len, buckets.values())) + sum(len(b) for _, b in self._due)
        self.stale = 0

    def close(self) -> None:
        """Empty, and the timer cancelled."""
        if self._timer is not None:
            self._timer.cancel()
        self.forget()

    def forget(self) -> None:
        """Empty, the timer dropped untouched: it is another loop's (or the parent's)."""
        self._timer = None
        self._when = math.inf
        self._buckets = {}
        self._dues = []
        self._due = deque()
        self.entries = self.stale = 0


def _keep_live(bucket: list[_E]) -> None:
    # Once each: an entry taken out and added again to the same bucket is in it twice.
    bucket[:] = dict.fromkeys(entry for entry in bucket if entry.slot is bucket)
