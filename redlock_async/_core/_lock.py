"""The lock every user holds: acquire, extend, release, ``async with``, loss.

A :class:`Lock` is the same for an exclusive lock and for both views of a
read-write lock: what differs is its :class:`~._commands.Commands`. Once
held, it owns a :class:`~._renewal.Renewer`: its weak handle for the
registries of held locks, and its entry in the renewal schedule; the
attempts of ``acquire()`` are ``_acquire``'s.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from types import MappingProxyType, TracebackType
from typing import Final, Self, TypedDict, Unpack

from .._base._config import LockOptions, check_seconds
from .._base._errors import LockLost, NodeError, RedlockError
from .._base._observe import LOCK, warn
from .._base._peers import NoKeywords, unexpected_keyword
from .._engine import Engine
from . import _acquire
from . import _observed as observed
from ._call import Failures
from ._commands import Commands, ExclusiveCommands
from ._extend import Unconfirmed, extend_now, extend_request
from ._grant import Grant
from ._holder import NO_LOSS, Body, Cleanup
from ._holdings import Holdings
from ._lockstate import LockState
from ._observed import listening
from ._refusal import judged, not_acquired
from ._release import judge_release, send_release, settle_release
from ._renewal import Renewer

__all__ = ["REDLOCKS", "UNSET", "Holdings", "Lock", "LockKeywords", "OnLost", "Unset"]

_log = logging.getLogger("redlock_async.lock")
_debugging = LOCK.isEnabledFor

OnLost = Callable[["Lock"], object]


class LockKeywords(TypedDict, total=False):
    """The keywords every lock factory takes (see :class:`LockOptions`)."""

    ttl: float
    auto_extend: bool
    timeout: float | None
    fencing: bool
    cancel_on_lost: bool
    fair: bool
    on_lost: OnLost | None
    max_attempts: int | None
    min_validity: float
    unavailable_timeout: float | None


class Unset:
    """A keyword left out: the setting it stands for is taken from elsewhere
    (``acquire(timeout=...)``: the lock's own; ``lock(unavailable_timeout=...)``:
    the Redlock's)."""

    __slots__ = ("_whose",)

    def __init__(self, whose: str = "lock's") -> None:
        self._whose = whose

    def __repr__(self) -> str:
        return f"<{self._whose}>"


UNSET: Final = Unset()
"""The default of ``acquire()``'s ``timeout`` and ``unavailable_timeout``: the lock's own."""
REDLOCKS: Final = Unset("Redlock's")
"""The default of the lock factories' ``unavailable_timeout``: the Redlock's."""
_NO_ERRORS: Final[Mapping[str, NodeError]] = MappingProxyType({})
_ORPHANED = "it was held on another event loop or by the parent process before a fork"


def _close(self: Lock, reason: str) -> None:
    """``Lock._close``: its Redlock closes while the lock holds a grant (``aclose()``).

    An implicit ending never ends a grant held elsewhere: a grant handed on
    (its token read, or adopted here) keeps its keys for the copies that
    may hold it, and only a grant never handed on is released (others need
    not wait out its ttl). A grant still valid is reported lost (``lost``,
    ``on_lost``, the body cancelled), and so is an auto-renewed one past its
    validity: its renewal was owed (a stalled loop) and would have told the
    holder, whose body must not run on while another may hold the name. A
    grant without renewal whose validity had ended was not lost here: it is
    only let go, and a running body learns at its exit.
    """
    grant = self._grant
    if grant is None:
        return
    handed_on = _handed_on(self, grant)
    if self._options.auto_extend or self._engine.clock() < grant.validity_end:
        self._lose(reason, {}, release=not handed_on)
        return
    self._drop(grant)
    if not handed_on:  # its remnants would only block the next holder
        command = self._commands.release(grant.token, False)
        self._engine.undo(grant.acquired, command, self._engine.clock() + grant.ttl)
    if self._body is not None:
        # The body learns at its exit that its grant had expired
        # (``__aexit__``), as without the close; nothing is cancelled.
        self._grant = grant


def _orphan(self: Lock) -> None:
    """``Lock._orphan``: the grant belongs to another event loop or the parent
    process: dropped silently (lost; nothing sent or cancelled)."""
    self._grant = None
    self._body = None
    self._own_loss().mark(LockLost(f"lock {self._name!r} was lost: {_ORPHANED}"))


class Lock(LockState):
    """A distributed lock on one name. Create one per critical section: get it from
    :meth:`Redlock.lock` (exclusive) or :meth:`RWLock.read` / :meth:`RWLock.write`;
    see :meth:`Redlock.lock` for the keywords."""

    __slots__ = (
        "__weakref__",
        "_acquiring",
        "_adopted",
        "_body",
        "_commands",
        "_holdings",
        "_refused",
        "_renewer",
    )

    def __init__(
        self,
        engine: Engine,
        holdings: Holdings[Lock],
        name: str,
        options: LockOptions,
        commands: Commands,
    ) -> None:
        self._engine = engine
        self._holdings = holdings
        self._name = name
        self._options = options
        self._commands = commands
        self._renewer: Renewer[Lock] | None = None  # made when first held
        self._grant: Grant | None = None
        self._acquiring = False
        self._adopted = False  # holds a grant made elsewhere, not yet entered with `async with`
        self._loss = NO_LOSS  # its own record made when needed (_own_loss)
        self._errors: Mapping[str, NodeError] = _NO_ERRORS
        self._body: Body | None = None  # the `async with` body's task, cancelled on loss
        self._refused: Failures | None = None  # the failed attempts of the last acquire()

    async def acquire(
        self,
        blocking: bool = True,
        timeout: float | Unset | None = UNSET,
        *,
        unavailable_timeout: float | Unset | None = UNSET,
        **unexpected: Unpack[NoKeywords],
    ) -> bool:
        """Try to acquire; True on success, False when it gave up.

        ``blocking=False`` makes one attempt. Otherwise attempts repeat, each
        after ``retry_delay`` plus random jitter, until ``timeout`` seconds have
        passed (default: the lock's ``timeout``; None waits forever) - or,
        while no quorum of nodes answers (down, refusing, silent), until
        ``unavailable_timeout`` seconds have passed since the first attempt
        no quorum answered (default: the lock's; None: no such limit). A
        name held elsewhere is waited for the whole ``timeout``.
        Raises RedlockError when this object already holds a grant, ConfigurationError
        for a bad ``timeout`` or ``unavailable_timeout``, TypeError for another keyword.
        """
        if unexpected:
            raise unexpected_keyword("Lock.acquire", next(iter(unexpected)))
        if self._grant is not None or self._acquiring:
            raise RedlockError(
                f"lock {self._name!r} is already held or being acquired by this object; "
                "create a new Lock object per critical section"
            )
        limit = self._options.timeout  # validated with the options
        if timeout is not UNSET:
            limit = check_seconds("timeout", timeout, allow_none=True)
        unavailable = self._options.unavailable_timeout
        if unavailable_timeout is not UNSET:
            unavailable = check_seconds("unavailable_timeout", unavailable_timeout, allow_none=True)
        owner = asyncio.current_task()
        if blocking and limit is None:
            self._holdings.owners.check(self, self._name, self._commands.kind, owner)
        call = _acquire.acquire(
            self._engine, self._commands, self._options, blocking, limit, unavailable
        )
        # Telemetry on, or DEBUG logs: report it (inlined: _observed.listening).
        if self._engine.telemetry is not None or _debugging(logging.DEBUG):
            call = observed.acquire(self._engine, self._name, call, Grant)
        self._acquiring = True
        try:
            grant, errors, self._refused = await call
        finally:
            self._acquiring = False
        if grant is None:
            # Judged as `async with` would (lock.errors then lists what its
            # LockNotAcquired does): the nodes still answering the last
            # attempt are waited for, up to node_timeout.
            wait = self._engine.config.node_timeout
            self._errors = await judged(self._refused, errors, wait)
            return False
        self._refused = None
        self._hold(grant, owner)
        return True

    def _hold(self, grant: Grant, owner: asyncio.Task[object] | None) -> None:
        """Hold ``grant`` (acquired here, or adopted): tracked, and renewed if asked."""
        self._grant = grant
        if self._loss.error is not None:  # a new grant after a loss: it is history
            self._loss.clear()
        self._errors = _NO_ERRORS
        renewer = self._renewal()
        holdings = self._holdings
        holdings.add(renewer)
        if self._options.auto_extend:
            holdings.renewals.start(renewer, grant)
            # Only a renewed grant can make a wait for it endless (_owners.py).
            holdings.owners.took(renewer, self._name, self._commands.kind, owner)

    async def extend(
        self,
        ttl: float | None = None,
        *,
        timeout: float | None = 0.0,
        **unexpected: Unpack[NoKeywords],
    ) -> None:
        """Renew the grant to a full ``ttl`` (default: the lock's ttl) from now.

        ``timeout`` [0.0]: one try, which returns within the vote limit V
        (docs/guarantees.md); T: a try every ``min(retry_delay, ttl / 6)`` for up
        to T seconds; None: until the validity ends. Raises LockLost when a quorum
        refuses the grant or its validity ends; QuorumUnavailable when no quorum
        confirmed in time while it is valid (still held, its renewal goes on);
        LockNotOwned when not held; ConfigurationError, TypeError for bad arguments.
        """
        if unexpected:
            raise unexpected_keyword("Lock.extend", next(iter(unexpected)))
        if listening(self._engine):
            return await observed.extend(self._engine, self._name, self._extend(ttl, timeout))
        return await self._extend(ttl, timeout)

    async def _extend(self, ttl: float | None, timeout: float | None) -> None:
        engine = self._engine
        asked = extend_request(self._options, engine.config, ttl, timeout)  # checked first
        engine.loop()  # a grant of another loop or of the parent is orphaned first
        grant = self._require_grant()
        engine.check_open()
        renewals, renewer = self._holdings.renewals, self._renewal()
        outcome = await extend_now(renewals, renewer, grant, asked, lambda: self._grant is grant)
        if outcome is None:
            return
        if self._grant is not grant:  # released or lost meanwhile
            raise self._loss.error or LockLost(f"lock {self._name!r} is no longer held")
        if isinstance(outcome, Unconfirmed):  # not lost: renewed on while valid (extend_now)
            raise outcome.error(self._name, self.valid_for, asked.renew)
        raise self._lose(outcome.reason, outcome.errors, outcome.refused)

    def _renewal(self) -> Renewer[Lock]:
        """This lock's renewer: its weak handle (Holdings, Owners) and renewal entry."""
        renewer = self._renewer
        if renewer is None:
            renewer = self._renewer = Renewer(self, self._commands, self._holdings.gone)
        return renewer

    async def release(self) -> None:
        """Release the grant on every node.

        Raises LockNotOwned when more nodes than a quorum can spare answered
        that they no longer held it, or its validity had already ended;
        LockLost when it had been lost. When failing or slow nodes leave the
        outcome unknown, it logs a warning instead: the keys expire anyway.
        Volume is no such failure: however many releases are in flight, each
        is queued and returns once a quorum confirmed it.

        Cancellation-safe: the grant is dropped and the release sent before
        the first await, so a cancelled release still releases (nodes whose
        connection fails get it again until the key would have expired).
        """
        # On a new loop, or in a forked child: the grants of the old one are
        # orphaned first (lost, never released from here - in a child they
        # are the parent's), so this raises for them rather than releasing.
        self._engine.loop()
        grant = self._grant or self._require_grant()  # raises when not held
        # No waiting for a renewal in flight: the grant is forgotten first
        # (its outcome is then ignored), and a renewal that lands after the
        # release finds the key gone - extend.lua never re-creates a key.
        self._drop(grant)
        engine = self._engine
        tally, expired = send_release(engine, self._commands, grant)
        if engine.telemetry is not None or _debugging(logging.DEBUG):
            settled = settle_release(self._name, tally, expired)
            await observed.release(engine, self._name, grant, settled)
        elif not await tally.decided or expired:
            judge_release(self._name, tally, expired)

    def _drop(self, grant: Grant) -> None:
        """Forget ``grant`` locally and stop renewing it."""
        if self._grant is grant:
            self._grant = None
            self._adopted = False
        holdings = self._holdings
        renewer = self._renewer
        if renewer is not None:  # always, once held
            holdings.renewals.stop(renewer)
            holdings.discard(renewer)
            holdings.owners.gave_up(renewer, self, self._name, self._commands.kind)

    def _lose(self, reason: str, errors: Mapping[str, NodeError], release: bool = True) -> LockLost:
        """Mark the held grant lost, tell the holder; returns the error. ``release``:
        delete its keys - when no live copy can be left (a quorum refused it,
        or aclose()), never for a grant handed on: a refusal may come from a
        node that forgot the key in a restart redis-py did not see, and an
        adopted copy may live on, whose keys a release would delete."""
        grant = self._grant
        error = LockLost(f"lock {self._name!r} was lost: {reason}", errors)
        if grant is None:
            return self._loss.error or error
        self._drop(grant)
        observed.lost(self._engine, self._name, grant, str(error))
        self._own_loss().tell(error, self._options.on_lost, self)
        # Remnants on a minority would only block the next holder until expiry;
        # not while a body may still work, though: only once it has stopped.
        cleanup = None
        if release and not _handed_on(self, grant):
            command = self._commands.release(grant.token, False)
            cleanup = Cleanup(grant.acquired, command, self._engine.clock() + grant.ttl)
        if self._body is None:
            if cleanup is not None:
                self._engine.undo(*cleanup)
        else:
            self._body.stop(cleanup, self._options.cancel_on_lost, error, self._engine.loop())
        return error

    _close = _close  # what closing its Redlock, and a fork, do to its grant
    _orphan = _orphan

    async def __aenter__(self) -> Self:
        if self._adopted and self._grant is not None:
            self._adopted = False  # `async with await redlock.adopt(...)`: already held
        elif not await self.acquire():
            # Why: busy (a quorum refused) or unavailable (no quorum answered).
            failures, self._refused = self._refused, None
            raise not_acquired(self._name, failures, self._errors, self._options.timeout)
        self._body = Body(self._engine.loop())
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        body, self._body = self._body, None
        if body is not None and body.exited(self._engine):
            return  # an outside cancellation stays a cancellation
        if self._loss.error is not None:
            raise self._loss.error
        if self._grant is not None:
            await _leave(self, self._grant, exc)


async def _leave(lock: Lock, grant: Grant, exc: BaseException | None) -> None:
    """The end of an ``async with`` body that still holds ``grant``: release it."""
    if lock._engine.clock() >= grant.validity_end:
        # Expired in the body: a loss, not a release. It never ends a copy
        # held elsewhere; aclose() has let it go already (_close).
        if lock._engine.closing or _handed_on(lock, grant):
            lock._drop(grant)
        else:
            await _release_quietly(lock)
        raise LockLost(f"lock {lock._name!r} expired before the body finished")
    if exc is not None:
        await _release_quietly(lock)
        return
    await lock.release()


def _handed_on(lock: Lock, grant: Grant) -> bool:
    """Whether a copy of ``grant`` may be held elsewhere: its token was read, or it
    was adopted here - a plain lock's only (adopt() refuses the other kinds')."""
    return grant.shared and lock._commands.kind == ExclusiveCommands.kind


async def _release_quietly(lock: Lock) -> None:
    """Release on the way out of a body that failed: a failure to release is only logged."""
    try:
        await lock.release()
    except RedlockError as err:
        warn(LOCK, "release failed", lock.name, f"release of {lock.name!r} failed: {err}",
             name=lock.name, outcome=type(err).__name__)  # fmt: skip
