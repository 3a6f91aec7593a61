"""The nemesis: faults injected into nodes, the network and worker processes.

A schedule is a list of ``Fault``s at offsets from the start of a run. Each
fault is applied and, after its duration, healed, with both moments written
to the same history stream the workers write (process "nemesis").
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from redlock_async.testing import RedisServer

if TYPE_CHECKING:
    from .run import Cluster

__all__ = ["FAULTS", "Fault", "Nemesis", "staggered_loss"]


@dataclass(frozen=True)
class Fault:
    at: float  # seconds after the run starts
    kind: str  # a key of FAULTS
    duration: float = 1.0
    nodes: tuple[int, ...] = (0,)
    workers: tuple[int, ...] = ()  # for worker faults and partitions
    args: dict[str, float] = field(default_factory=dict)


Action = Callable[["Cluster", Fault], Callable[[], None]]


def _on_nodes(apply: str, undo: str | None) -> Action:
    """A process fault: ``apply`` on each node now, ``undo`` at the heal."""

    def act(cluster: Cluster, fault: Fault) -> Callable[[], None]:
        for i in fault.nodes:
            getattr(cluster.nodes[i], apply)()

        def heal() -> None:
            for i in fault.nodes:
                if undo is not None:
                    getattr(cluster.nodes[i], undo)()

        return heal

    return act


def _proxy(method: str) -> Action:
    def act(cluster: Cluster, fault: Fault) -> Callable[[], None]:
        for listener in cluster.listeners(fault.nodes, fault.workers):
            if method == "delay":
                args = fault.args
                listener.delay(
                    args.get("seconds", 0.05), args.get("jitter", 0.0), args.get("spacing", 0.0)
                )
            else:
                getattr(listener, method)()

        def heal() -> None:
            for listener in cluster.listeners(fault.nodes, fault.workers):
                listener.heal()

        return heal

    return act


def _stop_processes(pids: list[int]) -> Callable[[], None]:
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)  # our worker processes, by pid

    def heal() -> None:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)

    return heal


def _worker_pause(cluster: Cluster, fault: Fault) -> Callable[[], None]:
    return _stop_processes([cluster.worker_pid(w) for w in fault.workers])


def _pause_holder(cluster: Cluster, fault: Fault) -> Callable[[], None]:
    # SIGSTOP whichever worker holds the lock right now (its last event is a
    # grant): a GC pause at the worst moment, between its check and its write.
    deadline = time.monotonic() + 2.0
    holders = cluster.holders()
    while not holders and time.monotonic() < deadline:
        time.sleep(0.001)  # holds are short: watch for the next one
        holders = cluster.holders()
    if not holders:
        raise RuntimeError("no worker held the lock within 2 s")
    return _stop_processes([cluster.worker_pid(holders[0])])


def _expiry_jump(cluster: Cluster, fault: Fault) -> Callable[[], None]:
    # A node's clock jumps forward: every key with an expiry expires at once.
    # Keys without one (fencing counters, the epoch hash) do not: a clock
    # jump is not a loss of data.
    for i in fault.nodes:
        client = cluster.nodes[i].client()
        for key in client.scan_iter(match=b"redlock:*"):
            if int(client.pttl(key)) > 0:
                client.pexpire(key, 1)
    return lambda: None


def _restart_empty(cluster: Cluster, fault: Fault) -> Callable[[], None]:
    # Back at once with NO data even where persistence is on: its disk was
    # lost too (a new machine, a wiped volume). The quarantine must cover it.
    for i in fault.nodes:
        server = cluster.nodes[i].server
        assert isinstance(server, RedisServer), "needs local redis-server nodes"
        server.kill()
        assert server.dir is not None, "a node started by the harness has a dir"
        shutil.rmtree(server.dir / "appendonlydir", ignore_errors=True)
        for leftover in [*server.dir.glob("*.aof"), *server.dir.glob("*.rdb")]:
            leftover.unlink()
        server.launch()
        server.wait_ready(keep_port=True)
    return lambda: None


def _script_flush(cluster: Cluster, fault: Fault) -> Callable[[], None]:
    # An operator (or a deploy) empties the script cache: EVALSHA answers
    # NOSCRIPT until something loads the scripts again.
    for i in fault.nodes:
        cluster.admin(i).script_flush()
    return lambda: None


def _client_kill(cluster: Cluster, fault: Fault) -> Callable[[], None]:
    # An operator (or a proxy, a failover tool) kills the clients' connections:
    # CLIENT KILL TYPE normal, the harness's own admin connection skipped.
    # Pub/sub connections (the release announcements) are another type.
    for i in fault.nodes:
        cluster.admin(i).client_kill_filter(_type="normal", skipme=True)
    return lambda: None


FAULTS: dict[str, Action] = {
    "pause-node": _on_nodes("pause", "resume"),
    # Down for the fault's duration, then back: empty, or from its AOF.
    "kill-node": _on_nodes("kill", "restart"),
    # Back empty at once: outside the paper's model but for the quarantine.
    "restart-node-at-once": _on_nodes("restart", None),
    "delay": _proxy("delay"),
    "blackhole": _proxy("blackhole"),
    "reset": _proxy("reset"),
    "drop-replies": _proxy("drop_replies"),
    "refuse": _proxy("refuse"),
    "partition": _proxy("blackhole"),  # the given workers lose the given nodes
    "pause-worker": _worker_pause,
    "pause-holder": _pause_holder,
    "expiry-jump": _expiry_jump,
    # Killed and back at once without its AOF/RDB (persistence or not).
    "restart-node-empty": _restart_empty,
    "script-flush": _script_flush,
    "client-kill": _client_kill,
}


def staggered_loss(rng: random.Random) -> tuple[Fault, ...]:
    """Staggered data loss on 3 nodes, never more than one down at a time.

    Roles drawn at random (the outside review's run: A=0, B=1, C=2): C goes
    down and later comes back from its AOF, missing the grants made
    meanwhile; then A restarts with no data at all; then B goes down. After
    the quarantine, A and C form the quorum: C's fencing counter is stale
    and A's is gone. Timings jitter around the review's schedule.
    """
    a, b, c = rng.sample(range(3), 3)
    c_down = rng.uniform(0.8, 1.5)
    c_back = c_down + rng.uniform(1.5, 2.5)
    a_empty = c_back + rng.uniform(0.0, 0.15)
    b_down = a_empty + rng.uniform(0.05, 0.3)
    return (
        Fault(at=c_down, kind="kill-node", duration=c_back - c_down, nodes=(c,)),
        Fault(at=a_empty, kind="restart-node-empty", nodes=(a,)),
        Fault(at=b_down, kind="kill-node", duration=rng.uniform(3.0, 4.0), nodes=(b,)),
    )


class Nemesis:
    """Runs a schedule on a thread, writing fault/heal events."""

    def __init__(
        self, cluster: Cluster, schedule: Sequence[Fault], record: Callable[..., None]
    ) -> None:
        self.cluster = cluster
        self.schedule = sorted(schedule, key=lambda f: f.at)
        self.record = record
        self.counts: dict[str, int] = {}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)
        self._started = 0.0

    def start(self, started: float) -> None:
        self._started = started
        self._thread.start()

    def _sleep_until(self, offset: float) -> bool:
        return not self._stop.wait(max(0.0, self._started + offset - time.monotonic()))

    def _run(self) -> None:
        pending: list[tuple[float, Fault, Callable[[], None]]] = []
        for fault in self.schedule:
            # Heal what is due before the next fault.
            for entry in sorted(pending, key=lambda p: p[0]):
                if entry[0] <= fault.at:
                    if not self._sleep_until(entry[0]):
                        break
                    self._heal(entry)
                    pending.remove(entry)
            if not self._sleep_until(fault.at):
                break
            # Stamped when it began: an action takes a few ms (an expiry
            # jump visits three nodes in turn), and what workers did
            # meanwhile happened during the fault, not before it.
            began = time.monotonic()
            try:
                heal = FAULTS[fault.kind](self.cluster, fault)
            except Exception as exc:  # a fault that cannot be applied is reported, not fatal
                self.errors.append(f"{fault.kind}: {exc}")
                continue
            self.counts[fault.kind] = self.counts.get(fault.kind, 0) + 1
            detail = f"nodes={fault.nodes} workers={fault.workers}"
            self.record("fault", fault.kind, detail=detail, time=began)
            pending.append((fault.at + fault.duration, fault, heal))
        for entry in sorted(pending, key=lambda p: p[0]):
            self._sleep_until(entry[0])
            self._heal(entry)

    def _heal(self, entry: tuple[float, Fault, Callable[[], None]]) -> None:
        _, fault, heal = entry
        try:
            heal()
        except Exception as exc:
            self.errors.append(f"heal {fault.kind}: {exc}")
        self.record("heal", fault.kind)

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def stop(self) -> None:
        self._stop.set()
