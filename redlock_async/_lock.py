"""The exclusive lock: acquire with retries, extend, release, ``async with``."""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType, TracebackType
from typing import Final, Literal, Self

from ._config import LockOptions, RedlockConfig, check_seconds, check_ttl
from ._engine._core import Core
from ._engine._node import Command
from ._engine._quorum import Tally, is_yes
from ._engine._wake import Subscription
from ._errors import (
    LockLost,
    LockNotAcquired,
    LockNotOwned,
    NodeError,
    RedlockError,
    describe_errors,
)
from ._keys import check_name
from ._scripts import ACQUIRE, EXTEND, FAIR_ACQUIRE, FAIR_LEAVE, FENCE_RAISE, RELEASE
from ._timing import drift, ttl_ms, validity

__all__ = ["Grant", "Lock"]

_log = logging.getLogger("redlock_async")


class _Unset:
    def __repr__(self) -> str:
        return "<lock's timeout>"


_UNSET: Final = _Unset()
_NO_ERRORS: Final[Mapping[str, NodeError]] = MappingProxyType({})

Verdict = Literal["ok", "refused", "retry"]


@dataclass(slots=True, eq=False)
class Grant:
    """One successful acquisition: its token and how long it is guaranteed."""

    token: bytes
    ttl: float
    validity_end: float  # monotonic time after which the grant may be gone
    acquired: Tally  # the acquire fan-out: later commands are ordered after it
    fencing_token: int | None = None


def fair_heartbeat(config: RedlockConfig) -> float:
    """How long a fair waiter's queue entry lives without being refreshed.

    A crashed waiter stops blocking the queue after this; live waiters refresh
    their entry with every attempt, at least three times per heartbeat.
    """
    return max(1.0, 10.0 * config.node_timeout)


def fair_heartbeat_ms(config: RedlockConfig) -> int:
    return ttl_ms(fair_heartbeat(config))


