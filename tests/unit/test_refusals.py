"""Why ``async with`` gave up (LockBusy / QuorumUnavailable), self-deadlock, ``with``.

Scripted nodes in virtual time (see _scripted.py): the votes are exact, and
so is how long judging a refusal waits for the nodes still answering.
"""

from __future__ import annotations

import asyncio
import gc
import weakref

import pytest

from redlock_async import Lock, LockBusy, LockNotAcquired, QuorumUnavailable, RedlockError
from redlock_async._base._errors import NodeConnectionError, NodeResponseError
from redlock_async._core._refusal import not_acquired
from redlock_async._core._scripts import ACQUIRE, READ_ACQUIRE, RELEASE, WRITE_ACQUIRE

from ._scripted import NEVER, Cluster, Late, Sent, run

DOWN = NodeConnectionError("n1: connection refused")


def enter(c: Cluster, **options: object) -> LockNotAcquired:
    """Enter ``async with`` on a fresh lock; return what it raised."""

    async def main() -> LockNotAcquired:
        with pytest.raises(LockNotAcquired) as raised:
            async with c.lock(**options):  # type: ignore[arg-type]
                pytest.fail("entered the body without the lock")
        return raised.value

    return run(main(), c.clock)


def test_a_quorum_that_refuses_is_busy() -> None:
    c = Cluster()
    c.script(ACQUIRE.name, 0)
    error = enter(c, timeout=0)
    assert type(error) is LockBusy
    assert "held elsewhere" in str(error)
    assert "within 0.0s" not in str(error)
    assert dict(error.errors) == {}


def test_one_dead_node_of_three_and_the_others_refusing_is_busy_not_unavailable() -> None:
    # n1 fails at once and n0 refuses: the attempt is decided (no quorum of
    # yes is possible) before n2 answers. n2's refusal, a moment later, makes
    # it "busy"; judging waits for it rather than calling the quorum down.
    c = Cluster()
    c.script(ACQUIRE.name, 0, DOWN, Late(0, 0.05))
    start = c.clock()
    error = enter(c, timeout=0)
    assert type(error) is LockBusy
    assert set(error.errors) == {"n1"}
    assert c.clock() == pytest.approx(start + 0.05)  # waited for n2, no longer


def test_two_dead_nodes_of_three_is_unavailable_and_names_them() -> None:
    c = Cluster()
    c.script(ACQUIRE.name, 0, DOWN, DOWN)
    error = enter(c, timeout=0)
    assert type(error) is QuorumUnavailable
    assert set(error.errors) == {"n1", "n2"}
    assert "0 of 3 nodes said yes, 1 said no (n0), 2 failed (n1, n2); 2 needed" in str(error)


def test_a_majority_outage_names_the_node_it_did_not_wait_for() -> None:
    # Issue 38: two failures decide at once while n0, healthy, is still
    # answering. "0 of 3 nodes answered" read as "all of Redis is down".
    c = Cluster()
    c.script(ACQUIRE.name, Late(1, 0.01), DOWN, DOWN)
    c.script(RELEASE.name, 1)  # n0's late yes is undone
    error = enter(c, timeout=0)
    assert type(error) is QuorumUnavailable
    message = str(error)
    assert "nodes answered" not in message.partition(": too few nodes answered")[2]
    expected = "0 of 3 nodes said yes, 2 failed (n1, n2), 1 not waited for (n0); 2 needed"
    assert expected in message, message
    assert error.attempts[-1].unanswered == ("n0",)  # what the message says, in the votes
    # acquire() then lock.errors: n0 is no error, and the same message is made
    # from the lock (as the CLI makes it) - once n0's yes came, it says so.
    lock = c.lock(timeout=0)

    async def main() -> tuple[str, str]:
        assert not await lock.acquire()
        assert set(lock.errors) == {"n1", "n2"}
        before = str(not_acquired(lock.name, lock._refused, lock.errors, 0))
        await asyncio.sleep(0.02)
        return before, str(not_acquired(lock.name, lock._refused, lock.errors, 0))

    before, after = run(main(), c.clock)
    assert expected in before, before
    assert "1 of 3 nodes said yes (n0), 2 failed (n1, n2); 2 needed" in after, after


