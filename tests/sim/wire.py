"""The wire of the simulated network: one connection's byte streams and its client transport.

A :class:`Stream` carries one direction of one connection (``net.Link``):
chunks land in order at their scheduled times, are held while the path is
cut and lost for good once one is lost. :class:`SimTransport` is the
client's end, what ``loop.create_connection`` returns to the real driver.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .net import Link

__all__ = ["EOF", "SimTransport", "Stream"]

EOF = b""
"""In a stream, the end of it: a FIN after what was written before."""


class Stream:
    """One direction of one connection: chunks in order, held while cut, lost once lost."""

    def __init__(
        self,
        link: Link,
        up: bool,
        deliver: Callable[[bytes], None],
        context: contextvars.Context,
    ) -> None:
        self._link = link
        self._up = up
        self._deliver = deliver
        self._context = context
        self._sent = 0
        self._next = 0
        self._last = 0.0  # when the last chunk lands: none overtakes it
        self._landed: dict[int, bytes] = {}
        self.broken = False  # a chunk was lost: the rest of the stream is useless

    def send(self, data: bytes) -> None:
        link = self._link
        loop = link.net.loop
        path = link.path
        delay = path.latency + (path._rng.random() * path.jitter if path.jitter else 0.0)
        when = max(loop._now + delay, self._last)  # path.delay(), inline
        self._last = when
        loop.call_at(when, self._land, self._sent, data, context=self._context)
        self._sent += 1

    def _land(self, sequence: int, data: bytes) -> None:
        link = self._link
        if sequence != self._next or self._landed or link.dead:
            self._landed[sequence] = data
            self.pump()
            return
        # The usual case, pump() inline: the next chunk, nothing before it waiting.
        path = link.path
        up = self._up
        if path.blackhole or (not up and path.drop_replies):  # "lost"
            self._next += 1
            self.broken = True
        elif path.up_cut if up else path.down_cut:  # "held"
            self._landed[sequence] = data
        else:
            self._next += 1
            if self.broken:
                return
            self._deliver(data)

    def pump(self) -> None:
        """Deliver what has landed, in order, unless the path holds it."""
        while self._next in self._landed and not self._link.dead:
            state = self._link.path.state(self._up)
            if state == "held":
                return
            data = self._landed.pop(self._next)
            self._next += 1
            if state == "lost" or self.broken:
                self.broken = True
                continue
            self._deliver(data)


class SimTransport(asyncio.Transport):
    """The client's end of a simulated TCP connection."""

    def __init__(self, link: Link) -> None:
        super().__init__()
        self._link = link
        self._closing = False
        self._reading = True

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if data and not self._closing and not self._link.client_gone:
            self._link.up.send(bytes(data))

    def writelines(self, list_of_data: Iterable[bytes | bytearray | memoryview]) -> None:
        self.write(b"".join(list_of_data))

    def close(self) -> None:
        self._end()

    def abort(self) -> None:
        self._end()

    def _end(self) -> None:
        if self._closing:
            return
        self._closing = True
        link = self._link
        link.net.closed_by_client(link)
        link.net.loop.call_soon(link.lost, None, context=link.context)

    def is_closing(self) -> bool:
        return self._closing

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        link = self._link
        if name == "peername":
            return (link.server.ip, link.server.port)
        if name == "sockname":
            return (link.owner_name, 40000 + link.id)
        return default

    def can_write_eof(self) -> bool:
        return False

    def pause_reading(self) -> None:
        self._reading = False

    def resume_reading(self) -> None:
        self._reading = True

    def is_reading(self) -> bool:
        return self._reading

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0
