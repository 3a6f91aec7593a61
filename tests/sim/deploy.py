"""One seed's deployment: nodes, processes, the mixed workload, the nemesis, a history.

:func:`simulate` is a pure function of its seed (and of the fault kinds and
the planted bug, if any): everything - how many nodes, the processes and
their ttls, every fault, every token - is drawn from it. The run's parts,
on virtual time:

- ``0 .. faults_start``: the restart rule's own schedule, once per kind of
  data loss (``episode.py``), on a healthy cluster with no worker yet: a
  planted bug in the rule is caught in a seed's first grants;
- ``faults_start - WARM .. faults_start``: the workers' workload on a healthy
  cluster: the waiting checkers (a free name taken at once, a writer let in
  past a stream of readers) judge only where a process reaches a healthy
  majority, which the nemesis rarely leaves it for long. The burst process
  starts with them (``burst``), and a slow majority as its burst goes out;
- ``faults_start .. faults_end``: the workload under the nemesis's faults;
- ``faults_end .. end``: the workload on a healed cluster, long enough for
  every key written under faults to expire (``tail``);
- after ``end``: the processes finish and close their Redlocks; ``bound``
  seconds later, every lock key left on a node is written to the history
  (``no_keys_left``), and the counter's final value (``no_lost_updates``).

With ``observe`` (the liveness checkers of ``liveness.py`` need it) a
sampler writes when a process's ``Redlock`` stops or starts counting a
node's votes (``out``/``in`` events, key the node's index).
"""

from __future__ import annotations

import asyncio
import contextvars
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from redlock_async import Redlock
from redlock_async._engine._epochs import Epochs

from ..faults.history import ACQUIRE_OPS, Event
from .clock import Clock
from .episode import EPISODES_TIME, LONGEST_TTL, restart_episodes
from .faults import Fault
from .mixed import COUNTERS, SIM_MIX, Board, Recorder, Resource, SimMixed, start_mixed
from .nemesis import Nemesis
from .node import SimNode
from .process import SimProcess
from .sim import Simulation

__all__ = ["Deployment", "Outcome", "kept_out", "simulate"]

TTLS = (0.5, 1.0, 2.0, 3.0, 5.0)
"""The processes' ttls, drawn per process: restarts across processes with different ttls."""


WARM = 10.0
"""The workers' fault-free start, seconds (see the module docstring)."""

BURST = "b0"
"""The burst process's name in the history (see :meth:`Deployment.burst`)."""
BURST_NODE_TIMEOUT = 1.0  # its Redlock's: replies come 0.9 s after the send, in time
BURST_DELAY = 0.45  # one way, on each of its paths
BURST_SIZE = 4500  # acquires in one gather: more than four rounds of 1,024 slots
BURST_SLOW = 14.0  # the slow majority as its burst goes out, seconds: past 2 V + node_timeout


@dataclass
class Outcome:
    """What one seed's deployment did: its history and its figures."""

    seed: int
    events: list[Event]
    nodes: int
    grants: int
    faults: dict[str, int]
    refused: int
    simulated: float
    ttls: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class _Worker:
    __slots__ = ("index", "main", "mixed", "process", "ttl")

    def __init__(self, index: int, process: SimProcess, ttl: float) -> None:
        self.index = index
        self.process = process
        self.ttl = ttl
        self.mixed: SimMixed | None = None
        self.main: asyncio.Task[None] | None = None


