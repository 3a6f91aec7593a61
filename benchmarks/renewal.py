"""Hold 10,000 auto-extended locks in one process and watch the renewals.

3 local nodes, ttl 3 s (so a renewal per lock about every second). Reports:
the process's CPU share while holding, memory per held lock (RSS growth),
renewal lag (how late each renewal ran against its schedule: p50/p99/max),
and how many locks were lost (must be 0).

Run: ``python benchmarks/renewal.py [--locks 10000] [--hold 20] [--ttl 3]
[--loop asyncio|uvloop|both]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import redlock_async._renewal as renew
from redlock_async import Lock, Redlock
from redlock_async.testing import RedisServer

sys.path.insert(0, str(Path(__file__).parent))
from _common import add_loop_option, on_each_loop, percentile, table


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


async def main(n_locks: int, hold: float, ttl: float) -> dict[str, Any]:
    servers = [RedisServer() for _ in range(3)]
    for server in servers:
        server.start()
    lags: list[float] = []
    original = renew._tick

    def timed_tick(ref: Any, grant: Any, due: float) -> None:
        lags.append(asyncio.get_running_loop().time() - due)
        original(ref, grant, due)

    renew._tick = timed_tick
    try:
        async with Redlock([s.url for s in servers]) as redlock:
            # Warm up connections before measuring memory.
            probe = redlock.lock("bench:probe", ttl=ttl)
            await probe.acquire()
            await probe.release()
            rss_before = rss_bytes()
            locks: list[Lock] = [redlock.lock(f"bench:held:{i}", ttl=ttl) for i in range(n_locks)]
            started = time.perf_counter()
            for batch in range(0, n_locks, 500):
                ok = await asyncio.gather(
                    *(lk.acquire(blocking=False) for lk in locks[batch : batch + 500])
                )
                assert all(ok), "a lock could not be acquired"
            acquired_in = time.perf_counter() - started
            await asyncio.sleep(ttl)  # one full renewal cycle before measuring
            lags.clear()
            rss_held = rss_bytes()
            cpu0, wall0 = time.process_time(), time.perf_counter()
            await asyncio.sleep(hold)
            cpu_share = (time.process_time() - cpu0) / (time.perf_counter() - wall0)
            lost = sum(1 for lk in locks if lk.lost or not lk.held)
            renewals = len(lags)
            for batch in range(0, n_locks, 500):
                await asyncio.gather(*(lk.release() for lk in locks[batch : batch + 500]))
    finally:
        renew._tick = original
        for server in servers:
            server.stop()
    figures = {
        "locks": n_locks,
        "ttl_s": ttl,
        "hold_s": hold,
        "acquire_all_s": acquired_in,
        "cpu_share": cpu_share,
        "bytes_per_lock": (rss_held - rss_before) / n_locks,
        "renewals": renewals,
        "renewals_per_s": renewals / hold,
        "lag_p50_ms": percentile(lags, 50) * 1000,
        "lag_p99_ms": percentile(lags, 99) * 1000,
        "lag_max_ms": max(lags, default=0.0) * 1000,
        "lost": lost,
    }
    print(f"{n_locks:,} auto-extended locks, ttl {ttl}s, 3 nodes, held {hold}s")
    print(table(["figure", "value"], [
        ["acquire all (s)", f"{acquired_in:.2f}"],
        ["CPU share of one core while holding", f"{cpu_share:.1%}"],
        ["memory per held lock (RSS)", f"{figures['bytes_per_lock']:,.0f} B"],
        ["renewals run", f"{renewals:,} ({figures['renewals_per_s']:,.0f}/s)"],
        ["renewal lag p50 / p99 / max", f"{figures['lag_p50_ms']:.1f} / "
         f"{figures['lag_p99_ms']:.1f} / {figures['lag_max_ms']:.1f} ms"],
        ["locks lost", str(lost)],
    ]))  # fmt: skip
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--locks", type=int, default=10_000)
    parser.add_argument("--hold", type=float, default=20.0, help="seconds held while measuring")
    parser.add_argument("--ttl", type=float, default=3.0)
    parser.add_argument("--json", type=Path, help="also write the figures here, by loop")
    add_loop_option(parser)
    args = parser.parse_args()
    result = on_each_loop(args.loop, lambda: main(args.locks, args.hold, args.ttl))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
