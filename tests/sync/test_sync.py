"""redlock_async.sync from threads, against real redis-server nodes.

These tests are plain functions: the sync API runs its own event-loop
thread, and the node fixtures are sync. Bounds on waits are liveness bounds
(how long before calling a hang a failure), never speed requirements.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import redlock_async
from redlock_async import (
    ConfigurationError,
    LockBusy,
    LockNotOwned,
    QuorumUnavailable,
    RedlockError,
)
from redlock_async._core._lock import LockKeywords
from redlock_async.sync import Lock, Redlock
from redlock_async.sync._locks import SyncKeywords
from redlock_async.testing import RedisNodes

from ._util import no_keys_left


def test_the_constructor_is_the_async_one() -> None:
    assert inspect.signature(Redlock) == inspect.signature(redlock_async.Redlock)
    with pytest.raises(ConfigurationError, match="at least one"):
        Redlock([])
    with pytest.raises(ConfigurationError, match="drift_factor"):
        Redlock(["redis://127.0.0.1:1/0"], drift_factor=2.0)
    with pytest.raises(ConfigurationError):
        Redlock("redis://127.0.0.1:1/0")  # a str is a Sequence: refused all the same


def test_lock_keywords_are_the_async_ones() -> None:
    assert SyncKeywords.__annotations__.keys() == LockKeywords.__annotations__.keys()


def test_bad_keywords_fail_at_the_call(redis_nodes: RedisNodes) -> None:
    with Redlock(redis_nodes.urls) as redlock:
        with pytest.raises(ConfigurationError, match="ttl"):
            redlock.lock("x", ttl=0)
        with pytest.raises(ConfigurationError):
            redlock.synchronized("x", ttl=-1.0)
        with pytest.raises(ConfigurationError, match="not a parameter"):
            redlock.synchronized("job:{missing}")(lambda order: None)


def test_lock_acquire_extend_release(redis_nodes: RedisNodes) -> None:
    with Redlock(redis_nodes.urls) as redlock:
        lock = redlock.lock("orders:1", ttl=5.0, fencing=True)
        assert not lock.held
        assert lock.token is None
        assert lock.acquire()
        assert lock.held
        assert lock.name == "orders:1"
        assert lock.ttl == 5.0
        assert lock.options.fencing
        assert isinstance(lock.fencing_token, int)
        assert lock.token is not None
        assert len(lock.token) > 40  # 40 random hex characters, then @HOST:PID:MS
        assert 0 < lock.valid_for <= 5.0
        assert redlock.locked("orders:1")
        who = redlock.holder("orders:1")
        assert who is not None
        assert (who.pid, who.kind) == (os.getpid(), "exclusive")
        assert 0 < who.ttl <= 5.0
        lock.extend(ttl=8.0)
        assert lock.ttl == 8.0
        other = redlock.lock("orders:1")
        assert not other.acquire(blocking=False)
        assert other.errors == {}  # refused by a quorum: no node failed
        lock.release()
        assert not lock.held
        assert not redlock.locked("orders:1")
        assert redlock.holder("orders:1") is None
        with pytest.raises(LockNotOwned):
            lock.release()
        assert repr(lock).startswith("<sync.Lock 'orders:1'")
    assert no_keys_left(redis_nodes)


def test_with_raises_lock_busy_and_quorum_unavailable(redis_nodes: RedisNodes) -> None:
    with Redlock(redis_nodes.urls) as redlock:
        with redlock.lock("busy"), pytest.raises(LockBusy):  # noqa: SIM117
            with redlock.lock("busy", timeout=0.3):
                pytest.fail("entered the body without the lock")
        redis_nodes[0].kill()
        redis_nodes[1].kill()
        with pytest.raises(QuorumUnavailable) as caught, redlock.lock("down", timeout=0.3):
            pytest.fail("entered the body without the lock")
        assert len(caught.value.errors) == 2


def test_an_outage_ends_the_wait_before_the_timeout_busy_does_not(
    redis_nodes: RedisNodes,
) -> None:
    with Redlock(redis_nodes.urls, unavailable_timeout=0.3) as redlock:
        assert redlock.config.unavailable_timeout == 0.3
        with redlock.lock("busy"):
            start = time.monotonic()
            assert not redlock.lock("busy", timeout=1.0).acquire()
            assert time.monotonic() - start >= 0.99  # held elsewhere: the whole timeout
        for node in redis_nodes:
            node.refuse()
        start = time.monotonic()
        with pytest.raises(QuorumUnavailable, match="unavailable_timeout"):  # noqa: SIM117
            with redlock.semaphore("down", 2, timeout=5.0):
                pytest.fail("entered the body without the lock")
        lock = redlock.rwlock("down").write(timeout=5.0, unavailable_timeout=5.0)
        assert not lock.acquire(timeout=None, unavailable_timeout=0.2)
        assert time.monotonic() - start < 2.5  # well before the 5 s timeouts
        assert len(lock.errors) == len(redis_nodes)


def test_rwlock_readers_share_writer_excludes(redis_nodes: RedisNodes) -> None:
    with Redlock(redis_nodes.urls) as redlock:
        rw = redlock.rwlock("report", ttl=5.0)
        with rw.read() as first, rw.read() as second:
            assert first.held
            assert second.held
            assert not rw.write().acquire(blocking=False)
        with rw.write() as writer:
            assert writer.held
            assert not rw.read().acquire(blocking=False)
        assert repr(rw) == "<sync.RWLock 'report'>"
    assert no_keys_left(redis_nodes)


def test_multilock_takes_every_name_or_none(redis_nodes: RedisNodes) -> None:
    with Redlock(redis_nodes.urls) as redlock:
        with redlock.multilock(["account:1", "account:2"], ttl=5.0) as both:
            assert both.held
            assert both.name == "account:1 + account:2"
            assert not redlock.lock("account:2").acquire(blocking=False)
        plain = redlock.lock("account:1")
        assert plain.acquire()
        assert not redlock.multilock(["account:2", "account:1"]).acquire(blocking=False)
        plain.release()
    assert no_keys_left(redis_nodes)


def test_semaphore_lets_limit_threads_in(redis_nodes: RedisNodes) -> None:
    with Redlock(redis_nodes.urls) as redlock:
        inside: list[int] = []
        most = [0]
        guard = threading.Lock()

        def worker() -> None:
            for _ in range(3):
                with redlock.semaphore("exports", 2, ttl=5.0) as held:
                    assert held.held
                    with guard:
                        inside.append(1)
                        most[0] = max(most[0], len(inside))
                    time.sleep(0.01)
                    with guard:
                        inside.pop()

        threads = [threading.Thread(target=worker) for _ in range(5)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert 1 <= most[0] <= 2  # never three at once
    assert no_keys_left(redis_nodes)


def test_adopt_a_grant_made_in_another_thread(redis_nodes: RedisNodes) -> None:
    with Redlock(redis_nodes.urls) as redlock:
        lock = redlock.lock("handed", ttl=5.0, auto_extend=False)
        assert lock.acquire()
        assert lock.token is not None
        adopted: list[Lock] = []

        def worker(token: str) -> None:
            with redlock.adopt("handed", token, ttl=5.0) as held:
                adopted.append(held)
                assert held.held

        thread = threading.Thread(target=worker, args=(lock.token,))
        thread.start()
        thread.join()
        assert adopted
        assert not adopted[0].held
        assert not redlock.locked("handed")
        with pytest.raises(LockNotOwned):
            redlock.adopt("handed", lock.token)
    assert no_keys_left(redis_nodes)


def test_many_threads_no_lost_update(redis_nodes: RedisNodes) -> None:
    """Read, sleep, write back under the lock: any overlap loses an increment."""
    shared = {"count": 0}
    threads, rounds = 8, 5
    with Redlock(redis_nodes.urls, retry_delay=0.01, retry_jitter=0.01) as redlock:

        def work() -> None:
            for _ in range(rounds):
                with redlock.lock("counter", ttl=5.0):
                    seen = shared["count"]
                    time.sleep(0.002)  # another holder would write in between
                    shared["count"] = seen + 1

        pool = [threading.Thread(target=work) for _ in range(threads)]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()
    assert shared["count"] == threads * rounds
    assert no_keys_left(redis_nodes)


def test_a_celery_like_worker_pool(redis_nodes: RedisNodes) -> None:
    """Tasks on a thread pool, each under the lock of its account, some decorated."""
    balances = dict.fromkeys(range(4), 0)
    with Redlock(redis_nodes.urls, retry_delay=0.01, retry_jitter=0.01) as redlock:

        @redlock.synchronized("account:{account}", ttl=5.0)
        def deposit(account: int, amount: int) -> int:
            seen = balances[account]
            time.sleep(0.001)
            balances[account] = seen + amount
            return balances[account]

        def task(number: int) -> None:
            account = number % 4
            if number % 2:
                deposit(account, 1)
            else:
                with redlock.lock(f"account:{account}", ttl=5.0):
                    seen = balances[account]
                    time.sleep(0.001)
                    balances[account] = seen + 1

        with ThreadPoolExecutor(max_workers=8) as pool:
            for done in [pool.submit(task, number) for number in range(80)]:
                done.result()
    assert balances == dict.fromkeys(range(4), 20)
    assert no_keys_left(redis_nodes)


def test_synchronized_refuses_coroutine_functions(redis_nodes: RedisNodes) -> None:
    with Redlock(redis_nodes.urls) as redlock:

        async def job() -> None:
            pass

        with pytest.raises(ConfigurationError, match="plain functions"):
            redlock.synchronized("job")(job)


def test_renewal_runs_while_the_thread_computes(redis_nodes: RedisNodes) -> None:
    with Redlock(redis_nodes.urls) as redlock, redlock.lock("long", ttl=0.3) as lock:
        first = lock.token
        time.sleep(1.5)  # five ttls, without a single call into the library
        assert lock.held
        assert not lock.lost
        assert lock.token == first
        assert redlock.locked("long")
    assert no_keys_left(redis_nodes)


def test_called_from_an_event_loop_it_says_so(redis_nodes: RedisNodes) -> None:
    with Redlock(redis_nodes.urls) as redlock:
        lock = redlock.lock("inside")

        async def by_mistake() -> bool:
            return lock.acquire()

        with pytest.raises(RuntimeError, match=r"use redlock_async\.Redlock with `async with`"):
            asyncio.run(by_mistake())
        assert not lock.held
        assert lock.acquire()  # nothing was left half-done
        lock.release()


def test_async_objects_point_to_the_sync_api(redis_nodes: RedisNodes) -> None:
    redlock = redlock_async.Redlock(redis_nodes.urls)
    with pytest.raises(TypeError, match=r"redlock_async\.sync"), redlock:
        pass
    with pytest.raises(TypeError, match=r"redlock_async\.sync"), redlock.lock("x"):
        pass


def test_closed_redlock_refuses(redis_nodes: RedisNodes) -> None:
    redlock = Redlock(redis_nodes.urls)
    redlock.close()
    redlock.close()  # harmless
    assert redlock.closed
    with pytest.raises(RedlockError, match="closed"):
        redlock.lock("x")
    with pytest.raises(RedlockError, match="closed"):
        redlock.locked("x")
    with pytest.raises(RedlockError, match="closed"):
        redlock.holder("x")


def test_closing_a_redlock_never_used_starts_no_lasting_thread(redis_nodes: RedisNodes) -> None:
    before = set(threading.enumerate())
    with Redlock(redis_nodes.urls):
        pass
    assert set(threading.enumerate()) <= before
