"""Read-write locks over the same quorum: many readers or one writer.

State per node (see docs/rwlock.md): a writer key holding the writer's token,
a reader sorted set (token -> expiry on the server's clock) and a short-lived
writer-waiting marker. Every transition is one script, run on all nodes at
once and decided by quorum exactly like the exclusive lock, so the same
machinery - validity, cleanup, renewal, loss - applies unchanged.

Writers are not starved: a writer refused because readers hold the lock
leaves a marker (renewed by each of its attempts, expiring soon after it
stops) that makes nodes refuse new readers. Once the current readers leave,
the writer gets in at its next attempt.
"""

from __future__ import annotations

import asyncio
import secrets
import weakref
from collections.abc import Callable
from typing import Unpack

from ._config import LockKeywords, LockOptions
from ._engine import Script
from ._engine._core import Core
from ._engine._node import Command
from ._errors import ConfigurationError, RedlockError
from ._keys import KeyLayout, check_name
from ._lock import _UNSET, Lock, _Unset
from ._scripts import (
    EXTEND,
    READ_ACQUIRE,
    READ_EXTEND,
    READ_RELEASE,
    RELEASE,
    WRITE_ACQUIRE,
)
from ._timing import ttl_ms

__all__ = ["RWLock", "ReadLock", "WriteLock"]

OptionsFactory = Callable[..., LockOptions]


