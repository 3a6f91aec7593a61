"""The orchestrator: real nodes, worker processes, a nemesis, and the verdicts.

``run_schedule(schedule, seed, workdir)`` starts 5 redis-server nodes behind
the fault proxy (one route per worker, so faults can hit some workers only),
one more Redis as the protected resource (never faulted), the worker
processes, and the nemesis; then merges the histories and runs the checkers.
Everything is stopped by pid, on every exit path.
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from redlock_async.testing import RedisNodes, RedisServer
from redlock_async.testing._proxy import ProxyListener

from .checkers import (
    Verdict,
    adopt_scope,
    call_bounds,
    cancel_safety,
    fencing_order,
    holder_told,
    liveness,
    mutual_exclusion,
    no_keys_left,
    no_lost_updates,
    prompt_grants,
    rw_exclusion,
    semaphore_limit,
    waits_only_for_its_names,
)
from .history import Event, load, merge
from .nemesis import Fault, Nemesis

REPO = Path(__file__).resolve().parents[2]

# A restricted ACL user, as operators hand out to applications: everything
# but the @dangerous commands (INFO, CLIENT, CONFIG, DEBUG, ...). Given on
# redis-server's command line, so a node keeps it across restarts.
ACL_USER = ("lockuser", "lockpass")
ACL_ARGS = ("--user", ACL_USER[0], "on", f">{ACL_USER[1]}", "~*", "&*", "+@all", "-@dangerous")


@dataclass(frozen=True)
class Role:
    """One worker's own settings, where workers differ (``Schedule.roles``).

    Several processes with different ttls share names, and a process started
    after a restart knows nothing of the nodes before it: the restart rule
    must hold for all of them (issue 25).
    """

    ttl: float | None = None  # None: the schedule's
    hold: tuple[float, float] | None = None  # None: the schedule's
    # Seconds after the run starts (the nemesis's clock) before the worker
    # builds its Redlock and begins: it has seen nothing of the nodes before.
    start: float = 0.0
    # Seconds after the run starts past which it begins no more grants, on
    # the same clock as the schedule's duration (None: that duration).
    stop: float | None = None


@dataclass(frozen=True)
class Schedule:
    name: str
    workload: str  # counter | fenced | rw | renew | multi | semaphore | handoff | mixed
    duration: float = 8.0
    faults: tuple[Fault, ...] = ()
    workers: int = 3
    tasks: int = 2
    ttl: float = 1.0
    hold: tuple[float, float] = (0.0, 0.05)
    limit: int = 2  # the semaphore workload's limit
    gap: float = 0.002
    overrun: float = 0.0
    write_share: float = 0.3
    acquire_timeout: float = 1.0
    in_model: bool = True
    redlock: dict[str, Any] = field(default_factory=dict)
    block_loop: dict[int, tuple[tuple[float, float], ...]] = field(default_factory=dict)
    block_when_holding: bool = False
    work_while_held: bool = False
    writer_tasks: int = 0
    fair: bool = False  # locks serve waiters in arrival order
    stall_in_acquire: tuple[float, float] = (0.0, 0.0)  # (share of attempts, seconds)
    node_args: tuple[str, ...] = ()  # e.g. persistence for every redis-server
    wall_clock_jumps: tuple[tuple[float, float], ...] = ()  # (after s, by s), every worker
    nodes: int = 5  # redis-server nodes behind the proxy
    # More faults drawn from the run's seed (randomized variants of a schedule).
    faults_for: Callable[[random.Random], tuple[Fault, ...]] | None = None
    acl_user: bool = False  # workers log in as ACL_USER (+@all -@dangerous)
    loop: str = "asyncio"  # the workers' event loop: asyncio | uvloop
    driver: str = "resp"  # resp (URLs) | redis-py (redis.asyncio.Redis clients passed in)
    # Worker behaviours: aclose() of the worker's Redlock while holders work,
    # every (min, max) seconds, then a fresh one; cancellation of public
    # awaits (acquire, extend, release, async-with enter/exit) at random,
    # each with this probability; explicit extends per holding second.
    aclose_every: tuple[float, float] | None = None
    cancel_share: float = 0.0
    extend_rate: float = 0.0
    # Lock keys must all be gone this many seconds after the workers stopped
    # (None: checked only when the schedule injects no fault, at once).
    keys_left_bound: float | None = None
    worker_grace: float = 60.0  # how long past its duration a worker may run
    must_be_live: bool = False  # liveness counts as a violation (e.g. a loop it must run on)
    # Checkers expected to FAIL (outside the model, the suite must see it).
    expect_violations: tuple[str, ...] = ()
    max_recovery: float = math.inf
    # The mixed workload's knobs (tests/faults/mixed.py: MIX has them all, with defaults).
    mix: dict[str, Any] = field(default_factory=dict)
    # Per worker (index w: roles[w]); workers past the end take the schedule's settings.
    roles: tuple[Role, ...] = ()


@dataclass
class Outcome:
    schedule: str
    seed: int
    mutant: str | None
    verdicts: dict[str, Verdict]
    faults: dict[str, int]
    grants: int
    attempts: int
    wall: float
    nemesis_errors: list[str]
    worker_codes: list[int | None]
    loop_lag_ms: float = 0.0  # the workers' worst event-loop lag (harness overload)
    # Acquire latency (invoke to ok, ms), split by whether a fault was active.
    latency_ms: dict[str, float] = field(default_factory=dict)

    SHOWN = 5  # violations shown per checker in summary()

    @property
    def violated(self) -> list[str]:
        """Safety checkers that found a violation (liveness is reported, not counted,
        unless the schedule says it must be live)."""
        return [
            name
            for name, v in self.verdicts.items()
            if not v.ok and (name != "liveness" or v.name.endswith("(must be live)"))
        ]

    def summary(self) -> str:
        lines = [
            f"{self.schedule} seed={self.seed} mutant={self.mutant}: {self.grants} grants of "
            f"{self.attempts} attempts in {self.wall:.1f}s, faults {self.faults}"
        ]
        for verdict in self.verdicts.values():
            # A few violations each: a liveness checker may name thousands,
            # and every verdict must fit in a failing test's message.
            shown = str(verdict).splitlines()[: 1 + self.SHOWN]
            more = len(verdict.violations) - self.SHOWN
            lines += shown + ([f"  ... and {more} more"] if more > 0 else [])
        if self.nemesis_errors:
            lines.append(f"nemesis errors: {self.nemesis_errors}")
        return "\n".join(lines)


class Cluster:
    """Nodes, the resource, and the workers' routes to the nodes."""

    def __init__(
        self,
        n_nodes: int,
        n_workers: int,
        workdir: Path,
        node_args: Sequence[str] = (),
        user: tuple[str, str] | None = None,
    ) -> None:
        self.workdir = workdir
        self.user = user
        self._admins: dict[int, redis.Redis] = {}
        self.nodes = RedisNodes()
        self.resource = RedisServer()
        self.routes: list[list[ProxyListener]] = []
        self.processes: list[subprocess.Popen[bytes]] = []
        self.outputs: list[Path] = []
        try:
            self.nodes.start(n_nodes, node_args)
            self.resource.start()
            self.routes = [self.nodes.route() for _ in range(n_workers)]
        except BaseException:
            self.close()
            raise

    def urls(self, worker: int) -> list[str]:
        login = f"{self.user[0]}:{self.user[1]}@" if self.user else ""
        return [f"redis://{login}127.0.0.1:{listener.port}/0" for listener in self.routes[worker]]

    def listeners(self, nodes: Sequence[int], workers: Sequence[int]) -> list[ProxyListener]:
        chosen = workers or range(len(self.routes))
        return [self.routes[w][i] for w in chosen for i in nodes]

    def admin(self, node: int) -> redis.Redis:
        """One admin client per node, straight to the server (the default user)."""
        client = self._admins.get(node)
        if client is None:
            client = self._admins[node] = self.nodes[node].client()
        return client

    def worker_pid(self, worker: int) -> int:
        return self.processes[worker].pid

    def holders(self) -> list[int]:
        """Workers whose latest event is a grant (they hold the lock now)."""
        found = []
        for index, path in enumerate(self.outputs):
            try:
                lines = path.read_bytes().splitlines()
            except OSError:
                continue
            if lines and b'"kind": "ok"' in lines[-1] and b'acquire"' in lines[-1]:
                found.append(index)
        return found

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()  # by pid: ours
                process.wait()
        self.nodes.close()
        self.resource.stop()


