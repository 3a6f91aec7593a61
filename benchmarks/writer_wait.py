"""How long a writer waits under a continuous stream of overlapping readers.

3 local nodes; N reader tasks keep taking read locks (ttl R, each held 0.6 R,
so reads always overlap). A writer arrives while the stream flows; its wait is
recorded. The fairness claim: about the longest read ttl plus one retry.

Run: ``python benchmarks/writer_wait.py [--readers 6] [--read-ttl 0.5] [--trials 10]
[--loop asyncio|uvloop|both]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from pathlib import Path

from redlock_async import Redlock
from redlock_async.testing import RedisServer

sys.path.insert(0, str(Path(__file__).parent))
from _common import add_loop_option, on_each_loop, table


async def trial(redlock: Redlock, readers: int, read_ttl: float) -> tuple[float, int]:
    rw = redlock.rwlock("bench:doc")
    stop = asyncio.Event()
    reads = 0

    async def stream(offset: float) -> None:
        nonlocal reads
        await asyncio.sleep(offset)
        while not stop.is_set():
            reader = rw.read(ttl=read_ttl, auto_extend=False)
            if await reader.acquire(blocking=False):
                reads += 1
                await asyncio.sleep(read_ttl * 0.6)
                await reader.release()
            else:
                await asyncio.sleep(0.01)

    tasks = [asyncio.ensure_future(stream(i * read_ttl / readers)) for i in range(readers)]
    await asyncio.sleep(read_ttl * 1.5)
    loop = asyncio.get_running_loop()
    began = loop.time()
    writer = rw.write(ttl=5.0, timeout=30.0)
    assert await writer.acquire()
    waited = loop.time() - began
    stop.set()
    await writer.release()
    await asyncio.gather(*tasks)
    return waited, reads


async def main(readers: int, read_ttl: float, trials: int) -> None:
    servers = [RedisServer() for _ in range(3)]
    for server in servers:
        server.start()
    try:
        config = {"retry_delay": 0.05, "retry_jitter": 0.05}
        async with Redlock([s.url for s in servers], **config) as redlock:  # type: ignore[arg-type]
            waits = []
            for _ in range(trials):
                waited, _reads = await trial(redlock, readers, read_ttl)
                waits.append(waited)
    finally:
        for server in servers:
            server.stop()
    bound = read_ttl + config["retry_delay"] + config["retry_jitter"]
    print(f"{readers} overlapping readers, read ttl {read_ttl}s, retry 0.05+0.05s, {trials} trials")
    print(table(["figure", "seconds"], [
        ["writer wait median", f"{statistics.median(waits):.3f}"],
        ["writer wait max", f"{max(waits):.3f}"],
        ["bound: read ttl + one retry", f"{bound:.3f}"],
    ]))  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--readers", type=int, default=6)
    parser.add_argument("--read-ttl", type=float, default=0.5)
    parser.add_argument("--trials", type=int, default=10)
    add_loop_option(parser)
    args = parser.parse_args()
    on_each_loop(args.loop, lambda: main(args.readers, args.read_ttl, args.trials))
