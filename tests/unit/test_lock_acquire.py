"""acquire() over scripted nodes in virtual time: retries, deadlines, validity, fencing, fairness.

Every test runs on a :class:`VirtualTimeLoop` (see _scripted.py): no sockets,
no sleeping, and the times asserted are exact loop times.
"""

from __future__ import annotations

import asyncio
import random

import pytest

from redlock_async._base._errors import NodeConnectionError
from redlock_async._core._scripts import ACQUIRE, FAIR_ACQUIRE, FAIR_LEAVE, FENCE_RAISE, RELEASE

from ._scripted import NEVER, Cluster, Late, Rule, Sent, run

DOWN = NodeConnectionError("connection refused")


def granted_on(*tokens: bytes) -> Rule:
    """A rule: yes to the attempts with these tokens, no to the others."""
    return lambda sent: 1 if sent.args[0] in tokens else 0


# -- retries and deadlines ---------------------------------------------------


def test_refused_attempts_repeat_after_retry_delay_plus_jitter_until_the_timeout() -> None:
    c = Cluster(retry_delay=0.2, retry_jitter=0.2)
    c.script(ACQUIRE.name, 0)
    lock = c.lock(timeout=1.0)

    async def main() -> float:
        assert not await lock.acquire()
        return c.clock()

    start = c.clock()
    gave_up = run(main(), c.clock)
    # The jitter comes from the engine's rng, Random(0): replayed here.
    rng = random.Random(0)
    expected = [start]
    while (after := expected[-1] + 0.2 + rng.uniform(0.0, 0.2)) < start + 1.0:
        expected.append(after)
    assert c.times(ACQUIRE.name) == pytest.approx(expected, abs=1e-9)
    assert len(c.sent(ACQUIRE.name)) == 3 * len(expected)  # each attempt to every node
    assert gave_up == pytest.approx(start + 1.0, abs=1e-9)  # gives up at T, not later
    assert c.to(RELEASE.name) == []  # plain refusals wrote nothing to undo


def test_an_explicit_timeout_overrides_the_locks() -> None:
    c = Cluster(retry_delay=0.1, retry_jitter=0.0)
    c.script(ACQUIRE.name, 0)
    lock = c.lock(timeout=10.0)

    async def main() -> float:
        assert not await lock.acquire(timeout=0.35)
        return c.clock()

    start = c.clock()
    assert run(main(), c.clock) == pytest.approx(start + 0.35)
    assert c.times(ACQUIRE.name) == pytest.approx([start + 0.1 * k for k in range(4)])


@pytest.mark.parametrize("call", ["blocking=False", "timeout=0"])
def test_one_attempt_only_without_blocking(call: str) -> None:
    c = Cluster()
    c.script(ACQUIRE.name, 0, DOWN, 1)
    lock = c.lock(timeout=None)

    async def main() -> bool:
        if call == "timeout=0":
            return await lock.acquire(timeout=0)
        return await lock.acquire(blocking=False)

    start = c.clock()
    assert run(main(), c.clock) is False
    assert c.to(ACQUIRE.name) == ["n0", "n1", "n2"]  # exactly one attempt
    assert c.clock() == start  # no retry delay waited
    # The yes on n2 (and the broken n1, which may have run it) are undone.
    assert c.to(RELEASE.name) == ["n1", "n2"]
    assert set(lock.errors) == {"n1"}


def test_a_retry_that_succeeds_returns_the_grant() -> None:
    c = Cluster(retry_delay=0.2, retry_jitter=0.0)
    c.script(ACQUIRE.name, granted_on(b"tok3"))
    lock = c.lock(auto_extend=False)

    async def main() -> bool:
        return await lock.acquire()

    start = c.clock()
    assert run(main(), c.clock)
    assert c.times(ACQUIRE.name) == pytest.approx([start, start + 0.2, start + 0.4])
    assert lock.held
    assert lock.valid_for == pytest.approx(30.0 - 0.302)  # granted at once on the third try
    assert lock.errors == {}


