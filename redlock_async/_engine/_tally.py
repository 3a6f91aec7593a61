"""The votes of one fan-out, and the decision drawn from them.

Every node's outcome - reply, error reply, broken connection, timeout - is
recorded as a value (nothing raises mid-flight). ``tally.decided`` completes
as soon as the outcome is known: a quorum of yes votes, or so many refusals
and failures that a quorum is out of reach, or the silent nodes' votes have
timed out. A node's vote times out once the node has been silent toward us
for ``node_timeout`` - counted from when it last answered or when its oldest
unanswered command was written, never from when the client queued ours: a
node working through a backlog of our own commands keeps its vote - but not
past :func:`vote_limit` after the fan-out, however steadily it answers
others (see :meth:`Tally.expire`). One rule for every fan-out: acquires,
releases, extends, and batched renewals (which read the tally's expiry,
:meth:`Tally.when_expired`).
Late replies are still recorded, and callers may chain work after them
(:meth:`Tally.when_settled`): that is how cleanup reaches nodes whose reply
has not arrived yet. The restart quarantine is applied here, once, for
every driver.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Protocol

from .._base._errors import NodeError, NodeTimeoutError
from ._node import STALE, Command, Node, Reply, stall_limit
from ._restarts import Restarts
from ._settled import Settled

__all__ = ["PENDING", "SKIPPED", "Group", "Tally", "is_yes", "quorum_of", "vote_limit"]

# Timers may fire up to a millisecond early (uvloop counts whole
# milliseconds): a node silent for node_timeout less this counts as silent,
# so that a recheck due at that time cannot find it a hair short, again.
_EARLY = 0.001

# Why a pending vote timed out (Tally.silent): the node said nothing for
# node_timeout, or it kept answering earlier commands past the backlog bound.
_SILENT = 1
_BACKLOG = 2


def backlog_limit(node_timeout: float) -> float:
    """How long past its fan-out's deadline a node busy with earlier commands keeps its vote.

    The span a node may leave every command unanswered before its connection
    is dropped (``stall_limit``: 4 x node_timeout, at least 0.5 s): a node
    that answers, but not ours, for that long is treated no better than a
    silent one. Admission keeps at most a few milliseconds of our own work
    queued on a healthy node, and a burst's busy event loop (20,000 one-shot
    acquires: 0.3 s between send and reply) stays well inside it, so only a
    node that is really slow - throttled, swapping, overloaded by others -
    ever reaches it. Looked up at call time (the fault suite's mutant
    ``unbounded-backlog-vote`` swaps it).
    """
    return stall_limit(node_timeout)


def vote_limit(node_timeout: float) -> float:
    """The longest a vote can stay pending after its fan-out was sent (on a loop
    that is not blocked): ``node_timeout``, then :func:`backlog_limit` more."""
    return node_timeout + backlog_limit(node_timeout)


class Group(Protocol):
    """What a tally needs of the fan-out that made it (a ``Quorum``)."""

    nodes: tuple[Node, ...]
    n: int
    need: int
    node_timeout: float
    watches: tuple[Restarts | None, ...] | None
    """Each node's restart watch (None: no node has one)."""
    on_error: Callable[[int, NodeError], None] | None
    """Told of each node failure (index, error): logs and metrics. None: nobody."""

    def resend(self, tally: Tally, index: int, reply: NodeError) -> None:
        """Node ``index`` failed ``tally``'s command: send it again if that may help."""
        ...

    def stale(self, index: int, keys: Sequence[bytes]) -> NodeError:
        """Node ``index`` answered STALE to a command over ``keys``: the failure
        to record (a census is due)."""
        ...


class _Pending:
    __slots__ = ()

    def __repr__(self) -> str:
        return "PENDING"


PENDING = _Pending()
"""Marks a node whose reply has not arrived."""

SKIPPED = NodeError("not sent")
"""What a node left out of a fan-out (``only=``) settles with."""


def quorum_of(n: int) -> int:
    """Votes needed among ``n`` nodes: a strict majority."""
    return n // 2 + 1


def is_yes(reply: Reply | _Pending) -> bool:
    """Every script answers a positive integer for "done" and 0 for "refused"."""
    return type(reply) is int and reply > 0


