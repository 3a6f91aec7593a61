"""Semaphores over scripted nodes in virtual time: slot choice, cleanup, never more than limit.

The nodes here are small models of Redis running the semaphore's scripts
(:class:`SlotNode`): a dict of slot keys with expiry on the virtual clock,
and a switch that makes a node fail every command (down). See _scripted.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Sequence
from typing import Any

import pytest

from redlock_async import (
    ConfigurationError,
    LockBusy,
    LockOptions,
    QuorumUnavailable,
    RedlockError,
)
from redlock_async._base._errors import NodeConnectionError
from redlock_async._core._scripts import EXTEND, EXTEND_MANY, RELEASE, SEM_ACQUIRE, SEM_RELEASE
from redlock_async._engine import Reply
from redlock_async._kinds._semaphore import SPREAD, SemaphoreLock, agreed_slot, semaphore

from ._scripted import NEVER, Cluster, Late, Sent, run

DOWN = NodeConnectionError("connection refused")


class SlotNode:
    """One node's keys, running the semaphore's scripts as Redis would (a model)."""

    def __init__(self, cluster: Cluster, name: str) -> None:
        self.cluster = cluster
        self.name = name
        self.keys: dict[bytes, tuple[bytes, float]] = {}  # key -> (token, expires at)
        self.down = False

    def live(self) -> dict[bytes, bytes]:
        now = self.cluster.clock()
        self.keys = {k: v for k, v in self.keys.items() if v[1] > now}
        return {k: v[0] for k, v in self.keys.items()}

    def acquire(self, sent: Sent) -> Reply:
        if self.down:
            return DOWN
        token, ttl_ms, most = sent.args
        assert isinstance(ttl_ms, int)
        assert isinstance(most, int)
        assert isinstance(token, bytes)
        held, mask, taken = self.live(), 0, 0
        for bit, key in enumerate(sent.keys):
            if key not in held and taken < most:
                self.keys[key] = (token, self.cluster.clock() + ttl_ms / 1000)
                mask |= 1 << bit
                taken += 1
        return mask

    def release(self, sent: Sent) -> Reply:
        if self.down:
            return DOWN
        held, released = self.live(), 0
        for key in sent.keys:
            if held.get(key) == sent.args[0]:
                del self.keys[key]
                released += 1
        return released if sent.script == SEM_RELEASE.name else min(released, 1)

    def extend(self, sent: Sent) -> Reply:
        if self.down:
            return DOWN
        key, (token, ttl_ms) = sent.keys[0], sent.args
        assert isinstance(ttl_ms, int)
        if self.live().get(key) != token:
            return 0
        self.keys[key] = (token, self.cluster.clock() + ttl_ms / 1000)
        return 1

    def extend_many(self, sent: Sent) -> Reply:
        if self.down:
            return DOWN
        replies: list[object] = []
        for i, key in enumerate(sent.keys):
            token, ttl_ms = sent.args[3 * i + 1], sent.args[3 * i + 2]
            assert isinstance(ttl_ms, int)
            if self.live().get(key) == token:
                assert isinstance(token, bytes)
                self.keys[key] = (token, self.cluster.clock() + ttl_ms / 1000)
                replies.append(1)
            else:
                replies.append(0)
        return replies


def modelled(n: int = 3, **config: Any) -> tuple[Cluster, list[SlotNode]]:
    """A cluster whose nodes run the semaphore scripts on :class:`SlotNode` models."""
    c = Cluster(n, **config)
    models = [SlotNode(c, node.name) for node in c.nodes]
    for node, model in zip(c.nodes, models, strict=True):
        node.rules[SEM_ACQUIRE.name] = model.acquire
        node.rules[SEM_RELEASE.name] = model.release
        node.rules[RELEASE.name] = model.release
        node.rules[EXTEND.name] = model.extend
        node.rules[EXTEND_MANY.name] = model.extend_many
    return c, models


def sem(c: Cluster, limit: int, name: str = "res", **options: Any) -> SemaphoreLock:
    options.setdefault("auto_extend", False)
    return semaphore(c.engine, c.holdings, name, c.keys(name), limit, LockOptions(**options))


def slot_key(c: Cluster, index: int, name: str = "res") -> bytes:
    return c.keys(name).semaphore_slot(index)


# -- the slot choice (pure) --------------------------------------------------


@pytest.mark.parametrize(
    ("replies", "expected"),
    [
        ([0, 0, 0], (-1, 0)),
        ([0b1, 0b1, 0], (0, 2)),
        ([0b10, 0b1, 0b100], (0, 1)),  # every slot once: the lowest, one vote
        ([0b110, 0b011, 0b100], (1, 2)),  # slots 1 and 2 twice: the lowest
        ([0b110, 0b110, 0b010], (1, 3)),  # slot 1 three times beats slot 2 twice
        ([DOWN, 0b1000, None], (3, 1)),  # errors and pending count for nothing
    ],
)
def test_agreed_slot_is_the_one_most_nodes_set_lowest_on_a_tie(
    replies: Sequence[object], expected: tuple[int, int]
) -> None:
    assert agreed_slot(replies, 4) == expected


def test_bad_limits_and_options_are_refused() -> None:
    c = Cluster()
    for bad in (0, -1, 1025, 2.0, True, "3"):
        with pytest.raises(ConfigurationError, match="limit"):
            sem(c, bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="fencing"):
        sem(c, 2, fencing=True)
    with pytest.raises(ConfigurationError, match="fair"):
        sem(c, 2, fair=True)


# -- one attempt ----------------------------------------------------------------


def test_a_grant_holds_one_slot_agreed_by_a_quorum_and_extends_and_releases_it() -> None:
    c, models = modelled()
    lock = sem(c, 3)

    async def main() -> None:
        assert await lock.acquire(blocking=False)
        assert lock.slot is not None
        assert lock.limit == 3
        key = slot_key(c, lock.slot)
        assert [m.live() for m in models] == [{key: b"tok1"}] * 3
        await lock.extend()
        assert c.sent(EXTEND.name)[0][1].keys == (key,)
        await lock.release()
        assert [m.live() for m in models] == [{}] * 3
        assert lock.slot is None

    run(main(), c.clock)
    # One slot reserved per node, all the same: nothing else to release.
    assert c.to(SEM_RELEASE.name) == []


def test_a_split_vote_waits_for_the_last_node_and_releases_the_other_slots() -> None:
    c, models = modelled(node_timeout=0.1)
    # n0 has slot 0 taken, n2 slot 1: they reserve different slots whatever
    # the offset; n1 (slow) decides.
    models[0].keys[slot_key(c, 0)] = (b"other", 1e9)
    models[2].keys[slot_key(c, 1)] = (b"other", 1e9)
    acquire = models[1].acquire
    c.nodes[1].rules[SEM_ACQUIRE.name] = lambda sent: Late(acquire(sent), 0.05)
    lock = sem(c, 2)

    async def main() -> None:
        assert await lock.acquire(blocking=False)
        await asyncio.sleep(0.2)

    start = c.clock()
    run(main(), c.clock)
    assert lock.slot is not None
    mine = slot_key(c, lock.slot)
    held = [m.live() for m in models]
    # The slot granted is held on exactly the nodes that reserved it; every
    # other reservation of ours is gone.
    assert sum(h.get(mine) == b"tok1" for h in held) == 2
    assert all(token != b"tok1" for h in held for key, token in h.items() if key != mine)
    assert lock.valid_for == pytest.approx(30.0 - 0.3 - 0.05 - 0.2 - 0.002, abs=1e-6)
    assert c.clock() == pytest.approx(start + 0.05 + 0.2)  # granted once n1 answered


def test_no_slot_on_a_quorum_is_refused_and_every_reservation_undone() -> None:
    c, models = modelled()
    models[0].keys[slot_key(c, 0)] = (b"other", 1e9)
    models[2].keys[slot_key(c, 1)] = (b"other", 1e9)
    models[1].down = True
    lock = sem(c, 2)

    async def main() -> None:
        assert not await lock.acquire(blocking=False)
        await asyncio.sleep(0.1)

    run(main(), c.clock)
    assert not lock.held
    assert lock.slot is None
    assert [m.live() for m in models] == [
        {slot_key(c, 0): b"other"},
        {},
        {slot_key(c, 1): b"other"},
    ]
    assert set(lock.errors) == {"n1"}


def test_after_a_split_vote_the_next_attempt_spreads() -> None:
    c, models = modelled(retry_delay=0.1, retry_jitter=0.0)
    models[0].keys[slot_key(c, 0)] = (b"other", 1e9)
    models[2].keys[slot_key(c, 1)] = (b"other", 1e9)
    models[1].down = True
    c.engine.rng = OffsetZero()
    lock = sem(c, 3)

    async def main() -> None:
        assert await lock.acquire(timeout=5.0)

    run(main(), c.clock)
    # From offset 0, one slot each: n0 takes slot 1, n2 slot 0, for ever.
    # Three each: n0 takes 1 and 2, n2 takes 0 and 2: slot 2 on a quorum.
    reserve = [sent.args[2] for _, sent in c.sent(SEM_ACQUIRE.name)]
    assert reserve == [1, 1, 1, SPREAD, SPREAD, SPREAD]
    assert lock.slot == 2
    assert [sorted(m.live().values()) for m in models] == [
        [b"other", b"tok2"],
        [],
        [b"other", b"tok2"],
    ]


class OffsetZero(random.Random):
    """Every attempt starts at slot 0 (the jitter stays random)."""

    def randrange(self, *args: Any, **kwargs: Any) -> int:
        return 0


@pytest.mark.parametrize(
    ("pause", "never"),
    [(0.0, False), (0.01, False), (0.04, False), (0.05, True), (0.15, True), (0.35, True)],
)
def test_a_cancelled_attempt_leaves_no_reservation(pause: float, never: bool) -> None:
    c, models = modelled(node_timeout=0.1)
    models[0].keys[slot_key(c, 0)] = (b"other", 1e9)
    models[2].keys[slot_key(c, 1)] = (b"other", 1e9)
    acquire = models[1].acquire
    # n1 answers late (the split vote waits for it), or never (then the
    # attempt fails at node_timeout, and the next one after the retry delay).
    late: Any = NEVER if never else (lambda sent: Late(acquire(sent), 0.05))
    c.nodes[1].rules[SEM_ACQUIRE.name] = late
    lock = sem(c, 2)

    async def main() -> None:
        task = asyncio.ensure_future(lock.acquire(timeout=10.0))
        await asyncio.sleep(pause)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(1.0)

    run(main(), c.clock)
    assert [m.live() for m in models] == [
        {slot_key(c, 0): b"other"},
        {},
        {slot_key(c, 1): b"other"},
    ]


# -- never more than limit -----------------------------------------------------


def test_holders_on_ab_bc_ac_cannot_make_three_under_a_limit_of_two() -> None:
    # The schedule that breaks per-node counting: H1 holds on {A, B} (C was
    # down), H2 on {B, C} (A was down). A and C each have room for one more,
    # a majority: counting holders per node would admit H3 there.
    c, models = modelled(retry_delay=0.05, retry_jitter=0.01)
    a, b, c_ = models
    h1, h2, h3 = sem(c, 2, ttl=60.0), sem(c, 2, ttl=60.0), sem(c, 2, ttl=60.0)

    async def main() -> None:
        c_.down = True
        assert await h1.acquire(timeout=5.0)
        c_.down, a.down = False, True
        assert await h2.acquire(timeout=5.0)
        a.down, b.down = False, True
        assert h1.held
        assert h2.held
        # Per-node counting's view: A and C each hold one grant of two.
        assert len(a.live()) == 1
        assert len(c_.live()) == 1
        assert not await h3.acquire(timeout=5.0)
        assert not h3.held

    run(main(), c.clock)
    assert h1.slot != h2.slot
    assert [len(m.live()) for m in models] == [1, 2, 1]  # H3 left nothing behind


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize(("n", "limit"), [(3, 2), (5, 3), (3, 1)])
def test_random_failures_never_make_more_than_limit_holders(seed: int, n: int, limit: int) -> None:
    c, models = modelled(n, retry_delay=0.02, retry_jitter=0.03)
    rng = random.Random(seed)
    workers = 2 * limit + 2
    most = [0]
    held: list[SemaphoreLock] = []

    def check() -> None:
        valid = sum(lock.held for lock in held)
        most[0] = max(most[0], valid)
        assert valid <= limit

    async def nemesis() -> None:
        for _ in range(60):
            await asyncio.sleep(rng.uniform(0.01, 0.1))
            for model in models:
                model.down = rng.random() < 0.3
            check()

    async def worker() -> None:
        for _ in range(8):
            lock = sem(c, limit, ttl=rng.choice([0.2, 1.0]))
            held.append(lock)
            if await lock.acquire(timeout=rng.uniform(0.0, 0.3)):
                check()
                await asyncio.sleep(rng.uniform(0.0, 0.2))
                check()
                # Expired or not confirmed: the nemesis at work.
                with contextlib.suppress(RedlockError):
                    await lock.release()
            held.remove(lock)

    async def main() -> None:
        await asyncio.gather(nemesis(), *(worker() for _ in range(workers)))

    run(main(), c.clock)
    assert most[0] >= 1  # the schedule did grant


def test_auto_renewal_keeps_the_slot_in_a_batch() -> None:
    c, models = modelled()
    lock = sem(c, 2, ttl=1.0, auto_extend=True)
    c.script(EXTEND_MANY.name, *(m.extend_many for m in models))

    async def main() -> None:
        for model in models[:2]:
            model.keys[slot_key(c, 1)] = (b"other", 1e9)
        assert await lock.acquire(blocking=False)
        assert lock.slot == 0
        await asyncio.sleep(5.0)
        assert lock.held
        assert not lock.lost
        await lock.release()
        # A new grant on the same object, on another slot, renews that slot.
        for model in models[:2]:
            model.keys = {slot_key(c, 0): (b"other", 1e9)}
        assert await lock.acquire(blocking=False)
        assert lock.slot == 1
        await asyncio.sleep(5.0)
        assert lock.held
        assert not lock.lost
        await lock.release()

    run(main(), c.clock)
    renewed = {key for _, sent in c.sent(EXTEND_MANY.name) for key in sent.keys}
    assert slot_key(c, 1) in renewed


def test_a_split_vote_to_the_end_is_busy_not_unavailable() -> None:
    # Every node has room, each for another slot: contention, not nodes down.
    c, models = modelled(retry_delay=0.05, retry_jitter=0.01)
    for model, taken in zip(models, [(0, 1), (1, 2), (0, 2)], strict=True):
        model.keys = {slot_key(c, i): (b"other", 1e9) for i in taken}

    async def main() -> None:
        with pytest.raises(LockBusy, match="contended") as caught:
            async with sem(c, 3, timeout=0.3):
                pass
        assert not isinstance(caught.value, QuorumUnavailable)
        # Nodes down stay unavailable.
        for model in models:
            model.down = True
        with pytest.raises(QuorumUnavailable):
            async with sem(c, 3, timeout=0.3):
                pass

    run(main(), c.clock)


class FixedOffset(random.Random):
    def __init__(self, offset: int) -> None:
        super().__init__(0)
        self.offset = offset

    def randrange(self, *args: Any, **kwargs: Any) -> int:
        return self.offset


@pytest.mark.parametrize(
    ("offset", "taken", "expected"), [(0, range(29), 29), (35, range(35, 40), 0)]
)
def test_a_limit_over_the_window_sees_30_slots_from_the_offset_wrapping(
    offset: int, taken: range, expected: int
) -> None:
    c, models = modelled()
    c.engine.rng = FixedOffset(offset)
    for model in models:
        model.keys = {slot_key(c, i): (b"other", 1e9) for i in taken}
    lock = sem(c, 40)

    async def main() -> None:
        assert await lock.acquire(blocking=False)

    run(main(), c.clock)
    [(_, sent), *_] = c.sent(SEM_ACQUIRE.name)
    assert sent.keys == tuple(slot_key(c, (offset + i) % 40) for i in range(30))
    assert lock.slot == expected
