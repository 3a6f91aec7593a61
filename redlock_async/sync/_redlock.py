"""The blocking ``Redlock``: the async one, driven from threads through one loop thread."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Sequence
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, Self, TypeVar, Unpack

from .._base._config import RedlockConfig
from .._base._errors import ConfigurationError
from .._core._holderinfo import Holder
from .._kinds._synchronized import name_builder
from .._redlock import NodeSpec
from .._redlock import Redlock as AsyncRedlock
from ._locks import Lock, RWLock, SyncKeywords, Wrapping
from ._portal import Portal

__all__ = ["Redlock"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _arguments_of(
    target: Callable[_P, object],
) -> Callable[[Callable[..., None]], Callable[Concatenate[Redlock, _P], None]]:
    """Type ``__init__`` as taking ``target``'s arguments: the constructor is the
    async one's, whatever keywords it gains, with no copy of its signature here."""

    def decorate(init: Callable[..., None]) -> Callable[Concatenate[Redlock, _P], None]:
        signature = inspect.signature(target)
        self_parameter = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
        init.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=[self_parameter, *signature.parameters.values()]
        )
        return init

    return decorate


class Redlock:
    """A quorum of Redis nodes for threads (Django views, Celery tasks, scripts).

    Takes exactly the arguments of :class:`redlock_async.Redlock`, validated
    alike (ConfigurationError). Its locks block the calling thread; their
    commands and background renewals run on one event-loop thread per
    ``Redlock``, started by the first call that needs it and stopped by
    :meth:`close` (or the end of ``with Redlock(...) as redlock:``). After
    ``fork()`` the child starts its own thread at its first call; the
    parent's grants are not the child's.

    Every blocking call raises RuntimeError from a thread that runs an
    event loop (an ``async def``): use :class:`redlock_async.Redlock` there.
    """

    @_arguments_of(AsyncRedlock)
    def __init__(self, nodes: Sequence[NodeSpec], **options: Any) -> None:
        # Typed by the decorator as the async constructor, keyword by keyword.
        self._redlock = AsyncRedlock(nodes, **options)
        self._wrapping = Wrapping(Portal())

    @property
    def nodes(self) -> tuple[str, ...]:
        """The nodes' addresses, passwords redacted."""
        return self._redlock.nodes

    @property
    def quorum(self) -> int:
        """How many nodes must agree: ``len(nodes) // 2 + 1``."""
        return self._redlock.quorum

    @property
    def config(self) -> RedlockConfig:
        return self._redlock.config

    @property
    def closed(self) -> bool:
        return self._redlock.closed

    def __repr__(self) -> str:
        return f"sync.{self._redlock!r}"

    def lock(self, name: str, **options: Unpack[SyncKeywords]) -> Lock:
        """A new exclusive :class:`Lock` on ``name`` (not yet acquired); keywords
        and defaults of :meth:`redlock_async.Redlock.lock`. ``cancel_on_lost`` is
        accepted and has no effect: a thread cannot be cancelled, so a lost lock
        raises LockLost when the ``with`` body ends, whatever its value."""
        wrapping = self._wrapping
        return wrapping.lock(self._redlock.lock(name, **wrapping.keywords(options)))

    def rwlock(self, name: str, **defaults: Unpack[SyncKeywords]) -> RWLock:
        """A read-write lock on ``name`` (see :meth:`redlock_async.Redlock.rwlock`);
        keywords given here are defaults for both views."""
        wrapping = self._wrapping
        return RWLock(self._redlock.rwlock(name, **wrapping.keywords(defaults)), wrapping)

    def multilock(self, names: Iterable[str], **options: Unpack[SyncKeywords]) -> Lock:
        """A new :class:`Lock` on every one of ``names`` at once (not yet acquired):
        all of them or none (see :meth:`redlock_async.Redlock.multilock`)."""
        wrapping = self._wrapping
        return wrapping.lock(self._redlock.multilock(names, **wrapping.keywords(options)))

    def semaphore(self, name: str, limit: int, **options: Unpack[SyncKeywords]) -> Lock:
        """A new :class:`Lock` on one of ``limit`` slots of ``name`` (not yet acquired):
        at most ``limit`` holders at once (see :meth:`redlock_async.Redlock.semaphore`)."""
        wrapping = self._wrapping
        return wrapping.lock(self._redlock.semaphore(name, limit, **wrapping.keywords(options)))

    def adopt(self, name: str, token: str, **options: Unpack[SyncKeywords]) -> Lock:
        """Hold the grant ``token`` (a plain lock's :attr:`Lock.token` from another
        thread or process) on ``name``, confirmed on a quorum; returns a held
        :class:`Lock` (``with redlock.adopt(...):`` enters at once). Two copies of
        one grant never shorten each other's keys (see the async
        :meth:`redlock_async.Redlock.adopt`). Raises LockNotOwned when a quorum no
        longer holds that token, QuorumUnavailable when too few answer,
        ConfigurationError for a string that is not a plain lock's token."""
        wrapping = self._wrapping
        adopt = functools.partial(self._redlock.adopt, name, token, **wrapping.keywords(options))
        return wrapping.lock(wrapping.portal.call(adopt))

    def locked(self, name: str) -> bool:
        """Does a quorum of nodes hold a grant on ``name`` now (any holder)? Raises
        QuorumUnavailable when too few nodes answer to tell."""
        return self._wrapping.portal.call(self._redlock.locked, name)

    def holder(self, name: str) -> Holder | None:
        """Who holds ``name`` now, as a quorum of nodes sees it: a
        :class:`redlock_async.Holder` (host, pid, grant time, ttl left, kind), or
        None when it is free (see :meth:`redlock_async.Redlock.holder`). Raises
        QuorumUnavailable when too few nodes answer to tell."""
        return self._wrapping.portal.call(self._redlock.holder, name)

    def synchronized(
        self, name: str | Callable[..., str], **options: Unpack[SyncKeywords]
    ) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
        """Decorate a plain function so each call runs under a lock (``with``).

        ``name`` is as for :meth:`redlock_async.Redlock.synchronized`: the lock
        name, a template filled from the call's arguments, or a callable.
        Raises ConfigurationError for bad keywords or name here, and for a
        coroutine function when decorating (use the async Redlock's).
        """
        keywords = self._wrapping.keywords(options)
        self._redlock.synchronized(name, **keywords)  # validates name and keywords now

        def decorate(func: Callable[_P, _R]) -> Callable[_P, _R]:
            if inspect.iscoroutinefunction(func):
                raise ConfigurationError(
                    f"redlock_async.sync synchronized() decorates plain functions, not the "
                    f"coroutine function {func!r}: use redlock_async.Redlock.synchronized"
                )
            lock_name = name_builder(name, func)

            @functools.wraps(func)
            def locked(*args: _P.args, **kwargs: _P.kwargs) -> _R:
                with self.lock(lock_name(args, kwargs), **options):
                    return func(*args, **kwargs)

            return locked

        return decorate

    def close(self) -> None:
        """End every lock still held here, close the connections, stop the loop thread.

        As :meth:`redlock_async.Redlock.aclose`: a lock whose grant is still
        valid is lost (``lost`` turns True, ``on_lost`` runs, and its ``with``
        raises LockLost when its body ends); it is released unless it was
        handed on (its ``token`` read, or adopted), which leaves it to the
        copies elsewhere. A second call returns at once.
        """
        portal = self._wrapping.portal
        if portal.closed:
            return
        try:
            portal.call(self._redlock.aclose)
        finally:
            portal.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
