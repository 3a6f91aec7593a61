"""Waiters woken by releases: one sharded pub/sub connection per node.

A release script announces itself on the lock's channel (``SPUBLISH``). A
waiting ``acquire()`` subscribes to that channel on every node and retries as
soon as any node announces a release, falling back to its jittered retry
delay when nothing comes: a message is a hint, never the source of truth, so
a lost one costs at most one retry delay.

Subscriptions are shared: one connection per node per Redlock, one
``SSUBSCRIBE`` per channel however many waiters, ``SUNSUBSCRIBE`` when the
last waiter of a channel leaves.

This module is the driver-independent half: waiters and channels. Each node
makes its own :class:`Subscriber` (``Node.wake_source``): the lean driver
opens a RESP connection of its own (``resp/_pubsub.py``); nodes reached
through redis-py (TLS, clients passed in, Redis Cluster) subscribe through
the client's own pub/sub (``redispy/_pubsub.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from typing import Protocol

__all__ = ["Subscriber", "Subscription", "WakeHub", "WakeSource"]


class Subscriber(Protocol):
    """One node's pub/sub side, as the hub uses it (made by the node's driver)."""

    async def ensure(self, channel: bytes) -> None:
        """Subscribe to ``channel``; return once the node confirmed (or cannot)."""
        ...

    def drop(self, channel: bytes) -> None:
        """No waiter wants ``channel`` any more: unsubscribe."""
        ...

    def reset(self) -> None:
        """Forget connections made on another event loop or before a fork (never touch them)."""
        ...

    async def aclose(self) -> None: ...


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
    """The pub/sub side of one Redlock: subscribers per node, waiters per channel.

    Subscribers call back ``notify`` (a release was announced), ``wanted``
    (is a channel still waited on) and read ``connect_timeout``.
    """

    def __init__(self, sources: Sequence[WakeSource | None], node_timeout: float) -> None:
        self._waiters: dict[bytes, set[Subscription]] = {}
        self.node_timeout = node_timeout
        self.connect_timeout = max(node_timeout, 0.5)
        # Each node's driver makes its subscriber; None: no wake-ups from
        # that node (its waiters poll).
        self._subscribers = [source(self) for source in sources if source is not None]

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


WakeSource = Callable[[WakeHub], Subscriber]
"""What a node offers for wake-ups: makes its subscriber for a hub."""
