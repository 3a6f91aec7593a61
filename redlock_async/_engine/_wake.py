"""Waiters woken by releases: one sharded pub/sub connection per node.

A release script announces itself on the lock's channel (``SPUBLISH``). A
waiting ``acquire()`` subscribes to that channel on every node and retries as
soon as any node announces a release, falling back to its jittered retry
delay when nothing comes: a message is a hint, never the source of truth, so
a lost one costs at most one retry delay.

Subscriptions are shared: one connection per node per Redlock, one
``SSUBSCRIBE`` per channel however many waiters, ``SUNSUBSCRIBE`` when the
last waiter of a channel leaves. Nodes reached through redis-py (TLS,
clients passed in, Redis Cluster) subscribe through the client's own pub/sub.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

import hiredis
from redis.asyncio import Redis, RedisCluster

from .._address import Address, connect

__all__ = ["Subscription", "WakeHub"]

_log = logging.getLogger("redlock_async")
_pack: Any = hiredis.pack_command
# Reconnect backoff of a wake-up connection (seconds, doubled up to the cap).
_BACKOFF_FIRST = 0.05
_BACKOFF_MAX = 2.0


class _SubConn(asyncio.Protocol):
    def __init__(self, subscriber: _Subscriber, loop: asyncio.AbstractEventLoop) -> None:
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
            # is made again with backoff (see _Subscriber.lost).
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


class _Subscriber:
    """The pub/sub connection to one node, made on first use.

    ``confirmed`` holds the channels wanted on this node, each with the
    future its ``SSUBSCRIBE`` confirmation settles. Wanting a channel is
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
        self.confirmed: dict[bytes, asyncio.Future[None]] = {}
        self.disabled = False
        self.backoff = 0.0  # wait before the next connection attempt (0: none)

    async def ensure(self, channel: bytes) -> None:
        """Subscribe to ``channel`` and wait for the node's confirmation."""
        if self.disabled:
            return
        future = self.confirmed.get(channel)
        if future is None:
            future = self.confirmed[channel] = asyncio.get_running_loop().create_future()
            if self.conn is not None:
                self._send(b"SSUBSCRIBE", channel)
            else:
                self._start_connecting()
                if self.backoff:  # the node is failing: poll meanwhile, subscribe later
                    future.set_result(None)
        await asyncio.shield(future)

    def _start_connecting(self) -> None:
        if self.connecting is None and not self.disabled:
            self.connecting = asyncio.get_running_loop().create_task(self._connect())

    def _settle_all(self) -> None:
        # Confirmations that cannot come now: their waiters poll meanwhile.
        for future in self.confirmed.values():
            if not future.done():
                future.set_result(None)

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        address = self.address
        try:
            while self.confirmed and not self.disabled:
                if self.backoff:
                    await asyncio.sleep(self.backoff * random.uniform(0.5, 1.5))
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
                    self._failed()
                    continue
                if self.disabled:  # closed while connecting
                    if conn.transport is not None:
                        conn.transport.close()
                    return
                self.conn = conn
                if address.password is not None:
                    auth: tuple[object, ...] = (b"AUTH", address.password)
                    if address.username is not None:
                        auth = (b"AUTH", address.username, address.password)
                    self._send(*auth)
                for channel, future in list(self.confirmed.items()):
                    if future.done():
                        self.confirmed[channel] = loop.create_future()
                    self._send(b"SSUBSCRIBE", channel)
                return
        finally:
            self.connecting = None

    def _failed(self) -> None:
        self.backoff = min(self.backoff * 2, _BACKOFF_MAX) if self.backoff else _BACKOFF_FIRST

    def _send(self, *command: object) -> None:
        if self.conn is not None and self.conn.transport is not None:
            self.conn.transport.write(_pack(command))

    def dispatch(self, message: list[Any]) -> None:
        kind = message[0]
        if kind in (b"smessage", b"message"):
            self.hub.notify(message[1])
        elif kind == b"ssubscribe":
            future = self.confirmed.get(message[1])
            if future is not None and not future.done():
                future.set_result(None)

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
                self.backoff = 0.0  # a working connection broke: come back at once
            else:
                self._failed()  # lost before any answer: the node may never answer
            self._settle_all()
            if self.confirmed:  # waiters remain: come back for them
                self._start_connecting()

    def reset(self) -> None:
        # Dropped, not closed: made on another loop, or the parent's after a fork.
        self.conn = None
        self.connecting = None
        self.confirmed = {}
        self.backoff = 0.0

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


