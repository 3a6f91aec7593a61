"""A fresh grant's fencing token: the highest candidate, made to stick on a quorum."""

from __future__ import annotations

from collections.abc import Mapping

from .._base._errors import NodeError
from .._engine import Command, Engine, Tally, is_yes
from ._commands import Commands
from ._scripts import FENCE_RAISE

__all__ = ["fence"]


async def fence(
    engine: Engine, commands: Commands, tally: Tally, token: bytes
) -> tuple[int | None, Mapping[str, NodeError] | None]:
    """Choose the fencing token of a fresh grant and make it stick.

    The token is the highest counter any granting node returned. Unless every
    granting node returned that same value, it is written back to the granting
    nodes' counters, and a quorum must confirm: then any later grant's quorum
    meets a node whose counter is at least this token, and its own is greater.
    """
    granting = [i for i, reply in enumerate(tally.replies) if is_yes(reply)]
    values = [tally.replies[i] for i in granting]
    top = max(values)  # type: ignore[type-var]
    assert isinstance(top, int)
    if all(value == top for value in values):
        return top, None
    grant_key, counter = commands.fence_keys()
    confirm = engine.fanout(Command(FENCE_RAISE, (grant_key, counter), (token, top)), only=granting)
    if await confirm.decided:
        return top, None
    return None, confirm.errors()
