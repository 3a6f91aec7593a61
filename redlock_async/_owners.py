"""Which task holds each exclusive grant of one Redlock: self-deadlock detection.

A task that waits for a name it already holds, through another Lock
object, waits for itself: until its own grant expires - never, when that
one is auto-extended. The rwlock refuses read-to-write upgrades the same
way (``RWLock.check_no_read_held``); this covers the exclusive lock, and a
read or write lock while the task holds the name's write lock. Read after
read is not a certain deadlock and is let through.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Final, Protocol

from ._errors import RedlockError

__all__ = ["Owners"]

# The grants only one holder can have. An exclusive lock and a read-write
# lock of one name are different locks: each waits only for its own kind.
_EXCLUSIVE: Final = frozenset((b"x:", b"w:"))


class _Held(Protocol):
    @property
    def held(self) -> bool: ...


Task = asyncio.Task[object] | None
_Entry = tuple["weakref.ref[_Held]", Task]


class Owners:
    """The holder and its task, per exclusive grant (name, kind), held weakly."""

    __slots__ = ("_held",)

    def __init__(self) -> None:
        # Weak, like the Holdings set: a held Lock nobody references is let go.
        self._held: dict[tuple[str, bytes], _Entry] = {}

    def took(self, lock: _Held, name: str, kind: bytes, task: Task) -> None:
        """``lock`` was granted ``name`` in ``task``."""
        if kind in _EXCLUSIVE:
            self._held[name, kind] = (weakref.ref(lock), task)

    def gave_up(self, lock: _Held, name: str, kind: bytes) -> None:
        """``lock`` no longer holds ``name`` (released, lost, dropped)."""
        held = self._held
        if held:
            entry = held.get((name, kind))
            if entry is not None and entry[0]() in (lock, None):
                del held[name, kind]

    def check(self, lock: _Held, name: str, kind: bytes, task: Task) -> None:
        """Raise RedlockError when waiting for ``name`` would make ``task`` wait for itself."""
        if task is None or not self._held:
            return
        entry = self._held.get((name, b"x:" if kind == b"x:" else b"w:"))
        if entry is None or entry[1] is not task:
            return
        other = entry[0]()
        if other is None or other is lock or not other.held:
            return
        raise RedlockError(
            f"lock {name!r}: this task already holds it (through another Lock "
            "object), so waiting for it would wait for itself. Release it first, "
            "or pass blocking=False / timeout=0 to test it without waiting."
        )

    def clear(self) -> None:
        self._held.clear()
