"""A virtual-time asyncio event loop: the simulation's one loop, and its only clock.

:class:`SimLoop` is an :class:`asyncio.BaseEventLoop` - asyncio's own ready
queue, timer heap, Tasks, Futures, ``asyncio.timeout`` - with three changes:

* ``time()`` is virtual. When nothing is ready, the loop's "selector" jumps
  the clock to the earliest timer instead of sleeping, so a simulated hour of
  renewals runs in seconds. With nothing ready and no timer, every task waits
  for something that cannot happen: :class:`Stuck` is raised, not a hang.
* Order is a function of the schedule alone: timers due at one instant run
  in the order they were set (a sequence number breaks ties in the heap), and
  nothing depends on memory addresses or hash seeds.
* There is no real I/O. ``create_connection`` goes to the simulated network
  (``net.py``); every other way out (sockets, DNS, executors, unix sockets,
  servers, subprocesses) raises :class:`RealIO`.

Simulated processes (``process.py``) are told apart by a context variable,
:data:`PROCESS`, set in the context their tasks run in: asyncio copies the
context into every task, callback and timer made from there. So the loop
knows who owns each handle, and ``bury(process)`` can drop every callback and
timer of a crashed process - none of its code runs again, its ``finally``
blocks and the library's cleanup included - and refuse any it makes later.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import heapq
import itertools
from asyncio import format_helpers
from collections.abc import Callable, Coroutine, Generator
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, TypeVarTuple, Unpack

if TYPE_CHECKING:
    from .net import Network

__all__ = ["PROCESS", "Owner", "RealIO", "SimLoop", "Stuck"]

_T = TypeVar("_T")
_Ts = TypeVarTuple("_Ts")

# Loop iterations at one instant before a busy loop is reported: something
# reschedules itself for "now" forever, and virtual time cannot move.
SPIN_LIMIT = 100_000

CLOCK_RESOLUTION = 1e-9  # seconds: the shortest positive delay a timer waits

# asyncio's (base_events.py): when the heap is rebuilt without its cancelled
# timers, and the longest a selector waits.
_MIN_SCHEDULED_TIMER_HANDLES = 100
_MIN_CANCELLED_TIMER_HANDLES_FRACTION = 0.5
_MAXIMUM_SELECT_TIMEOUT = 24 * 3600


class Stuck(RuntimeError):
    """Nothing is ready, no timer is set, and the awaited result is not done;
    or the loop spins at one instant without time moving."""


class RealIO(RuntimeError):
    """Code on the simulation's loop tried to reach the real world."""


class Owner(Protocol):
    """A simulated process, as the loop sees it."""

    name: str
    dead: bool

    def adopt(self, task: asyncio.Task[Any]) -> None:
        """A task was made in the process's context."""


PROCESS: contextvars.ContextVar[Owner | None] = contextvars.ContextVar("sim_process", default=None)
"""The simulated process whose code runs (None: the simulation's own)."""


class _Owned(asyncio.Handle):
    """A callback, and whose it is (None: the simulation's own): a simulated
    process's is held back while the process is paused."""

    __slots__ = ("_owner",)

    def __init__(
        self,
        callback: Callable[..., object],
        args: tuple[Any, ...],
        loop: SimLoop,
        context: contextvars.Context | None,
        owner: Owner | None,
    ) -> None:
        if loop._debug:  # type: ignore[attr-defined]
            super().__init__(callback, args, loop, context)
        else:  # asyncio.Handle.__init__'s work, without its calls (a million a seed)
            _fill(self, callback, args, loop, context)
        self._owner = owner

    def _run(self) -> None:
        owner = self._owner
        if owner is None or not _held(self, owner):
            super()._run()


def _fill(
    handle: asyncio.Handle,
    callback: Callable[..., object],
    args: tuple[Any, ...],
    loop: SimLoop,
    context: contextvars.Context | None,
) -> None:
    """What asyncio.Handle.__init__ sets, without the debug checks it calls."""
    handle._context = contextvars.copy_context() if context is None else context  # type: ignore[attr-defined]
    handle._loop = loop  # type: ignore[attr-defined]
    handle._callback = callback  # type: ignore[attr-defined]
    handle._args = args
    handle._cancelled = False
    handle._repr = None  # type: ignore[attr-defined]
    handle._source_traceback = None  # type: ignore[attr-defined]


