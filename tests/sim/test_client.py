"""The real client in the simulation (issue 39): processes, virtual time, faults, seeds.

Every test runs real ``Redlock`` objects - the lean RESP driver, the
library's own Lua scripts - in simulated processes over three simulated
nodes, on the virtual-time loop: no socket, no real clock, no real
randomness. The nodes are SimNodes (``node.py``).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from redlock_async import LockLost

from .process import SimProcess
from .sim import Simulation, real_io_seen
from .workload import TTL, Exclusion, cycles, run_workload


@pytest.fixture
def sim() -> Iterator[Simulation]:
    made = Simulation(1)  # three SimNodes
    yield made
    made.close()
    assert made.loop.errors == []
    assert real_io_seen() == []


def senders(sim: Simulation) -> list[str]:
    """Which process sent each command the nodes ran, in order."""
    return [line.split()[2].split("#")[0] for line in sim.net.trace]


def test_two_processes_take_turns_on_three_nodes(sim: Simulation) -> None:
    seen = Exclusion(sim)
    one, two = sim.spawn(), sim.spawn()

    async def main() -> list[int]:
        runs = [
            p.spawn(cycles(sim, p, seen, 20, lambda: sim.rng.uniform(0, 0.5))) for p in (one, two)
        ]
        granted = await asyncio.gather(*runs)
        await one.aclose()
        await two.aclose()
        return granted

    assert sim.run(main()) == [20, 20]
    assert {name for _, name in seen.grants} == {"p1", "p2"}
    assert set(senders(sim)) == {"p1", "p2"}  # through the simulated network only


def test_an_hour_of_renewals_takes_seconds(sim: Simulation) -> None:
    processes = [sim.spawn(), sim.spawn()]

    async def hold(process: SimProcess, name: str) -> bool:
        async with process.redlock.lock(name, ttl=TTL) as lock:
            await asyncio.sleep(3600)
            return lock.held

    async def main() -> list[bool]:
        runs = [p.spawn(hold(p, f"{p.name}:{i}")) for p in processes for i in range(5)]
        held = await asyncio.gather(*runs)
        for process in processes:
            await process.aclose()
        return held

    started = time.perf_counter()
    assert all(sim.run(main()))
    wall = time.perf_counter() - started
    assert sim.loop.time() >= 1000.0 + 3600
    renewals = sum("redlock:~epoch:" in line and "EVALSHA" in line for line in sim.net.trace)
    assert renewals > 3600 / TTL  # renewed all along, ten locks a few per ttl
    assert wall < 60, f"one simulated hour took {wall:.1f} s"


def test_a_seed_replays_the_same_history() -> None:
    first, trace = run_workload(7)
    again, same = run_workload(7)
    other, _ = run_workload(8)
    assert same == trace
    assert again == first
    assert other != first
    assert len(trace) > 100


@pytest.mark.parametrize("hash_seed", ["1", "2"])
def test_a_seed_replays_in_another_interpreter(hash_seed: str) -> None:
    """Other hash seeds, other memory addresses: the same history."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, "-m", "tests.sim.workload", "7"],
        env=env, cwd=root, capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    assert done.stdout.strip() == run_workload(7)[0]


def test_a_crashed_process_runs_no_cleanup(sim: Simulation) -> None:
    one, two = sim.spawn(), sim.spawn()
    cleanup: list[str] = []

    async def holder() -> None:
        try:
            async with one.redlock.lock("res", ttl=TTL):
                await asyncio.sleep(3600)
        finally:
            cleanup.append("ran")

    async def main() -> tuple[float, float]:
        one.spawn(holder())
        await asyncio.sleep(25)  # renewed a few times
        crashed = sim.loop.time()
        sent = len(sim.net.trace)
        one.crash()
        lock = two.redlock.lock("res", ttl=TTL, timeout=60)
        assert await two.spawn(lock.acquire())
        granted = sim.loop.time()
        assert "p1" not in senders(sim)[sent:]  # not a release, not a renewal
        await two.spawn(lock.release())
        await two.aclose()
        return crashed, granted

    crashed, granted = sim.run(main())
    assert cleanup == []
    assert 0 < granted - crashed <= TTL + 1  # the key expired by its ttl: nobody released it


def test_a_replacement_process_has_its_own_identity(sim: Simulation) -> None:
    first = sim.spawn()
    second = sim.spawn(host=first.host)  # the same host, a new pid

    async def take(process: SimProcess) -> tuple[str | None, int | None, float | None]:
        lock = process.redlock.lock("res", ttl=TTL, auto_extend=False)
        assert await lock.acquire()
        holder = await process.redlock.holder("res")
        assert holder is not None
        await lock.release()
        return holder.host, holder.pid, holder.since

    async def main() -> None:
        host, pid, since = await first.spawn(take(first))
        assert (host, pid) == (first.host, first.pid)
        assert since == pytest.approx(1767225600.0, abs=0.1)  # the run's wall clock
        first.crash()
        second.step_wall(-3600.0)  # its wall clock an hour behind: holder info says so
        await asyncio.sleep(1)
        host, pid, since = await second.spawn(take(second))
        assert (host, pid) == (first.host, second.pid)
        assert pid != first.pid
        assert since is not None
        assert since == pytest.approx(1767225600.0 + 1 - 3600, abs=0.1)
        await second.aclose()

    sim.run(main())


