"""Every call returns within its bound, whatever the process's other locks are doing.

Scripted nodes in virtual time (exact times, no sockets):

- admission: a wait for a slot ends at the caller's deadline, saying why;
  one-shot attempts have a reserve blocking attempts never take, and a line
  of their own, served first;
- votes: a node busy answering earlier commands keeps its vote at most
  ``backlog_limit`` past the fan-out's deadline (it used to keep it for as
  long as it kept answering others); an attempt still undecided at the
  caller's deadline is abandoned and undone;
- renewals judge a late vote by that same rule (they used to fail it at
  ``node_timeout`` while acquires waited on).
"""

from __future__ import annotations

import asyncio

import pytest

from redlock_async import QuorumUnavailable
from redlock_async._core._lock import Lock
from redlock_async._core._scripts import ACQUIRE, EXTEND_MANY, RELEASE
from redlock_async._engine._admission import Admission
from redlock_async._engine._epochs import Epochs
from redlock_async._engine._node import stall_limit
from redlock_async._engine._tally import PENDING, vote_limit

from ._scripted import NEVER, Answer, Cluster, Late, Sent, busy_until, per_key, run, sequence

# -- admission, alone ------------------------------------------------------------


def test_a_wait_for_a_slot_gives_up_at_its_timeout_and_leaves_the_line() -> None:
    async def main() -> None:
        admission = Admission(1)
        admission.free -= 1  # one attempt holds the only slot
        loop = asyncio.get_running_loop()
        start = loop.time()
        assert not await admission.wait(0.3)
        assert loop.time() == pytest.approx(start + 0.3)
        assert admission.waiting == 0
        assert not await admission.wait(0.0)  # no time to wait: refused at once
        assert loop.time() == pytest.approx(start + 0.3)
        admission.leave()  # nobody waits: the slot goes back to the pool
        assert admission.free == 1

    run(main())


def test_one_shots_take_the_reserve_and_are_served_before_blocking_waiters() -> None:
    async def main() -> list[str]:
        admission = Admission(8)  # reserve: 2
        assert admission.reserve == 2
        admission.free = 0  # eight blocking attempts hold every slot
        order: list[str] = []

        async def waiter(name: str, *, oneshot: bool) -> None:
            assert await admission.wait(oneshot=oneshot)
            order.append(name)

        # The reserve: two one-shots go at once, without waiting.
        assert await admission.wait(oneshot=True)
        assert await admission.wait(oneshot=True)
        assert admission.free == -2
        tasks = [
            asyncio.ensure_future(waiter("blocking", oneshot=False)),
            asyncio.ensure_future(waiter("oneshot", oneshot=True)),
        ]
        await asyncio.sleep(0)
        assert admission.waiting == 2
        admission.leave()  # a slot frees: the waiting one-shot's, though it came later
        await asyncio.sleep(0)
        assert order == ["oneshot"]
        admission.leave()  # repays the reserve: still one over the blocking limit
        admission.leave()  # repays it
        await asyncio.sleep(0)
        assert order == ["oneshot"]
        assert admission.free == 0
        admission.leave()  # now the blocking waiter's
        await asyncio.gather(*tasks)
        assert admission.waiting == 0
        return order

    assert run(main()) == ["oneshot", "blocking"]


def test_a_waiter_cancelled_after_giving_up_gives_back_nothing() -> None:
    async def main() -> None:
        admission = Admission(1)
        admission.free -= 1
        task = asyncio.ensure_future(admission.wait(0.1))
        await asyncio.sleep(0.2)  # gave up at 0.1
        assert task.done()
        assert task.result() is False
        admission.leave()
        assert admission.free == 1  # not handed to the waiter that left

    run(main())


# -- admission in acquire() --------------------------------------------------------

