"""``redlock-async demo``: throwaway local nodes, and workers contending for a lock.

Needs redis-server on PATH. Workers increment a shared counter with a gap
between read and write, first without the lock (updates are lost), then
with it (none are). Every node it started is stopped, on Ctrl-C (exit 130)
and SIGTERM (143) too.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Iterator
from types import FrameType

from .._redlock import Redlock
from ._exit import EX_FAILURE, EX_OK
from ._interrupt import run_interruptible, say_interrupted
from ._output import error, progress

__all__ = ["demo"]


def demo(n_nodes: int, workers: int, increments: int, *, quiet: bool = False) -> int:
    """Start ``n_nodes`` nodes and a resource, run the two rounds, stop them all; the exit code.

    ``quiet``: no progress bar on stderr (the report is on stdout).
    """
    from ..testing import RedisServer, find_redis_server

    if find_redis_server() is None:
        error(
            "demo needs redis-server on PATH "
            "(Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis)"
        )
        return EX_FAILURE
    servers = [RedisServer() for _ in range(n_nodes + 1)]  # the last one is the "resource"
    terminated: list[int] = []

    def on_term(signum: int, frame: FrameType | None) -> None:
        # Until the rounds start (they handle it themselves), SIGTERM goes
        # Ctrl-C's way, so that the nodes are stopped on it too.
        terminated.append(signum)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        for server in servers:
            server.start()
        print(f"started {n_nodes} redis-server nodes: " + ", ".join(s.url for s in servers[:-1]))
        print(f"resource (a counter nobody may update concurrently): {servers[-1].url}")
        halt: list[bool] = []
        urls = [s.url for s in servers[:-1]]
        return run_interruptible(
            lambda: _contend(urls, servers[-1].url, workers, increments, halt, quiet),
            signals=(signal.SIGINT, signal.SIGTERM),
            on_signal=lambda: halt.append(True),
        )
    except KeyboardInterrupt:
        return say_interrupted(terminated[0] if terminated else signal.SIGINT)
    finally:
        # A second Ctrl-C now must not leave a node running.
        with _ignoring(signal.SIGINT, signal.SIGTERM):
            for server in servers:
                with contextlib.suppress(Exception):
                    server.stop()
        signal.signal(signal.SIGTERM, previous)
        print("stopped every node")


@contextlib.contextmanager
def _ignoring(*signals: int) -> Iterator[None]:
    previous = {signum: signal.signal(signum, signal.SIG_IGN) for signum in signals}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


async def _contend(
    urls: list[str],
    resource_url: str,
    workers: int,
    increments: int,
    halt: list[bool],
    quiet: bool,
) -> int:
    """The two rounds; a true in ``halt`` (a signal came) stops them between increments."""
    import redis.asyncio

    resource = redis.asyncio.Redis.from_url(resource_url)
    expected = workers * increments
    try:

        async def run(locked: bool) -> int:
            await resource.set("counter", 0)
            done = 0
            stopping = False
            label = "with the lock:   " if locked else "without the lock:"

            async def worker(redlock: Redlock) -> None:
                nonlocal done
                for _ in range(increments):
                    if stopping or halt:
                        return
                    if locked:
                        async with redlock.lock("demo:counter", ttl=5.0):
                            await bump()
                    else:
                        await bump()
                    done += 1

            async def bump() -> None:
                # A read-modify-write with a gap: two workers inside at once lose an update.
                value = int(await resource.get("counter") or 0)
                await asyncio.sleep(0.001)
                await resource.set("counter", value + 1)

            redlocks = [Redlock(urls, retry_delay=0.01, retry_jitter=0.02) for _ in range(workers)]
            tasks = [asyncio.ensure_future(worker(r)) for r in redlocks]
            try:
                with progress(float(expected), enabled=not quiet, unit="increments") as tick:
                    while not all(task.done() for task in tasks) and not halt:
                        await asyncio.wait(tasks, timeout=0.1)
                        tick(float(done), done)
                await asyncio.gather(*tasks)
            finally:
                # Workers stop between increments rather than being cancelled:
                # a task cancelled inside a redis-py command (its wait_for on
                # drain, Python 3.11) could be left waiting forever, hanging
                # Ctrl-C at loop close.
                stopping = True
                await asyncio.gather(*tasks, return_exceptions=True)
                for r in redlocks:
                    await r.aclose()
            counter = int(await resource.get("counter") or 0)
            if halt:  # a round cut short proves nothing
                return counter
            print(
                f"{label} {workers} workers x {increments} increments -> "
                f"counter {counter} ({expected - counter} updates lost)"
            )
            return counter

        await run(locked=False)
        if halt:  # the signal's cancellation can be lost (see interruptible)
            return EX_FAILURE
        locked = await run(locked=True)
        return EX_OK if locked == expected else EX_FAILURE
    finally:
        await resource.aclose()