def test_a_cancelled_acquire_is_undone_on_every_node_that_may_hold_it() -> None:
    c = Cluster(node_timeout=0.05)
    # n0 grants late, n1 refuses at once, n2 never answers.
    c.script(ACQUIRE.name, Late(1, 1.0), 0, NEVER)
    c.script(RELEASE.name, 1)
    lock = c.lock()

    async def main() -> float:
        task = asyncio.create_task(lock.acquire())
        await asyncio.sleep(0.01)  # sent, undecided (within node_timeout)
        assert c.to(ACQUIRE.name) == ["n0", "n1", "n2"]
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        cancelled_at = c.clock()
        await asyncio.sleep(2.0)  # n0's late yes lands
        return cancelled_at

    cancelled_at = run(main(), c.clock)
    releases = c.sent(RELEASE.name)
    # n0 (pending, then yes) and n2 (silent: may have run it); not n1 (a plain no).
    assert [name for name, _ in releases] == ["n0", "n2"]
    assert all(sent.args == (b"tok1",) and sent.at == cancelled_at for _, sent in releases)
    assert not lock.held
    assert len(c.sent(ACQUIRE.name)) == 3  # no second attempt after the cancel


def test_a_cancelled_acquire_on_unordered_nodes_releases_after_the_late_reply() -> None:
    c = Cluster(node_timeout=0.05, ordered=False)
    c.script(ACQUIRE.name, Late(1, 1.0), 0, 0)
    c.script(RELEASE.name, 1)
    lock = c.lock()

    async def main() -> None:
        task = asyncio.create_task(lock.acquire(timeout=None))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert c.to(RELEASE.name) == []  # would overtake the acquire it undoes
        await asyncio.sleep(2.0)

    start = c.clock()
    run(main(), c.clock)
    [(name, release)] = c.sent(RELEASE.name)
    assert name == "n0"
    assert release.at == pytest.approx(start + 1.0)


# -- validity and drift ------------------------------------------------------


def test_validity_is_ttl_minus_elapsed_since_before_the_send_minus_drift() -> None:
    c = Cluster(drift_factor=0.01, node_timeout=1.0)

    def slow_write(sent: Sent) -> int:
        c.clock.advance(0.3)  # time passes while the command is being sent
        return 1

    c.script(ACQUIRE.name, slow_write, Late(1, 0.04), Late(1, 0.04))
    lock = c.lock(ttl=10.0, auto_extend=False)
    start = c.clock()

    async def main() -> list[float]:
        assert await lock.acquire(blocking=False)
        seen = [lock.valid_for]
        await asyncio.sleep(4.0)
        seen.append(lock.valid_for)
        await asyncio.sleep(seen[-1])
        seen.append(lock.valid_for)
        return seen

    granted, later, at_end = run(main(), c.clock)
    drift = 10.0 * 0.01 + 0.002
    # Decided at start + 0.3 + 0.04; elapsed counts the send too.
    assert granted == pytest.approx(10.0 - 0.34 - drift)
    assert later == pytest.approx(granted - 4.0)
    assert at_end == 0.0
    assert not lock.held
    assert c.clock() == pytest.approx(start + 10.0 - drift)


@pytest.mark.parametrize(("latency", "granted"), [(0.096, True), (0.098, False)])
def test_a_grant_decided_too_late_is_refused_and_undone(latency: float, granted: bool) -> None:
    # ttl 0.1 s, drift 0.001 + 0.002: usable only if decided within 0.097 s.
    c = Cluster(node_timeout=1.0, drift_factor=0.01)
    c.script(ACQUIRE.name, Late(1, latency))
    c.script(RELEASE.name, 1)
    lock = c.lock(ttl=0.1, auto_extend=False)

    async def main() -> tuple[bool, float]:
        ok = await lock.acquire(blocking=False)
        return ok, lock.valid_for

    ok, valid_for = run(main(), c.clock)
    assert ok is granted
    if granted:
        assert valid_for == pytest.approx(0.1 - latency - 0.003)
        assert c.to(RELEASE.name) == []
    else:
        assert valid_for == 0.0
        assert c.to(RELEASE.name) == ["n0", "n1", "n2"]  # every node granted it: undone


