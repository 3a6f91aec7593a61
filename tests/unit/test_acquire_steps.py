"""The steps of one ``acquire()``, each driven alone over scripted nodes in virtual time.

``_core/_acquire.acquire`` is a loop over named steps that share one
:class:`Call` and answer a :class:`Move`. Here each step runs by itself on a
``Call`` made as ``acquire()`` makes it, and the test checks the move it
answers, what it sent, and what it left in the call: attempt (admit, send,
decide, keep or undo), after_refusal (give up, again at once, or wait),
pause (the retry delay, the deadline), wait_for_turn and behind_waiters (the line),
first_census, leave. The whole loop is tested through ``Lock.acquire`` in
test_lock_acquire.py, test_lock_wake.py, test_liveness.py and the others.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Sequence
from typing import Any

import pytest

from redlock_async._base._config import LockOptions
from redlock_async._base._errors import NodeConnectionError, RedlockError
from redlock_async._core._attempt import attempt
from redlock_async._core._call import AGAIN, DONE, REFUSED, WAIT, Call
from redlock_async._core._commands import ExclusiveCommands
from redlock_async._core._retry import (
    after_refusal,
    behind_waiters,
    first_census,
    leave,
    pause,
    wait_for_turn,
)
from redlock_async._core._scripts import ACQUIRE, FAIR_ACQUIRE, FAIR_LEAVE, RELEASE
from redlock_async._engine import Tally

from ._scripted import NEVER, Cluster, Late, VirtualClock, run
from .test_lock_wake import wake_cluster

DOWN = NodeConnectionError("connection refused")


def new_call(
    c: Cluster,
    *,
    blocking: bool = True,
    limit: float | None = None,
    unavailable: float | None = None,
    commands: ExclusiveCommands | None = None,
    **options: Any,
) -> Call:
    commands = commands if commands is not None else ExclusiveCommands(c.keys())
    return Call(c.engine, commands, LockOptions(**options), blocking, limit, unavailable)


# -- attempt: admit, send, decide, keep or undo --------------------------------


def test_attempt_keeps_a_quorum_s_yes_as_a_grant_valid_for_ttl_less_elapsed_and_drift() -> None:
    c = Cluster(drift_factor=0.01, node_timeout=0.5)
    c.script(ACQUIRE.name, Late(1, 0.1), Late(1, 0.2), 0)
    call = new_call(c, ttl=10.0)
    start = c.clock()

    assert run(attempt(call), c.clock) is DONE
    grant = call.grant
    assert grant is not None
    assert grant.token == b"tok1"
    # Decided at the quorum's second yes (0.2 s): 10 - 0.2 - (10 x 0.01 + 0.002).
    assert grant.validity_end == pytest.approx(start + 10.0 - 0.102, abs=1e-9)
    assert call.outcome() == (grant, {}, None)
    assert c.engine.admission.free == c.engine.admission.limit  # its slot given back
    assert c.to(RELEASE.name) == []


def test_attempt_refused_is_undone_where_it_may_have_run_and_counted() -> None:
    c = Cluster()
    c.script(ACQUIRE.name, 1, 0, DOWN)
    call = new_call(c)

    assert run(attempt(call), c.clock) is REFUSED
    assert call.grant is None
    assert call.failures is not None
    assert call.failures.count == 1
    # The yes (n0) and the failed node (n2: it may have run it) are undone.
    assert c.to(RELEASE.name) == ["n0", "n2"]
    assert call.behind is not None  # the next attempt follows the undo
    assert call.split  # a yes among the noes: maybe a split vote
    assert set(call.errors or {}) == {"n2"}


def test_the_next_attempt_follows_the_last_undo_on_each_node() -> None:
    c = Cluster(ordered=False)  # a pool: only the chaining orders them
    c.script(ACQUIRE.name, Late(1, 0.01), 0, 0)
    c.script(RELEASE.name, Late(1, 0.05))
    call = new_call(c)

    async def main() -> None:
        assert await attempt(call) is REFUSED
        assert call.behind is not None
        assert await attempt(call) is REFUSED
        assert call.last is not None
        assert call.last.after is None
        await asyncio.sleep(1.0)  # n0's commands run

    run(main(), c.clock)
    on_n0 = [sent.script for name, sent in c.log if name == "n0"]
    # The second acquire reached n0 only after the first one's undo answered.
    assert on_n0[:3] == [ACQUIRE.name, RELEASE.name, ACQUIRE.name]
    second = [sent.at for name, sent in c.sent(ACQUIRE.name) if name == "n0"][1]
    first_undo = next(sent.at for name, sent in c.sent(RELEASE.name) if name == "n0")
    assert second >= first_undo + 0.05 - 1e-9


def test_attempt_granted_too_late_to_be_valid_is_undone() -> None:
    c = Cluster(node_timeout=1.0)
    c.script(ACQUIRE.name, Late(1, 0.3))
    c.script(RELEASE.name, 1)
    call = new_call(c, ttl=0.3)  # granted after its whole ttl

    assert run(attempt(call), c.clock) is REFUSED
    assert call.grant is None
    assert c.to(RELEASE.name) == ["n0", "n1", "n2"]


def test_the_last_of_max_attempts_ends_the_call() -> None:
    c = Cluster()
    c.script(ACQUIRE.name, 0)
    call = new_call(c, max_attempts=2)

    async def main() -> list[object]:
        return [await attempt(call), await attempt(call)]

    assert run(main(), c.clock) == [REFUSED, DONE]
    assert call.failures is not None
    assert call.failures.count == 2


def test_attempt_ends_without_sending_when_no_admission_slot_frees_by_the_deadline() -> None:
    c = Cluster()
    c.script(ACQUIRE.name, 1)
    admission = c.engine.admission
    admission.free = 0  # every slot taken by attempts in flight
    call = new_call(c, limit=0.5)
    start = c.clock()

    assert run(attempt(call), c.clock) is DONE
    assert c.clock() == pytest.approx(start + 0.5)
    assert c.to(ACQUIRE.name) == []
    assert call.failures is not None
    assert call.failures.unadmitted == admission.limit
    grant, errors, _ = call.outcome()
    assert grant is None
    assert all("not sent" in str(error) for error in errors.values())


def test_after_a_failure_an_attempt_at_the_deadline_is_not_sent() -> None:
    c = Cluster()
    c.script(ACQUIRE.name, 0)
    call = new_call(c, limit=1.0)

    async def main() -> object:
        assert await attempt(call) is REFUSED
        await asyncio.sleep(1.0)
        return await attempt(call)

    assert run(main(), c.clock) is DONE
    assert len(c.times(ACQUIRE.name)) == 1


def test_an_attempt_whose_votes_could_outlast_the_deadline_is_cut_there() -> None:
    c = Cluster(node_timeout=0.5)
    c.script(ACQUIRE.name, NEVER)
    call = new_call(c, limit=0.2)
    start = c.clock()

    assert run(attempt(call), c.clock) is REFUSED
    assert c.clock() == pytest.approx(start + 0.2)  # not node_timeout
    assert c.to(RELEASE.name) == ["n0", "n1", "n2"]


def test_a_cancelled_attempt_is_abandoned_and_undone_everywhere() -> None:
    c = Cluster(node_timeout=0.5)
    c.script(ACQUIRE.name, Late(1, 0.3), 0, NEVER)
    call = new_call(c)

    async def main() -> None:
        task = asyncio.ensure_future(attempt(call))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(main(), c.clock)
    assert c.to(RELEASE.name) == ["n0", "n2"]
    assert c.engine.admission.free == c.engine.admission.limit


class _Disagreeing(ExclusiveCommands):
    """A kind whose judgement refuses every quorum's yes (as a semaphore's can)."""

    __slots__ = ("judged",)

    def __init__(self, c: Cluster) -> None:
        super().__init__(c.keys())
        self.judged: list[Tally] = []

    def judge(self, tally: Tally) -> Awaitable[bool]:
        async def no() -> bool:
            assert await tally.decided
            self.judged.append(tally)
            return False

        return no()


def test_the_kind_judges_a_quorum_s_yes_and_its_no_is_undone() -> None:
    c = Cluster()
    c.script(ACQUIRE.name, 1)
    commands = _Disagreeing(c)
    call = new_call(c, commands=commands)

    assert run(attempt(call), c.clock) is REFUSED
    assert len(commands.judged) == 1
    assert c.to(RELEASE.name) == ["n0", "n1", "n2"]


def test_an_attempt_begun_after_aclose_began_raises() -> None:
    c = Cluster()
    c.script(ACQUIRE.name, 1)
    call = new_call(c)
    c.engine.closing = True

    with pytest.raises(RedlockError):
        run(attempt(call), c.clock)
    assert c.to(ACQUIRE.name) == []


# -- after_refusal: give up, again at once, or wait -----------------------------


def refused(c: Cluster, call: Call) -> Call:
    c.script(ACQUIRE.name, 0)
    assert run(attempt(call), c.clock) is REFUSED
    return call


@pytest.mark.parametrize("how", ["blocking=False", "timeout=0"])
def test_a_one_shot_stops_at_its_refusal(how: str) -> None:
    c = Cluster()
    if how == "timeout=0":
        call = refused(c, new_call(c, limit=0))
    else:
        call = refused(c, new_call(c, blocking=False))
    assert run(after_refusal(call), c.clock) is DONE


def test_a_blocking_call_without_wake_ups_waits_after_its_refusal() -> None:
    c = Cluster()  # scripted nodes: no wake-ups
    call = refused(c, new_call(c, limit=5.0))
    assert run(after_refusal(call), c.clock) is WAIT
    assert call.joined


def test_the_first_in_line_attempts_again_at_once_once_it_listens() -> None:
    c = wake_cluster()
    c.script(ACQUIRE.name, 0)
    call = new_call(c, limit=5.0)

    async def main() -> object:
        assert await attempt(call) is REFUSED
        move = await after_refusal(call)
        assert call.subscription is not None
        assert call.subscription.active
        leave(call)
        return move

    assert run(main(), c.clock) is AGAIN


def test_no_quorum_answering_for_unavailable_timeout_ends_the_call() -> None:
    c = Cluster(node_timeout=0.05)
    c.script(ACQUIRE.name, DOWN)
    call = new_call(c, unavailable=0.3)

    async def main() -> list[object]:
        moves: list[object] = []
        for _ in range(50):  # 0.3 s of 0.05 s attempts: a few, never 50
            assert await attempt(call) is REFUSED
            moves.append(await after_refusal(call))
            if moves[-1] is DONE:
                break
            assert await pause(call) is AGAIN
        return moves

    moves = run(main(), c.clock)
    assert moves[-1] is DONE
    assert all(move is WAIT for move in moves[:-1])
    assert call.failures is not None
    assert call.failures.unavailable == 0.3


class _Census:
    """The restart rule's part an acquire sees, played by the test."""

    def __init__(self, *, ready: bool = True, refreshing: bool = False) -> None:
        self.ready = ready
        self.is_refreshing = refreshing
        self.calls: list[tuple[str, float, Sequence[bytes]]] = []

    async def first(self, wait: float, keys: Sequence[bytes] = ()) -> None:
        self.calls.append(("first", wait, keys))
        self.ready = True

    def refreshing(self, keys: Sequence[bytes] = ()) -> bool:
        return self.is_refreshing

    async def refreshed(self, wait: float, keys: Sequence[bytes] = ()) -> None:
        self.calls.append(("refreshed", wait, keys))
        self.is_refreshing = False


