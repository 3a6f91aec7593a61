"""redlock_async.sync when things go wrong: loss, close while held, Ctrl-C, fork."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
import traceback
import warnings

import pytest

from redlock_async import ConfigurationError, LockLost, QuorumUnavailable, RedlockError
from redlock_async.sync import Lock, Redlock
from redlock_async.testing import RedisNodes

from ._util import eventually, no_keys_left


def test_a_lost_lock_is_reported_at_the_end_of_with(redis_nodes: RedisNodes) -> None:
    """The thread cannot be cancelled: it runs on, and LockLost comes at the end."""
    told: list[tuple[Lock, str]] = []

    def on_lost(lock: Lock) -> None:
        told.append((lock, threading.current_thread().name))

    ran_on: list[bool] = []
    with Redlock(redis_nodes.urls) as redlock:
        lock = redlock.lock("lose", ttl=1.0, on_lost=on_lost)  # cancel_on_lost=True: no effect
        with pytest.raises(LockLost, match="lose"), lock:
            redis_nodes[0].kill()
            redis_nodes[1].kill()
            assert eventually(lambda: lock.lost)  # renewal cannot reach a quorum
            ran_on.append(lock.held)  # the body goes on after the loss
        assert ran_on == [False]
        assert told == [(lock, "redlock_async.sync")]  # with the sync lock, on the loop thread


def test_close_while_threads_hold_and_wait(redis_nodes: RedisNodes) -> None:
    redlock = Redlock(redis_nodes.urls)
    entered, closed = threading.Event(), threading.Event()
    holder: list[object] = []
    waiter: list[object] = []

    def hold() -> None:
        try:
            with redlock.lock("closing", ttl=5.0) as lock:
                entered.set()
                closed.wait()
                holder.append(lock.lost)
        except LockLost as exc:
            holder.append(exc)

    def wait() -> None:
        entered.wait()
        try:
            redlock.lock("closing").acquire()  # no timeout: only close() ends it
        except RedlockError as exc:
            waiter.append(exc)

    threads = [threading.Thread(target=hold), threading.Thread(target=wait)]
    for thread in threads:
        thread.start()
    entered.wait()
    redlock.close()
    closed.set()
    for thread in threads:
        thread.join()
    assert holder[0] is True
    assert isinstance(holder[1], LockLost)
    assert len(waiter) == 1
    assert "closed" in str(waiter[0])
    assert no_keys_left(redis_nodes)


def test_acquire_that_times_out_leaves_no_keys(redis_nodes: RedisNodes) -> None:
    with Redlock(redis_nodes.urls) as redlock:
        holder = redlock.lock("timeout", ttl=5.0)
        assert holder.acquire()
        waiter = redlock.lock("timeout")
        assert not waiter.acquire(timeout=0.3)
        assert not waiter.acquire(blocking=False)
        holder.release()
        assert not redlock.locked("timeout")
    assert no_keys_left(redis_nodes)


def test_an_unconfirmed_extend_keeps_the_lock(redis_nodes: RedisNodes) -> None:
    """As the async extend(): QuorumUnavailable, still held, renewed once the nodes are back."""
    told: list[Lock] = []
    with Redlock(redis_nodes.urls) as redlock:
        lock = redlock.lock("outage", ttl=3.0, on_lost=told.append)
        assert lock.acquire()
        with pytest.raises(ConfigurationError, match="timeout"):
            lock.extend(timeout=-1.0)
        majority = redis_nodes[:2]
        try:
            for node in majority:
                node.pause()
            with pytest.raises(QuorumUnavailable, match="still held"):
                lock.extend()
            assert lock.held
            assert not lock.lost
        finally:
            for node in majority:
                node.resume()
        time.sleep(4.0)  # past the validity it had: renewed in the background
        assert lock.held
        assert not lock.lost
        lock.extend(ttl=6.0, timeout=2.0)
        assert lock.ttl == 6.0
        lock.release()
    assert told == []
    assert no_keys_left(redis_nodes)


def _listening(nodes: RedisNodes) -> bool:
    """A waiter subscribed to some lock's release announcements."""
    return any(node.client().pubsub_shardchannels() for node in nodes)


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="needs signal.pthread_kill")
def test_ctrl_c_while_waiting_gives_the_lock_up(redis_nodes: RedisNodes) -> None:
    """Ctrl-C in a thread blocked in acquire() cancels the acquire on the loop thread.

    Without that, the attempts would go on and take the lock once it is
    free, for a caller long gone (auto-extended: for ever).
    """
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("SIGINT reaches the main thread only")
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("SIGINT does not raise KeyboardInterrupt here")
    with Redlock(redis_nodes.urls) as redlock:
        holder = redlock.lock("ctrl-c", ttl=5.0)
        assert holder.acquire()
        waiter = redlock.lock("ctrl-c")

        def interrupt() -> None:
            assert eventually(lambda: _listening(redis_nodes))
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)

        thread = threading.Thread(target=interrupt)
        thread.start()
        with pytest.raises(KeyboardInterrupt):
            waiter.acquire()  # no timeout
        thread.join()
        assert not waiter.held
        assert waiter.token is None
        holder.release()
        # Nobody took it in the waiter's stead: a third lock gets it at once.
        third = redlock.lock("ctrl-c")
        assert third.acquire(blocking=False)
        third.release()
    assert no_keys_left(redis_nodes)


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="needs signal.pthread_kill")
def test_ctrl_c_just_after_the_grant_gives_it_back(redis_nodes: RedisNodes) -> None:
    """The race: the acquire won on the loop thread as Ctrl-C came in the caller.

    Driven through the lock's attempt path with an acquire that is granted,
    then interrupts the caller before it returns.
    """
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("SIGINT reaches the main thread only")
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("SIGINT does not raise KeyboardInterrupt here")
    with Redlock(redis_nodes.urls) as redlock:
        lock = redlock.lock("raced", ttl=5.0)
        inner = lock._lock  # the async lock it wraps

        async def granted_then_interrupted() -> bool:
            assert await inner.acquire()
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
            await asyncio.sleep(30)  # cancelled by the interrupted caller
            return True

        with pytest.raises(KeyboardInterrupt):
            lock._attempt(granted_then_interrupted)
        assert not lock.held
        assert not redlock.locked("raced")
    assert no_keys_left(redis_nodes)


