"""``redlock-async bench``: acquire/release throughput and latency against the nodes.

Concurrent tasks take and release distinct throwaway names for ``--duration``
seconds (throughput, not contention); the report gives grants/s and p50/p99
latencies. Exit 69 when no grant was had at all. Ctrl-C stops the workers
between grants (each taken is released) and exits 130.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import time
from collections.abc import Sequence

from .._base._address import redact_url
from .._base._errors import NodeError, RedlockError
from ._exit import EX_OK, EX_UNAVAILABLE, UsageError
from ._nodes import announce, redlock, urls
from ._output import error, print_table, progress

__all__ = ["bench", "percentile"]


async def bench(args: argparse.Namespace) -> int:
    """Run the benchmark and print its report; the exit code."""
    if args.ttl <= 0:
        raise UsageError("bench: --ttl must be > 0")
    run_id = secrets.token_hex(4)
    acquire_ms: list[float] = []
    release_ms: list[float] = []
    refused = 0
    failures: dict[str, int] = {}
    announce(args)
    stopping = False
    async with redlock(args) as nodes:

        def node_failed(node: str, exc: NodeError) -> None:
            # Every failed vote, also those of attempts the other nodes
            # granted: a node down for the whole run shows here.
            failures[type(exc).__name__] = failures.get(type(exc).__name__, 0) + 1

        nodes._core.error_listeners.append(node_failed)
        deadline = time.perf_counter() + args.duration

        async def worker(index: int) -> None:
            nonlocal refused
            name = f"bench:{run_id}:{index}"  # distinct names: throughput, not contention
            while not stopping and time.perf_counter() < deadline:
                lock = nodes.lock(name, ttl=args.ttl, auto_extend=False)
                started = time.perf_counter()
                ok = await lock.acquire(blocking=False)
                acquired = time.perf_counter()
                if not ok:
                    refused += 1
                    await asyncio.sleep(0.01)  # do not spin on dead nodes
                    continue
                acquire_ms.append((acquired - started) * 1000)
                try:
                    await lock.release()
                except RedlockError as exc:  # e.g. LockNotOwned: the grant ran out in a stall
                    failures[type(exc).__name__] = failures.get(type(exc).__name__, 0) + 1
                release_ms.append((time.perf_counter() - acquired) * 1000)

        started = time.perf_counter()
        tasks = [asyncio.ensure_future(worker(i)) for i in range(args.concurrency)]
        try:
            with progress(args.duration, enabled=not (args.json or args.quiet)) as tick:
                while not all(task.done() for task in tasks):
                    await asyncio.wait(tasks, timeout=0.1)
                    tick(time.perf_counter() - started, len(acquire_ms))
        finally:
            # On Ctrl-C too: the workers finish the grant in hand (released,
            # nothing left on the nodes) and stop, before the Redlock closes
            # under them - each would otherwise end in a traceback.
            stopping = True
            await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - started
    report = {
        "nodes": [redact_url(u) for u in urls(args)],
        "concurrency": args.concurrency,
        "duration_s": round(elapsed, 3),
        "grants": len(acquire_ms),
        "grants_per_s": round(len(acquire_ms) / elapsed, 1) if elapsed else 0.0,
        "refused": refused,
        "acquire_p50_ms": round(percentile(acquire_ms, 50), 3),
        "acquire_p99_ms": round(percentile(acquire_ms, 99), 3),
        "release_p50_ms": round(percentile(release_ms, 50), 3),
        "release_p99_ms": round(percentile(release_ms, 99), 3),
        "node_errors": failures,
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        rows = [[key, _cell(value)] for key, value in report.items()]
        print_table("redlock-async bench", ["metric", "value"], rows)
    if report["grants"]:
        return EX_OK
    # A failure says so on stderr too: with --quiet, the only sign of it there.
    errors = _cell(failures)
    error(f"bench: no grant in {report['duration_s']}s; node errors: {errors}")
    return EX_UNAVAILABLE


def _cell(value: object) -> str:
    if isinstance(value, list):
        return ", ".join(map(str, value))
    if isinstance(value, dict):
        return ", ".join(f"{kind}: {count}" for kind, count in value.items()) or "none"
    return str(value)


def percentile(samples: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by nearest rank; 0.0 for no samples."""
    if not samples:
        return 0.0
    ordered = sorted(samples)
    return ordered[max(0, min(len(ordered) - 1, round(q / 100 * len(ordered)) - 1))]
