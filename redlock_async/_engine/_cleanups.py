"""Releases and undos: at most ``LIMIT`` on the wire at once, the rest queued here.

Releases are not admitted like acquire attempts (``_admission.py``): they
free capacity and must not wait behind new attempts. But their number has no
bound but what the process holds: 100,000 locks released in one
``asyncio.gather`` were 100,000 commands per node at once. Sent all at once,
the last of them waited seconds behind the client's own queue - past the
longest a vote may stay pending (``vote_limit``: a node answering a backlog
keeps its vote at most a stall limit past the deadline) - so a release a
healthy node had queued was reported "not confirmed" and returned before
it landed: its key still there when the caller looked.

So cleanups beyond ``LIMIT`` in flight wait here, in order, and are sent as
earlier ones are decided: each is timed from its own send, as the votes of
an admitted attempt are, and a healthy node never holds more than a few
milliseconds of our cleanups. The queue belongs to the engine, not to the
caller: a release whose caller is cancelled while it waits still goes out
(``release()`` is cancellation-safe), and so does every undo, which nobody
awaits. ``aclose()`` waits for the queue to empty (``_drain.py``) while the
nodes answer; what is still queued when the engine closes goes out then.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable

from ._admission import LIMIT
from ._node import Command
from ._quorum import Quorum
from ._settled import Settled
from ._tally import Tally

__all__ = ["Cleanups"]

_Queued = tuple[Tally, Command, Tally | Settled | None, Iterable[int] | None]


class Cleanups:
    """Slots for cleanups in flight; beyond ``limit``, cleanups wait in arrival order."""

    __slots__ = ("_landed", "free", "limit", "queue", "quorum")

    def __init__(self, quorum: Quorum, limit: int = LIMIT) -> None:
        self.quorum = quorum
        self.limit = self.free = limit
        self.queue: deque[_Queued] = deque()
        self._landed = self._land  # one bound method for every tally's callback

    def send(
        self,
        command: Command,
        *,
        after: Tally | Settled | None = None,
        only: Iterable[int] | None = None,
    ) -> Tally:
        """Fan ``command`` out now if a slot is free, else queue it; its tally either way.

        A queued tally is decided like any other once it is sent; until then
        its votes are all pending, and no deadline runs.
        """
        if self.free > 0 and not self.queue:
            tally = self.quorum.fanout(command, after=after, only=only)
            self.free -= 1  # after: a fan-out on a new loop resets the slots first
            tally.decided.add_done_callback(self._landed)
            return tally
        tally = self.quorum.hold(command)
        self.queue.append((tally, command, after, only))
        return tally

    def _land(self, _: asyncio.Future[bool]) -> None:
        """A cleanup was decided (or its caller stopped waiting): the next goes out."""
        self.free += 1
        queue = self.queue
        fanout = self.quorum.fanout
        while self.free > 0 and queue and not self.quorum.closed:
            tally, command, after, only = queue.popleft()
            self.free -= 1
            fanout(command, after=after, only=only, tally=tally)
            tally.decided.add_done_callback(self._landed)

    def reset(self) -> None:
        """The fan-outs moved to another loop or a forked child: what was in
        flight or queued there is gone with it (see ``Engine._rehome``)."""
        self.queue = deque()
        self.free = self.limit

    def flush(self) -> None:
        """The engine is closing: everything still queued goes out now, past the
        bound (kept for an engine that stays open). The nodes' close then lets
        it land while they answer, as it does what was already in flight;
        failing it instead left the keys of a slow node's undos for a ttl."""
        queue, self.queue = self.queue, deque()
        fanout = self.quorum.fanout
        for tally, command, after, only in queue:
            fanout(command, after=after, only=only, tally=tally)