def test_a_census_under_way_is_waited_for_once_then_a_one_shot_attempts_again() -> None:
    c = Cluster(node_timeout=0.05)
    census = _Census(refreshing=True)
    c.engine.epochs = census  # type: ignore[assignment]
    call = refused(c, new_call(c, blocking=False))

    assert run(after_refusal(call), c.clock) is AGAIN
    assert [name for name, _, _ in census.calls] == ["refreshed"]
    assert census.calls[0][2] == (c.keys().lock,)
    census.is_refreshing = True
    assert run(after_refusal(call), c.clock) is DONE  # once only


def test_the_first_census_waits_no_longer_than_the_deadline() -> None:
    c = Cluster(node_timeout=0.05)
    census = _Census(ready=False)
    c.engine.epochs = census  # type: ignore[assignment]
    call = new_call(c, limit=0.01)

    run(first_census(call), c.clock)
    [(name, wait, keys)] = census.calls
    assert name == "first"
    assert wait == pytest.approx(0.01)
    assert keys == (c.keys().lock,)


# -- pause: the retry delay, bounded by the deadline ---------------------------


def test_pause_waits_the_jittered_retry_delay() -> None:
    c = Cluster(retry_delay=0.2, retry_jitter=0.1)
    call = refused(c, new_call(c, limit=5.0))
    start = c.clock()

    assert run(pause(call), c.clock) is AGAIN
    expected = 0.2 + random.Random(0).uniform(0.0, 0.1)  # the engine's rng, Random(0)
    assert c.clock() == pytest.approx(start + expected, abs=1e-9)


