"""The event-loop thread behind one sync ``Redlock``, and how calls cross to it and back.

One thread per ``Redlock``, started by the first call that needs the loop,
stopped by ``close()``. The thread runs an ``asyncio.Runner`` around a
coroutine that waits for ``close()``, on the event-loop policy's loop (as
``asyncio.run``: uvloop's where it is installed as the policy).

A call is a :class:`Call`. The calling thread makes the coroutine, queues
the call and blocks on a plain ``_thread`` lock. The loop thread takes
everything queued in one callback and runs each call in a task of its own,
in the caller's ``contextvars`` context (as ``run_coroutine_threadsafe``
did: the span current in the thread is the parent of the lock's spans);
the task itself records the outcome and releases the caller's lock. A
thread that finds a wake-up of the loop already on its way only queues its
call: one write to the loop's self-pipe serves a batch, and the calls of a
batch start in one loop iteration.

``run_coroutine_threadsafe`` and a ``concurrent.futures.Future`` cost a
self-pipe write per call, a task done-callback (a loop iteration more) and
a condition variable and waiter lock made per wait: this hand-off makes
1.20x the acquire+release pairs per second from one thread, 1.33x from
eight, on one node (benchmarks/README.md, "Issue 27: the sync API's
hand-off").

After ``fork()`` the child has no loop thread, only the parent's objects: the
next call starts a fresh thread and never touches the parent's (kept
referenced, so that nothing of it is finalized in the child). The async
``Redlock`` underneath then forgets the parent's connections and grants on
its own (``Holdings.orphan_all``).
"""

from __future__ import annotations

import _thread
import asyncio
import contextlib
import contextvars
import os
import threading
import weakref
from collections import deque
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any, Generic, TypeVar, cast

from .._base._errors import RedlockError

__all__ = ["Call", "Portal", "check_no_running_loop"]

_T = TypeVar("_T")

# Bumped in a forked child: a loop thread started before the fork is not there.
_forks = [0]
_portals: weakref.WeakSet[Portal] = weakref.WeakSet()
# The parent's loop threads, in a forked child: kept, never used nor finalized.
_abandoned: list[object] = []
# asyncio's own test, without raising: None outside a running loop.
_running_loop = asyncio.events._get_running_loop


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
    if _running_loop() is None:
        return
    raise RuntimeError(
        "redlock_async.sync blocks the calling thread, and this thread runs an event "
        "loop (an async def, or an on_lost callback, which runs on the lock's event-loop "
        "thread): use redlock_async.Redlock with `async with` there, or move the blocking "
        "call to a worker thread (await asyncio.to_thread(...))"
    )


def _closed() -> RedlockError:
    return RedlockError("this Redlock is closed")


class Call(Generic[_T]):
    """One coroutine run on the loop thread for a thread that waits for its outcome.

    Made by :meth:`Portal.start`. :meth:`wait` blocks for the outcome,
    :meth:`join` for the end alone. ``task`` is the loop side's task: set
    on the loop thread before anything queued after this call begins there.
    """

    __slots__ = ("_context", "_coro", "_done", "_error", "_result", "task")

    def __init__(self, coro: Coroutine[Any, Any, _T]) -> None:
        self._coro = coro
        # The caller's context: the task runs in it (contextvars, the current span).
        self._context = contextvars.copy_context()
        self._done = _thread.allocate_lock()
        self._done.acquire()  # released once, from the loop thread, when the call has ended
        self._result: _T | None = None
        self._error: BaseException | None = None
        self.task: asyncio.Task[None] | None = None

    def join(self) -> None:
        """Block until the call has ended. Interruptible (Ctrl-C): the call runs on."""
        self._done.acquire()
        self._done.release()  # a later join() or wait() returns at once

    def wait(self) -> _T:
        """Block until the call has ended; its result, or raise its exception."""
        self.join()
        error = self._error
        if error is None:
            return cast(_T, self._result)
        try:
            raise error
        finally:
            del error  # no cycle through the traceback's frame

    # The loop thread's side.

    def begin(self, running: _Running) -> None:
        run = self._run(running)
        try:
            self.task = running.loop.create_task(run, context=self._context)
        except BaseException as exc:  # the loop is closing: no task was made
            run.close()
            self.end(exc)

    async def _run(self, running: _Running) -> None:
        try:
            self._result = await self._coro
        except asyncio.CancelledError:
            # By the runner, as the loop thread stops (close()); or by an
            # interrupted caller's _settle, and then nobody waits for it.
            self._error = _closed() if running.stopped else RedlockError("the call was cancelled")
        except BaseException as exc:
            self._error = exc
        finally:
            # Ended from inside the task: no done-callback, no loop iteration more.
            self._done.release()

    def end(self, error: BaseException) -> None:
        """End a call whose coroutine never ran, with ``error``."""
        self._coro.close()  # never started: closed, it warns of nothing
        self._error = error
        self._done.release()


