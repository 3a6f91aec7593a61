"""Grants across tasks and processes: ``Redlock.adopt()`` and ``Redlock.locked()``.

A grant is its token on a quorum of nodes. Whoever knows the token can hold
the grant: an HTTP request takes the lock and hands ``lock.token`` to a
background job, which adopts it, renews it and releases it. Adopting is an
extend to ``ttl`` on every node (extend.lua: PEXPIRE only where the key
still holds that token), judged like any extend: a quorum's yes makes a
grant whose validity is counted from before the extend was sent, exactly as
for an acquire; a quorum that no longer holds the token makes it
``LockNotOwned``.

``locked()`` asks every node whether the name's key exists (locked.lua,
read only) and answers for the quorum.
"""

from __future__ import annotations

import asyncio
import re

from ._commands import ExclusiveCommands
from ._engine import Command, Engine
from ._errors import ConfigurationError, LockNotOwned, QuorumUnavailable
from ._grant import Grant
from ._lock import Lock
from ._refusal import answers
from ._scripts import LOCKED
from ._timing import validity

__all__ = ["adopt", "locked"]

_TOKEN = re.compile(r"[0-9a-f]{40}")


def check_token(token: object) -> bytes:
    """A token as ``lock.token`` gives it (40 lowercase hex characters), as bytes."""
    if not isinstance(token, str) or not _TOKEN.fullmatch(token):
        shown = repr(token) if isinstance(token, str | bytes) and len(token) <= 60 else "it"
        raise ConfigurationError(
            f"token must be a lock's token as lock.token gives it (40 hex characters), not {shown}"
        )
    return token.encode("ascii")


async def adopt(lock: Lock, commands: ExclusiveCommands, engine: Engine, token: str) -> Lock:
    """Make ``lock`` hold the grant ``token``, confirmed on a quorum (see module doc).

    Raises LockNotOwned when a quorum no longer holds the token,
    QuorumUnavailable when too few nodes answered to tell.
    """
    raw = check_token(token)
    engine.check_open()
    ttl = lock.options.ttl
    engine.ttls.granted(ttl)  # a restart seen from now on must cover this grant
    started = engine.clock()
    tally = engine.fanout(commands.extend(raw, ttl))
    ok = await tally.decided
    now = engine.clock()
    left = validity(ttl, started, now, engine.config.drift_factor) if ok else 0.0
    name = lock.name
    if left > 0:
        lock._hold(Grant(raw, ttl, now + left, tally, None), asyncio.current_task())
        lock._adopted = True
        return lock
    if ok:  # a quorum said yes, too late: the grant stands on the nodes, not here
        raise QuorumUnavailable(
            f"lock {name!r}: adopting took longer than the validity it would give",
            tally.errors(),
        )
    if tally.no > tally.n - tally.quorum:
        raise LockNotOwned(
            f"lock {name!r}: a quorum of nodes no longer holds that token", tally.errors()
        )
    raise QuorumUnavailable(
        f"lock {name!r}: too few nodes answered to adopt the grant "
        f"({tally.yes + tally.no} of {tally.n} answered, {tally.quorum} needed)",
        tally.errors(),
    )


async def locked(engine: Engine, name: str, commands: ExclusiveCommands) -> bool:
    """Does a quorum of nodes hold a grant on the name now?

    True when a quorum has the key, False when so many nodes do not that a
    quorum cannot; QuorumUnavailable when too few answered to tell.
    """
    engine.check_open()
    tally = engine.fanout(Command(LOCKED, (commands.keys.lock,), ()))
    if await tally.decided:
        return True
    # Decided "no quorum holds it" may mean only "a quorum cannot say yes":
    # one "free" and one dead node of three. Free needs a quorum saying so,
    # so the nodes still answering are heard out first.
    if tally.no <= tally.n - tally.quorum:
        await answers(tally, engine.config.node_timeout)
    if tally.no > tally.n - tally.quorum:
        return False
    raise QuorumUnavailable(
        f"lock {name!r}: too few nodes answered to tell whether it is held "
        f"({tally.yes + tally.no} of {tally.n} answered, {tally.quorum} needed)",
        tally.errors(),
    )
