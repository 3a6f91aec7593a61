"""Validated, frozen configuration for a Redlock and for each lock.

Every default is stated once, here, in the field's docstring; the public
constructors pass their keywords through and let these classes validate.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from ._errors import ConfigurationError
from ._keys import check_prefix
from ._timing import CLOCK_DRIFT_FLOOR, ttl_ms

__all__ = [
    "MAX_TTL",
    "MIN_TTL",
    "UNAVAILABLE_TIMEOUT",
    "LockOptions",
    "RedlockConfig",
    "check_seconds",
    "check_ttl",
]

MIN_TTL = 0.01
"""The shortest ttl accepted, seconds (10 ms): shorter grants would expire
before a round trip to the nodes could confirm them."""
MAX_TTL = 366 * 24 * 3600.0
"""The longest ttl accepted, seconds (a year and a day): every Redis takes it
as PX/PEXPIRE milliseconds, far from the 64-bit overflow that makes nodes
refuse a grant, and a node restarted later is quarantined at most this long."""
UNAVAILABLE_TIMEOUT = 10.0
"""The default ``unavailable_timeout``, seconds: how long ``acquire()`` keeps
trying while no quorum of nodes answers. Long enough to ride out a brief
outage of a majority - a node restarting, a failover promoting a replica,
the client's reconnection backoff (up to 2 s) once they are back - short
enough that a waiter with ``timeout=None`` reports an outage instead of
waiting through it for ever (docs/frameworks.md: what a handler should use)."""


def check_seconds(
    name: str, value: object, *, positive: bool = False, allow_none: bool = False
) -> float | None:
    """Validate a duration in seconds; raise ConfigurationError naming ``name``."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigurationError(f"{name} must be a number of seconds, not {value!r}")
    seconds = float(value)
    if math.isnan(seconds) or math.isinf(seconds):
        raise ConfigurationError(f"{name} must be finite, not {value!r}")
    if positive and seconds <= 0:
        raise ConfigurationError(f"{name} must be > 0, not {value!r}")
    if seconds < 0:
        raise ConfigurationError(f"{name} must be >= 0, not {value!r}")
    return seconds


def check_ttl(name: str, value: object, drift_factor: float) -> float:
    """Validate a ttl for a Redlock with ``drift_factor``; raise ConfigurationError naming ``name``.

    Accepted: ``MIN_TTL <= ttl <= MAX_TTL`` and a positive validity once the
    drift allowance (``ttl * drift_factor + 0.002``) is taken off: a ttl that
    could never be granted is refused here, not by every attempt.
    """
    ttl = _seconds(name, value, positive=True)
    if ttl < MIN_TTL:
        raise ConfigurationError(f"{name} must be at least {MIN_TTL} s, not {value!r}")
    if ttl > MAX_TTL:
        raise ConfigurationError(
            f"{name} must be at most {MAX_TTL:.0f} s (MAX_TTL, about a year), not {value!r}"
        )
    if ttl * (1.0 - drift_factor) <= CLOCK_DRIFT_FLOOR:
        raise ConfigurationError(
            f"{name}={value!r} leaves no validity with drift_factor={drift_factor}: "
            f"{name} * (1 - drift_factor) must exceed {CLOCK_DRIFT_FLOOR} s"
        )
    return ttl


def _seconds(name: str, value: object, *, positive: bool = False) -> float:
    checked = check_seconds(name, value, positive=positive)
    assert checked is not None
    return checked


