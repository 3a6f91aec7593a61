"""What each step of a grant's life sends: script, keys and arguments.

The exclusive lock and the other kinds (``_kinds/``: the read-write views, a
semaphore, a multilock) differ first in these commands. A
:class:`~redlock_async.Lock` holds one ``Commands`` object and asks it what
to send; it never needs to know which kind it is (composition: each kind
states every member of the protocol, the neutral ones included).
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Protocol

from .._base._keys import KeyLayout, wake_channel
from .._base._timing import fair_heartbeat, ttl_ms
from .._engine import Command, Engine, Tally, Waiting
from ._scripts import ACQUIRE, EXTEND, FAIR_ACQUIRE, FAIR_LEAVE, RELEASE

__all__ = ["Commands", "ExclusiveCommands", "FairEntry"]


class FairEntry:
    """A fair waiter's place in a queue, for one ``acquire()`` call.

    The ticket is the arrival time (the same on every node); the waiter id
    breaks ties and names the entry, which every attempt refreshes.
    """

    __slots__ = ("heartbeat_ms", "ticket", "waiter")

    def __init__(self, waiter: bytes, ticket: bytes, heartbeat_ms: int) -> None:
        self.waiter = waiter
        self.ticket = ticket
        self.heartbeat_ms = heartbeat_ms

    @classmethod
    def new(cls, kind: bytes, engine: Engine) -> FairEntry:
        """A new waiter of ``kind`` (``Commands.kind``) of ``engine``, arriving now
        (its world's wall clock; the world's random bytes name the waiter)."""
        world = engine.world
        waiter = kind + world.token_bytes(8).hex().encode()
        ticket = f"{world.time_ns() / 1e6:.3f}".encode()
        return cls(waiter, ticket, ttl_ms(fair_heartbeat(engine.config.node_timeout)))


class Commands(Protocol):
    """The commands of one kind of lock (exclusive, read, write, semaphore, multilock)."""

    kind: bytes
    """Prefix of fair queue entries: ``x:``, ``r:`` or ``w:``."""

    @property
    def keys(self) -> KeyLayout:
        """Every key and channel of the lock's name."""
        ...

    token_prefix: bytes
    """Put before every token of the kind's grants: a multilock's ``m:``, so
    that ``adopt()`` can refuse it (``_multilock.py``); empty for the others,
    whose tokens are the engine's as they come."""

    def judge(self, tally: Tally) -> Awaitable[bool]:
        """Whether an attempt is a grant: for most kinds the quorum's yes itself
        (``tally.decided``, awaited as it is: no coroutine); a semaphore's also
        asks for one slot on a quorum (``_semaphore.py``)."""
        ...

    def grant_keys(self) -> Sequence[bytes]:
        """The lock keys a grant writes, one per name: beside a Redis Cluster
        node, their hash slots' epochs are read before the first grant there
        (``_engine/_slots.py``)."""
        ...

    def acquire(self, token: bytes, ttl_ms: int, fencing: bool, fair: FairEntry | None) -> Command:
        """One attempt to grant ``token`` for ``ttl_ms`` milliseconds."""
        ...

    def release(self, token: bytes, announce: bool) -> Command:
        """Give the grant up; ``announce``: tell waiters on the wake channel."""
        ...

    def extend(self, token: bytes, ttl: float) -> Command:
        """Renew the grant to ``ttl`` seconds from now, if it is still ours."""
        ...

    def renewal_target(self) -> tuple[bytes, bytes] | None:
        """What a batched renewal (extend_many.lua) renews: its kind (``x``: a
        string holding the token, ``r``: a reader set) and its key. None: a
        grant that is not one such key; its renewals go alone (``extend``)."""
        ...

    def fence_keys(self) -> tuple[bytes, bytes]:
        """The key holding the grant, and the fencing counter."""
        ...

    def waiting(self) -> Waiting:
        """The line its waiters of one process join, and the channels they hear.

        One line per lock, never per name: a waiter must never be held back
        by a waiter for another lock (``_engine/_waiters.py``).
        """
        ...

    def attempts_begin(self) -> None:
        """``acquire()`` starts: check and prepare (raises to refuse)."""
        ...

    def attempts_over(
        self, last: Tally | None, granted: bool, fair: FairEntry | None
    ) -> tuple[Command, ...]:
        """``acquire()`` stopped: what clears the marks its attempts may have left
        (the read-write views' writer-waiting marker, a fair queue entry);
        ``()`` for most calls of most kinds."""
        ...


