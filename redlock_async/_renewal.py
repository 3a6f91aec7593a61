"""Background renewal of one lock's auto-extended grant.

No task per lock: a held lock has at most one ``TimerHandle`` in the event
loop's scheduler, and each renewal is a fan-out whose outcome arrives as a
callback. Holding 10,000 locks therefore costs 10,000 timers, not 10,000
sleeping coroutines. Timers and callbacks hold the renewer only weakly, and
the renewer holds its lock only weakly, so a lock that is garbage-collected
while held simply stops being renewed (its keys then expire after one ttl).

Schedule (the formulas are ``_timing``'s): a renewal is due when two thirds
of the ttl is still left, less a random spread of up to ttl/12, on a grid of
ttl/64. A renewal that fails on too many nodes is retried while the grant is
valid; when the validity ends first (see ``loss_deadline``), or a quorum
refuses (the keys expired or belong to someone else), the lock is lost. A
renewal due while the event loop was blocked past the validity is not
attempted: the loss is reported as soon as the loop runs again.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Mapping
from functools import partial
from typing import Generic, TypeVar

from ._commands import Commands
from ._engine import Engine, Tally
from ._errors import NodeError
from ._grant import Grant, Verdict, judge_extend
from ._timing import extend_retry_interval, loss_deadline, renewal_delay, renewal_due

__all__ = ["LoseCallback", "Renewer"]

_Owner = TypeVar("_Owner")

LoseCallback = Callable[[_Owner, str, Mapping[str, NodeError]], object]
"""Told (owner, reason, per-node errors) when renewal cannot keep the grant."""


class Renewer(Generic[_Owner]):
    """Sends one lock's extends: on demand (``send``) and on a schedule (``start``)."""

    __slots__ = (
        "__weakref__",
        "_commands",
        "_engine",
        "_lose",
        "_owner",
        "_timer",
        "errors",
        "in_flight",
    )

    def __init__(
        self,
        engine: Engine,
        commands: Commands,
        owner: weakref.ReferenceType[_Owner],
        lose: LoseCallback[_Owner],
    ) -> None:
        self._engine = engine
        self._commands = commands
        # The owner (the lock) weakly: it owns its renewer, and a strong
        # reference back would keep a forgotten lock (and its renewals)
        # alive until a cycle collection. ``lose(owner, ...)`` tells it.
        self._owner = owner
        self._lose = lose
        self._timer: asyncio.TimerHandle | None = None
        self.in_flight: Tally | None = None
        # Of the renewals that failed in a row (reported with the loss).
        self.errors: Mapping[str, NodeError] = {}

    def send(self, grant: Grant, ttl: float) -> Tally:
        """One extend of ``grant`` to ``ttl``, on every node."""
        engine = self._engine
        engine.ttls.granted(ttl)
        return engine.fanout(self._commands.extend(grant.token, ttl))

    def judge(self, grant: Grant, tally: Tally, started: float, ttl: float) -> Verdict:
        """Apply a decided extend (sent at ``started``) to ``grant``."""
        engine = self._engine
        return judge_extend(grant, tally, started, engine.clock(), ttl, engine.config.drift_factor)

    def retry_interval(self, grant: Grant) -> float:
        return extend_retry_interval(self._engine.config.retry_delay, grant.ttl)

    async def extend_now(
        self, grant: Grant, ttl: float, still_held: Callable[[], bool]
    ) -> tuple[str, Mapping[str, NodeError]] | None:
        """``Lock.extend()``: renew ``grant`` to ``ttl`` now, retrying while it is valid.

        Returns None when renewed, else why it is lost (reason, per-node
        errors); the schedule is stopped and left for the caller to restart.
        """
        await self.settle()  # a renewal in flight lands first: no race with it
        self.stop()
        engine = self._engine
        while still_held():
            started = engine.clock()
            if started >= grant.validity_end:
                return "its validity ended before it could be extended", {}
            tally = self.send(grant, ttl)
            await tally.decided
            verdict = self.judge(grant, tally, started, ttl)
            if verdict == "ok":
                return None
            if verdict == "refused":
                return "a quorum of nodes no longer holds it", tally.errors()
            wait = min(self.retry_interval(grant), grant.validity_end - engine.clock())
            if wait > 0:
                await asyncio.sleep(wait)
        return "it was released or lost meanwhile", {}

    async def settle(self) -> None:
        """Wait for a renewal in flight, so that an extend cannot race it."""
        in_flight = self.in_flight
        if in_flight is not None and not in_flight.decided.done():
            await asyncio.shield(in_flight.decided)

    def start(self, grant: Grant) -> None:
        """(Re)schedule the next renewal of ``grant``."""
        self.stop()
        left = grant.validity_end - self._engine.clock()
        spread = self._engine.rng.uniform(0.0, grant.ttl / 12.0)
        self._schedule(grant, renewal_delay(left, grant.ttl, spread))

    def stop(self) -> None:
        """No more renewals; one in flight is ignored when it lands."""
        self.in_flight = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def forget(self) -> None:
        """Like ``stop``, for a timer of an event loop that is gone (not cancelled there)."""
        self.in_flight = None
        self._timer = None

    def _schedule(self, grant: Grant, delay: float) -> None:
        loop = self._engine.loop()
        due = renewal_due(loop.time(), delay, grant.ttl)
        self._timer = loop.call_at(due, _tick, weakref.ref(self), grant, due)

    def _deadline(self, grant: Grant) -> float:
        return loss_deadline(grant.validity_end, grant.ttl, self._engine.config.node_timeout)

    def _tell_lost(self, reason: str, errors: Mapping[str, NodeError]) -> None:
        owner = self._owner()
        if owner is not None:
            self._lose(owner, reason, errors)

    def tick(self, ref: weakref.ReferenceType[Renewer[_Owner]], grant: Grant) -> None:
        self._timer = None
        started = self._engine.clock()
        deadline = self._deadline(grant)
        if started >= deadline:
            if self.errors:
                reason = "renewals could not reach a quorum before its validity ended"
            else:
                reason = "its validity ended before the renewal could run (event loop blocked?)"
            self._tell_lost(reason, self.errors)
            return
        tally = self.in_flight = self.send(grant, grant.ttl)
        tally.decided.add_done_callback(partial(_renewed, ref, grant, tally, started))
        guard = deadline - started
        if guard < self._engine.config.node_timeout:
            # A retry close to the loss deadline: its verdict may come after
            # it, so the deadline is kept by a timer of its own.
            self._timer = self._engine.loop().call_later(guard, _overdue, ref, tally)

    def overdue(self, tally: Tally) -> None:
        """The loss deadline came while ``tally`` (a renewal) was undecided: lost."""
        self._timer = None
        if self.in_flight is tally and not tally.decided.done():
            reason = "renewals could not reach a quorum before its validity ended"
            self._tell_lost(reason, self.errors)

    def renewed(self, grant: Grant, tally: Tally, started: float) -> None:
        if self.in_flight is not tally:
            return  # stopped (released or lost) while the renewal was in flight
        self.in_flight = None
        if self._timer is not None:  # the overdue check of this renewal
            self._timer.cancel()
            self._timer = None
        verdict = self.judge(grant, tally, started, grant.ttl)
        if verdict == "ok":
            self.errors = {}
            self.start(grant)
        elif verdict == "refused":
            reason = "a quorum of nodes refused the renewal (keys expired or taken)"
            self._tell_lost(reason, tally.errors())
        else:
            self.errors = tally.errors()  # reported if the next tries fail too
            left = self._deadline(grant) - self._engine.clock()
            # Retry after the retry interval; when the loss deadline comes
            # first, the tick then reports the loss. Not on the grid: a retry
            # rounded down to it could fall due at once, again and again.
            delay = max(0.0, min(self.retry_interval(grant), left))
            loop = self._engine.loop()
            due = loop.time() + delay
            self._timer = loop.call_at(due, _tick, weakref.ref(self), grant, due)


def _tick(ref: weakref.ReferenceType[Renewer[_Owner]], grant: Grant, due: float) -> None:
    # ``due``: when this renewal was meant to run (the benchmark measures the lag).
    renewer = ref()
    if renewer is not None and renewer._timer is not None:
        renewer.tick(ref, grant)


def _overdue(ref: weakref.ReferenceType[Renewer[_Owner]], tally: Tally) -> None:
    renewer = ref()
    if renewer is not None:
        renewer.overdue(tally)


def _renewed(
    ref: weakref.ReferenceType[Renewer[_Owner]],
    grant: Grant,
    tally: Tally,
    started: float,
    _: object,
) -> None:
    renewer = ref()
    if renewer is not None:
        renewer.renewed(grant, tally, started)