class _Timer(asyncio.TimerHandle):
    """A timer, and whose it is: held back while its process is paused. In the
    loop's heap as ``(when, sequence, timer)``: timers due at one instant run
    in the order they were set, and the heap compares plain tuples."""

    __slots__ = ("_owner",)

    def __init__(
        self,
        when: float,
        callback: Callable[..., object],
        args: tuple[Any, ...],
        loop: SimLoop,
        context: contextvars.Context | None,
        owner: Owner | None,
    ) -> None:
        if loop._debug:  # type: ignore[attr-defined]
            super().__init__(when, callback, args, loop, context)
        else:  # asyncio.TimerHandle.__init__'s work, without its calls
            _fill(self, callback, args, loop, context)
            self._when = when
            self._scheduled = False
        self._owner = owner

    def _run(self) -> None:
        owner = self._owner
        if owner is None or not _held(self, owner):
            super()._run()


def _held(handle: asyncio.Handle, owner: Owner) -> bool:
    """Keep ``handle`` for when ``owner`` resumes, if it is paused."""
    frozen: dict[Owner, list[asyncio.Handle]] = handle._loop._frozen  # type: ignore[attr-defined]
    if frozen and owner in frozen:
        frozen[owner].append(handle)
        return True
    return False


_run_handle = asyncio.Handle._run  # a handle's callback, in its context (errors reported)


def _report(handle: asyncio.Handle, exc: BaseException) -> None:
    """What ``asyncio.Handle._run`` reports when a callback raises."""
    callback, args = handle._callback, handle._args  # type: ignore[attr-defined]
    source = format_helpers._format_callback_source(callback, args)
    context: dict[str, Any] = {
        "message": f"Exception in callback {source}",
        "exception": exc,
        "handle": handle,
    }
    if handle._source_traceback:  # type: ignore[attr-defined]
        context["source_traceback"] = handle._source_traceback  # type: ignore[attr-defined]
    handle._loop.call_exception_handler(context)  # type: ignore[attr-defined]


class _Jump:
    """The loop's selector: no I/O to wait for, so waiting is moving the clock."""

    def __init__(self, loop: SimLoop) -> None:
        self._loop = loop

    def select(self, timeout: float | None) -> list[Any]:
        self._loop._jump(timeout)
        return []

    def close(self) -> None:
        pass


