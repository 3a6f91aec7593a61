"""The event-loop thread behind one sync ``Redlock``, reached through anyio's blocking portal.

One thread per ``Redlock``, started by the first call that needs the loop,
stopped by ``close()``. The thread runs ``anyio.run`` around a
``BlockingPortal`` (not ``start_blocking_portal``: its context manager, if
ever collected in a forked child, would call into the parent's loop thread,
which does not exist there, and wait for ever).

After ``fork()`` the child has no loop thread, only the parent's objects: the
next call starts a fresh thread and never touches the parent's (kept
referenced, so that nothing of it is finalized in the child). The async
``Redlock`` underneath then forgets the parent's connections and grants on
its own (``Holdings.orphan_all``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import weakref
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any, NamedTuple, TypeVar

import anyio
from anyio.from_thread import BlockingPortal

from .._base._errors import RedlockError

__all__ = ["Portal", "check_no_running_loop"]

_T = TypeVar("_T")

# Bumped in a forked child: a loop thread started before the fork is not there.
_forks = [0]
_portals: weakref.WeakSet[Portal] = weakref.WeakSet()
# The parent's loop threads, in a forked child: kept, never used nor finalized.
_abandoned: list[object] = []


def _after_fork_in_child() -> None:
    _forks[0] += 1
    for portal in _portals:
        # A thread of the parent may have held it at the fork: it never lets go here.
        portal.guard = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def check_no_running_loop() -> None:
    """Raise RuntimeError when the calling thread runs an event loop.

    A blocking call there would stall that loop (from the portal's own
    thread, e.g. inside ``on_lost``: wait for itself for ever).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise RuntimeError(
        "redlock_async.sync blocks the calling thread, and this thread runs an event "
        "loop (an async def, or an on_lost callback, which runs on the lock's event-loop "
        "thread): use redlock_async.Redlock with `async with` there, or move the blocking "
        "call to a worker thread (await asyncio.to_thread(...))"
    )


class _Running(NamedTuple):
    """A started loop thread."""

    portal: BlockingPortal
    loop: asyncio.AbstractEventLoop
    stop: asyncio.Event
    thread: threading.Thread
    fork: int  # the value of _forks when it started


class Portal:
    """The loop thread of one sync Redlock: ``get()`` starts it, ``close()`` stops it."""

    __slots__ = ("__weakref__", "_running", "closed", "guard")

    def __init__(self) -> None:
        self.guard = threading.Lock()
        self._running: _Running | None = None
        self.closed = False
        _portals.add(self)

    def get(self) -> BlockingPortal:
        """The running portal (started now if needed). Raises RuntimeError from a
        thread that runs an event loop, RedlockError once closed."""
        return self._get().portal

    def _get(self) -> _Running:
        check_no_running_loop()
        running = self._running
        if running is None or running.fork != _forks[0]:
            running = self._start()
        return running

    def submit(self, func: Callable[..., Coroutine[Any, Any, _T]], *args: object) -> Future[_T]:
        """Start ``func(*args)`` on the loop thread; its future (``cancel()`` cancels it there).

        Straight onto the portal's loop with ``run_coroutine_threadsafe``:
        ``BlockingPortal.call`` costs about 145 us a call here, against 55 us,
        and a lock operation is two calls (benchmarks/sync.py). The portal
        still owns the thread's life: its stop cancels what is left.
        """
        loop = self._get().loop  # raises first: no coroutine is made to be dropped
        return asyncio.run_coroutine_threadsafe(func(*args), loop)

    def call(self, func: Callable[..., Coroutine[Any, Any, _T]], *args: object) -> _T:
        """Run ``func(*args)`` on the loop thread and wait for its outcome."""
        return self.submit(func, *args).result()

    def _start(self) -> _Running:
        with self.guard:
            running = self._running
            if running is not None and running.fork == _forks[0]:
                return running  # another thread started it meanwhile
            if self.closed:
                raise RedlockError("this Redlock is closed")
            if running is not None:  # the parent's, in a forked child
                _abandoned.append(running)
            running = self._running = _start_thread()
            return running

    def close(self) -> None:
        """Stop the loop thread (cancelling what still runs there) and wait for it."""
        with self.guard:
            self.closed = True
            running, self._running = self._running, None
        if running is None or running.fork != _forks[0]:
            return
        with contextlib.suppress(RuntimeError):  # RuntimeError: the loop has ended already
            running.loop.call_soon_threadsafe(running.stop.set)
        if threading.get_ident() != running.thread.ident:
            running.thread.join()


def _start_thread() -> _Running:
    ready: Future[tuple[BlockingPortal, asyncio.AbstractEventLoop, asyncio.Event]] = Future()

    async def serve() -> None:
        async with BlockingPortal() as portal:
            stop = asyncio.Event()
            ready.set_result((portal, asyncio.get_running_loop(), stop))
            await stop.wait()
            await portal.stop(cancel_remaining=True)

    def run() -> None:
        try:
            anyio.run(serve)
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
                return
            raise

    # A daemon, as anyio's own portal threads: a Redlock never closed must not
    # keep the process from exiting (its grants expire with their ttl).
    thread = threading.Thread(target=run, name="redlock_async.sync", daemon=True)
    thread.start()
    portal, loop, stop = ready.result()
    return _Running(portal, loop, stop, thread, _forks[0])
