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
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, NoReturn, Unpack

from .._base._config import LockOptions
from .._base._errors import ConfigurationError, RedlockError
from .._base._keys import KeyLayout
from .._base._timing import ttl_ms, writer_marker_ttl
from .._core._commands import FairEntry, clean_first_try, fair_acquire, fair_leave
from .._core._lock import Holdings, Lock, LockKeywords
from .._core._scripts import EXTEND, READ_ACQUIRE, READ_EXTEND, READ_RELEASE, RELEASE, WRITE_ACQUIRE
from .._engine import Command, Engine, Script, Tally, Waiting

__all__ = ["RWLock", "ReadLock", "WriteLock"]

# OptionsCache.of: the options of keywords given to a function (its name, for errors).
OptionsFactory = Callable[[str, Mapping[str, Any]], LockOptions]

_RW_LINE = b"rw"  # the line of both views' waiters (Commands.waiting)


class RWLock:
    """A read-write lock on one name; ``read()`` and ``write()`` make lock objects.

    Obtain it from :meth:`Redlock.rwlock`. Both views take the keywords of
    :meth:`Redlock.lock` and return objects with the same methods and
    properties as :class:`Lock`.
    """

    def __init__(
        self,
        engine: Engine,
        holdings: Holdings[Lock],
        name: str,
        keys: KeyLayout,
        options: OptionsFactory,
        defaults: LockKeywords,
    ) -> None:
        self._engine = engine
        self._holdings = holdings
        self._name = name
        self._keys = keys
        self._options = options
        self._defaults = defaults  # keywords given to rwlock(), for both views
        # This name's read locks, and the task each was granted to (upgrade detection).
        self._readers: weakref.WeakKeyDictionary[ReadLock, _ReadCommands] = (
            weakref.WeakKeyDictionary()
        )

    @property
    def name(self) -> str:
        return self._name

    def __aenter__(self) -> NoReturn:
        raise TypeError(
            "an RWLock is not a lock itself: use `async with rw.read(...)` (shared) or "
            "`async with rw.write(...)` (exclusive)"
        )

    def __aexit__(self, *exc_info: object) -> None:  # pragma: no cover - __aenter__ raises
        pass

    # `with rw:` too: the same mistake, the same answer.
    __enter__ = __aenter__
    __exit__ = __aexit__

    def __repr__(self) -> str:
        return f"<RWLock {self._name!r}>"

    def read(self, **options: Unpack[LockKeywords]) -> ReadLock:
        """A new read lock (shared with other readers, excluded by a writer)."""
        self._engine.check_open()
        opts = self._options("RWLock.read", {**self._defaults, **options})
        if opts.fencing:
            raise ConfigurationError(
                "fencing=True is for write locks: readers share the lock, so a "
                "fencing token could not order them"
            )
        commands = _ReadCommands(self._keys)
        lock = ReadLock(self._engine, self._holdings, self._name, opts, commands)
        self._readers[lock] = commands
        return lock

    def write(self, **options: Unpack[LockKeywords]) -> WriteLock:
        """A new write lock (excludes readers and other writers)."""
        self._engine.check_open()
        opts = self._options("RWLock.write", {**self._defaults, **options})
        commands = _WriteCommands(self._keys, self._engine, self.check_no_read_held)
        return WriteLock(self._engine, self._holdings, self._name, opts, commands)

    def check_no_read_held(self) -> None:
        """Refuse an upgrade: this task asking to write while it holds a read grant.

        The writer would wait for its own reader forever. Other tasks'
        readers are simply waited for.
        """
        task = asyncio.current_task()
        readers = list(self._readers.items())
        if any(lock.held and commands.owner is task for lock, commands in readers):
            raise RedlockError(
                f"rwlock {self._name!r}: this task holds a read lock; upgrading read to "
                "write is not supported (it would wait for its own reader). "
                "Release the read lock first, or take the write lock from the start."
            )


class ReadLock(Lock):
    """The reader view of an :class:`RWLock` (a :class:`Lock` with the readers' commands)."""

    __slots__ = ()


class WriteLock(Lock):
    """The writer view of an :class:`RWLock` (a :class:`Lock` with the writer's commands)."""

    __slots__ = ()


def _announced(script: Script, key: bytes, wake: bytes, token: bytes, announce: bool) -> Command:
    return Command(script, (key, wake) if announce else (key,), (token,))


