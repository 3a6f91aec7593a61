"""RESP for the simulated network: commands in, replies out (RESP2 and RESP3).

- :class:`CommandReader` - what a node reads from a client: arrays of bulk
  strings (both protocols send commands so) and inline commands
  (``PING\\r\\n``, as the test harness's readiness check sends them), fed in
  pieces of any size.
- :func:`encode` - a node's reply (``replies.py``) in the connection's protocol.
  The lean driver speaks RESP2 (hiredis); redis-py 8 says ``HELLO 3`` on
  every connection, so maps, doubles, nulls, verbatim strings and pushes go
  out as RESP3 there.
- :class:`ReplyReader` - replies as a client reads them, typed as
  ``replies.py`` types them (the differential check reads the real server
  with it, so both sides go through the same code).
"""

from __future__ import annotations

from .replies import Error, Push, Reply, Status, Verbatim, format_double

__all__ = ["INCOMPLETE", "CommandReader", "ProtocolError", "ReplyReader", "encode"]

_MAX_BULK = 512 * 1024 * 1024
_MAX_ARGS = 1024 * 1024


class ProtocolError(Exception):
    """The peer broke the protocol: a server answers ``-ERR <message>`` and closes."""


class _Incomplete(Exception):
    pass


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "INCOMPLETE"


INCOMPLETE = _Missing()
"""``ReplyReader.get()``: no whole reply has arrived yet."""


class CommandReader:
    """Commands from a byte stream: ``feed(data)``, then ``get()`` until it returns None."""

    def __init__(self) -> None:
        self._buf = b""
        self._pos = 0

    def feed(self, data: bytes) -> None:
        if self._pos:
            self._buf = self._buf[self._pos :] + data if self._pos < len(self._buf) else data
            self._pos = 0
        else:
            self._buf += data

    def get(self) -> list[bytes] | None:
        """The next whole command, or None until more bytes come."""
        buf, pos = self._buf, self._pos
        size = len(buf)
        if pos >= size:
            return None
        while buf[pos] != 42 and buf[pos] in b"\r\n":  # blank lines
            pos += 1
            if pos >= size:
                self._pos = pos
                return None
        self._pos = pos
        if buf[pos] != 42:  # '*'
            return self._inline()
        find = buf.find
        end = find(b"\r\n", pos)
        if end < 0:
            if size - pos > 64 * 1024:
                raise ProtocolError("Protocol error: too big mbulk count string")
            return None
        try:
            count = int(buf[pos + 1 : end])
        except ValueError:
            raise ProtocolError("Protocol error: invalid multibulk length") from None
        if count > _MAX_ARGS:
            raise ProtocolError("Protocol error: invalid multibulk length")
        pos = end + 2
        args: list[bytes] = []
        append = args.append
        while count > 0:
            count -= 1
            end = find(b"\r\n", pos)
            if end < 0:
                return None
            if buf[pos] != 36:  # '$'
                raise ProtocolError(f"Protocol error: expected '$', got '{chr(buf[pos])}'")
            try:
                length = int(buf[pos + 1 : end])
            except ValueError:
                raise ProtocolError("Protocol error: invalid bulk length") from None
            if length < 0 or length > _MAX_BULK:
                raise ProtocolError("Protocol error: invalid bulk length")
            pos = end + 2 + length
            if size < pos + 2:
                return None
            append(buf[end + 2 : pos])
            pos += 2
        self._pos = pos
        return args if args else self.get()

    def _inline(self) -> list[bytes] | None:
        buf, pos = self._buf, self._pos
        end = buf.find(b"\n", pos)
        if end < 0:
            if len(buf) - pos > 64 * 1024:
                raise ProtocolError("Protocol error: too big inline request")
            return None
        line = buf[pos:end].rstrip(b"\r")
        self._pos = end + 1
        if b'"' in line or b"'" in line:
            raise ProtocolError("sim: quoted inline commands are not modelled")
        words = line.split()
        return words if words else self.get()


# Replies out ------------------------------------------------------------------


def encode(reply: Reply | Push, proto: int = 2) -> bytes:
    """``reply`` as the node writes it to a connection speaking RESP ``proto``."""
    if type(reply) is int:
        return b":%d\r\n" % reply
    if type(reply) is bytes:
        return b"$%d\r\n%s\r\n" % (len(reply), reply)
    if reply is None:
        return b"_\r\n" if proto == 3 else b"$-1\r\n"
    out: list[bytes] = []
    _encode(reply, proto, out)
    return b"".join(out)


