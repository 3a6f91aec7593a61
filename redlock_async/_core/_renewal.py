"""Background renewal of auto-extended grants: one schedule for every lock of a Redlock.

No task and no timer per lock. :class:`Renewals` keeps every held lock's
next renewal in a timetable (``_timetable.py``: buckets by due time, one
``TimerHandle`` for the earliest); the renewals due are sent in chunks of up
to ``_batch.CHUNK`` grants, one ``extend_many.lua`` call per node per chunk
(``_batch.py``), one chunk per loop iteration so that other tasks run
between them. Each grant is still judged on its own quorum. Holding 100,000
locks therefore costs one timer and a few script calls per tick, not
100,000 timers and 300,000 script calls a cycle.

Each lock's :class:`Renewer` is its entry in the timetable. The timetable
holds renewers strongly and a renewer holds its lock only weakly, so a lock
that is garbage-collected while held simply stops being renewed (its keys
then expire after one ttl). ``extend()`` is ``_extend.py``'s.

Schedule (the formulas are ``_timing``'s): a renewal is due when two thirds
of the ttl is still left, less a random spread of up to ttl/12, on a grid of
ttl/64 (renewals due close together share a bucket, hence a call). A renewal
that fails on too many nodes is retried while the grant is valid; when the
validity ends first (see ``loss_deadline``), or a quorum refuses (the keys
expired or belong to someone else), the lock is lost. A renewal due while
the event loop was blocked past the validity is not attempted: the loss is
reported as soon as the loop runs again.
"""

from __future__ import annotations

import asyncio
import logging
import math
import weakref
from collections.abc import Callable, Mapping
from functools import partial
from types import MappingProxyType
from typing import Any, Final, Generic, Self, TypeVar

from .._base._errors import NodeError
from .._base._observe import RENEWAL, debug
from .._base._timetable import Timetable
from .._base._timing import (
    extend_retry_interval,
    loss_deadline,
    loss_guard,
    renewal_due_in,
    validity,
)
from .._engine import Command, Engine, Tally, settled, vote_limit
from ._batch import CHUNK, Batch, extend_many
from ._commands import Commands
from ._grant import Grant, apply_votes
from ._grant import refused_by_counted as counted

__all__ = ["LoseCallback", "Renewals", "Renewer"]

_Owner = TypeVar("_Owner")

LoseCallback = Callable[[_Owner, str, Mapping[str, NodeError], bool], object]
"""Told (owner, reason, per-node errors, whether a quorum refused the grant)
when renewal cannot keep the grant."""

_NO_ERRORS: Final[Mapping[str, NodeError]] = MappingProxyType({})
_REFUSED = "a quorum of nodes refused the renewal (keys expired or taken)"
_NO_QUORUM = "renewals could not reach a quorum before its validity ended"
_BLOCKED = "its validity ended before the renewal could run (event loop blocked or overloaded?)"


class Renewer(weakref.ReferenceType[_Owner]):
    """A held lock's handle: the one weak reference to it, and its renewals.

    A lock makes its renewer when first held, and the renewer serves every
    registry that must know of the lock without keeping it alive: the
    ``Holdings`` set (``gone`` is told when the lock is garbage-collected),
    ``Owners`` (who holds each exclusive grant, and in which task) and,
    while it is auto-extended, the schedule - its entry in the timetable.
    Being the weak reference itself, rather than an object holding one,
    saves a weak reference, an object and a set entry per held lock
    (100,000 held locks cost 100,000 of each). ``extend()`` is ``_extend``'s.
    """

    __slots__ = (
        "commands",
        "errors",
        "grant",
        "in_flight",
        "key",
        "kind",
        "slot",
        "task",
    )

    def __new__(
        cls, owner: _Owner, commands: Commands, gone: Callable[[Renewer[Any]], object]
    ) -> Self:
        return super().__new__(cls, owner, gone)

    def __init__(
        self, owner: _Owner, commands: Commands, gone: Callable[[Renewer[Any]], object]
    ) -> None:
        # ReferenceType.__init__ would only check the arguments again.
        self.commands = commands
        # Its part of a batched call; an empty kind: renewed alone.
        self.kind, self.key = commands.renewal_target() or (b"", b"")
        self.grant: Grant | None = None  # the grant renewed; None when stopped
        self.slot: list[Renewer[_Owner]] | None = None  # the bucket it waits in
        self.in_flight: Batch[Renewer[_Owner]] | None = None
        # Of the renewals that failed in a row (reported with the loss).
        self.errors: Mapping[str, NodeError] = _NO_ERRORS
        # The task that took the grant, while it runs (Owners).
        self.task: asyncio.Task[Any] | None = None


