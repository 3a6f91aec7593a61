"""Admission control: how many acquire attempts may be on the wire at once.

A burst of acquires larger than the nodes can answer in ``node_timeout`` used
to fail as a whole: every attempt went out at once, the nodes' queues (and the
client's) grew, votes came late, failed attempts sent undo commands and
retried, adding more work. Bounding the attempts in flight keeps the queue on
the client, where waiting costs nothing but time: a burst of N attempts then
takes about N / throughput seconds, and every healthy node's vote counts.

Only ``acquire()`` attempts are admitted. Releases, undos and renewals go out
at once: they free capacity or keep grants alive, and must not wait behind new
attempts.
"""

from __future__ import annotations

import asyncio

__all__ = ["LIMIT", "Admission"]

LIMIT = 1024
"""Attempts in flight at once, per Redlock. A pipeline of this many tiny scripts
takes a Redis node a few milliseconds; far fewer would not keep five nodes
busy (see benchmarks/burst.py)."""


class Admission:
    """Slots for attempts in flight; callers beyond ``limit`` wait in arrival order.

    The fast path is the caller's: ``if admission.free > 0: admission.free -= 1``
    else ``await admission.wait()``; either way ``admission.leave()`` once the
    attempt is decided.
    """

    __slots__ = ("_queue", "free")

    def __init__(self, limit: int = LIMIT) -> None:
        self.free = limit
        # Waiters in arrival order; a dict, so a cancelled one leaves in O(1).
        self._queue: dict[asyncio.Future[None], None] = {}

    @property
    def waiting(self) -> int:
        return len(self._queue)

    async def wait(self) -> None:
        """Wait for a slot (the caller found none free); on return it is the caller's."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue[future] = None
        try:
            await future
        except asyncio.CancelledError:
            if future in self._queue:
                del self._queue[future]  # still waiting: nothing to give back
            elif not future.cancelled():
                self.leave()  # handed a slot, then cancelled before using it: pass it on
            raise

    def leave(self) -> None:
        """An attempt is decided: its slot goes to the longest waiter, or back to the pool."""
        queue = self._queue
        while queue:
            future = next(iter(queue))
            del queue[future]
            if not future.done():
                future.set_result(None)
                return
        self.free += 1