class Tally:
    """Per-node outcomes of one fan-out, and the decision drawn from them."""

    __slots__ = (
        "_expiry",
        "_no_short",
        "_waiters",
        "_yes_short",
        "after",
        "command",
        "deadline",
        "decided",
        "due",
        "expired",
        "group",
        "missing",
        "n",
        "no",
        "quorum",
        "replies",
        "resend_until",
        "silent",
        "watches",
    )

    def __init__(
        self,
        group: Group,
        command: Command,
        decided: asyncio.Future[bool],
        deadline: float,
    ) -> None:
        self.group = group  # the nodes, and their node_timeout
        self.command: Command | None = command  # what every node was sent (until all answered)
        # The nodes' restart watches, for a granting script only: the
        # quarantine turns yes votes of restarted nodes into failures.
        self.watches = group.watches if command.grants else None
        self.n = self.missing = n = group.n
        self.quorum = self._yes_short = need = group.need  # yes votes still needed
        self._no_short = n - need + 1  # refusals and failures that rule a quorum out
        self.deadline = deadline
        self.replies: list[Reply | _Pending] = [PENDING] * n
        self.no = 0
        self.expired = False  # every node still missing has timed out (see expire)
        # Per node: its vote timed out (_SILENT or _BACKLOG: why) while others'
        # have not yet (see expire); 0 while it has not.
        self.silent: list[int] | None = None
        self.decided = decided
        self._waiters: dict[int, list[Callable[[Reply], None]]] | None = None
        self._expiry: Callable[[], None] | None = None  # told once expired (when_expired)
        # The deadline queue holding this tally until every node answered.
        self.due: dict[Tally, None] | None = None
        # Cleanups (releases) set this: a node whose connection failed gets
        # the command again, with backoff, until this monotonic time (when
        # the key it cleans up has expired anyway). 0: never resent.
        self.resend_until = 0.0
        # The fan-out this one follows (Quorum.fanout): where its command may
        # have run, a cleanup that could not even be written is resent too.
        self.after: Tally | Settled | None = None

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
        watches = self.watches
        answer = reply
        if watches is not None:
            # Restart quarantine, for every driver (_restarts.py): a restarted or
            # unwatchable node's yes to a granting script fails (a no stays).
            watch = watches[index]
            if watch is not None and watch.until:
                reply = watch.vote(reply, asyncio.get_running_loop().time())
        replies[index] = reply
        if reply == 1 or (type(reply) is int and reply > 0):  # 1: the usual yes, first
            self._yes_short -= 1
            if not self._yes_short and not self.decided.done():
                self.decided.set_result(True)
        else:
            if reply == STALE and type(reply) is int:  # it lost its data: _epochs.py
                command = self.command
                keys = () if command is None else command.stale_keys(index)
                reply = replies[index] = self.group.stale(index, keys)
            if not isinstance(reply, NodeError):
                self.no += 1  # a refusal (failures are counted from replies)
            else:
                if self.resend_until and self.command is not None:
                    self.group.resend(self, index, reply)
                on_error = self.group.on_error
                # Not a quarantined yes nor a STALE (the node answered; logged elsewhere).
                if on_error is not None and reply is answer and reply is not SKIPPED:
                    on_error(index, reply)
            self._no_short -= 1
            if not self._no_short and not self.decided.done():
                self.decided.set_result(False)
        self.missing -= 1
        if not self.missing:
            # Every node is done; a grant keeps its acquire tally, not the command.
            self.command = None
            if self.due is not None:
                # Leave the deadline queue at once: a tally held there until its
                # deadline outlives a young-generation GC pass and costs a full
                # collection later, on the hot path.
                del self.due[self]
                self.due = None
        if self._waiters is not None:
            for then in self._waiters.pop(index, ()):
                then(reply)

    @property
    def yes(self) -> int:
        """Yes votes so far."""
        return self.quorum - self._yes_short

    @property
    def refused(self) -> bool:
        """So many nodes refused (answers, not failures) that no quorum can say yes."""
        return self.no > self.n - self.quorum

    @property
    def settled(self) -> int:
        """Nodes that answered (or failed) so far."""
        return self.n - self.missing

    def expire(self, now: float, *, force: bool = False) -> float | None:
        """``node_timeout`` has passed since the fan-out: time out the silent nodes.

        A missing node's vote fails once the node has been silent for
        ``node_timeout`` (``Node.silent_since``). One that has answered more
        recently - it is working through commands written before ours, a
        queue of the client's own making - keeps its vote pending: this
        returns when to look again (None: nothing left to look at). Counting
        from the fan-out instead failed healthy nodes whenever the client
        queued faster than they answered, and each failed attempt added
        more work (a burst of 5,000 acquires granted none). Validity is still
        counted from before the send, so a later vote costs validity, never
        safety.

        But not for ever: a node answering a backlog slowly and steadily
        (throttled, overloaded by other clients) was never silent, and kept
        every vote - and every caller - waiting until it got through. Its vote
        also fails :func:`backlog_limit` after this deadline, so every vote
        is decided within :func:`vote_limit` of the send. ``force``: every
        missing node times out now (closing).
        """
        if not self.missing:
            return None
        node_timeout = self.group.node_timeout
        limit = node_timeout - _EARLY
        silent = self.silent
        if silent is None:
            silent = self.silent = [0] * self.n
            # First look: if our own loop was blocked past it, bound the backlog from now.
            self.deadline = max(self.deadline, now)
        # self.deadline is the send plus node_timeout, on the loop's clock.
        cap = self.deadline + backlog_limit(node_timeout) - _EARLY
        again: float | None = None
        waiting = 0
        for index, (node, reply) in enumerate(zip(self.group.nodes, self.replies, strict=True)):
            if reply is not PENDING or silent[index]:
                continue
            # Compared as "due <= now", the same sum the recheck is set to:
            # "now - since >= limit" can disagree with it by a rounding, and
            # a recheck due now that finds the node not yet silent would
            # come back forever.
            due = float("-inf") if force else node.silent_since() + limit
            if due <= now:
                silent[index] = _SILENT
            elif cap <= now:
                silent[index] = _BACKLOG
            else:
                waiting += 1
                due = min(due, cap)
                if again is None or due < again:
                    again = due
                continue
            on_error = self.group.on_error
            if on_error is not None and not force:
                on_error(index, _timed_out(self, index))
        if not waiting:
            self.expired = True
            if not self.decided.done():
                self.decided.set_result(self.yes >= self.quorum)
            expiry, self._expiry = self._expiry, None
            if expiry is not None:
                expiry()
            return None
        timed_out = sum(1 for i, r in enumerate(self.replies) if r is PENDING and silent[i])
        if timed_out >= self._no_short and not self.decided.done():
            self.decided.set_result(False)  # a quorum is out of reach already
        return again

    def when_settled(self, index: int, then: Callable[[Reply], None]) -> None:
        """Run ``then(reply)`` once node ``index`` has answered (now if it has)."""
        reply = self.replies[index]
        if reply is not PENDING:
            then(reply)  # type: ignore[arg-type]
            return
        if self._waiters is None:
            self._waiters = {}
        self._waiters.setdefault(index, []).append(then)

    def when_expired(self, then: Callable[[], None]) -> None:
        """Run ``then()`` once every node still missing has timed out (one caller only).

        A tally whose every node answers never expires. For fan-outs whose
        replies are no votes to the tally (a batch renewal's lists): they
        time out late nodes by the same rule as every other fan-out.
        """
        self._expiry = then

    def answering(self) -> list[int]:
        """The nodes whose vote is still pending and has not timed out."""
        if self.expired or not self.missing:
            return []
        silent = self.silent
        return [
            i
            for i, reply in enumerate(self.replies)
            if reply is PENDING and (silent is None or not silent[i])
        ]

    def abandon(self) -> None:
        """The caller stopped waiting (cancelled): decide now, as a failure."""
        if not self.decided.done():
            self.decided.set_result(False)

    def errors(self) -> dict[str, NodeError]:
        """Each failed node's error; once node_timeout passed, silent nodes count too."""
        result: dict[str, NodeError] = {}
        for i, (node, reply) in enumerate(zip(self.nodes, self.replies, strict=True)):
            if reply is PENDING and (self.expired or (self.silent is not None and self.silent[i])):
                result[node.name] = _timed_out(self, i)
            elif isinstance(reply, NodeError) and reply is not SKIPPED:
                result[node.name] = reply
        return result


def _timed_out(tally: Tally, index: int) -> NodeTimeoutError:
    """Why node ``index``'s pending vote in ``tally`` timed out."""
    name = tally.group.nodes[index].name
    node_timeout = tally.group.node_timeout
    silent = tally.silent
    if silent is not None and silent[index] == _BACKLOG:
        waited = node_timeout + backlog_limit(node_timeout)
        return NodeTimeoutError(
            f"{name}: no reply within {waited:g}s: it was still answering earlier "
            f"commands (a backlog; node_timeout={node_timeout}s)"
        )
    return NodeTimeoutError(f"{name}: no reply within node_timeout={node_timeout}s")


def when_done(tally: Tally, then: Callable[[], None]) -> None:
    """Run ``then()`` once every node has answered ``tally`` (or failed); now if all have."""
    left = tally.missing

    def one(_: Reply) -> None:
        nonlocal left
        left -= 1
        if not left:
            then()

    if not left:
        then()
        return
    for index, reply in enumerate(tally.replies):
        if reply is PENDING:
            tally.when_settled(index, one)