def test_a_node_that_never_answers_counts_as_failed_at_node_timeout() -> None:
    c = Cluster(node_timeout=0.05)
    c.script(ACQUIRE.name, 1, NEVER, NEVER)
    c.script(RELEASE.name, 1)
    lock = c.lock()
    start = c.clock()

    async def main() -> bool:
        return await lock.acquire(blocking=False)

    assert run(main(), c.clock) is False
    assert c.clock() == pytest.approx(start + 0.05)  # decided by the deadline
    assert set(lock.errors) == {"n1", "n2"}
    assert c.to(RELEASE.name) == ["n0", "n1", "n2"]
    assert [node.stall_checks for node in c.nodes] == [0, 1, 1]


# -- fencing write-back ------------------------------------------------------


def test_granting_nodes_that_disagree_get_the_max_written_back() -> None:
    c = Cluster()
    c.script(ACQUIRE.name, 5, 7, 0)
    c.script(FENCE_RAISE.name, 1)
    lock = c.lock(fencing=True, auto_extend=False)

    async def main() -> bool:
        return await lock.acquire(blocking=False)

    assert run(main(), c.clock)
    assert lock.fencing_token == 7
    keys = c.keys()
    assert all(sent.keys == (keys.lock, keys.fence) for _, sent in c.sent(ACQUIRE.name))
    raises = c.sent(FENCE_RAISE.name)
    assert [name for name, _ in raises] == ["n0", "n1"]  # the granting nodes only
    assert all(sent.args == (b"tok1", 7) for _, sent in raises)
    assert all(sent.keys == (keys.lock, keys.fence) for _, sent in raises)
    assert c.to(RELEASE.name) == []


def test_a_write_back_without_a_quorum_of_confirmations_fails_the_attempt() -> None:
    c = Cluster()
    c.script(ACQUIRE.name, 5, 7, 0)
    c.script(FENCE_RAISE.name, 1, 0, 1)
    c.script(RELEASE.name, 1)
    lock = c.lock(fencing=True, auto_extend=False)

    async def main() -> bool:
        return await lock.acquire(blocking=False)

    assert run(main(), c.clock) is False
    assert lock.fencing_token is None
    assert c.to(FENCE_RAISE.name) == ["n0", "n1"]
    # Undone where the acquire said yes.
    assert [(name, sent.args) for name, sent in c.sent(RELEASE.name)] == [
        ("n0", (b"tok1",)),
        ("n1", (b"tok1",)),
    ]


@pytest.mark.parametrize("replies", [(7, 7, 7), (7, 7, 0), (7, 0, 7)])
def test_agreeing_granting_nodes_need_no_write_back(replies: tuple[int, int, int]) -> None:
    c = Cluster()
    c.script(ACQUIRE.name, *replies)
    c.script(RELEASE.name, 1)
    lock = c.lock(fencing=True, auto_extend=False)

    async def main() -> bool:
        return await lock.acquire(blocking=False)

    assert run(main(), c.clock)
    assert lock.fencing_token == 7
    assert c.to(FENCE_RAISE.name) == []


# -- the fair queue ----------------------------------------------------------


