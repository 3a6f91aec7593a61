"""One RESP connection of the lean driver: auto-pipelined writes, FIFO replies.

Every command queued during one event-loop iteration, by any task, leaves in
one write (one syscall) per node; replies are parsed by hiredis and matched
to their commands in order. What waits for a reply is a :class:`Sink` (a
fan-out's tally is its own entry on every node, so queueing a command
allocates nothing). At most ``MAX_PENDING`` commands are on the wire
unanswered; more wait here, in order, and go out as replies come in
(backpressure: a command is never failed for the client's own volume). A
connection that leaves every command unanswered for the node's stall limit
is dropped (``silent_since``), failing what waits with it. The connection
knows nothing of scripts or votes: error replies and the loss of the
connection go to its owner, the node.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Protocol, cast

import hiredis

from ..._base._errors import NodeError, NodeResponseError, NodeTimeoutError
from ..._base._observe import NODE, warn
from .._node import Sink

__all__ = ["MAX_PENDING", "Conn", "Owner"]

_log = logging.getLogger("redlock_async.node")

# Commands one connection has written and not yet seen answered, at most.
# More wait, unwritten, in Conn.held and go out as replies come in: a burst
# of 100,000 releases is queued, never failed (failing the excess left 34,465
# keys per node until their ttl, every release() returning without error).
# This bounds what a node that stopped answering holds of ours in its socket
# buffers; what waits here is bounded in time by the stall check, which drops
# the connection of a node silent for the stall limit, failing it all (the
# unwritten commands as unsent: they ran nowhere). Checked once per write
# (see Conn.flush), not per command.
MAX_PENDING = 65_536

# How long the stall check waits for its second look (see Conn._check_stall).
_SECOND_LOOK = 0.001

_ReplyError = hiredis.ReplyError


class Owner(Protocol):
    """What a connection reports to: its node."""

    @property
    def name(self) -> str: ...

    @property
    def index(self) -> int:
        """The node's position among the Redlock's nodes: the index of its outcomes."""
        ...

    def error_reply(self, message: str, entry: Sink) -> None:
        """The server answered ``entry``'s command with an error."""
        ...

    def forget(self, conn: Conn, error: NodeError | None, *, unanswered: bool = False) -> NodeError:
        """Stop using ``conn`` (aborted with ``error``, or lost: None), with
        commands left ``unanswered`` or not; returns what they fail with."""
        ...

    def went_silent(self) -> None:
        """The stall check is dropping the connection: the node answers nothing."""
        ...

    def unsent(self, error: NodeError) -> NodeError:
        """``error``, marked :class:`Unsent`, for a command that was never written."""
        ...


