"""Releasing a grant on every node, and what the replies say about it."""

from __future__ import annotations

import logging
import time

from ._commands import Commands
from ._engine import Engine
from ._errors import LockNotOwned, describe_errors
from ._grant import Grant

__all__ = ["release_grant"]

_log = logging.getLogger("redlock_async")


async def release_grant(engine: Engine, commands: Commands, name: str, grant: Grant) -> None:
    """Send the release of ``grant`` (already dropped by its lock) and judge the replies.

    Raises LockNotOwned when more nodes than a quorum can spare answered that
    they no longer held it, or its validity had already ended. When failing
    or slow nodes leave the outcome unknown, logs a warning instead: the keys
    expire anyway, and raising would turn a network hiccup into a failed body.
    """
    expired = engine.clock() >= grant.validity_end
    command = commands.release(grant.token, engine.wake is not None)
    tally = engine.fanout(command, after=grant.acquired)
    # Resend where a connection fails, for as long as the key may live.
    tally.resend_until = time.monotonic() + grant.ttl
    released = await tally.decided
    if expired:
        raise LockNotOwned(f"lock {name!r}: its validity had ended before release", tally.errors())
    if released:
        return
    if tally.no > tally.n - tally.quorum:
        raise LockNotOwned(
            f"lock {name!r}: fewer than {tally.quorum} nodes still held this grant",
            tally.errors(),
        )
    _log.warning(
        "redlock_async: release of %r not confirmed by a quorum: %s",
        name,
        describe_errors(tally.errors()) or "no quorum of replies within node_timeout",
    )
