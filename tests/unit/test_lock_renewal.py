"""extend(), background renewal and loss, over scripted nodes in virtual time."""

from __future__ import annotations

import asyncio
import gc
import itertools
import math
import random
import weakref
from typing import Any

import pytest

from redlock_async._base._errors import (
    ConfigurationError,
    LockLost,
    NodeConnectionError,
    QuorumUnavailable,
)
from redlock_async._core._lock import Lock
from redlock_async._core._renewal import Renewer
from redlock_async._core._scripts import ACQUIRE, EXTEND, EXTEND_MANY, RELEASE
from redlock_async._engine import Settled, Tally, settled, vote_limit
from redlock_async._engine._node import unsent

from ._scripted import NEVER, Cluster, Late, busy_until, per_key, run, sequence

DOWN = NodeConnectionError("connection refused")
DRIFT_3S = 3.0 * 0.01 + 0.002  # drift allowance of a 3 s grant at drift_factor 0.01
GRID_3S = 3.0 / 64  # renewal grid of a 3 s ttl


def granted_cluster(**config: Any) -> Cluster:
    c = Cluster(**config)
    c.script(ACQUIRE.name, 1)
    c.script(RELEASE.name, 1)
    return c


@pytest.fixture(params=[True, False], ids=["batched", "one-by-one"])
def batched(request: pytest.FixtureRequest) -> bool:
    """Renewals in one call per node for many grants, or one call per grant
    (nodes that are a Redis Cluster): every schedule test runs on both."""
    return bool(request.param)


def renewal_script(batched: bool) -> str:
    """The script background renewals send on each path."""
    return EXTEND_MANY.name if batched else EXTEND.name


def on_grid(t: float, grid: float) -> bool:
    return math.isclose(t / grid, round(t / grid), abs_tol=1e-6)


# -- extend() ----------------------------------------------------------------


def test_extend_renews_to_another_ttl() -> None:
    c = granted_cluster()
    c.script(EXTEND.name, 1)
    lock = c.lock(ttl=1.0, auto_extend=False)

    async def main() -> None:
        assert await lock.acquire()
        await asyncio.sleep(0.5)
        await lock.extend(5.0)

    run(main(), c.clock)
    extends = c.sent(EXTEND.name)
    assert [name for name, _ in extends] == ["n0", "n1", "n2"]
    assert all(sent.args == (b"tok1", 5000) for _, sent in extends)
    assert all(sent.keys == (c.keys().lock,) for _, sent in extends)
    assert lock.ttl == 5.0
    assert lock.valid_for == pytest.approx(5.0 - 0.05 - 0.002)


def test_a_refused_extend_loses_the_lock_and_cleans_up() -> None:
    c = granted_cluster()
    c.script(EXTEND.name, 0, 0, 1)
    lost: list[Lock] = []
    lock = c.lock(ttl=1.0, auto_extend=False, on_lost=lost.append)

    async def main() -> None:
        assert await lock.acquire()
        with pytest.raises(LockLost, match="quorum of nodes no longer holds it"):
            await lock.extend()

    run(main(), c.clock)
    assert lock.lost
    assert not lock.held
    assert lost == [lock]
    assert len(c.sent(EXTEND.name)) == 3  # refused: no retry
    releases = c.sent(RELEASE.name)
    assert [name for name, _ in releases] == ["n0", "n1", "n2"]
    assert all(sent.args == (b"tok1",) for _, sent in releases)


def test_a_failed_extend_is_one_try_and_leaves_the_lock_held() -> None:
    # Issue 38: no quorum answering used to hold extend() for the grant's
    # whole remaining validity. By default it is one fan-out, decided within
    # V; unconfirmed while the grant is valid, the lock is still held.
    c = granted_cluster(retry_delay=0.2)
    c.script(EXTEND.name, 1, DOWN, DOWN)  # failed, but nobody refused
    lost: list[Lock] = []
    lock = c.lock(ttl=1.0, auto_extend=False, on_lost=lost.append)
    start = c.clock()

    async def main() -> None:
        assert await lock.acquire()
        with pytest.raises(QuorumUnavailable, match="1 of 3 nodes said yes") as caught:
            await lock.extend()
        assert set(caught.value.errors) == {"n1", "n2"}
        assert "still held" in str(caught.value)

    run(main(), c.clock)
    assert c.times(EXTEND.name) == [start]  # one try
    assert c.clock() == start  # the nodes failed at once: nothing waited for
    assert lock.held
    assert not lock.lost
    assert lost == []
    assert lock.valid_for == pytest.approx(1.0 - 0.012)  # the acquire's, unchanged
    assert c.sent(RELEASE.name) == []


