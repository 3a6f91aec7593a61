"""Shared pieces of the benchmarks: nodes, percentiles, interleaved rounds, tables."""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

__all__ = ["Result", "percentile", "run_for", "table"]


def percentile(samples: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by nearest rank; 0.0 for no samples."""
    if not samples:
        return 0.0
    ordered = sorted(samples)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered)) - 1))
    return ordered[rank]


@dataclass
class Result:
    """Rounds of one contender in one workload."""

    rates: list[float] = field(default_factory=list)  # grants per second, per round
    latencies: list[float] = field(default_factory=list)  # acquire latency, seconds

    @property
    def rate(self) -> float:
        return statistics.median(self.rates) if self.rates else 0.0

    def p(self, q: float) -> float:
        return percentile(self.latencies, q) * 1000


async def run_for(
    seconds: float, tasks: int, grant: Callable[[int], Awaitable[float | None]]
) -> tuple[float, list[float]]:
    """Run ``grant(task_index)`` in ``tasks`` loops for ``seconds``.

    Each call returns its acquire latency, or None when it was refused (not
    counted). Returns successful grants/s and their latencies.
    """
    import asyncio

    latencies: list[float] = []
    deadline = time.perf_counter() + seconds

    async def loop(index: int) -> None:
        while time.perf_counter() < deadline:
            latency = await grant(index)
            if latency is not None:
                latencies.append(latency)

    started = time.perf_counter()
    await asyncio.gather(*(loop(i) for i in range(tasks)))
    return len(latencies) / (time.perf_counter() - started), latencies


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = [
        "  ".join(
            c.rjust(w) if i else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