class Renewals(Generic[_Owner]):
    """The renewals of every auto-extended lock of one Redlock (one engine).

    The renewers wait in a :class:`~._timetable.Timetable` (one timer for
    all); those due go out a chunk per loop iteration, one call per node per
    chunk, and come back as :class:`~._batch.Batch` decisions, applied here
    grant by grant.
    """

    def __init__(self, engine: Engine, lose: LoseCallback[_Owner]) -> None:
        self.engine = engine
        self.lose = lose
        # One call for many grants needs every node to accept keys of any
        # slot; with a Redis Cluster among the nodes, grants go one by one.
        self.batching = all(node.cross_slot for node in engine.nodes)
        self.timetable: Timetable[Renewer[_Owner]] = Timetable(self._fired)
        self._draining = False  # a _drain is scheduled for the next iteration

    def start(self, renewer: Renewer[_Owner], grant: Grant) -> None:
        """(Re)schedule ``renewer``'s next renewal of ``grant`` (a new grant, or a new ttl)."""
        self.stop(renewer)
        if type(grant.acquired) is Tally:
            _keep_votes(grant, grant.acquired)
        engine = self.engine
        loop = engine.loop()
        ttl = grant.ttl
        # rng.uniform(0, ttl/12), minus its Python frame (the same value).
        spread = ttl / 12.0 * engine.rng.random()
        renewer.grant = grant
        due = renewal_due_in(loop.time(), grant.validity_end - engine.clock(), ttl, spread)
        self.timetable.add(renewer, due, loop)

    def stop(self, renewer: Renewer[_Owner]) -> None:
        """No more renewals of ``renewer``; one in flight is ignored when it lands.

        Also for a lock held on an event loop that is gone (or before a
        fork): nothing of the old loop is touched, ``forget`` drops the timer.
        """
        renewer.in_flight = None
        renewer.grant = None
        self.timetable.discard(renewer)

    def _tell_lost(
        self,
        renewer: Renewer[_Owner],
        reason: str,
        errors: Mapping[str, NodeError],
        refused: bool = False,
    ) -> None:
        """The grant is lost; ``refused``: a quorum said so (its keys may then be
        released: no live copy of it can be left, see ``Lock._lose``)."""
        owner = renewer()
        if owner is not None:
            self.lose(owner, reason, errors, refused)

    def _retry(self, renewer: Renewer[_Owner], grant: Grant) -> None:
        # After the retry interval; when the loss deadline comes first, the
        # send then reports the loss instead. Not on the grid: a retry rounded
        # down to it could fall due at once, again and again.
        engine = self.engine
        config = engine.config
        left = loss_deadline(grant.validity_end, grant.ttl, config.node_timeout) - engine.clock()
        delay = max(0.0, min(extend_retry_interval(config.retry_delay, grant.ttl), left))
        if RENEWAL.isEnabledFor(logging.DEBUG):
            message = f"a renewal was not confirmed by a quorum; retry in {delay:.3f}s"
            debug(RENEWAL, message, outcome="retry", elapsed=left)
        renewer.grant = grant
        loop = engine.loop()
        self.timetable.add(renewer, loop.time() + delay, loop)

    def _fired(self) -> None:
        if not self._draining:
            self._drain()

    def _drain(self) -> None:
        """Send one chunk of the renewals due; the rest in the next loop iterations."""
        self._draining = False
        chunk: list[Renewer[_Owner]] = []
        for due, renewers in self.timetable.take(CHUNK):
            _sending(due, renewers)
            chunk += renewers
        if chunk:
            self._send(chunk)
        if self.timetable.due:
            self._draining = True
            self.engine.loop().call_soon(self._drain)

    def _send(self, chunk: list[Renewer[_Owner]]) -> None:
        engine = self.engine
        node_timeout = engine.config.node_timeout
        started = engine.clock()  # before the send: validity is counted from here
        batching = self.batching
        members: list[Renewer[_Owner]] = []  # in one call
        grants: list[Grant] = []
        alone: list[tuple[Renewer[_Owner], Grant]] = []  # each in a call of its own
        soonest = math.inf
        longest = 0.0
        member, granted = members.append, grants.append
        guards: dict[float, float] = {}  # loss_deadline's, by ttl: a few ttls, many grants
        for renewer in chunk:
            grant = renewer.grant
            if grant is None or renewer() is None:
                continue  # stopped, or its lock was garbage-collected
            ttl = grant.ttl
            guard = guards.get(ttl)
            if guard is None:
                guard = guards[ttl] = loss_guard(ttl, node_timeout)
            deadline = grant.validity_end - guard  # loss_deadline(validity_end, ttl, node_timeout)
            if started >= deadline:
                self._tell_lost(renewer, _unrenewed(renewer.errors), renewer.errors)
                continue
            if deadline < soonest:
                soonest = deadline
            if ttl > longest:
                longest = ttl
            if batching and renewer.kind:
                member(renewer)
                granted(grant)
            else:
                alone.append((renewer, grant))
        if not members and not alone:
            return
        engine.ttls.granted(longest)
        loop = engine.loop()
        batches = [
            self._batch(
                [renewer],
                [grant],
                started,
                renewer.commands.extend(grant.token, grant.ttl),
                alone=True,
            )
            for renewer, grant in alone
        ]
        if members:
            # A list reply is no vote to the tally, but the tally still times
            # out late nodes, by the rule of every fan-out (see _batch.py).
            batches.append(self._batch(members, grants, started, extend_many(members, grants)))
        decided_by = vote_limit(node_timeout)  # every batch is decided within this of the send
        if soonest - started < decided_by:
            # Retries close to their loss deadline: the verdict may come after
            # it, so the deadline is kept by a timer of its own.
            loop.call_later(soonest - started, self._overdue, batches, started + decided_by)

    def _batch(
        self,
        members: list[Renewer[_Owner]],
        grants: list[Grant],
        started: float,
        command: Command,
        *,
        alone: bool = False,
    ) -> Batch[Renewer[_Owner]]:
        tally = self.engine.fanout(command)
        batch = Batch(members, grants, started, tally, self._decided, alone=alone)
        for renewer in members:
            renewer.in_flight = batch
        return batch

    def _decided(self, batch: Batch[Renewer[_Owner]]) -> None:
        """Each grant of ``batch`` on its own: renewed, refused (lost), or retried."""
        engine = self.engine
        # Read once for the batch (a few hundred grants take a millisecond or
        # two): each renewal is then due that much earlier, never later.
        now = engine.clock()
        loop = engine.loop()
        loop_now = loop.time()
        started = batch.started
        drift_factor = engine.config.drift_factor
        quorum = engine.quorum
        spare = len(engine.nodes) - quorum  # refusals a quorum survives
        # What a quorum's yes gives, by ttl: the same for every grant of the
        # batch with that ttl (sent together, judged together) - when its
        # validity ends (one float for them all) and how long that is from now.
        ends: dict[float, tuple[float | None, float]] = {}
        # The usual batch: a quorum of nodes said yes to every grant. Then no
        # grant's votes need counting (each has a quorum of yes, so fewer
        # refusals than a quorum survives); otherwise, each grant's ballot.
        ballots = None if batch.unanimous(quorum) else batch.ballots()
        random = engine.rng.random
        # The renewed, by their next due time (a few times for a batch: the
        # grid), each group added to the timetable at once.
        renewed: dict[float, list[Renewer[_Owner]]] = {}
        members = zip(batch.members, batch.grants, strict=True)
        for position, (renewer, grant) in enumerate(members):
            votes = None if ballots is None else next(ballots)
            if renewer.in_flight is not batch:
                continue  # stopped (released, lost, extend()) while in flight
            renewer.in_flight = None
            ttl = grant.ttl
            end: float | None = None  # without a quorum of yes votes
            left = 0.0
            if votes is None or votes.count(1) >= quorum:
                shared = ends.get(ttl)
                if shared is None:
                    left = validity(ttl, started, now, drift_factor)
                    shared = ends[ttl] = (now + left if left > 0 else None, left)
                end, left = shared
            refused = votes is not None and votes.count(0) > spare and counted(batch.tally, votes)
            verdict = apply_votes(grant, end, refused, started, ttl, drift_factor)
            if verdict == "ok":
                renewer.errors = _NO_ERRORS
                # Next due as start() has it (a call less for each of 30,000
                # renewals a second).
                renewer.grant = grant
                due = renewal_due_in(loop_now, left, ttl, ttl / 12.0 * random())
                group = renewed.get(due)
                if group is None:
                    renewed[due] = [renewer]
                else:
                    group.append(renewer)
            elif verdict == "refused":
                self._tell_lost(renewer, _REFUSED, batch.errors(position), refused=True)
            else:
                renewer.errors = batch.errors(position)  # reported if the retries fail too
                self._retry(renewer, grant)
        add_all = self.timetable.add_all
        for due, group in renewed.items():
            add_all(group, due, loop)

    def _overdue(self, batches: list[Batch[Renewer[_Owner]]], expires: float) -> None:
        """Loss deadlines came while these renewals were undecided: those locks are lost."""
        engine = self.engine
        now = engine.clock()
        node_timeout = engine.config.node_timeout
        soonest = math.inf
        for batch in batches:
            if batch.decided:
                continue
            for renewer, grant in zip(batch.members, batch.grants, strict=True):
                if renewer.in_flight is not batch:
                    continue
                deadline = loss_deadline(grant.validity_end, grant.ttl, node_timeout)
                if now >= deadline:
                    renewer.in_flight = None
                    self._tell_lost(renewer, _NO_QUORUM, renewer.errors)
                elif deadline < soonest:
                    soonest = deadline
        if soonest < expires:
            engine.loop().call_later(soonest - now, self._overdue, batches, expires)

    def close(self) -> None:
        """Every lock is lost (``aclose()``): nothing more to renew."""
        self.timetable.close()
        self._draining = False

    def forget(self) -> None:
        """The locks were another loop's (or the parent's): drop, touching nothing of it."""
        self.timetable.forget()
        self._draining = False


