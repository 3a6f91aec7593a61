"""A simulated node's host: its port, its connections, its one command queue.

Bytes that land from a connection are cut into whole RESP commands; the
node runs them one at a time, in arrival order across connections (Redis is
single-threaded), each answered on its own connection, with whatever the
command pushed to other connections (pub/sub) sent after it. The host can be
paused (SIGSTOP: commands wait unread), slowed (each command takes
``service`` seconds), stopped (connections reset, new ones refused) and
restarted (``SimNode.restart``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

from . import replies, resp
from .wire import EOF

if TYPE_CHECKING:
    from .net import Link, Network, NodeLike

__all__ = ["Server"]


class Server:
    """A node's host: its listening port, its connections, its one command queue."""

    def __init__(self, net: Network, name: str, ip: str, port: int, node: NodeLike) -> None:
        self.net = net
        self.name = name
        self.ip = ip
        self.port = port
        self.node = node
        self.paused = False
        self.stopped = False
        self.service = 0.0  # seconds each command takes (a slow node)
        self._queue: deque[tuple[Link, list[bytes] | None]] = deque()  # None: the FIN
        self._busy = False
        self.executed = 0

    def arrive(self, link: Link, data: bytes) -> None:
        if data == EOF:
            self._queue.append((link, None))
        else:
            link.reader.feed(data)
            try:
                while (args := link.reader.get()) is not None:
                    self._queue.append((link, args))
            except resp.ProtocolError as error:  # as Redis: an error, then it hangs up
                codec = self.net.codec
                link.down.send(codec.encode(replies.Error(f"ERR {error}"), 2))
                link.down.send(EOF)
        self._work()

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False
        self._work()

    def _work(self) -> None:
        while self._queue and not self._busy and not self.paused:
            link, args = self._queue.popleft()
            if args is None:
                self._hang_up(link)
            elif link.dead:
                continue  # reset: what it had not read is gone
            elif self.service:  # a slow node: run (and answer) once it is done
                self._busy = True
                loop = self.net.loop
                loop.call_later(self.service, self._done, link, args, context=self.net.context)
            else:
                self._execute(link, args)

    def _done(self, link: Link, args: list[bytes]) -> None:
        self._busy = False
        if not link.dead:
            self._execute(link, args)
        self._work()

    def _execute(self, link: Link, args: list[bytes]) -> None:
        net = self.net
        reply = self.node.execute(args, link.id)
        self.executed += 1
        net.record(self, link, args, reply)
        codec = net.codec
        if reply is not codec.NOREPLY:
            link.down.send(codec.encode(reply, codec.proto(self.node, link.id)))
        self._flush_pushes()

    def _flush_pushes(self) -> None:
        outbox: dict[Hashable, list[Any]] | None = getattr(self.node, "outbox", None)
        if not outbox:
            return
        codec = self.net.codec
        for conn in list(outbox):
            pushes = self.node.take(conn)
            link = self.net.links.get(conn) if isinstance(conn, int) else None
            if link is None or link.dead or not pushes:
                continue
            proto = codec.proto(self.node, conn)
            link.down.send(b"".join(codec.encode(push, proto) for push in pushes))

    def _hang_up(self, link: Link) -> None:
        if not link.dead:
            self.net.forget(link)

    def stop(self) -> None:
        """Stop the node: open connections reset, new ones refused (until ``start``)."""
        self.stopped = True
        for link in [link for link in self.net.links.values() if link.server is self]:
            self.net.reset_link(link)
        self._queue.clear()

    def start(self) -> None:
        self.stopped = False

    def restart(self, down_for: float = 0.0, **restart: Any) -> None:
        """Kill the node now (connections reset, what it had not run is gone) and
        start it again ``down_for`` seconds later as a new server process
        (``SimNode.restart(**restart)``: empty by default)."""
        self.stop()

        def again() -> None:
            self.node.restart(**restart)  # type: ignore[attr-defined]
            self.start()

        self.net.loop.call_later(down_for, again, context=self.net.context)
