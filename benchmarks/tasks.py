"""Looping tasks, 1 to 1,000, each acquiring and releasing its own name: rate and latency.

5 local nodes, one ``Redlock``. T tasks each loop for ``--seconds``: take
the lock of its own name (``acquire()``, blocking, as users call it: a
failed attempt retries after the retry delay), then release it. Reported per
T: grants/s, acquire latency p50, p99 and max, p99/p50, acquires that gave up
(``--timeout``), releases a quorum did not confirm, and the warnings the library logged
(logger ``redlock_async``). With distinct names nothing contends, so every
attempt should be granted at once: a retry, a refusal or a warning is the
client's own congestion.

The same-run baseline is one task (T = 1), measured in every round; counts
are interleaved within each round, figures are medians over rounds
(latency percentiles over every grant of every round).

Run: ``python benchmarks/tasks.py [--tasks 1 10 50 200 1000] [--seconds 3]
[--rounds 2] [--loop asyncio|uvloop|both] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from redlock_async import LockNotOwned, Redlock
from redlock_async.testing import RedisServer

sys.path.insert(0, str(Path(__file__).parent))
from _common import add_loop_option, count_warnings, on_each_loop, percentile, table

NODES = 5


async def loop_tasks(
    urls: list[str], tasks: int, seconds: float, timeout: float, tag: str
) -> tuple[float, list[float], int, int, int]:
    """Returns grants/s, acquire latencies (s), gave up, releases unconfirmed, warnings."""
    latencies: list[float] = []
    gave_up = refused = 0
    async with Redlock(urls) as redlock:
        warm = redlock.lock(f"bench:tasks:{tag}:warm", ttl=10.0, auto_extend=False)
        assert await warm.acquire(), "cannot reach the nodes"
        await warm.release()
        deadline = time.perf_counter() + seconds

        async def worker(index: int) -> None:
            nonlocal gave_up, refused
            name = f"bench:tasks:{tag}:{index}"
            while time.perf_counter() < deadline:
                lock = redlock.lock(name, ttl=10.0, auto_extend=False)
                started = time.perf_counter()
                if not await lock.acquire(timeout=timeout):
                    gave_up += 1
                    continue
                latencies.append(time.perf_counter() - started)
                try:
                    await lock.release()
                except LockNotOwned:
                    refused += 1

        with count_warnings() as warnings:
            started = time.perf_counter()
            await asyncio.gather(*(worker(i) for i in range(tasks)))
            elapsed = time.perf_counter() - started
        # A release left unconfirmed (replies missing within node_timeout)
        # logs a warning; one a quorum refused raises LockNotOwned.
        refused += warnings.count("not confirmed by a quorum")
        if warnings.total:
            print(f"\n  {tasks:,} tasks: {warnings.total:,} warnings: {warnings.summary()}")
    return len(latencies) / elapsed, latencies, gave_up, refused, warnings.total


async def main(counts: list[int], seconds: float, rounds: int, timeout: float) -> dict[str, Any]:
    servers = [RedisServer() for _ in range(NODES)]
    for server in servers:
        server.start()
    rates: dict[int, list[float]] = {t: [] for t in counts}
    latencies: dict[int, list[float]] = {t: [] for t in counts}
    counters: dict[int, list[tuple[int, int, int]]] = {t: [] for t in counts}
    try:
        urls = [server.url for server in servers]
        for round_ in range(rounds):
            for tasks in counts:
                rate, lat, gave_up, refused, warned = await loop_tasks(
                    urls, tasks, seconds, timeout, f"{round_}:{tasks}"
                )
                rates[tasks].append(rate)
                latencies[tasks] += lat
                counters[tasks].append((gave_up, refused, warned))
                await asyncio.sleep(0.2)  # let the last cleanups land
                print(".", end="", flush=True)
        print()
    finally:
        for server in servers:
            server.stop()
    points = []
    for tasks in counts:
        lat = latencies[tasks]
        p50, p99 = percentile(lat, 50) * 1000, percentile(lat, 99) * 1000
        points.append(
            {
                "tasks": tasks,
                "grants_per_s": statistics.median(rates[tasks]),
                "p50_ms": p50,
                "p99_ms": p99,
                "max_ms": max(lat, default=0.0) * 1000,
                "p99_over_p50": p99 / p50 if p50 else 0.0,
                "gave_up": statistics.median(c[0] for c in counters[tasks]),
                "releases_unconfirmed": statistics.median(c[1] for c in counters[tasks]),
                "warnings": statistics.median(c[2] for c in counters[tasks]),
            }
        )
    baseline = next((p for p in points if p["tasks"] == 1), None)
    rows = [
        [f"{p['tasks']:,}", f"{p['grants_per_s']:,.0f}", f"{p['p50_ms']:.2f}",
         f"{p['p99_ms']:.2f}", f"{p['max_ms']:.1f}", f"{p['p99_over_p50']:.1f}x",
         f"{p['gave_up']:,.0f}", f"{p['releases_unconfirmed']:,.0f}", f"{p['warnings']:,.0f}"]
        for p in points
    ]  # fmt: skip
    print(f"\n{NODES} nodes, T looping tasks, each acquire+release on its own name, "
          f"{rounds} x {seconds}s")  # fmt: skip
    headers = ["tasks", "grants/s", "p50 ms", "p99 ms", "max ms", "p99/p50", "gave up",
               "release unconfirmed", "warnings"]  # fmt: skip
    print(table(headers, rows))
    return {"baseline": baseline, "tasks": points}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--tasks", type=int, nargs="+", default=[1, 10, 50, 200, 1000])
    parser.add_argument("--seconds", type=float, default=3.0, help="length of one run")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=10.0, help="acquire(timeout=)")
    parser.add_argument("--json", type=Path, help="also write the figures here, by loop")
    add_loop_option(parser)
    args = parser.parse_args()
    counts = sorted(set(args.tasks) | {1})  # 1 task: the baseline
    result = on_each_loop(args.loop, lambda: main(counts, args.seconds, args.rounds, args.timeout))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
