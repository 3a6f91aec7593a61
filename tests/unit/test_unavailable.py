"""``unavailable_timeout``: busy is not down, in virtual time (exact times, no sockets).

While a quorum answers "held elsewhere", ``acquire()`` waits its whole
``timeout``. While too few nodes answer to decide, it keeps trying for
``unavailable_timeout``, counted from the first attempt of the current
unbroken run of such attempts (an attempt a quorum answered ends the run),
then gives up: False, or ``QuorumUnavailable`` from ``async with``. Its last
attempt comes at the limit, so nodes back by then are asked again.
The real-node versions are in tests/integration/test_unavailable.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from redlock_async import (
    ConfigurationError,
    Lock,
    LockBusy,
    LockNotAcquired,
    QuorumUnavailable,
    Redlock,
)
from redlock_async._base._config import UNAVAILABLE_TIMEOUT, LockOptions, RedlockConfig
from redlock_async._base._errors import NodeConnectionError
from redlock_async._core._lock import LockKeywords
from redlock_async._core._scripts import (
    ACQUIRE,
    ALL_SCRIPTS,
    FAIR_ACQUIRE,
    MULTI_ACQUIRE,
    READ_ACQUIRE,
    SEM_ACQUIRE,
    WRITE_ACQUIRE,
)
from redlock_async._kinds._multilock import MultiLock
from redlock_async._kinds._semaphore import semaphore

from ._scripted import NEVER, Answer, Cluster, Late, Sent, run

DOWN = NodeConnectionError("connection refused")


def cluster() -> Cluster:
    """Three scripted nodes, attempts every 0.2 s exactly (no jitter)."""
    return Cluster(retry_delay=0.2, retry_jitter=0.0)


def by_time(c: Cluster, *phases: tuple[float, Answer]) -> Callable[[Sent], Answer]:
    """A rule: from each phase's start (seconds after now), answer its reply."""
    start = c.clock()

    def rule(sent: Sent) -> Answer:
        answer: Answer = DOWN
        for begins, reply in phases:
            if sent.at >= start + begins - 1e-9:
                answer = reply
        return answer

    return rule


def acquire(c: Cluster, lock: Lock, **call: float | None) -> tuple[bool, float]:
    """``lock.acquire(**call)``: what it returned, and after how long."""

    async def main() -> tuple[bool, float]:
        start = c.clock()
        async with asyncio.timeout(60.0):  # virtual seconds: a wait that never ends fails
            ok = await lock.acquire(**call)  # type: ignore[arg-type]
        return ok, c.clock() - start

    return run(main(), c.clock)


def enter(c: Cluster, lock: Lock) -> tuple[LockNotAcquired, float]:
    """``async with lock``: what it raised, and after how long."""

    async def main() -> tuple[LockNotAcquired, float]:
        start = c.clock()
        with pytest.raises(LockNotAcquired) as raised:
            async with lock:
                pytest.fail("entered the body without the lock")
        return raised.value, c.clock() - start

    return run(main(), c.clock)


def since(c: Cluster, script: str = ACQUIRE.name) -> list[float]:
    """When each attempt went out, from the first."""
    times = c.times(script)
    return [round(t - times[0], 6) for t in times]


# -- every node down ---------------------------------------------------------


def test_every_node_refusing_gives_up_at_unavailable_timeout_not_at_timeout() -> None:
    c = cluster()
    c.script(ACQUIRE.name, DOWN)
    lock = c.lock(timeout=5.0, unavailable_timeout=0.5)
    ok, waited = acquire(c, lock)
    assert not ok
    assert waited == pytest.approx(0.5)
    # The last attempt comes at the limit itself.
    assert since(c) == [0.0, 0.2, 0.4, 0.5]
    assert set(lock.errors) == {"n0", "n1", "n2"}


