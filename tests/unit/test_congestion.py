"""Votes under load, and admission control: no collapse when the client outpaces its nodes.

A node's vote times out once the node has been *silent* for node_timeout -
counted from its last answer, never from when the client queued the command
(``Tally.expire``); and only a bounded number of acquire attempts are on the
wire at once (``Admission``). Scripted nodes in virtual time: exact times,
no sockets.
"""

from __future__ import annotations

import asyncio

import pytest

from redlock_async._core._scripts import ACQUIRE, RELEASE
from redlock_async._engine._admission import Admission

from ._scripted import NEVER, Cluster, Late, busy_until, run


def test_a_node_busy_answering_earlier_commands_keeps_its_vote_past_node_timeout() -> None:
    # Two of three nodes answer only after 0.2 s (4x node_timeout), but they
    # answer other commands all along (a backlog of ours): their votes count.
    c = Cluster(node_timeout=0.05)
    c.script(ACQUIRE.name, Late(1, 0.2), Late(1, 0.2), 0)
    lock = c.lock(auto_extend=False)
    start = c.clock()

    async def main() -> bool:
        busy_until(c, 0, start, start + 0.2, 0.02)
        busy_until(c, 1, start, start + 0.2, 0.02)
        return await lock.acquire(blocking=False)

    assert run(main(), c.clock)
    assert c.clock() == pytest.approx(start + 0.2)
    assert lock.valid_for == pytest.approx(30.0 - 0.2 - 0.01 * 30 - 0.002)  # from before the send
    assert lock.errors == {}


def test_a_silent_node_still_times_out_at_node_timeout() -> None:
    c = Cluster(node_timeout=0.05)
    c.script(ACQUIRE.name, NEVER, NEVER, 1)
    lock = c.lock(auto_extend=False)
    start = c.clock()

    async def main() -> bool:
        return await lock.acquire(blocking=False)

    assert not run(main(), c.clock)
    assert c.clock() == pytest.approx(start + 0.05)  # the deadline, not later
    assert set(lock.errors) == {"n0", "n1"}
    assert all("no reply within node_timeout" in str(e) for e in lock.errors.values())


def test_a_busy_node_that_falls_silent_times_out_node_timeout_after_its_last_answer() -> None:
    c = Cluster(node_timeout=0.05)
    c.script(ACQUIRE.name, NEVER, NEVER, 1)
    lock = c.lock(auto_extend=False)
    start = c.clock()

    async def main() -> bool:
        busy_until(c, 0, start, start + 0.12, 0.03)  # last answer at +0.12
        busy_until(c, 1, start, start + 0.06, 0.03)  # last answer at +0.06
        return await lock.acquire(blocking=False)

    assert not run(main(), c.clock)
    # n1 times out at 0.06 + 0.05; that alone does not decide (n0 may still
    # say yes); n0 at 0.12 + 0.05 (less the millisecond of timer slack).
    assert c.clock() == pytest.approx(start + 0.17 - 0.001, abs=1e-6)
    assert set(lock.errors) == {"n0", "n1"}
    assert c.to(RELEASE.name) == ["n0", "n1", "n2"]  # may have run: undone everywhere


def test_two_silent_nodes_of_three_decide_without_waiting_for_a_busy_one() -> None:
    # n0, n1 silent; n2 busy: two timed-out votes rule a quorum out at once.
    c = Cluster(node_timeout=0.05)
    c.script(ACQUIRE.name, NEVER, NEVER, Late(1, 1.0))
    lock = c.lock(auto_extend=False)
    start = c.clock()

    async def main() -> bool:
        busy_until(c, 2, start, start + 1.0, 0.01)
        return await lock.acquire(blocking=False)

    assert not run(main(), c.clock)
    assert c.clock() == pytest.approx(start + 0.05)


def test_attempts_beyond_the_admission_limit_wait_their_turn_and_all_get_granted() -> None:
    c = Cluster(node_timeout=0.05)
    c.script(ACQUIRE.name, Late(1, 0.01))
    c.engine.admission = Admission(2)
    locks = [c.lock(f"res{i}", auto_extend=False) for i in range(5)]
    start = c.clock()

    async def main() -> list[bool]:
        return await asyncio.gather(*(lock.acquire(blocking=False) for lock in locks))

    assert run(main(), c.clock) == [True] * 5
    # Two on the wire at a time: waves at +0, +0.01, +0.02 (2, 2, 1 attempts).
    times = [sent.at - start for _, sent in c.sent(ACQUIRE.name)]
    assert times == pytest.approx([0.0] * 6 + [0.01] * 6 + [0.02] * 3)
    assert c.engine.admission.free == 2
    assert c.engine.admission.waiting == 0


def test_an_attempt_cancelled_while_waiting_for_admission_sends_nothing() -> None:
    c = Cluster(node_timeout=0.05)
    c.script(ACQUIRE.name, Late(1, 0.01))
    c.engine.admission = Admission(1)
    first, second, third = (c.lock(f"res{i}", auto_extend=False) for i in range(3))

    async def main() -> tuple[bool, bool]:
        a = asyncio.ensure_future(first.acquire(blocking=False))
        b = asyncio.ensure_future(second.acquire(blocking=False))
        d = asyncio.ensure_future(third.acquire(blocking=False))
        await asyncio.sleep(0.001)  # a on the wire, b and d waiting
        b.cancel()
        return await a, await d

    assert run(main(), c.clock) == (True, True)
    keys = {sent.keys[0] for _, sent in c.sent(ACQUIRE.name)}
    assert keys == {c.keys("res0").lock, c.keys("res2").lock}  # res1 never sent
    assert c.engine.admission.free == 1


def test_admission_hands_slots_in_order_and_passes_on_a_slot_its_waiter_gave_up() -> None:
    async def main() -> list[str]:
        admission = Admission(1)
        admission.free -= 1  # one attempt holds the only slot
        order: list[str] = []

        async def waiter(name: str) -> None:
            await admission.wait()
            order.append(name)
            await asyncio.sleep(0)
            admission.leave()

        a = asyncio.ensure_future(waiter("a"))
        b = asyncio.ensure_future(waiter("b"))
        c = asyncio.ensure_future(waiter("c"))
        await asyncio.sleep(0)
        assert admission.waiting == 3
        admission.leave()  # the slot goes to a...
        a.cancel()  # ...which is cancelled before it can run: b must get it
        await asyncio.gather(a, b, c, return_exceptions=True)
        assert admission.free == 1
        assert admission.waiting == 0
        return order

    assert asyncio.run(main()) == ["b", "c"]