def test_an_unconfirmed_extend_returns_within_the_vote_limit() -> None:
    # Virtual time: the worst case exactly. n0 says yes, n1 is silent, n2
    # keeps answering earlier commands but never ours: its vote fails only
    # at the backlog limit, V after the send - and extend() returns then.
    c = granted_cluster(node_timeout=0.05)
    c.script(EXTEND.name, 1, NEVER, NEVER)
    lock = c.lock(ttl=6.0, auto_extend=False)

    async def main() -> float:
        assert await lock.acquire()
        sent = c.clock()
        busy_until(c, 2, sent, sent + 10.0, 0.01)
        with pytest.raises(QuorumUnavailable) as caught:
            await lock.extend()
        assert "still answering earlier commands" in str(caught.value.errors["n2"])
        return c.clock() - sent

    took = run(main(), c.clock)
    assert took == pytest.approx(vote_limit(0.05) - 0.001, abs=1e-6)  # timers fire 1 ms early
    assert lock.held
    assert not lock.lost


def test_an_extend_does_not_wait_for_a_renewal_in_flight() -> None:
    # A renewal in flight may take V to be decided: waiting for it, then
    # sending its own, made extend() take up to 2 V. It is stopped instead
    # (its verdict ignored when it lands) and the extend goes out at once.
    c = granted_cluster(ordered=False)  # what runs later may answer first
    c.renewals(Late(1, 0.5))  # the nodes answer renewals 0.5 s after their send ...
    c.script(EXTEND.name, 1)
    lock = c.lock(ttl=3.0)
    start = c.clock()
    took: list[float] = []

    async def main() -> None:
        assert await lock.acquire()
        for index in range(3):  # ... busy with earlier commands meanwhile: votes wait
            busy_until(c, index, start, start + 3.0, 0.01)
        # The first renewal goes out 0.67-0.97 s in (two thirds of the ttl
        # left, less a spread, on its grid): at 1 s it is in flight.
        await asyncio.sleep(1.0)
        renewer = lock._renewer
        assert renewer is not None
        assert renewer.in_flight is not None
        asked = c.clock()
        await lock.extend(5.0)
        took.append(c.clock() - asked)
        assert lock.ttl == 5.0
        assert lock.valid_for == pytest.approx(5.0 - 0.052)
        await asyncio.sleep(0.6)  # the renewal lands: its verdict changes nothing
        assert lock.ttl == 5.0
        assert lock.valid_for == pytest.approx(5.0 - 0.052 - 0.6)

    run(main(), c.clock)
    assert took == [0.0]
    assert lock.held


def test_after_an_unconfirmed_extend_the_renewal_goes_on(batched: bool) -> None:
    c = granted_cluster(retry_delay=0.2, cross_slot=batched)
    c.script(EXTEND.name, 1, DOWN, DOWN)  # the extend fails ...
    c.script(EXTEND_MANY.name, per_key(1))  # ... the batched renewals work
    lost: list[Lock] = []
    lock = c.lock(ttl=3.0, on_lost=lost.append)
    start = c.clock()

    async def main() -> None:
        assert await lock.acquire()
        with pytest.raises(QuorumUnavailable, match="its renewal goes on"):
            await lock.extend()
        c.script(EXTEND.name, 1)  # the nodes are back (renewals one by one use it)
        await asyncio.sleep(6.0)  # twice the ttl: renewed all along

    run(main(), c.clock)
    assert lost == []
    assert lock.held
    assert not lock.lost
    renewals = [t for t in c.times(renewal_script(batched)) if t > start]
    assert len(renewals) >= 5


def test_a_renewal_that_fails_after_an_unconfirmed_extend_reports_its_errors(
    batched: bool,
) -> None:
    # The extend's errors are the renewal's to report: a loss right after it
    # says the renewals could not reach a quorum, not that the loop was blocked.
    c = granted_cluster(node_timeout=0.05, cross_slot=batched)
    c.renewals(1, DOWN, DOWN)
    lost: list[Lock] = []
    lock = c.lock(ttl=3.0, on_lost=lost.append, cancel_on_lost=False)

    async def main() -> None:
        assert await lock.acquire()
        c.clock.advance(2.9)  # the loop was busy: the grant is 0.07 s from its end
        with pytest.raises(QuorumUnavailable):
            await lock.extend()
        await lock.lost_event.wait()

    run(main(), c.clock)
    assert lost == [lock]
    error = lock._loss.error
    assert error is not None
    assert "could not reach a quorum" in str(error)
    assert set(error.errors) == {"n1", "n2"}


