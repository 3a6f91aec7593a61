"""The node boundary: the only interface the quorum layer talks to.

A node runs one script with keys and arguments and reports the outcome by
calling back exactly once, later, on the event loop: with the reply (an int,
bytes, a list or None) or with a :class:`NodeError` *instance* (never raised).
Passing outcomes as values is what lets the fan-out never raise mid-flight.

Two drivers implement it:

* ``RespNode`` (``_resp.py``) - the lean hot path for ``redis://`` and
  ``unix://`` URLs: one auto-pipelined connection per node, commands executed
  in the order they were sent.
* ``RedisPyNode`` (``_redispy.py``) - for ``rediss://`` URLs and user-supplied
  ``redis.asyncio.Redis`` / ``RedisCluster`` clients (Cluster, Sentinel, TLS,
  anything else redis-py reaches); commands may run on different pooled
  connections, so their order is not guaranteed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from ._errors import NodeError
from ._scripts import Script

__all__ = ["Arg", "Callback", "Node", "Reply", "stall_limit"]

Reply = int | bytes | list[object] | None | NodeError
Callback = Callable[[Reply], None]
Arg = bytes | str | int


def stall_limit(node_timeout: float) -> float:
    """How long a node may leave every command unanswered before we drop its connection.

    Much longer than ``node_timeout`` (a vote already counts as failed after
    that), so a briefly slow node keeps its connection; short enough that a
    blackholed node cannot make unanswered commands pile up in memory.
    """
    return max(4.0 * node_timeout, 0.5)


class Node(Protocol):
    """What the quorum layer needs from one Redis node."""

    @property
    def name(self) -> str:
        """The node's address with secrets redacted: safe for messages and logs."""
        ...

    @property
    def ordered(self) -> bool:
        """True when commands run on the server in the order they were sent."""
        ...

    def run_script(
        self, script: Script, keys: Sequence[bytes], args: Sequence[Arg], callback: Callback
    ) -> None:
        """Send ``script``; call ``callback`` once with its reply or a NodeError."""
        ...

    def check_stall(self) -> None:
        """Told that a command on this node outlived ``node_timeout``."""
        ...

    async def aclose(self) -> None:
        """Close what this node opened; fail commands still in flight."""
        ...
