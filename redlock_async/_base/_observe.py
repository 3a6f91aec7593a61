"""What operators see: logs per concern with structured fields, and OpenTelemetry.

Loggers, children of ``redlock_async`` (a handler there sees them all):

- ``redlock_async.lock``: grants, refusals and releases at DEBUG; losses
  and releases a quorum did not confirm at WARNING;
- ``redlock_async.node``: a node failing commands, at WARNING;
- ``redlock_async.renewal``: renewals that must be retried, at DEBUG;
- ``redlock_async`` itself: a Redlock made over two nodes, at WARNING, once
  per Redlock (``_redlock.py``), not rate-limited.

Every record carries ``extra`` fields a JSON formatter picks up:
``redlock_name``, ``redlock_node``, ``redlock_outcome`` and
``redlock_elapsed`` (seconds), where they apply. (Not ``name``: that is the
logger's own attribute on a LogRecord.) WARNING records are rate-limited per
event and lock or node: at most one per ``RATE`` seconds, the next saying
how many were held back, so a dead node cannot flood the logs. A node's setup
flagged by a census (eviction, another node list) is logged once per process.

With ``opentelemetry-api`` installed (extra ``otel``), each ``Redlock``
reports to the global providers under the name ``redlock_async``: see
:class:`Telemetry`. Without it, nothing is imported; every call site tests
one attribute for None.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

from ._world import current

__all__ = [
    "LOCK",
    "NODE",
    "RATE",
    "RENEWAL",
    "Telemetry",
    "debug",
    "reset_limits",
    "telemetry",
    "warn",
    "warn_once",
]

LOCK: Final = logging.getLogger("redlock_async.lock")
NODE: Final = logging.getLogger("redlock_async.node")
RENEWAL: Final = logging.getLogger("redlock_async.renewal")

RATE: Final = 10.0
"""Seconds between two WARNING records of one event for one lock or node."""

RECHECK: Final = 1.0
"""Seconds between two looks at whether OpenTelemetry providers are installed."""

_KEYS_KEPT = 4096  # distinct (event, subject) pairs remembered; then forgotten at once


class _Limiter:
    """Lets one record per key through every ``RATE`` seconds; counts the rest."""

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], list[float]] = {}  # key -> [last time, held back]

    def allow(self, key: tuple[str, str], now: float) -> int | None:
        """None: hold this record back. Else how many were held back before it."""
        seen = self._seen.get(key)
        if seen is None:
            if len(self._seen) >= _KEYS_KEPT:
                self._seen.clear()
            self._seen[key] = [now, 0.0]
            return 0
        if now - seen[0] < RATE:
            seen[1] += 1
            return None
        held_back = int(seen[1])
        seen[0], seen[1] = now, 0.0
        return held_back


_LIMITER = _Limiter()
_ONCE: set[str] = set()  # what warn_once has logged


def reset_limits() -> None:
    """Forget every rate limit (for tests: each starts as a fresh process would)."""
    _LIMITER._seen.clear()
    _ONCE.clear()


def _extra(fields: Mapping[str, object]) -> dict[str, object]:
    return {f"redlock_{key}": value for key, value in fields.items()}


def warn(logger: logging.Logger, event: str, subject: str, message: str, **fields: object) -> None:
    """A WARNING on ``logger``, rate-limited per (``event``, ``subject``); ``fields``
    become ``redlock_<field>`` attributes of the record."""
    if not logger.isEnabledFor(logging.WARNING):
        return
    held_back = _LIMITER.allow((event, subject), current().monotonic())
    if held_back is None:
        return
    if held_back:
        message += f" ({held_back} more like it in the last {RATE:.0f} s not logged)"
    logger.warning("redlock_async: %s", message, extra=_extra(fields))


def warn_once(key: str, message: str, *args: object) -> None:
    """A WARNING on ``NODE`` the first time this process is told of ``key``."""
    if key not in _ONCE:
        _ONCE.add(key)
        NODE.warning(message, *args)


def debug(logger: logging.Logger, message: str, **fields: object) -> None:
    """A DEBUG record on ``logger`` with ``fields`` (callers test ``isEnabledFor`` first
    on hot paths, so that building the message costs nothing when off)."""
    logger.debug("redlock_async: %s", message, extra=_extra(fields))


class Telemetry:
    """Metrics and spans through opentelemetry-api, under the name ``redlock_async``.

    Counters ``redlock.grants``, ``redlock.refusals`` (acquires that gave up),
    ``redlock.losses``, ``redlock.node.errors`` (attributes ``node``, its
    redacted address, and ``error``, the error's type); histograms
    ``redlock.acquire.duration`` and ``redlock.hold.duration`` (seconds); spans
    ``redlock.acquire``, ``redlock.release`` and ``redlock.extend`` with
    ``redlock.name`` and ``redlock.outcome``. Metric attributes hold no lock
    names (one time series per name would be unbounded) unless
    ``lock_names`` is set; spans always name the lock. No token, password or
    key is ever recorded.
    """

    __slots__ = (
        "_acquire_duration",
        "_clock",
        "_grants",
        "_hold_duration",
        "_live",
        "_lock_names",
        "_losses",
        "_next_check",
        "_node_errors",
        "_refusals",
        "_tracer",
    )

    def __init__(self, lock_names: bool, clock: Callable[[], float]) -> None:
        from opentelemetry import metrics, trace  # only here: the extra may be absent

        from ._version import __version__

        meter = metrics.get_meter("redlock_async", __version__)
        self._grants = meter.create_counter("redlock.grants", "{grant}", "Locks acquired")
        self._refusals = meter.create_counter(
            "redlock.refusals", "{acquire}", "Acquires that gave up (busy or no quorum)"
        )
        self._losses = meter.create_counter("redlock.losses", "{grant}", "Held locks lost")
        self._node_errors = meter.create_counter(
            "redlock.node.errors", "{error}", "Commands a node failed (errors and timeouts)"
        )
        self._acquire_duration = meter.create_histogram(
            "redlock.acquire.duration", "s", "Time acquire() took, granted or not"
        )
        self._hold_duration = meter.create_histogram(
            "redlock.hold.duration", "s", "Time a grant was held, to release or loss"
        )
        self._tracer = trace.get_tracer("redlock_async", __version__)
        self._lock_names = lock_names
        self._clock = clock  # the engine's monotonic clock
        self._live = False
        self._next_check = 0.0  # monotonic time of the next look at the providers

    def live(self) -> bool:
        """Whether anything would record what is reported: an SDK's providers are
        installed. Until the application installs one, opentelemetry-api's proxies
        drop every span and point - and building them cost the hot path about 6 %
        of the client's instructions per acquire+release (benchmarks/telemetry.py)
        for nothing. Looked at again every ``RECHECK`` seconds: reporting starts
        within that of the application installing its providers."""
        now = self._clock()
        if now >= self._next_check:
            self._next_check = now + RECHECK
            self._live = _providers_installed()
        return self._live

    def start(self, operation: str, name: str) -> Any:
        """Start span ``redlock.<operation>`` for lock ``name`` (a child of the current one)."""
        return self._tracer.start_span("redlock." + operation, attributes={"redlock.name": name})

    def end(self, span: Any, outcome: str) -> None:
        span.set_attribute("redlock.outcome", outcome)
        span.end()

    def _attributes(self, name: str) -> dict[str, str] | None:
        return {"redlock.name": name} if self._lock_names else None

    def acquired(self, name: str, seconds: float, granted: bool) -> None:
        attributes = self._attributes(name)
        (self._grants if granted else self._refusals).add(1, attributes)
        self._acquire_duration.record(seconds, attributes)

    def released(self, name: str, held: float) -> None:
        self._hold_duration.record(held, self._attributes(name))

    def lost(self, name: str, held: float) -> None:
        attributes = self._attributes(name)
        self._losses.add(1, attributes)
        self._hold_duration.record(held, attributes)

    def node_error(self, node: str, error: BaseException) -> None:
        # A client passed in is named "<url>#<id>": the id changes with every
        # process, and one series per process start is unbounded cardinality.
        node = node.partition("#")[0]
        self._node_errors.add(1, {"node": node, "error": type(error).__name__})


def _providers_installed() -> bool:
    """Whether the global tracer or meter provider is a real one, not the API's proxy
    that stands in until the application sets one (and drops everything meanwhile)."""
    from opentelemetry import metrics, trace

    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return True
    # The meter's proxy class is not public: anything else counts as installed.
    return type(metrics.get_meter_provider()).__name__ != "_ProxyMeterProvider"


def telemetry(enabled: bool, lock_names: bool, clock: Callable[[], float]) -> Telemetry | None:
    """A Telemetry when asked for and opentelemetry-api is installed, else None."""
    if not enabled:
        return None
    try:
        if importlib.util.find_spec("opentelemetry") is None:
            return None
        return Telemetry(lock_names, clock)
    except (ImportError, ValueError):  # absent, broken or partial: run without
        return None