# n0 is blackholed (never answers; node_timeout 4 s). n1 grants everything;
# n2 holds the "stuck:*" names for someone else: an attempt on one of those
# is one yes and one no, and needs n0's vote to break the tie - so it holds
# its admission slot for node_timeout. Free names are granted by n1 and n2 at once.
NODE_TIMEOUT = 4.0


def tie_breaker_down() -> Cluster:
    c = Cluster(node_timeout=NODE_TIMEOUT)

    def n2(sent: Sent) -> Answer:
        return 0 if b"stuck:" in sent.keys[0] else 1

    c.script(ACQUIRE.name, NEVER, 1, n2)
    c.script(RELEASE.name, NEVER, 1, 1)
    return c


def stuck(c: Cluster, count: int) -> list[asyncio.Future[bool]]:
    """``count`` attempts on held names, each in flight for node_timeout (timeout=10 s)."""
    locks = [c.lock(f"stuck:{i}", auto_extend=False) for i in range(count)]
    return [asyncio.ensure_future(lock.acquire(timeout=10.0)) for lock in locks]


def test_a_timed_acquire_waiting_for_admission_gives_up_at_its_timeout_saying_why() -> None:
    c = tie_breaker_down()
    c.engine.admission = Admission(4)
    lock = c.lock("free", auto_extend=False)
    start = c.clock()
    result: list[bool] = []

    async def main() -> None:
        others = stuck(c, 4)
        await asyncio.sleep(0.01)  # every slot held, for node_timeout
        result.append(await lock.acquire(timeout=0.3))
        assert c.clock() == pytest.approx(start + 0.31)  # within its timeout, not 4 s
        for other in others:
            other.cancel()

    run(main(), c.clock)
    assert result == [False]
    assert set(lock.errors) == {"n0", "n1", "n2"}
    assert all("not sent: 4 acquire attempts" in str(e) for e in lock.errors.values())
    assert [sent.keys[0] for _, sent in c.sent(ACQUIRE.name) if b"free" in sent.keys[0]] == []


def test_async_with_waiting_for_admission_raises_unavailable_not_held_elsewhere() -> None:
    # The name is held elsewhere at the first attempt (a quorum refuses);
    # by the retry, other names' attempts hold every slot. The give-up is
    # about admission, not about who holds the name.
    c = tie_breaker_down()
    c.engine.admission = Admission(1)
    c.script(ACQUIRE.name, NEVER, 0, 0)  # "taken" and stuck:* alike refused by n1, n2 first
    lock = c.lock("taken", auto_extend=False, timeout=1.0)
    start = c.clock()
    raised: list[QuorumUnavailable] = []

    async def main() -> None:
        entering = asyncio.ensure_future(lock.__aenter__())
        await asyncio.sleep(0.01)  # refused by a quorum at once; waits to retry
        c.script(ACQUIRE.name, NEVER, 1, 0)  # from now: one yes, one no, n0 to break it
        others = stuck(c, 1)
        try:
            await entering
        except QuorumUnavailable as exc:
            raised.append(exc)
        assert c.clock() == pytest.approx(start + 1.0)
        for other in others:
            other.cancel()

    run(main(), c.clock)
    [error] = raised
    assert "too many attempts in flight" in str(error)
    assert "held elsewhere" not in str(error)
    assert error.attempt_count == 1  # the first attempt's votes are still reported
    assert error.attempts[0].taken == ("n1", "n2")


def test_a_one_shot_on_a_free_name_does_not_wait_behind_blocking_attempts() -> None:
    c = tie_breaker_down()
    c.engine.admission = Admission(4)
    lock = c.lock("free", auto_extend=False)
    start = c.clock()
    result: list[bool] = []

    async def main() -> None:
        others = stuck(c, 4)
        await asyncio.sleep(0.01)
        result.append(await lock.acquire(blocking=False))
        assert c.clock() == pytest.approx(start + 0.01)  # at once, from the reserve
        for other in others:
            other.cancel()

    run(main(), c.clock)
    assert result == [True]


