"""Wake-ups through a redis-py client's own pub/sub (TLS, clients passed in, Cluster).

Made by ``RedisPyNode.wake_source`` for the Redlock's ``WakeHub``. valkey-py's
clients, which have no sharded pub/sub of their own, get redis-py's API for
it from ``_shards.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from redis.asyncio import Redis, RedisCluster

from .._wake import WakeHub
from ._kinds import is_cluster
from ._shards import pubsub_of

__all__ = ["RedisPySubscriber"]

_log = logging.getLogger("redlock_async.node")


class RedisPySubscriber:
    """Release announcements through a redis-py client's own pub/sub connection
    (a ``Subscriber``); ``name``: the node's, for log messages."""

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

    def want(self, channel: bytes) -> None:
        if channel not in self.channels:
            self._start(channel)

    async def ensure(self, channel: bytes) -> None:
        if channel in self.channels:
            return
        # The subscribing runs on its own, so a waiter that stops waiting for
        # it (WakeHub.subscribe gives nodes node_timeout) neither aborts it
        # half way nor leaves a subscription we do not know about.
        await asyncio.shield(self._start(channel))

    def _start(self, channel: bytes) -> asyncio.Task[None]:
        task = self.subscribing.get(channel)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._subscribe(channel))
            self.subscribing[channel] = task
            task.add_done_callback(lambda _: self._subscribed(channel))
        return task

    def _subscribed(self, channel: bytes) -> None:
        self.subscribing.pop(channel, None)
        self.hub.unheard(channel)  # nothing if it worked (or another node listens)

    def subscribed(self, channel: bytes) -> bool:
        return channel in self.channels  # subscribed, and its reader has not failed since

    def listening(self, channel: bytes) -> bool:
        return channel in self.channels or channel in self.subscribing

    async def _subscribe(self, channel: bytes) -> None:
        try:
            if self.pubsub is None:
                if is_cluster(self.client):
                    await self.client.initialize()  # the slot map routes the channel
                self.pubsub = pubsub_of(self.client)
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
            if is_cluster(self.client):
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
                        self._notify(message)
            else:
                async for message in pubsub.listen():
                    if message.get("type") in ("smessage", "message"):
                        self._notify(message)
                # listen() ends once the last channel is unsubscribed. The
                # connection is fine: keep it for the next waiter (closing it
                # here would race subscriptions in flight on it, which redis-py
                # would then send on a connection nobody reads); the next
                # subscription starts a reader again (_subscribe).
                if self.pubsub is pubsub:
                    self.reader = None
                return
        except Exception as exc:  # connection lost: subscribe again, on a new one
            _log.debug("redlock_async: wake-up connection to %s lost: %s", self.name, exc)
        if self.pubsub is pubsub:
            self.pubsub = None
            self.reader = None
            lost, self.channels = self.channels, set()
            self._spawn(pubsub.aclose())
            for channel in lost:
                if self.hub.wanted(channel):
                    self._start(channel)  # once: if it fails too, the waiters poll
                self.hub.unheard(channel)

    def _notify(self, message: dict[str, Any]) -> None:
        channel, token = message["channel"], message["data"]
        # A client made with decode_responses=True hands out str: the hub's
        # channels and tokens are bytes (a str would never match).
        if isinstance(channel, str):
            channel = channel.encode()
        if isinstance(token, str):
            token = token.encode()
        self.hub.notify(channel, token)

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
