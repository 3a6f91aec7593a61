"""A simulated client process: its own world, its own Redlock, its own tasks.

Each :class:`SimProcess` has a :class:`~redlock_async._base._world.World` of
its own - host ``sim-hostN`` and a pid, randomness seeded from the run's seed
and its name, the loop's virtual clock from an origin of its own as its
monotonic clock, and a wall clock that can step apart from it - and a real
``Redlock`` made in that world over the simulated nodes' URLs (IP literals:
the simulated network routes them; no name is resolved, no real socket is
opened) - the lean driver - or over redis-py clients of them
(``driver="redis-py"``).

Its code runs in a context of its own (``_world.context`` plus
:data:`~tests.sim.loop.PROCESS`), so every task, callback and timer it makes
is known to be its. :meth:`crash` ends all of them at once, without running
any of its code again - no ``finally``, no ``aclose()``, no release: the
library's cleanup does not run, as when a process is killed; the nodes see its
connections close. :meth:`aclose` is the orderly end: the real shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from redis.asyncio import Redis

from redlock_async import Redlock
from redlock_async._base import _world
from redlock_async._base._world import World

from .loop import PROCESS

if TYPE_CHECKING:
    from .sim import Simulation

__all__ = ["SimProcess"]

_T = TypeVar("_T")

Driver = Literal["lean", "redis-py"]


def _no_names(*args: Any, **kwargs: Any) -> list[tuple[Any, ...]]:
    raise OSError(f"getaddrinfo{args}: the simulation resolves no names (use IP literals)")


class SimProcess:
    """One simulated client process (see the module docstring)."""

    def __init__(
        self,
        sim: Simulation,
        name: str,
        host: str,
        pid: int,
        driver: Driver = "lean",
        **redlock_options: Any,
    ) -> None:
        self.sim = sim
        self.name = name
        self.host = host
        self.pid = pid
        self.dead = False  # crashed: none of its code runs again
        self.closed = False  # aclose() returned
        self.wall_offset = 0.0  # seconds its wall clock is ahead of true time
        self.stops = 0  # the pauses not yet ended (two faults may stop it at once)
        self.tasks: dict[asyncio.Task[Any], None] = {}  # not done yet, in the order made
        # Random bytes and jitter: a stream of its own, from the seed and its identity.
        self.rng = random.Random(f"{sim.seed}:{name}:{host}:{pid}")
        # Its monotonic clock runs with the loop's, from an origin of its own:
        # the library times its timers on loop.time() and judges validity on
        # the world's clock, and must never compare a time of one with the other's.
        self.origin = self.rng.uniform(-100_000.0, 100_000.0)
        self.world = World(
            monotonic=self._monotonic,
            time_ns=self._time_ns,
            token_bytes=self.rng.randbytes,
            rng=self.rng,
            hostname=lambda: host,
            getpid=lambda: pid,
            getaddrinfo=_no_names,
        )
        self.context = _world.context(self.world)
        self.context.run(PROCESS.set, self)
        # The lean driver from URLs; or redis-py clients, made (and so
        # connecting) in the process's world, passed in and closed by aclose().
        self.clients: list[Redis] = []
        if driver == "redis-py":
            where = [(server.ip, server.port) for server in sim.servers]
            self.clients = self.context.run(
                lambda: [Redis(host=ip, port=port) for ip, port in where]
            )
        nodes = self.clients or sim.urls
        self.redlock: Redlock = self.context.run(Redlock, nodes, **redlock_options)

    def __repr__(self) -> str:
        state = "dead" if self.dead else "closed" if self.closed else "running"
        return f"<SimProcess {self.name} {self.host}:{self.pid} {state}>"

    def _monotonic(self) -> float:
        return self.sim.loop._now + self.origin

    def _time_ns(self) -> int:
        return self.sim.wall_ns(self.wall_offset)

    def step_wall(self, seconds: float) -> None:
        """Step this process's wall clock by ``seconds`` (an operator, NTP): its
        monotonic clock - the one validity is judged by - does not move."""
        self.wall_offset += seconds

    # Tasks.

    def adopt(self, task: asyncio.Task[Any]) -> None:
        self.tasks[task] = None
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self.tasks.pop(task, None)

    def spawn(self, coro: Coroutine[Any, Any, _T], name: str | None = None) -> asyncio.Task[_T]:
        """Run ``coro`` as a task of this process."""
        if self.dead:
            coro.close()
            raise RuntimeError(f"{self!r} cannot start anything")
        return self.sim.loop.create_task(coro, name=name, context=self.context)

    def pause(self) -> None:
        """Stop the process (SIGSTOP, a long GC pause): none of its code runs, its
        timers and the bytes that reach it wait; the world's clocks go on."""
        self.stops += 1
        self.sim.loop.pause(self)

    def resume(self) -> None:
        """End one pause; when none is left, go on: what fell due while it was
        paused runs now, in order. A process stalled in its own code (a long
        computation) and stopped from outside besides runs again only when
        both are over (seed 10049: the stop's end let it run mid-stall, and
        the history said it was told of a loss while it could not run)."""
        self.stops = max(0, self.stops - 1)
        if not self.stops:
            self.sim.loop.resume(self)

    # Ends.

    def crash(self) -> None:
        """Kill the process: its tasks, callbacks and timers never run again (no
        cleanup of the library's runs); the kernel closes its connections."""
        if self.dead:
            return
        self.dead = True
        self.sim.loop.bury(self)
        self.sim.net.drop_process(self)

    async def aclose(self) -> None:
        """The orderly end: ``redlock.aclose()``, run as the process's own code."""
        await self.spawn(self.redlock.aclose())
        for client in self.clients:
            await self.spawn(client.aclose())
        self.closed = True

    def bury_tasks(self) -> None:
        """After the run: end the coroutines a crash left suspended, so that none is
        finished by the garbage collector later (``finally`` blocks, warnings).
        The process is dead, so nothing they do reaches the loop or the network."""
        assert self.dead
        for _ in range(100):  # what they start while closing is closed next round
            left = list(self.tasks)
            self.tasks.clear()
            if not left:
                return
            for task in left:
                task._log_destroy_pending = False  # type: ignore[attr-defined]
                coro = task.get_coro()
                for _ in range(100):
                    if getattr(coro, "cr_frame", None) is None:
                        break
                    with contextlib.suppress(BaseException):
                        coro.close()
