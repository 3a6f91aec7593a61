"""``run``: seeds S, S+1, ... simulated and judged until N grants are done.

Each seed is one deployment (``deploy.py``), judged by every checker
(``judge.py``); its history is a pure function of the seed (and of the
planted bug and ``pending``), so K worker processes change nothing but the
wall time: seeds are handed out in order, their results taken in seed order,
and the run is the shortest prefix of seeds that reaches N grants (or, with
``stop_at_first``, that ends at the first seed with a violation).
"""

from __future__ import annotations

import hashlib
import logging
import multiprocessing
import re
import time
from collections import deque
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..faults.history import ACQUIRE_OPS, Event
from . import mutants
from .deploy import simulate
from .faults import KINDS
from .judge import judge
from .nemesis import DEFAULT_KINDS

__all__ = ["Report", "SeedResult", "run", "run_seed", "trace"]


@dataclass
class SeedResult:
    """One seed's figures, its history's hash and its violations (with traces)."""

    seed: int
    grants: int
    faults: dict[str, int]
    simulated: float
    history_sha256: str
    violations: list[dict[str, Any]] = field(default_factory=list)
    traces: list[list[str]] = field(default_factory=list)
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    # Of this seed's grants, how many came before the earliest instant a
    # violation names (all of them when a checker names none: keys left).
    broke_at: int | None = None


def history_hash(events: Sequence[Event]) -> str:
    digest = hashlib.sha256()
    for e in events:
        line = (f"{e.time:.9f}|{e.process}|{e.kind}|{e.op}|{e.key}|{e.token}|{e.fence}|"
                f"{e.valid_until!r}|{e.value}|{e.detail}\n")  # fmt: skip
        digest.update(line.encode())
    return digest.hexdigest()


_TIMES = re.compile(r"\b(\d{4,}\.\d{3,})\b(?! ?ms)")  # instants, not durations ("by 1014.867 ms")
_KEYS = re.compile(r"'([^']+)'")


def trace(events: Sequence[Event], detail: str, lines: int = 24) -> list[str]:
    """A short trace for a violation: the events around the instants its detail
    names, on the names (and of the processes) it names, with the faults then."""
    times = [float(t) for t in _TIMES.findall(detail)]
    if not times:
        return []
    start, end = min(times) - 2.0, max(times) + 0.5
    keys = set(_KEYS.findall(detail))
    processes = set(re.findall(r"\bw\d+\b", detail))
    chosen = [
        e
        for e in events
        if start <= e.time <= end
        and (
            e.process == "nemesis"
            or (keys and e.key in keys and e.kind in ("ok", "release", "lost", "fail"))
            or (not keys and e.process in processes)
        )
    ]
    return [_line(e) for e in chosen[-lines:]]


def _line(e: Event) -> str:
    token = f" token={e.token[:12]}" if e.token else ""
    until = f" until={e.valid_until:.3f}" if e.valid_until is not None else ""
    fence = f" fence={e.fence}" if e.fence is not None else ""
    value = f" value={e.value}" if e.value is not None else ""
    detail = f" {e.detail}" if e.detail else ""
    return f"{e.time:.6f} {e.process} {e.kind} {e.op} {e.key}{token}{fence}{until}{value}{detail}"


def kinds_for(pending: bool) -> tuple[str, ...]:
    return tuple(KINDS) if pending else DEFAULT_KINDS


def run_seed(seed: int, *, pending: bool = False, minutes: float = 2.0) -> SeedResult:
    """Simulate and judge one seed (in this process, with whatever bug is planted here)."""
    outcome = simulate(seed, kinds_for(pending), observe=True, minutes=minutes)
    events = outcome.events
    result = SeedResult(seed, outcome.grants, outcome.faults, outcome.simulated,
                        history_hash(events))  # fmt: skip
    for error in outcome.errors:
        result.violations.append({"checker": "loop_errors", "seed": seed, "detail": error})
        result.traces.append([])
    named: list[str] = []  # every violation, for the earliest instant one names
    for verdict in judge(events, pending=pending):
        result.counts[verdict.name] = dict(verdict.counts)
        if verdict.ok:
            continue
        named += verdict.violations
        first = min(verdict.violations, key=_earliest)  # the one a replay shows first
        more = len(verdict.violations) - 1
        detail = first + (f" (and {more} more)" if more else "")
        result.violations.append({"checker": verdict.name, "seed": seed, "detail": detail})
        result.traces.append(trace(events, first))
    if result.violations:
        result.broke_at = _grants_before(events, named or [v["detail"] for v in result.violations])
    return result


