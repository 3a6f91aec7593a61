"""Throwaway Redis nodes with fault injection, for your tests and ours.

Installing redlock_async registers :mod:`redlock_async.testing.plugin` as a
pytest plugin; its fixtures are ``redis_nodes``, ``redis_nodes_factory`` and
``redis_cluster``. The classes here can also be used directly.
"""

from __future__ import annotations

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
