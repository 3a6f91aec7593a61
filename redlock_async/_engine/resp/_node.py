"""The lean driver's node: one auto-pipelined RESP connection, parsed by hiredis.

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
  commands fail at once instead of waiting;
* a node gone *silent* (its connection dropped by the stall check, a
  reconnection whose handshake it left unanswered, a connect that timed out)
  is written nothing but a probe - a new connection's handshake, with the
  same backoff - until it answers one: meanwhile its commands fail at once,
  unsent, costing their vote and nothing else (no entry waiting for a
  connection, no deadline; a resend only for a release whose acquire may
  have run there before: ``_resend.py``). Queued behind the probe instead,
  each of them waited out the stall limit to fail in the end, a blackholed
  node's pile renewed with every probe;
* volume never fails a command: beyond ``MAX_PENDING`` unanswered on the
  wire, commands wait in the connection for replies to make room
  (``_conn.py``), and any number wait for a connection being made;
* scripts are loaded lazily, each in the write of its first ``EVALSHA`` on
  a connection (``_loader.py``); a NOSCRIPT (after a SCRIPT FLUSH) loads them
  again, see ``error_reply``.

The pieces: encoding (``_encode.py``), the connection (``_conn.py``), the
first commands of a connection (``_handshake.py``), which scripts it has
loaded (``_loader.py``), wake-ups (``_pubsub.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence

from ..._base._address import Address, connect
from ..._base._errors import NodeConnectionError, NodeError, NodeResponseError, NodeTimeoutError
from .._admission import LIMIT
from .._backoff import Backoff
from .._node import Command, Reply, Script, Sink, stall_limit, unsent
from .._restarts import Restarts
from .._wake import Subscriber, WakeHub, WakeSource
from ._conn import Conn
from ._encode import evalsha
from ._handshake import Handshake
from ._loader import ScriptLoads
from ._pubsub import RespSubscriber
from ._split import Turns

__all__ = ["RespNode"]


class _Fallback:
    """The entry of a command resent as EVAL: reports to the original entry.

    Never a granting script's (see RespNode.error_reply).
    """

    __slots__ = ("entry",)
    command: Command | None = None  # no second fallback

    def __init__(self, entry: Sink) -> None:
        self.entry = entry

    def settle(self, index: int, reply: Reply) -> None:
        self.entry.settle(index, reply)


def _run_all(nodes: Sequence[RespNode], command: Command, sink: Sink) -> None:
    """``RespNode.run`` on every node, in one call: the hot path of every fan-out.

    The per-node work under load is inlined here (no call per node): at 50
    tasks on 5 nodes this loop body runs a quarter of a million times a
    second, and finds the connection busy.
    """
    payload = command.packed
    if payload is None:
        payload = command.packed = evalsha(command)
    # One look per fan-out, not per node: every connection has loaded the
    # scripts in use (_loader.py); a script's first fan-out loads it on
    # every connection first.
    if command.script.sha not in nodes[0]._scripts.using:
        _start_using(nodes, command.script)
    for node in nodes:
        conn = node._conn
        if conn is not None:
            pending = conn.pending
            if not pending:
                conn.send(payload, sink)  # idle: whether it goes at once is send's call
                continue
            # Conn.send on a busy connection, inlined: queued for the pass's write.
            pending.append(sink)
            out = conn.out
            if not out:
                conn.loop.call_soon(conn.flush)
            out.append(payload)
        else:
            node._send(payload, sink)


class RespNode:
    """A Redis node reached over one RESP connection (``redis://``, ``unix://``)."""

    ordered = True
    concurrency = LIMIT  # one pipelined connection: the engine's bound is the only one
    cross_slot = True  # a plain server (a cluster is reached through redis-py)
    run_all = staticmethod(_run_all)  # what Quorum calls to send to every node

    def __init__(self, address: Address, *, node_timeout: float, restarts: Restarts) -> None:
        self._address = address
        self.restarts = restarts  # told what INFO says of the server (see Handshake)
        self.index = 0  # position among the Redlock's nodes (bind)
        self._stall = stall_limit(node_timeout)
        self._scripts = ScriptLoads(address.display)
        self._conn: Conn | None = None
        self._connecting: asyncio.Task[None] | None = None
        self._waiting: list[tuple[bytes, Sink]] = []
        # Grows with each connection in a row that never answered.
        self._backoff = Backoff(0.05, 2.0, spread=(0.5, 1.0))
        self._retry_at = 0.0
        self._last_error: NodeError = NodeConnectionError(f"{address.display} is not connected")
        # _last_error marked Unsent, made once per error rather than per
        # command failed with it (see unsent).
        self._unsent: tuple[NodeError, NodeError] | None = None
        self._closed = False
        # The last connection died with commands unanswered (see _connect).
        self._tainted = False
        # The node went silent on us and has not answered since (see _send).
        self._silent = False
        self._turns: Turns | None = None  # beside a Redis Cluster (use_slots)

    @property
    def name(self) -> str:
        return self._address.display

    @property
    def wake_source(self) -> WakeSource:
        return self._subscriber

    def _subscriber(self, hub: WakeHub) -> Subscriber:
        return RespSubscriber(hub, self._address)  # a pub/sub connection of its own

    def __repr__(self) -> str:
        return f"RespNode({self._address.display!r})"

    def bind(self, index: int) -> None:
        self.index = index

    def use_slots(self, view_of: Callable[[Sequence[bytes]], bytes]) -> None:
        """Beside a Redis Cluster node (``_slots.py``): commands over several
        hash slots run a slot at a time, in order (``_split.py``); no batch renewal."""
        self._turns = Turns(self.run_now, self.index, self.name, self._stall, view_of)
        self.cross_slot = False

    def run(self, command: Command, sink: Sink) -> None:
        """Queue ``command``; ``sink`` is the fan-out's tally (its ``command``)."""
        turns = self._turns
        if turns is None or not turns.take(command, sink):
            self.run_now(command, sink)

    def run_now(self, command: Command, sink: Sink) -> None:
        """:meth:`run`, never behind a split command (its own parts go here)."""
        payload = command.packed
        if payload is None:
            payload = command.packed = evalsha(command)
        conn = self._conn
        if conn is not None:
            self._scripts.ensure(conn, command.script)  # off the hot path: ask
            conn.send(payload, sink)
        else:
            self._send(payload, sink)

    def error_reply(self, message: str, entry: Sink) -> None:
        """The server answered ``entry``'s command with an error (called by Conn)."""
        command = entry.command
        if command is not None and message.startswith("NOSCRIPT"):
            # The script cache was flushed: a granting script's vote fails,
            # the others are resent as EVAL (see ScriptLoads.noscript).
            payload = self._scripts.noscript(self._conn, command)
            if payload is not None:
                self._send(payload, _Fallback(entry))
                return
            message = (
                f"NOSCRIPT on {self.name}: its script cache was flushed; "
                "scripts are loaded again for the next attempt"
            )
        entry.settle(self.index, NodeResponseError(message))

    def _send(self, payload: bytes, entry: Sink) -> None:
        conn = self._conn
        if conn is not None:
            command = entry.command
            if command is not None:
                self._scripts.ensure(conn, command.script)
            conn.send(payload, entry)  # held back when the wire is full (Conn.flush)
            return
        loop = asyncio.get_running_loop()
        error: NodeError
        if self._closed:
            error = unsent(NodeConnectionError(f"{self.name}: the Redlock is closed"))
        elif self._connecting is None and loop.time() < self._retry_at:
            error = self.unsent(self._last_error)  # down and backing off: fail now, don't queue
        else:
            if self._connecting is None:
                self._connecting = loop.create_task(self._connect(loop))
            if not self._silent:
                # However many: a connect (and the handshake behind it) is bounded
                # by the stall limit, then all go out or fail (never for volume).
                self._waiting.append((payload, entry))
                return
            # Silent: that connection is a probe. Held for it, this command
            # would likely wait out the stall limit and fail anyway, keeping
            # its vote pending meanwhile; failed now, it costs its vote alone
            # (and was never written: see _resend.resend for cleanups).
            error = self.unsent(self._last_error)
        # Outcomes always arrive later, never inside the caller's send loop.
        loop.call_soon(entry.settle, self.index, error)

    def unsent(self, error: NodeError) -> NodeError:
        """``error`` marked Unsent; the same copy for every command it fails
        (node errors are values, never raised: one instance can be shared)."""
        made = self._unsent
        if made is None or made[0] is not error or made[1].__cause__ is not error.__cause__:
            made = self._unsent = (error, unsent(error))  # again once a cause is known
        return made[1]

    async def _connect(self, loop: asyncio.AbstractEventLoop) -> None:
        # While this runs, commands wait in _waiting (_send sees _connecting),
        # unless the node is silent: then this is a probe, and they fail at once.
        try:
            try:
                conn = await connect(self._address, lambda: Conn(self, loop), self._stall)
            except (OSError, TimeoutError) as exc:
                timed_out = isinstance(exc, TimeoutError)
                reason = "timed out" if timed_out else exc.strerror or str(exc)
                error = NodeConnectionError(f"cannot connect to {self.name}: {reason}")
                error.__cause__ = exc  # the OSError itself, for callers who need errno
                self._down(loop, error)
                if timed_out:
                    self._silent = True  # dropped SYNs: as silent as a blackhole
                self._fail_waiting(self._last_error)
                return
            if self._closed:
                conn.abort(NodeConnectionError(f"{self.name}: the Redlock is closed"))
                self._fail_waiting(self._last_error)
                return
            handshake = Handshake(conn, self.name, self.restarts, self._backoff.reset)
            handshake.start(self._address)
            # Behind a failed AUTH/SELECT the server still runs what follows (as the
            # default user, in db 0) while we drop the replies: a grant nobody
            # releases. So with either, commands wait for the handshake's answer;
            # and to a silent node nothing goes but the handshake (a probe).
            address = self._address
            if self._silent or self._tainted or address.db or address.auth_command() is not None:
                try:
                    caught_up = await _caught_up(self, conn, handshake, loop)
                except asyncio.CancelledError:  # closing: this connection is nobody's
                    conn.abort(NodeConnectionError(f"{self.name}: the Redlock is closed"))
                    raise
                if not caught_up:
                    return
        finally:
            self._connecting = None
        self._conn = conn
        scripts = self._scripts
        scripts.connected(conn)
        waiting, self._waiting = self._waiting, []
        for payload, entry in waiting:
            command = entry.command
            if command is not None:
                scripts.ensure(conn, command.script)
            conn.send(payload, entry)

    def _down(self, loop: asyncio.AbstractEventLoop, error: NodeError) -> None:
        self._last_error = error
        self._retry_at = loop.time() + self._backoff.fail()

    def _fail_waiting(self, error: NodeError) -> None:
        waiting, self._waiting = self._waiting, []
        if waiting:
            error = self.unsent(error)  # they never reached a connection
        for _, entry in waiting:
            entry.settle(self.index, error)

    def went_silent(self) -> None:
        self._silent = True  # called by Conn's stall check: probes only (_send)

    def forget(self, conn: Conn, error: NodeError | None, *, unanswered: bool = False) -> NodeError:
        """Stop using ``conn`` (called by Conn); returns what its pending commands fail with."""
        if unanswered:
            # The server may still run what it had read: see _caught_up.
            self._tainted = True
        if self._conn is conn:
            self._conn = None
            if error is not None:
                self._down(conn.loop, error)
            elif not conn.answered:
                # Lost before its handshake was answered: the node may never
                # answer (closes at once, or is not Redis), so back off.
                self._down(
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
        if self._turns is not None:
            self._turns.reset()  # the old loop's tasks
        self._conn = None
        self._connecting = None
        self._waiting = []
        self._backoff.reset()
        self._retry_at = 0.0
        self._tainted = self._silent = False

    def silent_since(self) -> float:
        conn = self._conn  # None: waiting for a connection counts as silence
        return float("-inf") if conn is None else conn.silent_since(self._stall)

    async def aclose(self) -> None:
        self._closed = True
        if self._turns is not None:
            await self._turns.aclose(self._stall)  # its queue first: cleanups go out
        if self._connecting is not None:
            self._connecting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._connecting
        error = NodeConnectionError(f"{self.name}: the Redlock is closed")
        self._fail_waiting(error)
        if self._conn is not None:
            await self._conn.aclose(error, self._stall)


async def _caught_up(
    node: RespNode, conn: Conn, handshake: Handshake, loop: asyncio.AbstractEventLoop
) -> bool:
    """Hold ``node``'s new commands until the server answers on ``conn``.

    The last connection died with commands unanswered, and the server may
    still run them: a paused node reads them when it resumes. Cleanups
    (resent releases) must run after them, so nothing but the handshake
    goes out until the server has answered it - by then it has read the
    old connection's commands too, in the same pass of its event loop.
    """
    try:
        async with asyncio.timeout(node._stall):
            await asyncio.shield(handshake.pinged)
    except TimeoutError:
        conn.abort(NodeTimeoutError(f"{node.name} answered nothing after reconnecting"))
        node._silent = True
    if not conn.answered or conn.transport is None or conn.error is not None:
        error = conn.error or NodeConnectionError(f"connection to {node.name} lost")
        if conn.transport is not None:
            conn.abort(error)
        node._down(loop, error)
        node._fail_waiting(node._last_error)
        return False
    node._tainted = node._silent = False
    return True


def _start_using(nodes: Sequence[RespNode], script: Script) -> None:
    """``script``'s first fan-out over ``nodes``: load it on every connection first.

    The nodes of one Redlock share one record of the scripts in use (run_all
    always sends to all of them), so run_all looks at the first node's only.
    """
    using = nodes[0]._scripts.using
    using[script.sha] = script
    for node in nodes:
        node._scripts.using = using
        if node._conn is not None:
            node._scripts.ensure(node._conn, script)
