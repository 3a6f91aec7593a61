"""Grants across tasks and processes: ``Redlock.adopt()`` and ``Redlock.locked()``.

A grant is its token on a quorum of nodes. Whoever knows the token can hold
the grant: an HTTP request takes the lock and hands ``lock.token`` to a
background job, which adopts it, renews it and releases it. Adopting is an
extend to ``ttl`` on every node (extend.lua: only where the key still holds
that token, and only ever raising its expiry), judged like any extend: a
quorum's yes makes a grant whose validity is counted from before the extend
was sent, exactly as for an acquire; a quorum that no longer holds the token
makes it ``LockNotOwned``.

Two live copies of one grant (the taker's and the adopter's) never shorten
each other's keys: every renewal script only raises an expiry, so a key
expires no earlier than the latest expiry any copy asked for, and each
copy's validity, counted from before its own send, is a lower bound of it.
A multilock's token is refused before anything is sent (``check_token``;
``_multilock.py`` says why); read-write and semaphore tokens are refused by
the nodes, since no plain lock key ever holds them (``LockNotOwned``).

``locked()`` asks every node which token holds the name (locked.lua, read
only) and answers for the quorum, judged as the CLI's ``status`` judges.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence

from .._base._errors import ConfigurationError, LockNotOwned, QuorumUnavailable
from .._base._timing import validity
from .._core._commands import ExclusiveCommands
from .._core._grant import Grant
from .._core._holderinfo import TOKEN
from .._core._lock import Lock
from .._core._refusal import answers
from .._core._scripts import LOCKED
from .._engine import ANSWERS, Command, Engine, Tally, tally_text, vote_limit
from ._multilock import TOKEN_PREFIX

__all__ = ["adopt", "hear_out", "locked", "verdict"]

_MULTI = re.compile(re.escape(TOKEN_PREFIX.decode()) + TOKEN.pattern)


def check_token(token: object) -> bytes:
    """A plain lock's token as ``lock.token`` gives it (40 lowercase hex characters,
    then the taker's ``@HOST:PID:MS`` unless it was taken with ``holder_info=False``),
    as bytes; ConfigurationError for anything else, a multilock's token included."""
    if isinstance(token, str) and _MULTI.fullmatch(token):
        # Its names' keys are plain locks' keys: adopted as one name, a
        # release would free that name alone while the multilock holds on.
        raise ConfigurationError(
            f"token {token!r} is a multilock's: adopt() takes a plain lock's token "
            "only (adopted as one of its names, a release would free that name "
            "while the multilock still holds every name). Keep the multilock "
            "where it was taken, or release it there and take the names anew "
            "with redlock.multilock(...) where they are needed"
        )
    if not isinstance(token, str) or not TOKEN.fullmatch(token):
        if isinstance(token, str | bytes) and len(token) <= 120:
            shown = repr(token)
        else:
            shown = f"an object of type {type(token).__name__}"
        raise ConfigurationError(
            f"token must be a lock's token as lock.token gives it (a str of 40 hex "
            f"characters, then @HOST:PID:MS with holder info), not {shown}"
        )
    return token.encode("ascii")


async def adopt(lock: Lock, commands: ExclusiveCommands, engine: Engine, token: str) -> Lock:
    """Make ``lock`` hold the grant ``token``, confirmed on a quorum (see module doc).

    Raises LockNotOwned when a quorum no longer holds the token,
    QuorumUnavailable when too few nodes answered to tell.
    """
    raw = check_token(token)
    engine.check_open()
    if not engine.epochs.ready:
        # This Redlock's first renewal: the view of the nodes' epochs it
        # carries comes from the censuses (_engine/_epochs.py), two round trips.
        wait = vote_limit(engine.config.node_timeout)
        await engine.epochs.first(wait, (commands.keys.lock,))
    ttl = lock.options.ttl
    engine.ttls.granted(ttl)  # a restart seen from now on must cover this grant
    started = engine.clock()
    tally = engine.fanout(commands.extend(raw, ttl))
    ok = await tally.decided
    # Closed meanwhile (aclose() told the locks it held, not this one): the
    # copy is not held here, and its keys are left to the others.
    engine.check_open()
    now = engine.clock()
    left = validity(ttl, started, now, engine.config.drift_factor) if ok else 0.0
    name = lock.name
    if left > 0:
        lock._hold(Grant(raw, ttl, now + left, tally, None, now, True), asyncio.current_task())
        lock._adopted = True
        return lock
    if ok:  # a quorum said yes, too late: the grant stands on the nodes, not here
        raise QuorumUnavailable(
            f"lock {name!r}: adopting took longer than the validity it would give",
            tally.errors(),
        )
    if tally.refused:
        raise LockNotOwned(
            f"lock {name!r}: a quorum of nodes no longer holds that token (released, "
            "expired or taken over; adopt() takes the tokens of plain locks only, not "
            "of read-write locks or semaphores)",
            tally.errors(),
        )
    raise QuorumUnavailable(
        f"lock {name!r}: too few nodes answered to adopt the grant: {tally_text(tally)}",
        tally.errors(),
    )


async def locked(engine: Engine, name: str, commands: ExclusiveCommands) -> bool:
    """Does a quorum of nodes hold one grant on the name now?

    True when a quorum holds one token; False when no token could reach a
    quorum even with every node that did not answer; QuorumUnavailable
    when too few answered to tell.
    """
    engine.check_open()
    sent = engine.clock()
    tally = engine.fanout(Command(LOCKED, (commands.keys.lock,), ()))
    await tally.decided  # every reply counts as "no" here: decided once two of three came
    state, _ = _judge(tally)
    if state == "unknown":
        # One "free" and one dead node of three does not say "free" yet:
        # the nodes still answering are heard out first.
        await hear_out(engine, tally, sent)
        state, _ = _judge(tally)
    if state != "unknown":
        return state == "held"
    raise QuorumUnavailable(
        f"lock {name!r}: too few nodes answered to tell whether it is held: "
        f"{tally_text(tally, ANSWERS)}",
        tally.errors(),
    )


async def hear_out(engine: Engine, tally: Tally, sent: float) -> None:
    """Wait for the nodes still answering a read sent at ``sent`` (``locked()``,
    ``holder()``): up to ``node_timeout``, and never past V after the send, the
    bound docs/guarantees.md states for both."""
    node_timeout = engine.config.node_timeout
    left = sent + vote_limit(node_timeout) - engine.clock()
    if left > 0:
        await answers(tally, min(node_timeout, left))


def _judge(tally: Tally) -> tuple[str, object]:
    values = []
    unheard = 0
    for reply in tally.replies:
        if isinstance(reply, bytes) or reply is None:
            values.append(reply)
        else:  # an error, or no answer yet
            unheard += 1
    return verdict(values, unheard, tally.quorum)


def verdict(values: Sequence[object], unheard: int, quorum: int) -> tuple[str, object]:
    """``held`` (and the value), ``free`` or ``unknown`` over what the nodes hold.

    ``values``: each answering node's holder of the name (a token; None when
    it holds nothing); ``unheard``: nodes that did not answer. Held: one
    value on a quorum. Unknown: not held, but the unheard nodes could make a
    quorum with what the others show. Free: neither - leftovers of a failed
    attempt on too few nodes expire by themselves. ``Redlock.locked()`` and
    the CLI's ``status`` judge alike.
    """
    held = [value for value in values if value is not None]
    most = 0
    if held:
        top = max(set(held), key=held.count)
        most = held.count(top)
        if most >= quorum:
            return "held", top
    return ("unknown" if most + unheard >= quorum else "free"), None