def test_a_fair_waiter_keeps_its_id_and_ticket_across_attempts_and_leaves_once_granted() -> None:
    c = Cluster(retry_delay=0.05, retry_jitter=0.0)
    # n2 keeps the waiter queued behind someone else: it must be told to drop it.
    c.script(FAIR_ACQUIRE.name, granted_on(b"tok3"), granted_on(b"tok3"), -2)
    c.script(FAIR_LEAVE.name, 1)
    lock = c.lock(fair=True, auto_extend=False)

    async def main() -> bool:
        return await lock.acquire()

    assert run(main(), c.clock)
    attempts = [sent for _, sent in c.sent(FAIR_ACQUIRE.name)]
    assert len(attempts) == 9
    assert c.to(ACQUIRE.name) == []
    waiters = {sent.args[2] for sent in attempts}
    tickets = {sent.args[3] for sent in attempts}
    assert len(waiters) == len(tickets) == 1
    [waiter] = waiters
    assert isinstance(waiter, bytes)
    assert waiter.startswith(b"x:")
    keys = c.keys()
    leaves = c.sent(FAIR_LEAVE.name)
    assert [name for name, _ in leaves] == ["n0", "n1", "n2"]
    # Granted: it leaves without announcing (nobody is first instead of it).
    assert all(sent.keys == (keys.fair_queue, keys.heartbeats) for _, sent in leaves)
    assert all(sent.args == (waiter,) for _, sent in leaves)
    assert all(sent.at >= attempts[-1].at for _, sent in leaves)


def test_a_fair_waiter_that_gives_up_leaves_and_announces_it() -> None:
    c = Cluster(retry_delay=0.2, retry_jitter=0.2)
    c.script(FAIR_ACQUIRE.name, 0)
    c.script(FAIR_LEAVE.name, 1)
    lock = c.lock(fair=True, timeout=1.0)

    async def main() -> bool:
        return await lock.acquire()

    assert run(main(), c.clock) is False
    keys = c.keys()
    leaves = c.sent(FAIR_LEAVE.name)
    assert [name for name, _ in leaves] == ["n0", "n1", "n2"]
    assert all(sent.keys == (keys.fair_queue, keys.heartbeats, keys.wake) for _, sent in leaves)


@pytest.mark.parametrize("attempts", [1, 3])
def test_a_grant_every_node_made_sends_no_leave(attempts: int) -> None:
    # Every node said yes: fair_acquire.lua dequeued the waiter on each of
    # them. That holds after refused attempts too (clean_first_try only
    # looks at the last attempt, whatever its docstring says about "first").
    c = Cluster(retry_delay=0.05, retry_jitter=0.0)
    c.script(FAIR_ACQUIRE.name, granted_on(b"tok%d" % attempts))
    lock = c.lock(fair=True, auto_extend=False)

    async def main() -> bool:
        return await lock.acquire()

    assert run(main(), c.clock)
    assert len(c.times(FAIR_ACQUIRE.name)) == attempts
    assert c.to(FAIR_LEAVE.name) == []


def test_a_first_fair_grant_that_a_node_refused_still_leaves() -> None:
    c = Cluster()
    c.script(FAIR_ACQUIRE.name, 1, 1, 0)  # n2 may still list the waiter
    c.script(FAIR_LEAVE.name, 1)
    lock = c.lock(fair=True, auto_extend=False)

    async def main() -> bool:
        return await lock.acquire()

    assert run(main(), c.clock)
    assert c.to(FAIR_LEAVE.name) == ["n0", "n1", "n2"]


def test_closing_while_an_attempt_is_in_flight_undoes_its_grant_and_raises() -> None:
    from redlock_async._base._errors import RedlockError

    c = Cluster()
    c.script(ACQUIRE.name, Late(1, 0.01))
    c.script(RELEASE.name, 1)
    lock = c.lock()

    async def main() -> None:
        task = asyncio.create_task(lock.acquire())
        await asyncio.sleep(0.001)
        c.engine.closing = True  # what aclose() sets first
        with pytest.raises(RedlockError, match="closed"):
            await task

    run(main(), c.clock)
    assert c.to(RELEASE.name) == ["n0", "n1", "n2"]
    assert not lock.held