def fair_acquire(
    queue: tuple[bytes, bytes],
    holder_key: bytes,
    readers_key: bytes,
    token: bytes,
    ttl_ms: int,
    fence: bytes | None,
    entry: FairEntry,
) -> Command:
    """The fair queue's attempt, shared by every kind (see fair_acquire.lua)."""
    lua_keys: tuple[bytes, ...] = (holder_key, readers_key, *queue)
    if fence is not None:
        lua_keys += (fence,)
    args = (token, ttl_ms, entry.waiter, entry.ticket, entry.heartbeat_ms)
    return Command(FAIR_ACQUIRE, lua_keys, args)


def fair_leave(queue: tuple[bytes, bytes], wake: bytes, entry: FairEntry, granted: bool) -> Command:
    """Leave the fair queue; a waiter that gave up announces it (the next may be first now)."""
    keys = queue if granted else (*queue, wake)
    return Command(FAIR_LEAVE, keys, (entry.waiter,))


def clean_first_try(last: Tally | None, granted: bool) -> bool:
    """A grant on the first attempt with every node saying yes left no marks to clear."""
    return last is None or (granted and last.yes == last.n)


class ExclusiveCommands:
    """The exclusive lock's commands (acquire.lua, release.lua, extend.lua).

    They depend on the name only: one object serves every lock of a name
    (``Redlock`` caches them, see ``_caches.py``). Only the lock key is kept
    (past the cache, a process holding 100,000 locks of as many names keeps
    100,000 of these); the layout of the other keys is made when asked for.
    """

    __slots__ = ("_lock",)

    kind = b"x:"
    token_prefix = b""

    def __init__(self, keys: KeyLayout) -> None:
        self._lock = keys.lock

    @property
    def keys(self) -> KeyLayout:
        return KeyLayout.of_lock(self._lock)

    def acquire(self, token: bytes, ttl_ms: int, fencing: bool, fair: FairEntry | None) -> Command:
        if fair is not None:
            keys = self.keys
            queue = (keys.fair_queue, keys.heartbeats)
            fence = keys.fence if fencing else None
            return fair_acquire(queue, keys.lock, keys.fair_readers, token, ttl_ms, fence, fair)
        lock = self._lock
        lua_keys = (lock, self.keys.fence) if fencing else (lock,)
        return Command(ACQUIRE, lua_keys, (token, ttl_ms))

    def judge(self, tally: Tally) -> Awaitable[bool]:
        return tally.decided  # the quorum's yes is the grant

    def grant_keys(self) -> Sequence[bytes]:
        return (self._lock,)

    def release(self, token: bytes, announce: bool) -> Command:
        # Only real releases announce themselves: rolling back a failed
        # attempt must not wake every waiter (they would stampede).
        lock = self._lock
        keys = (lock, wake_channel(lock)) if announce else (lock,)
        return Command(RELEASE, keys, (token,))

    def extend(self, token: bytes, ttl: float) -> Command:
        return Command(EXTEND, (self._lock,), (token, ttl_ms(ttl)))

    def renewal_target(self) -> tuple[bytes, bytes] | None:
        return b"x", self._lock

    def fence_keys(self) -> tuple[bytes, bytes]:
        return self._lock, self.keys.fence

    def waiting(self) -> Waiting:
        # Fair and unfair waiters of a name share it: one lock, one key.
        return Waiting(self.kind, (self.keys.wake,))

    def attempts_begin(self) -> None:
        pass

    def attempts_over(
        self, last: Tally | None, granted: bool, fair: FairEntry | None
    ) -> tuple[Command, ...]:
        if fair is None or clean_first_try(last, granted):
            return ()
        keys = self.keys
        return (fair_leave((keys.fair_queue, keys.heartbeats), keys.wake, fair, granted),)
