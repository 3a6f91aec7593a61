"""What the simulation's nemesis can do: each fault kind, applied and healed.

A :class:`Fault` names its kind, when (virtual seconds), for how long, and
whom it hits: ``nodes`` (indices of the deployment's servers) and
``workers`` (indices of its processes, ``w<i>`` in the history). Each
:class:`Kind` says what it does to the model (``docs/guarantees.md``,
"Restarted nodes": a node that lost its data counts as faulty until its
yes votes count again; one that is down, paused, slow or cut off from a
process is silent to it) so that the nemesis (``nemesis.py``) never throws
more at the cluster than the model allows; and which kinds await the
restart rule's next version (``pending``, issue 40).

The history gets a ``fault`` event when one is applied and a ``heal`` when
it ends (kind ``nemesis``, op the kind, detail ``id=.. nodes=(..) workers=(..)``),
in the fault tier's vocabulary where it has the same kind
(``pause-node``, ``pause-worker``, ``restart-node-empty``, ...), so its
checkers read them as there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .deploy import Deployment

__all__ = ["KINDS", "Fault", "Kind", "heal_nothing"]


@dataclass(frozen=True, slots=True)
class Fault:
    """One fault: ``kind`` at virtual time ``at`` for ``duration`` seconds."""

    id: int
    kind: str
    at: float
    duration: float
    nodes: tuple[int, ...] = ()
    workers: tuple[int, ...] = ()
    amount: float = 0.0  # the kind's own figure: seconds, a rate, a count

    def detail(self) -> str:
        nodes = "".join(f"{n}," for n in self.nodes)
        workers = "".join(f"{w}," for w in self.workers)
        return f"id={self.id} nodes=({nodes}) workers=({workers}) amount={self.amount:g}"


Heal = Callable[[], None]
Apply = Callable[["Deployment", Fault], Heal]


def heal_nothing() -> None:
    """For faults that are over once made (a flush, a reset, a crash's heal)."""


@dataclass(frozen=True, slots=True)
class Kind:
    """A fault kind: what it hits, what it means for the model, how it is done."""

    name: str
    scope: str  # "node", "path" (workers x nodes) or "process"
    apply: Apply
    loses_data: bool = False  # the node forgets grants: faulty until it votes again
    restarts: bool = False  # a new server process (a new run_id)
    silences: bool = False  # its nodes are silent (to its workers, for a path fault)
    pending: bool = False  # awaits the restart rule's next version (issue 40)
    deferred: bool = False  # armed now, happens later: its events are written then


# -- nodes ------------------------------------------------------------------


def _restart(keep: str, *, replica: bool = False) -> Apply:
    def apply(dep: Deployment, fault: Fault) -> Heal:
        for index in fault.nodes:
            server = dep.sim.servers[index]
            node = dep.nodes[index]
            extra: dict[str, object] = {}
            if keep == "aof_prefix":
                extra["lost"] = max(1, int(fault.amount))
            if replica:  # up for an hour already: its uptime says nothing
                extra["started"] = node.clock() - 3_600_000
            server.restart(down_for=fault.duration, keep=keep, **extra)
        return heal_nothing

    return apply


def _flushall(dep: Deployment, fault: Fault) -> Heal:
    for index in fault.nodes:
        dep.nodes[index].flushall()
    return heal_nothing


def _evict(dep: Deployment, fault: Fault) -> Heal:
    # A node configured to evict is outside the model: the docs require
    # noeviction and the census flags such a node (docs/guarantees.md,
    # "Eviction"). What it evicted is written down: the grants it held are
    # not protected, and the judge leaves them out of the safety checks.
    for index in fault.nodes:
        for key, held in dep.nodes[index].evict("volatile-ttl", max(1, int(fault.amount))):
            dep.recorder.add("nemesis", "evicted", "key", key=key.decode("latin-1"),
                             detail=held.decode("latin-1"))  # fmt: skip
    return heal_nothing


def _pause_node(dep: Deployment, fault: Fault) -> Heal:
    servers = [dep.sim.servers[index] for index in fault.nodes]
    for server in servers:
        server.pause()

    def heal() -> None:
        for server in servers:
            server.resume()

    return heal


def _slow_node(dep: Deployment, fault: Fault) -> Heal:
    servers = [dep.sim.servers[index] for index in fault.nodes]
    for server in servers:
        server.service = fault.amount

    def heal() -> None:
        for server in servers:
            server.service = 0.0

    return heal


def _script_flush(dep: Deployment, fault: Fault) -> Heal:
    for index in fault.nodes:
        dep.nodes[index].flush_scripts()
    return heal_nothing


def _drift(dep: Deployment, fault: Fault) -> Heal:
    clocks = [dep.clocks[index] for index in fault.nodes]
    for clock in clocks:
        clock.set_rate(fault.amount)

    def heal() -> None:
        for clock in clocks:
            clock.set_rate(1.0)

    return heal


# -- paths --------------------------------------------------------------------


def _paths(dep: Deployment, fault: Fault) -> tuple[list[str], list[str]]:
    processes = [dep.process(w).name for w in fault.workers]
    nodes = [dep.sim.servers[n].name for n in fault.nodes]
    return processes, nodes


def _healer(dep: Deployment, processes: list[str], nodes: list[str]) -> Heal:
    return lambda: dep.sim.net.heal(processes, nodes)


def _delay(dep: Deployment, fault: Fault) -> Heal:
    processes, nodes = _paths(dep, fault)
    paths = dep.sim.net.paths_between(processes, nodes)
    for path in paths:
        path.latency, path.jitter = fault.amount, fault.amount / 2

    def heal() -> None:
        net = dep.sim.net
        for path in paths:
            path.latency, path.jitter = net.latency, net.jitter

    return heal


def _cut(*, up: bool = True, down: bool = True) -> Apply:
    def apply(dep: Deployment, fault: Fault) -> Heal:
        processes, nodes = _paths(dep, fault)
        dep.sim.net.cut(processes, nodes, up=up, down=down)
        return _healer(dep, processes, nodes)

    return apply


def _flag(name: str, *, reset: bool = False) -> Apply:
    def apply(dep: Deployment, fault: Fault) -> Heal:
        processes, nodes = _paths(dep, fault)
        net = dep.sim.net
        for path in net.paths_between(processes, nodes):
            setattr(path, name, True)
        if reset:  # open connections go too: a REJECT rule, not only new SYNs
            for process in processes:
                for node in nodes:
                    net.reset(process, node)
        return _healer(dep, processes, nodes)

    return apply


def _reset(dep: Deployment, fault: Fault) -> Heal:
    processes, nodes = _paths(dep, fault)
    for process in processes:
        for node in nodes:
            dep.sim.net.reset(process, node)
    return heal_nothing


# -- processes ----------------------------------------------------------------


def _crash(dep: Deployment, fault: Fault) -> Heal:
    for worker in fault.workers:
        dep.crash(worker)
    # Its replacement starts when the fault heals: a new process that saw
    # nothing of the nodes before.
    return lambda: dep.replace(fault)


def _pause_worker(dep: Deployment, fault: Fault) -> Heal:
    processes = [dep.process(w) for w in fault.workers]
    for process in processes:
        process.pause()

    def heal() -> None:
        for worker, process in zip(fault.workers, processes, strict=True):
            if not process.dead:
                dep.resumed[worker] = dep.sim.loop.time()
                process.resume()
                # Its loop ran this late: what the fault tier's bounds allow on top.
                dep.recorder.add(f"w{worker}", "lag", "loop", value=round(fault.duration * 1000))

    return heal


def _aclose(dep: Deployment, fault: Fault) -> Heal:
    for worker in fault.workers:
        dep.close_redlock(worker)
    return heal_nothing


def _arm_stall(dep: Deployment, fault: Fault) -> Heal:
    # The process stops right after its next granting fan-out went out (a GC
    # pause, SIGSTOP): the attempt's replies wait, its elapsed time grows.
    for worker in fault.workers:
        dep.arm_stall(worker, fault)
    return heal_nothing


def _wall_step(dep: Deployment, fault: Fault) -> Heal:
    for worker in fault.workers:
        dep.process(worker).step_wall(fault.amount)
    return heal_nothing


_KINDS = (
    # Nodes that lose data (the restart rule's business).
    Kind("restart-node-empty", "node", _restart("none"), loses_data=True, restarts=True,
         silences=True),
    Kind("flushall", "node", _flushall, loses_data=True),
    Kind("restart-aof-prefix", "node", _restart("aof_prefix"), loses_data=True, restarts=True,
         silences=True),
    Kind("promote-replica", "node", _restart("aof_prefix", replica=True), loses_data=True,
         restarts=True, silences=True),
    Kind("evict", "node", _evict, loses_data=True),
    # Nodes that lose nothing.
    Kind("restart-node-whole", "node", _restart("all"), restarts=True, silences=True),
    Kind("pause-node", "node", _pause_node, silences=True),
    Kind("slow-node", "node", _slow_node, silences=True),
    Kind("slow-majority", "node", _slow_node, silences=True),
    Kind("script-flush", "node", _script_flush),
    Kind("node-drift", "node", _drift),
    # Paths between processes and nodes.
    Kind("delay", "path", _delay),
    Kind("stall", "path", _cut(), silences=True),
    Kind("blackhole", "path", _flag("blackhole"), silences=True),
    Kind("reset", "path", _reset),
    Kind("refuse", "path", _flag("refuse", reset=True), silences=True),
    Kind("drop-replies", "path", _flag("drop_replies"), silences=True),
    Kind("partition", "path", _cut(), silences=True),
    Kind("partition-one-way", "path", _cut(down=False), silences=True),
    Kind("partition-replies-held", "path", _cut(up=False), silences=True),
    # Processes.
    Kind("crash-process", "process", _crash),
    Kind("pause-worker", "process", _pause_worker),
    Kind("pause-in-acquire", "process", _arm_stall, deferred=True),
    Kind("aclose", "process", _aclose),
    Kind("wall-step", "process", _wall_step),
)  # fmt: skip

KINDS: dict[str, Kind] = {kind.name: kind for kind in _KINDS}
"""Every fault kind, by name."""
