"""Server CPU per acquire+release, read from the nodes' own processes.

Wall-clock throughput on a shared 2-core machine scatters more than a few
percent between runs; the CPU time the servers themselves spend (user +
system, from /proc, every node summed) moves far less with load. Each source
tree given runs N acquire+release cycles (fresh names, ttl 10 s, 50 at a
time) over its own 5 fresh nodes, in a child process with ``PYTHONPATH`` set
to the tree, in interleaved rounds; the report is the median server CPU
microseconds per cycle and the ratio to the first tree. Also shown: the
time inside the scripts alone (``INFO commandstats``), which leaves out
reading, parsing and replying.

    python benchmarks/script_cost.py --tree /tmp/old --tree . --rounds 5

Written for issue 25 (what the epoch check and record add to every
granting script); any change to the scripts can be weighed with it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

_CHILD = """
import asyncio, json, os, sys
from redlock_async import Redlock
from redlock_async.testing import RedisNodes

async def main(cycles):
    nodes = RedisNodes().start(5)
    try:
        async with Redlock(nodes.urls) as redlock:
            warm = redlock.lock("warm", ttl=10.0, auto_extend=False)
            assert await warm.acquire()
            await warm.release()
            for node in nodes:
                node.client().config_resetstat()
            tick = os.sysconf("SC_CLK_TCK")
            def cpu():
                total = 0.0
                for node in nodes:
                    fields = open(f"/proc/{node.server.pid}/stat").read().rsplit(")", 1)[1].split()
                    total += (int(fields[11]) + int(fields[12])) / tick
                return total
            before = cpu()

            async def task(first):
                for i in range(first, cycles, 50):
                    lock = redlock.lock(f"cost:{i}", ttl=10.0, auto_extend=False)
                    assert await lock.acquire()
                    await lock.release()

            await asyncio.gather(*(task(k) for k in range(50)))
            await asyncio.sleep(0.2)
            spent = cpu() - before
            usec = calls = 0
            for node in nodes:
                stats = node.client().info("commandstats")
                for name in ("cmdstat_evalsha", "cmdstat_eval"):
                    usec += stats.get(name, {}).get("usec", 0)
                    calls += stats.get(name, {}).get("calls", 0)
            print(json.dumps({"cpu": spent * 1e6, "usec": usec, "cycles": cycles}))
    finally:
        nodes.close()

asyncio.run(main(int(sys.argv[1])))
"""


def run(tree: Path, cycles: int) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(tree.resolve()))
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(cycles)],
        env=env,
        # Not the checkout: "-c" puts the working directory first on the path.
        cwd=tempfile.gettempdir(),
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", type=Path, required=True)
    parser.add_argument("--cycles", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    cpu: dict[int, list[float]] = {i: [] for i in range(len(args.tree))}
    inside: dict[int, list[float]] = {i: [] for i in range(len(args.tree))}
    for _ in range(args.rounds):
        for index, tree in enumerate(args.tree):
            result = run(tree, args.cycles)
            cpu[index].append(result["cpu"] / result["cycles"])
            inside[index].append(result["usec"] / result["cycles"])
    base = statistics.median(cpu[0])
    base_inside = statistics.median(inside[0])
    head = f"{'server CPU us/cycle':>20} {'vs first':>9} {'in scripts':>11} {'vs first':>9}"
    print(f"{'tree':32} {head}")
    for index, tree in enumerate(args.tree):
        med, med_in = statistics.median(cpu[index]), statistics.median(inside[index])
        print(
            f"{tree!s:32} {med:20.1f} {med / base:8.3f}x {med_in:11.1f} "
            f"{med_in / base_inside:8.3f}x   rounds: " + " ".join(f"{v:.0f}" for v in cpu[index])
        )


if __name__ == "__main__":
    main()
