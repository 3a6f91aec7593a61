"""The sync API's overhead: acquire+release round trips per second from threads.

Contenders, measured in the same run, in interleaved rounds (each figure is
the median over rounds; only same-run ratios mean anything):

- ``redlock_async.sync`` (``lock.acquire()`` then ``lock.release()`` from a
  thread, through the loop thread) against the async API (the same calls
  awaited in one task) on the same 3 nodes: one caller, and 8 callers
  (threads against tasks) on distinct names;
- on 1 node, the sync API against redis-py's own ``redis.Redis().lock()``
  (``SET NX PX`` and a compare-and-delete script on one server: **not a
  quorum**, no renewal, no cleanup of partial grants) and against the async
  API on that node. The 1-node rows are the like-for-like comparison with
  redis-py; the 3-node rows show what a quorum costs on top.

Every lock is a default one (``ttl=10``, auto-extended), released at once.

Run: ``python benchmarks/sync.py [--seconds 1.0] [--rounds 3] [--callers 8] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import redis

from redlock_async import Redlock as AsyncRedlock
from redlock_async.sync import Redlock
from redlock_async.testing import RedisServer

sys.path.insert(0, str(Path(__file__).parent))
from _common import table

Measure = Callable[[float], float]  # seconds -> grants per second


def threads_for(seconds: float, callers: int, once: Callable[[int, int], None]) -> float:
    """``callers`` threads each calling ``once(caller, i)`` for ``seconds``: calls/s."""
    counts = [0] * callers
    deadline = time.perf_counter() + seconds

    def loop(caller: int) -> None:
        i = 0
        while time.perf_counter() < deadline:
            once(caller, i)
            i += 1
        counts[caller] = i

    started = time.perf_counter()
    pool = [threading.Thread(target=loop, args=(c,)) for c in range(callers)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return sum(counts) / (time.perf_counter() - started)


def sync_contender(redlock: Redlock, callers: int) -> Measure:
    def once(caller: int, i: int) -> None:
        lock = redlock.lock(f"bench:sync:{caller}")
        if lock.acquire(blocking=False):
            lock.release()

    return lambda seconds: threads_for(seconds, callers, once)


def redis_py_contender(client: redis.Redis, callers: int) -> Measure:
    def once(caller: int, i: int) -> None:
        lock = client.lock(f"bench:redis-py:{caller}", timeout=10)
        if lock.acquire(blocking=False):
            lock.release()

    return lambda seconds: threads_for(seconds, callers, once)


def async_contender(runner: asyncio.Runner, urls: list[str], callers: int) -> Measure:
    redlock = runner.run(_make_async(urls))

    async def tasks_for(seconds: float) -> float:
        counts = [0] * callers
        deadline = time.perf_counter() + seconds

        async def loop(caller: int) -> None:
            i = 0
            while time.perf_counter() < deadline:
                lock = redlock.lock(f"bench:async:{caller}")
                if await lock.acquire(blocking=False):
                    await lock.release()
                i += 1
            counts[caller] = i

        started = time.perf_counter()
        await asyncio.gather(*(loop(c) for c in range(callers)))
        return sum(counts) / (time.perf_counter() - started)

    return lambda seconds: runner.run(tasks_for(seconds))


async def _make_async(urls: list[str]) -> AsyncRedlock:
    return AsyncRedlock(urls)


def main(seconds: float, rounds: int, callers: int) -> dict[str, float]:
    servers = [RedisServer() for _ in range(3)]
    for server in servers:
        server.start()
    urls = [server.url for server in servers]
    one = urls[:1]
    client = redis.Redis.from_url(one[0])
    runner = asyncio.Runner()
    syncs = [Redlock(urls), Redlock(one)]
    try:
        contenders: dict[str, Measure] = {
            "async, 3 nodes, 1 task": async_contender(runner, urls, 1),
            "sync, 3 nodes, 1 thread": sync_contender(syncs[0], 1),
            f"async, 3 nodes, {callers} tasks": async_contender(runner, urls, callers),
            f"sync, 3 nodes, {callers} threads": sync_contender(syncs[0], callers),
            "async, 1 node, 1 task": async_contender(runner, one, 1),
            "sync, 1 node, 1 thread": sync_contender(syncs[1], 1),
            "redis-py lock, 1 node, 1 thread": redis_py_contender(client, 1),
            f"sync, 1 node, {callers} threads": sync_contender(syncs[1], callers),
            f"redis-py lock, 1 node, {callers} threads": redis_py_contender(client, callers),
        }
        for measure in contenders.values():
            measure(0.2)  # warm-up: connections, scripts loaded, threads started
        rates: dict[str, list[float]] = {name: [] for name in contenders}
        for _ in range(rounds):
            for name, measure in contenders.items():
                rates[name].append(measure(seconds))
    finally:
        for redlock in syncs:
            redlock.close()
        runner.close()
        client.close()
        for server in servers:
            server.stop()
    median = {name: statistics.median(values) for name, values in rates.items()}
    baselines = {
        "async, 3 nodes, 1 task": "-",
        "sync, 3 nodes, 1 thread": "async, 3 nodes, 1 task",
        f"async, 3 nodes, {callers} tasks": "-",
        f"sync, 3 nodes, {callers} threads": f"async, 3 nodes, {callers} tasks",
        "async, 1 node, 1 task": "-",
        "sync, 1 node, 1 thread": "redis-py lock, 1 node, 1 thread",
        "redis-py lock, 1 node, 1 thread": "-",
        f"sync, 1 node, {callers} threads": f"redis-py lock, 1 node, {callers} threads",
        f"redis-py lock, 1 node, {callers} threads": "-",
    }
    rows = []
    for name, rate in median.items():
        base = baselines[name]
        ratio = "" if base == "-" else f"{rate / median[base]:.2f} x {base}"
        spread = f"{min(rates[name]):,.0f}-{max(rates[name]):,.0f}"
        rows.append([name, f"{rate:,.0f}", spread, ratio])
    print(f"acquire+release per second, median of {rounds} rounds of {seconds} s")
    print(table(["contender", "grants/s", "range", "ratio"], rows))
    ratio_async = median["sync, 1 node, 1 thread"] / median["async, 1 node, 1 task"]
    print(f"sync / async on 1 node, 1 caller: {ratio_async:.2f}")
    return median


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="length of one round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per contender")
    parser.add_argument("--callers", type=int, default=8, help="threads / tasks when concurrent")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    figures = main(args.seconds, args.rounds, args.callers)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
