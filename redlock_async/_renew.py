"""Background renewal of auto-extended grants.

No task per lock: each held lock has at most one ``TimerHandle`` in the event
loop's scheduler, and each renewal is a fan-out whose outcome arrives as a
callback. Holding 10,000 locks therefore costs 10,000 timers, not 10,000
sleeping coroutines. Timers and callbacks hold the lock only weakly, so a lock
that is garbage-collected while held simply stops being renewed (its keys then
expire after one ttl).

Schedule: a renewal is due when two thirds of the ttl is still left (about
every ttl/3), less a random spread of up to ttl/12 so that locks taken
together do not renew together. A renewal that fails on too many nodes is retried while the
grant is valid; when the validity ends first, or a quorum refuses (the keys
expired or belong to someone else), the lock is lost. A renewal due while the
event loop was blocked past the validity is not attempted: the lock is
reported lost as soon as the loop runs again.
"""

from __future__ import annotations

import asyncio
import random
import weakref
from functools import partial

from ._engine._quorum import Tally
from ._lock import Grant, Lock

__all__ = ["start_renewal"]

_LockRef = weakref.ReferenceType[Lock]


def start_renewal(lock: Lock) -> None:
    """(Re)schedule the next renewal of ``lock``'s current grant."""
    lock._cancel_renewal_timer()
    grant = lock._grant
    if grant is None:
        return
    core = lock._core
    left = grant.validity_end - core.clock()
    # Up to ttl/12 early, at random: locks taken in one burst would otherwise
    # renew in one burst forever after, and the last of them would run late.
    spread = random.uniform(0.0, grant.ttl / 12.0)
    _schedule(lock, grant, max(0.0, left - 2.0 * grant.ttl / 3.0 - spread))


def _loss_deadline(lock: Lock, grant: Grant) -> float:
    """When to give up: a little before validity ends, not at it.

    A renewal needs up to node_timeout to be decided, and cancelling the
    holder's body takes effect only at its next await: declaring the loss
    that much early keeps the holder from working past its validity.
    """
    guard = min(lock._core.config.node_timeout, grant.ttl / 10.0)
    return grant.validity_end - guard


def _schedule(lock: Lock, grant: Grant, delay: float) -> None:
    loop = lock._core.loop()
    due = loop.time() + delay
    # Round down to a grid of ttl/64 (1-50 ms): renewals due close together
    # then fire in the same loop iteration and share one write per node,
    # which is most of their cost when thousands of locks are held.
    grid = min(0.05, max(0.001, grant.ttl / 64.0))
    due = max(loop.time(), due - due % grid)
    lock._renew_timer = loop.call_at(due, _tick, weakref.ref(lock), grant, due)


def _tick(ref: _LockRef, grant: Grant, due: float) -> None:
    # ``due``: when this renewal was meant to run (the benchmark measures the lag).
    lock = ref()
    if lock is None or lock._grant is not grant:
        return
    lock._renew_timer = None
    core = lock._core
    started = core.clock()
    if started >= _loss_deadline(lock, grant):
        failed = lock._errors  # of the renewals that failed so far (reset on each grant)
        if failed:
            lock._lose("renewals could not reach a quorum before its validity ended", failed)
        else:
            lock._lose("its validity ended before the renewal could run (event loop blocked?)", {})
        return
    tally = lock._send_extend(grant, grant.ttl)
    lock._renewing = tally
    tally.decided.add_done_callback(partial(_renewed, ref, grant, tally, started))


def _renewed(
    ref: _LockRef, grant: Grant, tally: Tally, started: float, _: asyncio.Future[bool]
) -> None:
    lock = ref()
    if lock is None:
        return
    if lock._renewing is tally:
        lock._renewing = None
    if lock._grant is not grant:
        return  # released or lost while the renewal was in flight
    verdict = lock._judge_extend(grant, tally, started, grant.ttl)
    if verdict == "ok":
        lock._errors = {}
        start_renewal(lock)
    elif verdict == "refused":
        lock._lose("a quorum of nodes refused the renewal (keys expired or taken)", tally.errors())
    else:
        lock._errors = tally.errors()  # reported if the next tries fail too
        left = _loss_deadline(lock, grant) - lock._core.clock()
        # Retry soon; if that is past the validity, the tick reports the loss.
        _schedule(lock, grant, max(0.0, min(lock._retry_interval(grant), left)))