def test_async_with_raises_quorum_unavailable_saying_why_it_gave_up() -> None:
    c = cluster()
    c.script(ACQUIRE.name, DOWN)
    error, waited = enter(c, c.lock(timeout=5.0, unavailable_timeout=0.5))
    assert type(error) is QuorumUnavailable
    assert waited == pytest.approx(0.5)
    assert "too few nodes answered" in str(error)
    assert "unavailable_timeout=0.5s" in str(error)
    assert error.attempt_count == 4
    assert set(error.errors) == {"n0", "n1", "n2"}


def test_silent_nodes_count_as_not_answering() -> None:
    c = cluster()
    c.script(ACQUIRE.name, NEVER)  # each vote fails at node_timeout (0.05)
    ok, waited = acquire(c, c.lock(timeout=5.0, unavailable_timeout=0.5))
    assert not ok
    assert waited == pytest.approx(0.55)  # the last attempt, at 0.5, takes its node_timeout


def test_no_timeout_with_every_node_down_returns_after_unavailable_timeout() -> None:
    c = cluster()
    c.script(ACQUIRE.name, DOWN)
    ok, waited = acquire(c, c.lock(timeout=None, unavailable_timeout=1.0))
    assert not ok
    assert waited == pytest.approx(1.0)


def test_the_default_is_finite() -> None:
    c = cluster()
    c.script(ACQUIRE.name, DOWN)
    ok, waited = acquire(c, c.lock(timeout=None))
    assert not ok
    assert waited == pytest.approx(UNAVAILABLE_TIMEOUT)


def test_none_leaves_only_the_timeout() -> None:
    c = cluster()
    c.script(ACQUIRE.name, DOWN)
    ok, waited = acquire(c, c.lock(timeout=2.0, unavailable_timeout=None))
    assert not ok
    assert waited == pytest.approx(2.0)


def test_zero_gives_up_after_the_first_attempt_no_quorum_answered() -> None:
    c = cluster()
    c.script(ACQUIRE.name, DOWN)
    ok, waited = acquire(c, c.lock(timeout=5.0, unavailable_timeout=0.0))
    assert not ok
    assert waited == 0.0
    assert len(since(c)) == 1


def test_a_shorter_timeout_still_decides() -> None:
    c = cluster()
    c.script(ACQUIRE.name, DOWN)
    ok, waited = acquire(c, c.lock(timeout=0.3, unavailable_timeout=5.0))
    assert not ok
    assert waited == pytest.approx(0.3)


def test_acquire_overrides_the_locks_unavailable_timeout() -> None:
    c = cluster()
    c.script(ACQUIRE.name, DOWN)
    lock = c.lock(timeout=5.0, unavailable_timeout=3.0)
    ok, waited = acquire(c, lock, unavailable_timeout=0.4)
    assert not ok
    assert waited == pytest.approx(0.4)
    with pytest.raises(ConfigurationError, match="unavailable_timeout"):
        acquire(c, c.lock(), unavailable_timeout=-1.0)


# -- busy is not down --------------------------------------------------------


def test_a_busy_lock_waits_its_whole_timeout() -> None:
    c = cluster()
    c.script(ACQUIRE.name, 0)
    ok, waited = acquire(c, c.lock(timeout=2.0, unavailable_timeout=0.5))
    assert not ok
    assert waited == pytest.approx(2.0)
    error, waited = enter(c, c.lock(timeout=2.0, unavailable_timeout=0.5))
    assert type(error) is LockBusy
    assert waited == pytest.approx(2.0)


@pytest.mark.parametrize(
    "votes",
    [
        (0, 0, DOWN),  # the refusals decide first
        (0, DOWN, Late(0, 0.01)),  # decided by a failure and a refusal; a refusal follows
    ],
    ids=["refusals-first", "failure-first"],
)
def test_a_busy_lock_with_a_minority_down_waits_its_whole_timeout(votes: tuple[Answer]) -> None:
    c = cluster()
    c.script(ACQUIRE.name, *votes)
    ok, waited = acquire(c, c.lock(timeout=2.0, unavailable_timeout=0.5))
    assert not ok
    assert waited == pytest.approx(2.0, abs=0.02)
    error, _ = enter(c, c.lock(timeout=2.0, unavailable_timeout=0.5))
    assert type(error) is LockBusy


