"""A lock's operations as operators see them: DEBUG records and telemetry (``_observe.py``).

The lock calls these only when someone listens - telemetry is on, or
``redlock_async.lock`` logs at DEBUG - so a lock nobody watches pays one
test per operation. Each wraps the operation's awaitable: the span covers
exactly the operation, and a cancellation is reported as ``cancelled``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TypeVar

from .._base._observe import LOCK, debug, warn
from .._engine import Engine
from ._grant import Grant

__all__ = ["acquire", "extend", "listening", "lost", "release"]

_T = TypeVar("_T")


def listening(engine: Engine) -> bool:
    """Does anyone watch lock operations (telemetry, or DEBUG on ``redlock_async.lock``)?"""
    return engine.telemetry is not None or LOCK.isEnabledFor(logging.DEBUG)


async def acquire(engine: Engine, name: str, call: Awaitable[_T], granted: type) -> _T:
    """Await ``call`` (``_acquire.acquire``), reporting how it ended and how long it took.

    ``granted``: the type of a grant, which the outcome's first item is when it is one.
    """
    telemetry = engine.telemetry
    span = telemetry.start("acquire", name) if telemetry is not None else None
    started = engine.clock()
    outcome = "error"
    try:
        result = await call
        grant = result[0] if isinstance(result, tuple) else None
        ok = isinstance(grant, granted)
        outcome = "granted" if ok else "refused"
        elapsed = engine.clock() - started
        if telemetry is not None:
            telemetry.acquired(name, elapsed, ok)
        if LOCK.isEnabledFor(logging.DEBUG):
            verb = "acquired" if ok else "not acquired"
            debug(LOCK, f"{verb} {name!r} in {elapsed:.4f}s", name=name, outcome=outcome,
                  elapsed=elapsed)  # fmt: skip
        return result
    except asyncio.CancelledError:
        outcome = "cancelled"
        raise
    finally:
        if telemetry is not None:
            telemetry.end(span, outcome)


async def release(engine: Engine, name: str, grant: Grant, call: Awaitable[None]) -> None:
    """Await ``call`` (the release), reporting it and how long the grant was held."""
    held = engine.clock() - grant.since if grant.since else None
    # A cancelled release went out all the same (see Lock.release).
    await _reported(engine, "release", name, call, "released", held)


async def extend(engine: Engine, name: str, call: Awaitable[_T]) -> _T:
    """Await ``call`` (an explicit ``extend()``), reporting how it ended."""
    return await _reported(engine, "extend", name, call, "extended", None)


async def _reported(
    engine: Engine,
    operation: str,
    name: str,
    call: Awaitable[_T],
    success: str,
    held: float | None,
) -> _T:
    """Await ``call`` under span ``redlock.<operation>``; its outcome (``success``, an
    error's type, ``cancelled``) to the span and a DEBUG record; ``held``: the grant's
    hold time, to the ``redlock.hold.duration`` histogram."""
    telemetry = engine.telemetry
    span = telemetry.start(operation, name) if telemetry is not None else None
    outcome = "error"
    try:
        result = await call
        outcome = success
        return result
    except asyncio.CancelledError:
        outcome = "cancelled"
        raise
    except Exception as exc:
        outcome = type(exc).__name__
        raise
    finally:
        if telemetry is not None:
            if held is not None:
                telemetry.released(name, held)
            telemetry.end(span, outcome)
        if LOCK.isEnabledFor(logging.DEBUG):
            debug(LOCK, f"{operation} of {name!r}: {outcome}", name=name, outcome=outcome,
                  elapsed=held)  # fmt: skip


def lost(engine: Engine, name: str, grant: Grant, message: str) -> None:
    """A held grant was lost: a rate-limited WARNING, and the loss counted."""
    held = engine.clock() - grant.since if grant.since else None
    warn(LOCK, "lost", name, message, name=name, outcome="lost", elapsed=held)
    telemetry = engine.telemetry
    if telemetry is not None:
        telemetry.lost(name, held if held is not None else 0.0)
