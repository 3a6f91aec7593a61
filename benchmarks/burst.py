"""A burst of N concurrent one-shot acquires on distinct free names, then N releases at once.

5 local, idle nodes. Each burst starts N ``acquire(blocking=False)`` at once,
each on its own free name, on one warm ``Redlock`` (its connections open):
how many are granted, and how long the whole burst takes. The held locks are
then all released at once: how many releases a quorum confirmed, and how
many warnings the library logged (logger ``redlock_async``) during the burst
and the releases. Keys still on the nodes a second later are counted too.

The same-run baseline: acquire+release throughput on distinct names with one
task and with 50 (as ``throughput.py`` measures it), in each round before
the bursts. Its 50-task rate makes the ideal time of a burst: N / rate, and
``burst / ideal`` says how far from it a burst is (a burst sends only the
acquires, the baseline acquires and releases, so a healthy burst can beat it).
Sizes are interleaved within each round; figures are medians over rounds.

Run: ``python benchmarks/burst.py [--sizes 1000 2000 5000 10000] [--large]
[--rounds 3] [--seconds 1.0] [--loop asyncio|uvloop|both] [--json FILE]``.
``--large`` adds 20,000.
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

import redis

from redlock_async import Lock, LockNotOwned, Redlock
from redlock_async.testing import RedisServer

sys.path.insert(0, str(Path(__file__).parent))
from _common import add_loop_option, count_warnings, on_each_loop, run_for, table

NODES = 5
TTL = 60.0  # outlasts the slowest burst: a grant never expires while measured
UNCONFIRMED = "not confirmed by a quorum"  # the warning of a release left unconfirmed


async def throughput(redlock: Redlock, tasks: int, seconds: float, tag: str) -> float:
    """Acquire+release grants/s with ``tasks`` looping tasks, each on its own name."""
    names = [f"bench:burst:base:{tag}:{i}" for i in range(tasks)]

    async def grant(index: int) -> float | None:
        lock = redlock.lock(names[index], ttl=TTL, auto_extend=False)
        if not await lock.acquire(blocking=False):
            return None
        await lock.release()
        return 0.0

    rate, _ = await run_for(seconds, tasks, grant)
    return rate


async def burst(redlock: Redlock, n: int, tag: str, clients: list[redis.Redis]) -> dict[str, float]:
    locks: list[Lock] = [
        redlock.lock(f"bench:burst:{tag}:{i}", ttl=TTL, auto_extend=False) for i in range(n)
    ]
    with count_warnings() as acquiring:
        started = time.perf_counter()
        granted = await asyncio.gather(*(lock.acquire(blocking=False) for lock in locks))
        burst_s = time.perf_counter() - started
    held = [lock for lock, ok in zip(locks, granted, strict=True) if ok]
    with count_warnings() as releasing:
        started = time.perf_counter()
        released = await asyncio.gather(*(lock.release() for lock in held), return_exceptions=True)
        release_s = time.perf_counter() - started
        await asyncio.sleep(1.0)  # cleanups of refused attempts and late replies land
    for outcome in released:
        if isinstance(outcome, BaseException) and not isinstance(outcome, LockNotOwned):
            raise outcome
    # A release a quorum refused raises LockNotOwned; one left unconfirmed
    # (replies missing within node_timeout) only logs a warning.
    unconfirmed = sum(1 for o in released if o is not None) + releasing.count(UNCONFIRMED)
    # The epoch record (one per prefix, kept for good) is not a key left behind.
    keys_left = sum(
        1 for client in clients for key in client.scan_iter(count=1000) if b"~epoch" not in key
    )
    for client in clients:
        client.flushall()  # the next burst starts from empty nodes
    for phase, counter in (("acquiring", acquiring), ("releasing", releasing)):
        if counter.total:
            print(f"\n  N={n:,}, {phase}: {counter.total:,} warnings: {counter.summary()}")
    return {
        "n": n,
        "granted_pct": 100.0 * len(held) / n,
        "burst_s": burst_s,
        "release_confirmed_pct": 100.0 * (len(held) - unconfirmed) / len(held) if held else 0.0,
        "release_s": release_s,
        "warnings": acquiring.total + releasing.total,
        "keys_left": keys_left,
    }


async def main(sizes: list[int], rounds: int, seconds: float) -> dict[str, Any]:
    servers = [RedisServer() for _ in range(NODES)]
    for server in servers:
        server.start()
    clients = [redis.Redis(port=server.port) for server in servers]
    sequential: list[float] = []
    concurrent: list[float] = []
    samples: dict[int, list[dict[str, float]]] = {n: [] for n in sizes}
    ideal: dict[int, list[float]] = {n: [] for n in sizes}
    try:
        urls = [server.url for server in servers]
        for round_ in range(rounds):
            for n in sizes:
                # A fresh Redlock per burst (nothing left from the last one),
                # warmed by the baseline: connections open, scripts loaded.
                async with Redlock(urls) as redlock:
                    sequential.append(await throughput(redlock, 1, seconds, f"{round_}:{n}"))
                    rate = await throughput(redlock, 50, seconds, f"{round_}:{n}")
                    concurrent.append(rate)
                    await asyncio.sleep(0.1)
                    samples[n].append(await burst(redlock, n, f"{round_}:{n}", clients))
                    ideal[n].append(n / rate)
                print(".", end="", flush=True)
        print()
    finally:
        for client in clients:
            client.close()
        for server in servers:
            server.stop()
    points = []
    for n in sizes:
        point = {key: statistics.median(s[key] for s in samples[n]) for key in samples[n][0]}
        point["ideal_s"] = statistics.median(ideal[n])
        point["burst_over_ideal"] = point["burst_s"] / point["ideal_s"]
        points.append(point)
    baseline = {
        "sequential_grants_per_s": statistics.median(sequential),
        "concurrent_grants_per_s": statistics.median(concurrent),
        "concurrent_tasks": 50,
    }
    rows = [
        [f"{p['n']:,.0f}", f"{p['granted_pct']:.1f}", f"{p['burst_s']:.3f}",
         f"{p['ideal_s']:.3f}", f"{p['burst_over_ideal']:.1f}x",
         f"{p['release_confirmed_pct']:.1f}", f"{p['release_s']:.3f}",
         f"{p['warnings']:,.0f}", f"{p['keys_left']:,.0f}"]
        for p in points
    ]  # fmt: skip
    print(f"\n{NODES} idle nodes, N concurrent acquire(blocking=False) on free names, "
          f"median of {rounds} round(s)")  # fmt: skip
    print(f"baseline: {baseline['sequential_grants_per_s']:,.0f} grants/s with 1 task, "
          f"{baseline['concurrent_grants_per_s']:,.0f} with 50 (ideal = N / that)")  # fmt: skip
    headers = ["N", "granted %", "burst s", "ideal s", "burst/ideal", "release ok %",
               "release s", "warnings", "keys left"]  # fmt: skip
    print(table(headers, rows))
    return {"baseline": baseline, "burst": points}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000, 5000, 10000])
    parser.add_argument("--large", action="store_true", help="add a burst of 20,000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=1.0, help="each baseline measurement")
    parser.add_argument("--json", type=Path, help="also write the figures here, by loop")
    add_loop_option(parser)
    args = parser.parse_args()
    sizes = args.sizes + ([20000] if args.large else [])
    result = on_each_loop(args.loop, lambda: main(sizes, args.rounds, args.seconds))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