class _Recorder:
    """The nemesis's (and the orchestrator's) own history file."""

    def __init__(self, path: Path, process: str) -> None:
        self._out = path.open("a", buffering=1)
        self._process = process

    def __call__(self, kind: str, op: str, **fields: Any) -> None:
        event = {"time": time.monotonic(), "process": self._process, "kind": kind, "op": op}
        event.update({k: v for k, v in fields.items() if v not in (None, "")})
        self._out.write(json.dumps(event) + "\n")

    def close(self) -> None:
        self._out.close()


def run_schedule(
    schedule: Schedule, seed: int, workdir: Path, mutant: str | None = None
) -> Outcome:
    workdir.mkdir(parents=True, exist_ok=True)
    for old in workdir.glob("*.jsonl"):
        old.unlink()  # histories are appended to: start each run from none
    rng = random.Random(seed)
    started_wall = time.monotonic()
    faults = schedule.faults
    if schedule.faults_for is not None:
        # Its own stream: the workers' seeds stay what they were for this seed.
        faults += schedule.faults_for(random.Random(seed * 7919 + 1))
    node_args = (*schedule.node_args, *(ACL_ARGS if schedule.acl_user else ()))
    user = ACL_USER if schedule.acl_user else None
    cluster = Cluster(schedule.nodes, schedule.workers, workdir, node_args, user)
    nemesis_file = workdir / "nemesis.jsonl"
    record = _Recorder(nemesis_file, "nemesis")
    try:
        # The nemesis's clock starts about now (t0, once every worker is
        # spawned); workers that time things against the faults use it.
        epoch = time.monotonic()
        for worker in range(schedule.workers):
            role = schedule.roles[worker] if worker < len(schedule.roles) else Role()
            out = workdir / f"w{worker}.jsonl"
            cluster.outputs.append(out)
            config = {
                "urls": cluster.urls(worker),
                "resource": cluster.resource.url,
                "process": f"w{worker}",
                "seed": rng.randrange(2**32),
                "duration": schedule.duration if role.stop is None else role.stop,
                "workload": schedule.workload,
                "tasks": schedule.tasks,
                "ttl": schedule.ttl if role.ttl is None else role.ttl,
                "hold": schedule.hold if role.hold is None else role.hold,
                "start": role.start,
                "limit": schedule.limit,
                "gap": schedule.gap,
                "overrun": schedule.overrun,
                "write_share": schedule.write_share,
                "acquire_timeout": schedule.acquire_timeout,
                "redlock": schedule.redlock,
                "block_loop": schedule.block_loop.get(worker, ()),
                "block_when_holding": schedule.block_when_holding,
                "work_while_held": schedule.work_while_held,
                "writer_tasks": schedule.writer_tasks,
                "fair": schedule.fair,
                "stall_in_acquire": schedule.stall_in_acquire,
                "wall_clock_jumps": schedule.wall_clock_jumps,
                "driver": schedule.driver,
                "aclose_every": schedule.aclose_every,
                "cancel_share": schedule.cancel_share,
                "extend_rate": schedule.extend_rate,
                "out": str(out),
                "mutant": mutant,
                "worker": worker,
                "epoch": epoch,
                "mix": schedule.mix,
                # Straight to the servers, past the proxy (the mixed workload's
                # release burst: volume, not faults, is what it is about).
                "direct_urls": [node.direct_url for node in cluster.nodes],
            }
            loop = ("--loop", schedule.loop) if schedule.loop != "asyncio" else ()
            cluster.processes.append(
                subprocess.Popen(
                    [sys.executable, "-m", "tests.faults.worker", json.dumps(config), *loop],
                    cwd=REPO,
                    env={**os.environ, "PYTHONPATH": str(REPO)},
                )
            )
        t0 = time.monotonic()
        nemesis = Nemesis(cluster, faults, record)
        nemesis.start(t0)
        codes: list[int | None] = []
        for process in cluster.processes:
            try:
                codes.append(process.wait(timeout=schedule.duration + schedule.worker_grace))
            except subprocess.TimeoutExpired:
                process.kill()
                codes.append(None)
        nemesis.stop()
        nemesis.join(30)
        end = time.monotonic()
        # The final state, read once every worker has stopped.
        with redis.Redis.from_url(cluster.resource.url) as resource:
            counter = resource.get("counter")
        record("read", "read", key="job", value=int(counter or 0))
        left = _lock_keys(cluster)
        if schedule.keys_left_bound:
            # Cleanup may still be landing (a retried release): give it the bound.
            settle = time.monotonic() + schedule.keys_left_bound
            while sum(left) and time.monotonic() < settle:
                time.sleep(0.05)
                left = _lock_keys(cluster)
        record("keys", "left", value=sum(left), detail=f"per node {left}")
        for index, key, token, pttl in _left_keys(cluster):
            record("key", "left", key=key, token=token, detail=f"node {index} pttl {pttl} ms")
        events = merge(load(path) for path in [*cluster.outputs, nemesis_file])
    finally:
        record.close()
        cluster.close()
    verdicts = judge(events, schedule, t0, end, faulted=bool(faults))
    if schedule.must_be_live:
        verdicts["liveness"].name = "liveness (must be live)"
    acquires = [e for e in events if e.op.endswith("acquire") and e.kind in ("ok", "fail")]
    return Outcome(
        schedule=schedule.name,
        seed=seed,
        mutant=mutant,
        verdicts=verdicts,
        faults=dict(nemesis.counts),
        grants=sum(e.kind == "ok" for e in acquires),
        attempts=len(acquires),
        wall=time.monotonic() - started_wall,
        nemesis_errors=nemesis.errors,
        worker_codes=codes,
        latency_ms=acquire_latency(events),
        loop_lag_ms=max(
            (float(e.detail.split()[-2]) for e in events if e.kind == "done" and e.detail),
            default=0.0,
        ),
    )


