"""Acquire+release per second with a Redis Cluster among the nodes, tree against tree.

A Redlock beside a Redis Cluster keeps the restart rule per hash slot
(docs/guarantees.md, "With a Redis Cluster among the nodes"): every
granting script on the cluster reads ``INFO server``, each slot's first
grant waits for its censuses, and plain nodes beside the cluster go through
redis-py. This weighs that against another source tree (the release
before, say) on the same throwaway nodes: a 3-master cluster as the only
node (``cluster``), and the cluster beside two plain nodes (``mixed``),
with 1 and 50 tasks, each source tree in a child process with
``PYTHONPATH`` set to it, in interleaved rounds. Names are 5 per task, used
over and over (their slots' censuses are done in the warm-up second), and
the report is the median rate per tree and its ratio to the first tree's.

    git archive 00d5ad9 | tar -x -C /tmp/old
    python benchmarks/cluster.py --tree /tmp/old --tree . --rounds 3 --loop both
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import table

_CHILD = """
import asyncio, json, sys, time
from redis.asyncio import RedisCluster
from redlock_async import Redlock

async def main(host, port, urls, tasks, seconds):
    client = RedisCluster(host=host, port=int(port))
    redlock = Redlock([client, *urls])
    count = 0
    end = 0.0

    async def worker(w):
        nonlocal count
        i = 0
        while time.monotonic() < end:
            i += 1
            lock = redlock.lock(f"w{w}:{i % 5}", ttl=10.0, auto_extend=False)
            assert await lock.acquire()
            await lock.release()
            count += 1

    end = time.monotonic() + 1.0  # warm-up: connections, and each slot's censuses
    await asyncio.gather(*(worker(w) for w in range(tasks)))
    count = 0
    start = time.monotonic()
    end = start + seconds
    await asyncio.gather(*(worker(w) for w in range(tasks)))
    import redlock_async
    print(json.dumps([redlock_async.__file__, count / (time.monotonic() - start)]))
    await redlock.aclose()
    await client.aclose()

host, port, loop, tasks, seconds, *urls = sys.argv[1:]
if loop == "uvloop":
    import uvloop
    uvloop.install()
asyncio.run(main(host, port, urls, int(tasks), float(seconds)))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", required=True, help="a source tree (repeat)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--loop", choices=["asyncio", "uvloop", "both"], default="both")
    args = parser.parse_args()
    trees = [str(Path(tree).resolve()) for tree in args.tree]
    loops = ["asyncio", "uvloop"] if args.loop == "both" else [args.loop]

    from redlock_async.testing import RedisClusterNodes, RedisNodes

    cluster = RedisClusterNodes(3)
    cluster.start()
    plain = RedisNodes().start(2)
    rates: dict[tuple[str, str, int, int], list[float]] = {}
    try:
        host, port = cluster.startup_nodes[0]
        for _ in range(args.rounds):
            for loop in loops:
                for layout, urls in (("cluster", []), ("mixed", plain.urls)):
                    for tasks in (1, 50):
                        for index, tree in enumerate(trees):
                            command = [sys.executable, "-c", _CHILD, host, str(port), loop]
                            command += [str(tasks), str(args.seconds), *urls]
                            done = subprocess.run(
                                command,
                                env={"PYTHONPATH": tree, "PATH": "/usr/bin:/bin"},
                                # Not the checkout: "-c" puts the working
                                # directory first on the path, before the tree.
                                cwd=tempfile.gettempdir(),
                                capture_output=True,
                                text=True,
                                check=False,
                            )
                            if done.returncode:
                                sys.exit(f"{tree}: {done.stderr[-2000:]}")
                            where, rate = json.loads(done.stdout)
                            if not where.startswith(tree + "/"):
                                sys.exit(f"ran {where}, not the tree {tree}")
                            key = (loop, layout, tasks, index)
                            rates.setdefault(key, []).append(rate)
    finally:
        plain.close()
        cluster.close()
    rows = []
    for loop in loops:
        for layout in ("cluster", "mixed"):
            for tasks in (1, 50):
                medians = [
                    statistics.median(rates[(loop, layout, tasks, i)]) for i in range(len(trees))
                ]
                ratios = [f"{m / medians[0]:.2f}x" for m in medians]
                rows.append([loop, layout, tasks, *(f"{m:,.0f}" for m in medians), *ratios])
    headers = ["loop", "nodes", "tasks", *(f"ops/s {i}" for i in range(len(trees)))]
    headers += [f"ratio {i}" for i in range(len(trees))]
    print("trees: " + ", ".join(f"{i}: {tree}" for i, tree in enumerate(trees)))
    print(table(headers, rows))


if __name__ == "__main__":
    main()
