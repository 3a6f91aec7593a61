"""Wake-ups over the lean driver: one RESP pub/sub connection per node.

Made by ``RespNode.wake_source`` for the Redlock's ``WakeHub``: a connection
of its own (a subscribed connection cannot run scripts), ``SSUBSCRIBE`` per
channel some waiter wants, reconnected with backoff while channels are wanted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, cast

import hiredis

from ..._base._address import Address, connect
from .._backoff import Backoff
from .._wake import WakeHub
from ._encode import pack

__all__ = ["RespSubscriber"]

_log = logging.getLogger("redlock_async.node")


class _SubConn(asyncio.Protocol):
    def __init__(self, subscriber: RespSubscriber, loop: asyncio.AbstractEventLoop) -> None:
        self.subscriber = subscriber
        self.reader = hiredis.Reader()
        self.transport: asyncio.Transport | None = None
        self.closed: asyncio.Future[None] = loop.create_future()
        self.answered = False  # the node sent one well-formed reply: it speaks RESP

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream connection's transport: read and written, never checked.
        # Not isinstance: uvloop's transports (uvicorn[standard] runs apps
        # on uvloop) have asyncio.Transport's methods but not its class.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        try:
            while (message := self.reader.gets()) is not False:
                self.answered = True
                if isinstance(message, list) and len(message) >= 2:
                    self.subscriber.dispatch(message)
                elif isinstance(message, hiredis.ReplyError):
                    self.subscriber.refused(str(message))
        except hiredis.ProtocolError:
            # Not a Redis server (an HTTP port, say): drop the connection; it
            # is made again with backoff (see RespSubscriber.lost).
            _log.debug(
                "redlock_async: no wake-ups from %s: it does not speak the Redis protocol",
                self.subscriber.address.display,
            )
            if self.transport is not None:
                self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.subscriber.lost(self)
        if not self.closed.done():
            self.closed.set_result(None)


class RespSubscriber:
    """The pub/sub connection to one node, made on first use (a ``Subscriber``).

    ``confirmed`` holds the channels wanted on this node, each with the
    future its ``SSUBSCRIBE`` confirmation settles (True: confirmed on the
    current connection; False: it cannot be for now). Wanting a channel is
    recorded before any I/O, so a waiter that stops waiting for the
    confirmation (``WakeHub.subscribe`` gives nodes ``node_timeout``) still
    gets subscribed once the connection is up; a lost or refused connection is
    re-made while channels are wanted, and every wanted channel is subscribed
    again on it. The backoff grows while connections fail or are lost before
    the node answered anything (e.g. a port that does not speak Redis), and
    resets once a connection gets an answer.
    """

    def __init__(self, hub: WakeHub, address: Address) -> None:
        self.hub = hub
        self.address = address
        self.conn: _SubConn | None = None
        self.connecting: asyncio.Task[None] | None = None
        self.confirmed: dict[bytes, asyncio.Future[bool]] = {}
        self.disabled = False
        # The wait before the next connection attempt (its delay; 0.0: none).
        self.backoff = Backoff(0.05, 2.0, spread=(0.5, 1.5))

    def want(self, channel: bytes) -> None:
        """Subscribe to ``channel`` unless it is wanted already (then it is, or will be)."""
        if self.disabled or channel in self.confirmed:
            return
        future = self.confirmed[channel] = asyncio.get_running_loop().create_future()
        if self.conn is not None:
            self._send(b"SSUBSCRIBE", channel)
        else:
            self._start_connecting()
            if self.backoff.delay:  # the node is failing: poll meanwhile, subscribe later
                future.set_result(False)

    async def ensure(self, channel: bytes) -> None:
        """Subscribe to ``channel`` and wait for the node's confirmation."""
        self.want(channel)
        future = self.confirmed.get(channel)
        if future is not None:
            await asyncio.shield(future)

    def subscribed(self, channel: bytes) -> bool:
        future = self.confirmed.get(channel)
        return self.conn is not None and future is not None and future.done() and future.result()

    def listening(self, channel: bytes) -> bool:
        future = self.confirmed.get(channel)
        # Settled False: it could not be subscribed (or its connection was lost).
        return future is not None and not (future.done() and not future.result())

    def _start_connecting(self) -> None:
        if self.connecting is None and not self.disabled:
            self.connecting = asyncio.get_running_loop().create_task(self._connect())

    def _settle_all(self) -> None:
        # Nothing is heard on these channels now: confirmations still awaited
        # end, confirmed channels are to be subscribed again (see _connect),
        # and the hub lets its waiters poll meanwhile.
        unheard = asyncio.get_running_loop().create_future()
        unheard.set_result(False)
        for channel, future in list(self.confirmed.items()):
            if not future.done():
                future.set_result(False)
            elif future.result():
                self.confirmed[channel] = unheard
        for channel in list(self.confirmed):
            self.hub.unheard(channel)

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        address = self.address
        try:
            while self.confirmed and not self.disabled:
                if self.backoff.delay:
                    await asyncio.sleep(self.backoff.delay)
                    if not self.confirmed or self.disabled:
                        return
                try:
                    factory = lambda: _SubConn(self, loop)  # noqa: E731
                    conn = await connect(address, factory, self.hub.connect_timeout)
                except (OSError, TimeoutError) as exc:
                    _log.debug(
                        "redlock_async: no wake-up connection to %s: %s", address.display, exc
                    )
                    self._settle_all()
                    self.backoff.fail()
                    continue
                if self.disabled:  # closed while connecting
                    if conn.transport is not None:
                        conn.transport.close()
                    return
                self.conn = conn
                auth = address.auth_command()
                if auth is not None:
                    self._send(*auth)
                for channel, future in list(self.confirmed.items()):
                    if future.done():
                        self.confirmed[channel] = loop.create_future()
                    self._send(b"SSUBSCRIBE", channel)
                return
        finally:
            self.connecting = None

    def _send(self, *command: object) -> None:
        if self.conn is not None and self.conn.transport is not None:
            self.conn.transport.write(pack(command))

    def dispatch(self, message: list[Any]) -> None:
        kind = message[0]
        if kind in (b"smessage", b"message") and len(message) >= 3:
            self.hub.notify(message[1], message[2])  # the channel, the released token
        elif kind == b"ssubscribe":
            future = self.confirmed.get(message[1])
            if future is not None and not future.done():
                future.set_result(True)

    def refused(self, message: str) -> None:
        # No sharded pub/sub here (Redis < 7) or no permission: stop asking;
        # this node's waiters poll.
        _log.info("redlock_async: no wake-ups from %s: %s", self.address.display, message)
        self.disabled = True
        self._settle_all()
        if self.conn is not None and self.conn.transport is not None:
            self.conn.transport.close()

    def drop(self, channel: bytes) -> None:
        if self.confirmed.pop(channel, None) is not None:
            self._send(b"SUNSUBSCRIBE", channel)

    def lost(self, conn: _SubConn) -> None:
        if self.conn is conn:
            self.conn = None
            if conn.answered:
                self.backoff.reset()  # a working connection broke: come back at once
            else:
                self.backoff.fail()  # lost before any answer: the node may never answer
            self._settle_all()
            if self.confirmed:  # waiters remain: come back for them
                self._start_connecting()

    def reset(self) -> None:
        # Dropped, not closed: made on another loop, or the parent's after a fork.
        self.conn = None
        self.connecting = None
        self.confirmed = {}
        self.backoff.reset()

    async def aclose(self) -> None:
        self.disabled = True
        if self.connecting is not None:
            self.connecting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.connecting
        conn = self.conn
        if conn is not None and conn.transport is not None:
            conn.transport.close()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    await conn.closed
