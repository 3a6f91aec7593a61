"""A Redlock used after a fork, from a second event loop, or from another thread.

Connections belong to the event loop that made them (and, after a fork, to
the parent). Used anywhere else, a Redlock must work (forked child, a later
loop) or fail at once with a RedlockError that says what to do - never hang.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import threading
import time
import warnings
from collections.abc import Iterator

from redlock_async import Redlock, RedlockError
from redlock_async.testing import RedisNodes

from ..conftest import no_keys_left


@contextlib.contextmanager
def old_loops_collected() -> Iterator[None]:
    """Connections of a loop that ended without ``aclose()`` are dropped, and
    closed when collected - with a ResourceWarning, as asyncio does for any
    transport left open. Collect them here, where that is expected."""
    try:
        yield
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            gc.collect()


def _run_in_child(redlock: Redlock) -> bytes:
    """Fork; in the child, take and release a lock; report what happened."""

    async def child() -> bytes:
        lock = redlock.lock("child", ttl=5.0, auto_extend=False)
        started = time.monotonic()
        ok = await lock.acquire(timeout=1.0)
        took = time.monotonic() - started
        if ok:
            await lock.release()
        return b"ok" if ok and took < 1.0 else f"no {took:.2f} {dict(lock.errors)}".encode()

    read, write = os.pipe()
    with warnings.catch_warnings():  # 3.12+: fork with threads (the proxy's) warns
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            report = asyncio.run(asyncio.wait_for(child(), 5.0))
        except BaseException as exc:  # report anything, never hang the parent
            report = f"raised {exc!r}".encode()
        os.write(write, report[:500])
        os._exit(0)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 600):
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    return b"".join(chunks)


async def test_a_forked_child_can_lock_with_its_parents_redlock(redis_nodes: RedisNodes) -> None:
    redlock = Redlock(redis_nodes.urls)
    try:
        held = redlock.lock("parent", ttl=30.0)
        assert await held.acquire()  # connections made, a grant held and renewed
        report = await asyncio.get_running_loop().run_in_executor(None, _run_in_child, redlock)
        assert report == b"ok"
        assert held.held  # the child neither released nor broke the parent's grant
        await held.extend()
        await held.release()
    finally:
        await redlock.aclose()
    assert await no_keys_left(redis_nodes)


def test_a_second_asyncio_run_reuses_the_redlock(redis_nodes: RedisNodes) -> None:
    redlock = Redlock(redis_nodes.urls)

    async def once() -> bool:
        lock = redlock.lock("job", ttl=5.0, auto_extend=False)
        ok = await lock.acquire(timeout=1.0)
        if ok:
            await lock.release()
        return ok

    with old_loops_collected():
        assert asyncio.run(once())
        assert asyncio.run(once())  # a new loop: the old connections are forgotten
        asyncio.run(redlock.aclose())


def test_another_loop_while_the_first_runs_fails_at_once(redis_nodes: RedisNodes) -> None:
    redlock = Redlock(redis_nodes.urls)
    outcome: list[BaseException | bool] = []
    blocked = threading.Event()
    release = threading.Event()

    async def first() -> None:
        assert await redlock.lock("warm", ttl=5.0, auto_extend=False).acquire()
        blocked.set()
        release.wait(10)  # the point: this loop is blocked

    async def second() -> None:
        try:
            outcome.append(await redlock.lock("job", ttl=5.0).acquire(timeout=1.0))
        except BaseException as exc:
            outcome.append(exc)

    with old_loops_collected():
        thread = threading.Thread(target=lambda: asyncio.run(first()))
        thread.start()
        try:
            assert blocked.wait(10)
            started = time.monotonic()
            asyncio.run(second())
            took = time.monotonic() - started
        finally:
            release.set()
            thread.join()
        assert len(outcome) == 1
        assert isinstance(outcome[0], RedlockError), outcome
        assert "another event loop" in str(outcome[0])
        assert took < 1.0  # at once, not after the acquire's timeout
        # The first loop has ended: the Redlock is usable again.
        asyncio.run(_acquire_once(redlock))
        asyncio.run(redlock.aclose())


async def _acquire_once(redlock: Redlock) -> None:
    lock = redlock.lock("job", ttl=5.0, auto_extend=False)
    assert await lock.acquire(timeout=2.0)
    await lock.release()