class Deployment:
    """The cluster, its processes and its nemesis for one seed (see the module docstring)."""

    def __init__(
        self,
        seed: int,
        kinds: Sequence[str],
        *,
        observe: bool = False,
        minutes: float = 2.0,
        trace: bool = False,
    ) -> None:
        self.seed = seed
        rng = self.rng = random.Random(f"deploy:{seed}")
        self.clocks: list[Clock] = []
        self.nodes: list[SimNode] = []
        self.sim = Simulation(seed, nodes=rng.choice((3, 3, 3, 3, 5)), make_node=self._make_node)
        self.sim.net.tracing = trace
        self.sim_context = contextvars.Context()  # no process's: the nemesis's timers
        self.recorder = Recorder(self.sim)
        self.board = Board(self.sim)
        self.resource = Resource()
        self.workers: list[_Worker] = []
        self.longest_ttl = LONGEST_TTL
        self.faults_start = self.sim.loop.time() + EPISODES_TIME + WARM
        self.faults_end = self.faults_start + rng.uniform(0.75, 1.25) * minutes * 60
        # The tail: every key written under faults expires (a leaked one is
        # then a key left), past the longest hold a loss can cost.
        self.end = self.faults_end + 1.25 * LONGEST_TTL + 3.0
        self.bound = 2.0
        self.observe = observe
        self.nemesis = Nemesis(self, random.Random(f"nemesis:{seed}"), kinds)
        self.errors: list[str] = []
        self.stalled: dict[int, float] = {}  # worker -> when its stall in an acquire began
        self.stream_hosts: dict[str, int] = {}  # "readers", "writer" -> worker
        self.resumed: dict[int, float] = {}  # worker -> when it last resumed from a stop

    def _make_node(self, index: int, true_ms: Callable[[], int]) -> SimNode:
        clock = Clock(true_ms)
        node = SimNode(clock, seed=self.seed * 1000 + index, journal=256)
        self.clocks.append(clock)
        self.nodes.append(node)
        return node

    # -- processes ---------------------------------------------------------

    def start_worker(self) -> _Worker:
        index = len(self.workers)
        ttl = self.rng.choice(TTLS)
        worker = _Worker(index, self.sim.spawn(), ttl)
        self.workers.append(worker)
        # The read-write stream on r2 (mixed.py): its writer in one process, its
        # readers in another; a crash's replacement takes over what died with
        # it, so the stream lasts the run (one role per process).
        role = next((r for r in ("writer", "readers") if self._stream_host_gone(r)), None)
        if role is not None:
            self.stream_hosts[role] = index
        config: dict[str, Any] = {
            "name": f"w{index}",
            "seed": self.rng.randrange(2**32),
            "ttl": ttl,
            "duration": self.end - self.sim.loop.time(),
            "worker": index,
            "limit": 3,
            "cancel_share": 0.1,
            "clock": self.sim.loop.time,
            "direct_urls": self.sim.urls,
            "mix": {**SIM_MIX, "fenced_ttl": LONGEST_TTL},
            "stream_readers": role == "readers",
            "stream_writer": role == "writer",
        }

        def made(mixed: SimMixed) -> None:
            worker.mixed = mixed

        worker.main = worker.process.spawn(
            start_mixed(worker.process, config, self.recorder, self.board, self.resource, made)
        )
        return worker

    def _stream_host_gone(self, role: str) -> bool:
        host = self.stream_hosts.get(role)
        return host is None or self.workers[host].process.dead

    def process(self, worker: int) -> SimProcess:
        return self.workers[worker].process

    def live_workers(self) -> list[int]:
        return [w.index for w in self.workers if not w.process.dead]

    def crash(self, worker: int) -> None:
        process = self.workers[worker].process
        process.crash()
        self.nemesis.end_pauses(worker)
        began = self.stalled.pop(worker, None)
        if began is not None:  # stopped since: it could not act from then on
            now = self.sim.loop.time()
            self.recorder.add(f"w{worker}", "lag", "loop", value=round((now - began) * 1000))
        self.recorder.crashed(f"w{worker}")

    def replace(self, fault: Fault) -> None:
        """A crashed process's successor: a new process, which saw nothing before."""
        if self.sim.loop.time() < self.end - 1.0:
            worker = self.start_worker()
            self.nemesis.cut_newcomer(worker.index)

    def arm_stall(self, worker: int, fault: Fault) -> None:
        mixed = self.workers[worker].mixed
        if mixed is not None and not self.workers[worker].process.dead:
            mixed.trap = lambda: self.stall(worker, fault)

    def stall(self, worker: int, armed: Fault) -> None:
        """``w<worker>`` stops now, for the armed fault's duration (a ``lag`` when
        it resumes, as the fault tier's loops report their stalls)."""
        loop = self.sim.loop
        process = self.process(worker)
        mixed = self.workers[worker].mixed
        if self.resumed.get(worker) == loop.time() and mixed is not None:
            # It resumes from a stop at this very instant: a stall now would make
            # one stop of the two, which no process notices in between (nor do
            # the checkers, which end its renewed claims when the last began).
            # At its next grant instead.
            mixed.trap = lambda: self.stall(worker, armed)
            return
        fault = Fault(armed.id, armed.kind, loop.time(), armed.duration, (), (worker,))
        self.record_fault("fault", fault)
        self.stalled[worker] = fault.at
        process.pause()

        def resume() -> None:
            if self.stalled.pop(worker, None) is not None:
                self.resumed[worker] = loop.time()
                process.resume()
                self.recorder.add(f"w{worker}", "lag", "loop", value=round(fault.duration * 1000))
                self.record_fault("heal", fault)

        loop.call_later(fault.duration, resume, context=self.sim_context)

    def close_redlock(self, worker: int) -> None:
        mixed = self.workers[worker].mixed
        if mixed is not None and not self.workers[worker].process.dead:
            mixed.close_redlock()

    def counted_by_all(self, node: int) -> bool:
        """Whether every live process's Redlock counts ``node``'s votes now
        (a paused one has not noticed anything: not yet)."""
        for worker in self.workers:
            if worker.process.dead or worker.mixed is None:
                continue
            if self.sim.loop._frozen.get(worker.process) is not None:
                return False
            if node in kept_out(worker.mixed.redlock, self.sim.loop.time()):
                return False
        return True

    def record_fault(self, what: str, fault: Fault) -> None:
        self.recorder.add("nemesis", what, fault.kind, detail=fault.detail())

    # -- the run -----------------------------------------------------------

    async def main(self) -> None:
        loop = self.sim.loop
        self.recorder.add("sim", "nodes", "cluster", value=len(self.sim.servers))
        sampler = asyncio.ensure_future(self.sample()) if self.observe else None
        # First the restart episodes, and the hoard beside them, alone: no
        # worker's grant writes the record of a view a census must find on
        # the node that answers it last (episode.py). Idle virtual time
        # costs nothing.
        hoarder = self.sim.spawn()
        hoard = hoarder.spawn(self.hoard())
        await restart_episodes(self)
        await hoard
        await asyncio.sleep(max(0.0, self.faults_start - WARM - loop.time()))
        for _ in range(self.rng.randint(3, 5)):
            self.start_worker()
        burst = asyncio.ensure_future(self.burst())
        await asyncio.sleep(max(0.0, self.faults_start - loop.time()))
        nemesis = asyncio.ensure_future(self.nemesis.run(self.faults_end))
        await nemesis
        await burst
        await asyncio.sleep(self.end - loop.time())
        mains = [w.main for w in self.workers if w.main is not None and not w.process.dead]
        if mains:
            await asyncio.wait(mains, timeout=120)
        if sampler is not None:
            sampler.cancel()
        await asyncio.sleep(self.bound)
        self.keys_left()
        for name in COUNTERS:
            value = self.resource.counters.get(name, 0)
            self.recorder.add("sim", "read", "read", key=name, value=value)

    async def burst(self) -> None:
        """Volume: a process whose acquires fill every admission slot for seconds.

        With the workers, a process starts (``b0``; no fault is aimed at it,
        those of every process reach it, from the faulted part on: its burst
        spans the two) whose paths to the nodes
        are slow - each reply 0.9 s after its command, inside its node_timeout
        of 1 s (the fault tier's mixed-acquire-burst) - and takes, in one
        ``gather``, :data:`BURST_SIZE` acquires (timeout 10 s) on names of its
        own: four rounds and more of 1,024 attempts in flight. Meanwhile its
        stream of acquires on other names, with timeout 0.3 s and
        ``blocking=False`` in turn, must each return within its bound
        (``call_bounds``): a deadline and the one-shots' reserve let them
        past the line, not four rounds behind it. As its burst goes out (or as
        soon after as the model allows), a majority of the nodes turns slow
        for :data:`BURST_SLOW` s: the burst's backlog, answered a bit at a
        time, must cost each of its votes at most their bound (V: 5 s), not
        the whole backlog, which takes longer than its one-shots' bound.
        """
        loop = self.sim.loop
        rng = random.Random(f"burst:{self.seed}")
        process = self.sim.spawn()
        for path in self.sim.net.paths_between(
            [process.name], [server.name for server in self.sim.servers]
        ):
            path.latency, path.jitter = BURST_DELAY, 0.0  # fmt: skip
        config: dict[str, Any] = {
            "name": BURST,
            "seed": rng.randrange(2**32),
            "ttl": 3.0,
            "duration": 9.0,
            "worker": 0,
            "limit": 3,
            "clock": loop.time,
            "direct_urls": self.sim.urls,
            "redlock": {"node_timeout": BURST_NODE_TIMEOUT},
            "mix": {
                **SIM_MIX,
                "roles": ["volume"],
                # Its Redlock's two censuses (a round trip each) come first.
                "burst_at": 4.0,
                "burst_size": BURST_SIZE,
                "burst_timeout": 10.0,
                "stream_every": 0.05,
                "stream_timeouts": (0.0, 0.3),
            },
        }
        main = process.spawn(
            start_mixed(process, config, self.recorder, self.board, self.resource, lambda _: None)
        )
        await asyncio.sleep(config["mix"]["burst_at"])  # its burst goes out now
        for _ in range(8):  # another fault, or a loss's window, may be on: a while later
            if self.nemesis.slow_majority(BURST_SLOW):
                break
            await asyncio.sleep(0.25)
        await asyncio.wait([main], timeout=50.0)

    async def hoard(self, count: int = 300) -> None:
        """Grants on one node (ttl 90 s, longer than the run has left), taken in one
        ``gather`` and released in one: each release must reach the node, or its
        key is left (the fault tier's hoard, smaller). The last node: the
        restart episodes (``episode.py``), meanwhile, empty the first."""
        # A prefix of its own: a Redlock over other nodes on the same prefix would
        # keep the others' nodes out (docs/guarantees.md: "a prefix each").
        straight = Redlock(self.sim.urls[-1:], prefix="hoard:")
        locks = [straight.lock(f"hoard:{i}", ttl=90.0, auto_extend=False) for i in range(count)]
        got = await asyncio.gather(*(lock.acquire(timeout=5.0) for lock in locks),
                                   return_exceptions=True)  # fmt: skip
        held = [lock for lock, ok in zip(locks, got, strict=True) if ok is True]
        await asyncio.sleep(1.0)
        await asyncio.gather(*(lock.release() for lock in held), return_exceptions=True)
        await straight.aclose()
        # Judged now, not at the end (the keys would still be there): a
        # dropped release shows within the seed's first grants.
        await asyncio.sleep(self.bound)
        self.keys_left(hoard=True)

    def keys_left(self, *, hoard: bool = False) -> None:
        """Every lock key left on a node, as ``key left`` events: the hoard's
        (``hoard``) when it is done, when the seed ends the rest."""
        found: list[tuple[int, str, str, int]] = []
        seen = f", seen at {self.sim.loop.time():.3f}" if hoard else ""
        for index, node in enumerate(self.nodes):
            if self.sim.servers[index].stopped:
                continue
            now = node.clock()
            db = node.dbs[0]
            for key in sorted(db.live_keys(now)):
                if b"~epoch" in key or key.endswith((b":fence", b":rwfence")):
                    continue
                if key.startswith(b"hoard:") != hoard:
                    continue
                value = db.data[key]
                token = value.decode(errors="replace") if isinstance(value, bytes) else ""
                at = db.expires.get(key)
                pttl = -1 if at is None else at - now
                found.append((index, key.decode(errors="replace"), token, pttl))
        if not hoard:  # the count the checker reads: the last one's
            self.recorder.add("sim", "keys", "left", value=len(found), detail="")
        for index, name, token, pttl in found:
            self.recorder.add("sim", "key", "left", key=name, token=token,
                              detail=f"node {index} pttl {pttl} ms{seen}")  # fmt: skip

    async def sample(self, every: float = 0.1) -> None:
        """``out``/``in`` events when a process's Redlock stops or starts
        counting a node (its view, its restart watch)."""
        was: dict[int, dict[int, str]] = {}
        while True:
            for worker in self.workers:
                if worker.process.dead or worker.mixed is None:
                    continue
                now = kept_out(worker.mixed.redlock, self.sim.loop.time())
                before = was.get(worker.index, {})
                for node in sorted(set(now) | set(before)):
                    if node in now and node not in before:
                        self.recorder.add(f"w{worker.index}", "out", "node", key=str(node),
                                          detail=now[node])  # fmt: skip
                    elif node in before and node not in now:
                        self.recorder.add(f"w{worker.index}", "in", "node", key=str(node))
                was[worker.index] = now
            await asyncio.sleep(every)


