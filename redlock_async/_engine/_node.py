"""The node boundary: the only interface the quorum layer talks to.

A node runs one script with keys and arguments and reports the outcome
exactly once, later, on the event loop, to a sink (the fan-out's tally),
under the index the quorum bound it to (its position among the nodes):
the reply (an int, bytes, a list or None) or a :class:`NodeError` *instance*
(never raised).
Passing outcomes as values is what lets the fan-out never raise mid-flight.

Drivers report raw replies, and what they see of the server to the node's
``restarts`` watch; the engine alone decides what a vote is worth (a
quarantined node's yes to a granting script does not count: ``Tally.settle``).

Two drivers implement it:

* ``RespNode`` (package ``resp``) - the lean hot path for ``redis://`` and
  ``unix://`` URLs: one auto-pipelined connection per node, commands executed
  in the order they were sent.
* ``RedisPyNode`` (package ``redispy``) - for ``rediss://`` URLs and
  user-supplied ``redis.asyncio.Redis`` / ``RedisCluster`` clients (Cluster,
  Sentinel, TLS, anything else redis-py reaches); commands may run on
  different pooled connections, so their order is not guaranteed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Protocol

from .._base._errors import NodeError
from ._restarts import Restarts
from ._wake import WakeSource

__all__ = [
    "Arg",
    "Call",
    "Command",
    "Node",
    "Reply",
    "Sink",
    "SplitCommand",
    "Unsent",
    "stall_limit",
    "unsent",
]

Reply = int | bytes | list[object] | None | NodeError
Arg = bytes | str | int


@dataclass(frozen=True, slots=True)
class Script:
    """A Lua script and the SHA1 digest Redis files it under."""

    name: str
    source: bytes
    sha: bytes  # lowercase hex digest, as EVALSHA and SCRIPT LOAD spell it
    grants: bool = False  # a yes vote creates a grant (a quarantined node's does not count)
    views: bool = False  # takes the caller's view of the nodes' epochs as its last argument
    cluster: Script | None = field(default=None, repr=False, compare=False)
    """What a Redis Cluster node runs instead (None: this script): the check
    also compares the server's run_id, as there is no restart watch per shard
    (``lua/_epoch_cluster.lua``, ``_slots.py``)."""

    @classmethod
    def load(
        cls,
        name: str,
        *,
        grants: bool = False,
        fences: bool = False,
        views: bool = False,
        epochs: bool = False,
    ) -> Script:
        """Read ``lua/<name>.lua``; ``fences``: prepend ``lua/_fence.lua`` (next_fence);
        ``views``: prepend ``lua/_epoch.lua`` (the script grants or renews: it
        checks the caller's view and raises the restart record; its twin
        for Redis Cluster nodes gets ``_epoch_cluster.lua`` too); ``epochs``: prepend
        ``_epoch.lua`` for its functions alone (the census)."""
        lua = resources.files("redlock_async").joinpath("lua")
        source = lua.joinpath(f"{name}.lua").read_bytes()
        if fences:
            # One copy of the fencing counter step for every script that
            # hands out tokens (a local function, defined before its use).
            source = lua.joinpath("_fence.lua").read_bytes() + source
        if epochs:
            source = lua.joinpath("_epoch.lua").read_bytes() + source
        if not views:
            return cls(name, source, _sha(source), grants)
        plain = lua.joinpath("_epoch.lua").read_bytes() + source
        cluster = (
            lua.joinpath("_epoch.lua").read_bytes()
            + lua.joinpath("_epoch_cluster.lua").read_bytes()
            + source
        )
        twin = cls(name, cluster, _sha(cluster), grants, True)
        return cls(name, plain, _sha(plain), grants, True, twin)

    def __repr__(self) -> str:
        return f"Script({self.name!r}, sha={self.sha.decode()})"


def _sha(source: bytes) -> bytes:
    return hashlib.sha1(source).hexdigest().encode()


SERVER_ID = Script.load("server_id")
"""Reads the node's run id and uptime (restart detection)."""
CENSUS = Script.load("census", epochs=True)
"""Reads the node's epoch and restart record (``_epochs.py``)."""

STALE = -9
"""What a script that takes a view answers when the node's epoch is not in it."""


class Unsent:
    """Marks the error of a command that was never written to its node.

    It cannot have run there, so nothing needs undoing, nor resending (a node
    down, backing off or silent would otherwise collect a resend per
    release) - unless it is a cleanup and what it cleans up may have run
    there (``_resend.resend``).
    """


_UNSENT_TYPES: dict[type[NodeError], type[NodeError]] = {}


def unsent(error: NodeError) -> NodeError:
    """A copy of ``error`` marked :class:`Unsent`, of the same (public) type.

    The marked type is a subclass that keeps the original's name, so
    ``.errors`` shows users the error they know.
    """
    cls = type(error)
    marked = _UNSENT_TYPES.get(cls)
    if marked is None:
        namespace = {"__module__": cls.__module__, "__qualname__": cls.__qualname__}
        marked = _UNSENT_TYPES[cls] = type(cls.__name__, (cls, Unsent), namespace)
    copy = marked(*error.args)
    copy.__cause__ = error.__cause__
    return copy


class Command:
    """One script call, shared by every node of a fan-out.

    ``packed`` caches the wire encoding, so a driver that speaks RESP itself
    encodes the command once per fan-out rather than once per node.
    ``grants`` copies ``script.grants``: the tally tests it on every reply.
    ``view``: the fan-out still has to append its view of the nodes' epochs
    to ``args`` (``Quorum.fanout``, once).
    """

    __slots__ = ("args", "grants", "keys", "packed", "script", "view")

    def __init__(self, script: Script, keys: Sequence[bytes], args: Sequence[Arg]) -> None:
        self.script = script
        self.keys = keys
        self.args = args
        self.grants = script.grants
        self.view = script.views
        self.packed: bytes | None = None

    def __repr__(self) -> str:
        return f"Command({self.script.name}, keys={list(self.keys)!r})"

    def stale_keys(self, index: int) -> Sequence[bytes]:
        """The keys node ``index`` answered STALE over: whose hash slots are read
        again (``_slots.py``). All of them: one script ran over them all."""
        return self.keys


