"""The simulation's nemesis: faults drawn from the seed, never outside the model.

It runs as the simulation's own code (no process owns it), drawing a fault
every few virtual seconds: its kind (``faults.py``), whom it hits, for how
long. Before applying one it asks :meth:`Nemesis.allowed`, which keeps to
the documented model (``docs/guarantees.md``, "Restarted nodes"):

- a node that lost its data is faulty until its yes votes count again: at
  least :func:`~tests.faults.bounds.restart_out` after it is back, and until
  every live process's ``Redlock`` counts it (a paused process has not
  noticed yet, so not while one is paused);
- at any moment, for every process, the nodes silent to it (down, paused,
  slow, cut off from it) and those faulty that way are at most a minority -
  whenever some node is in such a window. Without one, partitions of any
  shape are within the model (safety never needed a majority up), so they
  are drawn freely; most keep a majority healthy for each process, so
  grants go on;
- a majority never loses data at once; node clocks drift by less than
  ``drift_factor``; one fault per node, and per path, at a time.

Faults the model forbids are not generated (the draw is skipped: counted in
``refused``). Each applied fault's heal is a timer; heals of one kind come in
the order the faults came (the fault tier pairs them that way).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ..faults.bounds import restart_out
from .faults import KINDS, Fault, Kind

if TYPE_CHECKING:
    from .deploy import Deployment

__all__ = ["DEFAULT_KINDS", "Nemesis"]

DEFAULT_KINDS = tuple(name for name, kind in KINDS.items() if not kind.pending)
"""The kinds the code as it stands is expected to pass under."""

DRIFT_FACTOR = 0.01  # the library's default (Redlock(drift_factor=...))


class Nemesis:
    """Draws and applies faults on one deployment (see the module docstring)."""

    def __init__(
        self, dep: Deployment, rng: random.Random, kinds: Sequence[str], *, every: float = 0.45
    ) -> None:
        # ``every``: the mean time between draws, seconds (0.5 made about 9
        # faults per thousand grants; the goal is 10).
        self.dep = dep
        self.rng = rng
        self.kinds = list(kinds)
        # A loss of data keeps the others' silencing faults away while its
        # grants may be valid (seconds): drawn less often, so the rest come.
        self.weights = [
            0.25 if KINDS[name].loses_data and not KINDS[name].pending else 1.0
            for name in self.kinds
        ]
        self.every = every
        self.ids = 0
        self.active: dict[int, tuple[Fault, Kind]] = {}
        self.losses: dict[int, float] = {}  # node -> the earliest its window may end
        self.last_heal: dict[str, float] = {}
        self.counts: dict[str, int] = {}
        self.refused = 0
        self.over = False  # drawing ended: the tail is fault-free
        self._heals: dict[int, tuple[asyncio.TimerHandle, Callable[[], None]]] = {}

    @property
    def minority(self) -> int:
        return (len(self.dep.sim.servers) - 1) // 2

    # -- the model ---------------------------------------------------------

    def silent_to(self, worker: int, extra: tuple[Fault, Kind] | None = None) -> set[int]:
        found: set[int] = set()
        for fault, kind in [*self.active.values(), *([extra] if extra else [])]:
            if kind.silences and (kind.scope == "node" or worker in fault.workers):
                found.update(fault.nodes)
        return found

    def losing(self) -> set[int]:
        """Nodes that lost data and may not count for every process yet."""
        now = self.dep.sim.loop.time()
        for node, earliest in list(self.losses.items()):
            if now >= earliest and self.dep.counted_by_all(node):
                del self.losses[node]
        return set(self.losses)

    def allowed(self, fault: Fault, kind: Kind, *, free: bool) -> bool:
        """Whether ``fault`` keeps to the model (and, unless ``free``, leaves
        each process a healthy majority)."""
        losses = self.losing()
        if kind.loses_data:
            losses |= set(fault.nodes)
            if len(losses) > self.minority:
                return False
        for worker in self.dep.live_workers():
            silent = self.silent_to(worker, (fault, kind))
            if losses and len(silent | losses) > self.minority:
                return False
            # (What this fault adds: a process left short by an earlier one
            # does not keep every other fault away.)
            if not free and len(silent) > self.minority and silent != self.silent_to(worker):
                return False
        return True

    def busy(self, fault: Fault, kind: Kind) -> bool:
        """One fault at a time per node (node kinds) and per path."""
        for other, other_kind in self.active.values():
            if not set(fault.nodes) & set(other.nodes):
                continue
            if kind.scope == "node" and other_kind.scope == "node":
                return True
            paths = kind.scope == "path" and other_kind.scope == "path"
            if paths and set(fault.workers) & set(other.workers):
                return True
        return any(self.dep.sim.servers[n].stopped for n in fault.nodes)

    # -- drawing -----------------------------------------------------------

    async def run(self, until: float) -> None:
        """Draw faults until virtual time ``until``; then heal what is still on."""
        loop = self.dep.sim.loop
        while True:
            await asyncio.sleep(self.rng.expovariate(1.0 / self.every))
            if loop.time() >= until:
                break
            self.draw()
        self.over = True
        for ident in sorted(self._heals):  # in the order they came: FIFO per kind
            timer, heal = self._heals[ident]
            timer.cancel()
            self._heal(self.active[ident][0], heal)

    def draw(self, tries: int = 5) -> Fault | None:
        for _ in range(tries):
            kind = KINDS[self.rng.choices(self.kinds, self.weights)[0]]
            fault = self.shape(kind)
            if fault is None:
                continue
            # Now and then a process may lose its healthy majority: always for
            # a slow majority (a backlog answered a bit at a time: the votes'
            # bound, not the model, is what it is about).
            free = self.rng.random() < 0.1 or kind.name == "slow-majority"
            if self.busy(fault, kind) or not self.allowed(fault, kind, free=free):
                self.refused += 1
                continue
            self.apply(fault, kind)
            return fault
        return None

    def shape(self, kind: Kind) -> Fault | None:
        """Whom ``kind`` hits, for how long, how hard: drawn from the seed."""
        rng = self.rng
        dep = self.dep
        nodes = len(dep.sim.servers)
        workers = dep.live_workers()
        if not workers:
            return None
        self.ids += 1
        name = kind.name
        duration = 0.0
        amount = 0.0
        hit_nodes: tuple[int, ...] = (rng.randrange(nodes),)
        hit_workers: tuple[int, ...] = ()
        if kind.scope == "path":
            hit_workers = tuple(sorted(rng.sample(workers, rng.randint(1, len(workers)))))
            if name.startswith("partition"):
                hit_nodes = tuple(sorted(rng.sample(range(nodes), rng.randint(1, nodes - 1))))
        elif name == "slow-majority":
            hit_nodes = tuple(sorted(rng.sample(range(nodes), nodes // 2 + 1)))
        elif kind.scope == "process":
            hit_nodes = ()
            hit_workers = (rng.choice(workers),)
            if name == "crash-process" and len(workers) < 3:
                return None
        if name in ("restart-node-empty", "restart-aof-prefix", "promote-replica",
                    "restart-node-whole"):  # fmt: skip
            duration = rng.choice((0.0, rng.uniform(0.0, 3.0)))
            amount = rng.randint(1, 20)  # write units an AOF or a replica lacks
        elif name == "evict":
            amount = rng.randint(1, 5)
        elif name in ("pause-node", "pause-worker", "pause-in-acquire"):
            duration = rng.uniform(0.05, 2.0)
        elif name in ("slow-node", "slow-majority"):
            # Slow but steady (under node_timeout a command) or slower, while
            # commands queue up behind: a backlog answered a bit at a time.
            duration, amount = rng.uniform(0.5, 5.0), rng.uniform(0.002, 0.045)
        elif name == "node-drift":
            rate = rng.uniform(0.1, 0.9) * DRIFT_FACTOR  # within the documented factor
            duration, amount = rng.uniform(2.0, 15.0), 1.0 + rng.choice((-rate, rate))
        elif name == "delay":
            duration, amount = rng.uniform(0.5, 3.0), rng.uniform(0.001, 0.015)
        elif name == "stall":
            duration, hit_workers = rng.uniform(0.05, 1.0), hit_workers[:1]
        elif name in ("blackhole", "refuse", "drop-replies"):
            duration = rng.uniform(0.2, 2.0)
        elif name.startswith("partition"):
            duration = rng.uniform(0.3, 3.0)
        elif name == "crash-process":
            duration = rng.uniform(0.0, 5.0)  # until its replacement starts
        elif name == "wall-step":
            amount = rng.choice((-1.0, 1.0)) * rng.uniform(1.0, 3600.0)
        now = self.dep.sim.loop.time()
        # Heals of one kind in the order the faults came (the fault tier pairs
        # them so); a deferred fault's come when it happens.
        if not kind.deferred:
            duration = max(duration, self.last_heal.get(name, now) - now)
        return Fault(self.ids, name, now, duration, hit_nodes, hit_workers, amount)

    def apply(self, fault: Fault, kind: Kind) -> None:
        dep = self.dep
        if kind.deferred:  # armed: the deployment writes it when it happens
            kind.apply(dep, fault)
            self.counts[kind.name] = self.counts.get(kind.name, 0) + 1
            return
        dep.record_fault("fault", fault)
        heal = kind.apply(dep, fault)
        self.counts[kind.name] = self.counts.get(kind.name, 0) + 1
        loop = dep.sim.loop
        if kind.loses_data:
            for node in fault.nodes:
                back = fault.at + fault.duration
                self.losses[node] = max(self.losses.get(node, 0.0),
                                        restart_out(fault.at, back, dep.longest_ttl))  # fmt: skip
        self.last_heal[kind.name] = fault.at + fault.duration
        self.active[fault.id] = (fault, kind)
        timer = loop.call_later(fault.duration, self._heal, fault, heal, context=dep.sim_context)
        self._heals[fault.id] = (timer, heal)

    def _heal(self, fault: Fault, heal: Callable[[], None]) -> None:
        self._heals.pop(fault.id, None)
        self.active.pop(fault.id, None)
        heal()
        self.dep.record_fault("heal", fault)

    def end_pauses(self, worker: int) -> None:
        """``w<worker>`` crashed: a pause of it ends now (with a heal event, so
        the fault tier's rules end its claims when the pause began)."""
        for ident in sorted(self._heals):
            fault, kind = self.active[ident]
            if kind.name == "pause-worker" and worker in fault.workers:
                timer, heal = self._heals[ident]
                timer.cancel()
                self._heal(fault, heal)

    def slow_majority(self, duration: float) -> bool:
        """A slow majority now, for ``duration`` s, when the model allows it (the
        burst's, ``deploy.py``). Whether it came."""
        kind = KINDS["slow-majority"]
        if self.over or kind.name not in self.kinds:
            return True  # none will
        fault = self.shape(kind)
        if fault is None or self.busy(fault, kind) or not self.allowed(fault, kind, free=True):
            self.refused += 1
            return False
        # 15-30 ms a command: the burst's thousand attempts in flight take
        # longer to answer than the slowness lasts, its connection is never
        # silent for its node_timeout (1 s), and only each vote's own bound
        # ends its wait.
        amount = self.rng.uniform(0.015, 0.03)
        fault = Fault(fault.id, fault.kind, fault.at, max(fault.duration, duration),
                      fault.nodes, fault.workers, amount)  # fmt: skip
        self.apply(fault, kind)
        return True

    def cut_newcomer(self, worker: int) -> None:
        """A process starting while some node is out of its reach (the census at
        its start does not hear it): a partition of it alone, when allowed."""
        if self.over or "partition" not in self.kinds or self.rng.random() < 0.5:
            return
        kind = KINDS["partition"]
        self.ids += 1
        now = self.dep.sim.loop.time()
        node = self.rng.randrange(len(self.dep.sim.servers))
        duration = max(self.rng.uniform(0.5, 8.0), self.last_heal.get(kind.name, now) - now)
        fault = Fault(self.ids, kind.name, now, duration, (node,), (worker,))
        if not self.busy(fault, kind) and self.allowed(fault, kind, free=False):
            self.apply(fault, kind)
