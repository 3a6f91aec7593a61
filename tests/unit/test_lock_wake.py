"""acquire() with wake-ups, over scripted nodes in virtual time: attempts per grant, turns.

The scripted nodes keep each lock's state (per node) and announce a release
on the hub as a node would (each node its own message), so the attempt loop
of ``_acquire.py`` runs as it does against Redis. The retry delay is 60 s:
any waiter that polled instead of being woken would show in the clock.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from collections.abc import Callable

import pytest

from redlock_async import LockBusy, NodeError
from redlock_async._core._lock import Lock
from redlock_async._core._scripts import (
    ACQUIRE,
    EXTEND,
    FAIR_ACQUIRE,
    FAIR_LEAVE,
    READ_ACQUIRE,
    READ_RELEASE,
    RELEASE,
    WRITE_ACQUIRE,
)
from redlock_async._engine._node import Command
from redlock_async._engine._wake import WakeHub

from ._scripted import NEVER, Answer, Cluster, Late, Rule, Sent, run
from .test_wake_queue import FakeSubscriber, make_hub


class Store:
    """One node's keys, enough of them for the exclusive and read-write scripts."""

    def __init__(self, hub: WakeHub) -> None:
        self.hub = hub
        self.strings: dict[bytes, bytes] = {}
        self.readers: dict[bytes, set[bytes]] = {}

    latency = 0.0  # seconds each reply and announcement takes to reach the client

    def announce(self, sent: Sent) -> None:
        token = sent.args[0]
        assert isinstance(token, bytes)
        if len(sent.keys) > 1:  # the wake channel: the token, once the reply is on its way
            loop = asyncio.get_running_loop()
            loop.call_later(self.latency, self.hub.notify, sent.keys[1], token)

    def acquire(self, sent: Sent) -> int:
        key, token = sent.keys[0], sent.args[0]
        assert isinstance(token, bytes)
        if key in self.strings:
            return 0
        self.strings[key] = token
        return 1

    def release(self, sent: Sent) -> int:
        key = sent.keys[0]
        if self.strings.get(key) != sent.args[0]:
            return 0
        del self.strings[key]
        self.announce(sent)
        return 1

    def fair_acquire(self, sent: Sent) -> int:
        return self.acquire(sent)  # the queue's order is not modelled: the lock is

    def read_acquire(self, sent: Sent) -> int:
        writer, readers = sent.keys[0], sent.keys[1]
        token = sent.args[0]
        assert isinstance(token, bytes)
        if writer in self.strings:
            return 0
        self.readers.setdefault(readers, set()).add(token)
        return 1

    def read_release(self, sent: Sent) -> int:
        readers = self.readers.get(sent.keys[0], set())
        token = sent.args[0]
        if token not in readers:
            return 0
        readers.discard(token)
        if not readers:
            self.announce(sent)
        return 1

    def write_acquire(self, sent: Sent) -> int:
        if sent.keys[0] in self.strings:
            return 0
        if self.readers.get(sent.keys[1]):
            return -1
        return self.acquire(sent)


class LateFirst:
    """A node's rule, but its first answer comes ``after`` seconds late."""

    def __init__(self, rule: Rule, after: float) -> None:
        self.rule = rule
        self.after = after
        self.answered = 0

    def __call__(self, sent: Sent) -> Answer:
        answer = self.rule(sent) if callable(self.rule) else self.rule
        self.answered += 1
        if self.answered == 1 and not isinstance(answer, Late):
            return Late(answer, self.after)  # type: ignore[arg-type]
        return answer


def wake_cluster(node_timeout: float = 0.05, latency: float = 0.0) -> Cluster:
    """A cluster whose nodes keep state and announce releases; wake-ups on.

    ``latency``: every reply and announcement arrives that much after the
    command was sent (the node's state changes at once, in arrival order).
    """
    return stored_cluster(node_timeout, latency)[0]


