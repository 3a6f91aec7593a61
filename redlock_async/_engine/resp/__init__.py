"""The lean driver: ``redis://`` and ``unix://`` nodes over one pipelined RESP connection each."""

from ._node import RespNode

__all__ = ["RespNode"]
