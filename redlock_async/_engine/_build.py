"""Which driver serves which node, and who the server behind it is.

A URL becomes a lean ``RespNode`` (``redis://``, ``unix://``) or a
``RedisPyNode`` over a client the library owns (``rediss://``, or any URL
with a parameter only redis-py reads, such as ``socket_keepalive``); a
redis-py client passed in - or valkey-py's, its fork - becomes a
``RedisPyNode`` that ``aclose()`` leaves open.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from redis.asyncio import ConnectionPool, Redis, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from .._base._address import Address, Endpoint, node_identity, parse_url, redact_url
from .._base._config import RedlockConfig
from .._base._errors import ConfigurationError
from .._base._options import CONNECTION_CLASSES
from ._node import Node
from ._restarts import Restarts
from ._ttls import TtlLedger
from .redispy import RedisPyNode
from .redispy._kinds import is_cluster, is_plain, sentinel_pools, ssl_connections
from .resp import RespNode

__all__ = [
    "LEAN_NODE_TIMEOUT",
    "REDISPY_NODE_TIMEOUT",
    "NodeSpec",
    "default_node_timeout",
    "make_node",
    "owned_client",
]

if TYPE_CHECKING:
    from valkey.asyncio import Valkey, ValkeyCluster

    NodeSpec: TypeAlias = str | Redis | RedisCluster | Valkey | ValkeyCluster
else:
    # valkey is optional, and imported only by applications that use it.
    NodeSpec: TypeAlias = str | Redis | RedisCluster
"""A node: a URL, or a redis-py or valkey-py asyncio client (not closed by ``aclose()``)."""

LEAN_NODE_TIMEOUT = 0.05
"""Default node_timeout when every node uses the lean driver (redis://, unix://)."""
REDISPY_NODE_TIMEOUT = 0.25
"""Default node_timeout when any node goes through redis-py (rediss://, URL
parameters only redis-py reads, clients):
it opens a pooled connection, with a handshake, per concurrent command; eight
concurrent first acquires took 30-60 ms on a loaded two-core machine."""


def default_node_timeout(nodes: object) -> float:
    """node_timeout=None: the lean driver's default unless a node goes through redis-py."""
    if isinstance(nodes, Sequence) and not isinstance(nodes, str | bytes):
        for spec in nodes:
            if not isinstance(spec, str) or not _lean(spec):
                return REDISPY_NODE_TIMEOUT
    return LEAN_NODE_TIMEOUT


def _lean(url: str) -> bool:
    try:
        return parse_url(url).lean
    except ConfigurationError:
        return True  # make_node raises it, with the node's place in the list


def owned_client(address: Address, node_timeout: float) -> Redis:
    """The redis-py client the library opens itself (``rediss://``, URL parameters).

    Built from the parsed address, not the URL: redis-py would read a raw
    "/", "?" or "#" in a password differently. Its retries are off: redis-py
    retries connection errors with exponential backoff by default, which
    turns a dead node into a timeout; the quorum layer retries by itself.
    The URL's own parameters (``socket_timeout``…) win over these defaults.
    """
    where: dict[str, Any] = (
        {"path": address.path}  # the CLI's status reads any URL
        if address.path is not None
        else {"host": address.host or "localhost", "port": address.port}
    )
    kind = "unix" if address.path is not None else "rediss" if address.tls else "redis"
    kwargs: dict[str, Any] = {
        "socket_timeout": node_timeout,
        "socket_connect_timeout": node_timeout,
        **dict(address.options),
    }
    pool = ConnectionPool(
        connection_class=CONNECTION_CLASSES[kind],
        **where,
        db=address.db,
        username=address.username,
        password=address.password,
        retry=Retry(NoBackoff(), 0),
        **kwargs,
    )
    return Redis.from_pool(pool)


def make_node(
    spec: object, config: RedlockConfig, ttls: TtlLedger
) -> tuple[Node, frozenset[Endpoint]]:
    """The node for ``spec`` and the identity of the server behind it."""
    timeout = config.node_timeout
    if isinstance(spec, str):
        address = parse_url(spec)
        identity = node_identity(address.host, address.port, address.path)
        restarts = Restarts(address.display, ttls, config.quarantine_grace)
        if not address.lean:
            # TLS and redis-py's parameters go through redis-py; the lean
            # driver speaks plain TCP and unix sockets, with db and AUTH only.
            client = owned_client(address, timeout)
            node: Node = RedisPyNode(
                client, name=address.display, node_timeout=timeout, owned=True, restarts=restarts
            )
            return node, identity
        return RespNode(address, node_timeout=timeout, restarts=restarts), identity
    if is_plain(spec) or is_cluster(spec):
        # valkey-py's clients are redis-py's API under other classes: typed as
        # redis-py's from here on, told apart by the _kinds helpers.
        passed = cast("Redis | RedisCluster", spec)
        pool = getattr(passed, "connection_pool", None)
        if isinstance(pool, sentinel_pools()) and not pool.is_master:
            raise ConfigurationError(
                f"sentinel:{pool.service_name} is a replica client (slave_for): replicas "
                "cannot hold locks; pass Sentinel(...).master_for(service) instead"
            )
        name = _client_name(passed)
        failover = isinstance(pool, sentinel_pools())
        restarts = Restarts(name, ttls, config.quarantine_grace, failover=failover)
        node = RedisPyNode(passed, name=name, node_timeout=timeout, owned=False, restarts=restarts)
        return node, _client_identity(passed)
    raise ConfigurationError(
        "a node must be a URL, a redis.asyncio Redis/RedisCluster or a valkey.asyncio "
        f"Valkey/ValkeyCluster, not {type(spec).__name__}"
    )


def _client_identity(client: Any) -> frozenset[Endpoint]:
    """The server(s) behind a client; empty (unknown) when they cannot be told cheaply."""
    if is_cluster(client):
        found: set[Endpoint] = set()
        for host, port in _cluster_addresses(client):
            found |= node_identity(host, port)
        return frozenset(found)
    pool = client.connection_pool
    if isinstance(pool, sentinel_pools()):
        # The master moves on failover: the service, as its Sentinels know it, is the server.
        return frozenset(
            ("sentinel", f"{pool.service_name}@{endpoint[1]}", endpoint[2])
            for host, port in _sentinels(pool)
            for endpoint in node_identity(host, port)
        )
    kwargs = pool.connection_kwargs
    path = kwargs.get("path")
    if isinstance(path, str) and path:
        return node_identity(None, path=path)
    host, port = kwargs.get("host"), kwargs.get("port", 6379)
    if not isinstance(host, str):
        return frozenset()
    return node_identity(host, int(port))


def all_connected(clusters: Sequence[tuple[str, object]]) -> bool:
    """Whether every cluster client has learned its cluster's nodes (no I/O:
    :func:`refuse_one_cluster_twice` resolves host names, so it waits for this)."""
    return all(
        getattr(getattr(client, "nodes_manager", None), "nodes_cache", None)
        for _, client in clusters
    )


def refuse_one_cluster_twice(clusters: Sequence[tuple[str, object]]) -> None:
    """Raise ConfigurationError when two cluster clients reach one cluster
    (one shard would cast two votes); call once :func:`all_connected`, when
    each client knows every node of its cluster, not only its startup nodes."""
    seen: dict[Endpoint, str] = {}
    for name, client in clusters:
        identity = _client_identity(client)
        other = next((seen[endpoint] for endpoint in identity if endpoint in seen), None)
        if other is not None:
            raise ConfigurationError(
                f"nodes lists the same Redis Cluster twice: {other!r} and {name!r} "
                "reach the same nodes: one cluster would cast several votes"
            )
        seen.update(dict.fromkeys(identity, name))


def _cluster_addresses(client: Any, *, startup: bool = False) -> list[tuple[str, int]]:
    """A cluster client's startup nodes, then (unless ``startup``) every node it
    has learned of if it has connected: two clients of one cluster given
    different startup nodes are then told apart only after one connected."""
    manager = getattr(client, "nodes_manager", None)
    found: dict[tuple[str, int], None] = {}
    sources = ["startup_nodes"] if startup else ["startup_nodes", "nodes_cache"]
    for source in sources:
        nodes = getattr(manager, source, None)
        if not isinstance(nodes, dict):
            continue
        for one in nodes.values():
            host, port = getattr(one, "host", None), getattr(one, "port", None)
            if isinstance(host, str) and isinstance(port, int):
                found[host, port] = None
    return list(found)


def _sentinels(pool: Any) -> list[tuple[str, int]]:
    found = []
    for sentinel in getattr(pool.sentinel_manager, "sentinels", ()):
        kwargs = sentinel.connection_pool.connection_kwargs
        host, port = kwargs.get("host"), kwargs.get("port", 26379)
        if isinstance(host, str):
            found.append((host, int(port)))
    return found


def _client_name(client: Any) -> str:
    if is_cluster(client):
        # Named by the addresses it was given (host:port carry no secret),
        # known from construction on; get_nodes() is empty until it connects.
        addresses = [f"{host}:{port}" for host, port in _cluster_addresses(client, startup=True)]
        shown = ",".join(addresses[:3]) + (f",+{len(addresses) - 3}" if len(addresses) > 3 else "")
        return f"cluster({shown or '?'})#{id(client):x}"
    pool = client.connection_pool
    if isinstance(pool, sentinel_pools()):
        # Named by its service: the master's address changes with each failover.
        db = pool.connection_kwargs.get("db", 0)
        return f"sentinel:{pool.service_name}" + (f"/{db}" if db else "")
    kwargs = pool.connection_kwargs
    if "path" in kwargs:
        where = f"unix://{kwargs['path']}"
    else:
        scheme = "rediss" if issubclass(pool.connection_class, ssl_connections()) else "redis"
        where = f"{scheme}://{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}"
    return redact_url(f"{where}/{kwargs.get('db', 0)}") + f"#{id(client):x}"
