"""Fan-out: one script to every node at once, and the vote count that decides.

:meth:`Quorum.fanout` sends a command to all nodes and returns a
:class:`Tally` at once. Every node's outcome - reply, error reply, broken
connection, timeout - becomes a per-node value; nothing raises mid-flight,
and one slow node cannot cancel or delay the others' votes.
``tally.decided`` completes as soon as the outcome is known: a quorum of yes
votes, or so many no votes and failures that a quorum is out of reach, or
``node_timeout`` has passed. Late replies are still recorded, and callers may
chain work after them (:meth:`Tally.when_settled`): that is how cleanup
reaches nodes whose reply has not arrived yet.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any

from ._errors import NodeError, NodeTimeoutError
from ._node import Command, Node, Reply

# Sends one command to every node of a quorum; the sink is the fan-out's tally.
RunAll = Callable[[Sequence[Any], Command, "Tally"], None]

__all__ = ["PENDING", "Quorum", "Tally", "is_yes", "outcome", "quorum_of"]


class _Pending:
    __slots__ = ()

    def __repr__(self) -> str:
        return "PENDING"


PENDING = _Pending()
"""Marks a node whose reply has not arrived."""

_SKIPPED = NodeError("not sent")


def quorum_of(n: int) -> int:
    """Votes needed among ``n`` nodes: a strict majority."""
    return n // 2 + 1


def is_yes(reply: Reply | _Pending) -> bool:
    """Every script answers a positive integer for "done" and 0 for "refused"."""
    return type(reply) is int and reply > 0


def outcome(yes: int, no: int, failed: int, n: int) -> bool | None:
    """True once a quorum said yes, False once it no longer can, else None.

    Pure vote counting: ``no`` are refusals, ``failed`` errors and timeouts.
    """
    quorum = n // 2 + 1
    if yes >= quorum:
        return True
    if no + failed > n - quorum:
        return False
    return None


class Tally:
    """Per-node outcomes of one fan-out, and the decision drawn from them."""

    __slots__ = (
        "_due",
        "_missing",
        "_no_short",
        "_waiters",
        "_yes_short",
        "command",
        "deadline",
        "decided",
        "expired",
        "group",
        "n",
        "no",
        "quorum",
        "replies",
    )

    def __init__(
        self,
        group: Quorum,
        command: Command,
        decided: asyncio.Future[bool],
        deadline: float,
    ) -> None:
        self.group = group  # the nodes, and their node_timeout
        self.command: Command | None = command  # what every node was sent (until all answered)
        self.n = self._missing = n = group.n
        self.quorum = self._yes_short = need = group.need  # yes votes still needed
        self._no_short = n - need + 1  # refusals and failures that rule a quorum out
        self.deadline = deadline
        self.replies: list[Reply | _Pending] = [PENDING] * n
        self.no = 0
        self.expired = False  # node_timeout passed with replies missing
        self.decided = decided
        self._waiters: dict[int, list[Callable[[Reply], None]]] | None = None
        # The deadline queue holding this tally until every node answered.
        self._due: dict[Tally, None] | None = None

    @property
    def nodes(self) -> tuple[Node, ...]:
        return self.group.nodes

    def settle(self, index: int, reply: Reply) -> None:
        """Record node ``index``'s outcome (what every node driver calls).

        This runs once per node per fan-out, hence the countdowns: each
        decision is one decrement and one truth test.
        """
        replies = self.replies
        if replies[index] is not PENDING:
            return  # never count a node twice
        replies[index] = reply
        if reply == 1 or (type(reply) is int and reply > 0):  # 1: the usual yes, first
            self._yes_short -= 1
            if not self._yes_short and not self.decided.done():
                self.decided.set_result(True)
        else:
            if not isinstance(reply, NodeError):
                self.no += 1  # a refusal (failures are counted from replies)
            self._no_short -= 1
            if not self._no_short and not self.decided.done():
                self.decided.set_result(False)
        self._missing -= 1
        if not self._missing:
            # Every node is done with the command; a grant keeps its acquire
            # tally for as long as it is held, and need not keep this too.
            self.command = None
            if self._due is not None:
                # Leave the deadline queue at once: a tally held there until its
                # deadline outlives a young-generation GC pass and costs a full
                # collection later, on the hot path.
                del self._due[self]
                self._due = None
        if self._waiters is not None:
            for then in self._waiters.pop(index, ()):
                then(reply)

    @property
    def yes(self) -> int:
        """Yes votes so far."""
        return self.quorum - self._yes_short

    @property
    def settled(self) -> int:
        """Nodes that answered (or failed) so far."""
        return self.n - self._missing

    def expire(self) -> None:
        """node_timeout has passed: silent nodes are failed votes from now on."""
        if self.settled == self.n:
            return
        self.expired = True
        for node, reply in zip(self.nodes, self.replies, strict=True):
            if reply is PENDING:
                node.check_stall()
        if not self.decided.done():
            self.decided.set_result(self.yes >= self.quorum)

    def when_settled(self, index: int, then: Callable[[Reply], None]) -> None:
        """Run ``then(reply)`` once node ``index`` has answered (now if it has)."""
        reply = self.replies[index]
        if reply is not PENDING:
            then(reply)  # type: ignore[arg-type]
            return
        if self._waiters is None:
            self._waiters = {}
        self._waiters.setdefault(index, []).append(then)

    def abandon(self) -> None:
        """The caller stopped waiting (cancelled): decide now, as a failure."""
        if not self.decided.done():
            self.decided.set_result(False)

    def errors(self) -> dict[str, NodeError]:
        """Each failed node's error; once node_timeout passed, silent nodes count too."""
        result: dict[str, NodeError] = {}
        for node, reply in zip(self.nodes, self.replies, strict=True):
            if reply is PENDING and self.expired:
                result[node.name] = NodeTimeoutError(
                    f"{node.name}: no reply within node_timeout={self.group.node_timeout}s"
                )
            elif isinstance(reply, NodeError) and reply is not _SKIPPED:
                result[node.name] = reply
        return result


