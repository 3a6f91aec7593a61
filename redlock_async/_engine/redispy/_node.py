"""The redis-py driver: for clients users pass in, TLS URLs, and Redis Cluster.

valkey-py's clients (``Valkey``, ``ValkeyCluster``) go through it too: the
same API, their own classes (``_kinds.py``).

Each command is a task; its outcome reaches the callback as a value. Pooled
connections give no ordering between commands, so the quorum layer chains
cleanup after in-flight commands itself (``ordered = False``). Exceptions are
mapped in ``_errors.py``, wake-ups go through ``_pubsub.py``.

A command unanswered for the stall limit is cut, its connection dropped by
redis-py: a cleanup cut so is resent (``_resend.py``), and a node that
answered nothing meanwhile is sent nothing but probes until it answers one
(``_silence.py``). Granting scripts go behind a restart probe (``_watched.py``).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sequence

from redis.asyncio import Redis, RedisCluster

from ..._base._errors import NodeConnectionError, NodeError, NodeResponseError
from .._node import (
    Arg,
    Call,
    Command,
    Reply,
    Script,
    Sink,
    SplitCommand,
    stall_limit,
    unsent,
)
from .._restarts import Restarts
from .._wake import Subscriber, WakeHub, WakeSource
from ._errors import never_sent, translate
from ._kinds import errors, is_cluster, is_plain
from ._pubsub import RedisPySubscriber
from ._silence import Silence
from ._watched import watched

__all__ = ["RedisPyNode"]

# Commands one node runs at once, however large the client's pool.
_MAX_IN_FLIGHT = 256
# Commands in flight on a node before it has answered anything (slow start).
_FIRST_WINDOW = 4


class RedisPyNode:
    """A node reached through a ``redis.asyncio.Redis`` or ``RedisCluster`` client.

    Or through valkey-py's ``Valkey`` or ``ValkeyCluster``: typed as redis-py's,
    whose API they share; their classes are told apart through ``_kinds``.
    """

    ordered = False

    def __init__(
        self,
        client: Redis | RedisCluster,
        *,
        name: str,
        node_timeout: float,
        owned: bool,
        restarts: Restarts,
    ) -> None:
        self._client = client
        # valkey-py raises its own NOSCRIPT class: catch whichever this client's is.
        self._noscript = errors("NoScriptError")
        self._name = name
        self._owned = owned
        # redis-py may wait forever on a blackholed socket when the caller's
        # client has no socket_timeout; this bound keeps tasks from piling up.
        self._stall = stall_limit(node_timeout)
        # A cluster's client reaches many servers: one paused shard is no
        # silence of the others.
        self._silence = Silence(name, self._stall, watching=not is_cluster(client))
        self._tasks: set[asyncio.Task[object]] = set()
        self._index = 0  # position among the Redlock's nodes (bind)
        # When a command last finished, or went out with none other out
        # (silent_since); how many commands are out (their tasks have run).
        self._answered = float("-inf")
        self._out = 0
        # Commands in flight at most: half the client's pool, so that the
        # application's own commands on a client it shares still get one.
        pool = getattr(client, "connection_pool", None)
        self.concurrency = max(1, min(_MAX_IN_FLIGHT, getattr(pool, "max_connections", 100) // 2))
        self._backlog: deque[tuple[Command, Sink]] = deque()  # waiting for a slot
        # Slow start: commands in flight grow by one per answer up to that
        # bound. Each new pooled connection costs a connect and a handshake;
        # fifty at once from a cold pool took longer than node_timeout (with
        # nothing answered yet to show the node was working: silent_since).
        self._window = _FIRST_WINDOW
        # Plain clients are asked for their run_id with each granting script
        # (see _watched); a cluster's INFO would answer for an arbitrary
        # shard, so not there.
        self.restarts = restarts if is_plain(client) else None
        # A cluster refuses a script whose keys live in different slots.
        self.cluster = is_cluster(client)
        self.cross_slot = not self.cluster
        # Each hash slot's view of the nodes' epochs, for the parts of a split
        # command (set by use_slots; None: one view for every command).
        self._view_of: Callable[[Sequence[bytes]], bytes] | None = None

    @property
    def name(self) -> str:
        return self._name

    @property
    def wake_source(self) -> WakeSource:
        return self._subscriber

    def _subscriber(self, hub: WakeHub) -> Subscriber:
        return RedisPySubscriber(hub, self._client, self._name)  # the client's own pub/sub

    def __repr__(self) -> str:
        return f"RedisPyNode({self._name!r})"

    def bind(self, index: int) -> None:
        self._index = index

    def use_slots(self, view_of: Callable[[Sequence[bytes]], bytes]) -> None:
        """A node of a Redlock with a Redis Cluster node (``_slots.py``): the
        restart rule is kept per hash slot, so commands over several slots run
        a slot at a time, each part carrying its slot's view. (A cluster's
        scripts also check the server's run_id: ``lua/_epoch_cluster.lua``.)"""
        self.cross_slot = False
        self._view_of = view_of

    def run(self, command: Command, sink: Sink) -> None:
        silent = self._silence.error
        if silent is not None:
            self._refuse(sink, silent)
            return
        if len(self._tasks) >= self._window or self._backlog:
            # Every command holds a pooled connection while it runs, and a
            # full pool fails the next at once ("Too many connections"): a
            # burst waits here instead, in order, its silence not the node's
            # (see silent_since), started as others finish. However many:
            # volume never fails a command (a release must not be dropped).
            self._backlog.append((command, sink))
            return
        self._start(command, sink)

    def _start(self, command: Command, sink: Sink) -> None:
        index = self._index
        task: asyncio.Task[object] = asyncio.get_running_loop().create_task(self._run(command))
        self._tasks.add(task)

        def done(task: asyncio.Task[object]) -> None:
            self._tasks.discard(task)
            self._answered = task.get_loop().time()
            if self._window < self.concurrency:
                self._window += 1
            backlog = self._backlog
            silent = self._silence.error
            while backlog and silent is not None:  # nothing is written to a silent node
                self._refuse(backlog.popleft()[1], silent)
            # As many as the window now allows: one per finished command
            # would never let the window grow past the first few in flight.
            while backlog and len(self._tasks) < self._window:
                self._start(*backlog.popleft())
            if task.cancelled():
                sink.settle(index, NodeConnectionError(f"{self._name}: command cancelled"))
                return
            exc = task.exception()
            if exc is not None:
                error = translate(exc, self._name)
                if never_sent(exc):
                    error = unsent(error)  # refused at connect: never written
                sink.settle(index, error)
                return
            sink.settle(index, _reply(task.result()))

        task.add_done_callback(done)

    async def _run(self, command: Command) -> object:
        if self._out <= 0:
            # Nothing of ours was out: the node's silence starts now, when
            # this task first runs, not when the command was queued - our
            # own loop may have been busy in between (aclose() of 20,000
            # held locks queues their releases in one go), and that is not
            # the node's fault.
            self._answered = asyncio.get_running_loop().time()
        self._out += 1
        silence = self._silence
        heard = silence.heard
        try:
            reply = await self._send(command)
        except silence.replies:
            silence.answered()
            raise
        except TimeoutError:
            silence.cut(heard)  # by the stall limit (redis-py's own timeouts are not this class)
            raise
        finally:
            self._out -= 1
        silence.answered()
        return reply

    def _refuse(self, sink: Sink, silent: NodeError) -> None:
        """Fail a command to a silent node now, unwritten (``_silence.py``), and
        probe the node. Later, as outcomes always come: never inside the
        caller's send loop."""
        self._silence.probe(self._client)
        asyncio.get_running_loop().call_soon(sink.settle, self._index, silent)

    async def _send(self, command: Command) -> object:
        async with asyncio.timeout(self._stall):
            if not self.cross_slot and isinstance(command, SplitCommand):
                # Keys of several slots: one single-slot call at a time.
                return await _split(command, self._call, self._index, self._name)
            keys = command.keys
            script = command.script
            if self.cluster and script.cluster is not None:
                script = script.cluster  # a run_id check: no restart watch per shard
            if self.restarts is not None and script.grants:
                return await watched(
                    self._client, self.restarts, self._noscript, script, keys, command.args
                )
            try:
                return await self._client.evalsha(
                    script.sha.decode(), len(keys), *keys, *command.args
                )
            except self._noscript:
                return await self._client.eval(
                    script.source.decode(), len(keys), *keys, *command.args
                )

    async def _call(self, script: Script, keys: Sequence[bytes], args: Sequence[Arg]) -> object:
        """One single-slot step of a split command (not inlined above: the hot path
        keeps its one coroutine frame)."""
        if self.cluster and script.cluster is not None:
            script = script.cluster
        if script.views and self._view_of is not None:
            args = (*args, self._view_of(keys))  # this part's slot's, not the command's
        if self.restarts is not None and script.grants:
            # A plain node beside a cluster (a multilock's part): unwatched, one
            # restarted from disk would vote yes with its old epoch, lacking grants.
            return await watched(self._client, self.restarts, self._noscript, script, keys, args)
        try:
            return await self._client.evalsha(script.sha.decode(), len(keys), *keys, *args)
        except self._noscript:
            return await self._client.eval(script.source.decode(), len(keys), *keys, *args)

    def reset(self) -> None:
        # Tasks of the old loop are abandoned; a client we made drops its
        # pooled connections (made on that loop, or the parent's after a fork).
        self._tasks = set()
        self._out = 0  # their tasks will never finish here
        self._backlog.clear()  # their tallies belong to the old loop too
        self._window = _FIRST_WINDOW  # a cold pool again
        self._silence.reset()
        if self._owned and isinstance(self._client, Redis):
            self._client.connection_pool.reset()  # type: ignore[no-untyped-call]

    def silent_since(self) -> float:
        # Commands run on pooled connections, in no order: the node's last
        # answer to any of them says it is working through our backlog
        # (and with none out, the time one went out: see _run). An
        # answer older than this command's fan-out counts for nothing: the
        # vote then fails at its deadline. A command hung on a broken
        # connection of a node that answers others waits at most its task's
        # stall bound (_run).
        return self._answered

    async def aclose(self) -> None:
        # Commands in flight and waiting (often the releases of the locks
        # aclose() dropped) land while the node answers: each finished one
        # starts the next (_start). A node silent for the stall limit gets
        # no longer: what waits then fails, never sent.
        while self._tasks:
            done, _ = await asyncio.wait(
                set(self._tasks), timeout=self._stall, return_when=asyncio.FIRST_COMPLETED
            )
            if not done:
                break
        backlog, self._backlog = self._backlog, deque()
        for _, sink in backlog:
            error = NodeConnectionError(f"{self._name}: the Redlock is closed")
            sink.settle(self._index, unsent(error))  # never written: nothing to undo
        pending = set(self._tasks)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)
        await self._silence.aclose()
        if self._owned:
            await self._client.aclose()


def _reply(value: object) -> Reply:
    if value is None or isinstance(value, int | bytes | list):
        return value
    if isinstance(value, str):  # a client created with decode_responses=True
        return value.encode()
    return NodeResponseError(f"unexpected reply type {type(value).__name__}")


async def _split(command: SplitCommand, call: Call, index: int, name: str) -> object:
    """``command`` a slot at a time on node ``index`` through ``call``.

    A part that could not even connect after earlier parts ran is no "never
    sent" failure (``SplitCommand.ran``): those parts took keys, and the undo
    skips a node whose vote is marked unsent. Its error says the connection
    failed instead.
    """
    try:
        return await command.split(command.telling(call, index))
    except Exception as exc:
        if never_sent(exc) and command.ran(index):
            raise NodeConnectionError(f"{name}: {exc}") from exc
        raise
