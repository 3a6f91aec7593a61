"""The public entry point: ``Redlock``, a set of nodes and the locks over them."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import string
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from types import TracebackType
from typing import Any, ParamSpec, Self, TypeVar, Unpack

from redis.asyncio import Redis, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from ._address import Address, Endpoint, node_identity, parse_url, redact_url
from ._config import LockKeywords, LockOptions, OnLost, RedlockConfig, check_ttl
from ._engine._core import Core
from ._engine._node import Node, stall_limit
from ._engine._restarts import Restarts, TtlLedger
from ._engine.redispy import RedisPyNode
from ._engine.resp import RespNode
from ._errors import ConfigurationError
from ._lock import Lock
from ._renew import start_renewal
from ._rwlock import RWLock
from ._scripts import ALL_SCRIPTS

__all__ = ["NodeSpec", "Redlock"]

_log = logging.getLogger("redlock_async")

_P = ParamSpec("_P")
_R = TypeVar("_R")

NodeSpec = str | Redis | RedisCluster
"""A node: a URL, or a redis-py asyncio client (not closed by ``aclose()``)."""

LEAN_NODE_TIMEOUT = 0.05
"""Default node_timeout when every node uses the lean driver (redis://, unix://)."""
REDISPY_NODE_TIMEOUT = 0.25
"""Default node_timeout when any node goes through redis-py (rediss://, clients):
it opens a pooled connection, with a handshake, per concurrent command; eight
concurrent first acquires took 30-60 ms on a loaded two-core machine."""


class Redlock:
    """A quorum of independent Redis nodes, and the factory of locks over them.

    ``nodes`` are URLs (``redis://``, ``rediss://``, ``unix://``) or
    ``redis.asyncio.Redis`` / ``RedisCluster`` clients; a grant needs
    ``len(nodes) // 2 + 1`` of them. Keywords (defaults in brackets):

    - ``prefix`` ["redlock:"]: namespace of every key written;
    - ``node_timeout`` [None]: per-node, per-command timeout, seconds; None
      picks it per driver: 0.05 when every node is a ``redis://`` or
      ``unix://`` URL (the lean driver), 0.25 when any node goes through
      redis-py (``rediss://`` URLs, client objects). ``config.node_timeout``
      shows the value chosen;
    - ``drift_factor`` [0.01]: clock drift allowance, ``ttl * drift_factor + 0.002``;
    - ``retry_delay`` [0.2], ``retry_jitter`` [0.2]: wait between attempts is
      ``retry_delay`` plus uniform random ``[0, retry_jitter)``;
    - ``wake_on_release`` [True]: waiters subscribe to the lock's release
      announcements and retry at once, instead of only after the retry delay;
    - ``quarantine_grace`` [None]: strict mode - besides nodes seen to restart
      (always quarantined for the longest ttl granted here), also quarantine
      nodes up for less than this many seconds.

    Raises ConfigurationError for bad arguments, and when two nodes are one
    Redis server (same resolved address and port, or same socket path after
    ``os.path.realpath``, whatever the database): that server would cast two
    votes. Host names are resolved here, with ``socket.getaddrinfo``; a name
    that does not resolve is compared as its lowercased literal. Nothing
    connects until the first command; close with ``await redlock.aclose()``
    or ``async with``.
    """

    def __init__(
        self,
        nodes: Sequence[NodeSpec],
        *,
        prefix: str = "redlock:",
        node_timeout: float | None = None,
        drift_factor: float = 0.01,
        retry_delay: float = 0.2,
        retry_jitter: float = 0.2,
        wake_on_release: bool = True,
        quarantine_grace: float | None = None,
    ) -> None:
        if node_timeout is None:
            node_timeout = _default_node_timeout(nodes)
        config = RedlockConfig(
            prefix=prefix,
            node_timeout=node_timeout,
            drift_factor=drift_factor,
            retry_delay=retry_delay,
            retry_jitter=retry_jitter,
            wake_on_release=wake_on_release,
            quarantine_grace=quarantine_grace,
        )
        if isinstance(nodes, str | bytes) or not isinstance(nodes, Sequence):
            raise ConfigurationError(
                f"nodes must be a list of URLs or redis.asyncio clients, not {type(nodes).__name__}"
            )
        if not nodes:
            raise ConfigurationError("nodes must name at least one Redis node")
        ttls = TtlLedger()
        built = []
        seen: dict[Endpoint, str] = {}
        for spec in nodes:
            node, identity = _make_node(spec, config, ttls)
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
        self._core = Core(built, config, start_renewal=start_renewal, ttls=ttls)
        # Validated options by keywords: request handlers make a lock per call
        # with the same few settings, so validation runs once per setting.
        self._options: dict[tuple[object, ...], LockOptions] = {}

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
    ) -> Lock:
        """A new exclusive :class:`Lock` on ``name`` (not yet acquired).

        Keywords (defaults in brackets): ``ttl`` [30.0] validity of one grant;
        ``auto_extend`` [True] renew in the background until release;
        ``timeout`` [None] total time ``acquire()`` may wait, None = no limit;
        ``fencing`` [False] give each grant a fencing token; ``cancel_on_lost``
        [True] cancel the ``async with`` body if the lock is lost; ``fair``
        [False] serve waiters in arrival order; ``on_lost`` [None] called once
        with the lock when a held grant is lost.
        """
        core = self._core
        if core.closed:
            core.check_open()
        # Positional: a call with seven keywords costs more than the lookup.
        options = self._lock_options(
            ttl, auto_extend, timeout, fencing, cancel_on_lost, fair, on_lost
        )
        return Lock(core, name, options)

    def _lock_options(
        self,
        ttl: float = 30.0,
        auto_extend: bool = True,
        timeout: float | None = None,
        fencing: bool = False,
        cancel_on_lost: bool = True,
        fair: bool = False,
        on_lost: OnLost | None = None,
    ) -> LockOptions:
        spec: tuple[object, ...] = (ttl, auto_extend, timeout, fencing, cancel_on_lost, fair)
        if on_lost is not None:
            spec += (on_lost,)
        options = None
        # Only exact types may share a cache entry: True == 1, yet ttl=True is an error.
        cacheable = (
            (type(ttl) is float or type(ttl) is int)
            and (timeout is None or type(timeout) is float or type(timeout) is int)
            and type(auto_extend) is bool
            and type(fencing) is bool
            and type(cancel_on_lost) is bool
            and type(fair) is bool
        )
        if cacheable:
            # Not contextlib.suppress: this runs on every lock() call.
            try:
                options = self._options.get(spec)
            except TypeError:  # an unhashable on_lost callable
                options = None
        if options is None:
            options = LockOptions(
                ttl=ttl,
                auto_extend=auto_extend,
                timeout=timeout,
                fencing=fencing,
                cancel_on_lost=cancel_on_lost,
                fair=fair,
                on_lost=on_lost,
            )
            # LockOptions cannot know the drift factor; cached options passed this.
            check_ttl("ttl", options.ttl, self._core.config.drift_factor)
            if cacheable and len(self._options) < 256:
                with contextlib.suppress(TypeError):
                    self._options[spec] = options
        return options

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
        self._lock_options(**options)  # bad keywords fail here, not at the first call
        if not (isinstance(name, str) or callable(name)):
            raise ConfigurationError(f"name must be a str or a callable, not {type(name).__name__}")

        def decorate(
            func: Callable[_P, Awaitable[_R]],
        ) -> Callable[_P, Coroutine[Any, Any, _R]]:
            if not inspect.iscoroutinefunction(func):
                raise ConfigurationError(
                    f"synchronized() decorates coroutine functions (async def), not {func!r}"
                )
            lock_name = _name_builder(name, func)

            @functools.wraps(func)
            async def locked(*args: _P.args, **kwargs: _P.kwargs) -> _R:
                async with self.lock(lock_name(args, kwargs), **options):
                    return await func(*args, **kwargs)

            return locked

        return decorate

    def rwlock(self, name: str, **defaults: Unpack[LockKeywords]) -> RWLock:
        """A read-write lock on ``name``: ``.read(...)`` and ``.write(...)`` take
        the keywords of :meth:`lock` and return lock objects like it. Keywords
        given here (e.g. ``fair=True``) are defaults for both views.

        Readers share the lock; a writer excludes readers and other writers. A
        writer waiting for readers stops new readers from joining, so a steady
        stream of readers cannot starve it. Read-to-write upgrade is refused.
        """
        self._core.check_open()
        self._lock_options(**defaults)  # bad defaults fail here, not at read()/write()
        return RWLock(self._core, name, self._lock_options, defaults)

    async def aclose(self) -> None:
        """Release every lock still held, then close the connections this Redlock opened.

        A lock still held is lost: ``lock.lost`` turns True, its ``on_lost``
        runs, and the body of its ``async with`` is cancelled and raises
        ``LockLost`` (``cancel_on_lost=False``: at exit), as with any other
        loss; its release is sent before the connections close. Afterwards
        ``acquire()``, ``extend()`` and new locks raise ``RedlockError`` (a
        lock that was held: ``LockLost``) at once. Clients passed in are left
        open.
        """
        core = self._core
        if core.closing:
            return
        # Connections made on a loop that has ended (or in the parent, before
        # a fork) are forgotten first: only this loop's can be closed here.
        core.loop()
        core.closing = True  # no new attempt from here on
        for lock in list(core.held):
            lock._lose("its Redlock was closed (aclose) while it was held", {})
        # Attempts in flight decide (a grant now is released at once), and
        # every cleanup gets its replies, before the connections close.
        await core.drain(stall_limit(core.config.node_timeout))
        core.close()
        if core.wake is not None:
            await core.wake.aclose()
        results = await asyncio.gather(
            *(node.aclose() for node in core.nodes), return_exceptions=True
        )
        for node, result in zip(core.nodes, results, strict=True):
            if isinstance(result, Exception):
                _log.warning("redlock_async: closing %s failed: %s", node.name, result)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def _default_node_timeout(nodes: object) -> float:
    """node_timeout=None: the lean driver's default unless a node goes through redis-py."""
    if isinstance(nodes, Sequence) and not isinstance(nodes, str | bytes):
        for spec in nodes:
            if not isinstance(spec, str) or redact_url(spec).startswith("rediss:"):
                return REDISPY_NODE_TIMEOUT
    return LEAN_NODE_TIMEOUT


