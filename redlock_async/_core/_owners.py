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


class Ref(Protocol):
    """A held lock's weak handle (its ``Renewer``), with the task that took the grant."""

    task: Task
    """The task, while it runs and the grant is held (None otherwise)."""

    def __call__(self) -> _Held | None: ...


class Owners:
    """The holder and its task, per exclusive grant (name, kind), while that task runs.

    A grant is recorded only while the task that took it runs: a task that
    has ended waits for nothing, so nothing is kept for it - not the task
    (kept until the grant ended, a task of its own per lock, as
    ``asyncio.gather`` makes, kept its coroutine and context, 0.8 KB a held
    lock), nor its entries (``_task_ended`` drops them). The holder is kept
    weakly, like the Holdings set: a held Lock nobody references is let go.
    """

    __slots__ = ("_ended", "_held", "_tasks")

    def __init__(self) -> None:
        # By kind, then name: no (name, kind) tuple per entry.
        self._held: dict[bytes, dict[str, Ref]] = {}
        # What each running task took: its holders' refs, each with its name and kind.
        self._tasks: dict[asyncio.Task[object], dict[Ref, tuple[str, bytes]]] = {}
        self._ended = self._task_ended  # one bound method for every task's callback

    def took(self, ref: Ref, name: str, kind: bytes, task: Task) -> None:
        """The lock ``ref`` refers to, auto-extended, was granted ``name`` in ``task``.

        Only auto-extended holders are told: a grant that is not renewed
        expires, so a wait for it ends (``check`` ignores them). ``ref``: the
        lock's own weak handle, not a new one per grant.
        """
        if (kind not in _EXCLUSIVE and kind != _MULTI) or task is None or task.done():
            return  # a wait for it ends; or no task can wait for it
        taken = self._tasks.get(task)
        if taken is None:
            taken = self._tasks[task] = {}
            task.add_done_callback(self._ended)
        taken[ref] = (name, kind)
        ref.task = task
        for key_name, key_kind in _keys(ref(), name, kind):
            names = self._held.get(key_kind)
            if names is None:
                names = self._held[key_kind] = {}
            names[key_name] = ref

    def gave_up(self, ref: Ref, lock: _Held, name: str, kind: bytes) -> None:
        """``lock`` (``ref``'s) no longer holds ``name`` (released, lost, dropped)."""
        task = ref.task
        if task is None:
            return  # not recorded, or its task has ended (and its entries with it)
        ref.task = None
        taken = self._tasks.get(task)
        if taken is not None:
            taken.pop(ref, None)
        self._forget(ref, lock, name, kind)

    def _task_ended(self, task: asyncio.Future[object]) -> None:
        taken = self._tasks.pop(task, None)  # type: ignore[call-overload]
        if taken:
            for ref, (name, kind) in taken.items():
                ref.task = None
                self._forget(ref, ref(), name, kind)

    def _forget(self, ref: Ref, lock: _Held | None, name: str, kind: bytes) -> None:
        held = self._held
        for key_name, key_kind in _keys(lock, name, kind):
            names = held.get(key_kind)
            if names is not None and names.get(key_name) is ref:
                del names[key_name]

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
        names = self._held.get(key[1])
        entry = None if names is None else names.get(key[0])
        if entry is None or entry.task is not task:
            return
        other = entry()
        if other is None or other is lock or not other.held or not other.options.auto_extend:
            return
        raise RedlockError(
            f"lock {key[0]!r}: this task already holds it (through another Lock "
            "object, auto-extended), so waiting for it with no timeout would wait "
            "for itself for ever. Release it first, or pass a timeout."
        )

    def clear(self) -> None:
        for taken in self._tasks.values():
            for ref in taken:
                ref.task = None
        self._tasks.clear()
        self._held.clear()


def _keys(lock: object, name: str, kind: bytes) -> tuple[tuple[str, bytes], ...]:
    """The (name, kind) entries a grant of ``lock`` on ``name`` of ``kind`` makes."""
    return _plain_keys(lock) if kind == _MULTI else ((name, kind),)
