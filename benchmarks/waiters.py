"""Draining N waiters on one name: time, grants/s, script calls per grant on a node.

3 local nodes. A holder takes the lock; N tasks in one process then call
``acquire()`` on the same name (each refused once: the lock is held). Once
every waiter has made its first attempt, the holder releases, and each waiter,
granted, releases at once (``--work`` seconds later). Measured from that
release to the last grant: the drain time and grants/s. Script calls
(``EVALSHA`` + ``EVAL``, from ``INFO commandstats``) on the first node, from
before the waiters start to the end, divided by N: script calls per grant on
a node. The floor is 2 (one winning attempt, one release); each waiter's
first, refused attempt adds one.

The same-run baseline: one task taking and releasing the lock N times in a
row, with nobody waiting (2 script calls per grant per node, the rate of an
uncontended handoff).

Run: ``python benchmarks/waiters.py [--waiters 10 100 1000 2000] [--large]
[--readers] [--fair] [--work S] [--loop asyncio|uvloop|both] [--json FILE]``.
``--large`` adds 5,000 and 10,000 waiters. Fair waiters (``--fair``) also
refresh their queue entry (an attempt) every third of a heartbeat while they
wait, so their calls per grant grow with the drain time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import redis

from redlock_async import Lock, Redlock
from redlock_async.testing import RedisServer

sys.path.insert(0, str(Path(__file__).parent))
from _common import add_loop_option, on_each_loop, table

NAME = "bench:waiters"


def script_calls(client: redis.Redis) -> int:
    stats: dict[str, Any] = client.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("evalsha", "eval"))


async def calls_reach(client: redis.Redis, target: int, limit: float) -> None:
    """Wait until the node has run ``target`` script calls (or ``limit`` seconds)."""
    deadline = time.monotonic() + limit
    # Polled: the count lives on the server, nothing here can be awaited for it.
    while script_calls(client) < target and time.monotonic() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.01)


async def drain(
    urls: list[str],
    counter: redis.Redis,
    n: int,
    work: float,
    readers: bool,
    limit: float,
    fair: bool = False,
) -> dict[str, float]:
    async with Redlock(urls) as redlock:
        rw = redlock.rwlock(NAME)
        holder: Lock
        if readers:
            holder = rw.write(ttl=30.0, auto_extend=False)
        else:
            holder = redlock.lock(NAME, ttl=30.0, auto_extend=False)
        assert await holder.acquire()
        before = script_calls(counter)
        granted = 0
        done = asyncio.Event()

        async def waiter() -> None:
            nonlocal granted
            lock: Lock
            if readers:
                lock = rw.read(ttl=30.0, auto_extend=False, fair=fair)
            else:
                lock = redlock.lock(NAME, ttl=30.0, auto_extend=False, fair=fair)
            if await lock.acquire(timeout=limit):
                granted += 1
                if work:
                    await asyncio.sleep(work)
                await lock.release()
                if granted == n:
                    done.set()

        tasks = [asyncio.ensure_future(waiter()) for _ in range(n)]
        # Every waiter's first attempt has reached the node: all are waiting.
        await calls_reach(counter, before + n, limit)
        started = time.perf_counter()
        await holder.release()
        with contextlib.suppress(TimeoutError):  # reported: granted < waiters
            await asyncio.wait_for(done.wait(), limit)
        took = time.perf_counter() - started
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        calls = script_calls(counter) - before
    return {
        "waiters": n,
        "granted": granted,
        "drain_s": took,
        "grants_per_s": granted / took,
        "calls_per_grant": calls / max(1, granted),
    }


async def sequential(urls: list[str], counter: redis.Redis, n: int) -> dict[str, float]:
    async with Redlock(urls) as redlock:
        before = script_calls(counter)
        started = time.perf_counter()
        for _ in range(n):
            lock = redlock.lock(NAME, ttl=30.0, auto_extend=False)
            assert await lock.acquire()
            await lock.release()
        took = time.perf_counter() - started
        calls = script_calls(counter) - before
    return {"grants": n, "s": took, "grants_per_s": n / took, "calls_per_grant": calls / n}


async def main(
    sizes: list[int], work: float, readers: bool, limit: float, fair: bool
) -> dict[str, list[dict[str, float]]]:
    servers = [RedisServer() for _ in range(3)]
    for server in servers:
        server.start()
    figures: dict[str, list[dict[str, float]]] = {"drain": [], "baseline": []}
    try:
        urls = [s.url for s in servers]
        counter = redis.Redis.from_url(urls[0])
        for n in sizes:
            figures["baseline"].append(await sequential(urls, counter, min(n, 2000)))
            figures["drain"].append(await drain(urls, counter, n, work, readers, limit, fair))
            print(".", end="", flush=True)
        counter.close()
    finally:
        for server in servers:
            server.stop()
    rows = [
        [
            f"{d['waiters']:,}",
            f"{d['granted']:,}",
            f"{d['drain_s']:.3f}",
            f"{d['grants_per_s']:,.0f}",
            f"{d['calls_per_grant']:.2f}",
            f"{b['grants_per_s']:,.0f}",
            f"{b['calls_per_grant']:.2f}",
        ]
        for d, b in zip(figures["drain"], figures["baseline"], strict=True)
    ]
    kind = ("fair " if fair else "") + ("readers behind a writer" if readers else "exclusive")
    held = f"{work * 1000:g} ms"
    print(f"\n3 nodes, N waiters on one name ({kind}), each grant held {held}")
    print(
        table(
            ["waiters", "granted", "drain s", "grants/s", "calls/grant",
             "baseline grants/s", "baseline calls/grant"],
            rows,
        )
    )  # fmt: skip
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--waiters", type=int, nargs="+", default=[10, 100, 1000, 2000])
    parser.add_argument("--large", action="store_true", help="add 5,000 and 10,000 waiters")
    parser.add_argument("--work", type=float, default=0.0, help="seconds each grant is held")
    parser.add_argument("--readers", action="store_true", help="readers waiting for a writer")
    parser.add_argument("--fair", action="store_true", help="waiters with fair=True")
    parser.add_argument("--limit", type=float, default=120.0, help="give up a drain after this")
    parser.add_argument("--json", type=Path, help="also write the figures here, by loop")
    add_loop_option(parser)
    args = parser.parse_args()
    sizes = args.waiters + ([5000, 10000] if args.large else [])
    result = on_each_loop(
        args.loop, lambda: main(sizes, args.work, args.readers, args.limit, args.fair)
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