Call = Callable[[Script, Sequence[bytes], Sequence[Arg]], Awaitable[object]]
"""Runs one script on a node (EVALSHA, EVAL on NOSCRIPT) and returns its raw reply."""


class SplitCommand(Command):
    """A command over keys of several hash slots (a multilock's), with a plan B.

    A node that refuses a script over keys of several slots (a Redis Cluster:
    ``Node.cross_slot`` is False) runs ``split`` instead, given its own
    :data:`Call`: a sequence of single-slot script calls, whose result is the
    command's reply. Nodes that accept any keys run the script as usual.
    """

    __slots__ = ("_ran", "_stale", "split")

    def __init__(
        self,
        script: Script,
        keys: Sequence[bytes],
        args: Sequence[Arg],
        split: Callable[[Call], Awaitable[object]],
    ) -> None:
        super().__init__(script, keys, args)
        self.split = split
        # Per node that ran it split: the keys of the part that answered
        # STALE (the split stops there), see stale_keys; the nodes where a
        # part of the current run answered, see ran.
        self._stale: dict[int, Sequence[bytes]] | None = None
        self._ran: set[int] | None = None

    def telling(self, call: Call, index: int) -> Call:
        """``call`` for node ``index``'s run of ``split``: a part that answers
        STALE is remembered with its keys (``stale_keys``), and any part that
        answers marks the run as having run there (``ran``)."""
        if self._ran is not None:
            self._ran.discard(index)  # this run's parts only (a cleanup may be resent)

        async def part(script: Script, keys: Sequence[bytes], args: Sequence[Arg]) -> object:
            reply = await call(script, keys, args)
            if self._ran is None:
                self._ran = set()
            self._ran.add(index)
            if reply == STALE and type(reply) is int:
                if self._stale is None:
                    self._stale = {}
                self._stale[index] = keys
            return reply

        return part

    def stale_keys(self, index: int) -> Sequence[bytes]:
        """The keys of node ``index``'s part that answered STALE, when it ran
        the command split: only that part's slot is read again. Every slot
        of the command would ask for a census on each attempt, however long
        a node is kept out of one of them on purpose (``_held.Held``)."""
        found = None if self._stale is None else self._stale.get(index)
        return self.keys if found is None else found

    def ran(self, index: int) -> bool:
        """Whether a part of node ``index``'s current run answered: it ran there
        and may have taken a key, so a later part that was never written does
        not make the command "never sent" (the undo must not skip the node)."""
        return self._ran is not None and index in self._ran


class Sink(Protocol):
    """Where a node reports outcomes: the fan-out's tally."""

    @property
    def command(self) -> Command | None:
        """The command whose outcome this waits for (None: not a script call)."""
        ...

    def settle(self, index: int, reply: Reply) -> None: ...


def stall_limit(node_timeout: float) -> float:
    """How long a node may leave every command unanswered before we drop its connection.

    Much longer than ``node_timeout`` (a vote already counts as failed after
    that), so a briefly slow node keeps its connection; short enough that a
    blackholed node cannot make unanswered commands pile up in memory.
    """
    return max(4.0 * node_timeout, 0.5)


class Node(Protocol):
    """What the quorum layer needs from one Redis node."""

    @property
    def name(self) -> str:
        """The node's address with secrets redacted: safe for messages and logs."""
        ...

    @property
    def ordered(self) -> bool:
        """True when commands run on the server in the order they were sent."""
        ...

    @property
    def concurrency(self) -> int:
        """Commands this node runs at once; more wait in the driver. The
        engine admits no more acquire attempts at once than its least node."""
        ...

    @property
    def cross_slot(self) -> bool:
        """True when one script call may use keys of any hash slots (the node
        is not a Redis Cluster): the lock layer then renews many grants in one
        call (``_batch.py``)."""
        ...

    @property
    def wake_source(self) -> WakeSource | None:
        """Makes this node's subscriber for release announcements (called
        with the Redlock's ``WakeHub``); None: its waiters poll."""
        ...

    @property
    def restarts(self) -> Restarts | None:
        """The restart watch the driver reports the server's identity to;
        None: restarts are not watched (Redis Cluster)."""
        ...

    def bind(self, index: int) -> None:
        """Told once, by the quorum: this node's position, the index of its outcomes."""
        ...

    def run(self, command: Command, sink: Sink) -> None:
        """Send ``command``; later call ``sink.settle(index, reply-or-NodeError)`` once."""
        ...

    def silent_since(self) -> float:
        """Told that a command on this node outlived ``node_timeout`` since its
        fan-out; returns the loop time since which the node has been silent.

        Silent means: nothing came back since it last answered, or since the
        oldest command still unanswered was written, whichever is later. A
        node answering a backlog of our own commands is not silent: its
        command is waiting behind ours, which is the client's doing, not the
        node's (``Tally.expire``). ``-inf`` when the driver cannot tell: the
        command then fails ``node_timeout`` after its fan-out. The driver may
        also drop a connection that stalled for ``stall_limit`` here.
        """
        ...

    def reset(self) -> None:
        """Forget connections made on another event loop or before a fork.

        Never touch them: a forked child shares them with its parent.
        Commands in flight on them are abandoned (their tallies with them).
        """
        ...

    async def aclose(self) -> None:
        """Close what this node opened; fail commands still in flight."""
        ...
