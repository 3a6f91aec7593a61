"""The world a Redlock lives in: its clocks, its randomness and who it is.

Everything the library reads from outside besides the network comes in
through one :class:`World`: the monotonic clock behind validity, the wall
clock stamped into holder info and fair tickets, random bytes for tokens and
ids, the random source of retry and reconnect jitter, the host name and
process id of holder info, and host-name resolution. The default is
:data:`REAL`, the process's own; a simulation (tests/sim/) gives each of its
simulated processes a world of its own - seeded randomness, a virtual clock,
a made-up host and pid - so that a seed replays a whole run, without patching
``time``, ``random``, ``os`` or ``socket``.

Which world applies is a context variable: code run in a context where
:func:`context` set one sees it, as do the tasks and callbacks it starts
(asyncio copies the context into each). Objects that live long read it once,
when made (an Engine: its clock, token source and random source; a node's
reconnect backoff); the few module-level readers read it at the call (the
resolution cache's clock, the warning rate limit). No hot-path code reads the
variable: per acquire and release, the cost is what it was.
"""

from __future__ import annotations

import contextvars
import os
import random
import secrets
import socket
import time
from collections.abc import Callable
from typing import Any

__all__ = ["REAL", "World", "context", "current", "install"]

GetAddrInfo = Callable[..., list[tuple[Any, ...]]]
"""``socket.getaddrinfo``'s shape: ``(host, port, type=...)`` to address infos."""


class World:
    """Where a Redlock reads time, randomness and its identity. Not public.

    - ``monotonic()``: the clock behind validity and deadlines (seconds, any origin);
    - ``time_ns()``: the wall clock, ns since the epoch (holder info's grant
      time, fair tickets);
    - ``token_bytes(n)``: ``n`` random bytes (the random part of grant tokens
      and waiter ids);
    - ``rng``: jitter, shared by everything of the world that draws it (an
      Engine's retry delays, reconnect and resend backoff);
    - ``hostname()``, ``getpid()``: who takes grants (holder info), read
      again after a fork;
    - ``getaddrinfo``: host-name resolution (IP literals are never resolved).

    Every field is required: a simulated world that forgot one would read the
    real one silently.
    """

    __slots__ = ("getaddrinfo", "getpid", "hostname", "monotonic", "rng", "time_ns", "token_bytes")

    def __init__(
        self,
        *,
        monotonic: Callable[[], float],
        time_ns: Callable[[], int],
        token_bytes: Callable[[int], bytes],
        rng: random.Random,
        hostname: Callable[[], str],
        getpid: Callable[[], int],
        getaddrinfo: GetAddrInfo,
    ) -> None:
        self.monotonic = monotonic
        self.time_ns = time_ns
        self.token_bytes = token_bytes
        self.rng = rng
        self.hostname = hostname
        self.getpid = getpid
        self.getaddrinfo = getaddrinfo


_REAL_RNG = random.Random()
# A forked child draws jitter of its own, not the parent's sequence.
os.register_at_fork(after_in_child=_REAL_RNG.seed)


def _getaddrinfo(host: str, port: int, **kwargs: Any) -> list[tuple[Any, ...]]:
    # Looked up at each call, not bound at import: an application (or a test)
    # that installs its own resolver on the socket module is heard, as it was
    # before this seam existed. Only construction and reconnections resolve.
    return socket.getaddrinfo(host, port, **kwargs)


REAL = World(
    monotonic=time.monotonic,
    time_ns=time.time_ns,
    token_bytes=secrets.token_bytes,
    rng=_REAL_RNG,
    hostname=socket.gethostname,
    getpid=os.getpid,
    getaddrinfo=_getaddrinfo,
)
"""This process's own clocks, randomness, name and resolver: the default."""

_WORLD: contextvars.ContextVar[World] = contextvars.ContextVar("redlock_async_world", default=REAL)


def current() -> World:
    """The world of the running code: :data:`REAL` unless :func:`context` chose another."""
    return _WORLD.get()


def install(world: World) -> None:
    """Make ``world`` the world of the current context from now on (a process's
    main, before its event loop starts: its tasks inherit it)."""
    _WORLD.set(world)


def context(world: World) -> contextvars.Context:
    """A copy of the current context in which ``world`` is the world.

    Run code in it (``ctx.run(Redlock, urls)``, ``loop.create_task(coro,
    context=ctx)``): a Redlock made there lives in ``world``, and the tasks
    started there see it.
    """
    made = contextvars.copy_context()
    made.run(_WORLD.set, world)
    return made