def test_pause_ends_the_call_at_the_deadline() -> None:
    c = Cluster(retry_delay=0.2, retry_jitter=0.0)
    call = refused(c, new_call(c, limit=0.15))
    start = c.clock()

    assert run(pause(call), c.clock) is DONE  # the delay cut at the deadline
    assert c.clock() == pytest.approx(start + 0.15)
    assert run(pause(call), c.clock) is DONE  # and at once past it
    assert c.clock() == pytest.approx(start + 0.15)


def test_pause_counts_a_deadline_a_millisecond_away_as_come() -> None:
    # Timers may fire up to 1 ms early: woken at 0.999 s of a 1 s deadline,
    # the call ends rather than send an attempt cut at once. Written as
    # clock >= deadline - 0.001: in floats, deadline - clock here is a hair
    # over 0.001, and an attempt more would change a seed's history.
    c = Cluster(clock=VirtualClock(0.0), retry_delay=0.999, retry_jitter=0.0)
    call = refused(c, new_call(c, limit=1.0))

    assert run(pause(call), c.clock) is DONE
    assert c.clock() == pytest.approx(0.999)


def test_after_a_split_vote_the_first_in_line_retries_once_a_jittered_node_timeout_later() -> None:
    c = wake_cluster(node_timeout=0.05)  # retry_delay 60 s
    c.script(ACQUIRE.name, 1, 0, 0)  # a yes among the noes: maybe a split vote
    c.script(RELEASE.name, 1)
    call = new_call(c, limit=100.0)

    async def main() -> list[float]:
        waited = []
        assert await attempt(call) is REFUSED
        assert await after_refusal(call) is AGAIN  # first in line: at once
        for _ in range(2):
            assert await attempt(call) is REFUSED
            assert await after_refusal(call) is WAIT
            before = c.clock()
            assert await pause(call) is AGAIN
            waited.append(c.clock() - before)
        leave(call)
        return waited

    quick, then = run(main(), c.clock)
    assert 0.5 * 0.05 <= quick <= 1.5 * 0.05  # node_timeout x (0.5 + random())
    assert then == pytest.approx(60.0)  # once per delay: the next is a full one


