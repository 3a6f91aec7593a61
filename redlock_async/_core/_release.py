"""Releasing a grant on every node, and what the replies say about it."""

from __future__ import annotations

from .._base._errors import LockNotOwned, describe_errors
from .._base._observe import LOCK, warn
from .._engine import Engine, Tally
from ._commands import Commands, ExclusiveCommands
from ._grant import Grant

__all__ = ["judge_release", "send_release", "settle_release"]


def send_release(engine: Engine, commands: Commands, grant: Grant) -> tuple[Tally, bool]:
    """Send the release of ``grant`` (already dropped by its lock) to every node.

    Returns its tally, and whether the grant's validity had ended before it.
    Not a coroutine: the caller awaits ``tally.decided`` itself (one frame
    less on every release).
    """
    expired = engine.clock() >= grant.validity_end
    command = commands.release(grant.token, engine.wake is not None)
    tally = engine.cleanup(command, after=grant.acquired)  # queued past LIMIT in flight
    wake = engine.wake
    if wake is not None and wake.waiting and type(commands) is ExclusiveCommands:
        # This process's waiters for the lock are woken now, not by the nodes'
        # announcements a round trip later: their attempts go out after the
        # release on each node's connection, so it has run there first (one
        # round trip per hand-over, not two). Where it has not (a pool of
        # connections, a queue), an attempt is refused and the announcements
        # wake the waiter again (WakeHub.notify's echoes).
        wake.notify(commands.keys.wake, grant.token)
    # Resend where a connection fails, for as long as the key may live.
    tally.resend_until = engine.clock() + grant.ttl
    return tally, expired


def judge_release(name: str, tally: Tally, expired: bool) -> None:
    """What a decided release says, when it was not a plain success.

    Raises LockNotOwned when more nodes than a quorum can spare answered that
    they no longer held it, or the validity had already ended. When failing
    or slow nodes leave the outcome unknown, logs a warning instead: the keys
    expire anyway, and raising would turn a network hiccup into a failed body.
    """
    if expired:
        raise LockNotOwned(f"lock {name!r}: its validity had ended before release", tally.errors())
    if tally.decided.result():
        return
    if tally.refused:
        raise LockNotOwned(
            f"lock {name!r}: fewer than {tally.quorum} nodes still held this grant",
            tally.errors(),
        )
    why = describe_errors(tally.errors()) or "no quorum of replies within node_timeout"
    message = f"release of {name!r} not confirmed by a quorum: {why}"
    warn(LOCK, "release unconfirmed", name, message, name=name, outcome="unconfirmed")


async def settle_release(name: str, tally: Tally, expired: bool) -> None:
    """Wait for the release of ``tally`` to be decided, and judge it (``judge_release``)."""
    if not await tally.decided or expired:
        judge_release(name, tally, expired)
