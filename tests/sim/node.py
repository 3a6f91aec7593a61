"""A simulated Redis 7.0 node: the library's own Lua scripts over an in-memory keyspace.

``SimNode(clock)`` answers ``execute(args, conn=...)`` exactly as the
``redis-server`` installed here would, for every command the library's
scripts and drivers send (``commands.py``), held to it by the differential
check (``diff.py``).

Time is the node's own: ``clock()`` gives its ms (``clock.Clock`` makes one
that drifts from true time). Where Redis 7.0 reads its time, the node reads
its clock: once when a command - or a script - begins, and that instant
decides which keys have expired for the whole command or script; live for
``TIME``, ``PTTL`` and the expiry ``SET PX``/``PEXPIRE`` set, even inside a
script (Redis reads gettimeofday there). A simulation's clock does not move
while a command runs, so a script sees one frozen time.

What a node can suffer, besides what the network and the loop do to it
(pause, run slowly, delay, cut: theirs), is here: ``flushall``, ``restart``
(empty, whole, from an append-only file missing its last writes, as a
promoted replica), ``evict`` (keys with an expiry, under a volatile-*
policy) and ``flush_scripts``.

Pub/sub: each connection is a ``conn`` id the caller picks. What a command
pushes - a (S)SUBSCRIBE's confirmations, a message published to a channel
the connection subscribed - waits in ``outbox[conn]`` (``take(conn)``); the
command itself then answers :data:`~tests.sim.replies.NOREPLY`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable
from typing import Literal

from .commands import COMMANDS, Spec, resolve
from .keyspace import Entry, Journal, Keyspace, Saved, ZSet
from .lua import lua
from .pubsub import PubSub
from .replies import Error, NotModelled, Push, Reply
from .servercmds import DATABASES

__all__ = ["QUIRKS", "Entry", "Session", "SimNode"]

QUIRKS = frozenset(
    {
        "pttl_persistent_absent",  # PTTL answers -2 (no key) for a key without expiry
        "zadd_nx_updates",  # ZADD NX updates the score of an existing member
        "set_keeps_ttl",  # SET without PX/KEEPTTL keeps the key's old expiry
        "lua_false_as_zero",  # a script's false becomes 0, not nil
        "get_wrongtype_nil",  # GET on a hash or sorted set answers nil, not WRONGTYPE
        "script_flush_keeps",  # SCRIPT FLUSH leaves the scripts loaded
    }
)
"""Differences that can be planted in a node, each one a bug the differential check must catch."""


_RESTRICTED = (
    "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET "
    "are allowed in this context"
)
_NOAUTH = Error("NOAUTH Authentication required.")


class Session:
    """One connection's state (or a script's own, while it runs)."""

    __slots__ = (
        "authed",
        "channels",
        "client_id",
        "conn",
        "db",
        "name",
        "proto",
        "shard_channels",
        "subscribed",
    )

    def __init__(self, conn: Hashable, client_id: int, authed: bool) -> None:
        self.conn = conn
        self.client_id = client_id
        self.authed = authed
        self.db = 0
        self.proto = 2
        self.name: bytes | None = None
        self.channels: dict[bytes, None] = {}
        self.shard_channels: dict[bytes, None] = {}
        self.subscribed = False  # in RESP2, only (S)(UN)SUBSCRIBE and PING may run


class SimNode:
    """One simulated Redis 7.0 node (see the module docstring)."""

    def __init__(
        self,
        clock: Callable[[], int],
        *,
        run_id: str | None = None,
        replid: str | None = None,
        seed: int = 0,
        started: int | None = None,
        port: int = 6379,
        password: str | None = None,
        journal: int = 0,
        quirks: frozenset[str] = frozenset(),
    ) -> None:
        """``run_id``, ``replid``: the server's ids (40 hex digits; random from ``seed``
        when not given); ``started``: when it started, on its clock (default now:
        ``uptime_in_seconds`` counts from there); ``password``: ``requirepass``;
        ``journal``: how many of the last write units a ``restart(keep="aof_prefix")``
        can lose (0: none kept); ``quirks``: planted differences (:data:`QUIRKS`)."""
        unknown = set(quirks) - QUIRKS
        if unknown:
            raise ValueError(f"unknown quirks: {sorted(unknown)}")
        self._clock = clock
        self.rng = random.Random(seed)
        # What INFO memory reports (a node configured to evict: ``evict``).
        self.maxmemory, self.maxmemory_policy = 0, "noeviction"
        self.run_id = run_id or self._random_id()
        self.replid = replid or self._random_id()
        self.started = clock() if started is None else started
        self.pid = 1000 + self.rng.randrange(60000)
        self.port = port
        self.password = password
        self.quirks = frozenset(quirks)
        self.journal = Journal(journal) if journal else None
        self.dbs = [Keyspace(clock, self.journal, self.quirks) for _ in range(DATABASES)]
        self.scripts: set[bytes] = set()  # SHA1s in the script cache
        self.sessions: dict[Hashable, Session] = {}
        self.pubsub = PubSub()
        self.outbox = self.pubsub.outbox  # conn -> what waits to be pushed to it
        self._clients = 0
        self._script: Session | None = None  # the session of the script running
        self._script_session = Session(0, 0, True)  # reused: one script runs at a time
        self._script_now = 0

    @property
    def clock(self) -> Callable[[], int]:
        """The node's clock (ms); it may be replaced (another machine's, after a failover)."""
        return self._clock

    @clock.setter
    def clock(self, clock: Callable[[], int]) -> None:
        self._clock = clock
        for db in self.dbs:
            db.clock = clock

    def _random_id(self) -> str:
        return f"{self.rng.getrandbits(160):040x}"

    # Commands ---------------------------------------------------------------

    def execute(self, args: list[bytes], conn: Hashable = 0) -> Reply:
        """Run one command (``args``: its words, the name first) from connection ``conn``."""
        session = self.sessions.get(conn)
        if session is None:
            session = self._connect(conn)
        spec = COMMANDS.get(args[0])
        if spec is None or spec.subcommands is not None:
            found = resolve(args)
            if type(found) is Error:
                return found
            assert isinstance(found, Spec)
            spec = found
        arity, n = spec.arity, len(args)
        if (n != arity) if arity > 0 else (n < -arity):
            return Error(f"ERR wrong number of arguments for '{spec.name}' command")
        if session.subscribed and session.proto == 2 and not spec.pubsub:
            return Error(_RESTRICTED.format(spec.name))
        if not session.authed and spec.name not in ("auth", "hello"):
            return _NOAUTH
        now = self._clock()
        data = spec.data
        if data is not None:
            reply = data(self.dbs[session.db], args, now)
        else:
            assert spec.server is not None
            reply = spec.server(self, session, args, now)
        journal = self.journal
        if journal is not None and journal.current:
            journal.close()
        if session.proto == 3 and spec.resp3 is not None:
            return spec.resp3(reply, args)
        return reply

    def _connect(self, conn: Hashable) -> Session:
        self._clients += 1
        session = self.sessions[conn] = Session(conn, self._clients, self.password is None)
        return session

    def run_script(
        self, session: Session, sha: bytes, words: list[bytes], numkeys: int, now: int
    ) -> Reply:
        """Run a loaded script for ``session``; its commands see time ``now``."""
        run = self._script_session
        run.conn, run.client_id = session.conn, session.client_id
        run.db = session.db  # a SELECT inside changes the script's database only
        self._script, self._script_now = run, now
        try:
            return lua.run(self, sha, words, numkeys)
        finally:
            self._script = None

    def script_command(self, args: list[bytes]) -> Reply:
        """One ``redis.call`` of the script running (``ScriptHost``)."""
        run = self._script
        assert run is not None
        spec = COMMANDS.get(args[0])
        if spec is None or spec.subcommands is not None:
            found = resolve(args)
            if type(found) is Error:
                raise NotModelled(f"{args[:2]!r} in a script")
            assert isinstance(found, Spec)
            spec = found
        arity, n = spec.arity, len(args)
        if (n != arity) if arity > 0 else (n < -arity):
            return Error("ERR Wrong number of args calling Redis command from script")
        if not spec.script:
            return Error("ERR This Redis command is not allowed from script")
        data = spec.data
        if data is not None:
            return data(self.dbs[run.db], args, self._script_now)
        assert spec.server is not None
        return spec.server(self, run, args, self._script_now)

    # Connections ------------------------------------------------------------

    def take(self, conn: Hashable) -> list[Push]:
        """What was pushed to ``conn`` since the last take, in order."""
        return self.outbox.pop(conn, [])

    def disconnect(self, conn: Hashable) -> None:
        """Connection ``conn`` is closed: its subscriptions and pending pushes go."""
        session = self.sessions.pop(conn, None)
        if session is not None:
            self.pubsub.drop(session)
        self.outbox.pop(conn, None)

    # What a node can suffer -------------------------------------------------

    def flush_scripts(self) -> None:
        """Empty the script cache (SCRIPT FLUSH): EVALSHA answers NOSCRIPT until loaded again."""
        if "script_flush_keeps" not in self.quirks:
            self.scripts.clear()

    def flushall(self) -> None:
        """Delete every key of every database (FLUSHALL); the server goes on."""
        for db in self.dbs:
            db.flush()
        if self.journal is not None:
            self.journal.close()

    def restart(
        self,
        keep: Literal["none", "all", "aof_prefix"] = "none",
        *,
        lost: int = 0,
        run_id: str | None = None,
        replid: str | None = None,
        started: int | None = None,
    ) -> int:
        """Come back as a new server process: new ``run_id`` and ``replid`` (random
        unless given), no scripts, no connections, ``started`` now unless given.

        ``keep``: ``"none"`` empty (no persistence); ``"all"`` every write
        kept; ``"aof_prefix"`` the last ``lost`` write units lost (an append-only
        file missing its last writes; with ``started`` in the past, a
        promoted replica that lagged; with ``run_id=node.run_id``, a primary
        failed over and back). Returns how many units were lost (at most what
        the journal keeps).
        """
        undone = 0
        if keep == "none":
            for db in self.dbs:
                db.data.clear()
                db.expires.clear()
        elif keep == "aof_prefix":
            if self.journal is None:
                raise ValueError("restart(keep='aof_prefix') needs SimNode(journal=N)")
            undone = self.journal.undo(lost)
        if self.journal is not None:
            self.journal.units.clear()
            self.journal.current = {}
        self.run_id = run_id or self._random_id()
        self.replid = replid or self._random_id()
        self.started = self.clock() if started is None else started
        self.pid = 1000 + self.rng.randrange(60000)
        self.scripts.clear()
        self.sessions.clear()
        self.pubsub.clear()
        return undone

    def evict(self, policy: str = "volatile-ttl", count: int = 1) -> list[tuple[bytes, bytes]]:
        """Evict up to ``count`` keys as maxmemory ``policy`` would pick them
        (volatile-ttl: the soonest to expire; volatile-*/allkeys-* lru, lfu,
        random: at random from the node's seed, as no access times are kept).
        The node reports that policy from now on (INFO memory: the census
        flags it). Returns each key evicted, of any database, with what it
        held (a string's value; a hash's fields and values; a sorted set's
        members), space-separated."""
        self.maxmemory, self.maxmemory_policy = 1 << 30, policy
        now = self.clock()
        volatile = policy.startswith("volatile-")
        found: list[tuple[int, bytes, Keyspace]] = []
        for db in self.dbs:
            for key in sorted(db.live_keys(now)):
                at = db.expires.get(key)
                if at is not None or not volatile:
                    found.append((at if at is not None else 0, key, db))
        if policy == "volatile-ttl":
            chosen = sorted(found, key=lambda entry: entry[:2])[:count]
        elif policy.split("-", 1)[-1] in ("lru", "lfu", "random"):
            chosen = self.rng.sample(found, min(count, len(found)))
        else:
            raise ValueError(f"unknown eviction policy {policy!r}")
        evicted = [(key, _held(db.data[key])) for _, key, db in chosen]
        for _, key, db in chosen:
            db.delete(key)
        if self.journal is not None:
            self.journal.close()
        return evicted

    # For comparisons --------------------------------------------------------

    def snapshot(self, db: int = 0) -> dict[bytes, Entry]:
        """Database ``db`` as of now: key -> (type, value, expiry or None), the
        expired keys left out (``Keyspace.snapshot``)."""
        return self.dbs[db].snapshot(self._clock())

    def load(self, snapshot: dict[bytes, Entry], db: int = 0) -> None:
        """Make database ``db`` hold exactly ``snapshot`` (as ``snapshot()`` gives it)."""
        self.dbs[db].load(snapshot)

    def checkpoint(self) -> list[Saved]:
        """A copy of every database's keys and expiries (``rollback`` restores it)."""
        return [db.save() for db in self.dbs]

    def rollback(self, state: list[Saved]) -> None:
        for db, saved in zip(self.dbs, state, strict=True):
            db.restore_all(saved)


def _held(value: object) -> bytes:
    """What a key held, as text to search for tokens (``SimNode.evict``)."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, dict):
        return b" ".join(part for item in value.items() for part in item)
    if isinstance(value, ZSet):
        return b" ".join(value.scores)
    return b""