def stored_cluster(
    node_timeout: float = 0.05, latency: float = 0.0, *, ordered: bool = True
) -> tuple[Cluster, list[Store]]:
    """``wake_cluster``, and each node's store (to set keys behind the client's back);
    ``ordered=False``: nodes reached through a pool of connections (redis-py),
    where a command can overtake one sent before it."""
    c = Cluster(retry_delay=60.0, retry_jitter=0.0, node_timeout=node_timeout, ordered=ordered)
    hub, _ = make_hub(len(c.nodes))
    c.engine.wake = hub
    stores = [Store(hub) for _ in c.nodes]
    for store in stores:
        store.latency = latency

    def each(rule: Callable[[Store], Callable[[Sent], int]]) -> list[Rule]:
        if not latency:
            return [rule(store) for store in stores]
        return [
            (lambda answer: lambda sent: Late(answer(sent), latency))(rule(store))
            for store in stores
        ]

    c.script(ACQUIRE.name, *each(lambda s: s.acquire))
    c.script(RELEASE.name, *each(lambda s: s.release))
    c.script(FAIR_ACQUIRE.name, *each(lambda s: s.fair_acquire))
    c.script(FAIR_LEAVE.name, 1)
    c.script(READ_ACQUIRE.name, *each(lambda s: s.read_acquire))
    c.script(READ_RELEASE.name, *each(lambda s: s.read_release))
    c.script(WRITE_ACQUIRE.name, *each(lambda s: s.write_acquire))
    return c, stores


async def take_and_release(lock: Lock, log: list[tuple[str, float]], tag: str = "") -> None:
    assert await lock.acquire()
    log.append((tag, asyncio.get_running_loop().time()))
    await lock.release()


def attempts_on_n0(c: Cluster, script: str) -> int:
    return sum(1 for name, sent in c.sent(script) if name == "n0")


def test_each_grant_costs_one_attempt_of_the_next_waiter_not_one_per_waiter() -> None:
    c = wake_cluster()
    n = 50

    async def main() -> list[tuple[str, float]]:
        holder = c.lock(auto_extend=False)
        assert await holder.acquire()
        log: list[tuple[str, float]] = []
        tasks = [
            asyncio.ensure_future(take_and_release(c.lock(auto_extend=False), log))
            for _ in range(n)
        ]
        await asyncio.sleep(1.0)  # every waiter in line
        await holder.release()
        await asyncio.gather(*tasks)
        return log

    start = c.clock()
    log = run(main(), c.clock)
    assert len(log) == n
    assert all(at == start + 1.0 for _, at in log)  # all woken: no retry delay waited
    # The holder's grant, each waiter's first (refused) attempt and its
    # winning one, and the first waiter's one more try once subscribed.
    assert attempts_on_n0(c, ACQUIRE.name) == 1 + n + n + 1
    assert attempts_on_n0(c, RELEASE.name) == 1 + n


def test_a_new_waiter_behind_others_of_its_process_joins_the_line_without_attempting() -> None:
    """Waiters of this process already wait for the lock: a new acquire joins
    the line behind them with no attempt of its own - one would only jump the
    line, or race the waiter the next release wakes (split votes, undos) -
    and is granted in its turn, woken by the release before it."""
    c = wake_cluster()

    async def main() -> list[tuple[str, float]]:
        holder = c.lock(auto_extend=False)
        assert await holder.acquire()
        log: list[tuple[str, float]] = []
        first = asyncio.ensure_future(take_and_release(c.lock(auto_extend=False), log, "first"))
        await asyncio.sleep(1.0)
        before = attempts_on_n0(c, ACQUIRE.name)
        later = asyncio.ensure_future(take_and_release(c.lock(auto_extend=False), log, "later"))
        await asyncio.sleep(1.0)
        assert attempts_on_n0(c, ACQUIRE.name) == before  # in line: not one attempt
        await holder.release()
        await asyncio.gather(first, later)
        return log

    start = c.clock()
    assert run(main(), c.clock) == [("first", start + 2.0), ("later", start + 2.0)]
    # The holder's grant; the first waiter's refused attempt, its try once
    # subscribed and its winning one; the later waiter's winning one alone.
    assert attempts_on_n0(c, ACQUIRE.name) == 1 + 3 + 1


