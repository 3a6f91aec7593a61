"""Client instructions per acquire+release, counted by callgrind: a figure load cannot move.

Wall-clock ratios on a shared 2-core machine scatter by +-15 % from one run
to the next (benchmarks/README.md). ``valgrind --tool=callgrind`` counts the
instructions the client process executes instead, which do not depend on
what else runs. Each source tree given (``--tree``: a checkout or a ``git
archive`` of an older commit) runs the same loop of sequential
acquire+release cycles on fresh names over 5 local nodes, twice: with
``--short`` and with ``--long`` cycles; the difference over the difference
in cycles is the cost of one cycle, start-up and imports cancelled out.

    python benchmarks/instructions.py --tree /tmp/old --tree .

``--blackhole``: node 0 of the nodes is reached through the project's fault
proxy, blackholed (connections accepted, nothing delivered either way): the
client's work per cycle with one node silent (issue 27), to set beside the
same tree's figure without it.

Needs ``valgrind`` and ``redis-server`` on PATH. Takes about 25 s per tree
and count (valgrind runs Python some 50 times slower).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The client run under valgrind; only the public API, so older trees run it too.
CLIENT = """
import asyncio, sys
from redlock_async import Redlock

async def main(n, urls):
    async with Redlock(urls) as redlock:
        for i in range(20):  # connections made, scripts loaded
            lock = redlock.lock(f"warm:{i}", ttl=10.0, auto_extend=False)
            await lock.acquire()
            await lock.release()
        for i in range(n):
            lock = redlock.lock(f"cycle:{i}", ttl=10.0, auto_extend=False)
            assert await lock.acquire()
            await lock.release()

asyncio.run(main(int(sys.argv[1]), sys.argv[2:]))
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_nodes(n: int, where: Path) -> tuple[list[subprocess.Popen[bytes]], list[str]]:
    procs, urls = [], []
    for _ in range(n):
        port = free_port()
        procs.append(
            subprocess.Popen(
                ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--dir", str(where), "--logfile", ""],
                stdout=subprocess.DEVNULL,
            )
        )  # fmt: skip
        urls.append(f"redis://127.0.0.1:{port}/0")
    for url in urls:
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
    return procs, urls


def count(tree: Path, cycles: int, urls: list[str], scratch: Path) -> int:
    """Instructions the client executed for ``cycles`` cycles (plus start-up)."""
    script = scratch / "client.py"
    script.write_text(CLIENT)
    out = scratch / f"callgrind.{cycles}.out"
    env = {**os.environ, "PYTHONPATH": str(tree.resolve())}
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable,
         str(script), str(cycles), *urls],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count from valgrind:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tree", action="append", type=Path, required=True)
    parser.add_argument("--short", type=int, default=300)
    parser.add_argument("--long", type=int, default=1300)
    parser.add_argument("--nodes", type=int, default=5)
    parser.add_argument("--blackhole", action="store_true", help="node 0 blackholed")
    args = parser.parse_args()
    for tool in ("valgrind", "redis-server"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is not on PATH")
    with tempfile.TemporaryDirectory(prefix="redlock-instructions-") as scratch:
        if args.blackhole:
            from redlock_async.testing import RedisNodes

            nodes = RedisNodes().start(args.nodes)
            nodes[0].blackhole()
            urls = [nodes[0].url, *(node.direct_url for node in nodes[1:])]
            procs: list[subprocess.Popen[bytes]] = []
        else:
            procs, urls = start_nodes(args.nodes, Path(scratch))
        try:
            first = None
            print(f"{'tree':<40} {'instructions per acquire+release':>34} {'vs first':>9}")
            for tree in args.tree:
                short = count(tree, args.short, urls, Path(scratch))
                long = count(tree, args.long, urls, Path(scratch))
                per = (long - short) / (args.long - args.short)
                first = first or per
                print(f"{tree!s:<40} {per:>34,.0f} {per / first:>8.3f}x", flush=True)
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait()
            if args.blackhole:
                nodes.close()


if __name__ == "__main__":
    main()
