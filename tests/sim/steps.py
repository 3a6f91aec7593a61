"""What the differential check sends: the library's scripts, and raw commands.

Arguments are drawn so that the scripts take their interesting branches: a
few names and tokens (so grants collide, match and miss), ttls from 1 ms
(expiring mid-sequence) to 30 s, views of the nodes' epochs holding the
node's epoch or not (STALE), census notices that refuse them or not,
readers alive and dead, waiters queued in and out of turn, fencing counters
behind and ahead of the clock, keys of the wrong type. Each sequence starts
from a random prior state (:meth:`Workload.prior`), built with commands both
sides run. The keys are the library's own (``KeyLayout``), the scripts its
own objects (``ALL_SCRIPTS``, their Redis Cluster twins, ``STATUS``).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from redlock_async._base._keys import KeyLayout, epoch_key
from redlock_async._core._scripts import ALL_SCRIPTS, STATUS
from redlock_async._engine import Script

__all__ = ["SCRIPTS", "Step", "Workload"]

SCRIPTS: dict[str, Script] = {script.name: script for script in (*ALL_SCRIPTS, STATUS)}
"""The library's scripts by name, loaded as the library sends them."""

State = dict[bytes, tuple[str, object, int | None]]
"""The real node's database as last read: key -> (type, value, expiry)."""

PREFIX = "redlock:"
EPOCH = epoch_key(PREFIX)
NOTICES = EPOCH + b"~newest"
NAMES = ("a", "b", "c")
LAYOUTS = [KeyLayout(PREFIX, name) for name in NAMES]
TTLS = (1, 2, 3, 5, 10, 50, 300, 2000, 10_000, 30_000)


@dataclass
class Step:
    """One command for both sides, on one of the check's connections."""

    args: list[bytes]
    conn: str = "main"  # "main" (RESP2), "resp3" (after HELLO 3)
    label: str = ""