class _RedisPySubscriber:
    """Release announcements through a redis-py client's own pub/sub connection."""

    def __init__(self, hub: WakeHub, client: Redis | RedisCluster, name: str) -> None:
        self.hub = hub
        self.client = client
        self.name = name
        self.pubsub: Any = None
        self.reader: asyncio.Task[None] | None = None
        self.channels: set[bytes] = set()
        self.subscribing: dict[bytes, asyncio.Task[None]] = {}
        self.tasks: set[asyncio.Task[Any]] = set()
        # redis-py's PubSub opens its connection on the first command without
        # a lock: two commands racing there open two connections and the
        # first one, subscribed, is orphaned. Our commands go one at a time.
        self._serial: asyncio.Lock | None = None

    async def ensure(self, channel: bytes) -> None:
        if channel in self.channels:
            return
        # The subscribing runs on its own, so a waiter that stops waiting for
        # it (WakeHub.subscribe gives nodes node_timeout) neither aborts it
        # half way nor leaves a subscription we do not know about.
        task = self.subscribing.get(channel)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._subscribe(channel))
            self.subscribing[channel] = task
            task.add_done_callback(lambda _: self.subscribing.pop(channel, None))
        await asyncio.shield(task)

    async def _subscribe(self, channel: bytes) -> None:
        try:
            if self.pubsub is None:
                if isinstance(self.client, RedisCluster):
                    await self.client.initialize()  # the slot map routes the channel
                self.pubsub = self.client.pubsub()
            pubsub = self.pubsub
            await self._one_at_a_time(lambda: pubsub.ssubscribe(channel))
        except Exception as exc:  # the node is down or refuses: its waiters poll
            _log.debug("redlock_async: no wake-ups from %s: %s", self.name, exc)
            return
        if pubsub is not self.pubsub:
            # The reader let this pubsub go meanwhile (connection lost, or its
            # last channel left): our SSUBSCRIBE may have gone out on a
            # connection of its own that nobody reads. Close it again.
            self._spawn(pubsub.aclose())
            return
        if not self.hub.wanted(channel):  # every waiter left meanwhile
            self._spawn(self._one_at_a_time(lambda: pubsub.sunsubscribe(channel)))
            return
        self.channels.add(channel)
        if self.reader is None:
            self.reader = asyncio.get_running_loop().create_task(self._read(pubsub))

    async def _read(self, pubsub: Any) -> None:
        try:
            if isinstance(self.client, RedisCluster):
                # A cluster's sharded messages arrive through their own reader.
                while True:
                    message = await pubsub.get_sharded_message(
                        ignore_subscribe_messages=True, timeout=1.0
                    )
                    if message is None:
                        # redis-py may return at once (e.g. no shard subscribed
                        # any more): never spin on the event loop.
                        await asyncio.sleep(0.05)
                    elif message.get("type") == "smessage":
                        self.hub.notify(message["channel"])
            else:
                async for message in pubsub.listen():
                    if message.get("type") in ("smessage", "message"):
                        self.hub.notify(message["channel"])
                # listen() ends once the last channel is unsubscribed. The
                # connection is fine: keep it for the next waiter (closing it
                # here would race subscriptions in flight on it, which redis-py
                # would then send on a connection nobody reads); the next
                # subscription starts a reader again (_subscribe).
                if self.pubsub is pubsub:
                    self.reader = None
                return
        except Exception as exc:  # connection lost: resubscribe on the next wait
            _log.debug("redlock_async: wake-up connection to %s lost: %s", self.name, exc)
        if self.pubsub is pubsub:
            self.pubsub = None
            self.reader = None
            self.channels.clear()
            self._spawn(pubsub.aclose())

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            _log.debug("redlock_async: wake-up housekeeping on %s: %s", self.name, task.exception())

    def drop(self, channel: bytes) -> None:
        # Unsubscribed whether or not our bookkeeping knows the channel: a
        # subscription that raced a reconnect or a cancelled waiter would
        # otherwise stay on the server (SUNSUBSCRIBE of an unknown channel
        # is harmless).
        self.channels.discard(channel)
        pubsub = self.pubsub
        if pubsub is not None and pubsub.connection is not None:
            self._spawn(self._one_at_a_time(lambda: pubsub.sunsubscribe(channel)))

    async def _one_at_a_time(self, command: Callable[[], Awaitable[object]]) -> None:
        if self._serial is None:
            self._serial = asyncio.Lock()
        async with self._serial:
            await command()

    def reset(self) -> None:
        self.pubsub = None
        self.reader = None
        self.channels = set()
        self.subscribing = {}
        self.tasks = set()
        self._serial = None

    async def aclose(self) -> None:
        subscribing = list(self.subscribing.values())
        for task in subscribing:
            task.cancel()
        if subscribing:
            await asyncio.wait(subscribing)
        if self.reader is not None:
            self.reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.reader
        if self.tasks:
            await asyncio.wait(set(self.tasks), timeout=1.0)
        if self.pubsub is not None:
            await self.pubsub.aclose()
            self.pubsub = None


