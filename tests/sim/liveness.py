"""The restart rule's liveness: three checkers on a history and its fault log.

The restart rule (docs/guarantees.md, "Restarted nodes") may keep a node
out of a quorum only while it has reason to: the node lost its data (or
restarted) and a grant it may have held can still be valid. These checkers
hold the code to that, from the nemesis's fault log in the history (its
``fault``/``heal`` events: ``id=.. nodes=(..) workers=(..)``, kinds as in
``faults.py``) and what the deployment saw:

- :func:`never_kept_out`: a node whose server neither restarted nor lost its
  data is never kept out of a process's quorum (``out``/``in`` events, the
  deployment's sampler of each Redlock), beyond a settling time after what
  disturbed it; a restart may cost the documented brief hold
  (``MIN_QUARANTINE``), a loss of data no more than until every grant it
  may have held has ended (every process noticed, plus the records' life);
- :func:`held_lock_kept`: a held lock is never lost (``lost`` event) while
  its holder reaches a healthy majority of nodes that hold it
  (``held_on=(..)`` in the loss's detail: the nodes whose keys held the
  token then);
- :func:`free_name_granted`: a free name (per the occupancy: ``hold`` and
  ``free`` events) is granted within two retry delays while a process that
  reaches a healthy majority waits for it.

"Healthy", for a process and a node: no fault between them (on the node,
on their path, on the process) for a settling time - the reconnection's
backoff, about the outage's length, 2 s at most, plus one second.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from redlock_async._engine._restarts import MIN_QUARANTINE

from ..faults.bounds import Intervals, _gaps, _occupancy, _Resources, calls
from ..faults.history import Event
from ..faults.verdict import Verdict
from .faults import KINDS

__all__ = ["FaultLog", "free_name_granted", "held_lock_kept", "never_kept_out"]

Span = tuple[float, float]

_FIELDS = re.compile(r"id=(\d+) nodes=\(([^)]*)\) workers=\(([^)]*)\)")
_HELD_ON = re.compile(r"held_on=\(([^)]*)\)")


def _numbers(text: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.split(r"[,\s]+", text) if n)


def settle(outage: float) -> float:
    """How long after an outage of ``outage`` s a process counts on the node
    again at the latest: its reconnection backoff (about the outage, 2 s at
    most) and a second for the censuses and a retry."""
    return min(2.0, outage + 0.05) + 1.0


@dataclass(frozen=True, slots=True)
class Logged:
    """One fault as the history has it."""

    kind: str
    start: float
    end: float
    nodes: tuple[int, ...]
    workers: tuple[int, ...]


class FaultLog:
    """The nemesis's faults, paired by id, and what each means per process and node."""

    def __init__(self, events: Sequence[Event]) -> None:
        self.end = max((e.time for e in events), default=0.0)
        began: dict[str, tuple[Event, tuple[int, ...], tuple[int, ...]]] = {}
        self.faults: list[Logged] = []
        for event in events:
            if event.process != "nemesis":
                continue
            match = _FIELDS.search(event.detail)
            if match is None:
                continue
            ident = match.group(1)
            if event.kind == "fault":
                began[ident] = (event, _numbers(match.group(2)), _numbers(match.group(3)))
            elif event.kind == "heal" and ident in began:
                first, nodes, workers = began.pop(ident)
                self.faults.append(Logged(first.op, first.time, event.time, nodes, workers))
        for first, nodes, workers in began.values():
            self.faults.append(Logged(first.op, first.time, self.end, nodes, workers))
        self.faults.sort(key=lambda f: f.start)
        self.nodes = next((e.value for e in events if e.kind == "nodes" and e.value), 0) or (
            1 + max((n for f in self.faults for n in f.nodes), default=2)
        )
        starts: dict[str, list[float]] = defaultdict(list)
        for event in events:
            if event.process.startswith("w") and not starts[event.process]:
                starts[event.process].append(event.time)
            if event.kind == "aclose":
                starts[event.process].append(event.time)
        self.redlocks = dict(starts)  # when each process's Redlocks were made

    def disturbed(self, worker: int, node: int) -> Intervals:
        """When the path from ``w<worker>`` to ``node`` was not healthy (settled)."""
        spans: list[Span] = []
        for fault in self.faults:
            kind = KINDS.get(fault.kind)
            if kind is None or kind.name in ("script-flush", "node-drift", "wall-step", "aclose"):
                continue
            if kind.scope == "node" and node not in fault.nodes:
                continue
            if kind.scope == "path" and (worker not in fault.workers or node not in fault.nodes):
                continue
            if kind.scope == "process" and worker not in fault.workers:
                continue
            if kind.loses_data and not kind.restarts:
                continue  # a flush or an eviction silences nothing: see lost()
            spans.append((fault.start, fault.end + settle(fault.end - fault.start)))
        return Intervals(spans)

    def lost(self, node: int, ttl: float) -> Intervals:
        """When ``node`` may be kept out for data it lost or, restarted, may have
        lost: until every live process noticed (reached it again), the brief
        hold, and every record written with its old epoch expired (1.25 x
        max(ttl, 2 s) after the last)."""
        workers = self.workers()
        spans: list[Span] = []
        for fault in self.faults:
            kind = KINDS.get(fault.kind)
            if kind is None or node not in fault.nodes:
                continue
            if kind.loses_data or kind.restarts:
                # A server back with its data is no different to a client: it
                # cannot tell what a restart from disk missed (docs/guarantees.md).
                # A process cut off from the node when it came back writes
                # records with its old epoch until it reaches it again.
                noticed = fault.end
                for worker in workers:
                    for a, b in self.disturbed(worker, node).spans:
                        if a <= fault.end <= b:
                            noticed = max(noticed, b)
                until = noticed + MIN_QUARANTINE + 1.25 * max(ttl, 2.0)
                spans.append((fault.start, until + settle(fault.end - fault.start)))
        return Intervals(spans)

    def workers(self) -> list[int]:
        return sorted(int(p[1:]) for p in self.redlocks if p[1:].isdigit())

    def fresh(self, process: str) -> Intervals:
        """A process's Redlocks' first censuses: a second after each was made."""
        return Intervals((t, t + 1.0) for t in self.redlocks.get(process, ()))

    def unhealthy(self, process: str, ttl: float) -> Intervals:
        """When ``process`` did not reach a healthy majority of the nodes."""
        worker = int(process[1:])
        need = self.nodes // 2 + 1
        bad = [
            Intervals([*self.disturbed(worker, node).spans, *self.lost(node, ttl).spans])
            for node in range(self.nodes)
        ]
        marks = sorted(
            [(a, 1) for spans in bad for a, _ in spans.spans]
            + [(b, -1) for spans in bad for _, b in spans.spans]
        )
        out: list[Span] = []
        down, since = 0, 0.0
        for when, step in marks:
            before = down
            down += step
            if before <= self.nodes - need < down:
                since = when
            elif down <= self.nodes - need < before:
                out.append((since, when))
        return Intervals([*out, *self.fresh(process).spans])