class Quorum:
    """The nodes of one Redlock, and the deadlines of their fan-outs.

    Every fan-out gets the same ``node_timeout``, so deadlines come due in the
    order fan-outs started: one FIFO and one timer serve them all, instead of
    a timer per fan-out (which costs heap work on the hot path).
    """

    def __init__(self, nodes: Sequence[Node], node_timeout: float) -> None:
        self.nodes = tuple(nodes)
        self.n = len(self.nodes)
        self.need = quorum_of(self.n)
        self.node_timeout = node_timeout
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
        self._timer: asyncio.TimerHandle | None = None
        # The running loop, remembered: asyncio.get_running_loop() makes a
        # getpid() syscall, which cost ~2% of a grant at 50 tasks. Only
        # asyncio's own loops are remembered (see fanout); after a fork the
        # child forgets it.
        self._loop: asyncio.BaseEventLoop | None = None
        # Its clock and futures: asyncio's default loops read time.monotonic
        # and make plain Futures, done here directly to save a Python frame
        # per fan-out.
        self._now: Callable[[], float] = time.monotonic
        self._new_future: Callable[[], asyncio.Future[bool]] = _no_loop
        _quorums.add(self)

    def fanout(
        self,
        command: Command,
        *,
        after: Tally | None = None,
        only: Iterable[int] | None = None,
    ) -> Tally:
        """Send ``command`` to every node (or those in ``only``) at once.

        With ``after``, a node whose reply to that earlier fan-out is still
        pending gets this command only once it has answered - unless the node
        runs commands in order anyway. That keeps a release from overtaking
        the acquire it undoes.
        """
        # running_loop(), inlined. A BaseEventLoop whose _thread_id is this
        # thread's is running here, and only one loop can run in a thread at
        # a time: it is the running loop.
        loop: asyncio.AbstractEventLoop | None = self._loop
        if loop is None or loop._thread_id != _get_ident():  # type: ignore[attr-defined]
            loop = self._bind_loop()
        tally = Tally(self, command, self._new_future(), self._now() + self.node_timeout)
        if only is None and (after is None or self._ordered or not after._missing):
            self._run_all(self.nodes, command, tally)  # the hot path: every node, now
        else:
            targets = None if only is None else set(only)
            for index, node in enumerate(self.nodes):
                if targets is not None and index not in targets:
                    tally.settle(index, _SKIPPED)
                elif after is not None and not node.ordered and after.replies[index] is PENDING:
                    after.when_settled(index, _deferred(node, command, tally))
                else:
                    node.run(command, tally)
        if tally._missing:
            due = tally._due = self._due
            due[tally] = None
            if self._timer is None:
                self._timer = loop.call_at(tally.deadline, self._sweep)
        return tally

    def running_loop(self) -> asyncio.AbstractEventLoop:
        """The running event loop, as ``asyncio.get_running_loop()``, minus its syscall."""
        loop = self._loop
        if loop is None or loop._thread_id != _get_ident():  # type: ignore[attr-defined]
            return self._bind_loop()
        return loop

    def _bind_loop(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
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

    def _sweep(self) -> None:
        self._timer = None
        due = self._due
        loop = asyncio.get_running_loop()
        now = loop.time()
        expired: list[Tally] = []
        for tally in due:
            if tally.deadline > now:
                break
            expired.append(tally)
        for tally in expired:
            del due[tally]
            tally._due = None
            tally.expire()
        if due:
            self._timer = loop.call_at(next(iter(due)).deadline, self._sweep)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        due, self._due = self._due, {}
        for tally in due:
            tally._due = None
            tally.expire()


_get_ident = threading.get_ident


def _no_loop() -> asyncio.Future[bool]:
    raise RuntimeError("no running event loop")  # replaced before any fan-out


_quorums: weakref.WeakSet[Quorum] = weakref.WeakSet()


def _forget_loops() -> None:
    for quorum in _quorums:
        quorum._loop = None


os.register_at_fork(after_in_child=_forget_loops)


def _deferred(node: Node, command: Command, tally: Tally) -> Callable[[Reply], None]:
    def send(_: Reply) -> None:
        node.run(command, tally)

    return send


def _run_each(nodes: Sequence[Node], command: Command, tally: Tally) -> None:
    for node in nodes:
        node.run(command, tally)