def test_one_refusal_with_the_rest_down_or_silent_is_not_busy() -> None:
    # A refusal decides nothing alone: the silent node's vote is waited for
    # (node_timeout), then the attempt counts as no quorum answering.
    c = cluster()
    c.script(ACQUIRE.name, 0, DOWN, NEVER)
    error, waited = enter(c, c.lock(timeout=5.0, unavailable_timeout=0.5))
    assert type(error) is QuorumUnavailable
    assert waited == pytest.approx(0.55)


def test_an_attempt_a_quorum_answered_starts_the_run_again() -> None:
    c = cluster()
    # Down, then held elsewhere for a while, then down again.
    c.script(ACQUIRE.name, by_time(c, (0.0, DOWN), (0.3, 0), (1.0, DOWN)))
    ok, waited = acquire(c, c.lock(timeout=5.0, unavailable_timeout=0.5))
    assert not ok
    # Not 0.5 (the first run was broken by the refusals at 0.4-0.8): 1.0 + 0.5.
    assert waited == pytest.approx(1.5)


# -- recovery ----------------------------------------------------------------


def test_nodes_back_within_unavailable_timeout_grant_it() -> None:
    c = cluster()
    c.script(ACQUIRE.name, by_time(c, (0.0, DOWN), (0.3, 1)))
    lock = c.lock(timeout=5.0, unavailable_timeout=0.5)
    ok, waited = acquire(c, lock)
    assert ok
    assert waited == pytest.approx(0.4)
    assert lock.held


def test_nodes_back_at_the_limit_are_asked_once_more() -> None:
    c = cluster()
    c.script(ACQUIRE.name, by_time(c, (0.0, DOWN), (0.5, 1)))
    ok, waited = acquire(c, c.lock(timeout=5.0, unavailable_timeout=0.5))
    assert ok
    assert waited == pytest.approx(0.5)


def test_nodes_back_but_the_name_held_wait_the_timeout() -> None:
    c = cluster()
    c.script(ACQUIRE.name, by_time(c, (0.0, DOWN), (0.3, 0)))
    error, waited = enter(c, c.lock(timeout=2.0, unavailable_timeout=0.5))
    assert type(error) is LockBusy
    assert waited == pytest.approx(2.0)


# -- every kind of lock ------------------------------------------------------


def _read(c: Cluster, **options: object) -> Lock:
    return c.rwlock().read(**options)  # type: ignore[arg-type]


def _write(c: Cluster, **options: object) -> Lock:
    return c.rwlock().write(**options)  # type: ignore[arg-type]


def _fair(c: Cluster, **options: object) -> Lock:
    return c.lock(fair=True, **options)  # type: ignore[arg-type]


def _multi(c: Cluster, **options: object) -> Lock:
    return MultiLock(c.engine, c.holdings, ["a", "b"], LockOptions(**options), "redlock:")  # type: ignore[arg-type]


def _semaphore(c: Cluster, **options: object) -> Lock:
    opts = LockOptions(**options)  # type: ignore[arg-type]
    return semaphore(c.engine, c.holdings, "s", c.keys("s"), 3, opts)