def test_after_a_false_acquire_errors_list_what_async_with_would() -> None:
    # n0 refuses and n1 fails at once: decided, while n2 still answers - with
    # an error, a moment later. `async with` waits for n2 and lists it; so
    # does lock.errors after acquire() returned False (it used to list n1 only).
    readonly = NodeResponseError("READONLY You can't write against a read only replica.")
    c = Cluster()
    c.script(ACQUIRE.name, 0, DOWN, Late(readonly, 0.03))
    error = enter(c, timeout=0)
    lock = c.lock()
    start = c.clock()
    assert not run(lock.acquire(timeout=0), c.clock)
    assert dict(lock.errors) == dict(error.errors) == {"n1": DOWN, "n2": readonly}
    assert c.clock() == pytest.approx(start + 0.03)  # waited for n2, no longer
    c.script(ACQUIRE.name, 0, DOWN, DOWN)  # too few left to tell: nobody waited for
    assert not run(lock.acquire(blocking=False), c.clock)
    assert set(lock.errors) == {"n1", "n2"}


def test_nodes_that_answered_with_errors_are_not_called_silent() -> None:
    # An ACL user without a needed command: every node answers, each with NOPERM.
    noperm = NodeResponseError("NOPERM this user has no permissions to run the 'evalsha' command")
    c = Cluster()
    c.script(ACQUIRE.name, noperm)
    error = enter(c, timeout=0)
    assert type(error) is QuorumUnavailable
    assert "too few nodes voted to decide" in str(error)
    assert "0 of 3 nodes said yes, 3 answered with an error (n0, n1, n2); 2 needed" in str(error)
    assert "NOPERM" in str(error)
    # Some answered with errors, one is down: both said.
    c.script(ACQUIRE.name, noperm, noperm, DOWN)
    error = enter(c, timeout=0)
    said = "0 of 3 nodes said yes, 2 answered with an error (n0, n1), 1 failed (n2); 2 needed"
    assert said in str(error), error


def test_silent_nodes_are_not_waited_for_twice() -> None:
    # Two nodes never answer: the attempt fails after node_timeout, and
    # judging it does not wait another node_timeout for them.
    c = Cluster(node_timeout=0.5)
    c.script(ACQUIRE.name, 0, NEVER, NEVER)
    start = c.clock()
    error = enter(c, timeout=0)
    assert type(error) is QuorumUnavailable
    assert set(error.errors) == {"n1", "n2"}
    assert c.clock() == pytest.approx(start + 0.5, abs=0.01)


def test_a_refusal_after_retries_says_how_long_it_waited() -> None:
    c = Cluster(retry_delay=0.1, retry_jitter=0.0)
    c.script(ACQUIRE.name, 0)
    error = enter(c, timeout=0.3)
    assert type(error) is LockBusy
    assert "gave up after 0.3s" in str(error)


def test_a_grant_too_late_to_be_valid_is_unavailable() -> None:
    c = Cluster(node_timeout=2.0)
    c.script(ACQUIRE.name, Late(1, 0.995))  # every yes arrives too late to leave validity
    error = enter(c, timeout=0, ttl=1.0, auto_extend=False)
    assert type(error) is QuorumUnavailable
    assert "too slowly" in str(error)


# -- self-deadlock -----------------------------------------------------------


def test_waiting_for_a_lock_this_task_holds_raises_at_once() -> None:
    c = Cluster()
    c.script(ACQUIRE.name, 1)

    c.script(RELEASE.name, 1)

    async def main() -> tuple[str, float]:
        async with c.lock():
            c.script(ACQUIRE.name, 0)  # the nodes hold it now: a wait would never end
            start = c.clock()
            with pytest.raises(RedlockError) as raised:
                await c.lock(timeout=None).acquire()
            waited = c.clock() - start
            assert not await c.lock().acquire(blocking=False)  # asking is still fine
            return str(raised.value), waited

    message, waited = run(main(), c.clock)
    assert "this task already holds it" in message
    assert waited == 0  # at once, not after a timeout
    assert len(c.sent(ACQUIRE.name)) == 2 * 3  # the grant and the non-blocking try


