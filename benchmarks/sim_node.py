"""What the simulated node costs (issue 39): commands and script runs per second, one core.

The simulation's budget is about 1 ms of one core per simulated grant, all
in (client, node, network loop); a granting script run on the node should
take well under a tenth of that. Each contender runs ``--ops`` operations on
a fresh node, in interleaved rounds; the report is the median rate, the
microseconds per operation, and its cost against the same run's baseline:
a plain Python dict assignment loop (``dict set``) - the floor of any
in-memory SET, and the only figure that means anything across runs of a
noisy machine is the ratio to it.

Contenders: raw commands through ``execute`` (SET NX PX, GET, PTTL), and
the library's own scripts through EVALSHA (acquire on free names, with and
without a fencing counter; release; extend; a fair acquire; a census), and
one acquire+release through the RESP codec as the simulated network will
run it (read the command's bytes, execute, encode the reply).

Run: ``python benchmarks/sim_node.py [--ops 20000] [--rounds 5]`` (no
redis-server needed: the node is all in this process).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent))  # tests.sim, from a checkout
from _common import table

from redlock_async._core._scripts import (
    ACQUIRE,
    ALL_SCRIPTS,
    EXTEND,
    FAIR_ACQUIRE,
    RELEASE,
)
from redlock_async._engine import CENSUS
from tests.sim.node import SimNode
from tests.sim.real import pack
from tests.sim.resp import CommandReader, encode

T0 = 1_700_000_000_000
Setup = Callable[[int], Callable[[], None]]
"""Given the number of operations, a function that runs them once (on a fresh node)."""


def _node() -> tuple[SimNode, bytes, list[int]]:
    """A node with the scripts loaded and an epoch; its record key and its clock."""
    now = [T0]
    node = SimNode(lambda: now[0])
    for script in ALL_SCRIPTS:
        node.execute([b"SCRIPT", b"LOAD", script.source])
    node.execute([b"EVALSHA", CENSUS.sha, b"1", b"redlock:~epoch"])
    epoch = node.execute([b"HGET", b"redlock:~epoch", b"id"])
    assert isinstance(epoch, bytes)
    return node, b"redlock:~epoch:," + epoch + b",", now


def _dict_set(ops: int) -> Callable[[], None]:
    keys = [b"redlock:{%d}" % i for i in range(ops)]

    def run() -> None:
        data: dict[bytes, bytes] = {}
        for key in keys:
            data[key] = b"token"

    return run


def _command(words: Callable[[bytes], list[bytes]]) -> Setup:
    def setup(ops: int) -> Callable[[], None]:
        node, _, _ = _node()
        commands = [words(b"redlock:{%d}" % i) for i in range(ops)]

        def run() -> None:
            execute = node.execute
            for command in commands:
                execute(command)

        return run

    return setup


def _script(build: Callable[[bytes, bytes], list[bytes]], prepare: bool = False) -> Setup:
    """EVALSHA of build(key, record) per key; ``prepare``: each key granted first."""

    def setup(ops: int) -> Callable[[], None]:
        node, record, _ = _node()
        keys = [b"redlock:{%d}" % i for i in range(ops)]
        if prepare:
            for key in keys:
                node.execute([b"EVALSHA", ACQUIRE.sha, b"1", key, b"t" * 40, b"30000", record])
        commands = [build(key, record) for key in keys]

        def run() -> None:
            execute = node.execute
            for command in commands:
                execute(command)

        return run

    return setup


def _over_resp(ops: int) -> Callable[[], None]:
    node, record, _ = _node()
    token = b"t" * 40
    payloads = [
        pack([b"EVALSHA", ACQUIRE.sha, b"1", b"redlock:{%d}" % i, token, b"30000", record])
        + pack([b"EVALSHA", RELEASE.sha, b"1", b"redlock:{%d}" % i, token])
        for i in range(ops // 2)
    ]

    def run() -> None:
        reader = CommandReader()
        for payload in payloads:
            reader.feed(payload)
            while (command := reader.get()) is not None:
                encode(node.execute(command))

    return run


TOKEN = b"t" * 40
CONTENDERS: dict[str, Setup] = {
    "dict set (baseline)": _dict_set,
    "SET NX PX": _command(lambda key: [b"SET", key, TOKEN, b"NX", b"PX", b"30000"]),
    "GET": _command(lambda key: [b"GET", key]),
    "PTTL": _command(lambda key: [b"PTTL", key]),
    "acquire.lua (grant)": _script(
        lambda key, record: [b"EVALSHA", ACQUIRE.sha, b"1", key, TOKEN, b"30000", record]
    ),
    "acquire.lua, fencing": _script(
        lambda key, record: [
            *(b"EVALSHA", ACQUIRE.sha, b"2", key, key + b":fence"),
            *(TOKEN, b"30000", record),
        ]
    ),
    "release.lua": _script(lambda key, _: [b"EVALSHA", RELEASE.sha, b"1", key, TOKEN], True),
    "extend.lua": _script(
        lambda key, record: [b"EVALSHA", EXTEND.sha, b"1", key, TOKEN, b"60000", record], True
    ),
    "fair_acquire.lua": _script(
        lambda key, record: [
            *(b"EVALSHA", FAIR_ACQUIRE.sha, b"4", key, key + b":xr", key + b":q", key + b":qh"),
            *(TOKEN, b"30000", b"x:0123456789abcdef", b"1700000000000.000", b"2000", record),
        ]
    ),
    "census.lua": _script(lambda key, _: [b"EVALSHA", CENSUS.sha, b"1", b"redlock:~epoch"]),
    "acquire+release over RESP (per op)": _over_resp,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=20_000, help="operations per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    seconds: dict[str, list[float]] = {name: [] for name in CONTENDERS}
    for _ in range(args.rounds):  # interleaved: every contender in every round
        for name, setup in CONTENDERS.items():
            run = setup(args.ops)
            started = time.perf_counter()
            run()
            seconds[name].append((time.perf_counter() - started) / args.ops)
    base = statistics.median(seconds["dict set (baseline)"])
    rows = []
    for name, samples in seconds.items():
        per_op = statistics.median(samples)
        rows.append([name, f"{1 / per_op:,.0f}", f"{per_op * 1e6:.2f}", f"{per_op / base:,.0f}"])
    print(f"median of {args.rounds} rounds x {args.ops:,} operations, one core:")
    print(table(["contender", "ops/s", "us/op", "x dict set"], rows))


if __name__ == "__main__":
    main()
