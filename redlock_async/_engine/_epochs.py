"""Epochs: the restart rule for every process, whatever ttls they use.

A node that lost its data (restarted without persistence, flushed, evicted)
has forgotten the grants it held; while one of them can still be valid, its
yes votes must not count - the Redlock paper's crash-recovery rule. Which
grants those were, and how long they may live, no client knows alone: other
processes made them, with other ttls. The nodes know, so they keep a record
(``lua/_epoch.lua``; the proof is in docs/guarantees.md):

- each node has an *epoch*, a random id made by the first script that finds
  it missing - so a node that lost its data has a new one;
- every granting or renewing script carries the caller's *view*, the
  epochs of all nodes as the caller last read them; a node whose epoch is
  not in the view answers STALE and does nothing (its yes cannot count
  before the caller has read the records again);
- every script that passes that check raises, on that node, the view's
  record (a key whose expiry outlasts the grants made or renewed with that
  view: max(ttl, 2 s), and a quarter more when it is rewritten).

A *census* (``lua/census.lua``, one fan-out) reads every node's epoch and
live fields: before a Redlock's first grant, and whenever a node answers
STALE. A record whose view holds an epoch no node has any more was written
before some node lost its data; a node whose current epoch is not in that
view is *suspect* - its yes votes do not count (``Restarts.suspect``) - until
the record expires.

Why that is safe: a grant G still valid was last written on a quorum Q with
view V; each yes voter of Q checked V and raised its record to outlive G. A
node Y of Q that lost G has a new epoch, not in V (made after V was sent),
while V holds Y's old epoch, which no node has any more. Y's yes counts for
us only once Y's new epoch is in our view, and after a data loss Y answers
STALE until then. An epoch enters the view only when two censuses in a row
heard it, the second sent after the first was complete (one census is no
snapshot: it may read a node before G's write and Y after its loss): every
read of the second follows Y's loss. At most a minority of nodes is faulty
(a node that lost its data counting as faulty until its votes count again,
a node silent in the census too), so that census hears some node of Q that
kept V, and Y stays suspect until V's record - and so G - has expired. Grants made after
the census live on Y's current epoch: losing them takes a new epoch, a
STALE answer, and another census. No clock is compared across nodes: each
field's remaining life is read on its own node's clock.

A census reads each node once, but not all at one instant: a grant sent
before Y's loss may land on another node X after the census read X, so no
record of it is seen. The census sent after a finished one therefore
leaves that one's heard epochs on every node as a notice, and a script that
must write its view's record refuses a view older than a notice
(``_notices.py``, ``epoch_noticed`` in ``lua/_epoch.lua``). When a notice
refused the view (a node answered STALE, its epoch unchanged), the census
also drops the nodes it did not hear from the view: one that lost its data
while out of reach has a new epoch this Redlock cannot learn, and the
notice naming it would refuse a view with its old one.

Availability: a node that lost nothing that may still be valid votes again
as soon as the census is done; a suspect one, when the last view that may
cover its lost grants expires: 1.25 x max(ttl, 2 s) after the last grant
written with it (2 s at least: fencing tokens, docs/fencing.md). Holders
renewing with an old view get STALE from the node that lost their key, and
switch. A set of nodes where nothing was locked lately pays nothing but
two censuses per Redlock (one round trip each).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING

from .._base._errors import NodeError
from ._held import Held
from ._node import CENSUS, Command, Reply
from ._notices import census_args

if TYPE_CHECKING:
    from ._quorum import Quorum
    from ._tally import Tally

__all__ = ["Epochs", "lost_until"]

_log = logging.getLogger("redlock_async.node")

# Record values are whole milliseconds and each node reads its clock once
# per script: a field's end is stretched by this much more.
_SLACK = 0.002

Answers = dict[int, tuple[list[object], float]]
"""A census's answers by node index, each with the loop time it came."""

Field = tuple[frozenset[bytes], float]
"""A live record field written before some node lost its data: the epochs
in its view, and the local loop time by which it has expired."""


def lost_until(epoch: bytes, fields: list[Field]) -> float:
    """Until when (loop time) a node of ``epoch`` may have lost grants that are
    still valid: the latest end of a field whose view lacks ``epoch`` (0: none).

    Looked up at call time: the fault suite's mutant ``per-redlock-restart-rule``
    swaps it for one that finds nothing.
    """
    return max((end for epochs, end in fields if epoch not in epochs), default=0.0)


def _collect(
    tally: Tally, loop: asyncio.AbstractEventLoop, done: Callable[[Answers], None]
) -> None:
    """Gather a census's answers, each with the loop time it came; ``done``
    once, after every node answered or at the tally's deadline."""
    answers: Answers = {}
    left = [tally.n]

    def answer(index: int, reply: Reply) -> None:
        if isinstance(reply, list) and reply and isinstance(reply[0], bytes | str):
            # A client made with decode_responses=True answers in str.
            reply = [x.encode() if isinstance(x, str) else x for x in reply]
            answers[index] = (reply, loop.time())
        elif isinstance(reply, NodeError):
            _log.debug("redlock_async: census: %s", reply)
        if left[0] > 0:
            left[0] -= 1
            if not left[0]:
                finish()

    def finish() -> None:
        if left[0] >= 0:
            left[0] = -1  # once: after every answer, or at the deadline
            done(answers)

    for index in range(tally.n):
        tally.when_settled(index, partial(answer, index))
    tally.when_expired(finish)