def owned_client(address: Address, node_timeout: float) -> Redis:
    """The redis-py client the library opens itself (for ``rediss://`` URLs).

    Built from the parsed address, not the URL: redis-py would read a raw
    "/", "?" or "#" in a password differently. Its retries are off: redis-py
    retries connection errors with exponential backoff by default, which
    turns a dead node into a timeout; the quorum layer retries by itself.
    """
    where: dict[str, Any] = (
        {"unix_socket_path": address.path}  # the CLI's status reads any URL
        if address.path is not None
        else {"host": address.host or "localhost", "port": address.port, "ssl": address.tls}
    )
    return Redis(
        **where,
        db=address.db,
        username=address.username,
        password=address.password,
        socket_timeout=node_timeout,
        socket_connect_timeout=node_timeout,
        retry=Retry(NoBackoff(), 0),
    )


def _make_node(
    spec: object, config: RedlockConfig, ttls: TtlLedger
) -> tuple[Node, frozenset[Endpoint]]:
    """The node for ``spec`` and the identity of the server behind it."""
    timeout = config.node_timeout
    if isinstance(spec, str):
        address = parse_url(spec)
        identity = node_identity(address.host, address.port, address.path)
        restarts = Restarts(address.display, ttls, config.quarantine_grace)
        if address.tls:
            # TLS goes through redis-py; the lean driver speaks plain TCP and unix sockets.
            client = owned_client(address, timeout)
            node: Node = RedisPyNode(
                client, name=address.display, node_timeout=timeout, owned=True, restarts=restarts
            )
            return node, identity
        return RespNode(
            address, node_timeout=timeout, scripts=ALL_SCRIPTS, restarts=restarts
        ), identity
    if isinstance(spec, Redis | RedisCluster):
        name = _client_name(spec)
        restarts = Restarts(name, ttls, config.quarantine_grace)
        node = RedisPyNode(spec, name=name, node_timeout=timeout, owned=False, restarts=restarts)
        return node, _client_identity(spec)
    raise ConfigurationError(
        f"a node must be a URL or a redis.asyncio Redis/RedisCluster, not {type(spec).__name__}"
    )