def _lock_keys(cluster: Cluster) -> list[int]:
    """Lock keys (not fencing counters) on each node that is up."""
    counts = []
    for node in cluster.nodes:
        try:
            keys = node.client().keys(b"redlock:*")
        except redis.RedisError:
            counts.append(0)  # down: it holds nothing anyone can see
            continue
        names = [k if isinstance(k, bytes) else str(k).encode() for k in keys]
        counts.append(
            sum(1 for k in names if not k.endswith((b":fence", b":rwfence")) and b"~epoch" not in k)
        )
    return counts


def _left_keys(cluster: Cluster, per_node: int = 25) -> list[tuple[int, str, str, int]]:
    """(node, key, value, pttl) of the lock keys left on each node that is up.

    At most ``per_node`` of them per node (the count is ``_lock_keys``'s): a
    burst of dropped releases leaves thousands, and one look each would take
    longer than the run.
    """
    found = []
    for index, node in enumerate(cluster.nodes):
        try:
            client = node.client()
            shown = 0
            for key in client.keys(b"redlock:*"):
                if shown >= per_node:
                    break
                name = key if isinstance(key, bytes) else str(key).encode()
                if name.endswith((b":fence", b":rwfence")) or b"~epoch" in name:
                    continue
                value = client.get(name) if client.type(name) == b"string" else None
                token = value.decode(errors="replace") if isinstance(value, bytes) else ""
                found.append((index, name.decode(errors="replace"), token, int(client.pttl(name))))
                shown += 1
        except redis.RedisError:
            continue  # down: it holds nothing anyone can see
    return found


