"""Sequential acquire+release with node 0 of 5 blackholed, against all 5 healthy.

The workload of ``peers.py``'s "blackhole" column, alone: one task, acquire
(one attempt) + release on a fresh name per cycle, ``redis://`` URLs (the
lean driver). Two Redlocks over the same 5 nodes: one reaches them directly
(healthy), the other reaches node 0 through the project's fault proxy,
blackholed (connections accepted, nothing delivered either way) and the
others directly, as ``peers.py`` does. Rounds alternate between the two;
each figure is the median over rounds, and the ratio (blackholed / healthy)
is taken per round, between neighbours, and its median reported: on a
shared machine only same-run, neighbouring figures compare. Also reported:
the client's CPU per pair, and node 0's failed commands per pair.

After the rounds node 0 is healed, the blackholed Redlock runs once more
(node 0 must answer again: its share of grants is counted) and closes, and
every node is checked for lock keys left behind.

Rounds are ``--gap`` seconds apart, as in ``peers.py``, where each Redlock
idles while the other workloads run: a round starts with node 0's
reconnection backoff run out, so its first command sends a probe.

Run: ``python benchmarks/blackhole.py [--seconds 1.0] [--rounds 10]
[--gap 2.5] [--loop asyncio|uvloop|both] [--json FILE]``.
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

from redlock_async import Redlock
from redlock_async.testing import RedisNodes

sys.path.insert(0, str(Path(__file__).parent))
from _common import add_loop_option, count_warnings, on_each_loop, table

TTL = 10.0


async def pairs(redlock: Redlock, seconds: float, tag: str) -> tuple[float, float, int]:
    """Acquire (one attempt) + release for ``seconds``: pairs/s, CPU s per pair, refusals."""
    deadline = time.perf_counter() + seconds
    done = refused = i = 0
    cpu = time.process_time()
    while time.perf_counter() < deadline:
        i += 1
        lock = redlock.lock(f"bench:bh:{tag}:{i}", ttl=TTL, auto_extend=False)
        if not await lock.acquire(blocking=False):
            refused += 1
            continue
        await lock.release()
        done += 1
    cpu = time.process_time() - cpu
    return done / seconds, cpu / max(done, 1), refused


async def main(seconds: float, rounds: int, gap: float) -> dict[str, Any]:
    nodes = RedisNodes().start(5)
    try:
        direct = [f"redis://127.0.0.1:{n.direct_port}/0" for n in nodes]
        nodes[0].blackhole()
        failed = [0]  # node 0's failed commands in the blackholed rounds
        healthy = Redlock(direct)
        black = Redlock([nodes[0].url, *direct[1:]])

        def node_failed(node: str, error: Exception) -> None:
            failed[0] += 1  # every failed vote, of granted attempts too (as the CLI's bench)

        black._core.error_listeners.append(node_failed)
        rates: dict[str, list[float]] = {"healthy": [], "blackholed": []}
        cpus: dict[str, list[float]] = {"healthy": [], "blackholed": []}
        per_pair_failed: list[float] = []
        refused = 0
        with count_warnings() as warnings:
            for redlock in (healthy, black):  # warm up; node 0's first connection stalls
                await pairs(redlock, 1.0, "warm")
            for r in range(rounds):
                for phase, redlock in (("healthy", healthy), ("blackholed", black)):
                    await asyncio.sleep(gap)
                    failed[0] = 0
                    rate, cpu, no = await pairs(redlock, seconds, f"{phase}:{r}")
                    rates[phase].append(rate)
                    cpus[phase].append(cpu)
                    refused += no
                    if phase == "blackholed":
                        per_pair_failed.append(failed[0] / max(rate * seconds, 1))
            await healthy.aclose()
            nodes[0].heal()
            # Healed: node 0 answers a probe (within its backoff, 2 s at most),
            # then holds its share of the grants again.
            healed = 0
            check = nodes[0].client()
            for i in range(40):
                lock = black.lock(f"bench:bh:healed:{i}", ttl=TTL, auto_extend=False)
                if await lock.acquire(blocking=False):
                    healed += bool(check.keys(f"redlock:{{bench:bh:healed:{i}}}*"))
                    await lock.release()
                await asyncio.sleep(0.1)
            await black.aclose()
        await asyncio.sleep(0.5)
        leftover = sum(
            1 for node in nodes for key in node.client().keys("redlock:*") if b"~epoch" not in key
        )
    finally:
        nodes.close()
    ratios = [b / h for h, b in zip(rates["healthy"], rates["blackholed"], strict=True) if h]
    rows = [
        [phase, f"{statistics.median(rates[phase]):,.0f}",
         f"{min(rates[phase]):,.0f}-{max(rates[phase]):,.0f}",
         f"{statistics.median(cpus[phase]) * 1e6:.0f}"]
        for phase in rates
    ]  # fmt: skip
    print(f"5 nodes, 1 task, acquire (one attempt) + release, {rounds} x {seconds}s rounds each, "
          f"{gap}s apart")  # fmt: skip
    print(table(["phase", "pairs/s (median)", "range", "client CPU us/pair"], rows))
    median_ratio = statistics.median(ratios)
    of_medians = statistics.median(rates["blackholed"]) / statistics.median(rates["healthy"])
    print(f"blackholed / healthy: median of per-round ratios {median_ratio:.2f}x, "
          f"of the medians {of_medians:.2f}x (target >= 0.9x)")  # fmt: skip
    print(f"node 0: {statistics.median(per_pair_failed):.2f} failed commands per pair; "
          f"after heal, it held {healed} of 40 grants (one every 0.1 s)")  # fmt: skip
    print(f"refused acquires: {refused}; lock keys left on the nodes afterwards: {leftover}")
    if warnings.total:
        print(f"redlock_async logged {warnings.total} warnings: {warnings.summary()}")
    return {
        "healthy_per_s": statistics.median(rates["healthy"]),
        "blackholed_per_s": statistics.median(rates["blackholed"]),
        "ratio_median_of_rounds": median_ratio,
        "ratio_of_medians": of_medians,
        "ratios": ratios,
        "healthy_cpu_us": statistics.median(cpus["healthy"]) * 1e6,
        "blackholed_cpu_us": statistics.median(cpus["blackholed"]) * 1e6,
        "node0_failed_per_pair": statistics.median(per_pair_failed),
        "healed_grants_of_40": healed,
        "refused": refused,
        "leftover_keys": leftover,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="length of one round")
    parser.add_argument("--rounds", type=int, default=10, help="rounds per phase")
    parser.add_argument(
        "--gap",
        type=float,
        default=2.5,
        help="idle seconds before each round (peers.py's Redlocks idle between their "
        "rounds: node 0's reconnection backoff, 2 s at most, has run out by the next)",
    )
    parser.add_argument("--json", type=Path, help="also write the figures here, by loop")
    add_loop_option(parser)
    args = parser.parse_args()
    figures = on_each_loop(args.loop, lambda: main(args.seconds, args.rounds, args.gap))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
