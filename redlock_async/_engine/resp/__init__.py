"""The lean driver."""

from ._node import RespNode

__all__ = ["RespNode"]