@dataclass(frozen=True, slots=True, kw_only=True)
class RedlockConfig:
    """Settings shared by every lock of one :class:`~redlock_async.Redlock`."""

    prefix: str = "redlock:"
    """Namespace of every key the library writes. Default ``"redlock:"``."""
    node_timeout: float = 0.05
    """Per-node, per-command timeout in seconds. Default 0.05; ``Redlock``
    (``node_timeout=None``) picks it per driver: 0.05 when every node uses the
    lean driver (``redis://``, ``unix://`` URLs), 0.25 when any goes through
    redis-py (``rediss://`` URLs, client objects)."""
    drift_factor: float = 0.01
    """Clock drift allowance as a fraction of ttl, in [0, 1). Default 0.01."""
    retry_delay: float = 0.2
    """Base wait between acquire attempts, seconds. Default 0.2."""
    retry_jitter: float = 0.2
    """Extra uniform random wait in [0, retry_jitter), seconds. Default 0.2."""
    unavailable_timeout: float | None = 10.0  # UNAVAILABLE_TIMEOUT, spelled out for the docs
    """Every lock's default ``unavailable_timeout`` (see :class:`LockOptions`),
    seconds; None: no limit but each lock's ``timeout``. Default 10.0."""
    wake_on_release: bool = True
    """Wake waiters through pub/sub when a lock is released. Default True."""
    quarantine_grace: float | None = None
    """Strict mode: also quarantine nodes up for less than this many seconds. Default None (off)."""
    telemetry: bool = True
    """Report metrics and spans when opentelemetry-api is installed. Default True."""
    telemetry_lock_names: bool = False
    """Put lock names in metric attributes too (one series per name). Default False."""
    holder_info: bool = True
    """Write the taker's host name, pid and grant time into every grant's token,
    for ``Redlock.holder()`` and ``redlock-async status``. Default True."""

    def __post_init__(self) -> None:
        check_prefix(self.prefix)
        object.__setattr__(
            self, "node_timeout", _seconds("node_timeout", self.node_timeout, positive=True)
        )
        object.__setattr__(self, "retry_delay", _seconds("retry_delay", self.retry_delay))
        object.__setattr__(self, "retry_jitter", _seconds("retry_jitter", self.retry_jitter))
        object.__setattr__(
            self,
            "unavailable_timeout",
            check_seconds("unavailable_timeout", self.unavailable_timeout, allow_none=True),
        )
        factor = self.drift_factor
        if isinstance(factor, bool) or not isinstance(factor, int | float) or not 0 <= factor < 1:
            raise ConfigurationError(f"drift_factor must be in [0, 1), not {factor!r}")
        object.__setattr__(self, "drift_factor", float(factor))
        object.__setattr__(
            self,
            "quarantine_grace",
            check_seconds("quarantine_grace", self.quarantine_grace, allow_none=True),
        )
        for flag in ("telemetry", "telemetry_lock_names", "holder_info"):
            if not isinstance(getattr(self, flag), bool):
                raise ConfigurationError(f"{flag} must be a bool, not {getattr(self, flag)!r}")
        if not isinstance(self.wake_on_release, bool):
            raise ConfigurationError(
                f"wake_on_release must be a bool, not {self.wake_on_release!r}"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class LockOptions:
    """Settings of one lock object, as given to ``Redlock.lock()``."""

    ttl: float = 30.0
    """Validity of one grant, seconds, in [MIN_TTL, MAX_TTL] (10 ms to a year and
    a day) and longer than its drift allowance. Default 30.0."""
    auto_extend: bool = True
    """Renew in the background until release. Default True."""
    timeout: float | None = None
    """Total time ``acquire()`` may wait, seconds; None waits forever. Default None."""
    fencing: bool = False
    """Give each grant a monotonic fencing token. Default False."""
    cancel_on_lost: bool = True
    """Inside ``async with``, cancel the body when the lock is lost. Default True."""
    fair: bool = False
    """Grant waiters in the order they began waiting. Default False."""
    max_attempts: int | None = None
    """Give up after this many attempts (the first included), even before
    ``timeout``; None: no limit but ``timeout``. Default None."""
    min_validity: float = 0.0
    """Refuse a grant whose validity, once decided, is not above this many
    seconds (it is released at once and counts as a failed attempt); below
    ``ttl``. Default 0.0: any validity left."""
    # Typed loosely here: the lock type sits above this module, and
    # Redlock.lock() states the precise type, Callable[[Lock], object].
    on_lost: Callable[..., object] | None = field(default=None, repr=False)
    """Called once with the lock when a held grant is lost. Default None."""
    unavailable_timeout: float | None = 10.0  # UNAVAILABLE_TIMEOUT, spelled out for the docs
    """How long ``acquire()`` keeps trying while no quorum answers, seconds:
    counted from the first attempt of an unbroken run of attempts that too few
    nodes answered (yes or no) to decide; any attempt a quorum answered, even
    "held elsewhere", ends the run. Past it ``acquire()`` returns False and
    ``async with`` raises ``QuorumUnavailable``, even with ``timeout`` time
    left; a busy lock still waits for its whole ``timeout``. None: no limit
    but ``timeout``. ``Redlock.lock()`` and the other factories default to
    the Redlock's (``RedlockConfig.unavailable_timeout``). Default 10.0."""
    ttl_ms: int = field(init=False, repr=False, compare=False, default=0)
    """``ttl`` in whole milliseconds, rounded down (derived: every attempt sends it)."""

    def __post_init__(self) -> None:
        # The drift-aware bound needs the Redlock's drift_factor: Redlock.lock() checks it.
        ttl = check_ttl("ttl", self.ttl, 0.0)
        object.__setattr__(self, "ttl", ttl)
        object.__setattr__(self, "ttl_ms", ttl_ms(ttl))
        object.__setattr__(self, "timeout", check_seconds("timeout", self.timeout, allow_none=True))
        unavailable = self.unavailable_timeout
        unavailable = check_seconds("unavailable_timeout", unavailable, allow_none=True)
        object.__setattr__(self, "unavailable_timeout", unavailable)
        for flag in ("auto_extend", "fencing", "cancel_on_lost", "fair"):
            if not isinstance(getattr(self, flag), bool):
                raise ConfigurationError(f"{flag} must be a bool, not {getattr(self, flag)!r}")
        attempts = self.max_attempts
        if attempts is not None and (
            isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1
        ):
            raise ConfigurationError(f"max_attempts must be an int >= 1 or None, not {attempts!r}")
        floor = _seconds("min_validity", self.min_validity)
        if floor >= ttl:
            raise ConfigurationError(
                f"min_validity must be below ttl ({ttl}s), not {self.min_validity!r}"
            )
        object.__setattr__(self, "min_validity", floor)
        if self.on_lost is not None and not callable(self.on_lost):
            raise ConfigurationError(f"on_lost must be callable, not {self.on_lost!r}")