class _ReadCommands:
    """The readers' scripts (rw_read_*.lua): a token in the reader set."""

    __slots__ = ("keys", "owner")

    kind = b"r:"
    token_prefix = b""

    def __init__(self, keys: KeyLayout) -> None:
        self.keys = keys
        self.owner: asyncio.Task[object] | None = None  # the task of the last grant

    def acquire(self, token: bytes, ttl_ms: int, fencing: bool, fair: FairEntry | None) -> Command:
        keys = self.keys
        if fair is not None:
            queue = (keys.rw_queue, keys.rw_heartbeats)
            return fair_acquire(queue, keys.writer, keys.readers, token, ttl_ms, None, fair)
        return Command(
            READ_ACQUIRE, (keys.writer, keys.readers, keys.writer_waiting), (token, ttl_ms)
        )

    def judge(self, tally: Tally) -> Awaitable[bool]:
        return tally.decided

    def grant_keys(self) -> Sequence[bytes]:
        return (self.keys.lock,)

    def release(self, token: bytes, announce: bool) -> Command:
        return _announced(READ_RELEASE, self.keys.readers, self.keys.wake, token, announce)

    def extend(self, token: bytes, ttl: float) -> Command:
        return Command(READ_EXTEND, (self.keys.readers,), (token, ttl_ms(ttl)))

    def renewal_target(self) -> tuple[bytes, bytes] | None:
        return b"r", self.keys.readers

    def fence_keys(self) -> tuple[bytes, bytes]:
        raise ConfigurationError("read locks carry no fencing token")

    def waiting(self) -> Waiting:
        # One line with the writers (one lock, and a writer must get its
        # turn); readers win together. An exclusive lock of the name has its own.
        return Waiting(_RW_LINE, (self.keys.wake,), shared=True)

    def attempts_begin(self) -> None:
        pass

    def attempts_over(
        self, last: Tally | None, granted: bool, fair: FairEntry | None
    ) -> tuple[Command, ...]:
        if granted:
            self.owner = asyncio.current_task()
        if fair is None or clean_first_try(last, granted):
            return ()
        keys = self.keys
        return (fair_leave((keys.rw_queue, keys.rw_heartbeats), keys.wake, fair, granted),)


class _WriteCommands:
    """The writer's scripts: the writer key, and the writer-waiting marker.

    A writer refused because readers hold the lock leaves a marker (renewed
    by each attempt, expiring soon after it stops) that makes nodes refuse
    new readers: once the current readers leave, the writer gets in.
    """

    __slots__ = ("_check", "_marker", "_marker_ms", "_random", "keys")

    kind = b"w:"
    token_prefix = b""

    def __init__(self, keys: KeyLayout, engine: Engine, check: Callable[[], None]) -> None:
        self.keys = keys
        self._check = check
        self._marker = b""  # id this writer puts in the writer-waiting marker
        self._random = engine.world.token_bytes
        config = engine.config
        self._marker_ms = ttl_ms(writer_marker_ttl(config.retry_delay, config.retry_jitter))

    def acquire(self, token: bytes, ttl_ms: int, fencing: bool, fair: FairEntry | None) -> Command:
        keys = self.keys
        fence = keys.rw_fence if fencing else None
        if fair is not None:
            # The queue orders writers and readers; no waiting marker needed.
            queue = (keys.rw_queue, keys.rw_heartbeats)
            return fair_acquire(queue, keys.writer, keys.readers, token, ttl_ms, fence, fair)
        lua_keys: tuple[bytes, ...] = (keys.writer, keys.readers, keys.writer_waiting)
        if fence is not None:
            lua_keys += (fence,)
        return Command(WRITE_ACQUIRE, lua_keys, (token, ttl_ms, self._marker, self._marker_ms))

    def judge(self, tally: Tally) -> Awaitable[bool]:
        return tally.decided

    def grant_keys(self) -> Sequence[bytes]:
        return (self.keys.lock,)

    def release(self, token: bytes, announce: bool) -> Command:
        return _announced(RELEASE, self.keys.writer, self.keys.wake, token, announce)

    def extend(self, token: bytes, ttl: float) -> Command:
        return Command(EXTEND, (self.keys.writer,), (token, ttl_ms(ttl)))

    def renewal_target(self) -> tuple[bytes, bytes] | None:
        return b"x", self.keys.writer

    def fence_keys(self) -> tuple[bytes, bytes]:
        return self.keys.writer, self.keys.rw_fence

    def waiting(self) -> Waiting:
        return Waiting(_RW_LINE, (self.keys.wake,))

    def attempts_begin(self) -> None:
        self._check()
        self._marker = self._random(8).hex().encode()

    def attempts_over(
        self, last: Tally | None, granted: bool, fair: FairEntry | None
    ) -> tuple[Command, ...]:
        if clean_first_try(last, granted):
            return ()
        keys = self.keys
        if fair is not None:
            return (fair_leave((keys.rw_queue, keys.rw_heartbeats), keys.wake, fair, granted),)
        # Clear our writer-waiting marker wherever an attempt may have left it,
        # announced: readers held back by it may be waiting.
        return (_announced(RELEASE, keys.writer_waiting, keys.wake, self._marker, True),)