def test_a_minority_partition_cannot_grant(sim: Simulation) -> None:
    one, two = sim.spawn(), sim.spawn()

    async def attempt(process: SimProcess) -> bool:
        lock = process.redlock.lock("res", ttl=TTL, auto_extend=False, unavailable_timeout=2)
        if not await lock.acquire(timeout=5):
            return False
        await lock.release()
        return True

    async def main() -> None:
        sim.net.cut(["p1"], ["n1", "n2"])  # p1 reaches n3 only
        sim.net.path("p2", "n3").blackhole = True  # p2 reaches n1, n2
        assert not await one.spawn(attempt(one))
        assert await two.spawn(attempt(two))
        sim.net.heal()
        await asyncio.sleep(1)
        assert await one.spawn(attempt(one))
        await one.aclose()
        await two.aclose()

    sim.run(main())


def redis_py_history(seed: int) -> list[str]:
    sim = Simulation(seed)
    try:
        seen = Exclusion(sim)
        lean, through_redis_py = sim.spawn(), sim.spawn(driver="redis-py")

        def hold() -> float:
            return sim.rng.uniform(0, 0.5)

        async def main() -> list[int]:
            runs = [p.spawn(cycles(sim, p, seen, 10, hold)) for p in (lean, through_redis_py)]
            granted = await asyncio.gather(*runs)
            await lean.aclose()
            await through_redis_py.aclose()
            return granted

        assert sim.run(main()) == [10, 10]
        assert sim.loop.errors == []
        assert any(b"HELLO" in line.encode() for line in sim.net.trace)  # redis-py's handshake
        return sim.net.trace
    finally:
        sim.close()


def test_redis_py_clients_run_over_the_simulated_network_too() -> None:
    assert redis_py_history(3) == redis_py_history(3)


def test_a_paused_process_loses_its_lock_and_is_told_when_it_resumes(sim: Simulation) -> None:
    one, two = sim.spawn(), sim.spawn()
    seen = Exclusion(sim)
    outcome: list[str] = []

    async def holder() -> None:
        try:
            async with one.redlock.lock("res", ttl=TTL) as lock:
                seen.enter(one, lock)
                await asyncio.sleep(3600)
        except LockLost:
            outcome.append(f"lost at {sim.loop.time() - 1000:.0f}")

    async def main() -> None:
        task = one.spawn(holder())
        await asyncio.sleep(5)
        one.pause()  # a stop-the-world pause: its renewals cannot go out
        lock = two.redlock.lock("res", ttl=TTL, timeout=60)
        assert await two.spawn(lock.acquire())  # once the key expired on the nodes
        seen.enter(two, lock)  # one's lock.held is already False by its own clock
        granted = sim.loop.time() - 1000
        assert 5 < granted <= 5 + TTL + 1
        await asyncio.sleep(40 - granted)
        one.resume()
        await task
        assert outcome == ["lost at 40"]  # told at once, its body cancelled
        await two.spawn(lock.release())
        await one.aclose()
        await two.aclose()

    sim.run(main())


def test_a_process_stopped_twice_runs_again_only_when_both_stops_end(sim: Simulation) -> None:
    # A stall in its own code and a SIGSTOP from outside, overlapping: the
    # first to end must not let it run (seed 10049).
    one = sim.spawn()
    ran: list[float] = []

    async def ticker() -> None:
        while True:
            ran.append(round(sim.loop.time() - 1000, 3))
            await asyncio.sleep(1.0)

    async def main() -> None:
        one.spawn(ticker())
        await asyncio.sleep(0.5)
        one.pause()  # the stall, 0.5 .. 4.5
        await asyncio.sleep(1.0)
        one.pause()  # the stop, 1.5 .. 2.5
        await asyncio.sleep(1.0)
        one.resume()
        await asyncio.sleep(2.0)
        assert ran == [0.0]  # nothing ran between the stop's end and the stall's
        one.resume()
        await asyncio.sleep(0.1)
        assert ran == [0.0, 4.5]  # what fell due, at once
        one.crash()

    sim.run(main())


def test_a_node_restarted_empty_does_not_cost_the_holder_its_lock(sim: Simulation) -> None:
    one, two = sim.spawn(), sim.spawn()

    async def main() -> None:
        lock = one.redlock.lock("res", ttl=TTL)
        assert await one.spawn(lock.acquire())
        await asyncio.sleep(3)
        sim.servers[0].restart(down_for=2.0)  # n1 comes back empty, a new run_id
        await asyncio.sleep(60)
        assert lock.held  # renewed on n2 and n3 all along
        other = two.redlock.lock("res", ttl=TTL, auto_extend=False)
        assert not await two.spawn(other.acquire(blocking=False))
        await one.spawn(lock.release())
        assert await two.spawn(other.acquire(timeout=5))
        await two.spawn(other.release())
        await one.aclose()
        await two.aclose()

    sim.run(main())
    restarted = [line for line in sim.net.trace if " n1 " in line and "INFO server" in line]
    assert len({line.split("run_id:")[1][:40] for line in restarted}) == 2  # seen restarted