class SimLoop(asyncio.BaseEventLoop):
    """An event loop on a virtual clock that starts at ``start`` seconds."""

    def __init__(self, start: float = 1000.0) -> None:
        super().__init__()
        self._now = start
        self._selector = _Jump(self)
        self._timers = itertools.count()
        self._spun = 0
        self._spun_at = start
        self.net: Network | None = None  # set by the Network made over this loop
        # Paused processes, and their callbacks due meanwhile (in order).
        self._frozen: dict[Owner, list[asyncio.Handle]] = {}
        # What asyncio would log (an exception in a callback, a task's
        # exception never retrieved): kept for the run's checks to look at.
        self.errors: list[dict[str, Any]] = []
        self.set_exception_handler(lambda loop, context: self.errors.append(context))

    def set_debug(self, enabled: bool) -> None:
        super().set_debug(enabled)
        # Every Future made asks the loop: a C call answers (not a Python method).
        self.get_debug = bool(enabled).__bool__  # type: ignore[method-assign]

    # The clock.

    def time(self) -> float:
        return self._now

    def _jump(self, timeout: float | None) -> None:
        ready: Any = self._ready  # type: ignore[attr-defined]
        if timeout is None:
            raise Stuck(f"at t={self._now}: nothing is ready and no timer is set")
        if timeout > 0:
            scheduled: list[tuple[float, int, _Timer]] = self._scheduled  # type: ignore[attr-defined]
            # To the timer itself, not now + (when - now): no float residue.
            self._now = max(self._now, min(scheduled[0][0], self._now + timeout))
        if self._now == self._spun_at and ready:
            self._spun += 1
            if self._spun > SPIN_LIMIT:
                raise Stuck(f"{SPIN_LIMIT} loop iterations at t={self._now} without time moving")
        else:
            self._spun, self._spun_at = 0, self._now

    def _run_once(self) -> None:
        """One iteration, as ``BaseEventLoop._run_once`` makes it - cancelled timers
        dropped, the "selector" waited on (the clock jumps), the timers due made
        ready, then every callback ready now run, in order - over a heap of
        ``(when, sequence, timer)`` and with a paused process's callbacks held
        back (the simulation's loop runs a million of them a seed)."""
        loop: Any = self  # asyncio's private attributes, untyped
        scheduled: list[tuple[float, int, Any]] = loop._scheduled
        ready: collections.deque[Any] = loop._ready
        count = len(scheduled)
        if (
            count > _MIN_SCHEDULED_TIMER_HANDLES
            and loop._timer_cancelled_count / count > _MIN_CANCELLED_TIMER_HANDLES_FRACTION
        ):
            kept = []
            for entry in scheduled:
                if entry[2]._cancelled:
                    entry[2]._scheduled = False
                else:
                    kept.append(entry)
            heapq.heapify(kept)
            loop._scheduled = scheduled = kept
            loop._timer_cancelled_count = 0
        else:
            while scheduled and scheduled[0][2]._cancelled:
                loop._timer_cancelled_count -= 1
                heapq.heappop(scheduled)[2]._scheduled = False
        # The selector's wait, inline: _jump(timeout) as _Jump.select makes it.
        now = self._now
        if ready or loop._stopping:
            pass  # timeout 0: the clock stays
        elif scheduled:
            timeout = min(max(0, scheduled[0][0] - now), _MAXIMUM_SELECT_TIMEOUT)
            if timeout > 0:
                now = self._now = max(now, min(scheduled[0][0], now + timeout))
        else:
            raise Stuck(f"at t={now}: nothing is ready and no timer is set")
        if now == self._spun_at and ready:
            self._spun += 1
            if self._spun > SPIN_LIMIT:
                raise Stuck(f"{SPIN_LIMIT} loop iterations at t={now} without time moving")
        else:
            self._spun, self._spun_at = 0, now
        end = now + loop._clock_resolution
        while scheduled and scheduled[0][0] < end:
            timer = heapq.heappop(scheduled)[2]
            timer._scheduled = False
            ready.append(timer)
        frozen = self._frozen
        popleft = ready.popleft
        debug = loop._debug
        for _ in range(len(ready)):
            handle = popleft()
            if handle._cancelled:
                continue
            if frozen:
                owner = getattr(handle, "_owner", None)
                if owner is not None:
                    held = frozen.get(owner)
                    if held is not None:
                        held.append(handle)
                        continue
            if debug:  # on virtual time no callback is slow: nothing to time
                loop._current_handle = handle
                try:
                    _run_handle(handle)
                finally:
                    loop._current_handle = None
                continue
            # asyncio.Handle._run, inline (one call less for each of millions)
            try:
                handle._context.run(handle._callback, *handle._args)
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException as exc:
                _report(handle, exc)
        handle = None  # no cycle through an exception

    def _process_events(self, event_list: list[Any]) -> None:
        pass

    def _write_to_self(self) -> None:
        pass  # call_soon_threadsafe: one thread only, nothing to wake

    # Scheduling: every handle is its owner's.

    def call_soon(
        self,
        callback: Callable[[Unpack[_Ts]], object],
        *args: *_Ts,
        context: contextvars.Context | None = None,
    ) -> asyncio.Handle:
        owner = PROCESS.get() if context is None else context.get(PROCESS)
        if owner is not None and owner.dead:
            return _dropped(callback, args, self)
        if self._closed:  # type: ignore[attr-defined]
            self._check_closed()  # type: ignore[attr-defined]
        handle = _Owned(callback, args, self, context, owner)
        self._ready.append(handle)  # type: ignore[attr-defined]
        return handle

    def call_later(
        self,
        delay: float,
        callback: Callable[[Unpack[_Ts]], object],
        *args: *_Ts,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        # A positive delay waits a nanosecond at least, as on a real clock: one
        # of a few ulps (a deadline on a process's monotonic clock, another
        # origin than the loop's) rounds to "now" here, and a callback that
        # finds its clock not there yet and sets itself again would spin at
        # one instant for ever (a real loop's time moves meanwhile).
        if delay > 0:
            delay = max(delay, CLOCK_RESOLUTION)
        return self.call_at(self._now + delay, callback, *args, context=context)

    def call_at(
        self,
        when: float,
        callback: Callable[[Unpack[_Ts]], object],
        *args: *_Ts,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        if self._closed:  # type: ignore[attr-defined]
            self._check_closed()  # type: ignore[attr-defined]
        owner = PROCESS.get() if context is None else context.get(PROCESS)
        timer = _Timer(when, callback, args, self, context, owner)
        sequence = next(self._timers)
        if owner is not None and owner.dead:
            timer.cancel()
            return timer
        heapq.heappush(self._scheduled, (when, sequence, timer))  # type: ignore[attr-defined]
        timer._scheduled = True
        return timer

    def create_task(
        self,
        coro: Generator[Any, None, _T] | Coroutine[Any, Any, _T],
        *,
        name: object = None,
        context: contextvars.Context | None = None,
    ) -> asyncio.Task[_T]:
        owner = PROCESS.get() if context is None else context.get(PROCESS)
        if owner is not None and owner.dead:
            coro.close()  # never started: its code never runs (and nothing warns)
        task = super().create_task(coro, name=name, context=context)
        if owner is not None:
            owner.adopt(task)
        return task

    def bury(self, owner: Owner) -> None:
        """``owner`` crashed: none of its callbacks or timers runs, now or later."""
        ready: Any = self._ready  # type: ignore[attr-defined]
        scheduled: list[tuple[float, int, _Timer]] = self._scheduled  # type: ignore[attr-defined]
        timers = [entry[2] for entry in scheduled]
        for handle in [*ready, *timers, *self._frozen.pop(owner, ())]:
            if getattr(handle, "_owner", None) is owner:
                handle.cancel()

    def pause(self, owner: Owner) -> None:
        """Stop ``owner`` (SIGSTOP, a long GC pause): what falls due meanwhile waits."""
        self._frozen.setdefault(owner, [])

    def resume(self, owner: Owner) -> None:
        """Go on with ``owner``: what fell due while it was paused runs now, in order."""
        ready: Any = self._ready  # type: ignore[attr-defined]
        ready.extend(self._frozen.pop(owner, ()))

    def run(self, main: Coroutine[Any, Any, _T]) -> _T:
        """``main`` to completion, as ``asyncio.run`` (without closing the loop)."""
        return self.run_until_complete(main)

    # The real world: out of reach.

    async def create_connection(  # type: ignore[override]
        self,
        protocol_factory: Callable[[], asyncio.BaseProtocol],
        host: str | None = None,
        port: int | None = None,
        **kwargs: Any,
    ) -> tuple[asyncio.Transport, asyncio.BaseProtocol]:
        if self.net is None:
            raise RealIO("no simulated network on this loop")
        if kwargs.get("sock") is not None or kwargs.get("ssl") is not None:
            raise RealIO(f"create_connection({kwargs}): not simulated")
        if host is None or port is None:
            raise RealIO("create_connection without host and port: not simulated")
        return await self.net.connect(PROCESS.get(), protocol_factory, host, port)

    async def getaddrinfo(self, *args: Any, **kwargs: Any) -> Any:
        raise RealIO(f"getaddrinfo{args}: the simulation resolves no names (use IP literals)")

    def run_in_executor(self, *args: Any) -> Any:  # type: ignore[override]
        raise RealIO("run_in_executor: no threads in the simulation")

    async def create_unix_connection(self, *args: Any, **kwargs: Any) -> Any:
        raise RealIO("create_unix_connection: not simulated")

    async def create_server(self, *args: Any, **kwargs: Any) -> Any:
        raise RealIO("create_server: not simulated")

    async def create_datagram_endpoint(self, *args: Any, **kwargs: Any) -> Any:
        raise RealIO("create_datagram_endpoint: not simulated")

    async def sock_connect(self, *args: Any, **kwargs: Any) -> Any:
        raise RealIO("sock_connect: not simulated")

    async def subprocess_exec(self, *args: Any, **kwargs: Any) -> Any:
        raise RealIO("subprocess_exec: not simulated")

    def add_reader(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        raise RealIO("add_reader: no file descriptors in the simulation")

    def add_writer(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        raise RealIO("add_writer: no file descriptors in the simulation")


def _dropped(
    callback: Callable[..., object], args: tuple[Any, ...], loop: SimLoop
) -> asyncio.Handle:
    handle = asyncio.Handle(callback, args, loop)
    handle.cancel()
    return handle