def kept_out(redlock: Redlock, now: float) -> dict[int, str]:
    """The nodes whose yes votes ``redlock`` does not count at loop time ``now``
    (its restart watches' clock),
    and why: out of its view (``view``), or quarantined or held (``watch``).
    Empty before its first census (it has counted nothing yet)."""
    engine = redlock._core
    epochs = engine.epochs
    if not isinstance(epochs, Epochs) or not epochs.ready:  # a cluster's slots: not sampled
        return {}
    out: dict[int, str] = {}
    watches = engine._quorum.watches
    for index, epoch in enumerate(epochs.ids):
        if epoch is None:
            out[index] = "view"
        elif watches is not None:
            watch = watches[index]
            if watch is not None and watch.until > now:
                out[index] = "watch"
    return out


def simulate(
    seed: int, kinds: Sequence[str], *, observe: bool = False, minutes: float = 2.0
) -> Outcome:
    """Run seed ``seed``'s deployment; its history and figures."""
    dep = Deployment(seed, kinds, observe=observe, minutes=minutes)
    sim = dep.sim
    try:
        sim.run(dep.main())
        errors = [str(error.get("message", error)) for error in sim.loop.errors]
    finally:
        sim.close()
    events = dep.recorder.events
    grants = len({(e.process, e.token) for e in events if e.kind == "ok" and e.op in ACQUIRE_OPS})
    return Outcome(
        seed=seed,
        events=events,
        nodes=len(sim.servers),
        grants=grants,
        faults=dict(dep.nemesis.counts),
        refused=dep.nemesis.refused,
        simulated=dep.end - sim.start,
        ttls=[w.ttl for w in dep.workers],
        errors=errors,
    )
