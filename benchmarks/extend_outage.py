"""How long ``extend()`` takes while no quorum answers (issue 38), against its bound V.

3 nodes behind the project's fault proxy; a lock is taken while they are
healthy, then 2 of the 3 (a majority) are made unreachable and one
``extend()`` is timed. Each driver (the lean one, ``redis://`` URLs; redis-py
clients) with its default ``node_timeout`` (0.05 s; 0.25 s), each ttl given
(6 s and 10 s by default: the issue's figures), each fault:

- ``pause``: SIGSTOP (connections stay open, nothing is answered);
- ``refuse``: the proxy stops listening and cuts the connections (down);
- ``blackhole``: the proxy keeps the connections and delivers nothing.

Reported per row: the median and the longest of ``--rounds`` extends, V
(``vote_limit(node_timeout)``: what docs/guarantees.md states), what the
extends raised, and whether the lock was still held and not lost right
after (it should be: unconfirmed is not lost). The nodes recover between
rounds, and a fresh lock is taken for each. With ``--timeout T``, each
extend is ``extend(timeout=T)`` (bound: min(T, the validity left) + V).

The tree measured is the one imported: run it with ``PYTHONPATH`` set to
an older source tree to measure that (before issue 38, extend() took the
grant's whole remaining validity here).

Run: ``python benchmarks/extend_outage.py [--rounds 5] [--ttl 6 10]
[--faults pause refuse blackhole] [--timeout T] [--loop asyncio|uvloop|both]
[--json FILE]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import redis.asyncio

import redlock_async
from redlock_async import Redlock, RedlockError
from redlock_async._engine import vote_limit
from redlock_async.testing import RedisNode, RedisNodes

sys.path.insert(0, str(Path(__file__).parent))
from _common import add_loop_option, count_warnings, on_each_loop, table

FAULTS = {
    "pause": (RedisNode.pause, RedisNode.resume),
    "refuse": (RedisNode.refuse, RedisNode.heal),
    "blackhole": (RedisNode.blackhole, RedisNode.heal),
}


async def one_extend(
    redlock: Redlock, nodes: RedisNodes, name: str, ttl: float, fault: str, timeout: float | None
) -> tuple[float, str, bool]:
    """Take ``name`` healthy, fault a majority, time one extend: (seconds, outcome,
    held and not lost right after)."""
    lock = redlock.lock(name, ttl=ttl)
    if not await lock.acquire(timeout=15.0):  # the nodes may still be reconnecting
        raise SystemExit(f"could not take {name!r} with every node healthy")
    start, recover = FAULTS[fault]
    majority = nodes[:2]
    for node in majority:
        start(node)
    try:
        began = time.perf_counter()
        try:
            if timeout is None:
                await lock.extend()
            else:
                await lock.extend(timeout=timeout)
            outcome = "extended"
        except RedlockError as exc:
            outcome = type(exc).__name__
        took = time.perf_counter() - began
        kept = lock.held and not lock.lost
    finally:
        for node in majority:
            recover(node)
    if lock.held:
        # A connection may still be reconnecting: the key then expires by its ttl.
        with contextlib.suppress(RedlockError):
            await lock.release()
    return took, outcome, kept


def make(driver: str, nodes: RedisNodes, clients: list[redis.asyncio.Redis]) -> Redlock:
    if driver == "lean":
        return Redlock(nodes.urls)
    made = [redis.asyncio.Redis.from_url(url) for url in nodes.urls]
    clients.extend(made)
    return Redlock(made)


async def main(
    rounds: int, ttls: list[float], faults: list[str], timeout: float | None
) -> dict[str, Any]:
    nodes = RedisNodes().start(3)
    rows: list[list[str]] = []
    figures: dict[str, Any] = {}
    try:
        with count_warnings():  # every outage logs its failed votes: not the point here
            for driver in ("lean", "redis-py"):
                clients: list[redis.asyncio.Redis] = []
                redlock = make(driver, nodes, clients)
                limit = vote_limit(redlock._core.config.node_timeout)
                try:
                    for ttl in ttls:
                        for fault in faults:
                            took: list[float] = []
                            outcomes: Counter[str] = Counter()
                            kept = 0
                            for r in range(rounds):
                                name = f"bench:extend:{driver}:{ttl:g}:{fault}:{r}"
                                t, outcome, held = await one_extend(
                                    redlock, nodes, name, ttl, fault, timeout
                                )
                                took.append(t)
                                outcomes[outcome] += 1
                                kept += held
                            key = f"{driver}/ttl={ttl:g}/{fault}"
                            figures[key] = {
                                "median_s": statistics.median(took),
                                "max_s": max(took),
                                "V_s": limit,
                                "outcomes": dict(outcomes),
                                "held_after": kept,
                                "rounds": rounds,
                            }
                            rows.append(
                                [driver, f"{ttl:g}", fault, f"{statistics.median(took):.3f}",
                                 f"{max(took):.3f}", f"{limit:.2f}",
                                 ", ".join(f"{k} x{v}" for k, v in outcomes.items()),
                                 f"{kept}/{rounds}"]
                            )  # fmt: skip
                finally:
                    await redlock.aclose()
                    for client in clients:
                        await client.aclose()
    finally:
        nodes.close()
    asked = "extend()" if timeout is None else f"extend(timeout={timeout:g})"
    print(f"{asked} with 2 of 3 nodes unreachable; tree: {Path(redlock_async.__file__).parent}")
    print(table(["driver", "ttl", "fault", "median s", "max s", "V s", "raised",
                 "held, not lost"], rows))  # fmt: skip
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="extends timed per row")
    parser.add_argument("--ttl", type=float, nargs="+", default=[6.0, 10.0], help="lock ttls")
    parser.add_argument("--faults", nargs="+", choices=sorted(FAULTS), default=list(FAULTS))
    parser.add_argument("--timeout", type=float, help="extend(timeout=T) instead of extend()")
    parser.add_argument("--json", type=Path, help="also write the figures here, by loop")
    add_loop_option(parser)
    args = parser.parse_args()
    figures = on_each_loop(
        args.loop, lambda: main(args.rounds, args.ttl, args.faults, args.timeout)
    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
