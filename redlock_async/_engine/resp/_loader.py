"""Which scripts a lean connection has loaded; loading the others lazily.

A new connection loads no script up front (eleven ``SCRIPT LOAD`` in its
handshake made the first grant of a process wait for all of them). A script
is loaded on a connection right before its first ``EVALSHA`` there, in the
same write: Redis runs one connection's commands in order, so the
``EVALSHA`` finds it. The scripts *in use* (those the Redlock's fan-outs have
sent so far: the acquire and the release, for most) are loaded on every new
connection, so the hot path can send ``EVALSHA`` without asking whether it
was loaded; a script's first fan-out loads it everywhere first
(``RespNode.run_all``).

A ``NOSCRIPT`` reply means the server's cache was emptied (``SCRIPT FLUSH``)
before that command ran: the loads sent after it still hold, the others are
sent again (``flushed``).
"""

from __future__ import annotations

import functools
import logging

from ..._base._errors import NodeResponseError
from .._node import Command, Reply, Script
from ._conn import Conn
from ._encode import pack

__all__ = ["ScriptLoads"]

_log = logging.getLogger("redlock_async.node")


@functools.cache
def _load_command(script: Script) -> bytes:
    return pack((b"SCRIPT", b"LOAD", script.source))


class _Load:
    """The entry of one ``SCRIPT LOAD``: it is forgotten once answered."""

    __slots__ = ("loads", "sha")
    command: Command | None = None  # not a script call: never resent

    def __init__(self, loads: ScriptLoads, sha: bytes) -> None:
        self.loads = loads
        self.sha = sha

    def settle(self, index: int, reply: Reply) -> None:
        self.loads.pending.discard(self)
        if isinstance(reply, NodeResponseError):
            # Refused (an ACL without SCRIPT?): the EVALSHA behind it answers
            # NOSCRIPT, which fails its vote or resends it as EVAL.
            _log.debug("redlock_async: SCRIPT LOAD failed on %s: %s", self.loads.name, reply)


class ScriptLoads:
    """The scripts of one node's connection: loaded, being loaded, in use."""

    __slots__ = ("loaded", "name", "pending", "using")

    def __init__(self, name: str) -> None:
        self.name = name
        # The scripts in use, by SHA1: one dict shared by the nodes of one
        # Redlock once a fan-out has run (RespNode.start_using).
        self.using: dict[bytes, Script] = {}
        # On the current connection: loaded, or a SCRIPT LOAD queued ahead
        # of anything sent from now on.
        self.loaded: set[bytes] = set()
        self.pending: set[_Load] = set()  # SCRIPT LOADs not answered yet

    def connected(self, conn: Conn) -> None:
        """A new connection (after its handshake): load the scripts in use."""
        self.loaded = set()
        self.pending = set()
        for script in self.using.values():
            self.load(conn, script)

    def ensure(self, conn: Conn, script: Script) -> None:
        """Make ``script`` loaded on ``conn`` before whatever is sent next."""
        if script.sha not in self.loaded:
            self.load(conn, script)

    def load(self, conn: Conn, script: Script) -> None:
        self.loaded.add(script.sha)
        entry = _Load(self, script.sha)
        self.pending.add(entry)
        conn.send(_load_command(script), entry)

    def noscript(self, conn: Conn | None, command: Command) -> bytes | None:
        """``command`` was answered NOSCRIPT; what to resend in its place, if anything.

        The script cache was emptied (SCRIPT FLUSH) before it ran. The loads
        still unanswered were sent after it (replies come in order) and hold;
        the scripts in use are loaded again, ahead of what is sent from now
        on. A resent command would run after everything queued behind it on
        this connection, maybe its own undo: a granting script is therefore
        never resent (None) - its vote fails, nothing was written, and the
        next attempt finds the script. The others (compare-and-delete,
        compare-and-expire, leave) are safe in any order: resent once as EVAL.
        """
        if conn is not None:
            self.loaded = {entry.sha for entry in self.pending}
            for script in self.using.values():
                self.ensure(conn, script)
        if command.script.grants:
            return None
        keys = command.keys
        return pack((b"EVAL", command.script.source, len(keys), *keys, *command.args))
