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
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any

from .._errors import NodeConnectionError, NodeError, NodeTimeoutError, RedlockError
from ._node import Command, Node, Reply, Unsent

# Sends one command to every node of a quorum; the sink is the fan-out's tally.
RunAll = Callable[[Sequence[Any], Command, "Tally"], None]

__all__ = ["PENDING", "Quorum", "Tally", "is_yes", "outcome", "quorum_of"]

_log = logging.getLogger("redlock_async")


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
        "resend_until",
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
        # Cleanups (releases) set this: a node whose connection failed gets
        # the command again, with backoff, until this monotonic time (when
        # the key it cleans up has expired anyway). 0: never resent.
        self.resend_until = 0.0

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
        command = self.command
        if command is not None and command.grants:
            # Restart quarantine, applied here for every driver (_restarts.py):
            # a restarted or unwatchable node's yes to a granting script fails.
            watch = self.group.nodes[index].restarts
            if watch is not None and watch.until:
                reply = watch.vote(reply, asyncio.get_running_loop().time())
        replies[index] = reply
        if reply == 1 or (type(reply) is int and reply > 0):  # 1: the usual yes, first
            self._yes_short -= 1
            if not self._yes_short and not self.decided.done():
                self.decided.set_result(True)
        else:
            if not isinstance(reply, NodeError):
                self.no += 1  # a refusal (failures are counted from replies)
            elif self.resend_until and self.command is not None:
                _resend(self, index, reply)
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
        # The loop the nodes' connections live on, and the process: a fan-out
        # from another loop or a forked child must not touch them (see _bind_loop).
        self._home: asyncio.AbstractEventLoop | None = None
        self._home_pid = 0
        # Told when the quorum moves to a new home: the owner forgets
        # connections and grants of the old one (Core.rehome).
        self.on_rehome: Callable[[], None] = _nothing
        self.closed = False
        # Pending resends of cleanups (see _Resend): cancelled on close.
        self._resends: set[asyncio.TimerHandle] = set()
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
            self._resends = set()
            self._due = {}
            self.on_rehome()
        self._home = loop
        self._home_pid = pid

    async def drain(self, timeout: float) -> None:
        """Wait until no fan-out has replies missing (or ``timeout`` passed).

        For ``aclose()``: attempts in flight decide and send their cleanups,
        and the cleanups' replies come back, before the connections close
        (closing a connection throws its unread replies away).
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        # Polled: aclose() is rare, and a notification would cost every
        # fan-out a check on the hot path.
        while loop.time() < deadline:
            if not self._due:
                # The tasks whose fan-outs just decided take their next step
                # (a cleanup is a new fan-out) in the next loop iterations.
                for _ in range(3):
                    await asyncio.sleep(0)
                if not self._due:
                    return
            await asyncio.sleep(0.005)

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
        self.closed = True
        resends, self._resends = self._resends, set()
        for handle in resends:
            handle.cancel()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        due, self._due = self._due, {}
        for tally in due:
            tally._due = None
            tally.expire()


_get_ident = threading.get_ident


def _nothing() -> None:
    return None


# Per-node resends of a cleanup: first after 50 ms, doubling up to 1 s.
_RESEND_FIRST = 0.05
_RESEND_MAX = 1.0


class _Resend:
    """Sends a cleanup (a compare-and-delete: safe to repeat) to one node again.

    A release whose connection broke (a killed connection, a node that
    restarted, a stall that dropped it) may never have run, and its key
    would then block everyone for a whole ttl. Resent after a backoff, on a
    new connection, until ``until``; its outcome is only logged.
    """

    __slots__ = ("command", "delay", "group", "handle", "index", "node", "until")

    def __init__(
        self, group: Quorum, node: Node, index: int, command: Command, until: float
    ) -> None:
        self.group = group
        self.node = node
        self.index = index
        self.command = command
        self.until = until
        self.delay = _RESEND_FIRST
        self.handle: asyncio.TimerHandle | None = None

    def schedule(self) -> None:
        group = self.group
        if group.closed:
            return  # aclose(): what was not delivered by now expires with its ttl
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # the loop is gone: the key expires with its ttl
        if time.monotonic() + self.delay < self.until:
            # Kept by the quorum, so that closing cancels it: a resend firing
            # after aclose() would open a new connection on a closing loop.
            self.handle = loop.call_later(self.delay, self._fire)
            group._resends.add(self.handle)
            self.delay = min(self.delay * 2, _RESEND_MAX)

    def _fire(self) -> None:
        group = self.group
        if self.handle is not None:
            group._resends.discard(self.handle)
        if not group.closed:
            self.node.run(self.command, self)

    def settle(self, index: int, reply: Reply) -> None:
        # Once resending, a resend that could not even be written (the node
        # still down) does not end the chain: the original may still run.
        if _failed_with_connection(self.node, reply):
            self.schedule()
        else:
            _log.debug("redlock_async: %s resent to %s: %r", self.command, self.node.name, reply)


def _failed_with_connection(node: Node, reply: Reply) -> bool:
    """Did the command fail with its connection (so it may not have run)?

    A timeout counts on ordered nodes only: there it means the stall detector
    dropped the connection. Through redis-py a timeout leaves the command
    running on a pooled connection, and resending to a node that is not
    answering only piles up connections.
    """
    if isinstance(reply, NodeConnectionError):
        return True
    return isinstance(reply, NodeTimeoutError) and node.ordered


def _resend(tally: Tally, index: int, reply: NodeError) -> None:
    node = tally.nodes[index]
    # A command never written (node down, backing off) needs no resend: what
    # it cleans up was never written there either, or was cleaned up by the
    # chain of the command that was.
    if isinstance(reply, Unsent):
        return
    if tally.command is not None and _failed_with_connection(node, reply):
        _Resend(tally.group, node, index, tally.command, tally.resend_until).schedule()


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
