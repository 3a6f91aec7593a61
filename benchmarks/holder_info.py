"""What holder info costs: grants with ``holder_info=True`` against ``holder_info=False``.

Holder info (issue 26) writes ``@HOST:PID:MS`` after each token's random
part: no command is added, but every command that carries a token (acquire,
release, each renewal) carries about 20 bytes plus the host name more, and
each token costs a clock read and a format. Three figures, each measured on
and off in the same run:

- acquire+release throughput and acquire p50 on local nodes, one task and
  ``--tasks`` tasks on distinct names, the two contenders interleaved round
  by round (a median over rounds: the machine is noisy), with this
  process's CPU per grant;
- the token source alone (``timeit``, best of 7): ns per token;
- bytes per token, which is also the growth of each batched renewal entry.

Run: ``python benchmarks/holder_info.py [--seconds 1.0] [--rounds 5]
[--tasks 50] [--nodes 3] [--loop asyncio|uvloop|both]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import timeit
from collections.abc import Awaitable, Callable
from pathlib import Path

from redlock_async import Redlock
from redlock_async._core._holderinfo import HolderTokens
from redlock_async._engine import TokenPool
from redlock_async.testing import RedisServer

sys.path.insert(0, str(Path(__file__).parent))
from _common import Result, add_loop_option, on_each_loop, run_for, table

LABELS = {False: "holder_info=False", True: "holder_info=True"}


def _grant(redlock: Redlock, prefix: str) -> Callable[[int], Awaitable[float | None]]:
    async def grant(index: int) -> float | None:
        lock = redlock.lock(f"{prefix}:{index}", ttl=10.0, auto_extend=False)
        started = time.perf_counter()
        if not await lock.acquire(blocking=False):
            return None
        latency = time.perf_counter() - started
        await lock.release()
        return latency

    return grant


async def _throughput(urls: list[str], args: argparse.Namespace) -> list[list[str]]:
    rows = []
    for tasks in (1, args.tasks):
        redlocks = {on: Redlock(urls, holder_info=on) for on in (False, True)}
        grants = {on: _grant(redlock, f"bench:{on}") for on, redlock in redlocks.items()}
        results = {on: Result() for on in redlocks}
        cpu: dict[bool, list[float]] = {on: [] for on in redlocks}
        for grant in grants.values():
            await run_for(0.2, tasks, grant)  # connections and scripts warm
        for _ in range(args.rounds):
            for on, grant in grants.items():
                before = time.process_time()
                rate, latencies = await run_for(args.seconds, tasks, grant)
                cpu[on].append((time.process_time() - before) / max(1, len(latencies)) * 1e6)
                results[on].rates.append(rate)
                results[on].latencies.extend(latencies)
        for redlock in redlocks.values():
            await redlock.aclose()
        off = results[False].rate
        for on, result in results.items():
            rows.append([
                f"{tasks} task(s), {LABELS[on]}", f"{result.rate:,.0f}",
                f"{result.rate / off:.3f}", f"{result.p(50):.3f}",
                f"{statistics.median(cpu[on]):.1f}",
            ])  # fmt: skip
    return rows


def _tokens() -> list[list[str]]:
    rows = []
    for label, source in (("bare (TokenPool)", TokenPool()), ("holder info", HolderTokens())):
        best = min(timeit.repeat(source, number=100_000, repeat=7)) / 100_000
        rows.append([label, f"{best * 1e9:.0f}", str(len(source()))])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--nodes", type=int, default=3)
    add_loop_option(parser)
    args = parser.parse_args()
    servers = [RedisServer() for _ in range(args.nodes)]
    for server in servers:
        server.start()
    try:
        urls = [server.url for server in servers]

        async def run() -> list[list[str]]:
            return await _throughput(urls, args)

        results = on_each_loop(args.loop, run)
        for loop, rows in results.items():
            print(f"\n{loop}, {args.nodes} nodes, median of {args.rounds} x {args.seconds}s:")
            headers = ["contender", "grants/s", "vs off", "p50 ms", "client CPU us/grant"]
            print(table(headers, rows))
        print("\ntoken source alone (best of 7):")
        print(table(["tokens", "ns per token", "bytes per token"], _tokens()))
    finally:
        for server in servers:
            server.stop()


if __name__ == "__main__":
    main()