def _fields(answers: Answers, drift: float) -> list[Field]:
    """The live record fields a census read that were written before some
    node lost its data: every epoch in the others is still some node's."""
    current = {reply[0] for reply, _ in answers.values()}
    stretch = 1.0 + drift
    fields: list[Field] = []
    for reply, heard in answers.values():
        pairs = reply[3:]  # after the epoch, the clock and the age (_notices.parse)
        for view, ms in zip(pairs[::2], pairs[1::2], strict=False):
            if not isinstance(view, bytes) or type(ms) is not int or ms <= 0:
                continue
            epochs = frozenset(view.split(b",")) - {b""}
            if not epochs <= current:
                fields.append((epochs, heard + ms / 1000.0 * stretch + _SLACK))
    return fields


class Epochs:
    """This Redlock's view of the nodes' epochs, and the censuses that update it."""

    def __init__(self, quorum: Quorum, key: bytes, drift: float, *, slotted: bool = False) -> None:
        """``slotted``: one hash slot's, of a Redlock with a Redis Cluster node
        (``_slots.py``): a node that lost grants still valid is kept out of the
        view until they expire, not held by its restart watch."""
        self._quorum = quorum
        self._key = key
        self._drift = drift
        # Each node's epoch as the view holds it: confirmed by two censuses
        # in a row (see _finish); None: not in the view, the node answers STALE.
        self.ids: list[bytes | None] = [None] * quorum.n
        # An epoch one census heard, to be confirmed by the next that hears it.
        self.candidates: list[bytes | None] = [None] * quorum.n
        # Censuses have run until none was needed any more (whatever they
        # heard): the first grant waits for that, later ones never do (an
        # outage must not slow each attempt).
        self.ready = False
        self._running = False  # a census is scheduled or in flight
        self._again = False  # a node answered STALE after it was sent
        self._stale: set[int] = set()  # nodes that answered STALE since the last census
        self._waiters: list[asyncio.Future[None]] = []
        # What the census sent next writes on the nodes, from the one just
        # complete (_notices.py); empty for a census that follows none.
        self._next: tuple[bytes, bytes] = (b"", b"")
        self.closed = False
        self.count = 0  # censuses sent (tests; the docs' cost figures)
        self.slotted = slotted
        # Slotted: nodes kept out of the view while grants they may have lost
        # can be valid: index -> (its epoch, loop time it may come in).
        self.held = Held(self.admit)
        # What the scripts get: the key of the view's record (lua/_epoch.lua);
        # no epoch known yet, so every node answers STALE until a census.
        self.view = b""
        self._set_view()
        if slotted:
            # A restart from disk or a failover is caught by the scripts
            # themselves there (lua/_epoch_cluster.lua compares run_ids).
            return
        quorum.epochs = self
        for index, watch in enumerate(quorum.watches or ()):
            if watch is not None:
                watch.on_restart = partial(self._restarted, index)

    def stale(self, index: int, keys: Sequence[bytes] = ()) -> NodeError:
        """Node ``index`` answered STALE: ask for a census; the error to record."""
        name = self._quorum.nodes[index].name
        held = self.held.ends.get(index)
        if held is not None:
            # Kept out on purpose: a census now would find the same.
            left = held[1] - self._quorum.running_loop().time()
            return NodeError(
                f"{name} lost its data while grants it may have held can still be valid; "
                f"its votes count again in {max(left, 0.0):.1f}s"
            )
        self._stale.add(index)
        self.request()
        return NodeError(
            f"{name}: its epoch changed (it lost its data: a restart?), or another process "
            "saw a node's that this Redlock has not; its votes count again after a census"
        )

    def _restarted(self, index: int) -> None:
        """Node ``index`` showed a new run_id (a restart seen on a new connection).

        Restarted from disk, or a promoted replica, it may have kept its
        epoch but not the last grants: its yes votes do not count (its watch
        holds them) and its epoch leaves the view until two censuses read it
        again - the first gives it a new epoch (census.lua: another server).
        """
        self.ids[index] = self.candidates[index] = None
        self._set_view()
        watches = self._quorum.watches
        watch = watches[index] if watches is not None else None
        if watch is not None:
            watch.hold()
        self.request()

    def forget(self, index: int) -> None:
        """Slotted: node ``index`` restarted; out of the view until censuses
        read it again (it answers STALE meanwhile, which asks for them)."""
        self.ids[index] = self.candidates[index] = None
        self.held.drop(index)
        self._set_view()

    def admit(self, index: int, epoch: bytes) -> None:
        """Slotted: node ``index``'s ``epoch`` joins the view (its hold is over)."""
        if not self.closed:
            self.ids[index] = epoch
            self._set_view()

    def _set_view(self) -> None:
        view = b"," + b",".join(epoch for epoch in self.ids if epoch) + b","
        self.view = self._key + b":" + view
        if not self.slotted:
            self._quorum.view = self.view

    def request(self) -> None:
        if self.closed:
            return
        if self._running:
            self._again = True
            return
        self._running = True
        # Soon, not now: every STALE of one fan-out then asks for one census.
        self._quorum.running_loop().call_soon(self._start)

    async def first(self, wait: float, keys: Sequence[bytes] = ()) -> None:
        """Before this Redlock's first grant: the censuses, waited for at most ``wait`` s.

        Waited for alone: a caller cancelled or out of time leaves it running.
        Not done in time, the attempt goes out with the view it has; nodes
        missing from it answer STALE, which costs a vote, never safety.
        """
        if self.ready or self.closed:
            return
        self._quorum.running_loop()  # first: a loop moved to resets a census left running
        self.request()
        await self.refreshed(wait)

    def refreshing(self, keys: Sequence[bytes] = ()) -> bool:
        """Whether censuses are under way (a node answered STALE: the view
        is being read again)."""
        return self._running and not self.closed

    async def refreshed(self, wait: float, keys: Sequence[bytes] = ()) -> None:
        """Until the censuses under way are done, ``wait`` s at most."""
        if not self._running or self.closed:
            return
        waiter = self._quorum.running_loop().create_future()
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout(wait):
                await waiter
        except TimeoutError:
            pass

    def _start(self) -> None:
        if self.closed:
            self._running = False
            return
        self._again = False
        self.count += 1
        quorum = self._quorum
        loop = quorum.running_loop()
        notice, self._next = self._next, (b"", b"")
        stale, self._stale = self._stale, set()
        sent = loop.time()
        tally = quorum.fanout(Command(CENSUS, (self._key,), notice))
        _collect(tally, loop, lambda answers: self._finish(answers, sent, stale))

    def _finish(self, answers: Answers, sent: float, stale: set[int]) -> None:
        self._running = False
        if self.closed:
            return
        quorum = self._quorum
        now = quorum.running_loop().time()
        fields = _fields(answers, self._drift)
        # A census is not a snapshot: its read of one node may come before a
        # grant's write there, its read of another after that node lost the
        # grant. So an epoch enters the view only once the next census, sent
        # after this one was complete, hears it again: every read of that one
        # follows the loss, and its records cover every grant written before.
        watches = quorum.watches
        again = False
        if any(self.ids[i] == reply[0] for i, (reply, _) in answers.items() if i in stale):
            # A node answered STALE with its epoch unchanged: a notice refused
            # the view (lua/_epoch.lua). It names the new epoch of a node
            # that lost its data, which this census did not hear; so the
            # nodes not heard leave the view (they answer STALE until two
            # censuses in a row hear them), or it stays refused. Only then:
            # a view short of a node makes that node look lost to others.
            for index in range(quorum.n):
                if index not in answers:
                    self.ids[index] = self.candidates[index] = None
                    self.held.drop(index)
        for index, (reply, _) in answers.items():
            epoch = reply[0]
            assert isinstance(epoch, bytes)
            if self.ids[index] == epoch:
                continue  # in the view already, and unchanged
            name = quorum.nodes[index].name
            held = self.held.ends.get(index)
            if held is not None:
                if held[0] == epoch:
                    self.held.hold(index, epoch, lost_until(epoch, fields), now, name)
                    continue  # still out, until what this census read has expired too
                self.held.drop(index)  # a new epoch again: judged anew below
            if self.candidates[index] != epoch:
                if self.ids[index] is not None:
                    _log.info("redlock_async: %s has a new epoch (it lost its data)", name)
                    self.ids[index] = None  # out of the view: it answers STALE meanwhile
                self.candidates[index] = epoch
                again = True
                continue
            self.candidates[index] = None
            if self.slotted:
                self.held.hold(index, epoch, lost_until(epoch, fields), now, name)
                continue
            self.ids[index] = epoch
            watch = watches[index] if watches is not None else None
            if watch is None:
                continue
            until = lost_until(epoch, fields)
            if until > now:
                watch.suspect(until)
                _log.warning(
                    "redlock_async: %s lost its data while grants it may have held can still "
                    "be valid; its votes do not count for %.1fs",
                    name,
                    until - now,
                )
            watch.release()
        self._set_view()
        if again or self._again:
            self._next = census_args(answers, sent, quorum.n, self._drift)
            self.request()  # sent once this one is complete
            return
        self.ready = True
        self._wake()

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def reset(self) -> None:
        """The fan-outs moved to another loop or a forked child: what waited there is gone."""
        self._waiters = []
        self._running = self._again = False
        self._next = (b"", b"")
        self._stale = set()
        self.candidates = [None] * self._quorum.n  # their census's notice went with _next
        # Their timers were the old loop's: kept out, a node answers STALE
        # and the next census judges it again.
        self.held.clear()

    def close(self) -> None:
        self.closed = True
        self.held.clear(cancel=True)
        self._wake()
