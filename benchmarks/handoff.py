"""Handoff gap: from a holder's release returning to the next waiter's grant.

5 local nodes, 8 tasks contending for one lock; each holds it briefly, then
releases. The gap is measured on the monotonic clock between the end of one
``release()`` and the next ``acquire()`` returning True. Rounds alternate
between waiters woken by the release (pub/sub) and polling (wake-ups off,
retry delay 0.2 s + jitter 0.2 s, the library's defaults).

Run: ``python benchmarks/handoff.py [--grants 200] [--rounds 3]
[--loop asyncio|uvloop|both]``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

from redlock_async import Redlock
from redlock_async.testing import RedisServer

sys.path.insert(0, str(Path(__file__).parent))
from _common import add_loop_option, on_each_loop, percentile, table


async def run(urls: list[str], wake: bool, grants: int, waiters: int) -> list[float]:
    gaps: list[float] = []
    released_at: list[float] = []
    holders: list[int] = []
    remaining = grants

    async with Redlock(urls, wake_on_release=wake) as redlock:

        async def worker(me: int) -> None:
            nonlocal remaining
            while remaining > 0:
                lock = redlock.lock("bench:handoff", ttl=10.0, auto_extend=False)
                if not await lock.acquire(timeout=60.0):
                    continue
                now = time.monotonic()
                if holders and holders[-1] != me:  # a handoff to a task that was waiting
                    gaps.append(now - released_at[-1])
                holders.append(me)
                remaining -= 1
                await asyncio.sleep(0.001)  # the work
                await lock.release()
                released_at.append(time.monotonic())
                # Step back before contending again, so the lock passes to a
                # task that was waiting rather than straight back to us.
                await asyncio.sleep(0.01)

        await asyncio.gather(*(worker(i) for i in range(waiters)))
    return gaps


async def main(grants: int, rounds: int, waiters: int) -> None:
    servers = [RedisServer() for _ in range(5)]
    for server in servers:
        server.start()
    results: dict[str, list[float]] = {"woken by release": [], "polling": []}
    try:
        urls = [s.url for s in servers]
        for _ in range(rounds):
            results["woken by release"] += await run(urls, True, grants, waiters)
            results["polling"] += await run(urls, False, max(20, grants // 10), waiters)
    finally:
        for server in servers:
            server.stop()
    rows = [
        [mode, str(len(gaps)), f"{percentile(gaps, 50) * 1000:.2f}",
         f"{percentile(gaps, 99) * 1000:.2f}", f"{max(gaps) * 1000:.2f}"]
        for mode, gaps in results.items()
    ]  # fmt: skip
    print(f"5 nodes, {waiters} contending tasks, handoff gap (release returned -> next grant)")
    print(table(["mode", "handoffs", "p50 ms", "p99 ms", "max ms"], rows))
    woken = results["woken by release"]
    p50, p99 = percentile(woken, 50) * 1000, percentile(woken, 99) * 1000
    ok = p50 < 5 and p99 < 20
    print(f"target p50 < 5 ms and p99 < 20 ms: {'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--grants", type=int, default=200, help="per round with wake-ups")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--waiters", type=int, default=8)
    add_loop_option(parser)
    args = parser.parse_args()
    on_each_loop(args.loop, lambda: main(args.grants, args.rounds, args.waiters))