def judge(
    events: list[Event], schedule: Schedule, t0: float, end: float, *, faulted: bool | None = None
) -> dict[str, Verdict]:
    verdicts = {"mutual_exclusion": mutual_exclusion(events, ("acquire",))}
    if faulted is None:
        faulted = bool(schedule.faults or schedule.faults_for)
    if not faulted or schedule.keys_left_bound is not None:
        # With no fault, every attempt's outcome was known: a key left behind
        # right after the workers stopped is a leak (rollback or release
        # missing). Faults that lose no node (a script flush, killed client
        # connections, cancellations) leave the library every chance to clean
        # up too, within the schedule's bound.
        verdicts["no_keys_left"] = no_keys_left(events)
    if schedule.aclose_every is not None or schedule.cancel_share:
        verdicts["holder_told"] = holder_told(events, bound=schedule.ttl + 0.3)
    if schedule.cancel_share:
        verdicts["cancel_safety"] = cancel_safety(events)
    if schedule.workload == "renew":
        verdicts["loss_notice"] = loss_notice(events, schedule.ttl)
    done = [e for e in events if e.kind == "done"]
    stray = {e.process: e.value for e in done if e.value}
    verdicts["no_stray_tasks"] = Verdict(
        "no_stray_tasks",
        not stray,
        [f"{p}: {n} tasks still running after Redlock.aclose()" for p, n in stray.items()],
        {"workers_done": len(done)},
    )
    if schedule.workload == "rw":
        verdicts["rw_exclusion"] = rw_exclusion(events)
        verdicts["writer_starvation"] = writer_starvation(events, bound=schedule.duration / 2)
    if schedule.workload == "semaphore":
        verdicts["semaphore_limit"] = semaphore_limit(events, schedule.limit)
    if schedule.workload in ("counter", "handoff"):
        verdicts["no_lost_updates"] = no_lost_updates(events)
    if schedule.workload == "fenced":
        verdicts["fencing_order"] = fencing_order(events)
        verdicts["no_lost_updates"] = fenced_updates(events)
    if schedule.workload == "mixed":
        verdicts.update(mixed_verdicts(events, schedule))
    # Phases from the first thing a worker did: on a loaded machine the
    # workers' start (imports, connections, censuses) can outlast the first
    # healthy second, and a stretch before any worker ran says nothing.
    started = min((e.time for e in events if e.process != "nemesis"), default=t0)
    verdicts["liveness"] = liveness(
        events, phases(events, max(t0, started), end), max_recovery=schedule.max_recovery
    )
    return verdicts


