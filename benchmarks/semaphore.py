"""Semaphore throughput: one semaphore of limit L against L plain locks.

3 local nodes. Tasks loop: acquire (blocking, wake-ups on), release at once,
again. Contenders, in the same run, interleaved round by round:

- ``semaphore``: ``redlock.semaphore(name, L)``;
- ``locks, random``: each acquire picks one of L lock names at random (the
  usual way to spread load over L locks without a semaphore);
- ``locks, round robin``: the names in turn, one counter for the process.

With as many tasks as the limit (everyone can hold at once) it shows the
semaphore's own cost per grant; with four times as many, how it shares
slots under contention. Ratios are semaphore / locks (higher is better for
the semaphore).

Run: ``python benchmarks/semaphore.py [--limits 1,3,10] [--seconds 1.5]
[--rounds 2] [--loop asyncio|uvloop|both]``.
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

from redlock_async import Lock, Redlock
from redlock_async.testing import RedisServer

sys.path.insert(0, str(Path(__file__).parent))
from _common import Result, add_loop_option, on_each_loop, run_for, table

Factory = Callable[[Redlock, int], Lock]


def contenders(limit: int) -> dict[str, Factory]:
    rng = random.Random(1)
    turn = itertools.count()
    return {
        "semaphore": lambda redlock, _: redlock.semaphore("bench:sem", limit, auto_extend=False),
        "locks, random": lambda redlock, _: redlock.lock(
            f"bench:lock:{rng.randrange(limit)}", auto_extend=False
        ),
        "locks, round robin": lambda redlock, _: redlock.lock(
            f"bench:lock:{next(turn) % limit}", auto_extend=False
        ),
    }


async def measure(redlock: Redlock, make: Factory, tasks: int, seconds: float) -> Result:
    async def grant(index: int) -> float | None:
        lock = make(redlock, index)
        started = time.perf_counter()
        if not await lock.acquire(timeout=10.0):
            return None
        latency = time.perf_counter() - started
        await lock.release()
        return latency

    rate, latencies = await run_for(seconds, tasks, grant)
    return Result([rate], latencies)


async def main(limits: list[int], seconds: float, rounds: int) -> None:
    servers = [RedisServer() for _ in range(3)]
    for server in servers:
        server.start()
    rows = []
    try:
        async with Redlock([s.url for s in servers]) as redlock:
            for limit in limits:
                for tasks in (limit, 4 * limit):
                    makers = contenders(limit)
                    results = {name: Result() for name in makers}
                    for _ in range(rounds):  # interleaved: drift hits every contender alike
                        for name, make in makers.items():
                            one = await measure(redlock, make, tasks, seconds)
                            results[name].rates += one.rates
                            results[name].latencies += one.latencies
                    sem = results["semaphore"]
                    for name, result in results.items():
                        ratio = sem.rate / result.rate if result.rate else 0.0
                        rows.append(
                            [f"L={limit} tasks={tasks}", name, f"{result.rate:,.0f}",
                             f"{result.p(50):.2f}", f"{result.p(99):.2f}",
                             "" if name == "semaphore" else f"{ratio:.2f}"]
                        )  # fmt: skip
    finally:
        for server in servers:
            server.stop()
    print(f"3 nodes, acquire + release in a loop, median of {rounds} rounds of {seconds}s")
    print(table(["workload", "contender", "grants/s", "p50 ms", "p99 ms", "sem/this"], rows))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--limits", default="1,3,10", help="comma-separated limits")
    parser.add_argument("--seconds", type=float, default=1.5, help="per round and contender")
    parser.add_argument("--rounds", type=int, default=2)
    add_loop_option(parser)
    args = parser.parse_args()
    limits = [int(x) for x in args.limits.split(",")]
    on_each_loop(args.loop, lambda: main(limits, args.seconds, args.rounds))
