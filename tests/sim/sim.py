"""One simulation run: a virtual-time loop, a network, nodes and client processes, from a seed.

Everything random in a run derives from its seed: the network's jitter
(``net:<seed>``), each process's tokens and jitter (``<seed>:<name>:...``),
and whatever the workload draws from :attr:`Simulation.rng`. Nothing reads
the real clock, the real randomness or the network, so a run is a pure
function of its seed: :meth:`Simulation.fingerprint` - a hash of every
command every node ran, with its virtual time and reply - is the same byte
for byte each time the same seed runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import random
import sys
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

from .clock import Clock
from .loop import SimLoop
from .net import RESP, Codec, Network, NodeLike, Server
from .node import SimNode
from .process import Driver, SimProcess

__all__ = ["EPOCH_NS", "Simulation", "real_io_seen"]

_T = TypeVar("_T")

EPOCH_NS = 1_767_225_600 * 10**9
"""True wall-clock time at the start of every run (2026-01-01, UTC)."""

NodeFactory = Callable[[int, Callable[[], int]], NodeLike]
"""Makes node ``i`` over a clock giving true wall-clock time in ms."""


def sim_nodes(seed: int) -> NodeFactory:
    """SimNodes on true time (no drift), their ids from ``seed``."""

    def make(index: int, true_ms: Callable[[], int]) -> NodeLike:
        return SimNode(Clock(true_ms), seed=seed * 1000 + index)

    return make


class Simulation:
    """A run: ``nodes`` nodes at 10.0.0.1, 10.0.0.2..., and processes made by :meth:`spawn`."""

    def __init__(
        self,
        seed: int,
        *,
        nodes: int = 3,
        make_node: NodeFactory | None = None,
        codec: Codec = RESP,
        latency: float = 0.0002,
        jitter: float = 0.0002,
        start: float = 1000.0,
    ) -> None:
        self.seed = seed
        self.loop = SimLoop(start)
        self.start = start
        self.rng = random.Random(f"workload:{seed}")  # the workload's choices
        self.net = Network(self.loop, random.Random(f"net:{seed}"), codec, latency=latency,
                           jitter=jitter)  # fmt: skip
        self.servers: list[Server] = []
        for index in range(nodes):
            node = (make_node or sim_nodes(seed))(index, self.true_ms)
            self.servers.append(self.net.add(f"n{index + 1}", f"10.0.0.{index + 1}", node))
        self.urls = [f"redis://{server.ip}:{server.port}/0" for server in self.servers]
        self.processes: list[SimProcess] = []
        self._hosts = itertools.count(1)
        self._pids = itertools.count(1000 + random.Random(f"pids:{seed}").randrange(30000), 7)

    # Clocks.

    def true_ms(self) -> int:
        """True wall-clock time now, in ms (a node's clock before any drift)."""
        # wall_ns() // 1_000_000, inline: every command a node runs reads it
        return (EPOCH_NS + round((self.loop._now - self.start) * 1e9)) // 1_000_000

    def wall_ns(self, offset: float = 0.0) -> int:
        """True wall-clock time now (plus ``offset`` seconds), in ns."""
        return EPOCH_NS + round((self.loop.time() - self.start + offset) * 1e9)

    # Processes.

    def spawn(
        self, host: str | None = None, driver: Driver = "lean", **redlock_options: Any
    ) -> SimProcess:
        """A new process (on a new host ``sim-hostN`` unless ``host`` is given, with
        a new pid) with its own Redlock over every node, through ``driver``."""
        number = next(self._hosts)
        host = host or f"sim-host{number}"
        pid = next(self._pids)
        process = SimProcess(self, f"p{number}", host, pid, driver, **redlock_options)
        self.processes.append(process)
        return process

    # Running.

    def run(self, main: Coroutine[Any, Any, _T]) -> _T:
        """Run ``main`` (the simulation's own code, no process's) to completion."""
        with _no_real_io():
            return self.loop.run_until_complete(main)

    def fingerprint(self) -> str:
        """A hash of every command every node ran, with its virtual time and reply."""
        digest = hashlib.sha256()
        for line in self.net.trace:
            digest.update(line.encode("utf-8", "backslashreplace") + b"\n")
        return digest.hexdigest()

    def close(self) -> None:
        """End the run: what live processes still run is cancelled (as
        ``asyncio.run`` does), what crashed ones left is buried; the loop closes."""
        loop = self.loop
        try:
            buried = {task for process in self.processes if process.dead for task in process.tasks}
            left = [task for task in asyncio.all_tasks(loop) if task not in buried]
            for task in left:
                task.cancel()
            if left:
                self.run(asyncio.wait(left))
            for process in self.processes:
                if process.dead:
                    process.bury_tasks()
        finally:
            loop.close()


# Real socket use while a run is on the loop: recorded by an audit hook (one
# per interpreter: hooks cannot be removed), looked at by real_io_seen().
_WATCHED = frozenset({"socket.__new__", "socket.connect", "socket.getaddrinfo", "socket.bind"})
_watch: dict[str, Any] = {"active": False, "installed": False, "seen": []}


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _watch["active"] and event in _WATCHED:
        _watch["seen"].append(f"{event}{args!r}")


@contextlib.contextmanager
def _no_real_io() -> Iterator[None]:
    if not _watch["installed"]:
        sys.addaudithook(_audit)
        _watch["installed"] = True
    _watch["active"] = True
    try:
        yield
    finally:
        _watch["active"] = False


def real_io_seen() -> list[str]:
    """Every real socket event seen while a simulation ran (there should be none)."""
    return list(_watch["seen"])
