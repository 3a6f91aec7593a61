"""The loop thread and how calls cross to it and back (redlock_async/sync/_portal.py).

Each test runs with the loop thread on asyncio's own loop and on uvloop,
chosen as a user would: through the event-loop policy. Waits are liveness
bounds, never speed requirements.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from redlock_async import RedlockError
from redlock_async.sync import Redlock
from redlock_async.sync._portal import Call, Portal
from redlock_async.testing import RedisNodes

from .._loops import LOOPS
from ._util import no_keys_left

_where: contextvars.ContextVar[str] = contextvars.ContextVar("where", default="unset")


@pytest.fixture(params=sorted(LOOPS))
def loop_name(request: pytest.FixtureRequest) -> Iterator[str]:
    """The loop the next loop thread runs: asyncio's own, or uvloop's (its policy)."""
    name = str(request.param)
    if name == "asyncio":
        yield name
        return
    import uvloop

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # policies: deprecated in 3.14
        previous = asyncio.get_event_loop_policy()
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    try:
        yield name
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            asyncio.set_event_loop_policy(previous)


@pytest.fixture
def portal(loop_name: str) -> Iterator[Portal]:
    portal = Portal()
    yield portal
    portal.close()


async def _loop_kind() -> str:
    uvloop = type(asyncio.get_running_loop()).__module__.startswith("uvloop")
    return "uvloop" if uvloop else "asyncio"


async def _echo(value: object) -> object:
    await asyncio.sleep(0)
    return value


async def _fail(error: BaseException) -> None:
    await asyncio.sleep(0)
    raise error


def test_the_loop_thread_runs_the_chosen_loop(portal: Portal, loop_name: str) -> None:
    assert portal.call(_loop_kind) == loop_name

    async def thread_name() -> str:
        return threading.current_thread().name

    assert portal.call(thread_name) == "redlock_async.sync"


def test_results_and_exceptions_cross_to_the_caller(portal: Portal) -> None:
    assert portal.call(_echo, ("a", 1)) == ("a", 1)
    error = LookupError("raised on the loop thread")
    with pytest.raises(LookupError) as caught:
        portal.call(_fail, error)
    assert caught.value is error
    assert any(entry.name == "_fail" for entry in caught.traceback)  # where it was raised
    # Raised out of a task, SystemExit (or KeyboardInterrupt) would stop the
    # loop: it is the caller's to handle, and the loop thread lives on.
    with pytest.raises(SystemExit):
        portal.call(_fail, SystemExit(3))
    assert portal.call(_echo, "after") == "after"


def test_a_call_runs_in_the_callers_context(portal: Portal) -> None:
    """contextvars cross with the call (the current span is the lock's spans' parent)."""

    async def read_and_change() -> str:
        seen = _where.get()
        _where.set("changed on the loop thread")
        return seen

    seen: dict[str, tuple[str, str]] = {}

    def caller(label: str) -> None:
        _where.set(label)
        seen[label] = (portal.call(read_and_change), _where.get())

    threads = [threading.Thread(target=caller, args=(label,)) for label in ("one", "two")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Each call saw its own thread's value; what it set stayed in the call.
    assert seen == {"one": ("one", "one"), "two": ("two", "two")}


def test_many_threads_at_once_each_get_their_own_outcomes(portal: Portal) -> None:
    def work(caller: int) -> list[object]:
        outcomes: list[object] = []
        for i in range(100):
            if i % 7 == 3:
                try:
                    portal.call(_fail, ValueError(caller, i))
                except ValueError as exc:
                    outcomes.append(exc.args)
            else:
                outcomes.append(portal.call(_echo, (caller, i)))
        return outcomes

    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(work, range(32)))
    assert results == [[(caller, i) for i in range(100)] for caller in range(32)]


def test_close_ends_the_calls_in_flight_and_refuses_new_ones(portal: Portal) -> None:
    started = threading.Event()

    async def forever() -> threading.Thread:
        started.set()
        await asyncio.Event().wait()
        return threading.current_thread()

    async def loop_thread() -> threading.Thread:
        return threading.current_thread()

    thread = portal.call(loop_thread)
    ended: list[BaseException] = []

    def caller() -> None:
        try:
            portal.call(forever)
        except BaseException as exc:
            ended.append(exc)

    waiting = threading.Thread(target=caller)
    waiting.start()
    assert started.wait(15.0)
    portal.close()  # cancels what runs there, stops the thread and waits for it
    waiting.join()
    assert not thread.is_alive()
    assert [type(exc) for exc in ended] == [RedlockError]
    assert "closed" in str(ended[0])
    with pytest.raises(RedlockError, match="closed"):
        portal.call(_echo, "too late")
    portal.close()  # harmless


def test_a_call_queued_as_the_loop_thread_stops_ends_with_an_error(portal: Portal) -> None:
    """The race close() must not lose: a call queued after the loop's last look."""
    call = portal.start(_echo, "first")
    assert call.wait() == "first"
    running = portal._running  # the loop thread, as a caller that raced close() holds it
    assert running is not None
    portal.close()
    late = Call(_echo("late"))
    running.submit(late)  # queued behind a loop thread that has ended
    with pytest.raises(RedlockError, match="closed"):
        late.wait()


def test_threads_lock_on_either_loop(redis_nodes: RedisNodes, loop_name: str) -> None:
    """Many threads, own names and one shared name, through the sync API."""
    shared = {"count": 0}
    with Redlock(redis_nodes.urls, retry_delay=0.01, retry_jitter=0.01) as redlock:
        assert redlock.locked("nothing") is False  # starts the loop thread

        def work(caller: int) -> None:
            for i in range(20):
                lock = redlock.lock(f"own:{caller}:{i}", ttl=5.0)
                assert lock.acquire(blocking=False)
                lock.release()
                with redlock.lock("shared", ttl=5.0):
                    seen = shared["count"]
                    shared["count"] = seen + 1

        with ThreadPoolExecutor(max_workers=8) as pool:
            for done in [pool.submit(work, caller) for caller in range(8)]:
                done.result()
    assert shared["count"] == 8 * 20
    assert no_keys_left(redis_nodes)


def test_close_while_many_threads_call_returns_every_caller(loop_name: str) -> None:
    """close() racing calls from every side: each caller gets its outcome or
    RedlockError, none waits for ever (the join bound is a liveness bound)."""

    def caller(portal: Portal, going: threading.Barrier, outcomes: list[str]) -> None:
        going.wait()
        try:
            while True:
                portal.call(_echo, None)
        except RedlockError as exc:
            outcomes.append(str(exc))

    for _ in range(10):
        portal = Portal()
        assert portal.call(_echo, "up") == "up"
        going = threading.Barrier(9)
        outcomes: list[str] = []
        threads = [
            threading.Thread(target=caller, args=(portal, going, outcomes)) for _ in range(8)
        ]
        for thread in threads:
            thread.start()
        going.wait()
        portal.close()
        for thread in threads:
            thread.join(30.0)
        assert not any(thread.is_alive() for thread in threads)
        assert outcomes == ["this Redlock is closed"] * 8
