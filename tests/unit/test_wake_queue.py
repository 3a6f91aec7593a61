"""The wake-up hub's lines, without sockets: who attempts, who is woken, who waits.

A :class:`WakeHub` over fake subscribers (they only say whether they listen)
on a :class:`VirtualTimeLoop`: the times asserted are exact loop times. The
lock layer over the same hub is in test_lock_wake.py; real nodes in
tests/integration/test_wake.py.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

from redlock_async._engine._waiters import Line, Subscription, Waiting
from redlock_async._engine._wake import WakeHub

from ._scripted import VirtualClock, run

T = TypeVar("T")

CHANNEL = b"redlock:{job}:wake"
X, RW = b"x:", b"rw"


class FakeSubscriber:
    """A node's pub/sub side that subscribes at once; ``listens`` can be turned off."""

    def __init__(self, hub: WakeHub) -> None:
        self.hub = hub
        self.channels: set[bytes] = set()
        self.listens = True
        self.dropped: list[bytes] = []

    def want(self, channel: bytes) -> None:
        self.channels.add(channel)

    async def ensure(self, channel: bytes) -> None:
        self.channels.add(channel)

    def subscribed(self, channel: bytes) -> bool:
        return self.listens and channel in self.channels

    def listening(self, channel: bytes) -> bool:
        return self.listens and channel in self.channels

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


def test_random_joins_and_leaves_keep_the_turns_right() -> None:
    # Against a model: the active waiters are always the first one and, when
    # it is a reader, the readers right behind it. A waiter made active by a
    # leave is woken (it attempts at once) unless an active waiter left with a
    # grant (then it waits for that grant's release).
    rng = random.Random(16)

    async def main(clock: VirtualClock) -> int:
        hub, _ = make_hub()
        line: list[Subscription] = []
        promotions = 0
        for _ in range(4000):
            if not line or rng.random() < 0.5:
                shared = rng.random() < 0.6
                line.append(await hub.subscribe(Waiting(RW, (CHANNEL,), shared=shared)))
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
                    assert sub.woken is not (was_active and granted)
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
