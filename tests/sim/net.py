"""The simulated network: TCP between simulated processes and simulated nodes.

``SimLoop.create_connection`` lands here (:meth:`Network.connect`): the real
lean driver gets an :class:`asyncio.Transport` whose bytes travel as events
on the virtual clock, in order per direction, each chunk delayed by its
path's latency plus seeded jitter (``wire.py``: the streams and the
transport). A node's host (``host.py``) reads whole RESP commands, hands
them to the node object (``execute(args, conn)``, as ``SimNode`` answers it)
and writes back its replies and pushes.

Every (process, node) :class:`Path` can be made to

* ``delay`` (latency and jitter, one way),
* ``refuse`` new connections (``ConnectionRefusedError`` after a round trip),
* ``blackhole``: connects hang (until the client's own timeout) and bytes
  are lost either way - the connection is dead for good, as a stream with a
  hole in it would be,
* ``drop_replies``: the node runs what it gets, its answers are lost,
* be ``cut`` one way or both (a partition, asymmetric ones included, or a
  stall): bytes are held, not lost, and arrive in order once healed (as TCP
  retransmits them); connects hang meanwhile,
* ``reset``: every connection on it is reset now (the client's protocol
  gets ``connection_lost(ConnectionResetError)``).

A node itself can be paused (SIGSTOP: connections are still accepted,
commands wait unread), slowed (each command takes ``service`` seconds),
stopped (connections refused, open ones reset) or restarted: ``host.Server``.
"""

from __future__ import annotations

import asyncio
import contextvars
import random
from collections.abc import Callable, Hashable, Iterable
from typing import Any, Protocol

from . import replies, resp
from .host import Server
from .loop import Owner, SimLoop
from .wire import EOF, SimTransport, Stream

__all__ = ["RESP", "Codec", "Link", "Network", "NodeLike", "Path", "Server", "SimTransport"]


class NodeLike(Protocol):
    """What the network needs of a node (``SimNode``'s API)."""

    def execute(self, args: list[bytes], conn: Hashable = 0) -> Any: ...

    def take(self, conn: Hashable) -> list[Any]: ...

    def disconnect(self, conn: Hashable) -> None: ...


class Reader(Protocol):
    def feed(self, data: bytes) -> None: ...

    def get(self) -> list[bytes] | None: ...


class Codec(Protocol):
    """RESP as a node speaks it (``resp.py``): commands in, replies out."""

    NOREPLY: object

    def reader(self) -> Reader: ...

    def encode(self, reply: Any, proto: int) -> bytes: ...

    def proto(self, node: NodeLike, conn: Hashable) -> int: ...


class _Resp:
    """``resp.py`` and SimNode's sessions: each connection in the protocol it chose
    (RESP2, or RESP3 after ``HELLO 3``)."""

    NOREPLY: object = replies.NOREPLY

    def reader(self) -> Reader:
        return resp.CommandReader()

    def encode(self, reply: Any, proto: int) -> bytes:
        return resp.encode(reply, proto)

    def proto(self, node: NodeLike, conn: Hashable) -> int:
        sessions = getattr(node, "sessions", None)
        session = None if sessions is None else sessions.get(conn)
        return 2 if session is None else int(session.proto)


RESP: Codec = _Resp()
"""The codec of SimNode."""


class Path:
    """The faults between one process and one node (both directions)."""

    def __init__(self, rng: random.Random, latency: float, jitter: float) -> None:
        self._rng = rng
        self.latency = latency  # one way, seconds
        self.jitter = jitter  # uniform [0, jitter) more per chunk
        self.refuse = False
        self.blackhole = False
        self.drop_replies = False
        self.up_cut = False  # process -> node held
        self.down_cut = False  # node -> process held
        self.links: dict[Link, None] = {}  # open connections, in the order made

    def delay(self) -> float:
        return self.latency + (self._rng.random() * self.jitter if self.jitter else 0.0)

    def state(self, up: bool) -> str:
        """What happens now to a chunk landing one way: "open", "held" or "lost"."""
        if self.blackhole or (not up and self.drop_replies):
            return "lost"
        if self.up_cut if up else self.down_cut:
            return "held"
        return "open"

    @property
    def connectable(self) -> bool:
        return not (self.blackhole or self.up_cut or self.down_cut)


class Link:
    """One TCP connection between a process and a node."""

    def __init__(
        self,
        net: Network,
        id: int,
        owner: Owner | None,
        context: contextvars.Context,
        path: Path,
        server: Server,
        protocol: asyncio.Protocol,
    ) -> None:
        self.net = net
        self.id = id  # the node's ``conn``
        self.owner = owner
        self.owner_name = owner.name if owner is not None else "sim"
        self.context = context  # the owner's: its protocol's callbacks run there
        self.path = path
        self.server = server
        self.protocol = protocol
        self.transport = SimTransport(self)
        self.reader = net.codec.reader()
        self.dead = False  # reset, or closed and its FIN landed: nothing more flows
        self.client_gone = False
        self.up = Stream(self, True, self._to_node, net.context)
        self.down = Stream(self, False, self._to_client, context)

    def _to_node(self, data: bytes) -> None:
        self.server.arrive(self, data)

    def _to_client(self, data: bytes) -> None:
        if self.client_gone:
            return
        if data == EOF:  # the node closed it, after what it had written
            self.client_gone = True
            self.net.forget(self)
            self.protocol.connection_lost(None)
        else:
            self.protocol.data_received(data)

    def lost(self, exc: Exception | None) -> None:
        self.protocol.connection_lost(exc)


