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
from collections.abc import Callable, Iterable, Sequence

from ._errors import NodeError, NodeTimeoutError
from ._node import Command, Node, Reply

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
        "_waiters",
        "deadline",
        "decided",
        "expired",
        "failed",
        "n",
        "no",
        "node_timeout",
        "nodes",
        "quorum",
        "replies",
        "settled",
        "yes",
    )

    def __init__(
        self,
        nodes: Sequence[Node],
        decided: asyncio.Future[bool],
        node_timeout: float,
        deadline: float,
    ) -> None:
        self.nodes = nodes
        self.n = n = len(nodes)
        self.quorum = n // 2 + 1
        self.node_timeout = node_timeout
        self.deadline = deadline
        self.replies: list[Reply | _Pending] = [PENDING] * n
        self.yes = self.no = self.failed = self.settled = 0
        self.expired = False  # node_timeout passed with replies missing
        self.decided = decided
        self._waiters: dict[int, list[Callable[[Reply], None]]] | None = None
        # The deadline queue holding this tally until every node answered.
        self._due: dict[Tally, None] | None = None

    def settle(self, index: int, reply: Reply) -> None:
        """Record node ``index``'s outcome (what every node driver calls)."""
        replies = self.replies
        if replies[index] is not PENDING:
            return
        replies[index] = reply
        self.settled = settled = self.settled + 1
        if settled == self.n and self._due is not None:
            # Leave the deadline queue at once: a tally held there until its
            # deadline outlives a young-generation GC pass and costs a full
            # collection later, on the hot path.
            del self._due[self]
            self._due = None
        decided = self.decided
        if type(reply) is int and reply > 0:
            self.yes = yes = self.yes + 1
            if yes == self.quorum and not decided.done():
                decided.set_result(True)
        else:
            if isinstance(reply, NodeError):
                self.failed += 1
            else:
                self.no += 1
            if self.no + self.failed == self.n - self.quorum + 1 and not decided.done():
                decided.set_result(False)
        if self._waiters is not None:
            for then in self._waiters.pop(index, ()):
                then(reply)

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
                    f"{node.name}: no reply within node_timeout={self.node_timeout}s"
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
        self.node_timeout = node_timeout
        # Tallies with replies missing, in deadline order (all deadlines are
        # start + node_timeout); a tally removes itself once complete.
        self._due: dict[Tally, None] = {}
        self._timer: asyncio.TimerHandle | None = None

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
        loop = asyncio.get_running_loop()
        nodes = self.nodes
        tally = Tally(
            nodes, loop.create_future(), self.node_timeout, loop.time() + self.node_timeout
        )
        if only is None and (after is None or after.settled == after.n):
            for index, node in enumerate(nodes):  # the hot path: every node, now
                node.run(command, tally, index)
        else:
            targets = None if only is None else set(only)
            for index, node in enumerate(nodes):
                if targets is not None and index not in targets:
                    tally.settle(index, _SKIPPED)
                elif after is not None and not node.ordered and after.replies[index] is PENDING:
                    after.when_settled(index, _deferred(node, command, tally, index))
                else:
                    node.run(command, tally, index)
        if tally.settled != tally.n:
            due = self._due
            due[tally] = None
            tally._due = due
            if self._timer is None:
                self._timer = loop.call_at(tally.deadline, self._sweep)
        return tally

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


def _deferred(node: Node, command: Command, tally: Tally, index: int) -> Callable[[Reply], None]:
    def send(_: Reply) -> None:
        node.run(command, tally, index)

    return send
