"""Each node's restart watch: what one Redlock sees of the server itself
(docs/guarantees.md, "Restarted nodes", its last part). A new ``run_id``
holds the node's yes votes until the censuses (``_epochs.py``) read it again,
and keeps them out ``MIN_QUARANTINE`` at least; strict mode adds a grace after
any start. ``Tally.settle`` turns a refused yes into a failed vote (``vote``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import TypeVar

from .._base._errors import NodeError, NodeResponseError
from ._ttls import TtlLedger

__all__ = ["MIN_QUARANTINE", "Restarts", "restart_span"]

_Reply = TypeVar("_Reply")

_log = logging.getLogger("redlock_async.node")

# Redis's uptime is a difference of whole wall-clock seconds: it overstates
# the time since start by up to one, which a quarantine adds back.
UPTIME_RESOLUTION = 1.0

# The shortest quarantine of a restarted node: fencing counters resume at the
# node's clock in whole seconds (lua/_fence.lua), past every earlier token
# two seconds after a restart (docs/fencing.md).
MIN_QUARANTINE = 2.0

_DOCS = "docs/security.md"  # where messages send operators for the fix


class Restarts:
    """Restart detection and quarantine for one node."""

    __slots__ = (
        "_blind", "_cause", "_failover", "_grace", "_ledger", "_name", "_quarantine",
        "held", "on_restart", "run_id", "until",
    )  # fmt: skip

    def __init__(
        self, name: str, ledger: TtlLedger, grace: float | None, *, failover: bool = False
    ) -> None:
        """``failover``: a Sentinel-managed primary (its uptime says nothing of
        when it lost data: a new run_id is quarantined for the full span)."""
        self._name = name
        self._failover = failover
        self._ledger = ledger
        self._grace = grace
        self.run_id: bytes | None = None
        self.on_restart: Callable[[], None] | None = None  # the census (_epochs.py)
        self.held = False  # no yes counts until the censuses read the node again
        # Loop time until which yes votes do not count; 0: none; inf: blind.
        # vote() is consulted only when truthy: one attribute test per yes.
        self.until = 0.0
        self._quarantine = 0.0  # end of the current quarantine after a restart
        self._blind: str | None = None  # why restarts cannot be seen, and the fix
        self._cause: BaseException | None = None  # what INFO answered

    def unknown(self, error: BaseException | str) -> None:
        """INFO answered ``error`` (refused, or without the fields): yes votes
        are refused until an ``observe_fields`` succeeds; a WARNING the first time."""
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

    def observe_fields(self, run_id: bytes, uptime: float, now: float) -> None:
        """Compare the server's run_id and uptime with what was seen before (each
        driver reads them its own way: ``resp/_handshake.py``, ``redispy/_watched.py``)."""
        if not run_id:
            self.unknown("its INFO server reply has no run_id")
            return
        if self._blind is not None:
            _log.info("redlock_async: %s answers INFO again; its votes count", self._name)
            self._blind = self._cause = None
        seen, self.run_id = self.run_id, run_id
        span = 0.0
        up_at_least = max(0.0, uptime - UPTIME_RESOLUTION)
        if seen is not None and seen != run_id:
            # A promoted replica may have been up long: its span runs from now.
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
            # What is awaited, and until when: the issue-40 lockout, met by users.
            return NodeError(
                f"{self._name} is quarantined after a restart for {self.until - now:.1f}s more: "
                "grants it may have lost (the longest ttl used on this prefix) can still be "
                "valid until then; long-ttl locks belong under a prefix of their own"
            )
        return reply


def restart_span(ledger: TtlLedger) -> float:
    """How long a restart this Redlock saw keeps the node's votes out at the
    least: ``MIN_QUARANTINE`` (grants are the census's, whatever their ttl).
    Looked up at call time: the fault suite's ``per-redlock-restart-rule`` swaps it."""
    return MIN_QUARANTINE
