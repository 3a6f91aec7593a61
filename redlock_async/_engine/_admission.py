"""Admission control: how many acquire attempts may be on the wire at once.

A burst of acquires larger than the nodes can answer in ``node_timeout`` used
to fail as a whole: every attempt went out at once, the nodes' queues (and the
client's) grew, votes came late, failed attempts sent undo commands and
retried, adding more work. Bounding the attempts in flight keeps the queue on
the client, where waiting costs nothing but time: a burst of N attempts then
takes about N / throughput seconds, and every healthy node's vote counts.

Only ``acquire()`` attempts are admitted. Releases, undos and renewals never
wait behind new attempts: they free capacity or keep grants alive (releases
and undos have a bound of their own, ``_cleanups.py``; renewals go out at once).

Waiting in line must not break a caller's own bound, whatever other locks of
the process are doing (1,024 attempts each waiting ``node_timeout`` for a dead
node's tie-breaking vote filled every slot for that long):

- a wait has a deadline (the caller's ``timeout``): at it, the caller leaves
  the line without a slot and gives up, saying why;
- one-shot attempts (``blocking=False``, ``timeout=0``) get a reserve of
  slots (a quarter more) that blocking attempts never take, and a line of
  their own, served first: a one-shot never waits behind blocking attempts,
  only behind more one-shots than the reserve holds - a burst of its own
  kind, which still queues here rather than flooding the nodes.
"""

from __future__ import annotations

import asyncio

__all__ = ["LIMIT", "Admission"]

LIMIT = 1024
"""Attempts in flight at once, per Redlock. A pipeline of this many tiny scripts
takes a Redis node a few milliseconds; far fewer would not keep five nodes
busy (see benchmarks/burst.py)."""

RESERVE = 4
"""One-shot attempts may exceed the limit by ``limit // RESERVE``: a quarter
more on the wire costs a healthy node a millisecond or so, and lets a
one-shot go out while blocking attempts hold every slot."""


class Admission:
    """Slots for attempts in flight; callers beyond ``limit`` wait in arrival order.

    The fast path is the caller's: ``if admission.free > 0: admission.free -= 1``
    else ``await admission.wait(timeout, oneshot=...)`` (False: no slot before
    the timeout); with a slot, ``admission.leave()`` once the attempt is decided.
    ``free`` goes below zero while one-shots use the reserve.
    """

    __slots__ = ("_oneshots", "_queue", "free", "limit", "reserve")

    def __init__(self, limit: int = LIMIT) -> None:
        self.free = limit
        self.limit = limit
        self.reserve = limit // RESERVE
        # Waiters in arrival order; a dict, so one that leaves does so in O(1).
        self._queue: dict[asyncio.Future[bool], None] = {}
        self._oneshots: dict[asyncio.Future[bool], None] = {}  # served before _queue

    @property
    def waiting(self) -> int:
        return len(self._queue) + len(self._oneshots)

    async def wait(self, timeout: float | None = None, *, oneshot: bool = False) -> bool:
        """Wait for a slot (the caller found none free) at most ``timeout`` seconds
        (None: for ever). True: the slot is the caller's; False: none came in time."""
        oneshots = self._oneshots
        if oneshot and self.free > -self.reserve and not oneshots:
            self.free -= 1  # the reserve: blocking attempts hold every other slot
            return True
        if timeout is not None and timeout <= 0:
            return False  # not a moment to wait: refused at once
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        queue = oneshots if oneshot else self._queue
        queue[future] = None
        timer = None if timeout is None else loop.call_later(timeout, _give_up, future)
        try:
            return await future
        except asyncio.CancelledError:
            if future in queue:
                del queue[future]  # still waiting: nothing to give back
            elif not future.cancelled() and future.result():
                self.leave()  # handed a slot, then cancelled before using it: pass it on
            raise
        finally:
            if timer is not None:
                timer.cancel()
            queue.pop(future, None)  # gave up at the deadline: out of the line

    def leave(self) -> None:
        """An attempt is decided: its slot goes to the longest waiter, or back to the pool.

        One-shots waiting means the reserve is in use (``free`` is at its
        floor): the slot is theirs. Otherwise a slot freed while ``free`` is
        below zero repays the reserve before a blocking waiter may have it.
        """
        if self._oneshots and _hand_over(self._oneshots):
            return
        if self.free >= 0 and self._queue and _hand_over(self._queue):
            return
        self.free += 1


def _hand_over(queue: dict[asyncio.Future[bool], None]) -> bool:
    """Give the slot to the longest waiter of ``queue`` still waiting (False: none is)."""
    while queue:
        future = next(iter(queue))
        del queue[future]
        if not future.done():
            future.set_result(True)
            return True
    return False


def _give_up(future: asyncio.Future[bool]) -> None:
    if not future.done():
        future.set_result(False)
