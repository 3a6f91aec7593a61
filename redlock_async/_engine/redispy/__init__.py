"""The redis-py driver: nodes reached through redis-py clients (TLS, Cluster, clients passed in)."""

from ._node import RedisPyNode

__all__ = ["RedisPyNode"]
