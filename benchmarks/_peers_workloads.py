"""benchmarks/peers.py's workloads, shared by it and by the Python peers' child process.

Stdlib only: the child may run in a venv that has the peers and not this
project.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from _common import percentile

TTL = 10.0  # every contender's lock ttl, seconds
GRACE = 1.0  # past a round's end, how long a stuck round may run before it is cut
ONE_NAME_GRACE = 5.0  # node-redlock's ten retries may outlast the round by ~3 s

WORKLOADS = {
    "seq": "1 task, fresh name per cycle",
    "tasks": "50 tasks, each its own names",
    "one_name": "8 workers on one name, hold 1 ms",
    "blackhole": "1 task, node 0 of 5 blackholed",
    "sync1": "1 thread (1 task), ONE node",
    "sync8": "8 threads (8 tasks), ONE node",
}


class Client(Protocol):
    """One contender on one set of nodes: a handle when granted, None when refused."""

    async def acquire(self, name: str, blocking: bool) -> object | None: ...
    async def release(self, handle: object) -> bool: ...


async def rate(client: Client, tasks: int, seconds: float, tag: str) -> dict[str, Any]:
    """Workloads 1, 2 and 4: pairs completed before the deadline, per second."""
    deadline = time.perf_counter() + seconds
    counts = {"done": 0, "refused": 0, "failed": 0}

    async def loop(task: int) -> None:
        i = 0
        while time.perf_counter() < deadline:
            i += 1
            try:
                handle = await client.acquire(f"peers:{tag}:{task}:{i}", False)
            except Exception:
                handle = None
            if handle is None:
                counts["refused"] += 1
                continue
            try:
                ok = await client.release(handle)
            except Exception:
                ok = False
            if not ok:
                counts["failed"] += 1
            elif time.perf_counter() < deadline:
                counts["done"] += 1

    stalled = await _bounded([loop(t) for t in range(tasks)], seconds + GRACE)
    return {"ops_per_s": counts["done"] / seconds, "refused": counts["refused"],
            "failed": counts["failed"], "stalled": stalled}  # fmt: skip


async def one_name(client: Client, workers: int, seconds: float, hold: float) -> dict[str, Any]:
    """Workload 3: grants/s, handoff p50, wait p50, p99 and max, the busiest worker's share.

    A worker's wait counts from wanting the lock to its grant; a wait still
    going at the deadline counts, up to the deadline, in the max only.
    """
    deadline = time.perf_counter() + seconds
    per = [0] * workers
    waits: list[float] = []
    handoffs: list[float] = []
    state = {"holder": -1, "release_called": 0.0, "failed": 0}
    longest = [0.0]  # the longest wait, counting waits the round's end cut short

    async def worker(me: int) -> None:
        while time.perf_counter() < deadline:
            wanted = time.perf_counter()
            handle = None
            while handle is None:
                try:
                    handle = await client.acquire("peers:one", True)
                except Exception:
                    handle = None
                if handle is None and time.perf_counter() >= deadline:
                    longest[0] = max(longest[0], deadline - wanted)
                    return  # gave up after its own retries, and the round is over
            now = time.perf_counter()
            if now < deadline:
                per[me] += 1
                waits.append(now - wanted)
                if state["holder"] not in (-1, me):
                    handoffs.append(now - state["release_called"])
            else:  # still waiting when the round ended: it waited at least this long
                longest[0] = max(longest[0], deadline - wanted)
            state["holder"] = me
            await asyncio.sleep(hold)
            state["release_called"] = time.perf_counter()
            if not await client.release(handle):
                state["failed"] += 1

    stalled = await _bounded([worker(w) for w in range(workers)], seconds + ONE_NAME_GRACE)
    grants = sum(per)
    return {
        "ops_per_s": grants / seconds,
        "handoff_p50_ms": percentile(handoffs, 50) * 1000 if handoffs else None,
        "wait_p50_ms": percentile(waits, 50) * 1000,
        "wait_p99_ms": percentile(waits, 99) * 1000,
        "wait_max_ms": max([longest[0], *waits]) * 1000,
        "busiest_share": max(per) / grants if grants else 0.0,
        "handoffs": len(handoffs),
        "failed": state["failed"],
        "stalled": stalled,
    }


async def _bounded(coros: list[Awaitable[None]], limit: float) -> bool:
    """Run ``coros`` for at most ``limit`` seconds; True when some had to be cut."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    _, pending = await asyncio.wait(tasks, timeout=limit)
    for task in pending:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return bool(pending)


def threads_for(seconds: float, callers: int, once: Callable[[str], bool]) -> dict[str, Any]:
    """Workload 5: ``callers`` threads, each ``once(fresh name)`` in a loop."""
    deadline = time.perf_counter() + seconds
    done = [0] * callers

    def loop(caller: int) -> None:
        i = 0
        while time.perf_counter() < deadline:
            i += 1
            if once(f"peers:sync:{caller}:{i}") and time.perf_counter() < deadline:
                done[caller] += 1

    pool = [threading.Thread(target=loop, args=(c,)) for c in range(callers)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return {"ops_per_s": sum(done) / seconds, "stalled": False}


async def run_workload(clients: dict[str, Client], spec: dict[str, Any]) -> dict[str, Any]:
    """One round of one workload, as ``spec`` (the same dict the children get) says."""
    client = clients[spec["set"]]
    if spec["workload"] == "one_name":
        return await one_name(client, spec["workers"], spec["seconds"], spec["hold"])
    return await rate(client, spec["tasks"], spec["seconds"], spec["tag"])