class Subscription:
    """One waiter's interest in a channel; ``wait(timeout)`` returns early on a release."""

    def __init__(self, hub: WakeHub, channel: bytes) -> None:
        self._hub = hub
        self.channel = channel
        self.event = asyncio.Event()

    async def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds; True if a release was announced."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self.event.wait()
        woken = self.event.is_set()
        self.event.clear()
        return woken

    def close(self) -> None:
        self._hub._leave(self)


class WakeHub:
    """The pub/sub side of one Redlock: subscribers per node, waiters per channel."""

    def __init__(
        self, sources: Sequence[Address | Redis | RedisCluster | None], node_timeout: float
    ) -> None:
        # A node is reached either at an address (the lean driver) or through
        # a redis-py client; None: no wake-ups from it (its waiters poll).
        self._subscribers: list[_Subscriber | _RedisPySubscriber] = []
        for source in sources:
            if isinstance(source, Address):
                self._subscribers.append(_Subscriber(self, source))
            elif source is not None:
                self._subscribers.append(_RedisPySubscriber(self, source, repr(source)))
        self._waiters: dict[bytes, set[Subscription]] = {}
        self.node_timeout = node_timeout
        self.connect_timeout = max(node_timeout, 0.5)

    @property
    def enabled(self) -> bool:
        return bool(self._subscribers)

    async def subscribe(self, channel: bytes, timeout: float | None = None) -> Subscription:
        """Join ``channel``; returns once the nodes confirmed, or after ``timeout``
        seconds (default: node_timeout) with the late nodes still subscribing.

        Cancelled (or failing) while it waits, it leaves the channel again, so
        nothing stays subscribed for a waiter that is gone.
        """
        if timeout is None:
            timeout = self.node_timeout
        subscription = Subscription(self, channel)
        # Registered before any I/O: a node may confirm (and a release be
        # announced) before the others answer.
        self._waiters.setdefault(channel, set()).add(subscription)
        pending = [asyncio.ensure_future(s.ensure(channel)) for s in self._subscribers]
        try:
            # A slow or dead node must not hold the waiter back: it just won't wake it.
            _, late = await asyncio.wait(pending, timeout=timeout)
        except BaseException:
            for task in pending:
                task.cancel()
            subscription.close()  # unsubscribes once no other waiter wants the channel
            raise
        for task in late:
            task.cancel()
        return subscription

    def wanted(self, channel: bytes) -> bool:
        return channel in self._waiters

    def notify(self, channel: bytes) -> None:
        for subscription in self._waiters.get(channel, ()):
            subscription.event.set()

    def _leave(self, subscription: Subscription) -> None:
        waiters = self._waiters.get(subscription.channel)
        if waiters is None:
            return
        waiters.discard(subscription)
        if not waiters:
            del self._waiters[subscription.channel]
            for subscriber in self._subscribers:
                subscriber.drop(subscription.channel)

    def reset(self) -> None:
        """Forget subscriptions made on another event loop or before a fork."""
        self._waiters = {}
        for subscriber in self._subscribers:
            subscriber.reset()

    async def aclose(self) -> None:
        await asyncio.gather(*(s.aclose() for s in self._subscribers))