def mixed_verdicts(events: Sequence[Event], schedule: Schedule) -> dict[str, Verdict]:
    """The mixed workload's checkers: safety per primitive, and every liveness bound.

    The bounds come from the schedule's Redlock options (the library's
    defaults where it sets none): see docs/faults.md, "Liveness checkers".
    """
    options = schedule.redlock
    node_timeout = float(options.get("node_timeout", 0.05))
    retry = float(options.get("retry_delay", 0.2)) + float(options.get("retry_jitter", 0.2))
    return {
        "rw_exclusion": rw_exclusion(events),
        "semaphore_limit": semaphore_limit(events, schedule.limit),
        "adopt_scope": adopt_scope(events),
        "call_bounds": call_bounds(events, node_timeout=node_timeout),
        # ttl: a restarted node's quarantine lasts longer with it (restart_out).
        "prompt_grants": prompt_grants(events, retry=retry, ttl=schedule.ttl),
        "waits_only_for_its_names": waits_only_for_its_names(events, retry=retry, ttl=schedule.ttl),
    }


_SHORTEST_HEALTHY = 0.25  # seconds: a few attempts' worth on a loaded machine


def phases(events: Sequence[Event], t0: float, end: float) -> list[tuple[str, float, float]]:
    """Healthy stretches (no fault active, 1 s after each heal) and faulted ones."""
    active = 0
    marks: list[tuple[float, int]] = []
    for event in events:
        if event.process != "nemesis":
            continue
        if event.kind == "fault":
            active += 1
        elif event.kind == "heal":
            active -= 1
        marks.append((event.time, active))
    out: list[tuple[str, float, float]] = []
    start, state = t0, 0
    for when, now_active in marks:
        name = "healthy" if state == 0 else "faulted"
        # A healthy stretch too short for acquires to complete in it is no
        # stretch: a fault due one second after a heal starts a few us
        # after the heal's grace ends, or a few us before (by the nemesis's
        # timing), and "no attempt completed" there says nothing.
        if when > start + (_SHORTEST_HEALTHY if state == 0 else 0.0):
            out.append((f"{name}{len(out)}", start, when))
        start = max(start, when + (1.0 if now_active == 0 else 0.0))
        state = now_active
    if end > start:
        out.append((f"{'healthy' if state == 0 else 'faulted'}{len(out)}", start, end))
    return out


