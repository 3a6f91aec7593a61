"""Acquire+release throughput and latency on local nodes, against two floors.

Contenders, measured in the same run, in interleaved rounds (the machine is
noisy, so each figure is a median over rounds):

- floor (a) redis-py: per grant, ``SET NX PX`` on all nodes with
  ``asyncio.gather``, then a compare-and-delete ``EVALSHA`` the same way;
- floor (b) bare protocol: the Python limit - an ``asyncio.Protocol`` per node
  with hiredis's reader, one auto-pipelined connection per node, the lock's
  own scripts, deciding at quorum, no other logic;
- the same bare protocol with one write per command (no coalescing across
  tasks), for reference: the pipelining that floor (b) shares with the lean
  driver is what separates them under concurrency;
- redlock_async with URLs (its lean driver) and with redis-py clients;
- for reference, the lean driver with ``wake_on_release=False``: releases
  then send exactly floor (b)'s commands (by default each release also
  announces itself with SPUBLISH, work the floor's nodes do not do).

Besides rates and latencies it reports CPU per grant: this process's
(``process_time``) and the Redis servers' (from ``/proc``, Linux only), so a
gap between contenders can be told apart into client work and server work.

Run: ``python benchmarks/throughput.py [--seconds 1.0] [--rounds 5] [--nodes 5]
[--loop asyncio|uvloop|both]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import hiredis
import redis.asyncio

from redlock_async import LockNotOwned, Redlock
from redlock_async._base._keys import epoch_key
from redlock_async._core._scripts import ACQUIRE, RELEASE
from redlock_async._engine import CENSUS
from redlock_async.testing import RedisServer

sys.path.insert(0, str(Path(__file__).parent))
from _common import BareConn, Result, Votes, add_loop_option, on_each_loop, run_for, table

Grant = Callable[[int], Awaitable[float | None]]
_pack: Callable[[tuple[object, ...]], bytes] = hiredis.pack_command  # type: ignore[assignment]


async def bare_floor(
    ports: list[int], names: list[bytes], view: bytes, *, coalesce: bool = True
) -> tuple[Grant, Callable[[], None]]:
    loop = asyncio.get_running_loop()
    conns = []
    for port in ports:
        _, conn = await loop.create_connection(lambda: BareConn(loop, coalesce), "127.0.0.1", port)
        conns.append(conn)

    async def fan(payload: bytes) -> bool:
        future: asyncio.Future[bool] = loop.create_future()
        votes = Votes(future, len(conns))
        for conn in conns:
            conn.send(payload, votes)
        return await future

    async def grant(index: int) -> float | None:
        token = secrets.token_hex(20).encode()
        key = names[index]
        started = time.perf_counter()
        # The library's own script, with the view of the nodes' epochs it
        # checks (issue 25): the floor pays the same server work.
        ok = await fan(_pack((b"EVALSHA", ACQUIRE.sha, 1, key, token, 10_000, view)))
        latency = time.perf_counter() - started
        await fan(_pack((b"EVALSHA", RELEASE.sha, 1, key, token)))
        return latency if ok else None

    def close() -> None:
        for conn in conns:
            assert conn.transport is not None
            conn.transport.close()

    return grant, close


async def redis_py_floor(clients: list[redis.asyncio.Redis], names: list[bytes]) -> Grant:
    quorum = len(clients) // 2 + 1
    release_sha = RELEASE.sha.decode()

    async def grant(index: int) -> float | None:
        token = secrets.token_hex(20).encode()
        key = names[index]
        started = time.perf_counter()
        votes = await asyncio.gather(*(c.set(key, token, nx=True, px=10_000) for c in clients))
        latency = time.perf_counter() - started
        await asyncio.gather(*(c.evalsha(release_sha, 1, key, token) for c in clients))
        return latency if sum(1 for v in votes if v) >= quorum else None

    return grant


def library(redlock: Redlock, names: list[str]) -> Grant:
    async def grant(index: int) -> float | None:
        lock = redlock.lock(names[index], ttl=10.0, auto_extend=False)
        started = time.perf_counter()
        ok = await lock.acquire(blocking=False)
        latency = time.perf_counter() - started
        if not ok:  # e.g. a cold redis-py pool opening 50 connections past node_timeout
            return None
        try:
            await lock.release()
        except LockNotOwned as exc:
            print("release failed:", exc, file=sys.stderr)
            return None
        return latency

    return grant


async def main(seconds: float, rounds: int, n_nodes: int) -> dict[str, dict[str, float]]:
    servers = [RedisServer() for _ in range(n_nodes)]
    for server in servers:
        server.start()
    clients: list[redis.asyncio.Redis] = []
    try:
        urls = [s.url for s in servers]
        for server in servers:
            client = redis.asyncio.Redis(port=server.port)
            for script in (ACQUIRE, RELEASE):
                await client.script_load(script.source)
            clients.append(client)
        # Every node's epoch, as a census reads it: the view acquire.lua checks.
        epochs = [
            (await c.eval(CENSUS.source.decode(), 1, epoch_key("redlock:")))[0] for c in clients
        ]
        view = epoch_key("redlock:") + b":," + b",".join(epochs) + b","
        report: dict[str, dict[str, float]] = {}
        for workload, tasks in (("sequential", 1), ("concurrent", 50)):
            names = [f"bench:{workload}:{i}" for i in range(tasks)]
            keys = [f"redlock:{{{name}}}".encode() for name in names]
            ports = [s.port for s in servers]
            bare, close_bare = await bare_floor(ports, keys, view)
            unbatched, close_unbatched = await bare_floor(ports, keys, view, coalesce=False)
            lean = Redlock(urls)
            quiet = Redlock(urls, wake_on_release=False)
            via_redis_py = Redlock([redis.asyncio.Redis(port=s.port) for s in servers])
            contenders: dict[str, Grant] = {
                "floor (a) redis-py": await redis_py_floor(clients, keys),
                "floor (b) bare protocol": bare,
                "bare protocol, one write per command": unbatched,
                "redlock_async (URLs, lean driver)": library(lean, names),
                "redlock_async (URLs, no release announcement)": library(quiet, names),
                "redlock_async (redis-py clients)": library(via_redis_py, names),
            }
            results = {label: Result() for label in contenders}

            async def between(keys: list[bytes] = keys) -> None:
                # Let trailing releases land, and start every contender from clean nodes.
                await asyncio.sleep(0.1)
                await asyncio.gather(*(c.delete(*keys) for c in clients))

            for grant in contenders.values():  # warm up connections and scripts
                await between()
                await run_for(0.3, tasks, grant)
            client_cpu: dict[str, list[float]] = {label: [] for label in contenders}
            server_cpu: dict[str, list[float]] = {label: [] for label in contenders}
            for _ in range(rounds):
                for label, grant in contenders.items():
                    await between()
                    cpu_before, servers_before = time.process_time(), _servers_cpu(servers)
                    rate, latencies = await run_for(seconds, tasks, grant)
                    grants = max(1, len(latencies))
                    client_cpu[label].append((time.process_time() - cpu_before) / grants * 1e6)
                    if servers_before is not None:
                        spent = (_servers_cpu(servers) or 0.0) - servers_before
                        server_cpu[label].append(spent / grants * 1e6)
                    results[label].rates.append(rate)
                    results[label].latencies.extend(latencies)
            close_bare()
            close_unbatched()
            await lean.aclose()
            await quiet.aclose()
            await via_redis_py.aclose()
            floor_a = results["floor (a) redis-py"].rate
            floor_b = results["floor (b) bare protocol"].rate
            rows = []
            for label, result in results.items():
                client_us = statistics.median(client_cpu[label])
                server_us = statistics.median(server_cpu[label]) if server_cpu[label] else 0.0
                rows.append([label, f"{result.rate:,.0f}", f"{result.p(50):.2f}",
                             f"{result.p(99):.2f}", f"{result.rate / floor_a:.2f}x",
                             f"{result.rate / floor_b:.2f}x", f"{client_us:.1f}",
                             f"{server_us:.1f}" if server_cpu[label] else "-"])  # fmt: skip
                report[f"{workload}/{label}"] = {
                    "grants_per_s": result.rate,
                    "p50_ms": result.p(50),
                    "p99_ms": result.p(99),
                    "vs_floor_a": result.rate / floor_a,
                    "vs_floor_b": result.rate / floor_b,
                    "client_cpu_us_per_grant": client_us,
                    "server_cpu_us_per_grant": server_us,
                }
            print(f"\n{workload}: {tasks} task(s), {n_nodes} nodes, {rounds} x {seconds}s rounds")
            headers = ["contender", "grants/s", "p50 ms", "p99 ms", "vs (a)", "vs (b)",
                       "client CPU us/grant", "server CPU us/grant"]  # fmt: skip
            print(table(headers, rows))
            ratio = results["redlock_async (URLs, lean driver)"].rate / floor_b
            verdict = "met" if ratio >= 0.8 else "NOT met"
            print(f"target >= 0.8x floor (b): {ratio:.2f}x -> {verdict}")
        return report
    finally:
        for client in clients:
            await client.aclose()
        for server in servers:
            server.stop()


def _compare_loops(figures: dict[str, dict[str, dict[str, float]]]) -> None:
    """The headline ratios side by side, each against its own loop's floors."""
    rows = []
    for key in next(iter(figures.values())):
        if "redlock_async" not in key:
            continue
        row: list[object] = [key]
        for by_key in figures.values():
            result = by_key[key]
            row += [f"{result['grants_per_s']:,.0f}", f"{result['vs_floor_b']:.2f}x"]
        rows.append(row)
    headers: list[str] = ["workload/contender"]
    for loop in figures:
        headers += [f"{loop} grants/s", f"{loop} vs (b)"]
    print("\nby event loop (each ratio against floor (b) on the same loop, same run):")
    print(table(headers, rows))


def _servers_cpu(servers: list[RedisServer]) -> float | None:
    """CPU seconds the servers have used (user + system), or None where /proc is missing."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for server in servers:
        try:
            fields = Path(f"/proc/{server.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return None
        total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="length of one round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per contender")
    parser.add_argument("--nodes", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write the figures here, by loop")
    add_loop_option(parser)
    args = parser.parse_args()
    figures = on_each_loop(args.loop, lambda: main(args.seconds, args.rounds, args.nodes))
    if len(figures) > 1:
        _compare_loops(figures)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
