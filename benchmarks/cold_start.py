"""Time to first grant: a fresh Redlock in a fresh process, on 5 healthy nodes and with one dead.

Each measurement is a new Python process (imports done before the clock
starts) that runs, on its event loop: ``Redlock(...)``, then the first
``acquire()`` of a lock on a free name, timed from the constructor to the
acquire returning True; then, after releasing it, a second lock's acquire
in the same process: the same-run baseline (connections open, scripts
loaded). Two scenarios: 5 healthy nodes, and one of the 5 addresses with
nothing listening (connection refused: should cost nothing). Contenders,
interleaved round by round:

- redlock_async with URLs (its lean driver);
- redlock_async with redis-py clients (built inside the timed span);
- the floor: a bare asyncio protocol per node that opens its connection and
  sends ``SCRIPT LOAD`` and the census script in one write, then the
  acquire's ``EVALSHA`` with the view of the epochs the census read (since
  issue 25 the script refuses a grant without it), deciding at quorum (no
  handshake, no run_id watch).

Figures are medians over rounds (``--rounds``; the machine is noisy).

Run: ``python benchmarks/cold_start.py [--rounds 9] [--host 127.0.0.1]
[--loop asyncio|uvloop|both] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import statistics
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

import hiredis

from redlock_async.testing import RedisServer

sys.path.insert(0, str(Path(__file__).parent))
from _common import add_loop_option, percentile, table

CONTENDERS = ("lean driver (URLs)", "redis-py clients", "floor: bare protocol")
SCENARIOS = ("5 healthy nodes", "one dead node")
_pack: Callable[[tuple[object, ...]], bytes] = hiredis.pack_command  # type: ignore[assignment]


# --- the child: one fresh process, one contender --------------------------------------------


async def _library(urls: list[str], redis_py: bool, name: str) -> tuple[float, float]:
    from redlock_async import Redlock

    started = time.perf_counter()
    if redis_py:
        import redis.asyncio

        nodes: list[Any] = [redis.asyncio.Redis.from_url(url) for url in urls]
    else:
        nodes = list(urls)
    redlock = Redlock(nodes)
    lock = redlock.lock(f"{name}:first", ttl=10.0, auto_extend=False)
    if not await lock.acquire(timeout=5.0):
        raise SystemExit("the first acquire failed")
    first = time.perf_counter() - started
    await lock.release()
    second_lock = redlock.lock(f"{name}:second", ttl=10.0, auto_extend=False)
    started = time.perf_counter()
    if not await second_lock.acquire(timeout=5.0):
        raise SystemExit("the second acquire failed")
    second = time.perf_counter() - started
    await second_lock.release()
    await redlock.aclose()
    if redis_py:
        for client in nodes:
            await client.aclose()
    return first, second


class _Bare(asyncio.Protocol):
    """The floor's connection: FIFO replies to callbacks, one write per batch."""

    def __init__(self) -> None:
        self.reader = hiredis.Reader()
        self.pending: deque[Callable[[object], None]] = deque()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        while (reply := self.reader.gets()) is not False:
            self.pending.popleft()(reply)


async def _bare(urls: list[str], name: str) -> tuple[float, float]:
    from redlock_async._core._scripts import ACQUIRE, RELEASE
    from redlock_async._engine import CENSUS

    loop = asyncio.get_running_loop()
    need = len(urls) // 2 + 1

    async def ask(conn: _Bare | None, payloads: list[bytes]) -> object:
        """Send ``payloads`` in one write; the last one's reply."""
        if conn is None or conn.transport is None:
            return None
        done: asyncio.Future[object] = loop.create_future()
        for index in range(len(payloads)):
            last = index == len(payloads) - 1
            conn.pending.append(done.set_result if last else lambda _: None)
        conn.transport.write(b"".join(payloads))
        return await done

    async def vote(conn: _Bare | None, payloads: list[bytes]) -> bool:
        """Send ``payloads`` in one write; True when the last one answers 1."""
        return await ask(conn, payloads) == 1

    async def quorum(votes: Sequence[asyncio.Future[bool]]) -> bool:
        yes = 0
        for outcome in asyncio.as_completed(votes):
            with contextlib.suppress(OSError):  # refused: a failed vote
                yes += await outcome
            if yes >= need:
                return True
        return False

    async def connect_and_read_epoch(url: str, payloads: list[bytes]) -> bytes:
        host, port = url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
        _, conn = await loop.create_connection(_Bare, host, int(port))
        conns.append(conn)
        reply = await ask(conn, payloads)
        assert isinstance(reply, list)
        return bytes(reply[0])

    view = b","

    def acquire(key: bytes, token: bytes) -> bytes:
        # The library's script takes the view of the nodes' epochs (issue 25).
        return _pack((b"EVALSHA", ACQUIRE.sha, 1, key, token, 10_000, view))

    conns: list[_Bare] = []
    token = b"%040x" % time.time_ns()
    first_key = f"redlock:{{{name}:first}}".encode()
    started = time.perf_counter()
    # As the library does it: every node's epoch first (census.lua, loaded
    # with acquire.lua on the same write), then the acquire with that view.
    setup = [
        _pack((b"SCRIPT", b"LOAD", ACQUIRE.source)),
        _pack((b"EVAL", CENSUS.source, 1, b"redlock:~epoch")),
    ]
    read = await asyncio.gather(
        *(connect_and_read_epoch(url, setup) for url in urls), return_exceptions=True
    )
    epochs = b",".join(e for e in read if isinstance(e, bytes))
    view = b"redlock:~epoch:," + epochs + b","
    tasks = [loop.create_task(vote(conn, [acquire(first_key, token)])) for conn in conns]
    if not await quorum(tasks):
        raise SystemExit("the floor's first acquire failed")
    first = time.perf_counter() - started
    await asyncio.gather(*tasks, return_exceptions=True)
    release = [_pack((b"EVALSHA", RELEASE.sha, 1, first_key, token))]
    await asyncio.gather(*(vote(conn, release) for conn in conns))
    second_key = f"redlock:{{{name}:second}}".encode()
    started = time.perf_counter()
    second_votes = [loop.create_task(vote(c, [acquire(second_key, token)])) for c in conns]
    if not await quorum(second_votes):
        raise SystemExit("the floor's second acquire failed")
    second = time.perf_counter() - started
    await asyncio.gather(*second_votes)
    release = [_pack((b"EVALSHA", RELEASE.sha, 1, second_key, token))]
    await asyncio.gather(*(vote(conn, release) for conn in conns))
    for conn in conns:
        assert conn.transport is not None
        conn.transport.close()
    return first, second