def fenced_updates(events: Sequence[Event]) -> Verdict:
    """With a fenced resource: the counter equals the writes it accepted."""
    accepted = [e for e in events if e.op == "fenced-write" and e.kind == "ok"]
    final = [e for e in events if e.kind == "read"]
    violations = []
    if not final or final[-1].value != len(accepted):
        value = final[-1].value if final else None
        violations.append(f"counter {value}, but the resource accepted {len(accepted)} writes")
    values = [e.value for e in accepted]
    if len(set(values)) != len(values):
        violations.append("two accepted writes produced the same counter value")
    return Verdict("no_lost_updates", not violations, violations, {"accepted": len(accepted)})


def writer_starvation(events: Sequence[Event], bound: float) -> Verdict:
    """A writer that started waiting is granted (or times out) - and some writer gets in."""
    invokes: dict[str, list[float]] = {}
    waits: list[float] = []
    for event in events:
        if event.op != "write-acquire":
            continue
        if event.kind == "invoke":
            invokes.setdefault(event.process, []).append(event.time)
        elif event.kind == "ok" and invokes.get(event.process):
            waits.append(event.time - invokes[event.process].pop(0))
        elif event.kind == "fail" and invokes.get(event.process):
            invokes[event.process].pop(0)
    tried = sum(1 for e in events if e.op == "write-acquire" and e.kind == "invoke")
    granted = len(waits)
    violations = []
    if tried and granted < tried / 2:
        violations.append(f"{granted} of {tried} write attempts granted: writers starved")
    elif waits and max(waits) > bound:
        violations.append(f"a writer waited {max(waits):.2f}s (bound {bound:.2f}s)")
    return Verdict(
        "writer_starvation",
        not violations,
        violations,
        {"write_attempts": tried, "writes_granted": granted},
        {"max_writer_wait": max(waits) if waits else 0.0},
    )


def loss_notice(events: Sequence[Event], ttl: float) -> Verdict:
    """A holder whose keys vanished from a majority is told by its next renewal.

    After an ``expiry-jump`` of a majority, the next renewal finds the keys
    gone (or someone else's): the holder must learn it at once - its claim
    may not run on for longer than the renewal period plus slack.

    Only grants made well before the jump began count: one made while the
    jump visited the nodes, or whose slower nodes were still being written
    (healthy nodes answer within 50 ms), may hold keys the jump never saw -
    a renewal then rightly finds a majority still holding them.
    """
    from .history import windows

    jumps = [e.time for e in events if e.process == "nemesis" and e.kind == "fault"
             and e.op == "expiry-jump"]  # fmt: skip
    found = windows(events, ("acquire",))
    # Renewals run every ttl/3 (give or take ttl/12): the first one after
    # the jump finds the keys gone. 0.25 s of slack for a loaded machine.
    bound = ttl * 0.75 + 0.25
    violations = []
    for jump in jumps:
        for window in found:
            if window.start < jump - 0.05 and jump < window.end and window.end > jump + bound:
                violations.append(
                    f"{window.describe()} kept claiming {window.end - jump:.2f}s after its "
                    f"keys were expired at {jump:.3f} (bound {bound:.2f}s)"
                )
    return Verdict("loss_notice", not violations, violations, {"jumps": len(jumps)})


def acquire_latency(events: Sequence[Event]) -> dict[str, float]:
    """p50/p99 of invoke-to-ok acquire latency, healthy vs. while a fault is on."""
    active = 0
    pending: dict[str, float] = {}
    samples: dict[str, list[float]] = {"healthy": [], "faulted": []}
    for event in events:
        if event.process == "nemesis":
            active += {"fault": 1, "heal": -1}.get(event.kind, 0)
        elif event.op == "acquire" and event.kind == "invoke":
            pending[event.process] = event.time
        elif event.op == "acquire" and event.kind == "ok" and event.process in pending:
            started = pending.pop(event.process)
            samples["faulted" if active else "healthy"].append((event.time - started) * 1000)
    figures: dict[str, float] = {}
    for phase, values in samples.items():
        if values:
            ordered = sorted(values)
            figures[f"{phase}_p50"] = round(ordered[len(ordered) // 2], 3)
            figures[f"{phase}_p99"] = round(
                ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 3
            )
    return figures
