"""Quarantine of nodes that restarted, the Redlock paper's crash-recovery rule.

A node that restarts without its data could grant a second holder while a
first grant is still valid. So when a node's ``run_id`` changes (seen on each
new connection), its yes votes do not count until the longest ttl granted
through this Redlock has passed since it came back. Strict mode also
quarantines a node whose uptime is below a grace period, for grants made by
other processes that this Redlock never saw.

The lean driver reads ``INFO server`` on every new connection; with a plain
redis-py client, which reconnects behind our back, ``server_id.lua`` rides in
the same pipeline as each granting script. Redis Cluster nodes are not
watched (an INFO there answers for an arbitrary shard).
"""

from __future__ import annotations

import logging
import re

from ._errors import NodeError
from ._node import Reply

__all__ = ["Restarts", "TtlLedger"]

_log = logging.getLogger("redlock_async")
_RUN_ID = re.compile(rb"run_id:([0-9a-f]+)")
_UPTIME = re.compile(rb"uptime_in_seconds:(\d+)")

# Redis reports uptime as the difference of two whole wall-clock seconds, so
# it overstates the time since start by up to one second (start at x.99,
# asked at y.01). Taking it at its word once cut a quarantine short by that
# much and let a second holder in; a quarantine always adds this second back.
UPTIME_RESOLUTION = 1.0


class TtlLedger:
    """The longest ttl granted through one Redlock: how long a quarantine lasts."""

    __slots__ = ("longest",)

    def __init__(self) -> None:
        self.longest = 0.0

    def granted(self, ttl: float) -> None:
        if ttl > self.longest:
            self.longest = ttl


class Restarts:
    """Restart detection and quarantine for one node."""

    __slots__ = ("_grace", "_ledger", "_name", "run_id", "until")

    def __init__(self, name: str, ledger: TtlLedger, grace: float | None) -> None:
        self._name = name
        self._ledger = ledger
        self._grace = grace
        self.run_id: bytes | None = None
        self.until = 0.0  # loop time until which yes votes do not count; 0: none

    def observe(self, info: bytes, now: float) -> None:
        """Read the raw ``INFO server`` text of a new connection."""
        run_id_match = _RUN_ID.search(info)
        uptime_match = _UPTIME.search(info)
        if run_id_match is None or uptime_match is None:
            return
        self.observe_fields(run_id_match.group(1), float(uptime_match.group(1)), now)

    def observe_fields(self, run_id: bytes, uptime: float, now: float) -> None:
        """Compare the server's run_id and uptime with what was seen before."""
        if not run_id:
            return
        seen, self.run_id = self.run_id, run_id
        span = 0.0
        # The least time the server can have been up.
        up_at_least = max(0.0, uptime - UPTIME_RESOLUTION)
        if seen is not None and seen != run_id:
            # Back since `up_at_least` seconds at the least; grants it may
            # have forgotten last at most the longest ttl from then.
            span = self._ledger.longest - up_at_least
            why = "restarted"
        elif self._grace is not None and up_at_least < self._grace:
            span = self._grace - up_at_least
            why = f"up for only {uptime:.0f}s (strict mode)"
        if span > 0:
            self.until = max(self.until, now + span)
            _log.warning(
                "redlock_async: %s %s; its votes do not count for %.1fs", self._name, why, span
            )

    def vote(self, reply: Reply, now: float) -> Reply:
        """A granting vote from this node: refused while quarantined."""
        if now >= self.until:
            self.until = 0.0
            return reply
        if type(reply) is int and reply > 0:
            return NodeError(
                f"{self._name} is quarantined after a restart for {self.until - now:.1f}s more"
            )
        return reply
