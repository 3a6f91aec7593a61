"""A stand-in node until ``SimNode`` (``node.py``, branch h-sim) lands: the least that runs
the library's own Lua scripts for plain locks, with SimNode's API.

It runs the scripts in Lua 5.1 (``lupa``, as Redis embeds) over an in-memory
keyspace of strings and hashes with expiry on the node's clock, and answers
what the lean driver and those scripts send: PING, SELECT, INFO, SCRIPT LOAD,
EVALSHA/EVAL, SSUBSCRIBE/SUNSUBSCRIBE, and inside scripts GET, SET, DEL,
EXISTS, PTTL, PEXPIRE, TIME, INFO, HGET, HSET, HGETALL, HDEL, INCR, PUBLISH,
SPUBLISH, and ZRANGEBYSCORE on a key never written. Nothing else (no sorted
sets: no fair queues, read-write locks or semaphores), and nothing here is
held to ``redis-server``: SimNode and its differential check are the model;
this only lets the loop and network be tried with the real client meanwhile.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Hashable
from typing import Any

from lupa import lua51  # type: ignore[import-untyped]  # h-sim adds its override

__all__ = ["NOREPLY", "Error", "Push", "StandInCodec", "StandInNode", "Status"]


class Status(str):
    """``+OK``"""


class Error(str):
    """``-ERR ...``"""


class Push(list[Any]):
    """A message pushed to a subscribed connection."""


NOREPLY = object()

_PRELUDE = """
redis = {}
function redis.pcall(...)
    local ok, value = _call(...)
    if ok then return value end
    return {err = value}
end
function redis.call(...)
    local ok, value = _call(...)
    if ok then return value end
    error(value)
