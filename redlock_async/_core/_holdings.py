"""The locks of one Redlock that hold a grant: what closing it or a fork tells."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from .._engine import Engine
from ._grant import Grant
from ._holder import Body
from ._owners import Owners
from ._renewal import LoseCallback, Renewals, Renewer

__all__ = ["Holdings"]


class Held(Protocol):
    """What the holdings ask of a held lock (``_lock.Lock``)."""

    @property
    def _grant(self) -> Grant | None: ...
    @property
    def _body(self) -> Body | None: ...
    @property
    def _renewer(self) -> Renewer[Any] | None: ...
    def _close(self, reason: str) -> None: ...
    def _orphan(self) -> None: ...


_L = TypeVar("_L", bound=Held)


class Holdings(Generic[_L]):
    """The locks of one Redlock that hold a grant, so that closing or a fork can tell them.

    Held weakly, through each lock's :class:`~._renewal.Renewer` (its one
    weak reference): a held lock nobody references is let go, and ``gone``
    takes its renewer out of the set. ``lose`` is told when renewal cannot
    keep a grant (``Lock._lose``).
    """

    __slots__ = ("_held", "add", "discard", "gone", "owners", "renewals")

    def __init__(self, engine: Engine, lose: LoseCallback[_L]) -> None:
        self._held: set[Renewer[_L]] = set()
        # The set's own methods: every grant and release calls one, and a
        # method of ours around them would cost a Python frame each time.
        self.add = self._held.add
        self.discard = self._held.discard
        # Told by a renewer whose lock was garbage-collected (one bound
        # method, shared by every renewer).
        self.gone: Callable[[Renewer[Any]], object] = self._held.discard
        # The renewal schedule of the auto-extended ones (one timer for all).
        self.renewals: Renewals[_L] = Renewals(engine, lose)
        self.owners = Owners()  # who holds what, for self-deadlock detection
        engine.on_rehome.append(self.orphan_all)

    def _locks(self) -> list[_L]:
        locks = [lock for lock in [renewer() for renewer in list(self._held)] if lock is not None]
        # In the order they were granted, not the set's (memory addresses): what
        # is sent for them goes out in the same order run after run. Grants of
        # one instant (a virtual clock's) are ordered by token.
        locks.sort(key=_granted_since)
        return locks

    def close_all(self, reason: str) -> list[Body]:
        """The Redlock closes (``aclose()``): every held lock ends here (``Lock._close``).

        Returns the bodies still running: the releases held back for them go
        out once they stop (see ``Body.stop``), and ``aclose()`` waits for that.
        """
        locks = self._locks()
        bodies = [lock._body for lock in locks if lock._body is not None]
        for lock in locks:
            lock._close(reason)
        self.renewals.close()
        return bodies

    def orphan_all(self) -> None:
        """The grants belong to another event loop or the parent process: dropped silently."""
        locks = self._locks()
        self._held.clear()
        self.owners.clear()
        for lock in locks:
            if lock._grant is not None:
                renewer = lock._renewer
                lock._orphan()
                if renewer is not None:
                    self.renewals.stop(renewer)
        self.renewals.forget()


def _granted_since(lock: Held) -> tuple[float, bytes]:
    grant = lock._grant
    return (grant.since, grant.token) if grant is not None else (0.0, b"")