def test_a_waiter_in_line_that_gives_up_has_asked_the_nodes_once() -> None:
    """In line from the start and its turn never came: it still attempts once,
    a node_timeout before its deadline, so that it gives up with what the
    nodes said (held elsewhere) rather than with no attempt at all."""
    c = wake_cluster(node_timeout=0.05)

    async def main() -> tuple[float, int]:
        holder = c.lock(auto_extend=False)
        assert await holder.acquire()
        waiter = asyncio.ensure_future(c.lock(auto_extend=False).acquire())
        await asyncio.sleep(1.0)
        before = attempts_on_n0(c, ACQUIRE.name)
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(LockBusy):
            async with c.lock(auto_extend=False, timeout=2.0):
                pass
        assert loop.time() - started == pytest.approx(2.0, abs=0.01)
        tried = attempts_on_n0(c, ACQUIRE.name) - before
        attempted_at = c.times(ACQUIRE.name)[-1]
        await holder.release()
        assert await waiter
        return attempted_at - started, tried

    offset, tried = run(main(), c.clock)
    assert tried == 1
    assert offset == pytest.approx(2.0 - 0.05, abs=0.01)


def test_a_release_hands_over_to_a_waiter_of_its_process_in_one_round_trip() -> None:
    """A plain lock released while a waiter of this process is in turn: the
    waiter is woken as the release goes out, not by the nodes' announcement
    a round trip later, and its attempt follows the release on every node."""
    c = wake_cluster(latency=0.01)

    async def main() -> tuple[float, float]:
        holder = c.lock(auto_extend=False)
        assert await holder.acquire()
        log: list[tuple[str, float]] = []
        waiter = asyncio.ensure_future(take_and_release(c.lock(auto_extend=False), log))
        await asyncio.sleep(1.0)
        released = asyncio.get_running_loop().time()
        await holder.release()
        await waiter
        return released, log[0][1]

    released, granted = run(main(), c.clock)
    # Sent together: one round trip (the grant's reply) after the release.
    assert c.times(ACQUIRE.name)[-1] == pytest.approx(released)
    assert granted == pytest.approx(released + 0.01)
    for node in ("n0", "n1", "n2"):
        order = [sent.script for name, sent in c.log if name == node]
        assert order[-3:] == [RELEASE.name, ACQUIRE.name, RELEASE.name]
    # The holder, the waiter's refused attempt, its try once subscribed, and
    # the winning one: the early wake-up cost no attempt.
    assert attempts_on_n0(c, ACQUIRE.name) == 4


def test_a_woken_waiter_cancelled_before_its_attempt_passes_the_wake_up_on() -> None:
    c = wake_cluster()

    async def main() -> list[tuple[str, float]]:
        holder = c.lock(auto_extend=False)
        assert await holder.acquire()
        log: list[tuple[str, float]] = []
        first = asyncio.ensure_future(take_and_release(c.lock(auto_extend=False), log, "first"))
        await asyncio.sleep(1.0)
        second = asyncio.ensure_future(take_and_release(c.lock(auto_extend=False), log, "second"))
        await asyncio.sleep(1.0)
        hub = c.engine.wake
        assert hub is not None
        notify = hub.notify

        def notify_then_cancel(channel: bytes, token: bytes) -> None:
            notify(channel, token)  # the first waiter is woken ...
            first.cancel()  # ... and cancelled before it runs again

        hub.notify = notify_then_cancel  # type: ignore[method-assign]
        await holder.release()
        hub.notify = notify  # type: ignore[method-assign]
        await second
        return log

    start = c.clock()
    assert run(main(), c.clock) == [("second", start + 2.0)]


def test_a_waiter_that_gives_up_hands_its_turn_to_the_next() -> None:
    c = wake_cluster()

    async def main() -> list[tuple[str, float]]:
        holder = c.lock(auto_extend=False)
        assert await holder.acquire()
        log: list[tuple[str, float]] = []
        impatient = c.lock(auto_extend=False, timeout=1.0)
        gives_up = asyncio.ensure_future(impatient.acquire())
        await asyncio.sleep(0.1)
        patient = asyncio.ensure_future(take_and_release(c.lock(auto_extend=False), log))
        assert not await gives_up
        await asyncio.sleep(4.0)
        await holder.release()  # the patient one, first now, is woken by it
        await patient
        return log

    start = c.clock()
    assert run(main(), c.clock) == [("", start + 5.0)]