class Conn(asyncio.Protocol):
    """One connection: writes are coalesced per loop iteration, replies matched FIFO."""

    answered = False  # its handshake PING was answered (see Handshake, RespNode.forget)
    alone = True  # the last write carried one command: write the next at once if idle (send)
    error: NodeError | None = None  # why it was aborted, if it was

    def __init__(self, node: Owner, loop: asyncio.AbstractEventLoop) -> None:
        self.node = node
        self.loop = loop
        self.reader = hiredis.Reader()
        self.pending: deque[Sink] = deque()
        self.transport: asyncio.Transport | None = None
        self.out: list[bytes] = []  # queued this loop iteration, written by flush
        # Queued earlier but not yet written: MAX_PENDING were on the wire.
        # The newest entries of pending are these, then out's, in order.
        self.held: deque[bytes] = deque()
        self.busy_since = 0.0  # last reply, or when the oldest unanswered command was queued/sent
        self.suspect = False  # a stall check is waiting for one more look at the socket
        self.closed: asyncio.Future[None] = loop.create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream connection's transport: read and written, never checked.
        # Not isinstance: uvloop's transports (uvicorn[standard] runs apps
        # on uvloop) have asyncio.Transport's methods but not its class.
        self.transport = cast(asyncio.Transport, transport)

    def send(self, payload: bytes, entry: Sink) -> None:
        pending = self.pending
        if not pending:
            self.busy_since = self.loop.time()
            transport = self.transport
            if transport is not None and self.alone:
                # Idle (nothing on the wire, nothing queued) and no company
                # lately: written now. Queued, it would leave a loop pass
                # later, alone anyway - a sequential caller's every command
                # (callgrind: a fifth of the client's instructions per
                # acquire+release). Where writes carry several commands
                # (many tasks), the first of a burst waits for the others.
                pending.append(entry)
                transport.write(payload)
                return
        pending.append(entry)
        out = self.out
        if not out:
            # Auto-pipelining: every command queued during this loop iteration,
            # by any task, leaves in one write (one syscall) per node.
            self.loop.call_soon(self.flush)
        out.append(payload)

    def flush(self) -> None:
        out = self.out
        transport = self.transport
        if transport is None:
            out.clear()  # lost: connection_lost failed them all
            return
        held = self.held
        unwritten = len(out) + len(held)
        on_wire = len(self.pending) - unwritten
        if held or len(out) > MAX_PENDING - on_wire:
            self._write_held(out, held, on_wire)
            return
        if not out:
            return
        if not on_wire:
            # Nothing of ours was on the wire yet: the node's silence starts
            # now, not when the commands were queued - our own loop may have
            # stalled in between, and that is not the node's fault.
            self.busy_since = self.loop.time()
        alone = self.alone = len(out) == 1
        transport.write(out[0] if alone else b"".join(out))
        out.clear()

    def _write_held(self, out: list[bytes], held: deque[bytes], on_wire: int) -> None:
        """Backpressure: write what fits under MAX_PENDING, oldest first; the rest waits.

        Replies make room (``_replies`` calls flush again). Off the hot path:
        only a burst of more than MAX_PENDING commands on one connection gets here.
        """
        held.extend(out)
        out.clear()
        room = min(MAX_PENDING - on_wire, len(held))
        if room <= 0 or self.transport is None:
            return
        if not on_wire:
            self.busy_since = self.loop.time()  # as in flush
        popleft = held.popleft
        self.transport.write(b"".join([popleft() for _ in range(room)]))

    def data_received(self, data: bytes) -> None:
        try:
            self._replies(data)
        except hiredis.ProtocolError:
            # Not a Redis server (an HTTP port, say): one clear error for
            # every command on it, and the node backs off (RespNode.forget),
            # rather than a traceback and a reconnect per command.
            name = self.node.name
            self.abort(
                NodeResponseError(
                    f"{name} does not speak the Redis protocol (is it a Redis server?)"
                )
            )

    def _replies(self, data: bytes) -> None:
        reader = self.reader
        popleft = self.pending.popleft
        node = self.node
        index = node.index
        reader.feed(data)
        gets = reader.gets
        while (reply := gets()) is not False:
            try:
                entry = popleft()
            except IndexError:
                self.abort(NodeResponseError(f"{node.name} sent an unsolicited reply"))
                return
            try:
                if type(reply) is _ReplyError:
                    node.error_reply(str(reply), entry)
                else:
                    entry.settle(index, reply)
            except Exception:  # a bug in a sink must not desynchronise the stream
                _log.exception("redlock_async: handling a reply from %s failed", node.name)
        self.busy_since = self.loop.time()
        if self.held:
            self.flush()  # replies made room on the wire: what waits goes out

    def abort(self, error: NodeError) -> None:
        self.error = error
        self.node.forget(self, error)
        if self.transport is not None:
            self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        # The newest entries: their payloads are in held and out.
        never_written = len(self.held) + len(self.out)
        self.held.clear()
        self.out.clear()
        pending, self.pending = self.pending, deque()
        # Commands unanswered: the server may still run what it had read (a
        # paused node reads it when it resumes), see RespNode.connect.
        error = self.node.forget(self, None, unanswered=bool(pending))
        if exc is None:
            # Closed by the server (EOF): said as the OSError a reset would be.
            exc = ConnectionResetError("the server closed the connection")
        if error.__cause__ is None:
            # The transport's own reason (an OSError: reset, broken pipe), on
            # the node's own error too: commands sent while it backs off get it.
            error.__cause__ = exc
        index = self.node.index
        written = len(pending) - never_written
        never = self.node.unsent(error) if never_written else error
        for position, entry in enumerate(pending):
            entry.settle(index, error if position < written else never)
        if not self.closed.done():
            self.closed.set_result(None)

    def silent_since(self, limit: float) -> float:
        """A command outlived node_timeout: since when has the node been silent?

        That is ``busy_since``. Also drops the connection once it has been
        silent for ``limit`` s (the stall limit).
        """
        if len(self.out) + len(self.held) >= len(self.pending):
            # Nothing of ours has been written yet (the flush is still queued
            # behind other callbacks of a busy loop): the node owes us nothing.
            return self.loop.time()
        if not self.suspect:
            self._check_stall(limit)
        return self.busy_since

    def _check_stall(self, limit: float) -> None:
        loop = self.loop
        if loop.time() - self.busy_since > limit:
            # Look once more after the loop has polled its sockets: if our own
            # loop was blocked, the replies may be sitting there unread. A
            # timer due in a millisecond runs after the next poll's I/O
            # callbacks on every loop; one due now would not on uvloop, which
            # runs it like call_soon, before its poll.
            self.suspect = True
            loop.call_later(_SECOND_LOOK, self._confirm_stall, self.busy_since)

    def _confirm_stall(self, since: float) -> None:
        self.suspect = False
        if self.transport is None or self.error is not None:
            return  # the connection is gone already
        if not self.pending or self.busy_since != since:
            return  # replies came
        silent = self.loop.time() - since
        name = self.node.name
        message = f"{name} answered nothing for {silent:.2f}s; dropping its connection"
        warn(NODE, "stalled", name, message, node=name, outcome="stalled", elapsed=silent)
        self.node.went_silent()
        self.abort(NodeTimeoutError(f"{name} answered nothing for {silent:.2f}s"))

    async def aclose(self, error: NodeError, stall: float) -> None:
        """Close gracefully: what is queued goes out, and its replies are waited
        for while the node answers (up to ``stall`` s of silence); aborted with
        ``error`` if the close itself takes over 1 s."""
        if self.transport is None:
            return
        # Fire-and-forget cleanups queued this iteration go out first, and
        # what waits for room too: the bound was for a connection kept open.
        held, out = self.held, self.out
        held.extend(out)
        out.clear()
        if held:
            if len(held) == len(self.pending):
                self.busy_since = self.loop.time()  # as in flush
            self.transport.write(b"".join(held))
            held.clear()
        # Replies are not read once closing starts, and a server answering
        # into a closed socket may drop what it has not read yet: wait for
        # them while the node answers (aclose() drained the fan-outs, but a
        # node's votes time out after node_timeout; it gets the stall limit
        # here). Polled: closing is rare.
        started = self.loop.time()
        while self.pending and self.transport is not None and self.error is None:
            if self.loop.time() - max(self.busy_since, started) > stall:
                break
            await asyncio.sleep(0.005)
        if self.transport is None:
            return
        self.transport.close()
        try:
            async with asyncio.timeout(1.0):
                await asyncio.shield(self.closed)
        except TimeoutError:
            self.abort(error)