def test_a_wait_with_a_timeout_ends_at_the_timeout_as_asked() -> None:
    # "Not within 0.3 s" is the answer asked for; peer libraries' tests check it from one task.
    c = Cluster(retry_delay=0.1, retry_jitter=0.0)
    c.script(ACQUIRE.name, 1)
    c.script(RELEASE.name, 1)

    async def main() -> float:
        async with c.lock():
            c.script(ACQUIRE.name, 0)
            start = c.clock()
            assert not await c.lock().acquire(timeout=0.3)
            return c.clock() - start

    assert run(main(), c.clock) == pytest.approx(0.3)


def test_a_holder_that_is_not_renewed_expires_and_the_wait_ends() -> None:
    c = Cluster(retry_delay=0.1, retry_jitter=0.0)
    start = c.clock()
    # The first grant is this task's; the nodes then refuse until its ttl has passed.
    first: list[object] = []

    def rule(sent: Sent) -> int:
        first.append(first[0] if first else sent.args[0])
        return 1 if sent.args[0] == first[0] or sent.at >= start + 1.0 else 0

    c.script(ACQUIRE.name, rule)

    async def main() -> bool:
        assert await c.lock(ttl=1.0, auto_extend=False).acquire()
        return await c.lock(timeout=None).acquire()  # no error: it ends at the expiry

    assert run(main(), c.clock) is True
    assert c.clock() >= start + 1.0


def test_another_task_waits_for_the_holder_as_usual() -> None:
    c = Cluster(retry_delay=0.1, retry_jitter=0.0)
    c.script(ACQUIRE.name, 1)

    async def main() -> bool:
        holder = c.lock()
        assert await holder.acquire()
        c.script(ACQUIRE.name, 0)

        async def other() -> bool:
            return await c.lock(timeout=0.25).acquire()

        result = await asyncio.create_task(other())
        await holder.release()
        return result

    assert run(main(), c.clock) is False  # it waited, then gave up: no error


def test_after_release_the_same_task_can_wait_again() -> None:
    c = Cluster()
    c.script(ACQUIRE.name, 1)

    async def main() -> None:
        async with c.lock():
            pass
        async with c.lock(timeout=None):
            pass

    run(main(), c.clock)


def test_a_grant_does_not_keep_the_task_that_took_it() -> None:
    # Taken in a task of its own (as asyncio.gather makes), held after it
    # ended: the grant kept the task, its coroutine and context, 0.8 KB a lock.
    c = Cluster()
    c.script(ACQUIRE.name, 1)

    async def take(lock: Lock) -> None:
        assert await lock.acquire()

    async def main() -> None:
        lock = c.lock()
        task = asyncio.create_task(take(lock))
        await task
        gone = weakref.ref(task)
        del task
        await asyncio.sleep(0)  # the task's done callbacks run
        gc.collect()
        assert gone() is None
        assert lock.held
        # Nor anything else about it: no task can wait for itself through it.
        assert not c.holdings.owners._tasks
        assert not any(c.holdings.owners._held.values())
        # Another task (whatever its address) waits for the holder as usual.
        c.script(ACQUIRE.name, 0)
        assert not await asyncio.create_task(c.lock(timeout=0.25).acquire())
        await lock.release()

    run(main(), c.clock)


def test_a_task_that_takes_and_releases_many_locks_leaves_no_record() -> None:
    c = Cluster()
    c.script(ACQUIRE.name, 1)

    async def main() -> None:
        for i in range(50):
            async with c.lock(f"res{i}"):
                pass
        task = asyncio.current_task()
        assert task is not None
        assert c.holdings.owners._tasks[task] == {}  # one entry per task, emptied
        assert not any(c.holdings.owners._held.values())
        async with c.lock("held"):
            with pytest.raises(RedlockError, match="already holds it"):
                await c.lock("held", timeout=None).acquire()

    run(main(), c.clock)