class Lock:
    """A distributed exclusive lock on one name. Create one per critical section.

    Obtain it from :meth:`Redlock.lock`; see there for the keywords.
    """

    __slots__ = (
        "__weakref__",
        "_acquiring",
        "_body_task",
        "_cancel_requested",
        "_core",
        "_errors",
        "_grant",
        "_key",
        "_last_attempt",
        "_lost",
        "_lost_error",
        "_lost_event",
        "_name",
        "_options",
        "_renew_timer",
        "_renewing",
        "_ticket",
        "_waiter",
    )

    _kind = b"x:"  # queue-entry prefix of fair waiters: exclusive
    # True when attempts may leave marks to clear even outside fair mode
    # (the rwlock writer's waiting marker): _attempts_over runs then too.
    _leaves_marks = False

    def __init__(self, core: Core, name: str, options: LockOptions) -> None:
        self._core = core
        self._name = name if type(name) is str and name else check_name(name)
        self._options = options
        self._key = core.key_for(self._name)
        self._grant: Grant | None = None
        self._acquiring = False
        self._lost = False
        self._lost_error: LockLost | None = None
        self._lost_event: asyncio.Event | None = None  # made on first use: most locks never need it
        self._errors: Mapping[str, NodeError] = _NO_ERRORS
        self._body_task: asyncio.Task[object] | None = None
        self._cancel_requested = False
        self._renew_timer: asyncio.TimerHandle | None = None
        self._renewing: Tally | None = None
        self._last_attempt: Tally | None = None  # for cleanup ordered after it
        self._waiter = b""  # fair mode: queue entry id, stable across attempts
        self._ticket = b""  # fair mode: arrival time, orders the queue

    # -- public properties -------------------------------------------------

    @property
    def name(self) -> str:
        return self._name

    @property
    def ttl(self) -> float:
        """The ttl of the current grant (or the configured one when not held)."""
        return self._grant.ttl if self._grant is not None else self._options.ttl

    @property
    def options(self) -> LockOptions:
        return self._options

    @property
    def held(self) -> bool:
        """True while this object holds a grant that is still valid."""
        grant = self._grant
        return grant is not None and self._core.clock() < grant.validity_end

    @property
    def lost(self) -> bool:
        """True once a held grant was lost (renewal failed, or it expired in use)."""
        return self._lost

    @property
    def lost_event(self) -> asyncio.Event:
        """Set when a held grant is lost: ``await lock.lost_event.wait()``."""
        if self._lost_event is None:
            self._lost_event = asyncio.Event()
            if self._lost:
                self._lost_event.set()
        return self._lost_event

    @property
    def valid_for(self) -> float:
        """Seconds of guaranteed validity left; 0.0 when not held."""
        grant = self._grant
        if grant is None:
            return 0.0
        return max(0.0, grant.validity_end - self._core.clock())

    @property
    def errors(self) -> Mapping[str, NodeError]:
        """Per-node errors of the last attempt that failed (empty after a grant)."""
        return self._errors

    @property
    def fencing_token(self) -> int | None:
        """The current grant's fencing token when ``fencing=True``, else None."""
        grant = self._grant
        return grant.fencing_token if grant is not None else None

    def __repr__(self) -> str:
        state = "lost" if self._lost else "held" if self._grant is not None else "unlocked"
        return f"<Lock {self._name!r} {state} ttl={self.ttl}>"

    # -- acquire -----------------------------------------------------------

    async def acquire(self, blocking: bool = True, timeout: float | _Unset | None = _UNSET) -> bool:
        """Try to acquire; True on success, False when it gave up.

        ``blocking=False`` makes one attempt. Otherwise attempts repeat, each
        after ``retry_delay`` plus random jitter, until ``timeout`` seconds have
        passed (default: the lock's ``timeout``; None waits forever).
        Raises RedlockError when this object already holds a grant.
        """
        core = self._core
        if core.closed:
            core.check_open()
        if self._grant is not None or self._acquiring:
            raise RedlockError(
                f"lock {self._name!r} is already held or being acquired by this object; "
                "create a new Lock object per critical section"
            )
        if timeout is _UNSET:
            limit = self._options.timeout  # validated with the options
        else:
            limit = check_seconds("timeout", timeout, allow_none=True)
        deadline = None if limit is None else core.clock() + limit
        self._acquiring = True
        self._last_attempt = None
        subscription: Subscription | None = None
        fair = self._options.fair
        if fair:
            # The ticket: arrival time, the same on every node; the id breaks ties.
            self._waiter = self._kind + secrets.token_hex(8).encode()
            self._ticket = f"{time.time() * 1000:.3f}".encode()
        options = self._options
        ttl = options.ttl
        ttls = core.ttls
        first = True
        granted = False
        try:
            while True:
                # One attempt, inlined (no coroutine per attempt: this is the
                # hot path of every acquisition).
                if core.closing:
                    core.check_open()  # raises: aclose() has begun
                token = core.new_token()
                command = self._acquire_command(token, ttl)
                # Recorded before sending: a node may keep this grant even if
                # the attempt fails here, and a restart seen meanwhile must cover it.
                if ttl > ttls.longest:
                    ttls.granted(ttl)
                started = core.clock()
                tally = self._last_attempt = core.fanout(command)
                fencing: int | None = None
                errors: Mapping[str, NodeError] | None = None
                try:
                    ok = await tally.decided
                    if ok and options.fencing:
                        fencing, errors = await self._fence(tally, token)
                        ok = fencing is not None
                except asyncio.CancelledError:
                    tally.abandon()
                    core.undo(tally, self._release_command(token))
                    raise
                if ok:
                    # Validity is judged after the write-back: it is part of the grant.
                    now = core.clock()
                    left = validity(ttl, started, now, core.config.drift_factor)
                    if left > 0 and core.closing:
                        # Granted while aclose() waited for attempts in flight:
                        # nobody will hold it. Released, and the caller told.
                        core.undo(tally, self._release_command(token))
                        core.check_open()  # raises
                    if left > 0:
                        self._grant = Grant(token, ttl, now + left, tally, fencing)
                        self._lost = False
                        self._lost_error = None
                        if self._lost_event is not None:
                            self._lost_event.clear()
                        self._errors = _NO_ERRORS
                        core.held.add(self)  # so that aclose() and forks can tell it
                        if options.auto_extend:
                            core.start_renewal(self)
                        granted = True
                        return True
                self._errors = errors if errors is not None else tally.errors()
                core.undo(tally, self._release_command(token))

                # Refused: what next.
                if core.closing:
                    core.check_open()  # raises: nothing can be granted any more
                if first:
                    first = False
                    if not blocking or limit == 0:
                        return False  # timeout=0: one attempt, like blocking=False
                    if core.wake is not None:
                        # Listen for releases, then try once more at once: a
                        # release that came before the subscription would
                        # otherwise be missed. The deadline bounds the wait
                        # for the nodes' confirmations too.
                        wait = core.config.node_timeout
                        if deadline is not None:
                            wait = min(wait, deadline - core.clock())
                        if wait > 0:
                            subscription = await core.wake.subscribe(self._key + b":wake", wait)
                            continue
                delay = core.retry_delay()
                if fair:  # attempts are also the queue entry's heartbeat
                    delay = min(delay, fair_heartbeat(core.config) / 3)
                if deadline is not None:
                    remaining = deadline - core.clock()
                    if remaining <= 0:
                        return False
                    delay = min(delay, remaining)
                if subscription is not None:
                    await subscription.wait(delay)  # early on a release; a hint only
                else:
                    await asyncio.sleep(delay)
                if deadline is not None and core.clock() >= deadline:
                    return False
        finally:
            self._acquiring = False
            if subscription is not None:
                subscription.close()
            if fair or self._leaves_marks:
                self._attempts_over(granted)

    def _attempts_over(self, granted: bool) -> None:
        """acquire() stopped trying: leave the fair queue wherever we may be in it.

        Nobody awaits this (it must also run on cancellation). A waiter that
        gave up announces it, since the next one may now be at the head.
        """
        last = self._last_attempt
        if self._options.fair and last is not None and not (granted and last.yes == last.n):
            queue, beats = self._queue_keys()
            keys = (queue, beats) if granted else (queue, beats, self._key + b":wake")
            self._core.fanout(Command(FAIR_LEAVE, keys, (self._waiter,)), after=last)

    def _queue_keys(self) -> tuple[bytes, bytes]:
        return self._key + b":q", self._key + b":qh"

    def _fair_command(self, token: bytes, ttl: float, lock_key: bytes, readers: bytes) -> Command:
        queue, beats = self._queue_keys()
        keys: tuple[bytes, ...] = (lock_key, readers, queue, beats)
        if self._options.fencing:
            keys += (self._fence_keys()[1],)
        args = (
            token,
            ttl_ms(ttl),
            self._waiter,
            self._ticket,
            fair_heartbeat_ms(self._core.config),
        )
        return Command(FAIR_ACQUIRE, keys, args)

    # The commands of one grant's life; the read-write lock's views override them.

    def _acquire_command(self, token: bytes, ttl: float) -> Command:
        options = self._options
        if options.fair:
            return self._fair_command(token, ttl, self._key, self._key + b":xr")
        keys = (self._key, self._key + b":fence") if options.fencing else (self._key,)
        return Command(
            ACQUIRE, keys, (token, options.ttl_ms if ttl == options.ttl else ttl_ms(ttl))
        )

    def _release_command(self, token: bytes, announce: bool = False) -> Command:
        # Only real releases announce themselves: rolling back a failed
        # attempt must not wake every waiter (they would stampede).
        keys = (self._key, self._key + b":wake") if announce else (self._key,)
        return Command(RELEASE, keys, (token,))

    def _extend_command(self, token: bytes, ttl: float) -> Command:
        return Command(EXTEND, (self._key,), (token, ttl_ms(ttl)))

    async def _fence(
        self, tally: Tally, token: bytes
    ) -> tuple[int | None, Mapping[str, NodeError] | None]:
        """Choose the fencing token of a fresh grant and make it stick.

        The token is the highest counter any granting node returned. Unless
        every granting node returned that same value, it is written back to
        the granting nodes' counters, and a quorum must confirm: then any
        later grant's quorum meets a node whose counter is at least this
        token, and its own token is greater.
        """
        granting = [i for i, reply in enumerate(tally.replies) if is_yes(reply)]
        values = [tally.replies[i] for i in granting]
        top = max(values)  # type: ignore[type-var]
        assert isinstance(top, int)
        if all(value == top for value in values):
            return top, None
        grant_key, counter = self._fence_keys()
        write_back = Command(FENCE_RAISE, (grant_key, counter), (token, top))
        confirm = self._core.fanout(write_back, only=granting)
        if await confirm.decided:
            return top, None
        return None, confirm.errors()

    def _fence_keys(self) -> tuple[bytes, bytes]:
        """The key holding the grant, and the fencing counter."""
        return self._key, self._key + b":fence"

    # -- extend ------------------------------------------------------------

    def _send_extend(self, grant: Grant, ttl: float) -> Tally:
        self._core.ttls.granted(ttl)
        return self._core.fanout(self._extend_command(grant.token, ttl))

    def _judge_extend(self, grant: Grant, tally: Tally, started: float, ttl: float) -> Verdict:
        """Apply one extend fan-out's outcome to ``grant``."""
        core = self._core
        if tally.decided.result():
            left = validity(ttl, started, core.clock(), core.config.drift_factor)
            if left > 0:
                grant.validity_end = core.clock() + left
                grant.ttl = ttl
                return "ok"
        # Failed (or valid for too short): nodes it did reach now expire the
        # key `ttl` after `started` at the earliest. A shorter ttl than the
        # grant had left thus shortens what a majority is known to hold.
        shortened = started + ttl - drift(ttl, core.config.drift_factor)
        if shortened < grant.validity_end:
            grant.validity_end = shortened
        n = len(core.nodes)
        if tally.no > n - core.quorum:
            return "refused"  # enough nodes no longer hold our token: it is gone
        return "retry"

    def _retry_interval(self, grant: Grant) -> float:
        return min(self._core.config.retry_delay, grant.ttl / 6)

    async def extend(self, ttl: float | None = None) -> None:
        """Renew the grant to a full ``ttl`` (default: the lock's ttl) from now.

        Retries while the grant is still valid; raises LockLost when a quorum
        no longer holds it or its validity ends first, LockNotOwned when this
        object holds no grant.
        """
        grant = self._require_grant()
        new_ttl = (
            self._options.ttl
            if ttl is None
            else check_ttl("ttl", ttl, self._core.config.drift_factor)
        )
        assert new_ttl is not None
        core = self._core
        core.check_open()
        await self._settle_renewal()
        self._cancel_renewal_timer()
        try:
            while True:
                if self._grant is not grant:
                    raise self._lost_error or LockLost(f"lock {self._name!r} is no longer held")
                started = core.clock()
                if started >= grant.validity_end:
                    raise self._lose("its validity ended before it could be extended", {})
                tally = self._send_extend(grant, new_ttl)
                await tally.decided
                verdict = self._judge_extend(grant, tally, started, new_ttl)
                if verdict == "ok":
                    return
                if verdict == "refused":
                    raise self._lose("a quorum of nodes no longer holds it", tally.errors())
                wait = min(self._retry_interval(grant), grant.validity_end - core.clock())
                if wait > 0:
                    await asyncio.sleep(wait)
        finally:
            if self._grant is grant and self._options.auto_extend:
                core.start_renewal(self)

    # -- release -----------------------------------------------------------

    def _require_grant(self) -> Grant:
        if self._grant is None:
            if self._lost:
                raise self._lost_error or LockLost(f"lock {self._name!r} was lost")
            raise LockNotOwned(f"lock {self._name!r} is not held by this object")
        return self._grant

    async def release(self) -> None:
        """Release the grant on every node.

        Raises LockNotOwned when more nodes than a quorum can spare answered
        that they no longer held it, or its validity had already ended;
        LockLost when it had been lost. When failing or slow nodes leave the
        outcome unknown, it logs a warning instead: the keys expire anyway.

        Cancellation-safe: the grant is dropped and the release sent before
        the first await, so a cancelled release still releases (nodes whose
        connection fails get it again until the key would have expired).
        """
        grant = self._grant
        if grant is None:
            grant = self._require_grant()  # raises
        # No waiting for a renewal in flight: the grant is forgotten first
        # (its outcome is then ignored), and a renewal that lands after the
        # release finds the key gone - extend.lua never re-creates a key.
        self._drop(grant)
        core = self._core
        expired = core.clock() >= grant.validity_end
        announce = core.wake is not None
        tally = core.fanout(self._release_command(grant.token, announce), after=grant.acquired)
        # Resend where a connection fails, for as long as the key may live.
        tally.resend_until = time.monotonic() + grant.ttl
        released = await tally.decided
        if expired:
            raise LockNotOwned(
                f"lock {self._name!r}: its validity had ended before release", tally.errors()
            )
        if not released:
            if tally.no > len(core.nodes) - core.quorum:
                raise LockNotOwned(
                    f"lock {self._name!r}: fewer than {core.quorum} nodes still held this grant",
                    tally.errors(),
                )
            # Nodes failed or were slow, so nobody can say the grant was gone:
            # the release reached whom it could, and the rest expires with the
            # ttl. Raising here would turn a network hiccup into a failed body.
            _log.warning(
                "redlock_async: release of %r not confirmed by a quorum: %s",
                self._name,
                describe_errors(tally.errors()) or "no quorum of replies within node_timeout",
            )

    def _drop(self, grant: Grant) -> None:
        """Forget ``grant`` locally and stop renewing it."""
        if self._grant is grant:
            self._grant = None
        self._renewing = None
        if self._renew_timer is not None:
            self._renew_timer.cancel()
            self._renew_timer = None
        self._core.held.discard(self)

    def _orphaned(self) -> None:
        """Its grant belongs to another event loop or the parent process: lost, silently.

        Nothing is sent (in a forked child, the parent still holds the grant)
        and no task is cancelled (they belong to the old loop).
        """
        if self._grant is not None:
            self._grant = None
            self._renewing = None
            self._renew_timer = None  # a handle of the old loop: dropped, not cancelled
            self._body_task = None
            self._lost = True
            self._lost_error = LockLost(
                f"lock {self._name!r} was lost: it was held on another event loop "
                "or by the parent process before a fork"
            )

    # -- renewal bookkeeping (the scheduling itself lives in _renew.py) --------

    def _cancel_renewal_timer(self) -> None:
        if self._renew_timer is not None:
            self._renew_timer.cancel()
            self._renew_timer = None

    async def _settle_renewal(self) -> None:
        # A renewal in flight is waited for, so a release cannot race it.
        renewing = self._renewing
        if renewing is not None and not renewing.decided.done():
            await asyncio.shield(renewing.decided)

    def _lose(self, reason: str, errors: Mapping[str, NodeError]) -> LockLost:
        """Mark the held grant lost, tell the holder, clean up; returns the error."""
        grant = self._grant
        error = LockLost(f"lock {self._name!r} was lost: {reason}", errors)
        if grant is None:
            return self._lost_error or error
        self._drop(grant)
        self._lost = True
        self._lost_error = error
        _log.warning("redlock_async: %s", error)
        # Remnants on a minority would only block the next holder until expiry.
        self._core.undo(
            grant.acquired, self._release_command(grant.token), time.monotonic() + grant.ttl
        )
        if self._lost_event is not None:
            self._lost_event.set()
        on_lost = self._options.on_lost
        if on_lost is not None:
            try:
                on_lost(self)
            except Exception:
                _log.exception("redlock_async: on_lost callback of %r failed", self._name)
        task = self._body_task
        # Not when the body itself noticed (its extend() raises LockLost already).
        if (
            task is not None
            and self._options.cancel_on_lost
            and not task.done()
            and task is not asyncio.current_task(self._core.loop())
        ):
            self._cancel_requested = True
            task.cancel(f"redlock_async: lock {self._name!r} was lost")
        return error

    # -- async with ---------------------------------------------------------

    async def __aenter__(self) -> Self:
        if not await self.acquire():
            raise LockNotAcquired(
                f"could not acquire lock {self._name!r} within {self._options.timeout}s",
                self._errors,
            )
        self._body_task = asyncio.current_task(self._core.loop())
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        task, self._body_task = self._body_task, None
        if self._cancel_requested:
            self._cancel_requested = False
            # Undo our own cancel request; if it was the only one, the
            # CancelledError in flight is ours and becomes LockLost.
            outside = task is not None and task.uncancel() > 0
            if outside:
                return  # an outside cancellation stays a cancellation
        if self._lost:
            raise self._lost_error or LockLost(f"lock {self._name!r} was lost")
        grant = self._grant
        if grant is None:
            return
        if self._core.clock() >= grant.validity_end:
            await self._release_quietly()
            raise LockLost(f"lock {self._name!r} expired before the body finished")
        if exc is not None:
            await self._release_quietly()
            return
        await self.release()
        return

    async def _release_quietly(self) -> None:
        try:
            await self.release()
        except RedlockError as err:
            _log.warning("redlock_async: release of %r failed: %s", self._name, err)