def test_readers_are_granted_together_and_a_writer_behind_them_is_not_passed() -> None:
    c = wake_cluster()

    async def main() -> list[tuple[str, float]]:
        rw = c.rwlock()
        writer = rw.write(auto_extend=False)
        assert await writer.acquire()
        log: list[tuple[str, float]] = []

        async def read(tag: str) -> None:
            reader = rw.read(auto_extend=False)
            assert await reader.acquire()
            log.append((tag, asyncio.get_running_loop().time()))
            await asyncio.sleep(1.0)  # held a while: they overlap
            await reader.release()

        tasks = [asyncio.ensure_future(read("early reader")) for _ in range(20)]
        await asyncio.sleep(0.1)
        tasks.append(
            asyncio.ensure_future(take_and_release(rw.write(auto_extend=False), log, "writer"))
        )
        await asyncio.sleep(0.1)
        tasks += [asyncio.ensure_future(read("late reader")) for _ in range(5)]
        await asyncio.sleep(0.8)
        await writer.release()
        await asyncio.gather(*tasks)
        return log

    start = c.clock()
    log = run(main(), c.clock)
    # The first readers together at the release; the writer when the last of
    # them leaves; the late readers (behind the writer) only after it.
    assert Counter(log) == {
        ("early reader", start + 1.0): 20,
        ("writer", start + 2.0): 1,
        ("late reader", start + 2.0): 5,
    }
    assert [tag for tag, _ in log].index("writer") == 20
    # Per early reader (all started at once, before any waits in line): its
    # first attempt (refused), one more once subscribed (active as soon as it
    # joins the readers ahead: a release may have come since its first
    # attempt), the winning one. The late ones find the writer waiting in
    # line: they join behind it without a first attempt (it would only jump
    # the line) and make the winning one alone. Nobody polled.
    assert attempts_on_n0(c, READ_ACQUIRE.name) == 20 * 3 + 5 * 1


def test_fair_waiters_keep_their_heartbeat_but_a_release_wakes_only_the_first() -> None:
    c = wake_cluster(node_timeout=0.05)  # heartbeat 1 s: an attempt at least every 1/3 s
    n = 10

    async def main() -> float:
        holder = c.lock(auto_extend=False)
        assert await holder.acquire()
        log: list[tuple[str, float]] = []
        tasks = [
            asyncio.ensure_future(take_and_release(c.lock(auto_extend=False, fair=True), log))
            for _ in range(n)
        ]
        await asyncio.sleep(4.9)  # between two heartbeats (every 1/3 s from 0)
        released = asyncio.get_running_loop().time()
        await holder.release()
        await asyncio.gather(*tasks)
        return released

    released = run(main(), c.clock)
    attempts = [sent for name, sent in c.sent(FAIR_ACQUIRE.name) if name == "n0"]
    by_waiter: dict[object, list[float]] = {}
    for sent in attempts:
        by_waiter.setdefault(sent.args[2], []).append(sent.at)
    assert len(by_waiter) == n
    for times in by_waiter.values():
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert max(gaps) <= 1.0 / 3 + 1e-9  # the queue entry never lapses
    # From the release on, one attempt per grant: each waiter is woken by the
    # release before it (all at one instant: nobody holds for any time).
    assert sum(1 for sent in attempts if sent.at == released) == n


def test_a_waiter_waiting_its_turn_still_gives_up_at_its_timeout() -> None:
    c = wake_cluster()

    async def main() -> float:
        holder = c.lock(auto_extend=False)
        assert await holder.acquire()
        first = asyncio.ensure_future(c.lock(auto_extend=False).acquire())
        await asyncio.sleep(0.1)
        assert not await c.lock(auto_extend=False, timeout=2.0).acquire()  # behind first
        gave_up = asyncio.get_running_loop().time()
        first.cancel()
        return gave_up

    start = c.clock()
    assert run(main(), c.clock) == start + 2.1
    # Behind the first waiter it made no attempt but its first one.
    assert attempts_on_n0(c, ACQUIRE.name) == 1 + 2 + 1


