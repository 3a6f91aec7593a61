"""What a new lean connection sends first: AUTH, SELECT, PING, INFO.

No script is loaded here: each is loaded in the write of its first EVALSHA
(``_loader.py``), so a process's first grant waits for one script, not all.
The PING's answer tells the node the connection works (its reconnect backoff
resets). ``INFO server`` says who the server is: its run id and uptime go to
the node's restart watch, which the engine consults for every granting vote
(``_restarts.py``). A refused INFO (an ACL without ``+info``) is reported as
unknown - restarts go unseen, so the node's yes votes stop counting - and
asked again every ``INFO_RETRY`` seconds while the connection lives.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable

from ..._base._address import Address
from ..._base._errors import NodeConnectionError, NodeError, NodeResponseError
from ..._base._observe import NODE, warn
from .._node import Command, Reply
from .._restarts import Restarts
from ._conn import Conn
from ._encode import pack

__all__ = ["INFO_RETRY", "Handshake", "observe_info"]

_log = logging.getLogger("redlock_async.node")

# Seconds between INFO retries on a connection whose INFO was refused.
INFO_RETRY = 1.0

# How a server without a password answers AUTH (Redis 6 and later).
_NO_PASSWORD = "without any password configured"

_RUN_ID = re.compile(rb"run_id:([0-9a-f]+)")
_UPTIME = re.compile(rb"uptime_in_seconds:(\d+)")


def observe_info(restarts: Restarts, info: bytes, now: float) -> None:
    """The raw ``INFO server`` text of a new connection, for the node's restart watch."""
    run_id = _RUN_ID.search(info)
    uptime = _UPTIME.search(info)
    if run_id is None or uptime is None:
        restarts.unknown("its INFO server reply has no run_id or uptime_in_seconds")
        return
    restarts.observe_fields(run_id.group(1), float(uptime.group(1)), now)


class _Step:
    """The entry of one handshake command."""

    __slots__ = ("handshake", "step")
    command: Command | None = None

    def __init__(self, handshake: Handshake, step: int) -> None:
        self.handshake = handshake
        self.step = step

    def settle(self, index: int, reply: Reply) -> None:
        self.handshake.settle(self.step, reply)


class Handshake:
    """The first commands of one connection, and what their replies mean."""

    AUTH, SELECT, PING, INFO = range(4)

    def __init__(
        self, conn: Conn, name: str, restarts: Restarts, on_answer: Callable[[], None]
    ) -> None:
        self.conn = conn
        self.name = name
        self.restarts = restarts
        self.on_answer = on_answer  # the server answered the PING: a healthy connection
        # Done once the server answered the PING (or the connection failed).
        self.pinged: asyncio.Future[None] = conn.loop.create_future()

    def start(self, address: Address) -> None:
        """Queue the handshake on the connection, ahead of any command."""
        auth = address.auth_command()
        if auth is not None:
            self._send(pack(auth), self.AUTH)
        if address.db:
            self._send(pack((b"SELECT", address.db)), self.SELECT)
        self._send(pack((b"PING",)), self.PING)
        # Who is this server? A new run_id means it restarted (maybe empty).
        self._send(pack((b"INFO", b"server")), self.INFO)

    def _send(self, payload: bytes, step: int) -> None:
        self.conn.send(payload, _Step(self, step))

    def settle(self, step: int, reply: Reply) -> None:
        conn = self.conn
        if (
            step == self.AUTH
            and isinstance(reply, NodeResponseError)
            and _NO_PASSWORD in str(reply)
        ):
            # A password for a server that has none: the connection works
            # (as redis-cli goes on after "AUTH failed"), so the node votes;
            # the operator is told (rate-limited).
            message = f"{self.name} has no password, but its URL gives one ({reply})"
            warn(NODE, "no password", self.name, message, node=self.name, outcome="auth")
        elif step in (self.AUTH, self.SELECT) and isinstance(reply, NodeResponseError):
            what = "AUTH" if step == self.AUTH else "SELECT"
            message = f"{what} failed on {self.name}: {reply}"
            warn(NODE, what, self.name, message, node=self.name, outcome=what.lower())
            conn.abort(NodeConnectionError(f"{what} failed on {self.name}: {reply}"))
        elif step == self.PING:
            if not isinstance(reply, NodeError):
                self.on_answer()
                conn.answered = True
            if not self.pinged.done():
                self.pinged.set_result(None)
        elif step == self.INFO and isinstance(reply, bytes):
            observe_info(self.restarts, reply, conn.loop.time())
        elif step == self.INFO and isinstance(reply, NodeResponseError):
            # Refused (an ACL without +info): restarts go unseen, so fail closed.
            # Reported before any reply queued behind it is judged. Asked again
            # while the connection lives: a fixed ACL (or a BUSY server done)
            # makes the node count again without waiting for a reconnect.
            self.restarts.unknown(reply)
            conn.loop.call_later(INFO_RETRY, self._ask_info)

    def _ask_info(self) -> None:
        conn = self.conn
        if conn.transport is not None and conn.error is None:  # still the node's connection
            self._send(pack((b"INFO", b"server")), self.INFO)
