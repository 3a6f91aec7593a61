"""Which task holds each exclusive grant of one Redlock: self-deadlock detection.

A task that waits for a name it already holds, through another Lock
object, waits for itself: until its own grant expires - never, when that
one is auto-extended and the wait has no timeout. That case is refused at
once, as the rwlock refuses a read-to-write upgrade
(``RWLock.check_no_read_held``). It covers the exclusive lock, and a read
or write lock while the task holds the name's write lock, and multilocks,
which hold and wait for the plain keys of each of their names; read after
read is not a certain deadlock and is let through, and so are semaphores.

A wait with a timeout is left alone: it ends, with the answer the caller
asked for ("not within 0.3 s"), and tests of every lock library check
exactly that from one task. So is a holder that is not auto-extended: its
grant expires, and the wait then succeeds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Final, Protocol

from .._base._errors import RedlockError

__all__ = ["Owners"]

# The grants only one holder can have. An exclusive lock and a read-write
# lock of one name are different locks: each waits only for its own kind.
_EXCLUSIVE: Final = frozenset((b"x:", b"w:"))
# The grant of the same name a waiter of each kind would wait for. Other
# kinds (a semaphore's slots: b"s:") are never a certain deadlock.
_WAITS_FOR: Final = {b"x:": b"x:", b"r:": b"w:", b"w:": b"w:"}
# A multilock holds, and waits for, the plain exclusive keys of its names.
_MULTI: Final = b"m:"


def _plain_keys(lock: object) -> tuple[tuple[str, bytes], ...]:
    names: tuple[str, ...] = getattr(lock, "names", ())
    return tuple((name, b"x:") for name in names)


class _Options(Protocol):
    @property
    def auto_extend(self) -> bool: ...


class _Held(Protocol):
    @property
    def held(self) -> bool: ...

    @property
    def options(self) -> _Options: ...


Task = asyncio.Task[object] | None
Ref = Callable[[], "_Held | None"]  # a weak reference to a lock
_Entry = tuple[Ref, Task]


class Owners:
    """The holder and its task, per exclusive grant (name, kind), held weakly."""

    __slots__ = ("_held",)

    def __init__(self) -> None:
        # Weak, like the Holdings set: a held Lock nobody references is let go.
        self._held: dict[tuple[str, bytes], _Entry] = {}

    def took(self, ref: Ref, name: str, kind: bytes, task: Task) -> None:
        """The lock ``ref`` refers to, auto-extended, was granted ``name`` in ``task``.

        Only auto-extended holders are told: a grant that is not renewed
        expires, so a wait for it ends (``check`` ignores them). ``ref``: the
        lock's own weak reference (its renewer's), not a new one per grant.
        """
        if kind in _EXCLUSIVE:
            self._held[name, kind] = (ref, task)
        elif kind == _MULTI:
            entry = (ref, task)
            for key in _plain_keys(ref()):
                self._held[key] = entry

    def gave_up(self, lock: _Held, name: str, kind: bytes) -> None:
        """``lock`` no longer holds ``name`` (released, lost, dropped)."""
        held = self._held
        if held:
            for key in _plain_keys(lock) if kind == _MULTI else ((name, kind),):
                entry = held.get(key)
                if entry is not None and entry[0]() in (lock, None):
                    del held[key]

    def check(self, lock: _Held, name: str, kind: bytes, task: Task) -> None:
        """Raise RedlockError when waiting for ``name`` without a timeout would make
        ``task`` wait for itself for ever."""
        if task is None or not self._held:
            return
        if kind == _MULTI:
            for key in _plain_keys(lock):
                self._check(lock, key, task)
            return
        wanted = _WAITS_FOR.get(kind)
        if wanted is not None:
            self._check(lock, (name, wanted), task)

    def _check(self, lock: _Held, key: tuple[str, bytes], task: Task) -> None:
        entry = self._held.get(key)
        if entry is None or entry[1] is not task:
            return
        other = entry[0]()
        if other is None or other is lock or not other.held or not other.options.auto_extend:
            return
        raise RedlockError(
            f"lock {key[0]!r}: this task already holds it (through another Lock "
            "object, auto-extended), so waiting for it with no timeout would wait "
            "for itself for ever. Release it first, or pass a timeout."
        )

    def clear(self) -> None:
        self._held.clear()