def test_a_waiter_refused_by_its_process_s_leftovers_attempts_once_they_are_undone() -> None:
    """Two tasks' first attempts collide, through pools of connections
    (redis-py), where a command can overtake another. ``late`` is written to
    every node first, but its replies come after 1 s: its votes time out at
    node_timeout, and its undo, written once they came, runs at 1 s.
    ``early``, refused by its keys, tries once more once subscribed and is
    refused again. Nobody announces an undo, so before this ``early``, first
    in line, waited its 60 s retry delay for a lock that nobody held (seen:
    8 tasks' first attempts, ``test_wake.py``): it is now woken once the
    undo has run on every node."""
    c, _ = stored_cluster(node_timeout=0.05, ordered=False)
    for node in c.nodes:  # the first acquire each node gets (late's) answers after 1 s
        node.rules[ACQUIRE.name] = LateFirst(node.rules[ACQUIRE.name], 1.0)

    async def main() -> list[tuple[str, float]]:
        log: list[tuple[str, float]] = []
        late = asyncio.ensure_future(take_and_release(c.lock(auto_extend=False), log, "late"))
        early = asyncio.ensure_future(take_and_release(c.lock(auto_extend=False), log, "early"))
        await asyncio.gather(late, early)
        return log

    start = c.clock()
    # The undo's replies come after the late ones, in order: at 1 s. Then
    # early is granted, and its release wakes late, now first in line.
    assert run(main(), c.clock) == [("early", start + 1.0), ("late", start + 1.0)]


ELSEWHERE = b"a holder elsewhere"


def hold_elsewhere(c: Cluster, stores: list[Store]) -> None:
    """Another process holds the lock on n0 and n1; n2 is free."""
    for store in stores[:2]:
        store.strings[c.keys().lock] = ELSEWHERE


def release_elsewhere(c: Cluster, stores: list[Store]) -> None:
    """That holder's release, as the nodes announce it."""
    keys = c.keys()
    for store in stores[:2]:
        store.release(Sent(RELEASE.name, (keys.lock, keys.wake), (ELSEWHERE,), 0.0))


def split_elsewhere(c: Cluster, stores: list[Store], nodes: tuple[int, int]) -> None:
    """Two other processes' attempts hold ``nodes``, and are undone 10 ms from
    now (unannounced: no wake-up reaches this process)."""
    loop = asyncio.get_running_loop()
    key = c.keys().lock
    for index, token in zip(nodes, (b"process 2", b"process 3"), strict=True):
        stores[index].strings[key] = token
        loop.call_later(0.01, stores[index].strings.pop, key)  # its undo


def test_a_waiter_s_own_undos_do_not_wake_it_while_a_holder_keeps_most_nodes() -> None:
    """A holder keeps two nodes of three; the third is free. Each attempt of
    the waiter is granted there, refused overall and undone: were its own
    undos to wake it, it would attempt every round trip for as long as the
    grant lasts. It attempts three times (its first, once more once
    subscribed, and once a node_timeout later: a split vote's contenders
    would be undone by then), then waits for the release."""
    c, stores = stored_cluster(node_timeout=0.05, latency=0.001)

    async def main() -> tuple[float, int]:
        hold_elsewhere(c, stores)
        waiter = asyncio.ensure_future(c.lock(auto_extend=False).acquire(timeout=None))
        await asyncio.sleep(10.0)
        attempts = attempts_on_n0(c, ACQUIRE.name)
        release_elsewhere(c, stores)
        assert await waiter
        return asyncio.get_running_loop().time(), attempts

    start = c.clock()
    granted_at, attempts = run(main(), c.clock)
    assert attempts == 3
    assert granted_at < start + 10.1  # woken by the release, not at its retry delay


