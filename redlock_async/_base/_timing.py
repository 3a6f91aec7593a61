"""Pure timing math for Redlock grants, on the monotonic clock.

Every formula the lock layer applies to time lives here, free of I/O, so
unit tests check it exactly with made-up clock values - and what they test
is the code that runs (the lock layer calls these, nothing inlines them).
"""

from __future__ import annotations

import random

__all__ = [
    "CLOCK_DRIFT_FLOOR",
    "drift",
    "extend_retry_interval",
    "fair_heartbeat",
    "loss_deadline",
    "loss_guard",
    "renewal_delay",
    "renewal_due",
    "renewal_due_in",
    "retry_delay",
    "shortened_validity_end",
    "ttl_ms",
    "validity",
    "writer_marker_ttl",
]

# A fixed 2 ms allowance on top of the proportional drift: Redis expires keys
# with millisecond resolution, so even a perfect clock can be 1 ms early, and
# the rest covers the time between the node's reply and our reading the clock.
CLOCK_DRIFT_FLOOR = 0.002


def drift(ttl: float, drift_factor: float) -> float:
    """Clock-drift allowance for a grant of ``ttl`` seconds."""
    return ttl * drift_factor + CLOCK_DRIFT_FLOOR


def validity(ttl: float, started: float, now: float, drift_factor: float) -> float:
    """Seconds a grant is guaranteed valid, seen from ``now``.

    ``started`` is the monotonic time taken *before* the first command was
    sent: the nodes' key TTLs began no earlier than that, so measuring from it
    never overstates what is left. A result <= 0 means the grant is unusable.
    """
    return ttl - (now - started) - drift(ttl, drift_factor)


def shortened_validity_end(started: float, ttl: float, drift_factor: float) -> float:
    """After an extend to ``ttl`` sent at ``started`` failed: when nodes it reached expire.

    Those nodes now drop the key ``ttl`` after ``started`` at the earliest,
    so a shorter ttl than the grant had left shortens what a majority holds.
    """
    return started + ttl - drift(ttl, drift_factor)


def ttl_ms(ttl: float) -> int:
    """Whole milliseconds for PX/PEXPIRE, rounded down so keys never outlive ``ttl``."""
    return max(1, int(ttl * 1000))


def retry_delay(base: float, jitter: float, rng: random.Random) -> float:
    """Wait before the next attempt: ``base`` plus uniform ``[0, jitter)``.

    The jitter spreads contenders that failed together, so they do not
    collide again on their next attempt.
    """
    return base + rng.uniform(0.0, jitter)


def extend_retry_interval(retry_delay: float, ttl: float) -> float:
    """Wait between tries of an extend that failed on too many nodes."""
    return min(retry_delay, ttl / 6.0)


def fair_heartbeat(node_timeout: float) -> float:
    """How long a fair waiter's queue entry lives without being refreshed.

    A crashed waiter stops blocking the queue after this; live waiters refresh
    their entry with every attempt, at least three times per heartbeat.
    """
    return max(1.0, 10.0 * node_timeout)


def writer_marker_ttl(retry_delay: float, retry_jitter: float) -> float:
    """How long a waiting writer's marker holds new readers back.

    Renewed by every attempt, it outlives a few retry intervals, so a writer
    that crashed stops holding readers back soon after.
    """
    return max(0.1, 3.0 * (retry_delay + retry_jitter))


def renewal_delay(left: float, ttl: float, spread: float) -> float:
    """Seconds until a grant with ``left`` seconds of validity is renewed.

    Due when two thirds of the ttl is still left (about every ttl/3), less
    ``spread`` (the caller draws it from ``[0, ttl/12)``): locks taken in one
    burst would otherwise renew in one burst forever after.
    """
    return max(0.0, left - 2.0 * ttl / 3.0 - spread)


def renewal_due(now: float, delay: float, ttl: float) -> float:
    """The loop time a renewal ``delay`` from ``now`` fires at.

    Rounded down to a grid of ttl/64 (1-50 ms): renewals due close together
    then fire in the same loop iteration and share one write per node, which
    is most of their cost when thousands of locks are held.
    """
    due = now + delay
    grid = min(0.05, max(0.001, ttl / 64.0))
    return max(now, due - due % grid)


def renewal_due_in(now: float, left: float, ttl: float, spread: float) -> float:
    """``renewal_due(now, renewal_delay(left, ttl, spread), ttl)``: the loop time the
    renewal of a grant ``left`` seconds valid at ``now`` fires at.

    The two formulas written out in one function (the same operations, so the
    same float): the renewal schedule calls this 30,000 times a second for
    100,000 held locks, and two calls cost more than their arithmetic.
    ``tests/unit/test_timing.py`` holds it equal to the composition.
    """
    due = now + max(0.0, left - 2.0 * ttl / 3.0 - spread)
    grid = ttl / 64.0
    if grid > 0.05:
        grid = 0.05
    elif grid < 0.001:
        grid = 0.001
    due -= due % grid
    return due if due > now else now


def loss_deadline(validity_end: float, ttl: float, node_timeout: float) -> float:
    """When renewal gives up on a grant: a little before its validity ends.

    A renewal needs up to ``node_timeout`` to be decided, and cancelling the
    holder's body takes effect only at its next await: declaring the loss that
    much early keeps the holder from working past its validity.
    """
    return validity_end - loss_guard(ttl, node_timeout)


def loss_guard(ttl: float, node_timeout: float) -> float:
    """How long before its validity ends a grant of ``ttl`` is given up (``loss_deadline``)."""
    return min(node_timeout, ttl / 10.0)
