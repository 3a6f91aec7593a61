"""Blocking locks: each wraps an async lock and forwards every call through the portal.

No lock logic lives here: the async :class:`~redlock_async.Lock` decides,
renews and releases on the loop thread. What is here is what threads need
on top: waiting interruptibly (Ctrl-C gives back a grant won meanwhile),
``with`` instead of ``async with``, ``on_lost`` called with the sync lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import weakref
from collections.abc import Callable, Coroutine, Mapping
from types import TracebackType
from typing import Any, Self, TypedDict, TypeVar, Unpack, cast

from .._base._config import LockOptions
from .._base._errors import LockLost, NodeError, RedlockError
from .._base._peers import NoKeywords, unexpected_keyword
from .._core._lock import UNSET, LockKeywords, Unset
from .._core._lock import Lock as AsyncLock
from .._kinds._rwlock import RWLock as AsyncRWLock
from ._portal import Call, Portal

__all__ = ["Lock", "RWLock", "SyncKeywords", "Wrapping"]

_T = TypeVar("_T")


class SyncKeywords(TypedDict, total=False):
    """The keywords of the async lock factories, with ``on_lost`` given the sync lock."""

    ttl: float
    auto_extend: bool
    timeout: float | None
    fencing: bool
    cancel_on_lost: bool
    fair: bool
    on_lost: Callable[[Lock], object] | None
    max_attempts: int | None
    min_validity: float
    unavailable_timeout: float | None


class Lock:
    """A distributed lock for threads: :class:`redlock_async.Lock`, blocking.

    Get one from :meth:`Redlock.lock`, :meth:`RWLock.read`,
    :meth:`RWLock.write` or :meth:`Redlock.adopt`; one object per critical
    section, as the async lock. ``with lock:`` acquires (raising
    LockBusy, QuorumUnavailable or LockNotAcquired as ``async with`` does)
    and releases; a lock lost while the body runs cannot stop the thread:
    ``lost`` turns True, ``on_lost`` runs on the event-loop thread, and
    ``LockLost`` is raised when the body ends.
    """

    __slots__ = ("__weakref__", "_lock", "_portal")

    def __init__(self, lock: AsyncLock, portal: Portal) -> None:
        self._lock = lock
        self._portal = portal

    @property
    def name(self) -> str:
        return self._lock.name

    @property
    def ttl(self) -> float:
        """The ttl of the current grant (or the configured one when not held)."""
        return self._lock.ttl

    @property
    def options(self) -> LockOptions:
        return self._lock.options

    @property
    def held(self) -> bool:
        """True while this object holds a grant that is still valid."""
        return self._lock.held

    @property
    def lost(self) -> bool:
        """True once a held grant was lost (renewal failed, expired, or Redlock closed)."""
        return self._lock.lost

    @property
    def valid_for(self) -> float:
        """Seconds of guaranteed validity left; 0.0 when not held."""
        return self._lock.valid_for

    @property
    def errors(self) -> Mapping[str, NodeError]:
        """Per-node errors of the last attempt that failed (empty after a grant)."""
        return self._lock.errors

    @property
    def token(self) -> str | None:
        """The current grant's token, None when not held (see :meth:`Redlock.adopt`)."""
        return self._lock.token

    @property
    def fencing_token(self) -> int | None:
        """The current grant's fencing token when ``fencing=True``, else None."""
        return self._lock.fencing_token

    def __repr__(self) -> str:
        return f"<sync.{repr(self._lock)[1:]}"

    def acquire(
        self,
        blocking: bool = True,
        timeout: float | Unset | None = UNSET,
        *,
        unavailable_timeout: float | Unset | None = UNSET,
        **unexpected: Unpack[NoKeywords],
    ) -> bool:
        """Try to acquire; True on success, False when it gave up.

        ``blocking=False`` makes one attempt; otherwise attempts repeat until
        ``timeout`` seconds passed (default: the lock's ``timeout``; None
        waits forever) or, while no quorum of nodes answers, until
        ``unavailable_timeout`` seconds passed since the first attempt no
        quorum answered (default: the lock's; None: no such limit), as
        :meth:`redlock_async.Lock.acquire`. Interrupted while waiting (Ctrl-C), it gives back a
        grant won meanwhile before the interruption propagates. Raises
        RedlockError when this object already holds a grant, RuntimeError
        from a thread that runs an event loop, TypeError for any other keyword
        (naming ``timeout`` for redis-py's ``blocking_timeout``).
        """
        if unexpected:  # raised here, not on the loop thread
            raise unexpected_keyword("Lock.acquire", next(iter(unexpected)))
        acquire = functools.partial(self._lock.acquire, unavailable_timeout=unavailable_timeout)
        return self._attempt(acquire, blocking, timeout)

    def extend(
        self,
        ttl: float | None = None,
        *,
        timeout: float | None = 0.0,
        **unexpected: Unpack[NoKeywords],
    ) -> None:
        """Renew the grant to a full ``ttl`` (default: the lock's) from now.

        ``timeout`` [0.0] as :meth:`redlock_async.Lock.extend`'s: by default
        one try, returning within the vote limit V; more until ``timeout``
        seconds have passed or the validity ends (None: until it ends).
        Raises LockLost when the grant is gone or its validity ended;
        QuorumUnavailable when no quorum confirmed in time while it is still
        valid (still held, its renewal goes on); LockNotOwned when this
        object holds no grant; TypeError for any other keyword.
        """
        if unexpected:
            raise unexpected_keyword("Lock.extend", next(iter(unexpected)))
        self._call(functools.partial(self._lock.extend, timeout=timeout), ttl)

    def release(self) -> None:
        """Release the grant on every node (raises as :meth:`redlock_async.Lock.release`)."""
        self._call(self._lock.release)

    def __enter__(self) -> Self:
        self._attempt(self._lock.__aenter__)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._call(self._lock.__aexit__, exc_type, exc, tb)

    def _call(self, func: Callable[..., Coroutine[Any, Any, _T]], *args: object) -> _T:
        portal = self._portal
        if portal.closed and self._lock.lost:
            # Its Redlock was closed while it was held: the loop thread is gone.
            raise LockLost(f"lock {self.name!r} was lost: its Redlock was closed while it was held")
        return portal.call(func, *args)

    def _attempt(self, func: Callable[..., Coroutine[Any, Any, _T]], *args: object) -> _T:
        """Wait for an acquire on the loop thread; interrupted, cancel it and undo its grant."""
        portal = self._portal
        call = portal.start(func, *args)
        try:
            call.join()
        except BaseException as exc:
            # Interrupted while waiting (KeyboardInterrupt, or a signal
            # handler's exception): the attempt would run on in the loop.
            portal.call(self._settle, call, exc)
            raise
        return call.wait()  # the attempt's own outcome (True, LockBusy...)

    async def _settle(self, call: Call[Any], exc: BaseException) -> None:
        """After an interrupted attempt: cancel it, let it end, give back a grant it won."""
        # Queued after the attempt: the attempt has begun (its task is set).
        task = call.task
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait((task,))
        if self._lock._grant is not None:  # not .token: that marks it handed on
            with contextlib.suppress(RedlockError):
                await self._lock.__aexit__(type(exc), exc, exc.__traceback__)