def test_read_while_this_task_holds_the_write_lock_raises() -> None:
    c = Cluster()
    c.script(WRITE_ACQUIRE.name, 1)
    c.script(READ_ACQUIRE.name, 0)
    rw = c.rwlock()

    async def main() -> None:
        async with rw.write():
            with pytest.raises(RedlockError, match="already holds it"):
                await rw.read(timeout=None).acquire()
            # An exclusive lock of the same name is a different lock.
            c.script(ACQUIRE.name, 1)
            async with c.lock():
                pass

    run(main(), c.clock)


# -- `with` instead of `async with` ------------------------------------------


def test_with_instead_of_async_with_says_what_to_write() -> None:
    c = Cluster()
    lock = c.lock()
    with pytest.raises(TypeError) as raised, lock:
        pytest.fail("entered")
    assert "async with redlock.lock(...)" in str(raised.value)
    assert "redlock_async.sync" in str(raised.value)


def test_with_on_redlock_says_what_to_write() -> None:
    from redlock_async import Redlock

    redlock = Redlock(["redis://127.0.0.1:1/0"])
    with pytest.raises(TypeError, match=r"async with Redlock\(\.\.\.\)"), redlock:
        pytest.fail("entered")


# -- attempt limits and vote records -----------------------------------------


def test_max_attempts_stops_before_the_timeout_and_records_the_votes() -> None:
    c = Cluster(retry_delay=0.1, retry_jitter=0.0)
    c.script(ACQUIRE.name, 0, DOWN, 0)
    error = enter(c, timeout=10.0, max_attempts=4)
    assert type(error) is LockBusy
    assert error.attempt_count == 4
    assert len(c.times(ACQUIRE.name)) == 4
    assert c.clock() < 1000.0 + 10.0
    last = error.attempts[-1]
    assert last.taken == ("n0", "n2")
    assert set(last.failed) == {"n1"}
    assert last.granted == ()


def test_only_the_last_ten_attempts_are_kept() -> None:
    c = Cluster(retry_delay=0.01, retry_jitter=0.0)
    c.script(ACQUIRE.name, 0)
    error = enter(c, max_attempts=25)
    assert error.attempt_count == 25
    assert len(error.attempts) == 10


def test_min_validity_refuses_a_short_grant_and_undoes_it() -> None:
    c = Cluster(node_timeout=2.0)
    c.script(ACQUIRE.name, Late(1, 0.5))  # a quorum says yes after half the ttl
    c.script(RELEASE.name, 1)
    error = enter(c, timeout=0, ttl=1.0, min_validity=0.6, auto_extend=False)
    assert type(error) is QuorumUnavailable
    assert error.attempts[-1].granted == ("n0", "n1", "n2")
    assert c.to(RELEASE.name)  # undone on the nodes


def test_limits_are_validated() -> None:
    from redlock_async import ConfigurationError, LockOptions

    for bad in (0, -1, 1.5, True, "3"):
        with pytest.raises(ConfigurationError, match="max_attempts"):
            LockOptions(max_attempts=bad)  # type: ignore[arg-type]
    for bad_floor in (-0.1, 30.0, float("nan"), "1"):
        with pytest.raises(ConfigurationError, match="min_validity"):
            LockOptions(ttl=30.0, min_validity=bad_floor)  # type: ignore[arg-type]
    assert LockOptions(max_attempts=1, min_validity=29.9).max_attempts == 1


def test_a_min_validity_no_grant_can_meet_is_refused_at_once() -> None:
    from redlock_async import ConfigurationError, Redlock

    redlock = Redlock(["redis://127.0.0.1:1/0"])  # nothing connects until a command
    with pytest.raises(ConfigurationError, match=r"min_validity=0\.99 can never be met"):
        redlock.lock("job", ttl=1.0, min_validity=0.99)  # at most 1 - 0.012 s
    assert redlock.lock("job", ttl=1.0, min_validity=0.98).options.min_validity == 0.98


def test_async_with_on_an_rwlock_says_to_pick_a_view() -> None:
    c = Cluster()

    async def main() -> str:
        with pytest.raises(TypeError) as raised:
            async with c.rwlock():  # type: ignore[misc]
                pytest.fail("entered")
        return str(raised.value)

    assert "rw.read(...)" in run(main(), c.clock)