def _client_identity(client: Redis | RedisCluster) -> frozenset[Endpoint]:
    """The server(s) behind a client; empty (unknown) when they cannot be told cheaply."""
    if isinstance(client, RedisCluster):
        found: set[Endpoint] = set()
        startup = getattr(getattr(client, "nodes_manager", None), "startup_nodes", None)
        if isinstance(startup, dict):
            for one in startup.values():
                host, port = getattr(one, "host", None), getattr(one, "port", None)
                if isinstance(host, str) and isinstance(port, int):
                    found |= node_identity(host, port)
        return frozenset(found)
    kwargs = client.connection_pool.connection_kwargs
    path = kwargs.get("path")
    if isinstance(path, str) and path:
        return node_identity(None, path=path)
    host, port = kwargs.get("host"), kwargs.get("port", 6379)
    if not isinstance(host, str):
        return frozenset()  # e.g. a Sentinel-managed pool: the server is not known yet
    return node_identity(host, int(port))


def _client_name(client: Redis | RedisCluster) -> str:
    if isinstance(client, RedisCluster):
        nodes = client.get_nodes() or []
        first = nodes[0].name if nodes else "?"
        return f"cluster({first})#{id(client):x}"
    kwargs = client.connection_pool.connection_kwargs
    if "path" in kwargs:
        where = f"unix://{kwargs['path']}"
    else:
        where = f"redis://{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}"
    return redact_url(f"{where}/{kwargs.get('db', 0)}") + f"#{id(client):x}"


def _name_builder(
    name: str | Callable[..., str], func: Callable[..., object]
) -> Callable[[tuple[Any, ...], dict[str, Any]], str]:
    """How a synchronized call's lock name is made from its arguments."""
    if not isinstance(name, str):
        builder = name
        return lambda args, kwargs: builder(*args, **kwargs)
    try:
        fields = [field for _, field, _, _ in string.Formatter().parse(name) if field is not None]
    except ValueError as exc:
        raise ConfigurationError(f"name template {name!r}: {exc}") from None
    if not fields:
        literal = name.replace("{{", "{").replace("}}", "}")
        return lambda args, kwargs: literal
    signature = inspect.signature(func)
    for field in fields:
        root = field.split(".", 1)[0].split("[", 1)[0]
        if root not in signature.parameters:
            raise ConfigurationError(
                f"name template {name!r} refers to {root!r}, which is not a parameter "
                f"of {func.__qualname__}; write {{{{ and }}}} for literal braces"
            )

    def build(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return name.format_map(bound.arguments)

    return build