def _spans(events: Iterable[Event], end: float) -> dict[tuple[str, int], list[Span]]:
    """Each (process, node)'s kept-out spans, from the sampler's out/in events."""
    opened: dict[tuple[str, int], float] = {}
    found: dict[tuple[str, int], list[Span]] = defaultdict(list)
    for event in events:
        if event.op != "node" or event.kind not in ("out", "in"):
            continue
        slot = (event.process, int(event.key))
        if event.kind == "out":
            opened.setdefault(slot, event.time)
        elif slot in opened:
            found[slot].append((opened.pop(slot), event.time))
    for slot, start in opened.items():
        found[slot].append((start, end))
    return found


def never_kept_out(events: Sequence[Event], *, ttl: float, tolerance: float = 0.5) -> Verdict:
    """No node is kept out of a process's quorum without reason (module docstring)."""
    history = sorted(events, key=lambda e: e.time)
    log = FaultLog(history)
    busy = defaultdict(list)  # when each process had a call under way (it needed a quorum)
    for call in calls(history):
        busy[call.process].append((call.start, call.end))
    violations: list[tuple[float, str]] = []
    for (process, node), spans in sorted(_spans(history, log.end).items()):
        if not process[1:].isdigit():
            continue
        excused = Intervals([
            *log.disturbed(int(process[1:]), node).spans,
            *log.lost(node, ttl).spans,
            *log.fresh(process).spans,
        ])  # fmt: skip
        needed = Intervals(busy.get(process, []))
        for start, end in spans:
            for a, b in _gaps(start, end, excused.within(start, end)):
                for x, y in needed.within(a, b):
                    if y - x > tolerance:
                        violations.append((y - x, (
                            f"{process} kept node {node} out of its quorum for {y - x:.3f} s,"
                            f" [{x:.3f}, {y:.3f}], with no fault on it or its path and no"
                            f" loss of data to wait for (out since {start:.3f})"
                        )))  # fmt: skip
    found = [message for _, message in sorted(violations, key=lambda v: -v[0])]
    counts = {"kept_out_spans": sum(len(s) for s in _spans(history, log.end).values()),
              "unexcused": len(found)}  # fmt: skip
    return Verdict("never_kept_out", not found, found, counts)


