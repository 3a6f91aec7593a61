"""Fan-out: one script to every node at once, and the vote count that decides.

:func:`fanout` sends a script to all nodes and returns a :class:`Tally` at
once. Every node's outcome - reply, error reply, broken connection, timeout -
becomes a per-node value; nothing raises mid-flight, and one slow node cannot
cancel or delay the others' votes. ``tally.decided`` completes as soon as the
outcome is known: a quorum of yes votes, or so many no votes and failures
that a quorum is out of reach, or ``node_timeout`` has passed. Late replies
are still recorded, and callers may chain work after them
(:meth:`Tally.when_settled`): that is how cleanup reaches nodes whose reply
has not arrived yet.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence

from ._errors import NodeError, NodeTimeoutError
from ._node import Arg, Node, Reply
from ._scripts import Script

__all__ = ["PENDING", "Tally", "fanout", "is_yes", "outcome", "quorum_of"]


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
        "_timer",
        "_waiters",
        "decided",
        "expired",
        "failed",
        "n",
        "no",
        "node_timeout",
        "nodes",
        "replies",
        "settled",
        "yes",
    )

    def __init__(
        self, nodes: Sequence[Node], node_timeout: float, loop: asyncio.AbstractEventLoop
    ) -> None:
        self.nodes = nodes
        self.n = len(nodes)
        self.node_timeout = node_timeout
        self.replies: list[Reply | _Pending] = [PENDING] * self.n
        self.yes = self.no = self.failed = self.settled = 0
        self.expired = False  # node_timeout passed with replies missing
        self.decided: asyncio.Future[bool] = loop.create_future()
        self._waiters: dict[int, list[Callable[[Reply], None]]] | None = None
        # One timer per fan-out, not per node: every command left at the same
        # moment, so a shared deadline is each node's own timeout.
        self._timer: asyncio.TimerHandle | None = loop.call_later(node_timeout, self._expire)

    def settle(self, index: int, reply: Reply) -> None:
        """Record node ``index``'s outcome (the callback every node driver calls)."""
        if self.replies[index] is not PENDING:
            return
        self.replies[index] = reply
        self.settled += 1
        if type(reply) is int and reply > 0:
            self.yes += 1
        elif isinstance(reply, NodeError):
            self.failed += 1
        else:
            self.no += 1
        if self.settled == self.n and self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self.decided.done():
            verdict = outcome(self.yes, self.no, self.failed, self.n)
            if verdict is not None:
                self.decided.set_result(verdict)
        if self._waiters is not None:
            for then in self._waiters.pop(index, ()):
                then(reply)

    def _expire(self) -> None:
        self._timer = None
        self.expired = True
        for node, reply in zip(self.nodes, self.replies, strict=True):
            if reply is PENDING:
                node.check_stall()
        if not self.decided.done():
            self.decided.set_result(self.yes >= self.n // 2 + 1)

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


def fanout(
    nodes: Sequence[Node],
    script: Script,
    keys: Sequence[bytes],
    args: Sequence[Arg],
    *,
    node_timeout: float,
    after: Tally | None = None,
    only: Iterable[int] | None = None,
) -> Tally:
    """Send ``script`` to every node (or those in ``only``) at once.

    With ``after``, a node whose reply to that earlier fan-out is still
    pending gets this command only once it has answered - unless the node
    runs commands in order anyway. That keeps a release from overtaking the
    acquire it undoes.
    """
    loop = asyncio.get_running_loop()
    tally = Tally(nodes, node_timeout, loop)
    targets = range(len(nodes)) if only is None else set(only)
    for index, node in enumerate(nodes):
        if index not in targets:
            tally.settle(index, _SKIPPED)
            continue
        callback = _bind(tally, index)
        if after is not None and not node.ordered and after.replies[index] is PENDING:
            after.when_settled(index, _deferred(node, script, keys, args, callback))
        else:
            node.run_script(script, keys, args, callback)
    return tally


def _bind(tally: Tally, index: int) -> Callable[[Reply], None]:
    def callback(reply: Reply) -> None:
        tally.settle(index, reply)

    return callback


def _deferred(
    node: Node,
    script: Script,
    keys: Sequence[bytes],
    args: Sequence[Arg],
    callback: Callable[[Reply], None],
) -> Callable[[Reply], None]:
    def send(_: Reply) -> None:
        node.run_script(script, keys, args, callback)

    return send
