"""Hold 10,000 to 100,000 auto-extended locks in one process and watch the renewals.

3 local nodes, ttl 10 s (a renewal per lock about every 3 s). Each point runs
in a fresh child process, so that its RSS growth is its own, and reports:
the process's CPU share of one core while holding, the nodes' (average per
node), memory per held lock (RSS growth), renewal lag (how late each renewal
went out against its schedule: p50/p99/max), renewals per second, and the
locks lost: told (``lost`` set, ``on_lost`` called) and silent (no longer
held, never told: must be 0).

Same-run baselines, each point on the same loop: the same number of locks
held without renewing (``auto_extend=False``: what holding them costs
without renewals), and 10,000 locks renewed one grant per call (the path
for Redis Cluster nodes, and what every renewal cost before batching).

Run: ``python benchmarks/renewal.py [--full | --locks N [N ...]] [--hold 20]
[--ttl 10] [--loop asyncio|uvloop|both] [--json FILE]``. Default points:
10,000, 50,000 and 100,000 locks; ``--full``: 10,000, 20,000, 30,000,
50,000, 75,000 and 100,000.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import redlock_async._core._renewal as renewal
from redlock_async import Lock, Redlock
from redlock_async.testing import RedisServer

sys.path.insert(0, str(Path(__file__).parent))
from _common import add_loop_option, on_each_loop, percentile, table

QUICK = [10_000, 50_000, 100_000]
FULL = [10_000, 20_000, 30_000, 50_000, 75_000, 100_000]
BASELINE_LOCKS = 10_000  # the one-grant-per-call baseline
IDLE_HOLD = 5.0  # seconds: holding locks that do not renew costs next to nothing
GATHER = 500  # acquires and releases in flight at once


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU of process ``pid`` so far."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def hold(n_locks: int, mode: str, hold_s: float, ttl: float) -> dict[str, Any]:
    """One point, in this process: hold ``n_locks`` (``mode``: batched, one-by-one, idle)."""
    servers = [RedisServer() for _ in range(3)]
    for server in servers:
        server.start()
    lags: list[float] = []
    original = renewal._sending

    def timed(due: float, renewers: list[Any]) -> None:
        lags.extend([asyncio.get_running_loop().time() - due] * len(renewers))

    renewal._sending = timed
    told = 0

    def on_lost(_: Lock) -> None:
        nonlocal told
        told += 1

    renewing = mode != "idle"
    try:
        async with Redlock([s.url for s in servers]) as redlock:
            if mode == "one-by-one":
                # As with a Redis Cluster among the nodes: a call per grant.
                redlock._holdings.renewals.batching = False
            probe = redlock.lock("bench:probe", ttl=ttl)  # connections up before measuring
            await probe.acquire()
            await probe.release()
            rss_before = rss_bytes()
            # Locks that do not renew must outlive the run.
            lock_ttl = ttl if renewing else ttl + hold_s + 600.0
            locks = [
                redlock.lock(f"bench:held:{i}", ttl=lock_ttl, auto_extend=renewing, on_lost=on_lost)
                for i in range(n_locks)
            ]
            started = time.perf_counter()
            for batch in range(0, n_locks, GATHER):
                # Retried, not one attempt: a burst may fail a vote on a busy
                # machine, and every lock must be held before measuring.
                ok = await asyncio.gather(
                    *(lk.acquire(timeout=30.0) for lk in locks[batch : batch + GATHER])
                )
                assert all(ok), "a lock could not be acquired"
            acquired_in = time.perf_counter() - started
            if renewing:
                await asyncio.sleep(ttl)  # a full renewal cycle before measuring
            lags.clear()
            rss_held = rss_bytes()
            pids = [server.pid for server in servers]
            nodes0 = sum(cpu_seconds(pid) for pid in pids)
            cpu0, wall0 = time.process_time(), time.perf_counter()
            await asyncio.sleep(hold_s)
            wall = time.perf_counter() - wall0
            cpu_share = (time.process_time() - cpu0) / wall
            node_share = (sum(cpu_seconds(pid) for pid in pids) - nodes0) / wall / len(servers)
            silent = sum(1 for lk in locks if not lk.held and not lk.lost)
            lost_told = told
            renewals = len(lags)
            for batch in range(0, n_locks, GATHER):
                held = [lk for lk in locks[batch : batch + GATHER] if lk.held]
                await asyncio.gather(*(lk.release() for lk in held), return_exceptions=True)
    finally:
        renewal._sending = original
        for server in servers:
            server.stop()
    return {
        "locks": n_locks,
        "mode": mode,
        "ttl_s": lock_ttl,
        "hold_s": hold_s,
        "acquire_all_s": acquired_in,
        "cpu_share": cpu_share,
        "node_cpu_share": node_share,
        "bytes_per_lock": (rss_held - rss_before) / n_locks,
        "renewals": renewals,
        "renewals_per_s": renewals / hold_s,
        "lag_p50_ms": percentile(lags, 50) * 1000,
        "lag_p99_ms": percentile(lags, 99) * 1000,
        "lag_max_ms": max(lags, default=0.0) * 1000,
        "lost_told": lost_told,
        "lost_silent": silent,
    }


def point(loop: str, mode: str, n_locks: int, hold_s: float, ttl: float) -> dict[str, Any]:
    """Run one point in a fresh child process (its memory is its own)."""
    command = [sys.executable, __file__, "--child", mode, str(n_locks)]
    command += ["--hold", str(hold_s), "--ttl", str(ttl), "--loop", loop]
    print(f"  {mode}: {n_locks:,} locks ...", end="", flush=True)
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        print(" failed")
        sys.stderr.write(done.stdout + done.stderr)
        raise SystemExit(f"the {mode} point at {n_locks} locks failed")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    print(f" {figures['cpu_share']:.1%} CPU")
    return figures


def lag(figures: dict[str, Any]) -> str:
    return (
        f"{figures['lag_p50_ms']:.0f} / {figures['lag_p99_ms']:.0f} / {figures['lag_max_ms']:.0f}"
    )


def report(result: dict[str, Any]) -> None:
    rows = []
    for renewed, idle in zip(result["points"], result["not_renewing"], strict=True):
        rows.append([
            f"{renewed['locks']:,}",
            f"{renewed['cpu_share']:.1%}",
            f"{idle['cpu_share']:.1%}",
            f"{renewed['node_cpu_share']:.1%}",
            f"{renewed['bytes_per_lock']:,.0f}",
            f"{idle['bytes_per_lock']:,.0f}",
            f"{renewed['renewals_per_s']:,.0f}",
            lag(renewed),
            f"{renewed['lost_told']} / {renewed['lost_silent']}",
        ])  # fmt: skip
    for single in result["one_by_one"]:
        rows.append([
            f"{single['locks']:,} one by one",
            f"{single['cpu_share']:.1%}",
            "",
            f"{single['node_cpu_share']:.1%}",
            f"{single['bytes_per_lock']:,.0f}",
            "",
            f"{single['renewals_per_s']:,.0f}",
            lag(single),
            f"{single['lost_told']} / {single['lost_silent']}",
        ])  # fmt: skip
    headers = [
        "locks", "CPU", "CPU not renewing", "node CPU", "B/lock", "B/lock not renewing",
        "renewals/s", "lag p50/p99/max ms", "lost told / silent",
    ]  # fmt: skip
    print(f"\nauto-extended locks, ttl {result['ttl_s']}s, 3 nodes, held {result['hold_s']}s")
    print(table(headers, rows))


def sweep(loop: str, counts: list[int], hold_s: float, ttl: float) -> dict[str, Any]:
    result: dict[str, Any] = {"ttl_s": ttl, "hold_s": hold_s}
    result["points"] = [point(loop, "batched", n, hold_s, ttl) for n in counts]
    result["not_renewing"] = [point(loop, "idle", n, IDLE_HOLD, ttl) for n in counts]
    result["one_by_one"] = [point(loop, "one-by-one", BASELINE_LOCKS, hold_s, ttl)]
    report(result)
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--full", action="store_true", help=f"sweep {FULL}")
    which.add_argument("--locks", type=int, nargs="+", help=f"these counts (default {QUICK})")
    parser.add_argument("--hold", type=float, default=20.0, help="seconds held while measuring")
    parser.add_argument("--ttl", type=float, default=10.0)
    parser.add_argument("--json", type=Path, help="also write the figures here, by loop")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "LOCKS"), help=argparse.SUPPRESS)
    add_loop_option(parser)
    args = parser.parse_args()
    if args.child:
        mode, n = args.child[0], int(args.child[1])
        figures = on_each_loop(args.loop, lambda: hold(n, mode, args.hold, args.ttl))
        print(json.dumps(figures[args.loop]))
        raise SystemExit(0)
    counts = FULL if args.full else args.locks or QUICK
    loops = ["asyncio", "uvloop"] if args.loop == "both" else [args.loop]
    results: dict[str, Any] = {}
    for loop in loops:
        print(f"\n=== event loop: {loop}")
        results[loop] = sweep(loop, counts, args.hold, args.ttl)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