def test_a_failed_extend_with_a_timeout_retries_until_the_timeout() -> None:
    c = granted_cluster(retry_delay=0.2)
    c.script(EXTEND.name, 1, DOWN, DOWN)
    lock = c.lock(ttl=1.0, auto_extend=False)
    start = c.clock()

    async def main() -> None:
        assert await lock.acquire()
        with pytest.raises(QuorumUnavailable, match="last of 4 tries"):
            await lock.extend(timeout=0.4)

    run(main(), c.clock)
    # Every min(retry_delay, ttl/6), the last at the timeout.
    interval = 1.0 / 6.0
    expected = [start, start + interval, start + 2 * interval, start + 0.4]
    assert c.times(EXTEND.name) == pytest.approx(expected)
    assert c.clock() == pytest.approx(start + 0.4)
    assert lock.held
    assert not lock.lost


def test_a_failed_extend_without_a_timeout_retries_until_the_validity_ends() -> None:
    c = granted_cluster(retry_delay=0.2)
    c.script(EXTEND.name, 1, DOWN, DOWN)  # failed, but nobody refused
    lock = c.lock(ttl=1.0, auto_extend=False)
    start = c.clock()

    async def main() -> None:
        assert await lock.acquire()
        with pytest.raises(LockLost, match="validity ended") as caught:
            await lock.extend(timeout=None)
        assert set(caught.value.errors) == {"n1", "n2"}  # the last try's

    run(main(), c.clock)
    validity_end = start + 1.0 - 0.012
    # Every min(retry_delay, ttl/6) while valid; lost exactly when it ends.
    interval = 1.0 / 6.0
    expected = [start + k * interval for k in range(6)]
    assert expected[-1] < validity_end < expected[-1] + interval
    assert c.times(EXTEND.name) == pytest.approx(expected)
    assert c.clock() == pytest.approx(validity_end)
    assert lock.lost


def test_a_timeout_past_the_validity_ends_with_the_validity() -> None:
    c = granted_cluster(retry_delay=0.2)
    c.script(EXTEND.name, 1, DOWN, DOWN)
    lock = c.lock(ttl=1.0, auto_extend=False)
    start = c.clock()

    async def main() -> None:
        assert await lock.acquire()
        with pytest.raises(LockLost, match="validity ended"):
            await lock.extend(timeout=30.0)

    run(main(), c.clock)
    assert c.clock() == pytest.approx(start + 1.0 - 0.012)
    assert lock.lost


def test_a_failed_extend_to_a_shorter_ttl_shortens_the_validity() -> None:
    c = granted_cluster()
    # The extend to 0.1 s reached n0 only: n0 now drops the key 0.1 s after
    # it was sent, and a majority no longer holds the grant's old validity.
    c.script(EXTEND.name, 1, DOWN, DOWN)
    lock = c.lock(ttl=1.0, auto_extend=False)
    start = c.clock()

    async def main() -> None:
        assert await lock.acquire()
        await asyncio.sleep(0.01)
        # One try: unconfirmed, still held - for what n0 now keeps at least.
        with pytest.raises(QuorumUnavailable):
            await lock.extend(0.1)
        assert lock.held
        assert lock.valid_for == pytest.approx(0.1 - 0.001 - 0.002)
        # Retried until the validity ends: that is the shortened one.
        with pytest.raises(LockLost, match="validity ended"):
            await lock.extend(0.1, timeout=None)

    run(main(), c.clock)
    assert c.clock() == pytest.approx(start + 0.01 + 0.097)  # not 0.988


@pytest.mark.parametrize("timeout", [-1.0, math.nan, math.inf, "1", True])
def test_a_bad_extend_timeout_is_refused(timeout: Any) -> None:
    c = granted_cluster()
    lock = c.lock(auto_extend=False)

    async def main() -> None:
        assert await lock.acquire()
        with pytest.raises(ConfigurationError, match="timeout"):
            await lock.extend(timeout=timeout)
        assert lock.held  # nothing was sent

    run(main(), c.clock)
    assert c.sent(EXTEND.name) == []


def test_extend_without_a_grant_raises() -> None:
    from redlock_async._base._errors import LockNotOwned

    c = granted_cluster()
    lock = c.lock()

    async def main() -> None:
        with pytest.raises(LockNotOwned):
            await lock.extend()

    run(main(), c.clock)


# -- the renewal schedule ----------------------------------------------------


