"""What every lock shows: its name, its options and the state of its grant.

The read-only half of :class:`~._lock.Lock`, kept apart so the lock's own
module holds only what changes the state (acquire, extend, release, loss).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from .._base._config import LockOptions
from .._base._errors import LockNotOwned, NodeError
from .._engine import Engine
from ._asynconly import AsyncOnly
from ._grant import Grant
from ._holder import NO_LOSS, Loss

__all__ = ["LockState"]


class LockState(AsyncOnly):
    """The properties of a lock (see :class:`Lock`)."""

    __slots__ = ("_engine", "_errors", "_grant", "_loss", "_name", "_options")

    _engine: Engine
    _errors: Mapping[str, NodeError]
    _grant: Grant | None
    _loss: Loss
    _name: str
    _options: LockOptions

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
        return grant is not None and self._engine.clock() < grant.validity_end

    @property
    def lost(self) -> bool:
        """True once a held grant was lost (renewal failed, or it expired in use)."""
        return self._loss.lost

    @property
    def lost_event(self) -> asyncio.Event:
        """Set when a held grant is lost: ``await lock.lost_event.wait()``."""
        return self._own_loss().event()

    def _require_grant(self) -> Grant:
        """The grant held; raises the loss, or LockNotOwned, when there is none."""
        if self._grant is not None:
            return self._grant
        raise self._loss.error or LockNotOwned(f"lock {self._name!r} is not held by this object")

    def _own_loss(self) -> Loss:
        """This lock's own loss record, made now if it still has the shared one."""
        loss = self._loss
        if loss is NO_LOSS:
            loss = self._loss = Loss()
        return loss

    @property
    def valid_for(self) -> float:
        """Seconds of guaranteed validity left; 0.0 when not held."""
        grant = self._grant
        if grant is None:
            return 0.0
        return max(0.0, grant.validity_end - self._engine.clock())

    @property
    def errors(self) -> Mapping[str, NodeError]:
        """Per-node errors of the last attempt that failed (empty after a grant)."""
        return self._errors

    @property
    def token(self) -> str | None:
        """The current grant's token (40 random hex characters, then ``@HOST:PID:MS``
        unless ``holder_info=False``; a multilock's starts with ``m:``), None when
        not held.

        Another task or process holds the same grant with
        :meth:`Redlock.adopt` (``await redlock.adopt(lock.name, token, ttl=...)``);
        plain locks' tokens only. Reading it marks the grant as handed on:
        closing this lock's Redlock then leaves its keys to the copies
        elsewhere (see :meth:`Redlock.aclose`); ``release()`` still ends it
        for every copy.
        """
        grant = self._grant
        if grant is None:
            return None
        grant.shared = True
        return grant.token.decode("ascii")

    @property
    def fencing_token(self) -> int | None:
        """The current grant's fencing token when ``fencing=True``, else None."""
        grant = self._grant
        return grant.fencing_token if grant is not None else None

    def __repr__(self) -> str:
        state = "lost" if self._loss.lost else "held" if self._grant is not None else "unlocked"
        return f"<{type(self).__name__} {self._name!r} {state} ttl={self.ttl}>"