end
function redis.sha1hex(text) return _sha1(text) end
function redis.status_reply(text) return {ok = text} end
function redis.error_reply(text) return {err = text} end
"""


class StandInNode:
    """One node (see the module docstring); ``clock()`` gives its time in ms."""

    def __init__(self, clock: Callable[[], int], seed: int = 0) -> None:
        self.clock = clock
        rng = random.Random(seed)
        self.run_id = f"{rng.getrandbits(160):040x}"
        self.replid = f"{rng.getrandbits(160):040x}"
        self.started = clock()
        self.data: dict[bytes, bytes | dict[bytes, bytes]] = {}
        self.expires: dict[bytes, int] = {}
        self.scripts: dict[bytes, Any] = {}
        self.outbox: dict[Hashable, list[Any]] = {}
        self.channels: dict[bytes, dict[Hashable, None]] = {}
        self.sessions: dict[Hashable, Any] = {}  # SimNode's: a session per connection
        self._lua = lua51.LuaRuntime(encoding=None, unpack_returned_tuples=True)
        self._lua.globals()._call = self._from_lua
        self._lua.globals()._sha1 = lambda text: hashlib.sha1(text).hexdigest().encode()
        self._lua.execute(_PRELUDE.encode())
        self._now = 0

    # Connections.

    def execute(self, args: list[bytes], conn: Hashable = 0) -> Any:
        self._now = self.clock()
        name = args[0].upper()
        if name == b"PING":
            return Status("PONG")
        if name == b"SELECT":
            return Status("OK") if args[1] == b"0" else Error("ERR DB index is out of range")
        if name == b"SCRIPT" and args[1].upper() == b"LOAD":
            return self._load(args[2])
        if name in (b"EVALSHA", b"EVAL"):
            sha = args[1] if name == b"EVALSHA" else self._load(args[1]).encode()
            if sha not in self.scripts:
                return Error("NOSCRIPT No matching script. Please use EVAL.")
            count = int(args[2])
            return self._run(self.scripts[sha], args[3 : 3 + count], args[3 + count :])
        if name in (b"SSUBSCRIBE", b"SUNSUBSCRIBE"):
            mine = [ch for ch, conns in self.channels.items() if conn in conns]
            for channel in args[1:]:
                if name == b"SSUBSCRIBE":
                    self.channels.setdefault(channel, {})[conn] = None
                    mine.append(channel)
                else:
                    self.channels.get(channel, {}).pop(conn, None)
                    mine = [ch for ch in mine if ch != channel]
                self.outbox.setdefault(conn, []).append(Push([name.lower(), channel, len(mine)]))
            return NOREPLY
        return self._command(args)

    def take(self, conn: Hashable) -> list[Any]:
        return self.outbox.pop(conn, [])

    def disconnect(self, conn: Hashable) -> None:
        for conns in self.channels.values():
            conns.pop(conn, None)
        self.outbox.pop(conn, None)

    # Scripts.

    def _load(self, source: bytes) -> Status:
        sha = hashlib.sha1(source).hexdigest().encode()
        if sha not in self.scripts:
            self.scripts[sha] = self._lua.execute(b"return function()\n" + source + b"\nend")
        return Status(sha.decode())

    def _run(self, function: Any, keys: list[bytes], argv: list[bytes]) -> Any:
        lua = self._lua
        lua.globals().KEYS = lua.table_from(keys)
        lua.globals().ARGV = lua.table_from(argv)
        try:
            return self._to_reply(function())
        except lua51.LuaError as error:
            return Error(f"ERR Error running script: {error}")

    def _from_lua(self, *args: Any) -> tuple[bool, Any]:
        words = [arg if isinstance(arg, bytes) else b"%d" % arg for arg in args]
        reply = self._command(words)
        if isinstance(reply, Error):
            return False, str(reply).encode()
        return True, self._to_lua(reply)

    def _to_lua(self, reply: Any) -> Any:
        if isinstance(reply, Status):
            return self._lua.table_from({b"ok": str(reply).encode()})
        if reply is None:
            return False
        if isinstance(reply, list):
            return self._lua.table_from([self._to_lua(item) for item in reply])
        return reply

    def _to_reply(self, value: Any) -> Any:
        if value is None or value is False:
            return None
        if value is True:
            return 1
        if isinstance(value, int | float):
            return int(value)
        if isinstance(value, bytes):
            return value
        err, ok = value[b"err"], value[b"ok"]
        if err is not None:
            return Error(err.decode())
        if ok is not None:
            return Status(ok.decode())
        items = []
        for index in range(1, len(value) + 1):
            if value[index] is None:
                break
            items.append(self._to_reply(value[index]))
        return items

    # Data.

    def _live(self, key: bytes) -> Any:
        when = self.expires.get(key)
        if when is not None and when <= self._now:
            self.data.pop(key, None)
            del self.expires[key]
        return self.data.get(key)

    def _command(self, args: list[bytes]) -> Any:
        name = args[0].upper().decode()
        handler = getattr(self, f"_{name.lower()}", None)
        if handler is None:
            return Error(f"ERR unknown command '{name}' (the stand-in node)")
        return handler(*args[1:])

    def _get(self, key: bytes) -> Any:
        value = self._live(key)
        return Error("WRONGTYPE") if isinstance(value, dict) else value

    def _set(self, key: bytes, value: bytes, *options: bytes) -> Any:
        upper = [option.upper() for option in options]
        exists = self._live(key) is not None
        if (b"NX" in upper and exists) or (b"XX" in upper and not exists):
            return None
        self.data[key] = value
        self.expires.pop(key, None)
        if b"PX" in upper:
            self.expires[key] = self._now + int(options[upper.index(b"PX") + 1])
        return Status("OK")

    def _del(self, *keys: bytes) -> int:
        gone = 0
        for key in keys:
            if self._live(key) is not None:
                del self.data[key]
                self.expires.pop(key, None)
                gone += 1
        return gone

    def _exists(self, *keys: bytes) -> int:
        return sum(self._live(key) is not None for key in keys)

    def _pttl(self, key: bytes) -> int:
        if self._live(key) is None:
            return -2
        when = self.expires.get(key)
        return -1 if when is None else when - self._now

    def _pexpire(self, key: bytes, ms: bytes) -> int:
        if self._live(key) is None:
            return 0
        self.expires[key] = self._now + int(ms)
        return 1

    def _time(self) -> list[bytes]:
        return [b"%d" % (self._now // 1000), b"%d" % (self._now % 1000 * 1000)]

    def _info(self, *sections: bytes) -> bytes:
        uptime = (self._now - self.started) // 1000
        return (
            f"# Server\r\nredis_version:7.0.15\r\nrun_id:{self.run_id}\r\n"
            f"uptime_in_seconds:{uptime}\r\n# Replication\r\nrole:master\r\n"
            f"master_replid:{self.replid}\r\n"
        ).encode()

    def _hash(self, key: bytes) -> dict[bytes, bytes] | None:
        value = self._live(key)
        return value if isinstance(value, dict) else None

    def _hget(self, key: bytes, field: bytes) -> Any:
        return (self._hash(key) or {}).get(field)

    def _hset(self, key: bytes, *pairs: bytes) -> int:
        found = self._hash(key)
        if found is None:
            found = self.data[key] = {}
        new = 0
        for field, value in zip(pairs[::2], pairs[1::2], strict=True):
            new += field not in found
            found[field] = value
        return new

    def _hgetall(self, key: bytes) -> list[bytes]:
        return [item for pair in (self._hash(key) or {}).items() for item in pair]

    def _hdel(self, key: bytes, *fields: bytes) -> int:
        found = self._hash(key) or {}
        gone = sum(found.pop(field, None) is not None for field in fields)
        if not found:
            self._del(key)
        return gone

    def _incr(self, key: bytes) -> int:
        value = int(self._live(key) or 0) + 1
        self.data[key] = b"%d" % value
        return value

    def _spublish(self, channel: bytes, message: bytes) -> int:
        listeners = self.channels.get(channel, {})
        for conn in listeners:
            self.outbox.setdefault(conn, []).append(Push([b"smessage", channel, message]))
        return len(listeners)

    _publish = _spublish

    def _zrangebyscore(self, key: bytes, *args: bytes) -> list[bytes]:
        return []  # no sorted set is ever written here (holder.lua reads readers' one)


class StandInCodec:
    """RESP2 for the stand-in: commands in (arrays of bulk strings), replies out."""

    NOREPLY = NOREPLY

    def reader(self) -> _Reader:
        return _Reader()

    def encode(self, reply: Any, proto: int) -> bytes:
        if isinstance(reply, Error):
            return b"-%s\r\n" % " ".join(reply.split()).encode()
        if isinstance(reply, Status):
            return b"+%s\r\n" % reply.encode()
        if isinstance(reply, int):
            return b":%d\r\n" % reply
        if isinstance(reply, bytes):
            return b"$%d\r\n%s\r\n" % (len(reply), reply)
        if reply is None:
            return b"$-1\r\n"
        return b"*%d\r\n" % len(reply) + b"".join(self.encode(item, proto) for item in reply)

    def proto(self, node: Any, conn: Hashable) -> int:
        return 2


class _Reader:
    def __init__(self) -> None:
        self._buf = b""

    def feed(self, data: bytes) -> None:
        self._buf += data

    def get(self) -> list[bytes] | None:
        buf = self._buf
        end = buf.find(b"\r\n")
        if end < 0:
            return None
        count, pos, words = int(buf[1:end]), end + 2, []
        for _ in range(count):
            end = buf.find(b"\r\n", pos)
            if end < 0:
                return None
            size = int(buf[pos + 1 : end])
            if len(buf) < end + 2 + size + 2:
                return None
            words.append(buf[end + 2 : end + 2 + size])
            pos = end + 2 + size + 2
        self._buf = buf[pos:]
        return words