class Network:
    """Paths between processes and nodes; every connection; a trace of what nodes ran."""

    def __init__(
        self,
        loop: SimLoop,
        rng: random.Random,
        codec: Codec,
        *,
        latency: float = 0.0002,
        jitter: float = 0.0002,
    ) -> None:
        self.loop = loop
        loop.net = self
        self.rng = rng
        self.codec = codec
        self.latency = latency
        self.jitter = jitter
        # The network's own context: no process owns what lands at a node.
        self.context = contextvars.Context()
        self.servers: dict[tuple[str, int], Server] = {}
        self.paths: dict[tuple[str, str], Path] = {}
        self.links: dict[int, Link] = {}
        self._ids = 0
        self.trace: list[str] = []  # every command a node ran, with its time and reply
        self.tracing = True  # False: no trace (a long run's history is kept elsewhere)
        self.connects = 0

    # The layout.

    def add(self, name: str, ip: str, node: NodeLike, port: int = 6379) -> Server:
        server = self.servers[ip, port] = Server(self, name, ip, port, node)
        return server

    def path(self, process: str, node: str) -> Path:
        """The path between ``process`` and node ``node`` (made on first use)."""
        found = self.paths.get((process, node))
        if found is None:
            found = self.paths[process, node] = Path(self.rng, self.latency, self.jitter)
        return found

    def record(self, server: Server, link: Link, args: list[bytes], reply: Any) -> None:
        if not self.tracing:
            return
        words = b" ".join(
            arg if len(arg) <= 80 else arg[:40] + b"...(%d)" % len(arg) for arg in args
        )
        when = f"{self.loop.time():.6f}"
        self.trace.append(
            f"{when} {server.name} {link.owner_name}#{link.id} {words!r} -> {reply!r}"
        )

    # Connections.

    async def connect(
        self,
        owner: Owner | None,
        factory: Callable[[], asyncio.BaseProtocol],
        host: str,
        port: int,
    ) -> tuple[asyncio.Transport, asyncio.BaseProtocol]:
        self.connects += 1
        server = self.servers.get((host, port))
        name = owner.name if owner is not None else "sim"
        path = self.path(name, server.name if server is not None else host)
        if not path.connectable:
            await self.loop.create_future()  # SYNs lost: the caller's timeout ends this
        await asyncio.sleep(path.delay() + path.delay())  # SYN, SYN-ACK
        if server is None or server.stopped or path.refuse:
            raise ConnectionRefusedError(111, f"Connect call failed ({host!r}, {port})")
        if not path.connectable:  # cut while the handshake was under way
            await self.loop.create_future()
        protocol = factory()
        if not isinstance(protocol, asyncio.Protocol):
            raise TypeError(f"{protocol!r}: only stream protocols are simulated")
        self._ids += 1
        link = Link(self, self._ids, owner, contextvars.copy_context(), path, server, protocol)
        self.links[link.id] = link
        path.links[link] = None
        protocol.connection_made(link.transport)
        return link.transport, protocol

    def closed_by_client(self, link: Link) -> None:
        """The client closed (or aborted): the node sees it after what was written."""
        link.client_gone = True
        link.up.send(EOF)

    def forget(self, link: Link) -> None:
        link.dead = True
        self.links.pop(link.id, None)
        link.path.links.pop(link, None)
        link.server.node.disconnect(link.id)

    def reset_link(self, link: Link) -> None:
        """Reset ``link`` now: both ends learn at once; nothing in flight arrives."""
        if link.dead:
            return
        self.forget(link)
        if not link.client_gone:
            link.client_gone = True
            error = ConnectionResetError(104, "Connection reset by peer")
            self.loop.call_soon(link.lost, error, context=link.context)

    def drop_process(self, owner: Owner) -> None:
        """``owner`` crashed: the kernel closes its sockets (the nodes see a FIN
        after what was sent); the process itself hears nothing more."""
        for link in [link for link in self.links.values() if link.owner is owner]:
            if not link.client_gone:
                self.closed_by_client(link)

    # Faults by path, and partitions.

    def paths_between(self, processes: Iterable[str], nodes: Iterable[str]) -> list[Path]:
        return [self.path(process, node) for process in processes for node in nodes]

    def cut(self, processes: Iterable[str], nodes: Iterable[str], *, up: bool = True,
            down: bool = True) -> None:  # fmt: skip
        """Hold bytes between ``processes`` and ``nodes``: ``up`` (to the nodes),
        ``down`` (to the processes) or both - a partition, asymmetric or not."""
        for path in self.paths_between(processes, nodes):
            path.up_cut = path.up_cut or up
            path.down_cut = path.down_cut or down

    def heal(
        self, processes: Iterable[str] | None = None, nodes: Iterable[str] | None = None
    ) -> None:
        """Undo cuts, blackholes, refusals and dropped replies (on every path by default);
        what was held arrives, in order, after one more trip."""
        for (process, node), path in self.paths.items():
            if (processes is None or process in processes) and (nodes is None or node in nodes):
                path.up_cut = path.down_cut = False
                path.blackhole = path.refuse = path.drop_replies = False
                for link in path.links:
                    self.loop.call_later(path.delay(), link.up.pump, context=self.context)
                    self.loop.call_later(path.delay(), link.down.pump, context=link.context)

    def reset(self, process: str, node: str) -> None:
        for link in list(self.path(process, node).links):
            self.reset_link(link)
