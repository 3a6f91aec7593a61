"""Workloads for the simulation: what simulated processes do, with choices from the seed.

:func:`run_workload` runs the mixed one for a seed and returns the run's
fingerprint and node-side trace; ``python -m tests.sim.workload SEED`` prints
the fingerprint (the determinism test runs it under other hash seeds).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable

from redlock_async import Lock, RedlockError

from .process import SimProcess
from .sim import Simulation

__all__ = ["TTL", "Exclusion", "cycles", "run_workload", "workload"]

TTL = 10.0


class Exclusion:
    """Who holds the lock, by the holders' own ``lock.held``: never two at once."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.holder: Lock | None = None
        self.grants: list[tuple[float, str]] = []

    def enter(self, process: SimProcess, lock: Lock) -> None:
        other = self.holder
        assert other is None or not other.held, f"{process.name} granted while another holds it"
        self.holder = lock
        self.grants.append((self.sim.loop.time(), process.name))


async def cycles(
    sim: Simulation, process: SimProcess, seen: Exclusion, count: int, hold: Callable[[], float]
) -> int:
    """``count`` acquire / extend / release cycles on one name; returns how many were granted."""
    granted = 0
    for _ in range(count):
        lock = process.redlock.lock("res", ttl=TTL, timeout=30.0)
        if not await lock.acquire():
            continue
        granted += 1
        seen.enter(process, lock)
        await asyncio.sleep(hold())
        await lock.extend()
        assert lock.valid_for > TTL * 0.9
        await asyncio.sleep(hold())
        await lock.release()
    return granted


async def workload(sim: Simulation) -> None:
    """Three processes cycling on one name with choices from the seed: hold times,
    a crash, its replacement, a partition and a stepped wall clock."""
    seen = Exclusion(sim)
    rng = sim.rng
    processes = [sim.spawn() for _ in range(3)]

    def hold() -> float:
        return rng.uniform(0, 2)

    async def worker(process: SimProcess) -> None:
        with contextlib.suppress(RedlockError):  # lost in the partition, say: no matter here
            await cycles(sim, process, seen, 10, hold)

    runs: dict[SimProcess, asyncio.Task[None]] = {}

    def start(process: SimProcess) -> None:
        runs[process] = process.spawn(worker(process))

    for process in processes:
        start(process)
    await asyncio.sleep(rng.uniform(1, 5))
    victim = processes[rng.randrange(3)]
    victim.crash()
    replacement = sim.spawn(host=victim.host)
    start(replacement)
    await asyncio.sleep(rng.uniform(0, 3))
    cut = processes[rng.randrange(3)]
    sim.net.cut([cut.name], ["n1", "n2"], down=rng.random() < 0.5)
    replacement.step_wall(rng.uniform(-60, 60))
    await asyncio.sleep(rng.uniform(0, 3))
    sim.net.heal()
    await asyncio.wait([run for process, run in runs.items() if not process.dead], timeout=300)
    for process in runs:
        if not process.dead:
            await process.aclose()


def run_workload(seed: int) -> tuple[str, list[str]]:
    sim = Simulation(seed)
    try:
        sim.run(workload(sim))
        assert sim.loop.errors == [], sim.loop.errors
        return sim.fingerprint(), sim.net.trace
    finally:
        sim.close()


if __name__ == "__main__":
    print(run_workload(int(sys.argv[1]))[0])
