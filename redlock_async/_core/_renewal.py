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
from types import MappingProxyType
from typing import Final, Generic, TypeVar

from .._base._errors import NodeError
from .._base._observe import RENEWAL, debug
from .._base._timetable import Timetable
from .._base._timing import (
    extend_retry_interval,
    loss_deadline,
    renewal_delay,
    renewal_due,
    ttl_ms,
    validity,
)
from .._engine import Command, Engine, vote_limit
from ._batch import CHUNK, Batch, extend_many
from ._commands import Commands
from ._grant import Grant, apply_votes

__all__ = ["LoseCallback", "Renewals", "Renewer"]

_Owner = TypeVar("_Owner")

LoseCallback = Callable[[_Owner, str, Mapping[str, NodeError], bool], object]
"""Told (owner, reason, per-node errors, whether a quorum refused the grant)
when renewal cannot keep the grant."""

_NO_ERRORS: Final[Mapping[str, NodeError]] = MappingProxyType({})
_REFUSED = "a quorum of nodes refused the renewal (keys expired or taken)"
_NO_QUORUM = "renewals could not reach a quorum before its validity ended"
_BLOCKED = "its validity ended before the renewal could run (event loop blocked or overloaded?)"


class Renewer(Generic[_Owner]):
    """One lock's renewals: its entry in the schedule (``extend()`` is ``_extend``'s)."""

    __slots__ = (
        "commands",
        "errors",
        "grant",
        "in_flight",
        "key",
        "kind",
        "owner",
        "schedule",
        "slot",
        "ttl_ms",
    )

    def __init__(
        self,
        schedule: Renewals[_Owner],
        commands: Commands,
        owner: weakref.ReferenceType[_Owner],
    ) -> None:
        self.schedule = schedule
        self.commands = commands
        # The owner (the lock) weakly: it owns its renewer, and a strong
        # reference back would keep a forgotten lock (and its renewals)
        # alive. ``Renewals.lose(owner, ...)`` tells it.
        self.owner = owner
        # Its part of a batched call; an empty kind: renewed alone.
        self.kind, self.key = commands.renewal_target() or (b"", b"")
        self.grant: Grant | None = None  # the grant renewed; None when stopped
        self.ttl_ms = 0  # the grant's ttl as sent
        self.slot: list[Renewer[_Owner]] | None = None  # the bucket it waits in
        self.in_flight: Batch[Renewer[_Owner]] | None = None
        # Of the renewals that failed in a row (reported with the loss).
        self.errors: Mapping[str, NodeError] = _NO_ERRORS

    async def settle(self) -> None:
        """Wait for a renewal in flight, so that an extend cannot race it."""
        in_flight = self.in_flight
        if in_flight is not None and not in_flight.decided:
            await asyncio.shield(in_flight.wait())

    def start(self, grant: Grant) -> None:
        """(Re)schedule the next renewal of ``grant``."""
        self.stop()
        self.schedule.start(self, grant)

    def stop(self) -> None:
        """No more renewals; one in flight is ignored when it lands."""
        self.in_flight = None
        self.grant = None
        self.schedule.timetable.discard(self)

    def forget(self) -> None:
        """Like ``stop``, for a lock held on an event loop that is gone (or before a fork).

        Nothing of the old loop is touched: the schedule drops its timer itself.
        """
        self.stop()

    def tell_lost(
        self, reason: str, errors: Mapping[str, NodeError], refused: bool = False
    ) -> None:
        """The grant is lost; ``refused``: a quorum said so (its keys may then be
        released: no live copy of it can be left, see ``Lock._lose``)."""
        owner = self.owner()
        if owner is not None:
            self.schedule.lose(owner, reason, errors, refused)


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
        # One int object per distinct ttl in ms, not one per held lock.
        self._ms: dict[int, int] = {}

    def start(self, renewer: Renewer[_Owner], grant: Grant) -> None:
        """Schedule ``renewer``'s next renewal of ``grant`` (a new grant, or a new ttl)."""
        ms = ttl_ms(grant.ttl)
        renewer.ttl_ms = self._ms.setdefault(ms, ms) if len(self._ms) < 256 else ms
        engine = self.engine
        loop = engine.loop()
        self._again(renewer, grant, grant.validity_end - engine.clock(), loop.time(), loop)

    def _again(
        self,
        renewer: Renewer[_Owner],
        grant: Grant,
        left: float,
        now: float,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        """Schedule the renewal of ``grant``, ``left`` seconds valid at loop time ``now``."""
        ttl = grant.ttl
        # rng.uniform(0, ttl/12), minus its Python frame (the same value).
        spread = ttl / 12.0 * self.engine.rng.random()
        renewer.grant = grant
        self.timetable.add(renewer, renewal_due(now, renewal_delay(left, ttl, spread), ttl), loop)

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
        for renewer in chunk:
            grant = renewer.grant
            if grant is None or renewer.owner() is None:
                continue  # stopped, or its lock was garbage-collected
            deadline = loss_deadline(grant.validity_end, grant.ttl, node_timeout)
            if started >= deadline:
                renewer.tell_lost(_NO_QUORUM if renewer.errors else _BLOCKED, renewer.errors)
                continue
            if deadline < soonest:
                soonest = deadline
            if grant.ttl > longest:
                longest = grant.ttl
            if batching and renewer.kind:
                members.append(renewer)
                grants.append(grant)
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
        # The validity a quorum's yes leaves, by ttl: the same for every grant
        # of the batch with that ttl (sent together, judged together).
        lefts: dict[float, float] = {}
        outcomes = zip(batch.members, batch.grants, batch.ballots(), strict=True)
        for position, (renewer, grant, votes) in enumerate(outcomes):
            if renewer.in_flight is not batch:
                continue  # stopped (released, lost, extend()) while in flight
            renewer.in_flight = None
            ttl = grant.ttl
            left = 0.0  # without a quorum of yes votes
            if votes.count(1) >= quorum:
                shared = lefts.get(ttl)
                if shared is None:
                    shared = lefts[ttl] = validity(ttl, started, now, drift_factor)
                left = shared
            refused = votes.count(0) > spare
            verdict = apply_votes(grant, left, refused, started, now, ttl, drift_factor)
            if verdict == "ok":
                renewer.errors = _NO_ERRORS
                self._again(renewer, grant, grant.validity_end - now, loop_now, loop)
            elif verdict == "refused":
                renewer.tell_lost(_REFUSED, batch.errors(position), refused=True)
            else:
                renewer.errors = batch.errors(position)  # reported if the retries fail too
                self._retry(renewer, grant)

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
                    renewer.tell_lost(_NO_QUORUM, renewer.errors)
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


def _sending(due: float, renewers: list[Renewer[_Owner]]) -> None:
    """``renewers``, due at ``due``, go out now (the benchmark measures the lag here)."""
