"""The real side of the differential check: a throwaway ``redis-server`` and raw connections to it.

The server is the project's own test server (``redlock_async.testing``: a
free port, no persistence, stopped by its pid); commands go out and replies
come back through ``resp.py``, the same code the simulated node's replies go
through, so the two sides are compared as typed values.
"""

from __future__ import annotations

import re
import select
import socket
from collections.abc import Sequence
from types import TracebackType

from redlock_async.testing import RedisServer

from .replies import Error
from .resp import INCOMPLETE, ReplyReader

__all__ = ["DUMP", "RealConn", "RealServer", "pack"]


def pack(args: Sequence[bytes]) -> bytes:
    """A command as clients write it: an array of bulk strings."""
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        out.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(out)


# The real server's whole database 0 at one instant (a script runs alone):
# {sec, usec, {key, type, pexpiretime, value}...}.
DUMP = rb"""
local t = redis.call('TIME')
local out = {t[1], t[2]}
for _, k in ipairs(redis.call('KEYS', '*')) do
    local kind = redis.call('TYPE', k).ok
    local value = false
    if kind == 'string' then value = redis.call('GET', k)
    elseif kind == 'hash' then value = redis.call('HGETALL', k)
    elseif kind == 'zset' then value = redis.call('ZRANGE', k, 0, -1, 'WITHSCORES') end
    out[#out + 1] = {k, kind, redis.call('PEXPIRETIME', k), value}
end
return out
"""


class RealConn:
    """One connection to the real server, RESP2 or (after HELLO 3) RESP3."""

    def __init__(self, port: int, proto: int = 2) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10.0)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = ReplyReader()
        self.proto = proto
        if proto == 3:
            self.call([b"HELLO", b"3"])

    def close(self) -> None:
        self.sock.close()

    def call(self, *commands: Sequence[bytes]) -> list[object]:
        """Send ``commands`` in one write; their replies, in order."""
        self.sock.sendall(b"".join(pack(command) for command in commands))
        replies: list[object] = []
        while len(replies) < len(commands):
            reply = self.reader.get()
            if reply is INCOMPLETE:
                data = self.sock.recv(1 << 20)
                if not data:
                    raise ConnectionError("the real server closed the connection")
                self.reader.feed(data)
            else:
                replies.append(reply)
        return replies

    def send(self, command: Sequence[bytes]) -> None:
        """Send without reading (a subscriber's commands: their confirmations come as pushes)."""
        self.sock.sendall(pack(command))

    def pending(self, wait: float = 0.0) -> list[object]:
        """Whatever the server has sent that was not read yet (pushes), after ``wait`` s."""
        found: list[object] = []
        while True:
            ready, _, _ = select.select([self.sock], [], [], wait)
            if not ready:
                break
            data = self.sock.recv(1 << 20)
            if not data:
                break
            self.reader.feed(data)
            wait = 0.0
        while (reply := self.reader.get()) is not INCOMPLETE:
            found.append(reply)
        return found


class RealServer:
    """A throwaway ``redis-server`` (the reference), with what the check needs to know of it."""

    def __init__(self) -> None:
        self.server = RedisServer()
        self.server.start()
        conn = RealConn(self.server.port)
        try:
            info = conn.call([b"INFO", b"server", b"replication"])[0]
        finally:
            conn.close()
        assert isinstance(info, bytes), info
        self.run_id = _field(info, b"run_id")
        self.replid = _field(info, b"master_replid")
        unixtime = int(_field(info, b"server_time_usec")) // 1_000_000
        self.started = (unixtime - int(_field(info, b"uptime_in_seconds"))) * 1000
        self.pid = int(_field(info, b"process_id"))

    @property
    def port(self) -> int:
        return self.server.port

    def close(self) -> None:
        self.server.stop()

    def __enter__(self) -> RealServer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _field(info: bytes, name: bytes) -> str:
    found = re.search(rb"\r\n" + name + rb":([^\r]*)\r\n", info)
    if found is None:
        raise RuntimeError(f"INFO has no {name!r}")
    return found.group(1).decode()


def is_error(reply: object) -> bool:
    return isinstance(reply, Error)
