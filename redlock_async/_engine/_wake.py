"""Waiters woken by releases, in turn: one sharded pub/sub connection per node.

A release script announces itself on the lock's channel (``SPUBLISH``), with
the released token as the message. A waiting ``acquire()`` subscribes to
that channel on every node (a multilock: each of its names' channels) and
joins its *line*: the waiters of one process for one lock, in arrival
order. A line is keyed by the lock's identity (``Waiting.line``: a
multilock's whole name set, a semaphore's limit), never by a name alone: a
waiter is never held back by a waiter for another lock. Only the waiters
that can win now are *active* - the first one, or the leading run of
readers when the first is a reader: they retry as soon as a release is
announced, and poll at their jittered retry delay meanwhile (a message is a
hint, never the source of truth, so a lost one costs at most one retry
delay). The others are *passive*: no attempts, no polling, until they are
promoted. So one release costs one attempt per process, not one per waiter.

- A release reaches every node and each node announces it: the hub wakes the
  active waiters on the first message of a token and ignores its echoes
  from the other nodes, unless a woken waiter has attempted since (then the
  echo may come from a node its attempt reached before the release did).
- An active waiter that leaves without a grant (timeout, cancelled, failed)
  may have taken a wake-up with it: the next is promoted and woken at once.
  One that leaves with a grant: the next is promoted and waits for that
  grant's release (or its own retry delay: the holder may crash) - unless
  the grant may have left room (a semaphore): then it is woken at once.
- While no node listens on the channel (down, refusing, Redis < 7, the
  connection lost), nobody would be woken: every waiter polls, as without
  wake-ups. A subscription still being made counts as listening; a
  multilock's line is heard while any of its channels is.

Subscriptions are shared: one connection per node per Redlock, one
``SSUBSCRIBE`` per channel however many waiters, ``SUNSUBSCRIBE`` when the
last waiter of a channel leaves.

This module is the driver-independent half: channels, what was heard on
them, who listens; the lines themselves are ``_waiters.py``. Each node makes
its own :class:`Subscriber` (``Node.wake_source``): the lean
driver opens a RESP connection of its own (``resp/_pubsub.py``); nodes
reached through redis-py (TLS, clients passed in, Redis Cluster) subscribe
through the client's own pub/sub (``redispy/_pubsub.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Protocol

from ._waiters import Line, Subscription, Waiting

__all__ = ["Subscriber", "Subscription", "Waiting", "WakeHub", "WakeSource"]

# Tokens remembered per channel to recognise one release's echoes from the
# other nodes. They arrive within a round trip of each other; an echo older
# than this many releases only costs one needless attempt.
_ECHOES = 16


class Subscriber(Protocol):
    """One node's pub/sub side, as the hub uses it (made by the node's driver)."""

    def want(self, channel: bytes) -> None:
        """Start subscribing to ``channel`` unless it is (being) subscribed; never waits."""
        ...

    async def ensure(self, channel: bytes) -> None:
        """Subscribe to ``channel``; return once the node confirmed (or cannot)."""
        ...

    def subscribed(self, channel: bytes) -> bool:
        """Whether the node confirmed ``channel`` on a connection that is still up."""
        ...

    def listening(self, channel: bytes) -> bool:
        """Confirmed, or being subscribed: a release will soon be heard from this node.

        When it stops (the connection lost, the subscription refused), the
        driver calls ``WakeHub.unheard(channel)``.
        """
        ...

    def drop(self, channel: bytes) -> None:
        """No waiter wants ``channel`` any more: unsubscribe."""
        ...

    def reset(self) -> None:
        """Forget connections made on another event loop or before a fork (never touch them)."""
        ...

    async def aclose(self) -> None: ...


class _Channel:
    """The lines listening on one channel (one per lock) and the tokens lately announced.

    A multilock's line is listed on the channel of each of its names, under
    the same key (its whole name set: no other lock's).
    """

    __slots__ = ("lines", "seen")

    def __init__(self) -> None:
        self.lines: dict[bytes, Line] = {}
        self.seen: dict[bytes, None] = {}  # insertion order: the oldest is dropped first


class WakeHub:
    """The pub/sub side of one Redlock: subscribers per node, lines of waiters per channel.

    Subscribers call back ``notify`` (a release was announced), ``wanted``
    (is a channel still waited on) and read ``connect_timeout``.
    """

    def __init__(self, sources: Sequence[WakeSource | None], node_timeout: float) -> None:
        self._channels: dict[bytes, _Channel] = {}
        self.node_timeout = node_timeout
        self.connect_timeout = max(node_timeout, 0.5)
        # Each node's driver makes its subscriber; None: no wake-ups from
        # that node (its waiters poll).
        self._subscribers = [source(self) for source in sources if source is not None]

    @property
    def enabled(self) -> bool:
        return bool(self._subscribers)

    async def subscribe(
        self, waiting: Waiting, timeout: float | None = None, caller: object | None = None
    ) -> Subscription:
        """Join the line ``waiting`` names, listening on its channels; returns
        once the nodes confirmed, or after ``timeout`` seconds (default:
        node_timeout) with the late nodes still subscribing. Whether the new
        waiter is active (makes attempts) is ``Subscription.active``.
        ``caller``: its acquire call, if an attempt of it already failed
        (``Subscription.caller``): set before it joins, since the undo of that
        attempt may run while the nodes confirm, and must not wake it.

        Cancelled (or failing) while it waits, it leaves the channels again, so
        nothing stays subscribed for a waiter that is gone.
        """
        if timeout is None:
            timeout = self.node_timeout
        subscription = Subscription(self, waiting)
        subscription.caller = caller
        # Registered before any I/O: a node may confirm (and a release be
        # announced) before the others answer.
        channels, key = waiting.channels, waiting.line
        queue = self._line(channels, key)
        queue.join(subscription)
        for subscriber in self._subscribers:
            for channel in channels:
                subscriber.want(channel)
        if not subscription.active:
            # It makes no attempt until its turn: a subscription under way will do.
            return subscription
        # It tries once more once subscribed: it must know the nodes listen.
        pending = [
            asyncio.ensure_future(s.ensure(channel))
            for s in self._subscribers
            for channel in channels
            if not s.subscribed(channel)
        ]
        if not pending:
            return subscription
        try:
            # A slow or dead node must not hold the waiter back: it just won't wake it.
            _, late = await asyncio.wait(pending, timeout=timeout)
        except BaseException:
            for task in pending:
                task.cancel()
            self.leave(subscription, False)  # unsubscribes once no other waiter wants it
            raise
        for task in late:
            task.cancel()
        return subscription

    def _line(self, channels: tuple[bytes, ...], key: bytes) -> Line:
        """The line ``key`` of the lock announced on ``channels``, made if new."""
        chan = self._channels.get(channels[0])
        queue = None if chan is None else chan.lines.get(key)
        if queue is None:
            queue = Line(key, channels)
            for channel in channels:
                chan = self._channels.get(channel)
                if chan is None:
                    chan = self._channels[channel] = _Channel()
                chan.lines[key] = queue
        return queue

    @property
    def waiting(self) -> bool:
        """Whether any waiter of this process waits for any lock (one test on the hot path)."""
        return bool(self._channels)

    def queued(self, waiting: Waiting) -> bool:
        """Whether waiters of this process already wait for the lock ``waiting`` names."""
        queue = self._line_of(waiting)
        return queue is not None and queue.head is not None

    def _line_of(self, waiting: Waiting) -> Line | None:
        """The line of the lock ``waiting`` names, if any waiter of this process is in it."""
        chan = self._channels.get(waiting.channels[0])
        return None if chan is None else chan.lines.get(waiting.line)

    def wanted(self, channel: bytes) -> bool:
        return channel in self._channels

    def listening(self, *channels: bytes) -> bool:
        """Whether some node will tell us of a release on one of ``channels`` (or soon will)."""
        return any(s.listening(channel) for channel in channels for s in self._subscribers)

    def unheard(self, channel: bytes) -> None:
        """A node stopped listening on ``channel``: the waiters of a line that
        nobody listens for any more poll (a multilock's may still be heard on
        another name's channel)."""
        chan = self._channels.get(channel)
        if chan is None or self.listening(channel):
            return
        for queue in chan.lines.values():
            if len(queue.channels) == 1 or not self.listening(*queue.channels):
                queue.rouse()

    def notify(self, channel: bytes, token: bytes) -> None:
        """A node announced the release of ``token`` on ``channel``."""
        chan = self._channels.get(channel)
        if chan is None:
            return
        seen = chan.seen
        if token in seen:
            # An echo from another node: only a waiter that attempted since
            # this token woke it retries (its attempt may have reached this
            # node before the release did).
            for queue in chan.lines.values():
                for sub in queue.actives():
                    if sub.armed and sub.hint == token:
                        sub.wake(token)
            return
        seen[token] = None
        if len(seen) > _ECHOES:
            del seen[next(iter(seen))]
        for queue in chan.lines.values():
            for sub in queue.actives():
                sub.wake(token)

    def undone(self, waiting: Waiting, caller: object | None) -> None:
        """A failed attempt of this process at the lock ``waiting`` names has
        been undone on every node: its waiters here that it may have refused
        attempt again.

        Until it has run, what the attempt left on a node refuses other
        attempts. Nobody announces an undo (a release of nothing: every
        process's waiters would wake on every failed attempt), so without this
        a split vote inside one process - its tasks' first attempts, all at
        once - left the waiter first in line refused by the others' leftovers,
        waiting its retry delay for a lock that nobody held. Woken: the active
        waiters of that same lock here, but not ``caller``'s own (the acquire
        call that failed: its next attempt is ordered after the undo, see
        ``_core/_attempt.py``), nor readers by a reader's (they never refuse each
        other). So no two waiters can wake each other in turn for as long as
        a holder keeps part of the nodes. Another process's undos wake nobody
        here: its split votes are retried a jittered node_timeout later
        (``_core/_retry.py``).
        """
        queue = self._line_of(waiting)
        if queue is None:
            return  # nobody of this process waits for that lock
        for sub in queue.actives():
            if (caller is not None and sub.caller is caller) or (waiting.shared and sub.shared):
                continue
            # Its hint stays: an echo of the release that woke it last still
            # wakes it again after this attempt.
            sub.wake(sub.hint)

    def leave(self, subscription: Subscription, granted: bool) -> None:
        """``subscription`` leaves its line: its turn passes on (see ``Line.leave``)."""
        queue = subscription.line
        if queue is None:
            return  # already gone
        chan = self._channels.get(queue.channels[0])
        if chan is None or chan.lines.get(queue.key) is not queue:
            return  # reset() forgot it
        queue.leave(subscription, granted)
        if queue.head is not None:
            return
        for channel in queue.channels:
            chan = self._channels.get(channel)
            if chan is None or chan.lines.get(queue.key) is not queue:
                continue
            del chan.lines[queue.key]
            if not chan.lines:
                del self._channels[channel]
                for subscriber in self._subscribers:
                    subscriber.drop(channel)

    def reset(self) -> None:
        """Forget subscriptions made on another event loop or before a fork."""
        self._channels = {}
        for subscriber in self._subscribers:
            subscriber.reset()

    async def aclose(self) -> None:
        # Waiters, passive ones included, attempt once more: they find the
        # Redlock closing and stop.
        for chan in self._channels.values():
            for queue in chan.lines.values():
                for sub in queue:
                    sub.wake()
        await asyncio.gather(*(s.aclose() for s in self._subscribers))


WakeSource = Callable[[WakeHub], Subscriber]
"""What a node offers for wake-ups: makes its subscriber for a hub."""