def test_a_fair_waiter_pauses_no_longer_than_its_heartbeat_allows() -> None:
    c = Cluster(retry_delay=5.0, retry_jitter=0.0, node_timeout=0.05)
    c.script(FAIR_ACQUIRE.name, 0)
    call = new_call(c, fair=True)
    assert run(attempt(call), c.clock) is REFUSED
    start = c.clock()

    assert run(pause(call), c.clock) is AGAIN
    assert c.clock() - start == pytest.approx(1.0 / 3)  # heartbeat 1 s: a third of it


# -- the line: behind_waiters, wait_for_turn -------------------------------------------


def test_behind_a_waiter_of_this_process_a_call_joins_the_line_without_attempting() -> None:
    c = wake_cluster()
    holder = c.lock("res", auto_extend=False)
    first = c.lock("res", auto_extend=False)

    async def main() -> tuple[bool, object, bool]:
        assert await holder.acquire()
        waiting = asyncio.ensure_future(first.acquire(timeout=10.0))
        await asyncio.sleep(0.1)  # refused, in line
        call = new_call(c, limit=5.0)
        behind = behind_waiters(call)
        sent = len(c.sent(ACQUIRE.name))
        move = await wait_for_turn(call)
        assert len(c.sent(ACQUIRE.name)) == sent  # no attempt
        active = call.subscription is not None and call.subscription.active
        leave(call)
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        await holder.release()
        return behind, move, active

    behind, move, active = run(main(), c.clock)
    assert behind
    assert move is WAIT
    assert not active


def test_a_lone_caller_is_not_queued() -> None:
    c = wake_cluster()
    assert not behind_waiters(new_call(c))
    assert not behind_waiters(new_call(c, blocking=False))


# -- leave ---------------------------------------------------------------------


def test_leave_clears_a_fair_entry_its_attempts_left() -> None:
    c = Cluster()
    c.script(FAIR_ACQUIRE.name, 0)
    c.script(FAIR_LEAVE.name, 1)
    call = new_call(c, fair=True)
    assert run(attempt(call), c.clock) is REFUSED

    async def main() -> None:
        leave(call)
        await asyncio.sleep(0.1)

    run(main(), c.clock)
    assert c.to(FAIR_LEAVE.name) == ["n0", "n1", "n2"]


def test_leave_after_a_clean_grant_sends_nothing() -> None:
    c = Cluster()
    c.script(ACQUIRE.name, 1)
    call = new_call(c)
    assert run(attempt(call), c.clock) is DONE
    before = len(c.log)
    leave(call)
    assert len(c.log) == before