class _OnLost:
    """An ``on_lost`` for the async lock that calls the user's with the sync lock.

    Equal for equal callbacks of one Redlock: the options cache keys on it.
    """

    __slots__ = ("callback", "wrappers")

    def __init__(
        self,
        callback: Callable[[Lock], object],
        wrappers: weakref.WeakKeyDictionary[AsyncLock, weakref.ref[Lock]],
    ) -> None:
        self.callback = callback
        self.wrappers = wrappers

    def __call__(self, lock: AsyncLock) -> object:
        ref = self.wrappers.get(lock)
        wrapper = ref() if ref is not None else None
        return None if wrapper is None else self.callback(wrapper)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, _OnLost)
            and other.wrappers is self.wrappers
            and other.callback == self.callback
        )

    def __hash__(self) -> int:
        return hash(self.callback)


class Wrapping:
    """How one sync Redlock turns keywords and async locks into sync ones."""

    __slots__ = ("_wrappers", "portal")

    def __init__(self, portal: Portal) -> None:
        self.portal = portal
        self._wrappers: weakref.WeakKeyDictionary[AsyncLock, weakref.ref[Lock]] = (
            weakref.WeakKeyDictionary()
        )

    def keywords(self, options: SyncKeywords) -> LockKeywords:
        """``options`` for the async factory: ``on_lost`` wrapped to get the sync lock."""
        on_lost = options.get("on_lost")
        if on_lost is None:
            return cast(LockKeywords, options)
        return cast(LockKeywords, {**options, "on_lost": _OnLost(on_lost, self._wrappers)})

    def lock(self, lock: AsyncLock) -> Lock:
        """The sync lock of ``lock`` (any kind: exclusive, read, write, ...)."""
        wrapper = Lock(lock, self.portal)
        if isinstance(lock.options.on_lost, _OnLost):
            self._wrappers[lock] = weakref.ref(wrapper)
        return wrapper


class RWLock:
    """A read-write lock for threads: ``read()`` and ``write()`` make sync :class:`Lock`
    objects. Get it from :meth:`Redlock.rwlock`; see :class:`redlock_async.RWLock`."""

    __slots__ = ("_rwlock", "_wrapping")

    def __init__(self, rwlock: AsyncRWLock, wrapping: Wrapping) -> None:
        self._rwlock = rwlock
        self._wrapping = wrapping

    @property
    def name(self) -> str:
        return self._rwlock.name

    def __repr__(self) -> str:
        return f"<sync.RWLock {self.name!r}>"

    def read(self, **options: Unpack[SyncKeywords]) -> Lock:
        """A new read lock (shared with other readers, excluded by a writer)."""
        wrapping = self._wrapping
        return wrapping.lock(self._rwlock.read(**wrapping.keywords(options)))

    def write(self, **options: Unpack[SyncKeywords]) -> Lock:
        """A new write lock (excludes readers and other writers)."""
        wrapping = self._wrapping
        return wrapping.lock(self._rwlock.write(**wrapping.keywords(options)))
