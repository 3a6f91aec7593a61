"""Shared pieces of the benchmarks: event loops, percentiles, interleaved rounds, tables."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import statistics
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

__all__ = [
    "Result",
    "WarningCounter",
    "add_loop_option",
    "count_warnings",
    "on_each_loop",
    "percentile",
    "run_for",
    "table",
]

T = TypeVar("T")

LOOP_CHOICES = ("asyncio", "uvloop", "both")


def add_loop_option(parser: argparse.ArgumentParser) -> None:
    """``--loop asyncio|uvloop|both`` (default asyncio): the event loop(s) to measure on."""
    parser.add_argument(
        "--loop",
        choices=LOOP_CHOICES,
        default="asyncio",
        help="event loop to measure on (default asyncio); 'both' runs the whole benchmark "
        "on asyncio's loop, then on uvloop, each against its own baselines on that loop",
    )


def _loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop]:
    if name == "asyncio":
        return asyncio.new_event_loop
    try:
        import uvloop
    except ImportError:
        raise SystemExit("--loop uvloop needs uvloop: pip install uvloop") from None
    return uvloop.new_event_loop


def on_each_loop(choice: str, main: Callable[[], Coroutine[Any, Any, T]]) -> dict[str, T]:
    """Run ``main()`` once on each loop ``choice`` names; its result by loop name.

    A whole run per loop: every contender and every baseline of one run is
    measured on the same loop, so each ratio compares like with like. Rates
    across loops are from different minutes of a noisy machine: compare the
    loops by their ratios, not their rates.
    """
    names = ["asyncio", "uvloop"] if choice == "both" else [choice]
    results: dict[str, T] = {}
    for name in names:
        make = _loop_factory(name)
        print(f"\n=== event loop: {name}")
        with asyncio.Runner(loop_factory=make) as runner:
            results[name] = runner.run(main())
    return results


def percentile(samples: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by nearest rank; 0.0 for no samples."""
    if not samples:
        return 0.0
    ordered = sorted(samples)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered)) - 1))
    return ordered[rank]


@dataclass
class Result:
    """Rounds of one contender in one workload."""

    rates: list[float] = field(default_factory=list)  # grants per second, per round
    latencies: list[float] = field(default_factory=list)  # acquire latency, seconds

    @property
    def rate(self) -> float:
        return statistics.median(self.rates) if self.rates else 0.0

    def p(self, q: float) -> float:
        return percentile(self.latencies, q) * 1000


async def run_for(
    seconds: float, tasks: int, grant: Callable[[int], Awaitable[float | None]]
) -> tuple[float, list[float]]:
    """Run ``grant(task_index)`` in ``tasks`` loops for ``seconds``.

    Each call returns its acquire latency, or None when it was refused (not
    counted). Returns successful grants/s and their latencies.
    """
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds

    async def loop(index: int) -> None:
        while time.perf_counter() < deadline:
            latency = await grant(index)
            if latency is not None:
                latencies.append(latency)

    started = time.perf_counter()
    await asyncio.gather(*(loop(i) for i in range(tasks)))
    return len(latencies) / (time.perf_counter() - started), latencies


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = [
        "  ".join(
            c.rjust(w) if i else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


class WarningCounter(logging.Handler):
    """Counts the library's log records at WARNING and above, by message.

    Attach with :func:`count_warnings`; ``kinds`` keeps one count per message
    text. The library rate-limits its warnings (one per event and lock or
    node every 10 s, docs/observability.md): these are the records logged,
    not the events behind them.
    """

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.total = 0
        self.kinds: dict[str, int] = {}

    def emit(self, record: logging.LogRecord) -> None:
        self.total += 1
        text = record.getMessage()
        self.kinds[text] = self.kinds.get(text, 0) + 1

    def count(self, fragment: str) -> int:
        """Records whose message contains ``fragment``."""
        return sum(n for msg, n in self.kinds.items() if fragment in msg)

    def summary(self, limit: int = 3) -> str:
        ranked = sorted(self.kinds.items(), key=lambda kind: -kind[1])[:limit]
        return "; ".join(f"{count} x {msg!r}" for msg, count in ranked)


@contextlib.contextmanager
def count_warnings(logger: str = "redlock_async") -> Iterator[WarningCounter]:
    """Count the WARNING+ records of ``logger`` inside the block (they still propagate)."""
    counter = WarningCounter()
    log = logging.getLogger(logger)
    log.addHandler(counter)
    try:
        yield counter
    finally:
        log.removeHandler(counter)


class BareConn(asyncio.Protocol):
    """A bare RESP connection for the floors: replies, in order, to the callbacks
    that sent the commands; ``coalesce``: writes gathered per loop iteration."""

    def __init__(self, loop: asyncio.AbstractEventLoop, coalesce: bool = True) -> None:
        # Imported here: peers.py's child process imports this module from a
        # venv of its own, which need not have hiredis.
        import hiredis

        self.loop = loop
        self.coalesce = coalesce
        self.reader = hiredis.Reader()
        self.pending: deque[Callable[[object], None]] = deque()
        self.out: list[bytes] = []
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # Not isinstance(asyncio.Transport): uvloop's transports are not subclasses.
        self.transport = cast(asyncio.Transport, transport)

    def send(self, payload: bytes, callback: Callable[[object], None]) -> None:
        assert self.transport is not None
        self.pending.append(callback)
        if not self.coalesce:
            self.transport.write(payload)
            return
        if not self.out:
            self.loop.call_soon(self.flush)
        self.out.append(payload)

    def flush(self) -> None:
        assert self.transport is not None
        self.transport.write(b"".join(self.out))
        self.out.clear()

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        while (reply := self.reader.gets()) is not False:
            self.pending.popleft()(reply)


class Votes:
    """A quorum of ``expect`` replies -> True; too many others -> False."""

    __slots__ = ("expect", "future", "need", "no", "spare", "yes")

    def __init__(self, future: asyncio.Future[bool], n: int, expect: object = 1) -> None:
        self.future, self.expect, self.need = future, expect, n // 2 + 1
        self.yes = self.no = 0
        self.spare = n - self.need  # no votes the quorum can absorb

    def __call__(self, reply: object) -> None:
        if reply == self.expect:  # anything else (nil, 0, an error reply) votes no
            self.yes += 1
        else:
            self.no += 1
        if not self.future.done():
            if self.yes >= self.need:
                self.future.set_result(True)
            elif self.no > self.spare:
                self.future.set_result(False)
