"""Fan-out: one command to every node at once, decided by a :class:`Tally`.

:meth:`Quorum.fanout` sends a command to all nodes and returns a tally at
once; one slow node cannot cancel or delay the others' votes. The quorum
keeps the deadlines of its fan-outs (one timer for all of them) and looks
again at votes still pending on nodes that were busy, not silent
(``Tally.expire``), binds to the running event loop (and notices a move to
another loop or a fork), and resends cleanups whose connection failed
(``_resend.py``).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any, Protocol

from .._base._errors import NodeError, RedlockError
from .._base._world import current
from ._node import Command, Node, Reply
from ._resend import resend
from ._settled import Settled
from ._tally import PENDING, SKIPPED, Tally, quorum_of

# Sends one command to every node of a quorum; the sink is the fan-out's tally.
RunAll = Callable[[Sequence[Any], Command, Tally], None]

__all__ = ["Quorum"]


class Stale(Protocol):
    """Who hears of a STALE answer (``_epochs.Epochs``)."""

    def stale(self, index: int, keys: Sequence[bytes]) -> NodeError: ...


class Quorum:
    """The nodes of one Redlock, and the deadlines of their fan-outs.

    Every fan-out gets the same ``node_timeout``, so deadlines come due in the
    order fan-outs started: one FIFO and one timer serve them all, instead of
    a timer per fan-out (which costs heap work on the hot path).
    """

    def __init__(self, nodes: Sequence[Node], node_timeout: float) -> None:
        self.nodes = tuple(nodes)
        self.clock = current().monotonic  # resend deadlines' (an Engine sets its own clock)
        self.n = len(self.nodes)
        self.need = quorum_of(self.n)
        self.node_timeout = node_timeout
        self.on_error: Callable[[int, NodeError], None] | None = None  # see Group.on_error
        # The key of the record of the nodes' epochs as the last census read
        # them (lua/_epoch.lua), appended to every command whose script takes
        # it (granting and renewing ones), and who reads them again when a
        # node answers STALE (both set by the engine's Epochs).
        self.view = b","
        # Beside a Redis Cluster, the view of a command's keys' slot (_slots.py).
        self.view_of: Callable[[Sequence[bytes]], bytes] | None = None
        self.epochs: Stale | None = None
        watches = tuple(node.restarts for node in self.nodes)
        self.watches = None if all(w is None for w in watches) else watches
        for index, node in enumerate(self.nodes):
            node.bind(index)
        # One call that sends to every node: a driver may offer it (run_all)
        # to save a call per node on the hot path; otherwise, node by node.
        kinds = {type(node) for node in self.nodes}
        run_all: RunAll | None = getattr(kinds.pop(), "run_all", None) if len(kinds) == 1 else None
        self._run_all: RunAll = run_all or _run_each
        # Nodes that run commands in the order sent need no chaining behind
        # an earlier fan-out: a release can go out at once, on the hot path.
        self._ordered = all(node.ordered for node in self.nodes)
        # Tallies with replies missing, in deadline order (all deadlines are
        # start + node_timeout); a tally removes itself once complete.
        self._due: dict[Tally, None] = {}
        # Tallies past that deadline whose missing nodes were busy, not
        # silent: looked at again when each could have been silent long
        # enough (heap of (when, sequence, tally); rare, so a heap is fine).
        self._again: list[tuple[float, int, Tally]] = []
        self._sequence = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        # When the sweep timer was meant to run, and how many times in a row
        # the sweep found the loop late and looked again (see _sweep).
        self._timer_at = 0.0
        self._looks = 0
        # The running loop, remembered: asyncio.get_running_loop() makes a
        # getpid() syscall, which cost ~2% of a grant at 50 tasks. Only
        # asyncio's own loops are remembered (see fanout); after a fork the
        # child forgets it.
        self._loop: asyncio.BaseEventLoop | None = None
        # Its clock and futures: asyncio's default loops read time.monotonic and make
        # plain Futures, done here directly to save a Python frame per fan-out.
        self._now: Callable[[], float] = time.monotonic
        self._new_future: Callable[[], asyncio.Future[bool]] = _no_loop
        # The loop the nodes' connections live on, and the process: a fan-out
        # from another loop or a forked child must not touch them (see _bind_loop).
        self._home: asyncio.AbstractEventLoop | None = None
        self._home_pid = 0
        # Told when the quorum moves to a new home: the owner forgets
        # connections and grants of the old one (Core.rehome).
        self.on_rehome: Callable[[], None] = _nothing
        self.closed = False
        # Pending resends of cleanups (see _Resend): cancelled on close.
        self.resends: set[asyncio.TimerHandle] = set()
        _quorums.add(self)

    def fanout(
        self,
        command: Command,
        *,
        after: Tally | Settled | None = None,
        only: Iterable[int] | None = None,
        tally: Tally | None = None,
    ) -> Tally:
        """Send ``command`` to every node (or those in ``only``) at once.

        With ``after``, a node whose reply to that earlier fan-out is still
        pending gets this command only once it has answered - unless the node
        runs commands in order anyway and that fan-out was sent (not a cleanup
        still queued, :meth:`hold`). That keeps a release from overtaking the
        acquire it undoes, and an attempt from overtaking the undo of the same
        caller's last one. ``tally``: one made by :meth:`hold`, sent now.
        """
        # running_loop(), inlined. A BaseEventLoop whose _thread_id is this
        # thread's is running here, and only one loop can run in a thread at
        # a time: it is the running loop.
        loop: asyncio.AbstractEventLoop | None = self._loop
        if loop is None or loop._thread_id != _get_ident():  # type: ignore[attr-defined]
            loop = self._bind_loop()
        if command.view:
            command.view = False  # once: a command is sent to every node at most once
            view_of = self.view_of
            view = self.view if view_of is None else view_of(command.keys)
            command.args = (*command.args, view)
        if tally is None:
            tally = Tally(self, command, self._new_future(), self._now() + self.node_timeout)
        else:  # held back until now (_cleanups.py): its votes are timed from this send
            tally.deadline = self._now() + self.node_timeout
        if after is not None:
            tally.after = after  # before any send: a node may fail the command at once
        if only is None and (
            after is None or not after.missing or (self._ordered and not _held(after))
        ):
            self._run_all(self.nodes, command, tally)  # the hot path: every node, now
        else:
            _run_after(self.nodes, command, tally, after, only)
        if tally.missing:
            due = tally.due = self._due
            due[tally] = None
            if self._timer is None:
                self._timer_at = tally.deadline
                self._timer = loop.call_at(tally.deadline, self._sweep)
        return tally

    def hold(self, command: Command) -> Tally:
        """A tally for ``command``, not sent yet: :meth:`fanout` sends it later."""
        self.running_loop()  # binds the loop: the tally's future is made on it
        return Tally(self, command, self._new_future(), _HELD)

    def running_loop(self) -> asyncio.AbstractEventLoop:
        """The running event loop, as ``asyncio.get_running_loop()``, minus its syscall."""
        loop = self._loop
        if loop is None or loop._thread_id != _get_ident():  # type: ignore[attr-defined]
            return self._bind_loop()
        return loop

    def _bind_loop(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        if loop is not self._home:
            self._move_home(loop)
        if isinstance(loop, asyncio.BaseEventLoop) and hasattr(loop, "_thread_id"):
            self._loop = loop
        else:
            self._loop = None  # other loops (uvloop...) are asked every time
        default = type(loop).time is asyncio.BaseEventLoop.time
        self._now = time.monotonic if default else loop.time
        if type(loop).create_future is asyncio.BaseEventLoop.create_future:
            self._new_future = partial(asyncio.Future, loop=loop)
        else:
            self._new_future = loop.create_future
        return loop

    def _move_home(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start using ``loop``: connections, timers and grants live on one loop.

        After a fork, or once the old loop has stopped (a second
        ``asyncio.run()``), everything made on the old loop is forgotten -
        never touched: in a forked child, the old loop's selector is shared
        with the parent. While the old loop still runs (another thread), the
        call fails at once: nothing made on one loop may be used from another.
        """
        home = self._home
        pid = os.getpid()
        if home is not None:
            if pid == self._home_pid and home.is_running():
                raise RedlockError(
                    "this Redlock is in use on another event loop, which is still running "
                    "(another thread?); create one Redlock per event loop, or use "
                    "redlock_async.sync from threads"
                )
            self._loop = None
            self._timer = None  # a handle of the old loop: dropped, not cancelled
            self.resends = set()
            self._due = {}
            self._again = []
            self.on_rehome()
        self._home = loop
        self._home_pid = pid

    def pending_on(self, index: int) -> list[Tally]:
        """The fan-outs whose reply from node ``index`` is still to come."""
        tallies = (*self._due, *(again[2] for again in self._again))
        return [tally for tally in tallies if tally.replies[index] is PENDING]

    def idle(self) -> bool:
        """No fan-out has replies missing from a node still answering (``_drain.py``)."""
        return not self._due and not any(tally.missing for _, _, tally in self._again)

    def progress(self) -> tuple[int, int]:
        """Changes whenever a fan-out completes or its silent votes expire."""
        return len(self._due), len(self._again)

    def _sweep(self) -> None:
        self._timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        if now - self._timer_at > _LATE and self._looks < _MAX_LOOKS:
            # The loop ran this timer late: it was busy or blocked, and
            # replies may be sitting unread in the sockets - or were read
            # a while ago, before a long stretch of work (settling 100,000
            # replies of a burst), so a node's last answer looks old though
            # nobody polled since. uvloop runs due timers before it polls
            # for I/O. So look again after a poll (a timer a millisecond
            # away runs after the next poll on every loop), until a sweep
            # runs on time, or a few times at most: a loop busy for good
            # must still time out the nodes that are silent.
            self._looks += 1
            self._timer_at = now + _SECOND_LOOK
            self._timer = loop.call_at(self._timer_at, self._sweep)
            return
        self._looks = 0
        due = self._due
        again = self._again
        expired: list[Tally] = []
        for tally in due:
            if tally.deadline > now:
                break
            expired.append(tally)
        for tally in expired:
            del due[tally]
            tally.due = None
            when = tally.expire(now)
            if when is not None:
                heapq.heappush(again, (when, next(self._sequence), tally))
        while again and again[0][0] <= now:
            _, _, tally = heapq.heappop(again)
            when = tally.expire(now)
            if when is not None:
                heapq.heappush(again, (when, next(self._sequence), tally))
        nxt: float | None = next(iter(due)).deadline if due else None
        if again and (nxt is None or again[0][0] < nxt):
            nxt = again[0][0]
        if nxt is not None:
            self._timer_at = nxt
            self._timer = loop.call_at(nxt, self._sweep)

    def resend(self, tally: Tally, index: int, reply: NodeError) -> None:
        resend(self, tally, index, reply)

    def stale(self, index: int, keys: Sequence[bytes] = ()) -> NodeError:
        if self.epochs is None:  # no engine over this quorum (unit tests)
            return NodeError(f"{self.nodes[index].name}: lost its data (STALE)")
        return self.epochs.stale(index, keys)

    def close(self) -> None:
        self.closed = True
        resends, self.resends = self.resends, set()
        for handle in resends:
            handle.cancel()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        due, self._due = self._due, {}
        again, self._again = self._again, []
        for tally in [*due, *(tally for _, _, tally in again)]:
            tally.due = None
            tally.expire(0.0, force=True)