def child(contender: str, loop_name: str, urls: list[str], name: str) -> None:
    if contender == CONTENDERS[2]:
        main = _bare(urls, name)
    else:
        main = _library(urls, contender == CONTENDERS[1], name)
    if loop_name == "uvloop":
        import uvloop

        first, second = uvloop.run(main)
    else:
        first, second = asyncio.run(main)
    print(json.dumps({"first_s": first, "second_s": second}))


# --- the parent: servers, rounds, figures ---------------------------------------------------


def _dead_port() -> int:
    """A loopback port with nothing listening (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _run_child(contender: str, loop_name: str, urls: list[str], name: str) -> dict[str, float]:
    command = [sys.executable, __file__, "--child", contender, "--loop", loop_name, "--name", name]
    done = subprocess.run([*command, *urls], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise SystemExit(f"{contender} failed:\n{done.stderr}")
    return cast(dict[str, float], json.loads(done.stdout.splitlines()[-1]))


def main(loop_name: str, rounds: int, host: str) -> dict[str, list[dict[str, Any]]]:
    servers = [RedisServer() for _ in range(5)]
    for server in servers:
        server.start()
    try:
        healthy = [f"redis://{host}:{s.port}/0" for s in servers]
        # The dead address first: a node tried first must not hold up the others.
        dead = [f"redis://{host}:{_dead_port()}/0", *healthy[1:]]
        urls = dict(zip(SCENARIOS, (healthy, dead), strict=True))
        samples: dict[tuple[str, str], list[dict[str, float]]] = {
            (scenario, contender): [] for scenario in SCENARIOS for contender in CONTENDERS
        }
        for contender in CONTENDERS:  # warm-up: the servers' script caches, the page cache
            _run_child(contender, loop_name, healthy, f"bench:cold:warm:{time.time_ns()}")
        for round_ in range(rounds):
            for scenario in SCENARIOS:
                for contender in CONTENDERS:
                    name = f"bench:cold:{round_}:{time.time_ns()}"
                    samples[scenario, contender].append(
                        _run_child(contender, loop_name, urls[scenario], name)
                    )
            print(".", end="", flush=True)
        print()
    finally:
        for server in servers:
            server.stop()
    figures: list[dict[str, Any]] = []
    rows = []
    for (scenario, contender), runs in samples.items():
        firsts = [r["first_s"] * 1000 for r in runs]
        seconds = [r["second_s"] * 1000 for r in runs]
        floor = samples[scenario, CONTENDERS[2]]
        floor_first = statistics.median(r["first_s"] * 1000 for r in floor)
        first, second = statistics.median(firsts), statistics.median(seconds)
        p90 = percentile(firsts, 90)
        figures.append(
            {
                "scenario": scenario,
                "contender": contender,
                "first_ms": first,
                "first_p90_ms": p90,
                "second_ms": second,
                "first_over_second": first / second,
                "first_over_floor": first / floor_first,
                "rounds": len(runs),
            }
        )
        rows.append([scenario, contender, f"{first:.2f}", f"{p90:.2f}", f"{second:.2f}",
                     f"{first / second:.1f}x", f"{first / floor_first:.2f}x"])  # fmt: skip
    print(f"time to first grant, fresh process, 5 nodes on {host}, median of {rounds} rounds")
    headers = ["scenario", "contender", "first ms", "first p90 ms", "second ms",
               "first / second", "first / floor"]  # fmt: skip
    print(table(headers, rows))
    return {"cold_start": figures}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument(
        "--host", default="127.0.0.1", help="how the URLs name the nodes (e.g. localhost)"
    )
    parser.add_argument("--json", type=Path, help="also write the figures here, by loop")
    parser.add_argument("--child", choices=CONTENDERS, help=argparse.SUPPRESS)
    parser.add_argument("--name", default="bench:cold", help=argparse.SUPPRESS)
    parser.add_argument("urls", nargs="*", help=argparse.SUPPRESS)
    add_loop_option(parser)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.loop, args.urls, args.name)
        raise SystemExit(0)
    result: dict[str, Any] = {}
    for loop_name in ["asyncio", "uvloop"] if args.loop == "both" else [args.loop]:
        print(f"\n=== event loop: {loop_name}")
        result[loop_name] = main(loop_name, args.rounds, args.host)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
