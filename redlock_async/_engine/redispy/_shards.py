"""Sharded pub/sub for valkey-py's clients, which have none of their own (valkey-py 6).

``RedisPySubscriber`` drives a client's pub/sub through redis-py's API:
``ssubscribe``/``sunsubscribe``, then ``listen()`` (a plain client) or
``get_sharded_message()`` (a cluster). valkey-py's asyncio ``PubSub`` speaks
only ``SUBSCRIBE``/``PSUBSCRIBE`` and its cluster client has no pub/sub, so
:func:`pubsub_of` hands it the same API built on valkey-py's own pieces:
:class:`ShardedPubSub`'s commands and replies on one of the client's pooled
connections, and for a cluster one such connection per shard that owns a
subscribed channel (a sharded message is only delivered by the channel's
shard). valkey is imported only when a valkey client is passed in.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from typing import Any

from ._kinds import is_cluster, is_valkey

__all__ = ["pubsub_of"]


def pubsub_of(client: Any) -> Any:
    """A pub/sub object with redis-py's sharded API, for ``client`` of either library."""
    if not is_valkey(client):
        return client.pubsub()
    if is_cluster(client):
        return _ClusterShards(client)
    return sharded_pubsub_class()(client.connection_pool)


@functools.cache
def sharded_pubsub_class() -> type[Any]:
    """valkey-py's ``PubSub`` taught ``SSUBSCRIBE``/``SUNSUBSCRIBE`` (made on first use)."""
    from valkey.asyncio.client import PubSub

    class ShardedPubSub(PubSub):
        """Sharded channels kept like plain ones: subscribed again on valkey-py's
        reconnects (``on_connect``), and ``listen()`` runs while any is subscribed."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.shard_channels: set[bytes] = set()
            self.leaving: set[bytes] = set()  # SUNSUBSCRIBE sent, not yet confirmed

        @property
        def subscribed(self) -> bool:
            return bool(self.shard_channels) or bool(super().subscribed)

        async def on_connect(self, connection: Any) -> None:
            await super().on_connect(connection)
            if self.shard_channels:
                await self.execute_command("SSUBSCRIBE", *self.shard_channels)

        async def ssubscribe(self, *channels: bytes) -> None:
            await self.execute_command("SSUBSCRIBE", *channels)
            # After sending, as valkey-py does for SUBSCRIBE: a reconnect in
            # between must not subscribe twice.
            self.shard_channels.update(channels)
            self.leaving.difference_update(channels)

        async def sunsubscribe(self, *channels: bytes) -> None:
            self.leaving.update(channels)
            await self.execute_command("SUNSUBSCRIBE", *channels)

        async def handle_message(
            self, response: Any, ignore_subscribe_messages: bool = False
        ) -> Any:
            if isinstance(response, list) and len(response) >= 3:
                kind = response[0].decode() if isinstance(response[0], bytes) else response[0]
                if kind in ("smessage", "ssubscribe", "sunsubscribe"):
                    channel = self.encoder.encode(response[1])  # bytes, whatever decoding
                    if kind == "sunsubscribe" and channel in self.leaving:
                        # Confirmed: forgotten only now, so listen() ends after
                        # the last confirmation, never before it was read.
                        self.leaving.discard(channel)
                        self.shard_channels.discard(channel)
                    if kind != "smessage" and ignore_subscribe_messages:
                        return None
                    return {
                        "type": kind,
                        "pattern": None,
                        "channel": response[1],
                        "data": response[2],
                    }
            return await super().handle_message(response, ignore_subscribe_messages)  # type: ignore[no-untyped-call]

    return ShardedPubSub


class _ClusterShards:
    """A valkey-py cluster's sharded pub/sub: one :class:`ShardedPubSub` per shard
    that owns a subscribed channel, their messages read into one inbox."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.shards: dict[str, Any] = {}  # node name -> its ShardedPubSub
        self.where: dict[bytes, str] = {}  # channel -> the node it was subscribed on
        self.readers: dict[str, asyncio.Task[None]] = {}
        self.inbox: asyncio.Queue[dict[str, Any] | Exception] = asyncio.Queue()

    @property
    def connection(self) -> Any:
        for pubsub in self.shards.values():
            if pubsub.connection is not None:
                return pubsub.connection
        return None

    async def ssubscribe(self, channel: bytes) -> None:
        from valkey.asyncio.connection import ConnectionPool

        node = self.cluster.get_node_from_key(channel)
        pubsub = self.shards.get(node.name)
        if pubsub is None:
            pool = ConnectionPool(connection_class=node.connection_class, **node.connection_kwargs)
            pubsub = self.shards[node.name] = sharded_pubsub_class()(pool)
        await pubsub.ssubscribe(channel)
        self.where[channel] = node.name
        reader = self.readers.get(node.name)
        if reader is None or reader.done():
            # A shard's listen() ends once its last channel left: start anew.
            loop = asyncio.get_running_loop()
            self.readers[node.name] = loop.create_task(self._read(pubsub))

    async def sunsubscribe(self, channel: bytes) -> None:
        pubsub = self.shards.get(self.where.pop(channel, ""))
        if pubsub is not None:
            await pubsub.sunsubscribe(channel)

    async def _read(self, pubsub: Any) -> None:
        try:
            async for message in pubsub.listen():
                self.inbox.put_nowait(message)
        except Exception as exc:  # the shard's connection is lost: the subscriber starts over
            self.inbox.put_nowait(exc)

    async def get_sharded_message(
        self, ignore_subscribe_messages: bool = False, timeout: float = 0.0
    ) -> dict[str, Any] | None:
        try:
            async with asyncio.timeout(timeout):
                item = await self.inbox.get()
        except TimeoutError:
            return None
        if isinstance(item, Exception):
            raise item
        if ignore_subscribe_messages and item.get("type") != "smessage":
            return None
        return item

    async def aclose(self) -> None:
        readers = list(self.readers.values())
        for task in readers:
            task.cancel()
        for task in readers:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for pubsub in self.shards.values():
            await pubsub.aclose()
            await pubsub.connection_pool.disconnect()
        self.shards.clear()
        self.readers.clear()