def _child(redlock: Redlock, parent_lock: Lock, write: int, release_first: bool) -> None:
    """In the forked child: lock on its own loop thread, report, exit without cleanup.

    ``release_first``: the child's first call is the parent's lock's release
    (leaving a ``with`` block it inherited): it must not release the parent's grant.
    """
    code = 1
    try:
        report: dict[str, object] = {}
        if release_first:
            try:
                parent_lock.release()
                report["released_the_parents"] = True
            except LockLost:
                report["released_the_parents"] = False
        with redlock.lock("child", ttl=5.0) as lock:
            report["child_held"] = lock.held
            report["parent_lock_lost_here"] = parent_lock.lost
        report["parent_locked"] = redlock.locked("parent")
        redlock.close()
        os.write(write, json.dumps(report).encode())
        code = 0
    except BaseException:
        os.write(write, json.dumps({"error": traceback.format_exc()}).encode())
    finally:
        os._exit(code)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.parametrize("release_first", [False, True])
def test_after_fork_the_child_starts_its_own_loop_thread(
    redis_nodes: RedisNodes, release_first: bool
) -> None:
    with Redlock(redis_nodes.urls) as redlock:
        parent_lock = redlock.lock("parent", ttl=5.0)
        assert parent_lock.acquire()  # the parent's loop thread runs, and holds a grant
        read, write = os.pipe()
        with warnings.catch_warnings():
            # Python 3.12+ warns about fork() in a process with threads.
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:
            _child(redlock, parent_lock, write, release_first)
        os.close(write)
        deadline = time.monotonic() + 60.0  # a liveness bound: a hung child fails the test
        while (done := os.waitpid(pid, os.WNOHANG))[0] == 0:
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                pytest.fail("the forked child hung")
            time.sleep(0.02)
        with os.fdopen(read, "rb") as pipe:
            report = json.loads(pipe.read() or b"{}")
        assert os.waitstatus_to_exitcode(done[1]) == 0, report
        # The child locked on its own; the parent's grant was not the child's,
        # and the child's close() did not release it.
        expected: dict[str, object] = {
            "child_held": True,
            "parent_lock_lost_here": True,
            "parent_locked": True,
        }
        if release_first:
            expected["released_the_parents"] = False  # LockLost: it was the parent's
        assert report == expected
        assert parent_lock.held
        assert not parent_lock.lost
        assert redlock.locked("parent")
        assert not redlock.locked("child")
        parent_lock.release()
    assert no_keys_left(redis_nodes)
