"""Whether a node reached through redis-py has gone silent: then it gets probes only.

A command unanswered for the stall limit is cut (``RedisPyNode._send``), and
redis-py drops its connection with it: it ran nowhere, or the node reads it
after we stopped listening (a paused node, on resume), so a cleanup cut so is
resent (``_resend.py``). A node that answered nothing while such a command
waited is *silent*, as the lean driver has it: until it answers again, one
command at a time goes out to it (a probe), the others fail at once as never
sent. Otherwise every resend of every cleanup would hold a pooled connection
to it for the stall limit, again and again, for as long as the keys may live.

Not a cluster's client: it reaches many servers, and one paused shard must
not hold back the commands of the others.
"""

from __future__ import annotations

from ..._base._errors import NodeError, NodeTimeoutError
from .._node import unsent
from ._kinds import errors

__all__ = ["Silence"]


class Silence:
    """One node's answers, counted; while it is silent, what its commands fail with."""

    __slots__ = ("_message", "_watching", "error", "heard", "replies")

    def __init__(self, name: str, stall: float, *, watching: bool) -> None:
        # A server's error reply is an answer too (valkey-py's classes included).
        self.replies = errors("ResponseError")
        self.heard = 0
        self.error: NodeError | None = None  # None: not silent
        self._watching = watching  # False: a cluster's client, never silent
        self._message = (
            f"{name} answered nothing for {stall:g}s; "
            "until it answers, one command at a time is sent to it"
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

    def reset(self) -> None:
        """Another loop, or a forked child: its connections have not stalled."""
        self.error = None
