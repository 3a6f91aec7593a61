"""The proxy process behind :class:`redlock_async.testing.Proxy` (see ``_proxy.py``).

Run as ``python -m redlock_async.testing._proxyd``; never imported by the
package, so running it as a module does not import it twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import signal
import socket
import struct
import sys
from collections import deque
from typing import Any


class _Pipe:
    """One client connection and its upstream connection."""

    def __init__(self, listener: _Listener) -> None:
        self.listener = listener
        self.writers: list[asyncio.StreamWriter] = []
        self.tasks: list[asyncio.Task[None]] = []

    def abort(self) -> None:
        for writer in self.writers:
            sock = writer.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    # Linger 0: close sends an RST, as a crashed peer or middlebox would.
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
        for task in self.tasks:
            task.cancel()


class _Listener:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self.server: asyncio.Server | None = None
        self.pipes: set[_Pipe] = set()
        self.delay = 0.0
        self.jitter = 0.0
        self.spacing = 0.0
        self.flowing = asyncio.Event()
        self.flowing.set()
        self.drop_replies = False
        # Replies to clients one at a time, at most one per `throttle` s over
        # all connections: a node working through a backlog (0: off).
        self.throttle = 0.0
        self.next_reply = 0.0  # when the last throttled reply is due
        # Set while not throttled: replies the throttle still holds go out at
        # once (the backlog was the fault; heal() ends it).
        self.unthrottled = asyncio.Event()
        self.unthrottled.set()

    async def listen(self) -> None:
        self.server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        pipe = _Pipe(self)
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            pipe.writers.append(writer)
            pipe.abort()
            return
        pipe.writers = [writer, up_writer]
        self.pipes.add(pipe)
        pipe.tasks = [
            asyncio.ensure_future(self._pump(reader, up_writer, pipe, to_server=True)),
            asyncio.ensure_future(self._pump(up_reader, writer, pipe, to_server=False)),
        ]
        await asyncio.gather(*pipe.tasks, return_exceptions=True)
        self.pipes.discard(pipe)
        for w in pipe.writers:
            w.close()

    async def _pump(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        pipe: _Pipe,
        *,
        to_server: bool,
    ) -> None:
        loop = asyncio.get_running_loop()
        queue: deque[tuple[float, bytes, bool]] = deque()  # (due, data, throttled)
        ready = asyncio.Event()
        done = False

        async def deliver() -> None:
            while True:
                while not queue:
                    if done:
                        return
                    ready.clear()
                    await ready.wait()
                due, data, throttled = queue[0]
                wait = due - loop.time()
                if wait > 0 and throttled:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self.unthrottled.wait(), wait)
                elif wait > 0:
                    await asyncio.sleep(wait)
                await self.flowing.wait()
                queue.popleft()
                if to_server or not self.drop_replies:
                    writer.write(data)
                    await writer.drain()

        sender = asyncio.ensure_future(deliver())
        pipe.tasks.append(sender)
        last = 0.0  # when the last chunk is due
        plain = 0.0  # when the last chunk not throttled is due
        replies = None if to_server else _Replies()
        try:
            while data := await reader.read(65536):
                lag = self.delay + (random.uniform(0, self.jitter) if self.jitter else 0.0)
                throttle = self.throttle if replies is not None else 0.0  # replies only
                pieces = [data]
                if replies is not None and (throttle or replies.buffer):
                    # Throttled: whole replies, one at a time. Turned off:
                    # what was held of a reply goes out with the rest.
                    pieces = replies.feed(data) if throttle else [replies.drain() + data]
                for piece in pieces:
                    # Never earlier than the chunk before: a stream keeps its
                    # order (with spacing, a backlog: slow but steady;
                    # throttled replies held when the throttle ends go
                    # out at once, so only the plain ones need counting then).
                    if throttle:
                        last = max(loop.time() + lag, last, self.next_reply + throttle)
                        self.next_reply = last
                    else:
                        last = plain = max(loop.time() + lag, plain + self.spacing)
                    queue.append((last, piece, bool(throttle)))
                ready.set()
        except OSError:
            # A peer that reset its side (RST) ends the stream like a close
            # does: the other side must be cut too, or it stays open for good.
            pass
        finally:
            done = True
            ready.set()
        if self.flowing.is_set():
            with contextlib.suppress(Exception):
                await sender
        else:
            sender.cancel()  # closed while blackholed: held data is lost, as on a dead link
        pipe.abort()

    def cut(self) -> None:
        for pipe in list(self.pipes):
            pipe.abort()
        self.pipes.clear()


class _Replies:
    """Cuts the server's byte stream into whole RESP replies (for ``throttle``).

    It starts at a reply boundary: throttling is switched on while a
    connection is quiet.
    """

    def __init__(self) -> None:
        self.buffer = b""

    def feed(self, data: bytes) -> list[bytes]:
        buffer = self.buffer + data
        whole: list[bytes] = []
        start = 0
        while (end := _reply_end(buffer, start)) is not None:
            whole.append(buffer[start:end])
            start = end
        self.buffer = buffer[start:]
        return whole

    def drain(self) -> bytes:
        rest, self.buffer = self.buffer, b""
        return rest


_LINE = frozenset(b"+-:_#,(")  # a reply on one line
_BULK = frozenset(b"$!=")  # a length, then that many bytes
_AGGREGATE = frozenset(b"*~>")  # a count, then that many replies
_PAIRS = frozenset(b"%|")  # a count, then twice that many


def _reply_end(buffer: bytes, start: int) -> int | None:
    """Where the RESP2/RESP3 reply at ``start`` ends (None: not all here yet)."""
    line_end = buffer.find(b"\r\n", start)
    if line_end < 0:
        return None
    kind = buffer[start]
    end = line_end + 2
    if kind in _LINE:
        return end
    size = int(buffer[start + 1 : line_end])
    if kind in _BULK:
        end += size + 2 if size >= 0 else 0
        return end if len(buffer) >= end else None
    if kind not in _AGGREGATE and kind not in _PAIRS:
        raise ValueError(f"not a RESP reply: {buffer[start : start + 20]!r}")
    for _ in range(max(size, 0) * (2 if kind in _PAIRS else 1)):
        found = _reply_end(buffer, end)
        if found is None:
            return None
        end = found
    return _reply_end(buffer, end) if kind == ord("|") else end  # attributes precede a reply


async def _serve() -> None:
    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    listeners: list[_Listener] = []
    while line := await stdin.readline():
        try:
            answer = await _command(json.loads(line), listeners)
        except Exception as exc:  # report, keep serving
            answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    for listener in listeners:
        listener.cut()


async def _command(msg: dict[str, Any], listeners: list[_Listener]) -> dict[str, Any]:
    cmd = msg["cmd"]
    if cmd == "add":
        listener = _Listener(int(msg["target"]))
        await listener.listen()
        listeners.append(listener)
        return {"ok": True, "id": len(listeners) - 1, "port": listener.port}
    listener = listeners[int(msg["id"])]
    if cmd == "delay":
        listener.delay = float(msg["seconds"])
        listener.jitter = float(msg.get("jitter", 0.0))
        listener.spacing = float(msg.get("spacing", 0.0))
    elif cmd == "blackhole":
        listener.flowing.clear()
    elif cmd == "drop_replies":
        listener.drop_replies = True
    elif cmd == "throttle":
        listener.throttle = float(msg["interval"])
        if listener.throttle:
            listener.unthrottled.clear()
        else:
            listener.unthrottled.set()
    elif cmd == "reset":
        listener.cut()
    elif cmd == "refuse":
        if listener.server is not None:
            listener.server.close()
            listener.server = None
        listener.cut()
    elif cmd == "heal":
        listener.delay = listener.jitter = listener.spacing = listener.throttle = 0.0
        listener.unthrottled.set()  # what the throttle held goes out now
        listener.drop_replies = False
        listener.flowing.set()
        if listener.server is None:
            await listener.listen()
    else:
        return {"ok": False, "error": f"unknown command {cmd!r}"}
    return {"ok": True}


def _main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the test process; it closes us
    asyncio.run(_serve())


if __name__ == "__main__":
    _main()