class _Running:
    """A started loop thread, and the calls queued for it."""

    __slots__ = ("fork", "loop", "queue", "stop", "stopped", "thread", "waking")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.stop = asyncio.Event()
        self.thread = threading.current_thread()  # made on the loop thread
        self.fork = _forks[0]  # the value of _forks when it started
        self.queue: deque[Call[Any]] = deque()
        self.waking = False  # a wake-up is on its way: it takes whatever is queued
        self.stopped = False  # close() has stopped the loop: queued calls end, unrun

    def submit(self, call: Call[Any]) -> None:
        """Queue ``call`` for the loop thread (from any thread but the loop's)."""
        self.queue.append(call)
        # Read after the append: True means a wake-up that has not run yet
        # (run_queued() clears it before it takes the queue), so it takes this
        # call too. Two threads may both read False: one wake-up more.
        if not self.waking:
            self.waking = True
            try:
                self.loop.call_soon_threadsafe(self.run_queued)
            except RuntimeError:  # the loop is closed
                self.stopped = True
        if self.stopped:  # maybe after the loop thread's last look at the queue
            self.end_queued()

    def run_queued(self) -> None:
        """On the loop thread: begin every queued call, in order."""
        self.waking = False
        if self.stopped:
            self.end_queued()
            return
        queue = self.queue
        while queue:
            queue.popleft().begin(self)

    def end_queued(self) -> None:
        """End the queued calls unrun: the loop thread is stopping or gone."""
        queue = self.queue
        while queue:
            try:
                call = queue.popleft()
            except IndexError:  # another thread took the last one
                return
            call.end(_closed())


class Portal:
    """The loop thread of one sync Redlock: the first call starts it, ``close()`` stops it."""

    __slots__ = ("__weakref__", "_running", "closed", "guard")

    def __init__(self) -> None:
        self.guard = threading.Lock()
        self._running: _Running | None = None
        self.closed = False
        _portals.add(self)

    def start(self, func: Callable[..., Coroutine[Any, Any, _T]], *args: object) -> Call[_T]:
        """Start ``func(*args)`` on the loop thread; the :class:`Call` to wait for.

        Raises RuntimeError from a thread that runs an event loop, and
        RedlockError once closed, before making the coroutine.
        """
        check_no_running_loop()
        running = self._running
        if running is None or running.fork != _forks[0]:
            running = self._start()
        call = Call(func(*args))
        running.submit(call)
        return call

    def call(self, func: Callable[..., Coroutine[Any, Any, _T]], *args: object) -> _T:
        """Run ``func(*args)`` on the loop thread and wait for its outcome."""
        return self.start(func, *args).wait()

    def _start(self) -> _Running:
        with self.guard:
            running = self._running
            if running is not None and running.fork == _forks[0]:
                return running  # another thread started it meanwhile
            if self.closed:
                raise _closed()
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
    ready: Future[_Running] = Future()

    async def serve() -> None:
        running = _Running(asyncio.get_running_loop())
        ready.set_result(running)
        await running.stop.wait()
        # No queued call begins from here: the runner cancels every task as
        # it closes, and a task cancelled before its first step never runs
        # its coroutine, nor ends its call (its caller would wait for ever).
        running.stopped = True
        # And every call begun so far takes its first step (the loop runs
        # callbacks in order) before the runner's cancellation.
        await asyncio.sleep(0)

    def run() -> None:
        try:
            # The policy's loop, as asyncio.run's. The runner cancels the tasks
            # still running when serve() returns (their callers get
            # RedlockError), then closes the loop.
            with asyncio.Runner() as runner:
                runner.run(serve())
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
                return
            raise
        finally:
            if ready.done() and ready.exception() is None:
                running = ready.result()
                running.stopped = True
                running.end_queued()  # queued after the loop thread's last look

    # A daemon, as anyio's portal threads: a Redlock never closed must not
    # keep the process from exiting (its grants expire with their ttl).
    thread = threading.Thread(target=run, name="redlock_async.sync", daemon=True)
    thread.start()
    return ready.result()
