"""Cleanups resent to nodes whose connection failed under them.

A release whose connection broke (a killed connection, a node that
restarted, a stall that dropped it) may never have run, and its key would
then block everyone for a whole ttl. Releases are compare-and-delete, safe
to repeat: they are sent again, with backoff, until the key would have
expired anyway (``tally.resend_until``). The same goes for undos of failed
attempts, and for every driver: each resend is a fresh script call, so a
node that lost its script cache meanwhile gets ``EVALSHA``, then ``EVAL``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

from .._base._errors import NodeConnectionError, NodeError, NodeTimeoutError
from ._backoff import Backoff
from ._node import Command, Node, Reply, Unsent
from ._settled import Settled
from ._tally import SKIPPED, Tally

__all__ = ["RESEND_FIRST", "RESEND_MAX", "Resend", "Resending", "failed_with_connection", "resend"]

_log = logging.getLogger("redlock_async.node")


class Resending(Protocol):
    """The quorum, as resends see it: whether it closed, its pending timers, its
    clock (the engine's: ``resend_until`` is on it)."""

    closed: bool
    resends: set[asyncio.TimerHandle]
    clock: Callable[[], float]


# Per-node resends of a cleanup: first after 50 ms, doubling up to 1 s.
RESEND_FIRST = 0.05
RESEND_MAX = 1.0


class Resend:
    """Sends a cleanup (a compare-and-delete: safe to repeat) to one node again.

    A release whose connection broke (a killed connection, a node that
    restarted, a stall that dropped it) may never have run, and its key
    would then block everyone for a whole ttl. Resent after a backoff, on a
    new connection, until ``until``; its outcome is only logged.
    """

    __slots__ = ("backoff", "command", "group", "handle", "index", "node", "span", "until")

    def __init__(
        self, group: Resending, node: Node, index: int, command: Command, until: float
    ) -> None:
        self.group = group
        self.node = node
        self.index = index
        self.command = command
        self.until = until
        # How long a key it cleans up may outlive the command it follows,
        # counted again from each resend the node could not even be sent.
        self.span = max(until - group.clock(), 0.0)
        self.backoff = Backoff(RESEND_FIRST, RESEND_MAX)
        self.handle: asyncio.TimerHandle | None = None

    def schedule(self) -> None:
        group = self.group
        if group.closed:
            return  # aclose(): what was not delivered by now expires with its ttl
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # the loop is gone: the key expires with its ttl
        delay = self.backoff.fail()
        if group.clock() + delay < self.until:
            # Kept by the quorum, so that closing cancels it: a resend firing
            # after aclose() would open a new connection on a closing loop.
            self.handle = loop.call_later(delay, self._fire)
            group.resends.add(self.handle)

    def _fire(self) -> None:
        group = self.group
        if self.handle is not None:
            group.resends.discard(self.handle)
        if not group.closed:
            self.node.run(self.command, self)

    def settle(self, index: int, reply: Reply) -> None:
        # Once resending, a resend that could not even be written (the node
        # still down, or silent behind a backlog) does not end the chain: the
        # original may still run, and its key then lives a ttl from then, so
        # the chain's end moves with it (past the next try, at most
        # RESEND_MAX away).
        if failed_with_connection(reply):
            if isinstance(reply, Unsent):
                self.until = max(self.until, self.group.clock() + self.span + RESEND_MAX)
            self.schedule()
        else:
            _log.debug("redlock_async: %s resent to %s: %r", self.command, self.node.name, reply)


def failed_with_connection(reply: Reply) -> bool:
    """Did the command fail with its connection (so it may not have run)?

    A timeout counts, whatever the driver: none reports one but for a
    command whose connection it dropped. The lean driver's stall check drops
    a silent node's connection. redis-py and valkey-py drop the connection
    of a read that timed out or was cancelled - by the client's
    ``socket_timeout`` or by the driver's stall bound (``RedisPyNode._send``)
    - so the command is running nowhere: it was never written, or the node
    read it after we stopped listening. A paused node then runs it on
    resume, or answers ``NOSCRIPT`` to a closed connection, and the
    ``EVAL`` fallback never runs: only a resend gets it there.
    """
    return isinstance(reply, NodeConnectionError | NodeTimeoutError)


def resend(group: Resending, tally: Tally, index: int, reply: NodeError) -> None:
    """Node ``index`` failed ``tally``'s cleanup: resend it while that may help."""
    node = tally.nodes[index]
    # A command never written (node down, backing off, silent) needs no
    # resend when what it cleans up never ran there either: most of them,
    # while a node is out (an acquire is not written to it either). But
    # the acquire may have been written before the node went down - on the
    # connection the stall check dropped, or answered just before - and a
    # paused node runs it when it resumes: then the release must reach it.
    if isinstance(reply, Unsent) and not _may_have_run(tally.after, index):
        return
    if tally.command is not None and failed_with_connection(reply):
        Resend(group, node, index, tally.command, tally.resend_until).schedule()


def _may_have_run(after: Tally | Settled | None, index: int) -> bool:
    """May the command of ``after`` (the fan-out a cleanup follows, or what a
    held grant keeps of it) have run on node ``index``? As ``Engine.undo``
    judges: unless it was refused there or never sent (a ``Settled`` 0)."""
    if after is None:
        return False
    reply = after.replies[index]
    if type(reply) is int and reply == 0:
        return False  # refused: it wrote nothing
    return not isinstance(reply, Unsent) and reply is not SKIPPED
