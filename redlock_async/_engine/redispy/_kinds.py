"""The client libraries this driver serves: redis-py, and valkey-py once it is imported.

valkey-py (``valkey.asyncio.Valkey``, ``ValkeyCluster``) is redis-py's fork:
the same API under other names, and its own classes throughout - its
clients, connection pools and every exception (``valkey.exceptions.*``)
are not redis-py's, so each ``isinstance`` of this driver asks here for the
classes of both. valkey is never imported here: a valkey client can only
exist once the application imported ``valkey``, so until ``sys.modules``
has it, redis-py's classes are all there is (and the package needs no valkey
installed).
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import redis.exceptions

__all__ = [
    "cluster_clients",
    "errors",
    "is_cluster",
    "is_plain",
    "is_valkey",
    "plain_clients",
    "sentinel_pools",
    "ssl_connections",
    "valkey_loaded",
]

# Where each kind of class lives, per library: (module, redis-py's name, valkey's name).
_WHERE: dict[str, tuple[str, str, str]] = {
    "plain": ("asyncio", "Redis", "Valkey"),
    "cluster": ("asyncio", "RedisCluster", "ValkeyCluster"),
    "sentinel_pool": ("asyncio.sentinel", "SentinelConnectionPool", "SentinelConnectionPool"),
    "ssl": ("asyncio.connection", "SSLConnection", "SSLConnection"),
}

_cache: dict[tuple[str, bool], tuple[type[Any], ...]] = {}


def valkey_loaded() -> bool:
    """Has the application imported valkey (so a valkey client may be passed in)?"""
    return sys.modules.get("valkey") is not None


def _classes(kind: str) -> tuple[type[Any], ...]:
    loaded = valkey_loaded()
    found = _cache.get((kind, loaded))
    if found is None:
        if kind in _WHERE:
            module, ours, theirs = _WHERE[kind]
            found = (getattr(importlib.import_module(f"redis.{module}"), ours),)
            if loaded:
                found += (getattr(importlib.import_module(f"valkey.{module}"), theirs),)
        else:  # an exception class: the same name in both libraries
            found = (getattr(redis.exceptions, kind),)
            if loaded:
                found += (getattr(importlib.import_module("valkey.exceptions"), kind),)
        _cache[(kind, loaded)] = found
    return found


def plain_clients() -> tuple[type[Any], ...]:
    """``redis.asyncio.Redis``, and ``valkey.asyncio.Valkey`` once valkey is imported."""
    return _classes("plain")


def cluster_clients() -> tuple[type[Any], ...]:
    """``redis.asyncio.RedisCluster``, and ``valkey.asyncio.ValkeyCluster``."""
    return _classes("cluster")


def sentinel_pools() -> tuple[type[Any], ...]:
    """The connection pools of ``Sentinel(...).master_for()`` clients, both libraries'."""
    return _classes("sentinel_pool")


def ssl_connections() -> tuple[type[Any], ...]:
    return _classes("ssl")


def errors(name: str) -> tuple[type[Exception], ...]:
    """The exception class ``name`` (``"NoScriptError"``…) of redis-py and of valkey-py."""
    return _classes(name)


def is_plain(client: object) -> bool:
    return isinstance(client, plain_clients())


def is_cluster(client: object) -> bool:
    return isinstance(client, cluster_clients())


def is_valkey(client: object) -> bool:
    """A valkey-py client (or a subclass of one)?"""
    return valkey_loaded() and isinstance(client, plain_clients()[1:] + cluster_clients()[1:])
