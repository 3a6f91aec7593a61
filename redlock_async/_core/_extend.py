"""``Lock.extend()``: renew one grant now, with a fan-out of its own, within a bound.

Background renewals go through the shared schedule (``_renewal.Renewals``,
many grants per call); an explicit, awaited extend is one grant, so it is
one extend command on every node, judged like any extend
(``_grant.judge_extend``). The schedule is stopped meanwhile, and restarted
when it is done (however it ends) if the lock still holds the grant.

How long it may take is the caller's: by default one fan-out, decided
within ``vote_limit(node_timeout)`` (V) of its send; with a ``timeout``, more
tries, each ``extend_retry_interval`` after the last, until that timeout or
the grant's validity ends, whichever comes first. No confirmation in time
while the grant is still valid is not a loss: the grant is still held, and
its renewal goes on (:class:`Unconfirmed`). Only a quorum refusing it, or its
validity ending, loses it (:class:`Lost`).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final, NamedTuple

from .._base._config import LockOptions, RedlockConfig, check_seconds, check_ttl
from .._base._errors import NodeError, QuorumUnavailable
from .._base._timing import extend_retry_interval
from .._engine import Engine, tally_text
from ._grant import Grant, judge_extend
from ._renewal import Renewals, Renewer

__all__ = ["Lost", "Request", "Unconfirmed", "extend_now", "extend_request"]

_NO_ERRORS: Final[Mapping[str, NodeError]] = MappingProxyType({})


class Request(NamedTuple):
    """What one ``extend()`` asks for, validated (:func:`extend_request`)."""

    ttl: float  # renew to this, from now
    timeout: float | None  # keep trying this long (None: while valid); 0: one try
    renew: bool  # auto-extended: the schedule restarts afterwards


def extend_request(
    options: LockOptions, config: RedlockConfig, ttl: float | None, timeout: float | None
) -> Request:
    """``extend(ttl, timeout=timeout)``'s arguments for a lock with ``options``;
    ConfigurationError for a bad one (before anything is sent)."""
    new_ttl = options.ttl if ttl is None else check_ttl("ttl", ttl, config.drift_factor)
    limit = check_seconds("timeout", timeout, allow_none=True)
    return Request(new_ttl, limit, options.auto_extend)


class Lost(NamedTuple):
    """The grant is gone: why, the last try's per-node errors, and whether a
    quorum refused it (only then may its keys be released, see ``Lock._lose``)."""

    reason: str
    errors: Mapping[str, NodeError]
    refused: bool = False


class Unconfirmed(NamedTuple):
    """No quorum confirmed the extend in time, and the grant is still valid: what
    the last try got (``reason``) and its per-node errors."""

    reason: str
    errors: Mapping[str, NodeError]

    def error(self, name: str, valid_for: float, renewed: bool) -> QuorumUnavailable:
        """What ``extend()`` raises: the lock ``name`` is still held, ``valid_for``
        seconds more; ``renewed``: its background renewal goes on."""
        renewing = "; its renewal goes on" if renewed else ""
        return QuorumUnavailable(
            f"lock {name!r}: extend not confirmed in time: {self.reason}; "
            f"still held (valid for {valid_for:.3f}s){renewing}",
            self.errors,
        )


async def extend_now(
    renewals: Renewals[Any],
    renewer: Renewer[Any],
    grant: Grant,
    asked: Request,
    still_held: Callable[[], bool],
) -> Lost | Unconfirmed | None:
    """Renew ``grant`` as ``asked``: None when renewed, else why not (see the
    module doc). ``renewer``'s schedule (in ``renewals``) is stopped meanwhile
    and restarted afterwards, if ``asked.renew``, while ``still_held()``.
    """
    # Not waiting for a renewal in flight (that alone could take V): stopped,
    # its outcome is ignored when it lands, so it cannot overwrite this
    # extend's verdict on the grant; and on the nodes it only ever raises
    # the key's expiry (extend.lua), so the validity this extend counts from
    # before its own send stays a lower bound whichever runs last.
    renewals.stop(renewer)
    try:
        return await _tries(renewals.engine, renewer, grant, asked, still_held)
    finally:
        # Renewed, unconfirmed or cancelled: the renewal goes on while the
        # grant is held (a lost one is dropped by the caller, which stops it).
        if asked.renew and still_held():
            renewals.start(renewer, grant)


async def _tries(
    engine: Engine,
    renewer: Renewer[Any],
    grant: Grant,
    asked: Request,
    still_held: Callable[[], bool],
) -> Lost | Unconfirmed | None:
    """One try, then more every ``extend_retry_interval`` until ``asked.timeout``."""
    config = engine.config
    clock = engine.clock
    ttl = asked.ttl
    deadline = math.inf if asked.timeout is None else clock() + asked.timeout
    interval = extend_retry_interval(config.retry_delay, grant.ttl)
    errors = _NO_ERRORS
    tries = 0
    while still_held():
        started = clock()
        if started >= grant.validity_end:
            return Lost("its validity ended before it could be extended", errors)
        engine.ttls.granted(ttl)
        tally = engine.fanout(renewer.commands.extend(grant.token, ttl))
        await tally.decided
        tries += 1
        verdict = judge_extend(grant, tally, started, clock(), ttl, config.drift_factor)
        if verdict == "ok":
            return None
        errors = tally.errors()
        if verdict == "refused":
            return Lost("a quorum of nodes no longer holds it", errors, refused=True)
        # Undecided (nodes failed or were slow). The validity may have been
        # shortened (apply_votes): it ends the tries before the timeout does.
        now = clock()
        if now >= grant.validity_end:
            return Lost("its validity ended before a quorum confirmed an extend", errors)
        if now >= deadline:
            # Reported by the renewal if it cannot confirm the grant either.
            renewer.errors = errors
            return Unconfirmed(_unconfirmed(tally_text(tally), tries), errors)
        # The last try goes out at the deadline (when it comes first), as
        # acquire()'s last attempt goes out at its unavailable_timeout.
        wait = min(interval, grant.validity_end - now, deadline - now)
        if wait > 0:
            await asyncio.sleep(wait)
    return Lost("it was released or lost meanwhile", _NO_ERRORS)


def _unconfirmed(said: str, tries: int) -> str:
    """The last try's outcome, every node named (``tally_text``: never fewer
    answering than did)."""
    return said if tries == 1 else f"{said} (last of {tries} tries)"