def test_a_waiter_s_next_attempt_through_a_pool_follows_its_own_undo() -> None:
    """Through a pool of connections (redis-py) a command may overtake one
    written before it. The first attempt is granted everywhere but too late
    to be valid for ``min_validity``, so it is undone; its undo takes 10 ms
    to run. The attempt right after (once subscribed) goes to each node only
    once the undo has run there: otherwise it would be refused by the
    waiter's own keys, and - its own undos never wake it - wait its 60 s
    retry delay for a lock that nobody holds."""
    c, stores = stored_cluster(node_timeout=0.1, ordered=False)
    for node, store in zip(c.nodes, stores, strict=True):
        node.rules[ACQUIRE.name] = LateFirst(node.rules[ACQUIRE.name], 0.05)

        def release(sent: Sent, store: Store = store) -> Late:
            asyncio.get_running_loop().call_later(0.01, store.release, sent)
            return Late(1, 0.01)

        node.rules[RELEASE.name] = release

    async def main() -> float:
        lock = c.lock(ttl=1.0, min_validity=0.96, auto_extend=False)
        assert await lock.acquire(timeout=None)
        return asyncio.get_running_loop().time()

    start = c.clock()
    # The first attempt decided at 50 ms (valid for 0.94 s: refused), its
    # undo run at 60 ms, the next attempt granted then.
    assert run(main(), c.clock) == pytest.approx(start + 0.06)


def test_a_split_vote_with_other_processes_is_retried_within_a_node_timeout() -> None:
    """Three processes' attempts split the votes: this one is granted on n0,
    the two others on n1 and n2, and all three are refused. The others' undos
    run 10 ms later, announced by nobody (other processes: no wake-up here).
    The waiter, granted somewhere, retries a jittered node_timeout later
    instead of its 60 s retry delay, and is granted."""
    c, stores = stored_cluster(node_timeout=0.05)

    async def main() -> float:
        loop = asyncio.get_running_loop()
        split_elsewhere(c, stores, (1, 2))
        assert await c.lock(auto_extend=False).acquire(timeout=None)
        return loop.time()

    start = c.clock()
    granted_at = run(main(), c.clock)
    assert start + 0.025 <= granted_at < start + 0.075  # 0.5-1.5 node_timeouts


def test_a_waiter_s_own_undo_does_not_wake_it_while_the_nodes_confirm_its_subscription() -> None:
    """As above, but the nodes take their time to confirm the subscription
    (a pub/sub connection to open first: real nodes, both drivers): the undo
    of the first attempt has run by then. It is the waiter's own, so it
    wakes nobody - it woke the waiter for a fourth attempt (the acquire call
    was known to its subscription only once subscribed)."""
    c, stores = stored_cluster(node_timeout=0.05, latency=0.001)
    hub = c.engine.wake
    assert hub is not None
    for subscriber in hub._subscribers:
        assert isinstance(subscriber, FakeSubscriber)
        subscriber.slow = True  # never confirmed: subscribe() waits node_timeout

    async def main() -> int:
        hold_elsewhere(c, stores)
        waiter = asyncio.ensure_future(c.lock(auto_extend=False).acquire(timeout=None))
        await asyncio.sleep(10.0)
        waiter.cancel()
        return attempts_on_n0(c, ACQUIRE.name)

    assert run(main(), c.clock) == 3


@pytest.mark.parametrize("ordered", [True, False], ids=["ordered", "pool"])
def test_a_waiter_s_next_attempt_follows_its_own_undo_queued_behind_other_cleanups(
    ordered: bool,
) -> None:
    """More cleanups in flight than the engine lets out at once (here one
    slot, taken until node_timeout): the undo of the first attempt waits in
    the engine's queue, written to no node. The next attempt must still
    follow it on every node - also on nodes that run commands in order (the
    lean driver), where it went out at once, before its undo, was refused by
    the waiter's own keys and - its own undos never wake it - waited its 60 s
    retry delay for a lock that nobody held."""
    c, _ = stored_cluster(node_timeout=0.1, ordered=ordered)
    cleanups = c.engine.cleanups
    cleanups.limit = cleanups.free = 1
    for node in c.nodes:
        node.rules[ACQUIRE.name] = LateFirst(node.rules[ACQUIRE.name], 0.07)

    async def main() -> float:
        # A cleanup no node answers (decided at node_timeout): the next ones queue.
        c.engine.cleanup(Command(EXTEND, (b"another lock",), (b"tok", 1000)))
        # The first attempt decided at 70 ms: valid for 0.93 s minus drift, refused.
        lock = c.lock(ttl=1.0, min_validity=0.95, auto_extend=False)
        assert await lock.acquire(timeout=None)
        return asyncio.get_running_loop().time()

    start = c.clock()
    # The undo went out at 100 ms, once a slot was free; the next attempt
    # right after it on each node, granted then.
    assert run(main(), c.clock) == pytest.approx(start + 0.1)