def _earliest(detail: str) -> float:
    """The earliest instant ``detail`` names (none: after every other)."""
    return min((float(t) for t in _TIMES.findall(detail)), default=float("inf"))


def _grants_before(events: Sequence[Event], details: Sequence[str]) -> int:
    """The grants made before the earliest instant ``details`` name."""
    until = min((_earliest(detail) for detail in details), default=float("inf"))
    granted = {(e.process, e.token) for e in events
               if e.kind == "ok" and e.op in ACQUIRE_OPS and e.time < until}  # fmt: skip
    return len(granted)


@dataclass
class Report:
    seed: int
    results: list[SeedResult]
    wall: float

    @property
    def grants_until_caught(self) -> int | None:
        """Grants simulated before the first violation (every earlier seed's, and
        the violating seed's up to the instant it names); None: no violation."""
        before = 0
        for result in self.results:
            if result.broke_at is not None:
                return before + result.broke_at
            before += result.grants
        return None

    @property
    def violations(self) -> list[dict[str, Any]]:
        return [v for r in self.results for v in r.violations]

    def as_json(self) -> dict[str, Any]:
        digest = hashlib.sha256()
        for result in self.results:
            digest.update(result.history_sha256.encode())
        faults: dict[str, int] = {}
        for result in self.results:
            for kind, count in result.faults.items():
                faults[kind] = faults.get(kind, 0) + count
        return {
            "seed": self.seed,
            "seeds": [r.seed for r in self.results],
            "grants": sum(r.grants for r in self.results),
            "faults": sum(faults.values()),
            "fault_kinds": sorted(faults),
            "violations": self.violations,
            "history_sha256": digest.hexdigest(),
            "simulated_seconds": round(sum(r.simulated for r in self.results), 3),
            "wall_seconds": round(self.wall, 3),
        }


def _quiet() -> None:
    # Thousands of warnings per seed (losses, unconfirmed releases): the
    # history says it all, and formatting them costs more than a grant.
    logging.getLogger("redlock_async").setLevel(logging.CRITICAL + 1)


def _worker_init(mutant: str | None) -> None:
    _quiet()
    if mutant:
        mutants.apply(mutant)


def _one(args: tuple[int, bool, float]) -> SeedResult:
    seed, pending, minutes = args
    return run_seed(seed, pending=pending, minutes=minutes)


def _results(
    seed: int, workers: int, mutant: str | None, pending: bool, minutes: float
) -> Generator[SeedResult, None, None]:
    """Each seed's result from ``seed`` on, in seed order, for as long as asked."""
    if workers <= 1:
        # In this process (a test's too): the library's log level comes back
        # after, or later tests here would hear none of its warnings.
        library = logging.getLogger("redlock_async")
        level = library.level
        _worker_init(mutant)
        try:
            current = seed
            while True:
                yield run_seed(current, pending=pending, minutes=minutes)
                current += 1
        finally:
            library.setLevel(level)
    context = multiprocessing.get_context("fork")
    with context.Pool(workers, initializer=_worker_init, initargs=(mutant,)) as pool:
        queued: deque[Any] = deque()
        next_seed = seed
        try:
            while True:
                while len(queued) < 2 * workers:
                    queued.append(pool.apply_async(_one, ((next_seed, pending, minutes),)))
                    next_seed += 1
                yield queued.popleft().get()
        finally:
            pool.terminate()


def run(
    seed: int,
    grants: int,
    *,
    workers: int = 1,
    mutant: str | None = None,
    stop_at_first: bool = False,
    pending: bool = False,
    minutes: float = 2.0,
    progress: Any = None,
) -> Report:
    """Seeds from ``seed`` until ``grants`` grants are done (see the module docstring)."""
    started = time.monotonic()
    done: list[SeedResult] = []
    total = 0
    results = _results(seed, workers, mutant, pending, minutes)
    try:
        for result in results:
            done.append(result)
            total += result.grants
            if progress is not None:
                progress(result, total, time.monotonic() - started)
            if total >= grants or (stop_at_first and result.violations):
                break
    finally:
        results.close()  # the workers stop now, whatever they were simulating
    return Report(seed, done, time.monotonic() - started)
