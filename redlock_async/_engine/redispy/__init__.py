"""The redis-py driver."""

from ._node import RedisPyNode, translate

__all__ = ["RedisPyNode", "translate"]
