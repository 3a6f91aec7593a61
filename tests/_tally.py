"""Drive the library's real ``Tally`` by hand: the vote counting that runs, without nodes.

Tests of vote counting (tests/unit/test_votes.py) and the virtual-time model
of Redlock (tests/faults/test_model.py) decide votes with this, so what they
check is ``Tally.settle`` itself, not a copy of its rule.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import cast

from redlock_async._base._errors import NodeConnectionError, NodeError
from redlock_async._core._scripts import RELEASE
from redlock_async._engine import Command, Node, Tally, quorum_of
from redlock_async._engine._restarts import Restarts

__all__ = ["decide", "tally_of"]


class _Silent:
    """A node that has never answered anything: its votes time out at once."""

    def __init__(self, name: str) -> None:
        self.name = name  # n0, n1... as messages name it

    def silent_since(self) -> float:
        return float("-inf")


class _Group:
    """The fan-out side of a tally, with nothing behind it (silent nodes, no resends)."""

    def __init__(self, n: int) -> None:
        self.nodes = cast(tuple[Node, ...], tuple(_Silent(f"n{i}") for i in range(n)))
        self.n = n
        self.need = quorum_of(n)
        self.node_timeout = 1.0
        self.watches: tuple[Restarts | None, ...] | None = None
        self.on_error: Callable[[int, NodeError], None] | None = None

    def resend(self, tally: Tally, index: int, reply: NodeError) -> None:
        raise AssertionError("a plain command is never resent")

    def stale(self, index: int, keys: Sequence[bytes] = ()) -> NodeError:
        return NodeError(f"n{index}: STALE")


_LOOP = asyncio.new_event_loop()  # futures need a loop; it never runs


def tally_of(n: int) -> Tally:
    """A fresh tally of a non-granting command over ``n`` nodes."""
    command = Command(RELEASE, (b"k",), (b"t",))
    return Tally(_Group(n), command, _LOOP.create_future(), 0.0)


def decide(yes: int, no: int, failed: int, n: int) -> bool | None:
    """What a tally decides after ``yes`` yes votes, ``no`` refusals and ``failed``
    errors out of ``n`` (in that order): True, False, or None while undecided."""
    tally = tally_of(n)
    index = 0
    for reply, count in ((1, yes), (0, no), (NodeConnectionError("down"), failed)):
        for _ in range(count):
            tally.settle(index, reply)
            index += 1
    return tally.decided.result() if tally.decided.done() else None