def test_renewals_are_due_at_two_thirds_of_the_ttl_left_less_spread_on_the_grid(
    batched: bool,
) -> None:
    # The spread comes from the engine's rng: seeded here to replay it.
    spreads = random.Random(7)
    c = granted_cluster(cross_slot=batched)
    c.engine.rng.seed(7)
    c.renewals(1)
    script = renewal_script(batched)
    lock = c.lock(ttl=3.0)
    start = c.clock()

    async def main() -> float:
        assert await lock.acquire()
        await asyncio.sleep(6.0)
        valid_for = lock.valid_for
        await lock.release()
        return valid_for

    valid_for = run(main(), c.clock)
    expected: list[float] = []
    renewed = start
    while True:
        # Two thirds of the ttl left: validity_end - 2 s = renewed + 0.968 s,
        # less a spread in [0, ttl/12), rounded down to the ttl/64 grid.
        due = renewed + (3.0 - DRIFT_3S) - 2.0 - spreads.uniform(0.0, 0.25)
        due = math.floor(due / GRID_3S) * GRID_3S
        if due > start + 6.0:
            break
        expected.append(due)
        renewed = due
    times = c.times(script)
    assert times == pytest.approx(expected, abs=1e-9)
    assert len(times) >= 6
    assert all(on_grid(t, GRID_3S) for t in times)
    gaps = [b - a for a, b in zip([start, *times], times, strict=False)]
    assert all(0.968 - 0.25 - GRID_3S < gap <= 0.968 + 1e-9 for gap in gaps)
    assert valid_for == pytest.approx(expected[-1] + 3.0 - DRIFT_3S - (start + 6.0))
    args = (b"x", b"tok1", 3000) if batched else (b"tok1", 3000)
    assert all(sent.args == args for _, sent in c.sent(script))
    assert c.to(EXTEND.name if batched else EXTEND_MANY.name) == []


def test_a_renewal_that_fails_on_too_many_nodes_is_retried(batched: bool) -> None:
    c = granted_cluster(retry_delay=0.2, cross_slot=batched)
    c.engine.rng.seed(7)
    c.renewals(1, sequence(DOWN, DOWN, 1), sequence(DOWN, DOWN, 1))
    lost: list[Lock] = []
    lock = c.lock(ttl=3.0, on_lost=lost.append)

    async def main() -> None:
        assert await lock.acquire()
        await asyncio.sleep(1.5)  # the third renewal is due by ~1.4 s, the fourth after ~1.7 s

    run(main(), c.clock)
    first, retry, again = c.times(renewal_script(batched))
    # Retried after min(retry_delay, ttl/6) = 0.2 s (not on the grid: see
    # the test of retries near the loss deadline).
    assert retry == pytest.approx(first + 0.2)
    assert again == pytest.approx(retry + 0.2)
    assert not lost
    assert lock.held
    # The third renewal worked: a full validity from when it was sent.
    assert lock.valid_for == pytest.approx(again + 3.0 - DRIFT_3S - c.clock())


def test_renewal_loss_at_the_loss_deadline_cancels_the_body(batched: bool) -> None:
    c = granted_cluster(node_timeout=0.05, cross_slot=batched)
    # Every renewal fails on two nodes (after a millisecond: time moves).
    c.renewals(Late(1, 0.001), Late(DOWN, 0.001), Late(DOWN, 0.001))
    lost: list[Lock] = []
    lock = c.lock(ttl=3.0, on_lost=lost.append)
    start = c.clock()
    body: list[str] = []

    async def main() -> None:
        with pytest.raises(LockLost, match="renewals could not reach a quorum") as caught:
            async with lock:
                body.append("entered")
                try:
                    await asyncio.sleep(100.0)
                except asyncio.CancelledError:
                    body.append("cancelled")
                    raise
                body.append("finished")
        assert set(caught.value.errors) == {"n1", "n2"}

    run(main(), c.clock)
    assert body == ["entered", "cancelled"]
    assert lost == [lock]
    assert lock.lost
    assert not lock.held
    # Lost at the loss deadline: validity end less min(node_timeout, ttl/10).
    deadline = start + 3.0 - DRIFT_3S - 0.05
    assert deadline <= c.clock() <= deadline + 0.005
    # No release: lost for want of a quorum's answer, the grant may live on
    # the nodes, where another copy of it (adopt() of its token) may hold it.
    # Its keys expire by their ttl.
    assert c.sent(RELEASE.name) == []