def held_lock_kept(events: Sequence[Event], *, slack: float = 0.0) -> Verdict:
    """No held lock is lost while its holder reaches a healthy majority of nodes holding it."""
    history = sorted(events, key=lambda e: e.time)
    log = FaultLog(history)
    need = log.nodes // 2 + 1
    granted: dict[str, float] = {}
    ttls: dict[str, float] = {}
    closed: dict[str, list[float]] = defaultdict(list)
    for event in history:
        if event.kind == "ok" and event.token and event.token not in granted:
            granted[event.token] = event.time
        elif event.kind == "hold" and event.value and event.token not in ttls:
            ttls[event.token] = event.value / 1000
        elif event.kind == "aclose":
            closed[event.process].append(event.time)
    violations: list[str] = []
    losses = [e for e in history if e.kind == "lost" and _HELD_ON.search(e.detail)]
    for loss in losses:
        match = _HELD_ON.search(loss.detail)
        assert match is not None
        since = granted.get(loss.token, loss.time)
        if any(since <= t <= loss.time for t in closed.get(loss.process, ())):
            continue  # its Redlock was closed: told lost, as it must be
        window = (loss.time - ttls.get(loss.token, 1.0) - 1.0, loss.time + slack)
        worker = int(loss.process[1:]) if loss.process[1:].isdigit() else -1
        healthy = [
            node
            for node in _numbers(match.group(1))
            if not log.disturbed(worker, node).within(*window)
            and not log.lost(node, 0.0).within(since, loss.time)
        ]
        if len(healthy) >= need:
            violations.append(
                f"{loss.process} lost {loss.key!r} (token {loss.token[:12]}, granted at"
                f" {since:.3f}) at {loss.time:.3f} though nodes {healthy} of {log.nodes},"
                f" healthy and reached, held it"
            )
    counts = {"losses": len(losses), "unexcused": len(violations)}
    return Verdict("held_lock_kept", not violations, violations, counts)


def free_name_granted(
    events: Sequence[Event],
    *,
    retry: float,
    ttl: float,
    slack: float = 0.3,
    contended: float = 3.0,
) -> Verdict:
    """A free name is granted within two retry delays while a process that
    reaches a healthy majority waits for it (plain locks' waiters); within
    ``contended`` retry delays when another process waited for it too (votes
    split between two waiters that each reach only a bare majority: each
    retries after its jittered delay, and may split again - as
    ``prompt_grants`` allows)."""
    history = sorted(events, key=lambda e: e.time)
    log = FaultLog(history)
    found = calls(history)
    resources = _Resources(_occupancy(history), found, retry=retry, history=history)
    waiters = [c for c in found if c.op == "lock" and c.timeout > 0]
    wanting: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    for other in found:
        if other.op in ("lock", "multi") and other.timeout > 0:
            for name in other.names:
                wanting[name].append((other.start, other.end, other.process))
    sick: dict[str, Intervals] = {}
    violations: list[tuple[float, str]] = []
    longest = 0.0
    for call in waiters:
        if call.process not in sick:
            sick[call.process] = log.unhealthy(call.process, ttl)
        blocked = resources.blocked(call) + sick[call.process].within(call.start, call.end)
        for a, b in _gaps(call.start, call.end, blocked):
            longest = max(longest, b - a)
            rivals = any(x < b and y > a and who != call.process
                         for x, y, who in wanting[call.res])  # fmt: skip
            bound = (contended if rivals else 2.0) * retry + slack
            if b - a > bound and not math.isinf(b):
                violations.append((b - a, (
                    f"{call.describe()} ({call.outcome}): {call.res!r} was free for {b - a:.3f} s,"
                    f" [{a:.3f}, {b:.3f}], while it reached a healthy majority; bound {bound:.3f} s"
                )))  # fmt: skip
    messages = [message for _, message in sorted(violations, key=lambda v: -v[0])]
    counts = {"waiters": len(waiters), "idle_waits": len(messages)}
    return Verdict("free_name_granted", not messages, messages, counts,
                   {"longest_free_s": round(longest, 3)})  # fmt: skip
