"""The waiters of one process for one lock: a line, and each waiter's place in it.

Pure logic over asyncio events, no I/O: the hub (``_wake.py``) makes the
lines, tells them of releases, and is told when a waiter leaves. A line is
one *lock*, as its :class:`Waiting` names it: waiters for different locks
never share one, so none is ever held back by a waiter for another lock
(two multilocks sharing a name, a plain lock and a multilock of its name).
Only the *active* waiters - the first, or the leading run of shared ones
(readers) behind a shared first - make attempts; the *passive* ones behind
wait, without attempts, until promoted:

- an active waiter that leaves without a grant (timeout, cancelled, failed)
  may have taken a wake-up with it: the next is promoted and woken at once;
- one that leaves with a grant: the next is promoted and polls at its retry
  delay, woken early by that grant's release - unless the grant may have
  left room (a semaphore's other slots): then the next is woken at once;
- a passive waiter leaving from right behind a run of readers lets the
  readers behind it join the run (woken: they never got its wake-ups).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

__all__ = ["Line", "Owner", "Subscription", "Waiting"]


@dataclass(frozen=True, slots=True)
class Waiting:
    """Where the waiters of one lock line up in a process, and how they take turns.

    Made by the lock's commands (``Commands.waiting``), only once a waiter
    waits: a grant at the first attempt pays nothing.
    """

    line: bytes
    """The lock's identity: waiters with equal ``line`` and first channel
    wait for the same lock and take turns in one line; no two locks share it."""
    channels: tuple[bytes, ...]
    """Where its releases are announced (a multilock: each of its names'
    channels, the first name's first); a message on any wakes its active waiters."""
    shared: bool = False
    """A reader: it wins together with the readers next to it."""
    room: bool = False
    """A grant may leave room for the next waiter (a semaphore's other slots)."""


class Owner(Protocol):
    """What a waiter asks of the hub that made it."""

    def listening(self, *channels: bytes) -> bool:
        """Whether some node will announce a release on one of ``channels`` (or soon will)."""
        ...

    def leave(self, subscription: Subscription, granted: bool) -> None:
        """``subscription`` leaves its line (with a grant or without)."""
        ...


class Subscription:
    """One waiter's place in its line; ``wait()`` returns early when it should attempt."""

    __slots__ = (
        "_owner",
        "active",
        "armed",
        "caller",
        "channels",
        "event",
        "hint",
        "line",
        "next",
        "prev",
        "room",
        "shared",
        "woken",
    )

    def __init__(self, owner: Owner, waiting: Waiting) -> None:
        self._owner = owner
        self.channels = waiting.channels
        self.shared = waiting.shared  # a reader: wins together with the readers next to it
        self.room = waiting.room  # its grant may leave room for the next (a semaphore)
        self.active = False  # makes attempts (it can win now); else waits to be promoted
        self.event = asyncio.Event()  # set to end a wait: woken, promoted or closing
        self.woken = False  # why the event is set: True = attempt now
        self.hint: bytes | None = None  # the token whose release woke it last
        self.armed = False  # it attempted since: an echo of ``hint`` wakes it again
        self.prev: Subscription | None = None
        self.next: Subscription | None = None
        self.line: Line | None = None
        # Its acquire() call, once an attempt failed (its Failures): undos of
        # that call's own attempts never wake it (WakeHub.undone).
        self.caller: object | None = None

    def wake(self, hint: bytes | None = None) -> None:
        """Attempt now (a release was announced, the waiter ahead gave up, closing)."""
        self.woken = True
        self.hint = hint
        self.armed = False
        self.event.set()

    async def wait(self, delay: float, idle: float | None = None) -> bool:
        """Wait before the next attempt; True when woken, False when the time passed.

        An active waiter waits up to ``delay`` (its retry delay); so does every
        waiter while no node listens on the channel. A passive one waits until
        promoted, or at most ``idle`` seconds (None: no limit); promoted after
        a grant, it then waits like an active one, within ``idle``.
        """
        now = asyncio.get_running_loop().time()
        if not self.active:
            end = None if idle is None else now + idle
            owner, channels = self._owner, self.channels
            while not (self.active or self.woken) and owner.listening(*channels):
                if self.line is not None:
                    self.line.sleeping = True  # to be roused should nobody listen any more
                if not await self._until(end):
                    return False  # idle passed: the caller's deadline, or a fair heartbeat
            if self._take():
                return True
            # Promoted because the waiter ahead won (its release will wake
            # this one), or no node listens any more: it polls meanwhile.
            now = asyncio.get_running_loop().time()
            if end is not None:
                delay = min(delay, end - now)
        end = now + delay
        while not self.woken:
            if not await self._until(end):
                break
        return self._take()

    async def _until(self, end: float | None) -> bool:
        """Wait for the event until loop time ``end``; False once that has passed."""
        event = self.event
        if not event.is_set():
            if end is None:
                await event.wait()
            else:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout_at(end):
                        await event.wait()
        fired = event.is_set()
        event.clear()
        return fired

    def _take(self) -> bool:
        woken = self.woken
        if woken:
            self.woken = False
            self.armed = True  # its attempt starts now
        return woken

    def close(self, granted: bool = False) -> None:
        """Leave the line; ``granted``: with a grant (the next waits for its release)."""
        self._owner.leave(self, granted)


class Line:
    """The waiters of one process for one lock, in arrival order: a linked list.

    The active waiters are a prefix: the head, and the readers right behind a
    reader head. ``boundary`` is the first passive waiter (None: all active).
    Every operation is O(1), promotions amortised: each waiter is promoted once.
    """

    __slots__ = ("active", "boundary", "channels", "head", "key", "sleeping", "tail")

    def __init__(self, key: bytes, channels: tuple[bytes, ...]) -> None:
        self.key = key
        self.channels = channels  # the hub lists the line under each of them
        self.head: Subscription | None = None
        self.tail: Subscription | None = None
        self.boundary: Subscription | None = None
        self.active = 0
        # Some passive waiter waits for its turn (not polling): see rouse().
        self.sleeping = False

    def join(self, sub: Subscription) -> None:
        tail = self.tail
        sub.prev, sub.next, sub.line = tail, None, self
        if tail is None:
            self.head = sub
        else:
            tail.next = sub
        self.tail = sub
        head = self.head
        assert head is not None
        if self.boundary is None and (head is sub or (head.shared and sub.shared)):
            sub.active = True  # it can win with those ahead of it: it attempts
            self.active += 1
        elif self.boundary is None:
            self.boundary = sub

    def leave(self, sub: Subscription, granted: bool) -> None:
        prev, after = sub.prev, sub.next
        if prev is None:
            self.head = after
        else:
            prev.next = after
        if after is None:
            self.tail = prev
        else:
            after.prev = prev
        sub.prev = sub.next = sub.line = None
        if sub is self.boundary:
            self.boundary = after
        if sub.active:
            sub.active = False
            self.active -= 1
            if self.active == 0:
                if not granted:
                    # The next may have missed the wake-up this one took with it.
                    self.promote(sub.hint, True)
                else:
                    # This one won: the next waits for that grant's release,
                    # unless the grant may have left room (a semaphore's
                    # other slots, freed together): then it tries them now.
                    # One attempt at a time still: no herd when none is left.
                    self.promote(None, sub.room)
        else:
            # A passive waiter gone from right behind a run of readers lets
            # the readers behind it join the run; they never got its wake-ups.
            self.promote(sub.hint, True)

    def promote(self, hint: bytes | None, wake: bool) -> None:
        """Activate whoever can now win: the head, and readers behind a reader head."""
        while (sub := self.boundary) is not None:
            head = self.head
            if self.active and not (head is not None and head.shared and sub.shared):
                return
            sub.active = True
            self.active += 1
            self.boundary = sub.next
            if wake:
                sub.wake(hint)  # hint: an echo of that release wakes it again once it tried
            else:
                sub.event.set()  # not woken: it starts polling, and waits for the release

    def actives(self) -> Iterator[Subscription]:
        sub = self.head
        while sub is not None and sub.active:
            yield sub
            sub = sub.next

    def rouse(self) -> None:
        """Nobody listens on the channel any more: the passive waiters poll instead.

        Only if one of them began waiting since the last time: a channel that
        keeps failing (every new waiter's subscription refused) costs nothing
        more once they all poll.
        """
        if self.sleeping:
            self.sleeping = False
            for sub in self.passive():
                sub.event.set()  # it sees nobody listens, and polls

    def passive(self) -> Iterator[Subscription]:
        sub = self.boundary
        while sub is not None:
            yield sub
            sub = sub.next

    def __iter__(self) -> Iterator[Subscription]:
        sub = self.head
        while sub is not None:
            yield sub
            sub = sub.next