def _unrenewed(errors: Mapping[str, NodeError]) -> str:
    """Why a grant whose loss deadline came before a renewal is lost: retries
    were not confirmed (``errors``, a retry's; empty when no node failed:
    refusals of nodes whose votes do not count, ``_grant.refused_by_counted``),
    or none was tried (``_NO_ERRORS``: the event loop was held up)."""
    return _BLOCKED if errors is _NO_ERRORS else _NO_QUORUM


def _keep_votes(grant: Grant, acquired: Tally) -> None:
    """What a renewed grant keeps of its acquire fan-out: its votes (``Settled``),
    once every node has answered - now, or when the last reply lands (half the
    grants of a burst: the decision did not wait for it). Not at the first
    renewal: a third of a ttl later, the tallies of thousands of grants freed
    together left holes in memory that new objects never filled."""
    if acquired.missing:
        then = partial(_acquire_settled, grant, acquired)
        for index in range(acquired.n):
            acquired.when_settled(index, then)
    else:
        grant.acquired = settled(acquired.replies)


def _acquire_settled(grant: Grant, tally: Tally, _: object) -> None:
    """A node answered ``grant``'s acquire (``tally``): once all have, keep just the votes."""
    if not tally.missing and grant.acquired is tally:
        grant.acquired = settled(tally.replies)


def _sending(due: float, renewers: list[Renewer[_Owner]]) -> None:
    """``renewers``, due at ``due``, go out now (the benchmark measures the lag here)."""