class _Draws:
    """The pools random steps draw from, what the real database last held, and prior states."""

    def __init__(self, rng: random.Random, run_id: str, replid: str) -> None:
        self.rng = rng
        self.run_id = run_id.encode()
        self.replid = replid.encode()
        self.tokens = [b"%040x" % rng.getrandbits(160) for _ in range(4)]
        self.ids = [b"%016x" % rng.getrandbits(64) for _ in range(3)]  # epochs of other nodes
        self.waiters = [kind + b"%016x" % rng.getrandbits(64) for kind in (b"x:", b"r:", b"w:")]
        self.state: State = {}
        self.now = 0

    # Helpers ------------------------------------------------------------------

    def _ttl(self) -> int:
        return self.rng.choice(TTLS)

    def _token(self) -> bytes:
        return self.rng.choice(self.tokens)

    def _layout(self) -> KeyLayout:
        return self.rng.choice(LAYOUTS)

    def epoch(self) -> bytes | None:
        entry = self.state.get(EPOCH)
        if entry is None or entry[0] != "hash":
            return None
        fields = entry[1]
        assert isinstance(fields, dict)
        found = fields.get(b"id")
        return found if isinstance(found, bytes) else None

    def _heard(self, with_own: float = 0.7) -> bytes:
        ids = set(self.rng.sample(self.ids, self.rng.randrange(0, 3)))
        own = self.epoch()
        if own is not None and self.rng.random() < with_own:
            ids.add(own)
        return b"," + b",".join(sorted(ids)) + b","

    def record(self) -> bytes:
        """A view's record key, ARGV[#ARGV] of every script that takes a view."""
        return EPOCH + b":" + self._heard(0.8)

    def _readers(self, layout: KeyLayout) -> bytes:
        return self.rng.choice((layout.readers, layout.fair_readers))

    def _key(self, kind: str | None = None) -> bytes:
        """A key, most often one the database holds (so commands meet values, types,
        expiries), of type ``kind`` when one is."""
        held = sorted(key for key, entry in self.state.items() if kind in (None, entry[0]))
        if held and self.rng.random() < 0.6:
            return self.rng.choice(held)
        layout = self._layout()
        pool = (layout.lock, layout.fence, layout.readers, layout.writer_waiting)
        return self.rng.choice((*pool, layout.fair_queue, EPOCH, NOTICES, b"k1", b"k2"))

    def _member(self, key: bytes) -> bytes:
        """A member of ``key`` when it is a sorted set, else a token or a waiter id."""
        entry = self.state.get(key)
        if entry is not None and entry[0] == "zset" and entry[1] and self.rng.random() < 0.7:
            members = entry[1]
            assert isinstance(members, list)
            return bytes(self.rng.choice(members)[0])
        return self.rng.choice((*self.tokens, *self.waiters))

    # Prior states ---------------------------------------------------------------

    def prior(self) -> list[Step]:
        """Commands that build a random starting state (on an empty database)."""
        r, now, steps = self.rng, self.now, []

        def add(*args: bytes) -> None:
            steps.append(Step(list(args), label="prior " + args[0].decode()))

        if r.random() < 0.7:
            own = r.choice(self.ids)
            run = self.run_id if r.random() < 0.8 else b"%040x" % r.getrandbits(160)
            fields = [b"id", own, b"run", run, b"born", b"%d" % (now - r.randrange(10**6))]
            if r.random() < 0.85:
                fields += [b"repl", self.replid if r.random() < 0.85 else b"%040x" % 7]
            view = b"," + own + b","
            add(b"HSET", EPOCH, *fields, view, b"1")
            add(b"SET", EPOCH + b":" + view, b"1", b"PX", b"%d" % self._ttl())
            if r.random() < 0.4:
                add(b"HSET", NOTICES, self._heard(0.5), b"%d" % (now - r.randrange(5000)))
        for layout in LAYOUTS:
            if r.random() < 0.4:
                add(b"SET", layout.lock, self._token(), b"PX", b"%d" % self._ttl())
            if r.random() < 0.3:
                value = r.choice((b"%d" % (now // 1000 * 1_000_000 + 5), b"12", b"junk"))
                add(b"SET", layout.fence, value)
            if r.random() < 0.3:
                add(b"ZADD", layout.readers, b"%d" % (now + r.randrange(-50, 500)), self._token())
            if r.random() < 0.15:
                add(b"SET", layout.writer_waiting, r.choice(self.waiters), b"PX", b"500")
            if r.random() < 0.3:
                ticket = b"%d" % (now - r.randrange(100))
                add(b"ZADD", layout.fair_queue, ticket, r.choice(self.waiters))
                add(
                    b"ZADD",
                    layout.heartbeats,
                    b"%d" % (now + r.randrange(-20, 200)),
                    r.choice(self.waiters),
                )
            if r.random() < 0.1:  # a key of the wrong type where a script expects a string
                add(r.choice((b"HSET", b"ZADD")), layout.lock, b"1", self._token())
        return steps


class Workload(_Draws):
    """Random steps from one seed; ``run_id``/``replid``: the real server's, so epochs match."""

    # Script arguments ----------------------------------------------------------

    def _script_args(self, name: str) -> tuple[list[bytes], list[bytes]]:
        r, layout, token, ttl = self.rng, self._layout(), self._token(), b"%d" % self._ttl()
        fence = [layout.fence] if r.random() < 0.5 else []
        wake = [layout.wake] if r.random() < 0.5 else []
        if name == "acquire":
            return [layout.lock, *fence], [token, ttl]
        if name in ("release", "rw_read_release"):
            key = layout.lock if name == "release" else layout.readers
            return [key, *wake], [token]
        if name in ("extend", "rw_read_extend"):
            key = layout.lock if name == "extend" else layout.readers
            return [key], [token, ttl]
        if name == "extend_many":
            keys, args = [], []
            for _ in range(r.randrange(1, 4)):
                kind = r.choice((b"x", b"r"))
                one = self._layout()
                keys.append(one.lock if kind == b"x" else one.readers)
                args += [kind, self._token(), b"%d" % self._ttl()]
            return keys, args
        if name == "rw_read_acquire":
            return [layout.writer, layout.readers, layout.writer_waiting], [token, ttl]
        if name == "rw_write_acquire":
            keys = [layout.writer, layout.readers, layout.writer_waiting]
            keys += [layout.rw_fence] if fence else []
            return keys, [token, ttl, r.choice(self.waiters[2:]), b"%d" % self._ttl()]
        if name == "fair_acquire":
            waiter = r.choice(self.waiters)
            exclusive = waiter.startswith(b"x:")
            keys = [layout.lock if exclusive else layout.writer, self._readers(layout)]
            keys += (
                [layout.fair_queue, layout.heartbeats]
                if exclusive
                else [
                    layout.rw_queue,
                    layout.rw_heartbeats,
                ]
            )
            keys += fence
            ticket = b"%d.%03d" % (self.now - r.randrange(200), r.randrange(1000))
            return keys, [token, ttl, waiter, ticket, b"%d" % r.choice((2, 50, 2000))]
        if name == "fair_leave":
            return [layout.fair_queue, layout.heartbeats, *wake], [r.choice(self.waiters)]
        if name == "fence_raise":
            value = self.now // 1000 * 1_000_000 + r.randrange(-3, 4) * r.choice((1, 1_000_000))
            return [layout.lock, layout.fence], [token, b"%d" % value]
        if name == "locked":
            return [layout.lock], []
        if name == "holder":
            return [layout.lock, layout.writer, layout.readers], []
        if name == "status":
            keys = [layout.lock, layout.writer, layout.readers, layout.writer_waiting]
            return [*keys, layout.fence, layout.rw_fence, layout.fair_queue, layout.rw_queue], []
        if name in ("multi_acquire", "multi_extend", "multi_release"):
            chosen = sorted(r.sample(LAYOUTS, r.randrange(1, 4)), key=lambda one: one.lock)
            locks = [one.lock for one in chosen]
            token = b"m:" + token
            if name == "multi_release":
                channels = [one.wake for one in chosen] if wake else []
                return [*locks, *channels], [token, b"%d" % len(locks)]
            return locks, [token, ttl]
        if name in ("sem_acquire", "sem_release"):
            limit = r.randrange(1, 4)
            start = r.randrange(limit)
            slots = [layout.semaphore_slot((start + i) % limit) for i in range(limit)]
            if name == "sem_release":
                return slots, [token]
            return slots, [token, ttl, b"%d" % r.randrange(1, limit + 1)]
        if name == "server_id":
            return [], []
        if name == "census":
            args = []
            if r.random() < 0.6:
                args.append(self._heard(0.6))
                if r.random() < 0.6:
                    cut = self.epoch() or r.choice(self.ids)
                    args.append(b",%s=%d," % (cut, self.now - r.randrange(-50, 3000)))
            return [EPOCH], args
        raise AssertionError(name)

    def script(self) -> Step:
        r = self.rng
        name = r.choice(list(SCRIPTS))
        script = SCRIPTS[name]
        keys, args = self._script_args(name)
        if script.views:
            args.append(self.record())
        if script.cluster is not None and r.random() < 0.2:
            script = script.cluster
        how = r.random()
        if how < 0.12:
            head = [b"EVAL", script.source]
        elif how < 0.16:
            return Step([b"SCRIPT", b"LOAD", script.source], label=f"load {name}")
        else:
            head = [b"EVALSHA", script.sha]
        conn = "resp3" if r.random() < 0.15 else "main"
        return Step([*head, b"%d" % len(keys), *keys, *args], conn, name)

    # Raw commands -------------------------------------------------------------

    def _number(self) -> bytes:
        return self.rng.choice(
            (b"0", b"1", b"-5", b"007", b"+3", b"1.5", b"abc", b"9223372036854775807", b"")
        )

    def raw(self) -> Step:
        r = self.rng
        key, token = self._key(), self._token()
        score = b"%d" % (self.now + r.randrange(-100, 100))
        member = self._member(key)
        zset = self._key("zset")
        choices: list[Callable[[], list[bytes]]] = [
            lambda: [b"GET", key],
            lambda: [b"SET", key, token, *self._set_options()],
            lambda: [b"SET", self._key(), token, *r.choice(([], [b"XX"], [b"KEEPTTL"]))],
            lambda: [b"INCR", key],
            lambda: [b"DEL", key, self._key()],
            lambda: [b"EXISTS", key, key, self._key()],
            lambda: [b"TYPE", key],
            lambda: [b"PTTL", key],
            lambda: [b"PEXPIRE", key, r.choice((b"%d" % self._ttl(), b"0", b"-1", b"x"))],
            lambda: [b"HSET", key, b"id", r.choice(self.ids), b"f", token],
            lambda: [b"HGET", key, r.choice((b"id", b"f", b"born"))],
            lambda: [b"HDEL", key, b"f", b"id"],
            lambda: [b"HGETALL", key],
            lambda: [b"ZADD", key, *r.sample((b"NX", b"XX"), r.randrange(0, 3)), score, member],
            lambda: [b"ZADD", zset, r.choice((b"NX", b"XX")), score, self._member(zset)],
            lambda: [b"ZADD", key, score, member, r.choice((score, b"inf", b"x")), token],
            lambda: [b"ZREM", key, member, token],
            lambda: [b"ZSCORE", key, member],
            lambda: [b"ZCARD", key],
            lambda: [b"ZRANK", key, member],
            lambda: [b"ZRANGE", key, b"0", r.choice((b"-1", b"0", b"-2", b"5")), b"WITHSCORES"],
            lambda: [b"ZRANGEBYSCORE", key, b"(" + score, b"+inf", b"WITHSCORES"],
            lambda: [b"ZRANGEBYSCORE", key, b"-inf", score],
            lambda: [b"ZREMRANGEBYSCORE", key, b"-inf", r.choice((score, b"(" + score))],
            lambda: [b"SET", key, self._number(), b"PX", self._number()],
            lambda: [r.choice((b"GET", b"PTTL", b"HGETALL", b"ZCARD"))],
            lambda: [b"SCRIPT", b"EXISTS", r.choice(list(SCRIPTS.values())).sha, b"0" * 40],
            lambda: [b"EVALSHA", b"%040x" % r.getrandbits(160), b"0"],
            lambda: [b"EVAL", b"return 1", self._number()],
            lambda: [b"PING", *([token] if r.random() < 0.5 else [])],
            lambda: [b"INFO", *r.sample((b"server", b"replication", b"nosuch"), r.randrange(1, 3))],
            lambda: [r.choice((b"SPUBLISH", b"PUBLISH")), self._layout().wake, token],
            lambda: [b"SELECT", r.choice((b"0", b"99", b"x"))],
            lambda: [b"CLIENT", b"SETINFO", b"LIB-NAME", b"redis-py"],
            lambda: [b"CLIENT", b"SETINFO", b"LIB-VER", b"8.1.0"],
            lambda: [b"CLIENT", b"MAINT_NOTIFICATIONS", b"ON", b"moving-endpoint-type", b"none"],
            lambda: [b"AUTH", *r.sample((b"default", b"secret"), r.randrange(1, 3))],
            lambda: [b"HELLO", r.choice((b"3", b"4", b"x"))],
        ]
        args = r.choice(choices)()
        if args[0] == b"HELLO":  # the main connection stays RESP2 (the dump reads it)
            return Step(args, "resp3", "raw " + args[0].decode())
        if r.random() < 0.02:  # on the subscribed connection: only (S)(UN)SUBSCRIBE and PING
            return Step(r.choice(([b"PING"], [b"PING", token], args)), "sub", "subscribed")
        conn = "resp3" if r.random() < 0.2 else "main"
        return Step(args, conn, "raw " + args[0].decode())

    def _set_options(self) -> list[bytes]:
        r = self.rng
        options: list[bytes] = []
        if r.random() < 0.5:
            options.append(r.choice((b"NX", b"XX")))
        expiry = r.random()
        if expiry < 0.5:
            options += [b"PX", b"%d" % self._ttl()]
        elif expiry < 0.6:
            options += [b"EX", b"1"]
        elif expiry < 0.7:
            options.append(b"KEEPTTL")
        r.shuffle(options)
        return options

    def next(self) -> Step:
        return self.script() if self.rng.random() < 0.7 else self.raw()
