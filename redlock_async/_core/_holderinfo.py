"""Who took a grant: host, pid and grant time, written into the grant's token.

With ``holder_info=True`` (the default) a token is the engine's 40 random
hex characters, then ``@HOST:PID:MS``: the taker's host name, process id
and wall-clock time of the granting attempt, in ms since the epoch::

    3f9c0d...e1@web-3:4242:1717171717123

Why in the token and not in a key of its own: the token is the value of
every key a grant writes (the lock key, the writer key, a reader's member
of the reader set, a semaphore slot) and every script compares it whole.
So the record is written by the grant's own ``SET NX PX``, kept alive by
every renewal's ``PEXPIRE``, removed by every compare-and-delete and
expires with the key: it can neither outlive its grant (no key to leak)
nor end before it, whatever the scripts do, with no script changed and no
command added on any node. A companion key would need every granting,
renewing and releasing script to write, raise and delete it in step. The
cost is the longer token in every command that carries one (about 20 bytes
plus the host name; benchmarks/holder_info.py measures it).

The random part alone makes the token unique and unguessable; the suffix is
for people. A copy of the grant made by ``adopt()`` keeps the token, so it
names the process that took the grant, not the adopter.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from .._base._config import RedlockConfig
from .._base._world import REAL, World, current
from .._engine import TokenPool

__all__ = [
    "TOKEN",
    "Holder",
    "HolderKind",
    "HolderTokens",
    "holder_of",
    "holder_tokens",
    "identity",
    "parse",
]

# The host is printable ASCII: identity() escapes anything else.
TOKEN = re.compile(r"[0-9a-f]{40}(?:@[ -~]+:[0-9]{1,10}:[0-9]{1,16})?")
"""A plain lock's token, as ``lock.token`` gives it: with or without holder info."""

_INFO = re.compile(rb"(?:m:)?[0-9a-f]{40}@([ -~]+):([0-9]{1,10}):([0-9]{1,16})")

HolderKind = Literal["exclusive", "multilock", "write", "read"]

_MAX_HOST = 255  # a DNS name's limit; gethostname() never gives more on Linux (64)

# b"@HOST:PID:" of this process: computed at the first grant, and again in a
# forked child (its pid differs). Read per token, so no getpid() syscall then.
_me = b""


def identity(world: World = REAL) -> bytes:
    """``@HOST:PID:`` for ``world``'s process (the host ASCII, anything else escaped)."""
    global _me
    if world is REAL and _me:
        return _me
    host = world.hostname()[:_MAX_HOST] or "?"
    # Printable ASCII only (TOKEN's rule, and lock.token's decoding).
    escaped = host.encode("ascii", "backslashreplace")
    escaped = bytes(c if 32 <= c < 127 else 63 for c in escaped)  # "?"
    me = b"@%s:%d:" % (escaped, world.getpid())
    if world is REAL:
        _me = me
    return me


def _forget() -> None:
    global _me
    _me = b""


os.register_at_fork(after_in_child=_forget)


class HolderTokens:
    """Grant tokens with holder info: the pool's random part, then ``@HOST:PID:MS``.

    One per Redlock with ``holder_info=True``, handed to the engine as its
    token source; the random part comes from the same fork-safe pool. Host,
    pid, wall clock and random bytes are those of ``world`` (default: the
    current one), read when made.
    """

    __slots__ = ("_me", "_pool", "_time_ns")

    def __init__(self, pool: Callable[[], bytes] | None = None, world: World | None = None) -> None:
        world = world if world is not None else current()
        self._pool = pool if pool is not None else TokenPool(world.token_bytes)
        self._time_ns = world.time_ns
        # A simulated process's identity is fixed: made now. This process's
        # (empty here) is the module's, made again in a forked child (its pid differs).
        self._me = b"" if world is REAL else identity(world)

    def __call__(self) -> bytes:
        # When the attempt begins (its token is made first), on the taker's
        # wall clock: "since" reads the same whichever node answered.
        me = self._me or _me or identity()
        return b"%s%s%d" % (self._pool(), me, self._time_ns() // 1_000_000)


def holder_tokens(config: RedlockConfig) -> HolderTokens | None:
    """The token source of a Redlock with ``config`` in the current world: None
    (the engine's bare random tokens) when ``holder_info`` is off."""
    return HolderTokens() if config.holder_info else None


def parse(token: bytes) -> tuple[str, int, float] | None:
    """``(host, pid, since)`` from a token with holder info; None for any other value
    (a token taken with ``holder_info=False``, by an older version, a foreign key)."""
    found = _INFO.fullmatch(token)
    if found is None:
        return None
    host, pid, ms = found.groups()
    return host.decode("ascii", "replace"), int(pid), int(ms) / 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class Holder:
    """Who holds a lock name now, as a quorum of nodes sees it (``Redlock.holder()``).

    ``host``, ``pid`` and ``since`` come from the grant's token: None when
    the grant carries no holder info (taken with ``holder_info=False``, or
    by a version before it).
    """

    host: str | None
    """Host name of the process that took the grant (``socket.gethostname()``)."""
    pid: int | None
    """Process id that took the grant (``os.getpid()`` there, after any fork)."""
    since: float | None
    """When the grant was taken: the taker's wall clock, epoch seconds (ms
    precision), when the attempt that won began. Renewals keep it."""
    ttl: float
    """Seconds the grant's keys have left on a quorum of nodes (the quorum-th
    longest; renewals raise it); ``inf`` for a key without expiry, which the
    library never writes."""
    kind: HolderKind
    """``"exclusive"`` (a plain lock), ``"multilock"`` (one of a multilock's
    names), ``"write"`` (a read-write lock's writer) or ``"read"`` (readers:
    the other fields then describe one of them, the reader on the most nodes,
    the longest-held among equals)."""
    readers: int = 0
    """With ``kind="read"``: how many readers hold it (as ``redlock-async
    status`` counts them: the quorum-th highest count of live readers on a
    node). 0 otherwise."""


def holder_of(token: bytes, ttl: float, kind: HolderKind, readers: int = 0) -> Holder:
    """The :class:`Holder` a grant's token names, its keys having ``ttl`` seconds left."""
    if kind == "exclusive" and token.startswith(b"m:"):
        kind = "multilock"  # a multilock's mark (_multilock.TOKEN_PREFIX)
    info = parse(token)
    host, pid, since = info if info is not None else (None, None, None)
    return Holder(host=host, pid=pid, since=since, ttl=ttl, kind=kind, readers=readers)
