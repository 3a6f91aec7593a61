"""Whether a node reached through redis-py has gone silent: then it gets probes only.

A command unanswered for the stall limit is cut (``RedisPyNode._send``), and
redis-py drops its connection with it: it ran nowhere, or the node reads it
after we stopped listening (a paused node, on resume), so a cleanup cut so is
resent (``_resend.py``). A node that answered nothing while such a command
waited is *silent*, as the lean driver has it: until it answers again, its
commands fail at once as never sent, and nothing goes out to it but a probe
(``PING``), one at a time. Otherwise every resend of every cleanup would
hold a pooled connection to it for the stall limit, again and again, for as
long as the keys may live.

The probe is a ``PING``, not one of the commands, for the order of what a
paused node runs when it resumes: it runs what its sockets hold in one pass
of its event loop and writes the replies after that pass. So once the probe
is answered, the acquire an undo follows (written before the node went
silent, its connection dropped since) has run, and the undo, written only
now, runs after it. Sent while the node was silent, the undo could have run
in that same pass, before the acquire - and, its reply read, not been resent.

Not a cluster's client: it reaches many servers, and one paused shard must
not hold back the commands of the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from redis.asyncio import Redis, RedisCluster

from ..._base._errors import NodeError, NodeTimeoutError
from .._node import unsent
from ._kinds import errors

__all__ = ["Silence"]

_log = logging.getLogger("redlock_async.node")


class Silence:
    """One node's answers, counted; while it is silent, what its commands fail
    with, and the probe that ends it."""

    __slots__ = ("_message", "_probe", "_stall", "_watching", "error", "heard", "replies")

    def __init__(self, name: str, stall: float, *, watching: bool) -> None:
        # A server's error reply is an answer too (valkey-py's classes included).
        self.replies = errors("ResponseError")
        self.heard = 0
        self.error: NodeError | None = None  # None: not silent
        self._watching = watching  # False: a cluster's client, never silent
        self._stall = stall
        self._probe: asyncio.Task[None] | None = None
        self._message = (
            f"{name} answered nothing for {stall:g}s; nothing but a probe is sent "
            "to it until it answers one"
        )

    def answered(self) -> None:
        """The node answered a command (a reply, or an error reply)."""
        self.heard += 1
        self.error = None

    def cut(self, heard: int) -> None:
        """A command was cut by the stall limit; ``heard``: ``self.heard`` when it went out.

        Silent only if nothing came back since: a command hung on one broken
        pooled connection of a node that answers the others is no sign.
        """
        if self._watching and self.heard == heard and self.error is None:
            # Never written, those it fails: they cost their vote and nothing
            # else, and a cleanup is resent while what it cleans up may be there.
            self.error = unsent(NodeTimeoutError(self._message))

    def probe(self, client: Redis | RedisCluster) -> None:
        """A command was refused: ask the node whether it answers again (one probe at a time)."""
        if self._probe is None:
            self._probe = asyncio.get_running_loop().create_task(self._ping(client))

    async def _ping(self, client: Redis | RedisCluster) -> None:
        heard = self.heard
        try:
            async with asyncio.timeout(self._stall):
                await client.ping()
        except self.replies:
            self.answered()  # refused (an ACL without +ping), but answered
        except Exception as exc:  # cut at the stall limit, or no connection: still silent
            self.cut(heard)
            _log.debug("redlock_async: probe of a silent node failed: %r", exc)
        else:
            self.answered()
        finally:
            self._probe = None

    def reset(self) -> None:
        """Another loop, or a forked child: its connections have not stalled
        (a probe of the old loop's is abandoned, never touched)."""
        self.error = None
        self._probe = None

    async def aclose(self) -> None:
        """The node is closing: a probe out is not waited for."""
        probe, self._probe = self._probe, None
        if probe is not None:
            probe.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await probe