def test_a_burst_of_one_shots_beyond_the_reserve_waits_its_turn_and_is_all_granted() -> None:
    c = Cluster(node_timeout=0.05)
    c.script(ACQUIRE.name, Late(1, 0.01))
    c.engine.admission = Admission(4)  # reserve: 1
    locks = [c.lock(f"res{i}", auto_extend=False) for i in range(12)]

    async def main() -> list[bool]:
        return await asyncio.gather(*(lock.acquire(blocking=False) for lock in locks))

    start = c.clock()
    assert run(main(), c.clock) == [True] * 12
    # Five on the wire at a time (four, and one from the reserve): waves at
    # +0, +0.01, +0.02.
    times = c.times(ACQUIRE.name)
    assert times == pytest.approx([start, start + 0.01, start + 0.02])
    waves = [sum(1 for _, sent in c.sent(ACQUIRE.name) if sent.at == t) // 3 for t in times]
    assert waves == [5, 5, 2]
    assert c.engine.admission.free == 4
    assert c.engine.admission.waiting == 0


# -- votes of a node answering a backlog -------------------------------------------


def backlogged(node_timeout: float = 0.05) -> Cluster:
    """n0 answers ours only after 2 s, answering earlier commands all along;
    n1 grants at once; n2 is silent. n0's vote decides."""
    c = Cluster(node_timeout=node_timeout)
    c.script(ACQUIRE.name, Late(1, 2.0), 1, NEVER)
    c.script(RELEASE.name, 1)
    return c


def test_a_node_answering_a_backlog_keeps_its_vote_only_up_to_the_backlog_limit() -> None:
    c = backlogged()
    lock = c.lock(auto_extend=False)
    start = c.clock()

    async def main() -> bool:
        busy_until(c, 0, start, start + 2.0, 0.01)
        return await lock.acquire(blocking=False)

    assert not run(main(), c.clock)
    # node_timeout, then the backlog limit (stall_limit: 0.5 s here), less
    # the millisecond of timer slack - not the 2 s n0 takes.
    assert c.clock() == pytest.approx(start + 0.05 + stall_limit(0.05) - 0.001, abs=1e-6)
    assert "still answering earlier commands" in str(lock.errors["n0"])
    assert "node_timeout=0.05s" in str(lock.errors["n2"])  # the silent one, as ever
    assert sorted(c.to(RELEASE.name)) == ["n0", "n1", "n2"]  # undone where it may have run


def test_an_attempt_undecided_at_the_deadline_is_abandoned_and_undone() -> None:
    c = backlogged(node_timeout=0.25)
    lock = c.lock(auto_extend=False)
    start = c.clock()

    async def main() -> bool:
        busy_until(c, 0, start, start + 2.0, 0.01)
        return await lock.acquire(timeout=0.5)

    assert not run(main(), c.clock)
    assert c.clock() == pytest.approx(start + 0.5)  # its timeout, not n0's 1.25 s or 2 s
    assert c.times(ACQUIRE.name) == [start]  # the one attempt, cut
    # Undone as on cancellation: wherever it may have run, n0's release
    # after its pending acquire.
    assert sorted(c.to(RELEASE.name)) == ["n0", "n1", "n2"]
    assert not lock.held


def test_a_one_shots_retry_after_a_census_is_judged_within_a_lone_attempts_bound() -> None:
    # Refused while a census is under way (one that never ends here), a
    # one-shot waits for it and attempts once more. n0 refuses that attempt
    # at once, n1 and n2 answer a backlog and are still answering when it is
    # cut; judged() then waits up to node_timeout for them (a refusal is
    # among the votes). All of it within V + node_timeout of the first send,
    # as a lone attempt: the cut is at V, not V + node_timeout (then judged
    # on top, seed 10004 of the simulation went past the one-shot's bound).
    c = Cluster(node_timeout=0.05)
    c.script(ACQUIRE.name, 0, sequence(0, Late(1, 2.0)), sequence(0, Late(1, 2.0)))
    c.script(RELEASE.name, 1)
    epochs = c.engine.epochs
    assert isinstance(epochs, Epochs)
    epochs._running = True  # a census in flight, never done
    span = vote_limit(0.05)
    lock = c.lock(auto_extend=False)
    start = c.clock()

    async def main() -> bool:
        for index in (1, 2):
            busy_until(c, index, start, start + 2.0, 0.01)
        return await lock.acquire(blocking=False)

    assert not run(main(), c.clock)
    assert c.clock() == pytest.approx(start + span + 0.05)  # cut at V, judged for node_timeout
    first, second = c.times(ACQUIRE.name)
    assert first == start
    assert second == pytest.approx(start + span / 2)  # half the span waited for the census


def test_a_timed_acquire_is_not_cut_while_its_votes_cannot_outlast_the_deadline() -> None:
    c = Cluster(node_timeout=0.05)
    c.script(ACQUIRE.name, Late(1, 0.04))
    lock = c.lock(auto_extend=False)
    start = c.clock()

    async def main() -> bool:
        return await lock.acquire(timeout=10.0)  # far beyond vote_limit: no timer at all

    assert run(main(), c.clock)
    assert c.clock() == pytest.approx(start + 0.04)


# -- renewals: the same rule ---------------------------------------------------------


def test_a_batch_renewal_keeps_a_backlogged_nodes_vote_as_an_acquire_does() -> None:
    # n0 and n1 answer the renewal after 0.15 s (3 x node_timeout), busy with
    # earlier commands all along; n2 is silent. Their votes count, as they
    # would for an acquire: renewed by the first call, never retried.
    c = Cluster(node_timeout=0.05)
    c.script(ACQUIRE.name, 1)
    c.script(RELEASE.name, 1)
    c.script(EXTEND_MANY.name, per_key(Late(1, 0.15)), per_key(Late(1, 0.15)), NEVER)
    lost: list[Lock] = []
    lock = c.lock(ttl=3.0, on_lost=lost.append)
    start = c.clock()

    async def main() -> None:
        assert await lock.acquire()
        busy_until(c, 0, start, start + 2.0, 0.01)
        busy_until(c, 1, start, start + 2.0, 0.01)
        await asyncio.sleep(1.2)  # the first renewal is due after ~0.75 s, the next at ~1.5 s

    run(main(), c.clock)
    assert lost == []
    assert lock.held
    assert len(c.times(EXTEND_MANY.name)) == 1  # decided yes: no retry
    sent_at = c.times(EXTEND_MANY.name)[0]
    assert lock.valid_for == pytest.approx(sent_at + 3.0 - 0.032 - c.clock())


def test_a_batch_renewal_fails_a_backlogged_vote_at_the_backlog_limit_too() -> None:
    c = Cluster(node_timeout=0.05, retry_delay=0.2)
    c.script(ACQUIRE.name, 1)
    c.script(RELEASE.name, 1)
    c.script(EXTEND_MANY.name, per_key(Late(1, 2.0)), per_key(1), NEVER)
    lock = c.lock(ttl=3.0)
    start = c.clock()
    decided: list[float] = []

    async def main() -> None:
        assert await lock.acquire()
        busy_until(c, 0, start, start + 4.0, 0.01)
        await asyncio.sleep(0.9)  # the renewal went out at ~0.73 s; n0 keeps it waiting
        renewer = lock._renewer
        assert renewer is not None
        batch = renewer.in_flight
        assert batch is not None
        await batch.wait()
        decided.append(c.clock() - batch.tally.deadline)
        assert batch.tally.replies[0] is PENDING
        assert "still answering earlier commands" in str(batch.errors(0)["n0"])

    run(main(), c.clock)
    assert decided == [pytest.approx(stall_limit(0.05) - 0.001, abs=1e-6)]
