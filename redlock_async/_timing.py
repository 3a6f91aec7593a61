"""Pure timing math for Redlock grants, on the monotonic clock.

Kept free of I/O so unit tests can check it exactly with made-up clock values.
"""

from __future__ import annotations

__all__ = ["CLOCK_DRIFT_FLOOR", "drift", "ttl_ms", "validity"]

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
    return ttl - (now - started) - (ttl * drift_factor + CLOCK_DRIFT_FLOOR)  # drift(), inlined


def ttl_ms(ttl: float) -> int:
    """Whole milliseconds for PX/PEXPIRE, rounded down so keys never outlive ``ttl``."""
    return max(1, int(ttl * 1000))