def test_renewal_retries_are_spaced_out_until_the_loss_deadline(batched: bool) -> None:
    # Nodes that fail at once (connection refused, or a driver backing off
    # answers without sending): retries must still wait min(retry_delay,
    # time left), not spin. renewal_due() rounds the last retry down to the
    # ttl/64 grid, to a time before the loss deadline; from there, the time
    # left is shorter than the distance to the next grid point, so every
    # retry is due "now" again: fan-outs back to back until the deadline.
    c = granted_cluster(node_timeout=0.05, retry_delay=0.2, cross_slot=batched)
    c.engine.rng.seed(7)
    c.renewals(Late(1, 0.0001), Late(DOWN, 0.0001), Late(DOWN, 0.0001))
    lock = c.lock(ttl=3.0)
    start = c.clock()

    async def main() -> None:
        assert await lock.acquire()
        await asyncio.sleep(4.0)

    run(main(), c.clock)
    assert lock.lost
    times = [t - start for t in c.times(renewal_script(batched))]
    # Renewals run from ~1 s until the loss deadline at ~2.92 s, 0.2 s apart
    # (less grid rounding): about ten; a spin makes hundreds.
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert len(times) <= 15, (
        f"{len(times)} renewal fan-outs; the last {sum(g < 0.01 for g in gaps)} "
        f"less than 10 ms apart, from t=+{times[-1] - sum(g for g in gaps if g < 0.01):.4f}"
    )


def test_a_renewal_due_while_the_loop_was_blocked_past_the_validity_is_a_loss(
    batched: bool,
) -> None:
    c = granted_cluster(cross_slot=batched)
    c.renewals(1)
    lost: list[Lock] = []
    lock = c.lock(ttl=3.0, on_lost=lost.append, cancel_on_lost=False)

    async def main() -> None:
        with pytest.raises(LockLost, match="event loop blocked"):
            async with lock:
                c.clock.advance(5.0)  # a synchronous call blocks the loop
                await asyncio.sleep(0.001)  # the overdue timer runs
                assert lock.lost
                await asyncio.sleep(1.0)  # cancel_on_lost=False: the body goes on

    run(main(), c.clock)
    assert lost == [lock]
    # Not attempted: it could not be valid any more.
    assert c.to(EXTEND.name) == c.to(EXTEND_MANY.name) == []


# -- what a renewed grant keeps ----------------------------------------------


def test_a_renewed_grant_keeps_only_the_votes_of_its_acquire(batched: bool) -> None:
    # The acquire's tally (its group, future, replies: about 400 bytes) is
    # dropped; what a cleanup needs of it - which nodes may hold the key -
    # is kept, shared, and a loss still cleans up exactly there.
    c = Cluster(cross_slot=batched)
    c.script(ACQUIRE.name, 1, 1, 0)  # n2 refused: it holds nothing of ours
    c.script(RELEASE.name, 1)
    # Renewed twice, then refused by every node.
    c.renewals(sequence(1, 1, 0), sequence(1, 1, 0), sequence(1, 1, 0))
    lost: list[Lock] = []
    lock = c.lock(ttl=3.0, on_lost=lost.append)
    kept: list[object] = []

    async def main() -> None:
        assert await lock.acquire()
        await asyncio.sleep(1.5)  # one renewal (due at about ttl/3)
        grant = lock._grant
        assert grant is not None
        assert len(c.times(renewal_script(batched))) >= 1
        kept.append(grant.acquired)
        gc.collect()
        assert not any(isinstance(ref, Tally) for ref in gc.get_referents(grant))
        await asyncio.sleep(10.0)  # refused: lost

    run(main(), c.clock)
    assert kept == [settled([1, 1, 0])]
    assert isinstance(kept[0], Settled)
    # Shared, by votes: a node that never got the command wrote nothing either,
    # one that failed it may have run it.
    assert kept[0] is settled([2, 1, unsent(DOWN)])
    assert settled([1, 1, DOWN]).replies == (1, 1, 1)
    assert lost == [lock]
    assert c.to(RELEASE.name) == ["n0", "n1"]  # where the acquire may have written


def test_held_locks_are_tracked_through_their_renewer_alone() -> None:
    # One weak reference per held lock (its renewer) serves the Holdings set,
    # the owners and the schedule; a lock garbage-collected while held leaves them.
    c = granted_cluster()
    c.renewals(1)

    async def main() -> None:
        locks = [c.lock(f"res{i}", ttl=3.0) for i in range(3)]
        for lock in locks:
            assert await lock.acquire()
        renewers = {lock._renewer for lock in locks}
        assert c.holdings._held == renewers
        assert all(type(r) is Renewer for r in renewers)
        gone = weakref.ref(locks[0])
        del locks[0]
        gc.collect()
        assert gone() is None
        assert len(c.holdings._held) == 2
        await asyncio.sleep(3.0)  # renewals go on for the others, none for it
        assert all(lock.held for lock in locks)
        for lock in locks:
            await lock.release()
        assert not c.holdings._held

    run(main(), c.clock)
