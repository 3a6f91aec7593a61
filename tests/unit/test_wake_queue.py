"""The wake-up hub's lines, without sockets: who attempts, who is woken, who waits.

A :class:`WakeHub` over fake subscribers (they only say whether they listen)
on a :class:`VirtualTimeLoop`: the times asserted are exact loop times. The
lock layer over the same hub is in test_lock_wake.py; real nodes in
tests/integration/test_wake.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

from redlock_async._base._config import LockOptions
from redlock_async._core._commands import Commands
from redlock_async._engine._waiters import Line, Subscription, Waiting
from redlock_async._engine._wake import WakeHub
from redlock_async._kinds._multilock import MultiLock
from redlock_async._kinds._semaphore import semaphore

from ._scripted import Cluster, VirtualClock, run

T = TypeVar("T")

CHANNEL = b"redlock:{job}:wake"
X, RW = b"x:", b"rw"


class FakeSubscriber:
    """A node's pub/sub side that subscribes at once; ``listens`` can be turned off
    (for ``deaf`` channels only, or all), and confirmations held back (``slow``)."""

    def __init__(self, hub: WakeHub) -> None:
        self.hub = hub
        self.channels: set[bytes] = set()
        self.listens = True
        self.deaf: set[bytes] = set()
        self.slow = False
        self.dropped: list[bytes] = []

    def want(self, channel: bytes) -> None:
        self.channels.add(channel)

    async def ensure(self, channel: bytes) -> None:
        self.channels.add(channel)
        if self.slow:
            await asyncio.Event().wait()  # never confirmed

    def subscribed(self, channel: bytes) -> bool:
        return self.listening(channel) and not self.slow

    def listening(self, channel: bytes) -> bool:
        return self.listens and channel in self.channels and channel not in self.deaf

    def drop(self, channel: bytes) -> None:
        self.channels.discard(channel)
        self.dropped.append(channel)

    def reset(self) -> None:
        self.channels = set()

    async def aclose(self) -> None:
        return None


def make_hub(nodes: int = 3) -> tuple[WakeHub, list[FakeSubscriber]]:
    made: list[FakeSubscriber] = []

    def source(hub: WakeHub) -> FakeSubscriber:
        made.append(FakeSubscriber(hub))
        return made[-1]

    return WakeHub([source] * nodes, node_timeout=0.05), made


def on_loop(main: Callable[[VirtualClock], Awaitable[T]]) -> T:
    clock = VirtualClock()
    return run(main(clock), clock)


async def join(hub: WakeHub, kinds: str, line: bytes = RW) -> list[Subscription]:
    """Waiters joining in order: ``r`` a reader (shared), ``w`` exclusive."""
    return [await hub.subscribe(Waiting(line, (CHANNEL,), shared=kind == "r")) for kind in kinds]


def actives(subs: list[Subscription]) -> str:
    return "".join("A" if sub.active else "." for sub in subs)


async def returns_at(clock: VirtualClock, wait: Awaitable[bool]) -> tuple[bool, float]:
    """What ``wait`` returned, and how long after now."""
    began = clock()
    woken = await wait
    return woken, round(clock() - began, 9)


# -- who attempts --------------------------------------------------------------


@pytest.mark.parametrize(
    ("kinds", "expected"),
    [
        ("www", "A.."),
        ("rrr", "AAA"),
        ("rrwr", "AA.."),
        ("wrr", "A.."),
        ("rwrr", "A..."),
    ],
)
def test_the_first_waiter_attempts_or_the_leading_readers(kinds: str, expected: str) -> None:
    async def main(clock: VirtualClock) -> str:
        hub, _ = make_hub()
        return actives(await join(hub, kinds))

    assert on_loop(main) == expected


def test_a_lock_and_a_read_write_lock_of_one_name_each_have_a_line() -> None:
    # They share the channel, not the lock: a waiter of one never waits for the other's.
    async def main(clock: VirtualClock) -> tuple[str, str]:
        hub, _ = make_hub()
        exclusive = await join(hub, "ww", line=X)
        rw = await join(hub, "wr", line=RW)
        hub.notify(CHANNEL, b"t1")
        woken = "".join("W" if sub.woken else "." for sub in exclusive + rw)
        return actives(exclusive + rw), woken

    assert on_loop(main) == ("A.A.", "W.W.")


# -- releases ------------------------------------------------------------------


def test_a_release_wakes_the_active_waiters_only() -> None:
    async def main(clock: VirtualClock) -> list[tuple[bool, float]]:
        hub, _ = make_hub()
        first, second = await join(hub, "ww")
        waits = [
            asyncio.ensure_future(returns_at(clock, first.wait(60.0))),
            asyncio.ensure_future(returns_at(clock, second.wait(60.0, idle=5.0))),
        ]
        await asyncio.sleep(1.0)
        hub.notify(CHANNEL, b"t1")
        return list(await asyncio.gather(*waits))

    # The passive one is not woken: it waits its whole idle time.
    assert on_loop(main) == [(True, 1.0), (False, 5.0)]


def test_the_echoes_of_a_release_wake_nobody_again_until_the_woken_waiter_tried() -> None:
    async def main(clock: VirtualClock) -> list[tuple[bool, float]]:
        hub, _ = make_hub()
        (first,) = await join(hub, "w")
        hub.notify(CHANNEL, b"t1")
        hub.notify(CHANNEL, b"t1")  # the second node: before the waiter ran
        seen = [await returns_at(clock, first.wait(60.0))]  # woken: it attempts now
        # The third node's message comes during that attempt: it may have
        # reached that node before the release, so it tries once more.
        hub.notify(CHANNEL, b"t1")
        seen.append(await returns_at(clock, first.wait(60.0)))
        seen.append(await returns_at(clock, first.wait(2.0)))  # nothing new: it polls
        return seen

    assert on_loop(main) == [(True, 0.0), (True, 0.0), (False, 2.0)]


def test_an_echo_does_not_wake_a_waiter_promoted_after_that_release() -> None:
    async def main(clock: VirtualClock) -> list[tuple[bool, float]]:
        hub, _ = make_hub()
        first, second = await join(hub, "ww")
        hub.notify(CHANNEL, b"t1")
        assert await first.wait(60.0)
        first.close(granted=True)  # it won
        hub.notify(CHANNEL, b"t1")  # a late node's echo of the release it won after
        seen = [await returns_at(clock, second.wait(3.0))]
        hub.notify(CHANNEL, b"t2")  # the winner's own release
        seen.append(await returns_at(clock, second.wait(3.0)))
        return seen

    assert on_loop(main) == [(False, 3.0), (True, 0.0)]


# -- turns ---------------------------------------------------------------------


@pytest.mark.parametrize("how", ["gave up", "cancelled"])
def test_an_active_waiter_leaving_without_a_grant_wakes_the_next_at_once(how: str) -> None:
    async def main(clock: VirtualClock) -> tuple[bool, float]:
        hub, _ = make_hub()
        first, second = await join(hub, "ww")
        hub.notify(CHANNEL, b"t1")  # taken by the first, which then leaves without trying
        waiting = asyncio.ensure_future(returns_at(clock, second.wait(60.0)))
        if how == "cancelled":
            task = asyncio.ensure_future(first.wait(60.0))
            await asyncio.sleep(0.5)
            task.cancel()
        else:
            await asyncio.sleep(0.5)
        first.close(granted=False)
        woken = await waiting
        assert second.active
        return woken

    assert on_loop(main) == (True, 0.5)


def test_an_active_waiter_leaving_with_a_grant_lets_the_next_poll_until_the_release() -> None:
    async def main(clock: VirtualClock) -> list[tuple[bool, float]]:
        hub, _ = make_hub()
        first, second = await join(hub, "ww")
        waiting = asyncio.ensure_future(returns_at(clock, second.wait(0.3)))
        await asyncio.sleep(0.5)
        first.close(granted=True)
        # Promoted, not woken: it starts polling (the holder may crash) ...
        seen = [await waiting]
        # ... and the holder's release wakes it.
        later = asyncio.ensure_future(returns_at(clock, second.wait(0.3)))
        await asyncio.sleep(0.1)
        hub.notify(CHANNEL, b"t2")
        seen.append(await later)
        return seen

    assert on_loop(main) == [(False, 0.8), (True, 0.1)]


def test_a_passive_waiter_waits_for_its_turn_within_its_idle_time() -> None:
    async def main(clock: VirtualClock) -> list[tuple[bool, float]]:
        hub, _ = make_hub()
        first, second, third = await join(hub, "www")
        seen = [await returns_at(clock, third.wait(0.3, idle=2.0))]  # no polling
        waiting = asyncio.ensure_future(returns_at(clock, second.wait(0.3)))
        await asyncio.sleep(5.0)
        first.close(granted=True)  # promoted after 5 s: then it polls
        seen.append(await waiting)
        return seen

    assert on_loop(main) == [(False, 2.0), (False, 5.3)]


def test_readers_behind_a_writer_that_left_join_the_readers_ahead() -> None:
    async def main(clock: VirtualClock) -> tuple[str, str, str]:
        hub, _ = make_hub()
        subs = await join(hub, "rwrrw")
        before = actives(subs)
        subs[1].close(granted=False)  # the writer gives up, while passive
        rest = [subs[0], *subs[2:]]
        woken = "".join("W" if sub.woken else "." for sub in rest)
        return before, actives(rest), woken

    # They never got the wake-ups of the readers ahead: woken at once.
    assert on_loop(main) == ("A....", "AAA.", ".WW.")


def test_the_last_reader_ahead_leaving_with_a_grant_promotes_the_writer() -> None:
    async def main(clock: VirtualClock) -> tuple[str, bool]:
        hub, _ = make_hub()
        subs = await join(hub, "rrwr")
        subs[0].close(granted=True)
        subs[1].close(granted=True)
        rest = subs[2:]
        return actives(rest), rest[0].woken

    assert on_loop(main) == ("A.", False)


@pytest.mark.parametrize("room", [False, True])
def test_random_joins_and_leaves_keep_the_turns_right(room: bool) -> None:
    # Against a model: the active waiters are always the first one and, when
    # it is a reader, the readers right behind it. A waiter made active by a
    # leave is woken (it attempts at once) unless an active waiter left with a
    # grant that left no room (then it waits for that grant's release).
    rng = random.Random(16)

    async def main(clock: VirtualClock) -> int:
        hub, _ = make_hub()
        line: list[Subscription] = []
        promotions = 0
        for _ in range(4000):
            if not line or rng.random() < 0.5:
                shared = rng.random() < 0.6
                waiting = Waiting(RW, (CHANNEL,), shared=shared, room=room)
                line.append(await hub.subscribe(waiting))
                continue
            for sub in line:
                sub.woken = False
                sub.event.clear()
            before = {id(sub) for sub in line if sub.active}
            leaving = line.pop(rng.randrange(len(line)) if rng.random() < 0.3 else 0)
            was_active, granted = leaving.active, rng.random() < 0.5
            leaving.close(granted)
            expected = [True] * min(1, len(line)) + [False] * (len(line) - 1)
            for i in range(1, len(line)):
                expected[i] = line[0].shared and line[i].shared and expected[i - 1]
            assert [sub.active for sub in line] == expected
            for sub in line:
                if sub.active and id(sub) not in before:
                    promotions += 1
                    assert sub.event.is_set()
                    assert sub.woken is not (was_active and granted and not room)
                elif id(sub) in before:
                    assert not sub.event.is_set()  # nothing new for those already active
        assert hub.wanted(CHANNEL) is bool(line)
        return promotions

    assert on_loop(main) > 500


def test_the_last_waiter_to_leave_unsubscribes() -> None:
    async def main(clock: VirtualClock) -> tuple[list[list[bytes]], list[list[bytes]]]:
        hub, nodes = make_hub()
        subs = await join(hub, "wr", line=RW) + await join(hub, "w", line=X)
        for sub in subs[:-1]:
            sub.close()
        before = [node.dropped[:] for node in nodes]
        subs[-1].close()
        subs[-1].close()  # twice: nothing more
        return before, [node.dropped for node in nodes]

    before, after = on_loop(main)
    assert before == [[], [], []]
    assert after == [[CHANNEL]] * 3


# -- no wake-ups ---------------------------------------------------------------


def test_while_no_node_listens_every_waiter_polls() -> None:
    async def main(clock: VirtualClock) -> tuple[bool, float]:
        hub, nodes = make_hub()
        _, second = await join(hub, "ww")
        for node in nodes:
            node.listens = False
        return await returns_at(clock, second.wait(0.3, idle=10.0))

    assert on_loop(main) == (False, 0.3)


def test_once_the_last_node_stops_listening_passive_waiters_poll() -> None:
    async def main(clock: VirtualClock) -> tuple[bool, float]:
        hub, nodes = make_hub()
        _, second = await join(hub, "ww")
        waiting = asyncio.ensure_future(returns_at(clock, second.wait(0.3)))
        for node in nodes:
            await asyncio.sleep(1.0)
            node.listens = False  # each node's connection is lost in turn
            hub.unheard(CHANNEL)
        return await waiting

    # Passive until the third is lost (at 3 s), then polling.
    assert on_loop(main) == (False, 3.3)


def test_closing_wakes_every_waiter() -> None:
    async def main(clock: VirtualClock) -> list[tuple[bool, float]]:
        hub, _ = make_hub()
        subs = await join(hub, "wwr")
        waits = [asyncio.ensure_future(returns_at(clock, sub.wait(60.0))) for sub in subs]
        await asyncio.sleep(1.0)
        await hub.aclose()
        return list(await asyncio.gather(*waits))

    assert on_loop(main) == [(True, 1.0)] * 3


def test_a_line_is_a_linked_list_in_arrival_order() -> None:
    async def main(clock: VirtualClock) -> bool:
        hub, _ = make_hub()
        subs = await join(hub, "rwrw")
        line = subs[0].line
        assert isinstance(line, Line)
        assert list(line) == subs
        assert list(line.actives()) == subs[:1]
        assert list(line.passive()) == subs[1:]
        subs[2].close()
        return list(line) == [subs[0], subs[1], subs[3]]

    assert on_loop(main)


def test_a_channel_that_keeps_failing_rouses_its_waiters_once() -> None:
    # Every new waiter's subscription refused tells the hub again: the waiters
    # already polling must not be woken each time (n waiters: n^2 wake-ups).
    async def main(clock: VirtualClock) -> list[bool]:
        hub, nodes = make_hub()
        subs = await join(hub, "wwww")
        waits = [asyncio.ensure_future(sub.wait(0.3)) for sub in subs[1:]]
        await asyncio.sleep(0.1)  # all waiting their turn
        for node in nodes:
            node.listens = False
        hub.unheard(CHANNEL)
        await asyncio.sleep(0.1)  # roused: now polling
        hub.unheard(CHANNEL)
        again = [sub.event.is_set() for sub in subs[1:]]
        await asyncio.gather(*waits)
        return again

    assert on_loop(main) == [False, False, False]


# -- one line per lock (issue 24) ---------------------------------------------

A, B, C = (b"redlock:{%s}:wake" % name for name in (b"a", b"b", b"c"))


def multi(*channels: bytes) -> Waiting:
    """A multilock's waiting: its line is its whole set, heard on each name's channel."""
    return Waiting(b"m:" + b"+".join(channels), channels)


def test_locks_sharing_a_name_never_share_a_line() -> None:
    # [a, b], [a, c] and a plain a all listen on a: each has a line, and the
    # head of each attempts; only a second waiter for [a, b] waits its turn.
    async def main(clock: VirtualClock) -> str:
        hub, _ = make_hub()
        subs = [
            await hub.subscribe(multi(A, B)),
            await hub.subscribe(multi(A, C)),
            await hub.subscribe(Waiting(X, (A,))),
            await hub.subscribe(multi(A, B)),
        ]
        return actives(subs)

    assert on_loop(main) == "AAA."


def test_a_line_is_woken_by_a_release_on_any_of_its_channels() -> None:
    async def main(clock: VirtualClock) -> list[str]:
        hub, _ = make_hub()
        subs = [
            await hub.subscribe(multi(A, B)),
            await hub.subscribe(multi(A, C)),
            await hub.subscribe(Waiting(X, (A,))),
        ]
        seen = []
        for channel, token in ((B, b"t1"), (C, b"t2"), (A, b"t3")):
            hub.notify(channel, token)
            seen.append("".join("W" if sub.woken else "." for sub in subs))
            for sub in subs:
                sub.woken = False
        return seen

    # b's release wakes [a, b] only, c's [a, c] only, a's every one.
    assert on_loop(main) == ["W..", ".W.", "WWW"]


def test_the_echo_of_a_multilock_release_on_its_other_channel_wakes_no_one_twice() -> None:
    # A multilock's release is announced on each name's channel, by each
    # node: to a waiter of that set, the second channel's message is an echo.
    async def main(clock: VirtualClock) -> list[tuple[bool, float]]:
        hub, _ = make_hub()
        (sub,) = [await hub.subscribe(multi(A, B))]
        hub.notify(A, b"t1")
        hub.notify(B, b"t1")  # the same node, the other name: before it ran
        seen = [await returns_at(clock, sub.wait(60.0))]
        seen.append(await returns_at(clock, sub.wait(2.0)))  # nothing new: it polls
        return seen

    assert on_loop(main) == [(True, 0.0), (False, 2.0)]


def test_a_line_on_several_channels_leaves_each_once_its_last_waiter_left() -> None:
    async def main(clock: VirtualClock) -> list[list[bytes]]:
        hub, nodes = make_hub(1)
        ab = [await hub.subscribe(multi(A, B)) for _ in range(2)]
        ac = await hub.subscribe(multi(A, C))
        seen = []
        for sub in (ab[0], ab[1], ac):
            sub.close()
            seen.append(sorted(nodes[0].dropped))
        assert hub._channels == {}
        return seen

    # a stays wanted while [a, c] waits; b goes with the last of [a, b].
    assert on_loop(main) == [[], [B], [A, B, C]]


def test_cancelled_while_subscribing_a_multilock_leaves_every_channel() -> None:
    async def main(clock: VirtualClock) -> tuple[bool, list[bytes]]:
        hub, nodes = make_hub(1)
        nodes[0].slow = True
        task = asyncio.ensure_future(hub.subscribe(multi(A, B, C), timeout=60.0))
        await asyncio.sleep(1.0)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return hub._channels == {}, sorted(nodes[0].dropped)

    assert on_loop(main) == (True, [A, B, C])


def test_a_line_polls_only_once_none_of_its_channels_is_heard() -> None:
    async def main(clock: VirtualClock) -> list[tuple[bool, float]]:
        hub, nodes = make_hub()
        _, multi_passive = [await hub.subscribe(multi(A, B)) for _ in range(2)]
        _, plain_passive = [await hub.subscribe(Waiting(X, (A,))) for _ in range(2)]
        waits = [
            asyncio.ensure_future(returns_at(clock, sub.wait(0.3, idle=10.0)))
            for sub in (multi_passive, plain_passive)
        ]
        await asyncio.sleep(1.0)
        for node in nodes:
            node.deaf.add(A)  # a is not heard any more; b still is
        hub.unheard(A)
        return list(await asyncio.gather(*waits))

    # The plain lock's passive waiter on a polls from then on; the
    # multilock's is still woken through b: it waits for its turn.
    assert on_loop(main) == [(False, 10.0), (False, 1.3)]


@pytest.mark.parametrize("granted", [True, False])
def test_a_grant_that_may_leave_room_wakes_the_next_at_once(granted: bool) -> None:
    # A semaphore's waiter took a slot: others may be free, and the next
    # tries at once, not at that grant's release. Still one at a time.
    async def main(clock: VirtualClock) -> tuple[str, bool, bytes | None]:
        hub, _ = make_hub()
        room = Waiting(b"s:8", (CHANNEL,), room=True)
        subs = [await hub.subscribe(room) for _ in range(3)]
        hub.notify(CHANNEL, b"t1")
        assert await subs[0].wait(60.0)
        subs[0].close(granted)
        rest = subs[1:]
        return actives(rest), rest[0].woken, rest[0].hint

    hint = None if granted else b"t1"  # without a grant it may have taken t1's wake-up
    assert on_loop(main) == ("A.", True, hint)


def test_every_kind_of_lock_names_the_line_of_its_own_lock() -> None:
    c = Cluster()

    def waiting(lock: object) -> Waiting:
        commands: Commands = lock._commands  # type: ignore[attr-defined]
        return commands.waiting()

    def multilock(*names: str) -> Waiting:
        return waiting(MultiLock(c.engine, c.holdings, names, LockOptions(), "redlock:"))

    def sem(limit: int) -> Waiting:
        return waiting(semaphore(c.engine, c.holdings, "a", c.keys("a"), limit, LockOptions()))

    rw = c.rwlock("a")
    a, b = c.keys("a").wake, c.keys("b").wake
    plain = waiting(c.lock("a"))
    assert plain == waiting(c.lock("a", fair=True)) == Waiting(b"x:", (a,))
    # Readers and writers of a name: one lock, one line; readers win together.
    assert waiting(rw.read()) == Waiting(b"rw", (a,), shared=True)
    assert waiting(rw.write()) == Waiting(b"rw", (a,))
    # A multilock: the line of its whole set (in any order), heard on each name.
    ab = multilock("b", "a")
    assert ab == multilock("a", "b")
    assert ab.channels == (a, b)
    lines = {ab.line, multilock("a", "c").line, multilock("a").line, plain.line, b"rw"}
    assert len(lines) == 5
    # A semaphore: one line per limit; a grant may leave room unless the limit is 1.
    assert sem(8) == Waiting(b"s:8", (a,), room=True)
    assert sem(1) == Waiting(b"s:1", (a,))