class RWLock:
    """A read-write lock on one name; ``read()`` and ``write()`` make lock objects.

    Obtain it from :meth:`Redlock.rwlock`. Both views take the keywords of
    :meth:`Redlock.lock` and return objects with the same methods and
    properties as :class:`Lock`.
    """

    def __init__(
        self, core: Core, name: str, options: OptionsFactory, defaults: LockKeywords
    ) -> None:
        self._core = core
        self._name = check_name(name)
        self._options = options
        self._defaults = defaults  # keywords given to rwlock(), for both views
        keys = KeyLayout(core.config.prefix, name)
        self.writer_key, self.readers_key, self.waiting_key = (
            keys.writer,
            keys.readers,
            keys.writer_waiting,
        )
        self._readers: weakref.WeakSet[ReadLock] = weakref.WeakSet()

    @property
    def name(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"<RWLock {self._name!r}>"

    def read(self, **options: Unpack[LockKeywords]) -> ReadLock:
        """A new read lock (shared with other readers, excluded by a writer)."""
        self._core.check_open()
        return ReadLock(self, self._options(**{**self._defaults, **options}))

    def write(self, **options: Unpack[LockKeywords]) -> WriteLock:
        """A new write lock (excludes readers and other writers)."""
        self._core.check_open()
        return WriteLock(self, self._options(**{**self._defaults, **options}))

    def _check_no_read_held(self) -> None:
        # An upgrade is this task asking to write while it reads: the writer
        # would wait for its own reader forever. Other tasks' readers are
        # simply waited for.
        task = asyncio.current_task()
        if any(reader.held and reader._owner is task for reader in self._readers):
            raise RedlockError(
                f"rwlock {self._name!r}: this task holds a read lock; upgrading read to "
                "write is not supported (it would wait for its own reader). "
                "Release the read lock first, or take the write lock from the start."
            )


class _View(Lock):
    """What the reader and writer views share: their RWLock and its keys."""

    __slots__ = ("_rw",)

    def __init__(self, rw: RWLock, options: LockOptions) -> None:
        super().__init__(rw._core, rw.name, options)
        self._rw = rw

    def _queue_keys(self) -> tuple[bytes, bytes]:
        return self._key + b":rwq", self._key + b":rwqh"

    def _announced(self, script: Script, key: bytes, token: bytes, announce: bool) -> Command:
        keys = (key, self._key + b":wake") if announce else (key,)
        return Command(script, keys, (token,))


class ReadLock(_View):
    """The reader view of an :class:`RWLock`."""

    __slots__ = ("_owner",)
    _kind = b"r:"

    def __init__(self, rw: RWLock, options: LockOptions) -> None:
        if options.fencing:
            raise ConfigurationError(
                "fencing=True is for write locks: readers share the lock, so a "
                "fencing token could not order them"
            )
        super().__init__(rw, options)
        self._owner: asyncio.Task[object] | None = None

    def __repr__(self) -> str:
        return "<Read" + super().__repr__()[1:]

    def _acquire_command(self, token: bytes, ttl: float) -> Command:
        rw = self._rw
        if self._options.fair:
            return self._fair_command(token, ttl, rw.writer_key, rw.readers_key)
        keys = (rw.writer_key, rw.readers_key, rw.waiting_key)
        return Command(READ_ACQUIRE, keys, (token, ttl_ms(ttl)))

    def _release_command(self, token: bytes, announce: bool = False) -> Command:
        return self._announced(READ_RELEASE, self._rw.readers_key, token, announce)

    def _extend_command(self, token: bytes, ttl: float) -> Command:
        return Command(READ_EXTEND, (self._rw.readers_key,), (token, ttl_ms(ttl)))

    async def acquire(self, blocking: bool = True, timeout: float | _Unset | None = _UNSET) -> bool:
        granted = await super().acquire(blocking, timeout)
        if granted:
            self._owner = asyncio.current_task()
            self._rw._readers.add(self)
        return granted


class WriteLock(_View):
    """The writer view of an :class:`RWLock`."""

    __slots__ = ("_marker",)
    _kind = b"w:"
    _leaves_marks = True  # the writer-waiting marker

    def __init__(self, rw: RWLock, options: LockOptions) -> None:
        super().__init__(rw, options)
        self._marker = b""  # id this writer puts in the writer-waiting marker

    def __repr__(self) -> str:
        return "<Write" + super().__repr__()[1:]

    def _marker_ms(self) -> int:
        # Renewed by every attempt; outlives a few retry intervals, so a
        # writer that crashed stops holding readers back soon after.
        config = self._core.config
        return ttl_ms(max(0.1, 3.0 * (config.retry_delay + config.retry_jitter)))

    def _acquire_command(self, token: bytes, ttl: float) -> Command:
        rw = self._rw
        if self._options.fair:
            # The queue orders writers and readers; no waiting marker needed.
            return self._fair_command(token, ttl, rw.writer_key, rw.readers_key)
        keys: tuple[bytes, ...] = (rw.writer_key, rw.readers_key, rw.waiting_key)
        if self._options.fencing:
            keys += (self._fence_keys()[1],)
        args = (token, ttl_ms(ttl), self._marker, self._marker_ms())
        return Command(WRITE_ACQUIRE, keys, args)

    def _fence_keys(self) -> tuple[bytes, bytes]:
        return self._rw.writer_key, self._key + b":rwfence"

    def _release_command(self, token: bytes, announce: bool = False) -> Command:
        return self._announced(RELEASE, self._rw.writer_key, token, announce)

    def _extend_command(self, token: bytes, ttl: float) -> Command:
        return Command(EXTEND, (self._rw.writer_key,), (token, ttl_ms(ttl)))

    async def acquire(self, blocking: bool = True, timeout: float | _Unset | None = _UNSET) -> bool:
        self._rw._check_no_read_held()
        self._marker = secrets.token_hex(8).encode()
        return await super().acquire(blocking, timeout)

    def _attempts_over(self, granted: bool) -> None:
        super()._attempts_over(granted)
        last = self._last_attempt
        # Clear our writer-waiting marker wherever an attempt may have left
        # it: after giving up, on cancellation, and after a grant that needed
        # more than a clean first attempt. Nobody awaits this.
        if not self._options.fair and last is not None and not (granted and last.yes == last.n):
            # Readers held back by the marker may be waiting: announce it.
            unwait = self._announced(RELEASE, self._rw.waiting_key, self._marker, True)
            self._core.fanout(unwait, after=last)
