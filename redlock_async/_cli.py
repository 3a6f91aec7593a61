"""The ``redlock-async`` command line.

Commands: ``demo`` (throwaway local nodes, contending workers, no lost update).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import Sequence

from ._redlock import Redlock

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="redlock-async", description="Distributed locks over a quorum of Redis nodes."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo",
        help="start throwaway local redis-server nodes and show workers contending for a lock",
    )
    demo.add_argument("--nodes", type=int, default=3, help="redis-server nodes (default 3)")
    demo.add_argument("--workers", type=int, default=8, help="contending workers (default 8)")
    demo.add_argument("--increments", type=int, default=25, help="per worker (default 25)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "demo":
        return _demo(args.nodes, args.workers, args.increments)
    return 2  # argparse already rejects unknown commands


def _demo(n_nodes: int, workers: int, increments: int) -> int:
    from .testing import RedisServer, find_redis_server

    if find_redis_server() is None:
        print(
            "redlock-async demo needs redis-server on PATH "
            "(Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis)",
            file=sys.stderr,
        )
        return 1
    servers = [RedisServer() for _ in range(n_nodes + 1)]  # the last one is the "resource"
    try:
        for server in servers:
            server.start()
        print(f"started {n_nodes} redis-server nodes: " + ", ".join(s.url for s in servers[:-1]))
        print(f"resource (a counter nobody may update concurrently): {servers[-1].url}")
        return asyncio.run(
            _contend([s.url for s in servers[:-1]], servers[-1].url, workers, increments)
        )
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        for server in servers:
            with contextlib.suppress(Exception):
                server.stop()
        print("stopped every node")


async def _contend(urls: list[str], resource_url: str, workers: int, increments: int) -> int:
    import redis.asyncio

    resource = redis.asyncio.Redis.from_url(resource_url)
    expected = workers * increments
    try:

        async def run(locked: bool) -> int:
            await resource.set("counter", 0)

            async def worker(redlock: Redlock) -> None:
                for _ in range(increments):
                    if locked:
                        async with redlock.lock("demo:counter", ttl=5.0):
                            await bump()
                    else:
                        await bump()

            async def bump() -> None:
                # A read-modify-write with a gap: two workers inside at once lose an update.
                value = int(await resource.get("counter") or 0)
                await asyncio.sleep(0.001)
                await resource.set("counter", value + 1)

            redlocks = [Redlock(urls, retry_delay=0.01, retry_jitter=0.02) for _ in range(workers)]
            try:
                await asyncio.gather(*(worker(r) for r in redlocks))
            finally:
                for r in redlocks:
                    await r.aclose()
            return int(await resource.get("counter") or 0)

        unlocked = await run(locked=False)
        print(
            f"without the lock: {workers} workers x {increments} increments -> "
            f"counter {unlocked} ({expected - unlocked} updates lost)"
        )
        locked = await run(locked=True)
        print(
            f"with the lock:    {workers} workers x {increments} increments -> "
            f"counter {locked} ({expected - locked} updates lost)"
        )
        return 0 if locked == expected else 1
    finally:
        await resource.aclose()
