"""Throwaway Redis nodes with fault injection, for your tests and ours.

Installing redlock_async registers :mod:`redlock_async.testing.plugin` as a
pytest plugin; its fixtures are ``redis_nodes``, ``redis_nodes_factory`` and
``redis_cluster``. The classes here can also be used directly.

They are imported on first use: the plugin loads into every pytest run
wherever the package is installed, and pays for redis-py only once a fixture
or a name here is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._cluster import RedisClusterNodes as RedisClusterNodes
    from ._nodes import RedisNode as RedisNode
    from ._nodes import RedisNodes as RedisNodes
    from ._proxy import Proxy as Proxy
    from ._proxy import ProxyListener as ProxyListener
    from ._sentinel import SentinelServer as SentinelServer
    from ._server import AclUser as AclUser
    from ._server import RedisServer as RedisServer
    from ._server import find_redis_server as find_redis_server
    from ._tls import Certificates as Certificates
    from ._tls import TlsServer as TlsServer

__all__ = [
    "AclUser",
    "Certificates",
    "Proxy",
    "ProxyListener",
    "RedisClusterNodes",
    "RedisNode",
    "RedisNodes",
    "RedisServer",
    "SentinelServer",
    "TlsServer",
    "find_redis_server",
]

_HOMES: dict[str, str] = {
    "RedisClusterNodes": "_cluster",
    "RedisNode": "_nodes",
    "RedisNodes": "_nodes",
    "Proxy": "_proxy",
    "ProxyListener": "_proxy",
    "SentinelServer": "_sentinel",
    "AclUser": "_server",
    "RedisServer": "_server",
    "find_redis_server": "_server",
    "Certificates": "_tls",
    "TlsServer": "_tls",
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    obj = getattr(import_module(f"{__name__}.{home}"), name)
    globals()[name] = obj
    return obj
