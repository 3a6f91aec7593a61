"""The engine: nodes, fan-outs, votes and wake-ups, behind a narrow API."""

from ._node import SERVER_ID, Script

__all__ = ["SERVER_ID", "Script"]