_get_ident = threading.get_ident

# A sweep that runs this much after its time found the loop busy or blocked
# (see _sweep), how far away its next look is, and how many looks in a row
# at most before it times out silent nodes anyway.
_LATE = 0.002
_SECOND_LOOK = 0.001
_MAX_LOOKS = 20


def _nothing() -> None:
    return None


def _no_loop() -> asyncio.Future[bool]:
    raise RuntimeError("no running event loop")  # replaced before any fan-out


_quorums: weakref.WeakSet[Quorum] = weakref.WeakSet()


def _forget_loops() -> None:
    for quorum in _quorums:
        quorum._loop = None


os.register_at_fork(after_in_child=_forget_loops)


# The deadline of a tally made by Quorum.hold: not sent yet, no vote can time out.
_HELD = float("inf")


def _held(after: Tally | Settled) -> bool:
    """Whether ``after`` is a cleanup still queued (``Quorum.hold``): written to no node yet."""
    return isinstance(after, Tally) and after.deadline == _HELD


def _run_after(
    nodes: Sequence[Node],
    command: Command,
    tally: Tally,
    after: Tally | Settled | None,
    only: Iterable[int] | None,
) -> None:
    """``Quorum.fanout`` off its hot path: ``command`` to the nodes in ``only``
    (None: every node). A node whose reply to ``after`` is pending gets it once
    it has answered if the node may run commands out of order, or if ``after``
    is a cleanup still queued (``Quorum.hold``), written to no node yet."""
    held = after is not None and _held(after)
    targets = None if only is None else set(only)
    for index, node in enumerate(nodes):
        if targets is not None and index not in targets:
            tally.settle(index, SKIPPED)
        elif after is not None and (held or not node.ordered) and after.replies[index] is PENDING:
            after.when_settled(index, _deferred(node, command, tally))
        else:
            node.run(command, tally)


def _deferred(node: Node, command: Command, tally: Tally) -> Callable[[Reply], None]:
    def send(_: Reply) -> None:
        node.run(command, tally)

    return send


def _run_each(nodes: Sequence[Node], command: Command, tally: Tally) -> None:
    for node in nodes:
        node.run(command, tally)
