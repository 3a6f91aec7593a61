"""Quarantine of nodes that restarted, the Redlock paper's crash-recovery rule.

A node that restarts without its data could grant a second holder while a
first grant is still valid. Which grants it may have held, only the other
nodes know: the epochs census (``_epochs.py``) reads them and marks the node
``suspect`` for as long as one of those grants may live, whoever made it,
with any ttl. This watch adds what the server's ``run_id`` (seen on each new
connection) tells: a restart this Redlock sees keeps the node's votes out
for ``MIN_QUARANTINE`` at least (fencing tokens). Strict mode
(``quarantine_grace``) also quarantines a node whose uptime is below a grace
period: an extra margin.

Drivers only report what they see of the server (``observe``,
``observe_fields``, ``unknown``): the lean driver reads ``INFO server`` on
every new connection; with a plain redis-py client, which reconnects behind
our back, ``server_id.lua`` rides in the same pipeline as each granting
script. Redis Cluster nodes are not watched (an INFO there answers for an
arbitrary shard). The engine alone turns a quarantined node's yes into a
failed vote: ``Tally.settle`` calls ``vote`` for the replies of granting
scripts (``Script.grants``), whichever driver served the node.

Detection fails closed: when a node refuses INFO (an ACL such as
``+@all -@dangerous``) or its reply lacks the fields, its restarts cannot be
seen, so its yes votes do not count either, until an INFO succeeds again
(docs/security.md).
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from .._base._errors import NodeError, NodeResponseError

__all__ = ["MIN_QUARANTINE", "Restarts", "TtlLedger", "counted_refusals", "restart_span"]

_Reply = TypeVar("_Reply")

_log = logging.getLogger("redlock_async.node")
_RUN_ID = re.compile(rb"run_id:([0-9a-f]+)")
_UPTIME = re.compile(rb"uptime_in_seconds:(\d+)")

# Redis reports uptime as the difference of two whole wall-clock seconds, so
# it overstates the time since start by up to one second (start at x.99,
# asked at y.01). Taking it at its word once cut a quarantine short by that
# much and let a second holder in; a quarantine always adds this second back.
UPTIME_RESOLUTION = 1.0

# The shortest quarantine of a restarted node. Fencing counters resume at the
# node's clock in whole seconds (lua/_fence.lua): two seconds after a restart
# that clock is past every token handed out before it, as long as node clocks
# agree within one second (docs/fencing.md). Lock grants are the census's.
MIN_QUARANTINE = 2.0

_DOCS = "docs/security.md"  # where messages send operators for the fix


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

    __slots__ = (
        "_blind", "_cause", "_failover", "_grace", "_ledger", "_name", "_quarantine",
        "held", "on_restart", "run_id", "until",
    )  # fmt: skip

    def __init__(
        self, name: str, ledger: TtlLedger, grace: float | None, *, failover: bool = False
    ) -> None:
        """``failover``: the node's address may move to another, long-running
        server (a Sentinel-managed primary): its uptime then says nothing of
        when it lost data, so a new run_id is quarantined for the full span."""
        self._name = name
        self._failover = failover
        self._ledger = ledger
        self._grace = grace
        self.run_id: bytes | None = None
        # Told when the run_id changes (the epochs census: a server restarted
        # from disk, or a promoted replica, gets a new epoch there).
        self.on_restart: Callable[[], None] | None = None
        # Set by on_restart's census: no yes vote counts at all until it has
        # read the node again (a restart from disk keeps an old epoch).
        self.held = False
        # Loop time until which yes votes do not count; 0: none; inf: restarts
        # cannot be detected. The engine consults vote() only when it is
        # truthy, so the fine case costs one attribute test per granting yes.
        self.until = 0.0
        self._quarantine = 0.0  # end of the current quarantine after a restart
        self._blind: str | None = None  # why restarts cannot be seen, and the fix
        self._cause: BaseException | None = None  # what INFO answered

    def unknown(self, error: BaseException | str) -> None:
        """This node's restarts cannot be detected: INFO answered ``error``
        (the driver's exception when refused, a description when it lacks fields).

        Its yes votes are refused until a later ``observe`` succeeds; the first
        time (not on every connection or vote) a WARNING says how to fix it.
        """
        fresh = self._blind is None
        # An exception: INFO was refused; a str: it answered without the fields.
        self._cause = error if isinstance(error, BaseException) else None
        fix = "see" if self._cause is None else "grant the ACL user +info, see"
        if "NOAUTH" in str(error) or "WRONGPASS" in str(error):
            fix = "the login failed (check the URL's user and password), see"
        self._blind = f"{self._name}: restart detection needs INFO ({error}); {fix} {_DOCS}"
        self.until = math.inf
        if fresh:
            _log.warning("redlock_async: %s; its yes votes do not count", self._blind)

    def observe(self, info: bytes, now: float) -> None:
        """Read the raw ``INFO server`` text of a new connection."""
        run_id_match = _RUN_ID.search(info)
        uptime_match = _UPTIME.search(info)
        if run_id_match is None or uptime_match is None:
            self.unknown("its INFO server reply has no run_id or uptime_in_seconds")
            return
        self.observe_fields(run_id_match.group(1), float(uptime_match.group(1)), now)

    def observe_fields(self, run_id: bytes, uptime: float, now: float) -> None:
        """Compare the server's run_id and uptime with what was seen before."""
        if not run_id:
            self.unknown("its INFO server reply has no run_id")
            return
        if self._blind is not None:
            _log.info("redlock_async: %s answers INFO again; its votes count", self._name)
            self._blind = self._cause = None
        # A restart while blind is caught here too: run_id is the last one seen.
        seen, self.run_id = self.run_id, run_id
        span = 0.0
        # The least time the server can have been up.
        up_at_least = max(0.0, uptime - UPTIME_RESOLUTION)
        if seen is not None and seen != run_id:
            # Back since `up_at_least` seconds at the least; grants it may
            # have forgotten last at most the longest ttl from then. A
            # promoted replica may have been up for long, yet lack the old
            # primary's last grants: the span runs from now.
            span = restart_span(self._ledger) - (0.0 if self._failover else up_at_least)
            why = "failed over" if self._failover else "restarted"
            if self.on_restart is not None:
                self.on_restart()
        elif self._grace is not None and up_at_least < self._grace:
            span = self._grace - up_at_least
            why = f"up for only {uptime:.0f}s (strict mode)"
        if span > 0:
            self._quarantine = max(self._quarantine, now + span)
            _log.warning(
                "redlock_async: %s %s; its votes do not count for %.1fs", self._name, why, span
            )
        self.until = math.inf if self.held else self._quarantine

    def hold(self) -> None:
        """No yes vote counts until ``release()`` (the census judged the node again)."""
        self.held = True
        self.until = math.inf

    def release(self) -> None:
        self.held = False
        if self._blind is None:
            self.until = self._quarantine

    def suspect(self, until: float) -> None:
        """A census found grants this node may have lost: its yes votes do not
        count before loop time ``until`` (``_epochs.py``)."""
        self._quarantine = max(self._quarantine, until)
        if self._blind is None and not self.held:
            self.until = self._quarantine

    def vote(self, reply: _Reply, now: float) -> _Reply | NodeError:
        """A granting script's reply from this node: a yes is refused while
        quarantined or blind (a no stays a no)."""
        if now >= self.until:
            self.until = self._quarantine = 0.0
            return reply
        value: object = reply
        if type(value) is int and value > 0:
            if self._blind is not None:
                error = NodeResponseError(self._blind)
                error.__cause__ = self._cause  # what INFO answered, as for any node error
                return error
            if self.held:
                return NodeError(
                    f"{self._name} is quarantined after a restart until a census has read it again"
                )
            return NodeError(
                f"{self._name} is quarantined after a restart for {self.until - now:.1f}s more"
            )
        return reply


def restart_span(ledger: TtlLedger) -> float:
    """How long a restart this Redlock saw keeps the node's votes out at the
    least: ``MIN_QUARANTINE``, for fencing tokens, and for the census it
    triggers to land (the census gives a server restarted from disk, or a
    promoted replica, a new epoch: ``lua/census.lua``). Grants are covered by
    the census (``_epochs.py``), whatever their ttl and whoever made them.
    Looked up at call time: the fault suite's mutant ``per-redlock-restart-rule``
    swaps it for the rule before the census (the longest ttl this Redlock
    granted) and turns the census's findings off."""
    return MIN_QUARANTINE


def counted_refusals(
    watches: Sequence[Restarts | None] | None, votes: Iterable[object], now: float
) -> int:
    """How many of ``votes`` (one per node, in order; 0: refused) are refusals
    of nodes whose votes count at loop time ``now``.

    A node held by its watch (a restart seen, no census since), quarantined,
    suspect (it may have lost grants still valid) or blind may have lost the
    key it refuses: its no is no evidence that the grant is gone, any more
    than its yes would be a grant. Counted, it could make a renewal release
    keys that a copy of the grant adopted elsewhere still holds (two holders).
    Read on the rare path only, once the refusals would decide a loss.
    """
    if watches is None:
        return sum(1 for vote in votes if type(vote) is int and vote == 0)
    return sum(
        1
        for vote, watch in zip(votes, watches, strict=True)
        if type(vote) is int and vote == 0 and (watch is None or now >= watch.until)
    )
