"""Pub/sub on a simulated node: channels, their subscribers, and each connection's outbox.

A connection is a ``conn`` id the network layer picks. What is pushed to it
- a (S)SUBSCRIBE's confirmation, a message published to a channel it
subscribed - waits in ``outbox[conn]`` until taken (``SimNode.take``), in
the order Redis would have written it. Plain and sharded channels are
separate, as in Redis (SUBSCRIBE hears PUBLISH, SSUBSCRIBE hears SPUBLISH).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Protocol

from .replies import Push

__all__ = ["PubSub", "Subscriber"]


class Subscriber(Protocol):
    """What the registry keeps of a connection (``node.Session``)."""

    conn: Hashable
    channels: dict[bytes, None]
    shard_channels: dict[bytes, None]
    subscribed: bool


class PubSub:
    """Every channel's subscribers, and what waits for each connection."""

    def __init__(self) -> None:
        self.channels: dict[bytes, dict[Hashable, None]] = {}  # SUBSCRIBE's
        self.shard_channels: dict[bytes, dict[Hashable, None]] = {}  # SSUBSCRIBE's
        self.outbox: dict[Hashable, list[Push]] = {}

    def clear(self) -> None:
        self.channels.clear()
        self.shard_channels.clear()
        self.outbox.clear()

    def _push(self, conn: Hashable, message: Push) -> None:
        box = self.outbox.get(conn)
        if box is None:
            self.outbox[conn] = [message]
        else:
            box.append(message)

    def publish(self, shard: bool, channel: bytes, message: bytes) -> int:
        """PUBLISH (SPUBLISH if ``shard``): how many connections it reached."""
        receivers = (self.shard_channels if shard else self.channels).get(channel)
        if not receivers:
            return 0
        kind = b"smessage" if shard else b"message"
        for conn in receivers:
            self._push(conn, Push([kind, channel, message]))
        return len(receivers)

    def subscribe(self, session: Subscriber, shard: bool, channels: Sequence[bytes]) -> None:
        registry = self.shard_channels if shard else self.channels
        mine = session.shard_channels if shard else session.channels
        kind = b"ssubscribe" if shard else b"subscribe"
        for channel in channels:
            if channel not in mine:
                mine[channel] = None
                registry.setdefault(channel, {})[session.conn] = None
            self._push(session.conn, Push([kind, channel, len(mine)]))
        session.subscribed = True

    def unsubscribe(self, session: Subscriber, shard: bool, channels: Sequence[bytes]) -> None:
        """(S)UNSUBSCRIBE ``channels`` (none: every one of the session's)."""
        registry = self.shard_channels if shard else self.channels
        mine = session.shard_channels if shard else session.channels
        kind = b"sunsubscribe" if shard else b"unsubscribe"
        if not channels and not mine:
            self._push(session.conn, Push([kind, None, 0]))
        for channel in list(channels or mine):
            if channel in mine:
                del mine[channel]
                listeners = registry[channel]
                del listeners[session.conn]
                if not listeners:
                    del registry[channel]
            self._push(session.conn, Push([kind, channel, len(mine)]))
        session.subscribed = bool(session.channels or session.shard_channels)

    def drop(self, session: Subscriber) -> None:
        """The connection is closed: out of every channel, nothing left to push."""
        for shard in (False, True):
            registry = self.shard_channels if shard else self.channels
            for channel in session.shard_channels if shard else session.channels:
                listeners = registry[channel]
                del listeners[session.conn]
                if not listeners:
                    del registry[channel]
        session.channels, session.shard_channels, session.subscribed = {}, {}, False
        self.outbox.pop(session.conn, None)