def _encode(reply: object, proto: int, out: list[bytes]) -> None:
    kind = type(reply)
    if isinstance(reply, int) and kind is int:
        out.append(b":%d\r\n" % reply)
    elif isinstance(reply, bytes) and kind is bytes:
        out.append(b"$%d\r\n%s\r\n" % (len(reply), reply))
    elif reply is None:
        out.append(b"_\r\n" if proto == 3 else b"$-1\r\n")
    elif kind is Status:
        out.append(b"+%s\r\n" % str(reply).encode("utf-8", "surrogateescape"))
    elif kind is Error:
        out.append(b"-%s\r\n" % str(reply).encode("utf-8", "surrogateescape"))
    elif kind is Verbatim:
        text = bytes(reply)  # type: ignore[call-overload]
        if proto == 3:
            out.append(b"=%d\r\ntxt:%s\r\n" % (len(text) + 4, text))
        else:
            out.append(b"$%d\r\n%s\r\n" % (len(text), text))
    elif kind is float:
        text = format_double(reply)  # type: ignore[arg-type]
        out.append(b",%s\r\n" % text if proto == 3 else b"$%d\r\n%s\r\n" % (len(text), text))
    elif kind is list or kind is Push:
        items: list[object] = reply  # type: ignore[assignment]
        mark = b">" if kind is Push and proto == 3 else b"*"
        out.append(b"%s%d\r\n" % (mark, len(items)))
        for item in items:
            _encode(item, proto, out)
    elif kind is dict:
        pairs: dict[object, object] = reply  # type: ignore[assignment]
        if proto == 3:
            out.append(b"%%%d\r\n" % len(pairs))
        else:
            out.append(b"*%d\r\n" % (2 * len(pairs)))
        for key, value in pairs.items():
            _encode(key, proto, out)
            _encode(value, proto, out)
    else:
        raise TypeError(f"not a reply: {reply!r}")


# Replies in ---------------------------------------------------------------------


class ReplyReader:
    """Replies from a byte stream, RESP2 or RESP3: ``feed(data)``, then ``get()``."""

    def __init__(self) -> None:
        self._buf = b""
        self._pos = 0

    def feed(self, data: bytes) -> None:
        self._buf = self._buf[self._pos :] + data
        self._pos = 0

    def get(self) -> object:
        """The next whole reply, or :data:`INCOMPLETE`."""
        try:
            value, self._pos = self._parse(self._pos)
        except _Incomplete:
            return INCOMPLETE
        return value

    def _line(self, pos: int) -> tuple[bytes, int]:
        end = self._buf.find(b"\r\n", pos)
        if end < 0:
            raise _Incomplete
        return self._buf[pos + 1 : end], end + 2

    def _parse(self, pos: int) -> tuple[object, int]:
        if pos >= len(self._buf):
            raise _Incomplete
        mark = self._buf[pos : pos + 1]
        line, pos = self._line(pos)
        if mark == b"+":
            return Status(line.decode("utf-8", "surrogateescape")), pos
        if mark == b"-":
            return Error(line.decode("utf-8", "surrogateescape")), pos
        if mark in (b":", b"("):
            return int(line), pos
        if mark == b"_":
            return None, pos
        if mark == b",":
            return float(line), pos
        if mark == b"#":
            return line == b"t", pos
        if mark in (b"$", b"="):
            size = int(line)
            if size < 0:
                return None, pos
            if len(self._buf) < pos + size + 2:
                raise _Incomplete
            data = self._buf[pos : pos + size]
            return (Verbatim(data[4:]) if mark == b"=" else data), pos + size + 2
        if mark in (b"*", b"~", b">"):
            count = int(line)
            if count < 0:
                return None, pos
            items: list[object] = Push() if mark == b">" else []
            for _ in range(count):
                item, pos = self._parse(pos)
                items.append(item)
            return items, pos
        if mark in (b"%", b"|"):
            pairs: dict[object, object] = {}
            for _ in range(int(line)):
                key, pos = self._parse(pos)
                pairs[key], pos = self._parse(pos)
            if mark == b"|":  # attributes: what they describe follows
                return self._parse(pos)
            return pairs, pos
        raise ProtocolError(f"unknown reply type {mark!r}")
