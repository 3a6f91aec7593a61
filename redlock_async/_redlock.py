"""The public entry point: ``Redlock``, a set of nodes and the locks over them."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from types import TracebackType
from typing import Any, ParamSpec, Self, TypeVar, Unpack

from ._base._address import Endpoint
from ._base._config import LockOptions, RedlockConfig
from ._base._errors import ConfigurationError
from ._base._peers import NoKeywords, unexpected_keyword
from ._core._asynconly import AsyncOnly
from ._core._holderinfo import holder_tokens
from ._core._lock import REDLOCKS, Holdings, Lock, LockKeywords, OnLost, Unset
from ._engine import Engine, Node, TtlLedger
from ._engine._build import (
    NodeSpec,
    all_connected,
    default_node_timeout,
    make_node,
    refuse_one_cluster_twice,
)
from ._engine.redispy._kinds import is_cluster
from ._kinds._adopt import adopt, locked
from ._kinds._caches import CommandsCache, OptionsCache
from ._kinds._closing import close
from ._kinds._multilock import MultiLock
from ._kinds._rwlock import RWLock
from ._kinds._semaphore import SemaphoreLock, semaphore
from ._kinds._synchronized import synchronized
from ._whoholds import Inspection

__all__ = ["NodeSpec", "Redlock"]

_log = logging.getLogger("redlock_async")

_P = ParamSpec("_P")
_R = TypeVar("_R")


Clusters = list[tuple[str, object]]  # each cluster client's node name, and the client


def _build_nodes(
    nodes: Sequence[NodeSpec], config: RedlockConfig, ttls: TtlLedger
) -> tuple[list[Node], Clusters | None]:
    """One node per spec, and the cluster clients still to be told apart.

    Raises ConfigurationError for ``nodes`` that is not a non-empty list,
    and for two specs that are one Redis server (see :class:`Redlock`).
    """
    if isinstance(nodes, str | bytes) or not isinstance(nodes, Sequence):
        raise ConfigurationError(
            f"nodes must be a list of URLs or redis.asyncio clients, not {type(nodes).__name__}"
        )
    if not nodes:
        raise ConfigurationError("nodes must name at least one Redis node")
    built = []
    seen: dict[Endpoint, str] = {}
    clusters: Clusters = []
    for spec in nodes:
        node, identity = make_node(spec, config, ttls)
        for endpoint in identity:
            other = seen.get(endpoint)
            if other is not None:
                raise ConfigurationError(
                    f"nodes lists the same Redis server twice: {other!r} and "
                    f"{node.name!r} (databases of one server count as one): "
                    "one server would cast several votes"
                )
        seen.update(dict.fromkeys(identity, node.name))
        built.append(node)
        if is_cluster(spec):
            clusters.append((node.name, spec))
    # The check above compared what each cluster client knows now. Two given
    # different startup nodes of one cluster are told apart only once both
    # have connected: checked again then (Redlock._check_clusters).
    return built, clusters if len(clusters) > 1 and not all_connected(clusters) else None


def _warn_two_nodes(nodes: Sequence[str]) -> None:
    """With two ``nodes``, say once (per Redlock, when made) what they cost: the quorum is both.

    Often the first step from one Redis to Redlock, and accepted: two
    majorities still overlap, so the locks are as safe. But no failure is
    tolerated, and either node's outage stops every lock - twice the chance
    of one node's. A log record, not ``warnings.warn``: a Python warning
    fails every test suite run with warnings as errors (this project's too).
    """
    if len(nodes) != 2:
        return
    _log.warning(
        "redlock_async: 2 nodes (%s): with two nodes every grant needs both, so none may "
        "fail - an outage of either one blocks every lock (about twice as likely as with "
        "one node). Use 3 nodes (any one may fail) or 1.",
        ", ".join(nodes),
        extra={"redlock_node": ", ".join(nodes), "redlock_outcome": "two_nodes"},
    )


class Redlock(Inspection, AsyncOnly):
    """A quorum of independent Redis nodes, and the factory of locks over them.

    ``nodes`` are URLs (``redis://``, ``rediss://``, ``unix://``) or
    ``redis.asyncio.Redis`` / ``RedisCluster`` clients (or valkey-py's
    ``valkey.asyncio.Valkey`` / ``ValkeyCluster``); a grant needs
    ``len(nodes) // 2 + 1`` of them - of two nodes both, so none may fail (one WARNING
    log record on ``redlock_async`` says so, not a Python warning: use 3 nodes, or 1).
    Keywords (defaults in brackets):

    - ``prefix`` ["redlock:"]: namespace of every key written;
    - ``node_timeout`` [None]: per-node, per-command timeout, seconds; None
      picks it per driver: 0.05 when every node is a ``redis://`` or
      ``unix://`` URL (the lean driver), 0.25 when any node goes through
      redis-py (``rediss://`` URLs, client objects), see ``config.node_timeout``;
    - ``drift_factor`` [0.01]: clock drift allowance, ``ttl * drift_factor + 0.002``;
    - ``retry_delay`` [0.2], ``retry_jitter`` [0.2]: wait between attempts is
      ``retry_delay`` plus uniform random ``[0, retry_jitter)``;
    - ``unavailable_timeout`` [10.0]: every lock's default (see :meth:`lock`);
      it rides out a brief failover, a web handler wants less (docs/frameworks.md);
    - ``wake_on_release`` [True]: waiters subscribe to the lock's release
      announcements and retry at once, instead of only after the retry delay;
    - ``quarantine_grace`` [None]: strict mode, also quarantine nodes up for
      less than this many seconds (restarts seen are always quarantined);
    - ``telemetry`` [True]: with opentelemetry-api installed, report metrics
      and spans (docs/observability.md); ``telemetry_lock_names`` [False]:
      also put lock names in metric attributes; ``holder_info`` [True]: see :meth:`holder`.

    Raises ConfigurationError for bad arguments, and when two nodes are one
    Redis server (same resolved address and port, or same real socket path,
    whatever the database: docs/guide.md). Nothing connects until the first
    command; close with ``await redlock.aclose()`` or ``async with``.
    """

    _with_what = "Redlock"
    _with_call = "Redlock(...)"

    def __init__(
        self,
        nodes: Sequence[NodeSpec],
        *,
        prefix: str = "redlock:",
        node_timeout: float | None = None,
        drift_factor: float = 0.01,
        retry_delay: float = 0.2,
        retry_jitter: float = 0.2,
        unavailable_timeout: float | None = 10.0,  # UNAVAILABLE_TIMEOUT
        wake_on_release: bool = True,
        quarantine_grace: float | None = None,
        telemetry: bool = True,
        telemetry_lock_names: bool = False,
        holder_info: bool = True,
    ) -> None:
        if node_timeout is None:
            node_timeout = default_node_timeout(nodes)
        config = RedlockConfig(
            prefix=prefix,
            node_timeout=node_timeout,
            drift_factor=drift_factor,
            retry_delay=retry_delay,
            retry_jitter=retry_jitter,
            unavailable_timeout=unavailable_timeout,
            wake_on_release=wake_on_release,
            quarantine_grace=quarantine_grace,
            telemetry=telemetry,
            telemetry_lock_names=telemetry_lock_names,
            holder_info=holder_info,
        )
        ttls = TtlLedger()
        built, self._clusters = _build_nodes(nodes, config, ttls)
        self._core = Engine(built, config, ttls=ttls, token_factory=holder_tokens(config))
        self._holdings = Holdings(self._core, Lock._lose)
        self._commands = CommandsCache(config.prefix)
        self._lock_options = OptionsCache(config.drift_factor, config.unavailable_timeout)
        _warn_two_nodes(self.nodes)

    @property
    def nodes(self) -> tuple[str, ...]:
        """The nodes' addresses, passwords redacted."""
        return tuple(node.name for node in self._core.nodes)

    @property
    def quorum(self) -> int:
        """How many nodes must agree: ``len(nodes) // 2 + 1``."""
        return self._core.quorum

    @property
    def config(self) -> RedlockConfig:
        return self._core.config

    @property
    def closed(self) -> bool:
        return self._core.closed

    def __repr__(self) -> str:
        return f"Redlock(nodes={list(self.nodes)!r}, quorum={self.quorum})"

    def lock(
        self,
        name: str,
        *,
        ttl: float = 30.0,
        auto_extend: bool = True,
        timeout: float | None = None,
        fencing: bool = False,
        cancel_on_lost: bool = True,
        fair: bool = False,
        on_lost: OnLost | None = None,
        max_attempts: int | None = None,
        min_validity: float = 0.0,
        unavailable_timeout: float | Unset | None = REDLOCKS,
        **unexpected: Unpack[NoKeywords],
    ) -> Lock:
        """A new exclusive :class:`Lock` on ``name`` (not yet acquired).

        Keywords (defaults in brackets): ``ttl`` [30.0] validity of one grant;
        ``auto_extend`` [True] renew in the background until release;
        ``timeout`` [None] total time ``acquire()`` may wait, None = no limit;
        ``fencing`` [False] give each grant a fencing token; ``cancel_on_lost``
        [True] cancel the ``async with`` body if the lock is lost; ``fair``
        [False] serve waiters in arrival order; ``on_lost`` [None] called once
        with the lock when a held grant is lost; ``max_attempts`` [None] give
        up after this many attempts; ``min_validity`` [0.0] refuse a grant
        valid for no longer than this; ``unavailable_timeout`` [the Redlock's]
        how long ``acquire()`` keeps trying while no quorum of nodes answers,
        then returns False (``async with``: QuorumUnavailable) whatever
        ``timeout`` has left; None: no limit but ``timeout`` (:class:`LockOptions`).
        Any other keyword raises TypeError, naming ours for a peer library's (docs/migrating.md).
        """
        if unexpected:
            raise unexpected_keyword("Redlock.lock", next(iter(unexpected)))
        core = self._core
        if core.closed:
            core.check_open()
        if self._clusters is not None:
            self._check_clusters()
        # Positional: a call with ten keywords costs more than the lookup.
        options = self._lock_options(
            ttl, auto_extend, timeout, fencing, cancel_on_lost, fair, on_lost, max_attempts,
            min_validity, unavailable_timeout,
        )  # fmt: skip
        return Lock(core, self._holdings, name, options, self._commands(name))

    async def adopt(self, name: str, token: str, **options: Unpack[LockKeywords]) -> Lock:
        """Hold the grant ``token`` (a plain lock's :attr:`Lock.token` from another task
        or process) on ``name``: confirmed on a quorum by extending it to ``ttl``, and
        returned as a held :class:`Lock` (keywords of :meth:`lock`).

        The taker's copy and this one never shorten each other's keys, so each
        copy's ``held`` and ``valid_for`` are lower bounds; a release by either
        ends the grant for both, a renewal by either keeps it alive for both.
        Raises LockNotOwned when a quorum no longer holds that token,
        QuorumUnavailable when too few answer, and ConfigurationError for a
        string that is not a plain lock's token (a multilock's token included:
        adopting one of its names would let a release free that name alone)."""
        lock = self.lock(name, **options)
        return await adopt(lock, self._commands(name), self._core, token)

    async def locked(self, name: str) -> bool:
        """Does a quorum of nodes hold a grant on ``name`` now (any holder)? Raises
        QuorumUnavailable when too few nodes answer to tell."""
        self._core.check_open()
        return await locked(self._core, name, self._commands(name))

    def synchronized(
        self, name: str | Callable[..., str], **options: Unpack[LockKeywords]
    ) -> Callable[[Callable[_P, Awaitable[_R]]], Callable[_P, Coroutine[Any, Any, _R]]]:
        """Decorate a coroutine function so each call runs under a lock.

        ``name`` is the lock name, or a template filled from the call's
        arguments (``"orders:{order_id}"``; write ``{{`` and ``}}`` for literal
        braces), or a callable given the call's arguments that returns it.
        ``options`` are the keywords of :meth:`lock`. A call that cannot get
        the lock within ``timeout`` raises :class:`LockNotAcquired`; a lost
        lock cancels the call and raises :class:`LockLost`, as ``async with``
        does.
        """
        self._lock_options.of("Redlock.synchronized", options)  # bad keywords fail here
        return synchronized(self.lock, name, options)

    def rwlock(self, name: str, **defaults: Unpack[LockKeywords]) -> RWLock:
        """A read-write lock on ``name``: ``.read(...)`` and ``.write(...)`` take
        the keywords of :meth:`lock` and return lock objects like it. Keywords
        given here (e.g. ``fair=True``) are defaults for both views.

        Readers share the lock; a writer excludes readers and other writers. A
        writer waiting for readers stops new readers from joining, so a steady
        stream of readers cannot starve it. Read-to-write upgrade is refused.
        """
        self._options("Redlock.rwlock", defaults)  # bad defaults fail here, not at read()/write()
        keys = self._commands(name).keys
        return RWLock(self._core, self._holdings, name, keys, self._lock_options.of, defaults)

    def multilock(self, names: Iterable[str], **keywords: Unpack[LockKeywords]) -> MultiLock:
        """A new :class:`MultiLock` on every one of ``names`` at once (not yet
        acquired): all of them or none, excluding plain locks of each name.
        Keywords as :meth:`lock`. Raises ConfigurationError for no names, a
        bad name, ``fencing=True`` or ``fair=True`` (docs/multilock.md)."""
        options = self._options("Redlock.multilock", keywords)
        return MultiLock(self._core, self._holdings, names, options, self.config.prefix)

    def semaphore(self, name: str, limit: int, **keywords: Unpack[LockKeywords]) -> SemaphoreLock:
        """A new :class:`SemaphoreLock` on ``name`` (not yet acquired): at most ``limit``
        (1 to 1024) valid holders at once. Keywords of :meth:`lock`; ``fencing=True``
        and ``fair=True`` raise ConfigurationError, as do a bad name or limit."""
        options = self._options("Redlock.semaphore", keywords)
        keys = self._commands(name).keys
        return semaphore(self._core, self._holdings, name, keys, limit, options)

    def _options(self, function: str, keywords: LockKeywords) -> LockOptions:
        """What every factory but the inlined lock() checks first: this Redlock is
        open, its cluster clients distinct, ``keywords`` valid (given to ``function``)."""
        self._core.check_open()
        if self._clusters is not None:
            self._check_clusters()
        return self._lock_options.of(function, keywords)

    def _check_clusters(self) -> None:
        """Refuse two cluster clients of one cluster, once they have connected."""
        clusters = self._clusters
        # Host names are resolved once, when all have connected, not per call.
        if clusters is not None and all_connected(clusters):
            refuse_one_cluster_twice(clusters)
            self._clusters = None

    async def aclose(self) -> None:
        """End every lock still held here, then close the connections this Redlock opened.

        A grant still valid is lost (``lock.lost``, ``on_lost``, its ``async
        with`` body cancelled with ``LockLost``); one already expired is not
        reported. Closing never ends a grant held elsewhere: one handed on
        (``lock.token`` read, or adopted) is left to its copies, whose renewals
        keep it (else it expires by its ttl); one never handed on is released.
        Afterwards ``acquire()``, ``extend()`` and new locks raise
        ``RedlockError`` (a lock that was held: ``LockLost``). Clients passed in
        are left open. Returns once every release has its replies, while the
        nodes keep answering (docs/guarantees.md: "The holder is always told").
        """
        await close(self._core, self._holdings)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
