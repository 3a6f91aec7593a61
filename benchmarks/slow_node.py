"""Acquire latency with one node slowed down, against the same nodes healthy.

5 local nodes, each behind the fault proxy (so both phases pay the same
proxy hop). Rounds alternate: healthy, then node 0 delayed 20 ms each way.
The decision is made at quorum, so the slow node should cost (almost)
nothing. Afterwards every node is checked for leftover lock keys.

Run: ``python benchmarks/slow_node.py [--seconds 1.0] [--rounds 5]
[--loop asyncio|uvloop|both]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

from redlock_async import Redlock
from redlock_async.testing import RedisNodes

sys.path.insert(0, str(Path(__file__).parent))
from _common import Result, add_loop_option, on_each_loop, run_for, table


async def main(seconds: float, rounds: int, delay: float) -> dict[str, float]:
    nodes = RedisNodes().start(5)
    try:
        async with Redlock(nodes.urls) as redlock:

            async def grant(_: int) -> float | None:
                lock = redlock.lock("bench:slow", ttl=10.0, auto_extend=False)
                started = time.perf_counter()
                ok = await lock.acquire(blocking=False)
                latency = time.perf_counter() - started
                if not ok:
                    return None
                await lock.release()
                return latency

            results = {"healthy": Result(), f"node 0 +{delay * 1000:.0f} ms each way": Result()}
            await run_for(0.3, 1, grant)  # warm up
            for _ in range(rounds):
                for phase, result in results.items():
                    nodes[0].delay(0.0 if phase == "healthy" else delay)
                    await asyncio.sleep(0.1)
                    rate, latencies = await run_for(seconds, 1, grant)
                    result.rates.append(rate)
                    result.latencies.extend(latencies)
            nodes[0].heal()
        await asyncio.sleep(0.5)  # let the slow node's last commands land
        leftover = sum(
            1 for node in nodes for key in node.client().keys("redlock:*") if b"~epoch" not in key
        )
    finally:
        nodes.close()
    healthy, slow = results.values()
    rows = [
        [phase, f"{r.rate:,.0f}", f"{r.p(50):.2f}", f"{r.p(99):.2f}"]
        for phase, r in results.items()
    ]
    print(f"5 nodes behind the proxy, sequential acquire+release, {rounds} x {seconds}s rounds")
    print(table(["phase", "grants/s", "acquire p50 ms", "acquire p99 ms"], rows))
    p50, p99 = slow.p(50) / healthy.p(50), slow.p(99) / healthy.p(99)
    print(f"slow / healthy: p50 {p50:.2f}x, p99 {p99:.2f}x (target <= 1.2x)")
    print(f"lock keys left on the nodes afterwards: {leftover}")
    return {"p50_ratio": p50, "p99_ratio": p99, "leftover_keys": leftover,
            "healthy_p50_ms": healthy.p(50), "healthy_p99_ms": healthy.p(99),
            "slow_p50_ms": slow.p(50), "slow_p99_ms": slow.p(99)}  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--delay", type=float, default=0.020, help="seconds, each way")
    parser.add_argument("--json", type=Path, help="also write the figures here, by loop")
    add_loop_option(parser)
    args = parser.parse_args()
    figures = on_each_loop(args.loop, lambda: main(args.seconds, args.rounds, args.delay))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