KINDS: dict[str, tuple[Callable[..., Lock], str]] = {
    "read": (_read, READ_ACQUIRE.name),
    "write": (_write, WRITE_ACQUIRE.name),
    "fair": (_fair, FAIR_ACQUIRE.name),
    "multilock": (_multi, MULTI_ACQUIRE.name),
    "semaphore": (_semaphore, SEM_ACQUIRE.name),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_gives_up_when_down_and_waits_when_busy(kind: str) -> None:
    make, script = KINDS[kind]
    c = cluster()
    for each in ALL_SCRIPTS:
        c.script(each.name, DOWN)
    error, waited = enter(c, make(c, timeout=5.0, unavailable_timeout=0.5))
    assert type(error) is QuorumUnavailable, kind
    assert waited == pytest.approx(0.5, abs=0.06)
    assert c.times(script), "the kind's own script was attempted"

    busy = cluster()
    for each in ALL_SCRIPTS:
        busy.script(each.name, 1)
    busy.script(script, 0)
    error, waited = enter(busy, make(busy, timeout=2.0, unavailable_timeout=0.5))
    assert isinstance(error, LockBusy), kind
    assert waited == pytest.approx(2.0, abs=0.06)


# -- configuration -----------------------------------------------------------


def test_every_factory_takes_the_redlocks_default_and_its_own() -> None:
    redlock = Redlock(["redis://127.0.0.1:1/0"], unavailable_timeout=2.5)
    assert redlock.config.unavailable_timeout == 2.5
    rw = redlock.rwlock("rw")
    made = [
        redlock.lock("a"),
        rw.read(),
        rw.write(),
        redlock.multilock(["a", "b"]),
        redlock.semaphore("s", 2),
    ]
    assert [lock.options.unavailable_timeout for lock in made] == [2.5] * len(made)
    own: LockKeywords = {"unavailable_timeout": 0.5}
    made = [
        redlock.lock("a", **own),
        rw.read(**own),
        redlock.rwlock("rw", **own).write(),
        redlock.multilock(["a", "b"], **own),
        redlock.semaphore("s", 2, **own),
    ]
    assert [lock.options.unavailable_timeout for lock in made] == [0.5] * len(made)
    assert redlock.lock("a", unavailable_timeout=None).options.unavailable_timeout is None
    default = Redlock(["redis://127.0.0.1:1/0"])
    assert default.config.unavailable_timeout == UNAVAILABLE_TIMEOUT == 10.0
    assert default.lock("a").options.unavailable_timeout == 10.0
    unlimited = Redlock(["redis://127.0.0.1:1/0"], unavailable_timeout=None)
    assert unlimited.lock("a").options.unavailable_timeout is None


@pytest.mark.parametrize("bad", [-0.1, float("nan"), float("inf"), "1", True, [1.0]])
def test_a_bad_unavailable_timeout_is_refused_naming_it(bad: object) -> None:
    redlock = Redlock(["redis://127.0.0.1:1/0"])
    calls: list[Callable[[], object]] = [
        lambda: Redlock(["redis://127.0.0.1:1/0"], unavailable_timeout=bad),  # type: ignore[arg-type]
        lambda: RedlockConfig(unavailable_timeout=bad),  # type: ignore[arg-type]
        lambda: LockOptions(unavailable_timeout=bad),  # type: ignore[arg-type]
        lambda: redlock.lock("a", unavailable_timeout=bad),  # type: ignore[arg-type]
        lambda: redlock.rwlock("a", unavailable_timeout=bad),  # type: ignore[arg-type]
        lambda: redlock.multilock(["a"], unavailable_timeout=bad),  # type: ignore[arg-type]
        lambda: redlock.semaphore("a", 2, unavailable_timeout=bad),  # type: ignore[arg-type]
        lambda: redlock.synchronized("a", unavailable_timeout=bad),  # type: ignore[arg-type]
    ]
    for call in calls:
        with pytest.raises(ConfigurationError, match="unavailable_timeout"):
            call()


def test_the_spelled_out_defaults_are_the_constant() -> None:
    # The signatures spell 10.0 out (the API reference shows it); the
    # constant is what the docs name: they must not drift apart.
    import inspect

    from redlock_async import Redlock, RedlockConfig
    from redlock_async._base._config import UNAVAILABLE_TIMEOUT, LockOptions

    assert RedlockConfig().unavailable_timeout == UNAVAILABLE_TIMEOUT
    assert LockOptions().unavailable_timeout == UNAVAILABLE_TIMEOUT
    default = inspect.signature(Redlock).parameters["unavailable_timeout"].default
    assert default == UNAVAILABLE_TIMEOUT