def test_a_split_vote_s_yes_still_coming_when_refused_is_retried_within_a_node_timeout() -> None:
    """As above, but two other processes hold n0 and n1 (undone 10 ms later),
    so the waiter is refused at once, before its own yes on n2 has come (20
    ms late): granted somewhere all the same, it retries a jittered
    node_timeout later, and is granted."""
    c, stores = stored_cluster(node_timeout=0.05)
    rule = c.nodes[2].rules[ACQUIRE.name]
    assert callable(rule)
    c.nodes[2].rules[ACQUIRE.name] = lambda sent: Late(rule(sent), 0.02)  # type: ignore[arg-type]

    async def main() -> float:
        loop = asyncio.get_running_loop()
        split_elsewhere(c, stores, (0, 1))
        assert await c.lock(auto_extend=False).acquire(timeout=None)
        return loop.time()

    start = c.clock()
    granted_at = run(main(), c.clock)
    assert start + 0.025 <= granted_at < start + 0.1  # 0.5-1.5 node_timeouts (and 20 ms)


def silent_third(c: Cluster) -> None:
    """n2 never answers an acquire: its vote times out at node_timeout, long
    after two noes (or failures) have refused the attempt."""
    c.nodes[2].rules[ACQUIRE.name] = NEVER


def test_a_vote_still_coming_from_a_silent_node_does_not_hold_a_waiter_past_its_timeout() -> None:
    """Held elsewhere on n0 and n1, n2 silent (node_timeout 0.5 s): each
    attempt is refused at once, with n2's vote still to come. Whether it is
    a yes is seen at the quick retry's time, within the wait: awaited before
    the wait, it added up to node_timeout to a wait already cut at the
    deadline (a timeout of 1 s returned after 1.5 s)."""
    c, stores = stored_cluster(node_timeout=0.5)
    silent_third(c)

    async def main() -> tuple[bool, float]:
        hold_elsewhere(c, stores)
        loop = asyncio.get_running_loop()
        start = loop.time()
        granted = await c.lock(auto_extend=False).acquire(timeout=1.0)
        return granted, loop.time() - start

    granted, took = run(main(), c.clock)
    assert not granted
    assert took == pytest.approx(1.0)


def test_a_vote_still_coming_from_a_silent_node_does_not_delay_a_wake_up() -> None:
    """As above, no timeout: the holder releases at 100 ms. The waiter is
    woken then and granted (n0 and n1), not once n2's vote has timed out."""
    c, stores = stored_cluster(node_timeout=0.5)
    silent_third(c)

    async def main() -> float:
        hold_elsewhere(c, stores)
        loop = asyncio.get_running_loop()
        start = loop.time()
        waiter = asyncio.ensure_future(c.lock(auto_extend=False).acquire(timeout=None))
        await asyncio.sleep(0.1)
        release_elsewhere(c, stores)
        assert await waiter
        return loop.time() - start

    assert run(main(), c.clock) == pytest.approx(0.1)


def test_a_vote_still_coming_from_a_silent_node_does_not_stretch_unavailable_timeout() -> None:
    """n0 and n1 down (errors at once), n2 silent: no quorum answers. The
    call gives up at its unavailable_timeout (1 s), not node_timeout later."""
    c, _ = stored_cluster(node_timeout=0.5)
    for node in c.nodes[:2]:
        node.rules[ACQUIRE.name] = NodeError(f"{node.name}: connection refused")
    silent_third(c)

    async def main() -> tuple[bool, float]:
        loop = asyncio.get_running_loop()
        start = loop.time()
        lock = c.lock(auto_extend=False, unavailable_timeout=1.0)
        granted = await lock.acquire(timeout=None)
        return granted, loop.time() - start

    granted, took = run(main(), c.clock)
    assert not granted
    assert took == pytest.approx(1.0)
