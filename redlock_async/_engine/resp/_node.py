"""The lean driver: one auto-pipelined RESP connection per node, parsed by hiredis.

Why not redis-py here: its command path costs about three times a bare
protocol's, and a lock's hot path is nothing but tiny scripts. One connection
per node also gives a property the algorithm wants: commands run on the server
in the order we send them, so a release queued behind an in-flight acquire
always runs after it, and cleanup needs no waiting.

Failure handling, in short:

* a command that outlives ``node_timeout`` only costs its vote (the quorum
  layer decides that); the connection stays, and the late reply is still
  delivered, so callers can clean up what it did;
* a connection that answers nothing for ``stall_limit`` is dropped (a
  blackholed or frozen node), failing everything queued on it, so nothing
  piles up while the node stays dead;
* reconnection is lazy and backs off exponentially: while a node is down,
  commands fail at once instead of waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections import deque
from collections.abc import Callable, Sequence
from typing import cast

import hiredis

from ..._address import Address, connect
from ..._errors import NodeConnectionError, NodeError, NodeResponseError, NodeTimeoutError
from .._node import Command, Reply, Script, Sink, stall_limit, unsent
from .._restarts import Restarts

__all__ = ["RespNode"]

_log = logging.getLogger("redlock_async")

# Commands one node may have queued (awaiting a reply or a connection) before
# new ones fail: a bound on memory if replies stop coming. Checked once per
# write (see _Conn._flush), not per command.
MAX_PENDING = 65_536

# Seconds between INFO retries on a connection whose INFO was refused.
INFO_RETRY = 1.0


# What waits for one reply (see Sink): a fan-out's tally is its own entry on
# every node, so queueing a command allocates nothing.
_Entry = Sink

# How long the stall check waits for its second look (see check_stall).
_SECOND_LOOK = 0.001

_ReplyError = hiredis.ReplyError
# hiredis's stub types the argument as a 1-tuple; any tuple of str/bytes/int works.
_pack: Callable[[tuple[object, ...]], bytes] = hiredis.pack_command  # type: ignore[assignment]


# RESP encoding of EVALSHA. hiredis.pack_command costs ~650 ns per command
# (it formats every length with sprintf), a tenth of a grant's CPU at 50
# tasks. A lock sends the same script to the same keys over and over, so the
# encoded head (count, EVALSHA, sha, numkeys, keys) is cached and only the
# arguments are encoded each time; a head is built by hand (not by hiredis),
# so a name seen once costs no more than pack_command. Bounded: cleared
# when full (thousands of names renewing just rebuild their heads).
_HEADS: dict[tuple[bytes, int, Sequence[bytes]], bytes] = {}  # keys: tuples only
_INTS: dict[int, bytes] = {}
_CACHE_LIMIT = 4096
_LENGTHS = [b"$%d\r\n" % n for n in range(256)]


def _length(n: int) -> bytes:
    return _LENGTHS[n] if n < 256 else b"$%d\r\n" % n


def _evalsha(command: Command) -> bytes:
    keys = command.keys
    args = command.args
    spec = (command.script.sha, len(args), keys)
    head = _HEADS.get(spec) if type(keys) is tuple else None
    if head is None:
        head = _head(spec)
        if head is None:
            return _by_hiredis(command)
    out = [head]
    for arg in args:
        if type(arg) is bytes:
            value = arg
        elif type(arg) is int:
            value = _INTS.get(arg) or _int(arg)
        else:  # anything else (str, ...): hiredis's rules, for the whole command
            return _by_hiredis(command)
        n = len(value)
        out += (_LENGTHS[n] if n < 256 else b"$%d\r\n" % n, value, b"\r\n")  # _length, inlined
    return b"".join(out)


def _by_hiredis(command: Command) -> bytes:
    keys = command.keys
    return _pack((b"EVALSHA", command.script.sha, len(keys), *keys, *command.args))


def _head(spec: tuple[bytes, int, Sequence[bytes]]) -> bytes | None:
    """The encoded head for ``spec``, cached; None when a key is not bytes."""
    sha, argc, keys = spec
    numkeys = b"%d" % len(keys)
    out = [
        b"*%d\r\n$7\r\nEVALSHA\r\n" % (3 + len(keys) + argc),
        _length(len(sha)),
        sha,
        b"\r\n",
        _length(len(numkeys)),
        numkeys,
        b"\r\n",
    ]
    for key in keys:
        if type(key) is not bytes:
            return None
        out += (_length(len(key)), key, b"\r\n")
    head = b"".join(out)
    if type(keys) is tuple:
        if len(_HEADS) >= _CACHE_LIMIT:
            _HEADS.clear()
        _HEADS[spec] = head
    return head


def _int(value: int) -> bytes:
    encoded = b"%d" % value
    if len(_INTS) >= _CACHE_LIMIT:
        _INTS.clear()
    _INTS[value] = encoded
    return encoded


class _Conn(asyncio.Protocol):
    """One connection: writes are coalesced per loop iteration, replies matched FIFO."""

    answered = False  # its handshake PING was answered (see _Handshake, RespNode._forget)
    error: NodeError | None = None  # why it was aborted, if it was

    def __init__(self, node: RespNode, loop: asyncio.AbstractEventLoop) -> None:
        self.node = node
        self.loop = loop
        self.reader = hiredis.Reader()
        self.pending: deque[_Entry] = deque()
        self.transport: asyncio.Transport | None = None
        self.out: list[bytes] = []
        self.busy_since = 0.0  # last reply, or when the oldest unanswered command was queued/sent
        self.suspect = False  # a stall check is waiting for one more look at the socket
        self.reloading = 0  # SCRIPT LOADs in flight after a NOSCRIPT (see RespNode._reload)
        self.closed: asyncio.Future[None] = loop.create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream connection's transport: read and written, never checked.
        # Not isinstance: uvloop's transports (uvicorn[standard] runs apps
        # on uvloop) have asyncio.Transport's methods but not its class.
        self.transport = cast(asyncio.Transport, transport)

    def send(self, payload: bytes, entry: _Entry) -> None:
        pending = self.pending
        if not pending:
            self.busy_since = self.loop.time()
        pending.append(entry)
        out = self.out
        if not out:
            # Auto-pipelining: every command queued during this loop iteration,
            # by any task, leaves in one write (one syscall) per node.
            self.loop.call_soon(self._flush)
        out.append(payload)

    def _flush(self) -> None:
        out = self.out
        if len(self.pending) > MAX_PENDING:
            self._shed(len(self.pending) - MAX_PENDING)
        if self.transport is not None and out:
            if len(out) == len(self.pending):
                # Nothing of ours was on the wire yet: the node's silence starts
                # now, not when the commands were queued - our own loop may have
                # stalled in between, and that is not the node's fault.
                self.busy_since = self.loop.time()
            self.transport.write(out[0] if len(out) == 1 else b"".join(out))
        out.clear()

    def _shed(self, excess: int) -> None:
        """Fail the newest unsent commands beyond MAX_PENDING (a node that stopped answering).

        Only unsent ones can be over the bound (what was written stayed within
        it), so each has its payload at the end of ``out``.
        """
        error = unsent(NodeConnectionError(f"{self.node.name}: too many commands in flight"))
        index = self.node.index
        for _ in range(min(excess, len(self.out))):
            self.out.pop()
            self.pending.pop().settle(index, error)

    def data_received(self, data: bytes) -> None:
        try:
            self._replies(data)
        except hiredis.ProtocolError:
            # Not a Redis server (an HTTP port, say): one clear error for
            # every command on it, and the node backs off (_forget), rather
            # than a traceback and a reconnect per command.
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
        restarts = node.restarts
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
                    node._error_reply(str(reply), entry)
                elif restarts.until and _grants(entry):
                    entry.settle(index, restarts.vote(reply, self.loop.time()))
                else:
                    entry.settle(index, reply)
            except Exception:  # a bug in a sink must not desynchronise the stream
                _log.exception("redlock_async: handling a reply from %s failed", node.name)
        self.busy_since = self.loop.time()

    def abort(self, error: NodeError) -> None:
        self.error = error
        self.node._forget(self, error)
        if self.transport is not None:
            self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        never_written = len(self.out)  # the newest entries: their payloads are in out
        self.out.clear()
        error = self.node._forget(self, None)
        pending, self.pending = self.pending, deque()
        if pending:
            # The server may still run what it had read (a paused node reads
            # it when it resumes): see RespNode._connect.
            self.node._tainted = True
        index = self.node.index
        written = len(pending) - never_written
        for position, entry in enumerate(pending):
            entry.settle(index, error if position < written else unsent(error))
        if not self.closed.done():
            self.closed.set_result(None)


def _grants(entry: _Entry) -> bool:
    """Is this the reply of a granting script (a vote a restart quarantines)?"""
    command = entry.command
    return command is not None and command.script.grants


class _Fallback:
    """The entry of a command resent as EVAL: reports to the original entry.

    Never a granting script's (see RespNode._error_reply), so never a vote
    that a restart quarantine would have to judge.
    """

    __slots__ = ("entry",)
    command = None  # no second fallback

    def __init__(self, entry: _Entry) -> None:
        self.entry = entry

    def settle(self, index: int, reply: Reply) -> None:
        self.entry.settle(index, reply)


class _Reloaded:
    """The entry of one SCRIPT LOAD sent after a NOSCRIPT."""

    __slots__ = ("conn",)
    command = None

    def __init__(self, conn: _Conn) -> None:
        self.conn = conn

    def settle(self, index: int, reply: Reply) -> None:
        self.conn.reloading -= 1


class _Step:
    """The entry of one handshake command."""

    __slots__ = ("handshake", "step")
    command = None

    def __init__(self, handshake: _Handshake, step: int) -> None:
        self.handshake = handshake
        self.step = step

    def settle(self, index: int, reply: Reply) -> None:
        self.handshake.settle(self.step, reply)


class _Handshake:
    """What the commands a new connection starts with report to."""

    AUTH, SELECT, SCRIPT, PING, INFO = range(5)

    def __init__(self, node: RespNode, conn: _Conn) -> None:
        self.node = node
        self.conn = conn
        # Done once the server answered the PING (or the connection failed).
        self.pinged: asyncio.Future[None] = conn.loop.create_future()

    def send(self, payload: bytes, step: int) -> None:
        self.conn.send(payload, _Step(self, step))

    def settle(self, step: int, reply: Reply) -> None:
        if step in (self.AUTH, self.SELECT) and isinstance(reply, NodeResponseError):
            what = "AUTH" if step == self.AUTH else "SELECT"
            _log.warning("redlock_async: %s failed on %s: %s", what, self.node.name, reply)
            self.conn.abort(NodeConnectionError(f"{what} failed on {self.node.name}: {reply}"))
        elif step == self.SCRIPT and isinstance(reply, NodeError):
            _log.debug("redlock_async: SCRIPT LOAD failed on %s: %s", self.node.name, reply)
        elif step == self.PING:
            if not isinstance(reply, NodeError):
                self.node._failures = 0  # the node answers: a healthy connection
                self.conn.answered = True
            if not self.pinged.done():
                self.pinged.set_result(None)
        elif step == self.INFO and isinstance(reply, bytes):
            self.node._observe(reply)
        elif step == self.INFO and isinstance(reply, NodeResponseError):
            # Refused (an ACL without +info): restarts go unseen, so fail closed.
            # Settled before any reply queued behind it is judged. Asked again
            # while the connection lives: a fixed ACL (or a BUSY server done)
            # makes the node count again without waiting for a reconnect.
            self.node.restarts.unknown(reply)
            self.conn.loop.call_later(INFO_RETRY, self._ask_info)

    def _ask_info(self) -> None:
        if self.node._conn is self.conn:
            self.send(_pack((b"INFO", b"server")), self.INFO)


class RespNode:
    """A Redis node reached over one RESP connection (``redis://``, ``unix://``)."""

    ordered = True

    def __init__(
        self,
        address: Address,
        *,
        node_timeout: float,
        scripts: Sequence[Script],
        restarts: Restarts,
    ) -> None:
        self._address = address
        self.restarts = restarts
        self.index = 0  # position among the Redlock's nodes (bind)
        self._stall = stall_limit(node_timeout)
        self._scripts = tuple(scripts)
        self._conn: _Conn | None = None
        self._connecting: asyncio.Task[None] | None = None
        self._waiting: list[tuple[bytes, _Entry]] = []
        self._failures = 0  # consecutive connections that never answered
        self._retry_at = 0.0
        self._last_error: NodeError = NodeConnectionError(f"{address.display} is not connected")
        self._closed = False
        # The last connection died with commands unanswered (see _connect).
        self._tainted = False

    @property
    def name(self) -> str:
        return self._address.display

    @property
    def wake_source(self) -> Address | None:
        return self._address

    def __repr__(self) -> str:
        return f"RespNode({self._address.display!r})"

    def bind(self, index: int) -> None:
        self.index = index

    def run(self, command: Command, sink: _Entry) -> None:
        """Queue ``command``; ``sink`` is the fan-out's tally (its ``command``)."""
        payload = command.packed
        if payload is None:
            payload = command.packed = _evalsha(command)
        conn = self._conn
        if conn is not None:
            conn.send(payload, sink)
        else:
            self._send(payload, sink)

    @staticmethod
    def run_all(nodes: Sequence[RespNode], command: Command, sink: _Entry) -> None:
        """``run`` on every node, in one call: the hot path of every fan-out.

        The per-node work is inlined here (no call per node): at 50 tasks on
        5 nodes this loop body runs a quarter of a million times a second.
        """
        payload = command.packed
        if payload is None:
            payload = command.packed = _evalsha(command)
        for node in nodes:
            conn = node._conn
            if conn is not None:
                # _Conn.send, minus busy_since: _flush sets that when the
                # node's queue was empty, which is all the stall check needs.
                conn.pending.append(sink)
                out = conn.out
                if not out:
                    conn.loop.call_soon(conn._flush)
                out.append(payload)
            else:
                node._send(payload, sink)

    def _error_reply(self, message: str, entry: _Entry) -> None:
        command = entry.command
        if command is not None and message.startswith("NOSCRIPT"):
            # Scripts are loaded on connect, so this only follows a SCRIPT
            # FLUSH. A resent command runs after everything queued behind it
            # on this connection, maybe its own undo: a granting script is
            # therefore never resent - its vote fails, nothing was written,
            # and the scripts are loaded again for the next attempt. The
            # others (compare-and-delete, compare-and-expire, leave) are safe
            # in any order: resent once as EVAL.
            if command.script.grants:
                self._reload()
                entry.settle(
                    self.index,
                    NodeResponseError(
                        f"NOSCRIPT on {self.name}: its script cache was flushed; "
                        "scripts are loaded again for the next attempt"
                    ),
                )
                return
            keys = command.keys
            payload = _pack((b"EVAL", command.script.source, len(keys), *keys, *command.args))
            self._send(payload, _Fallback(entry))
            return
        entry.settle(self.index, NodeResponseError(message))

    def _reload(self) -> None:
        """SCRIPT LOAD every script again (once per flush seen, not per NOSCRIPT)."""
        conn = self._conn
        if conn is None or conn.reloading:
            return
        conn.reloading = len(self._scripts)
        for script in self._scripts:
            conn.send(_pack((b"SCRIPT", b"LOAD", script.source)), _Reloaded(conn))

    def _send(self, payload: bytes, entry: _Entry) -> None:
        conn = self._conn
        if conn is not None:
            conn.send(payload, entry)  # bounded when written (_Conn._flush)
            return
        loop = asyncio.get_running_loop()
        error: NodeError
        if self._closed:
            error = NodeConnectionError(f"{self.name}: the Redlock is closed")
        elif self._connecting is None and loop.time() < self._retry_at:
            error = self._last_error  # down and backing off: fail now, don't queue
        elif len(self._waiting) >= MAX_PENDING:
            error = NodeConnectionError(f"{self.name}: too many commands waiting to connect")
        else:
            if self._connecting is None:
                self._connecting = loop.create_task(self._connect(loop))
            self._waiting.append((payload, entry))
            return
        # Outcomes always arrive later, never inside the caller's send loop.
        loop.call_soon(entry.settle, self.index, unsent(error))

    async def _connect(self, loop: asyncio.AbstractEventLoop) -> None:
        # While this runs, commands wait in _waiting (_send sees _connecting).
        try:
            try:
                conn = await connect(self._address, lambda: _Conn(self, loop), self._stall)
            except (OSError, TimeoutError) as exc:
                reason = "timed out" if isinstance(exc, TimeoutError) else exc.strerror or str(exc)
                self._backoff(loop, NodeConnectionError(f"cannot connect to {self.name}: {reason}"))
                self._fail_waiting(self._last_error)
                return
            if self._closed:
                conn.abort(NodeConnectionError(f"{self.name}: the Redlock is closed"))
                self._fail_waiting(self._last_error)
                return
            handshake = self._handshake(conn)
            if self._tainted:
                try:
                    caught_up = await self._caught_up(conn, handshake, loop)
                except asyncio.CancelledError:  # closing: this connection is nobody's
                    conn.abort(NodeConnectionError(f"{self.name}: the Redlock is closed"))
                    raise
                if not caught_up:
                    return
        finally:
            self._connecting = None
        self._conn = conn
        waiting, self._waiting = self._waiting, []
        for payload, entry in waiting:
            conn.send(payload, entry)

    async def _caught_up(
        self, conn: _Conn, handshake: _Handshake, loop: asyncio.AbstractEventLoop
    ) -> bool:
        """Hold new commands until the server answers on ``conn``.

        The last connection died with commands unanswered, and the server may
        still run them: a paused node reads them when it resumes. Cleanups
        (resent releases) must run after them, so nothing but the handshake
        goes out until the server has answered it - by then it has read the
        old connection's commands too, in the same pass of its event loop.
        """
        try:
            async with asyncio.timeout(self._stall):
                await asyncio.shield(handshake.pinged)
        except TimeoutError:
            conn.abort(NodeTimeoutError(f"{self.name} answered nothing after reconnecting"))
        if not conn.answered or conn.transport is None or conn.error is not None:
            error = conn.error or NodeConnectionError(f"connection to {self.name} lost")
            if conn.transport is not None:
                conn.abort(error)
            self._backoff(loop, error)
            self._fail_waiting(self._last_error)
            return False
        self._tainted = False
        return True

    def _handshake(self, conn: _Conn) -> _Handshake:
        address = self._address
        sink = _Handshake(self, conn)
        if address.password is not None:
            auth: tuple[object, ...] = (b"AUTH", address.password)
            if address.username is not None:
                auth = (b"AUTH", address.username, address.password)
            sink.send(_pack(auth), sink.AUTH)
        if address.db:
            sink.send(_pack((b"SELECT", address.db)), sink.SELECT)
        for script in self._scripts:
            sink.send(_pack((b"SCRIPT", b"LOAD", script.source)), sink.SCRIPT)
        sink.send(_pack((b"PING",)), sink.PING)
        # Who is this server? A new run_id means it restarted (maybe empty).
        sink.send(_pack((b"INFO", b"server")), sink.INFO)
        return sink

    def _backoff(self, loop: asyncio.AbstractEventLoop, error: NodeError) -> None:
        self._failures += 1
        self._last_error = error
        delay = min(2.0, 0.05 * 2 ** (self._failures - 1)) * random.uniform(0.5, 1.0)
        self._retry_at = loop.time() + delay

    def _fail_waiting(self, error: NodeError) -> None:
        waiting, self._waiting = self._waiting, []
        if waiting:
            error = unsent(error)  # they never reached a connection
        for _, entry in waiting:
            entry.settle(self.index, error)

    def _forget(self, conn: _Conn, error: NodeError | None) -> NodeError:
        """Stop using ``conn``; returns the error its pending commands fail with."""
        if self._conn is conn:
            self._conn = None
            if error is not None:
                self._backoff(conn.loop, error)
            elif not conn.answered:
                # Lost before its handshake was answered: the node may never
                # answer (closes at once, or is not Redis), so back off.
                self._backoff(
                    conn.loop,
                    NodeConnectionError(f"connection to {self.name} lost before it answered"),
                )
            else:
                # A healthy connection broke: reconnect on the next command.
                self._last_error = NodeConnectionError(f"connection to {self.name} lost")
                self._retry_at = 0.0
        return error if error is not None else self._last_error

    def reset(self) -> None:
        # Dropped, not closed: in a forked child these are the parent's.
        self._conn = None
        self._connecting = None
        self._waiting = []
        self._failures = 0
        self._retry_at = 0.0
        self._tainted = False

    def _observe(self, info: bytes) -> None:
        self.restarts.observe(info, asyncio.get_running_loop().time())

    def check_stall(self) -> None:
        conn = self._conn
        if conn is None or not conn.pending or conn.suspect:
            return
        loop = conn.loop
        if loop.time() - conn.busy_since > self._stall:
            # Look once more after the loop has polled its sockets: if our own
            # loop was blocked, the replies may be sitting there unread. A
            # timer due in a millisecond runs after the next poll's I/O
            # callbacks on every loop; one due now would not on uvloop, which
            # runs it like call_soon, before its poll.
            conn.suspect = True
            loop.call_later(_SECOND_LOOK, self._confirm_stall, conn, conn.busy_since)

    def _confirm_stall(self, conn: _Conn, since: float) -> None:
        conn.suspect = False
        if conn is not self._conn or not conn.pending or conn.busy_since != since:
            return  # replies came, or the connection is gone already
        silent = conn.loop.time() - since
        _log.warning(
            "redlock_async: %s answered nothing for %.2fs; dropping its connection",
            self.name,
            silent,
        )
        conn.abort(NodeTimeoutError(f"{self.name} answered nothing for {silent:.2f}s"))

    async def aclose(self) -> None:
        self._closed = True
        if self._connecting is not None:
            self._connecting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._connecting
        self._fail_waiting(NodeConnectionError(f"{self.name}: the Redlock is closed"))
        conn = self._conn
        if conn is not None and conn.transport is not None:
            conn._flush()  # fire-and-forget cleanups queued this iteration go out first
            conn.transport.close()
            try:
                async with asyncio.timeout(1.0):
                    await asyncio.shield(conn.closed)
            except TimeoutError:
                conn.abort(NodeConnectionError(f"{self.name}: the Redlock is closed"))
