"""What telemetry costs: acquire+release throughput with it off, on with no SDK, on with an SDK.

Contenders, in interleaved rounds in one run (the machine is noisy: each
figure is a median over rounds, and each ratio is against "off" measured in
the same run):

- off: ``Redlock(..., telemetry=False)`` - what a process without
  opentelemetry-api installed pays (one attribute test per operation);
- API only: telemetry on, opentelemetry-api's no-op global providers (the
  API installed, no SDK configured);
- SDK: telemetry on, with an SDK MeterProvider (an in-memory reader, never
  read during the run) and TracerProvider (every span sampled, processed by
  a BatchSpanProcessor into an exporter that drops them), i.e. the library's
  own recording cost, not an exporter's network cost.

The SDK is set as the global provider only after the "API only" rounds: the
global providers can be set once per process, so the order is fixed
(off / API-only rounds interleaved, then off / SDK rounds interleaved).

Run: ``python benchmarks/telemetry.py [--seconds 1.0] [--rounds 5] [--tasks 50]
[--loop asyncio|uvloop|both]``. Needs opentelemetry-sdk (the test extra has it).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from redlock_async import Redlock
from redlock_async.testing import RedisServer

sys.path.insert(0, str(Path(__file__).parent))
from _common import add_loop_option, on_each_loop, run_for, table


class _Drop(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def _install_sdk() -> None:
    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(_Drop()))
    trace.set_tracer_provider(provider)


async def _rate(urls: list[str], telemetry: bool, seconds: float, tasks: int) -> float:
    async with Redlock(urls, telemetry=telemetry) as redlock:

        async def grant(index: int) -> float | None:
            lock = redlock.lock(f"bench:{index}", ttl=10.0, auto_extend=False)
            started = time.perf_counter()
            if not await lock.acquire(blocking=False):
                return None
            latency = time.perf_counter() - started
            await lock.release()
            return latency

        await run_for(0.2, tasks, grant)  # connections and scripts warm
        rate, _ = await run_for(seconds, tasks, grant)
        return rate


async def _phase(
    urls: list[str], label: str, args: argparse.Namespace
) -> tuple[list[float], list[float]]:
    off: list[float] = []
    on: list[float] = []
    for _ in range(args.rounds):
        off.append(await _rate(urls, False, args.seconds, args.tasks))
        on.append(await _rate(urls, True, args.seconds, args.tasks))
    print(f"  {label}: off {statistics.median(off):,.0f}/s, on {statistics.median(on):,.0f}/s")
    return off, on


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--nodes", type=int, default=3)
    add_loop_option(parser)
    args = parser.parse_args()
    if args.loop == "both":
        # The SDK is global and set once per process: one loop per run.
        parser.error("--loop both: run once per loop (the SDK phase cannot be undone)")
    servers = [RedisServer() for _ in range(args.nodes)]
    for server in servers:
        server.start()
    try:
        urls = [server.url for server in servers]

        async def run() -> list[tuple[str, float, float, float]]:
            rows = []
            off, on = await _phase(urls, "API only (no SDK)", args)
            rows.append(("API only", statistics.median(off), statistics.median(on), 0.0))
            _install_sdk()
            off, on = await _phase(urls, "SDK", args)
            rows.append(("SDK", statistics.median(off), statistics.median(on), 0.0))
            return [(n, a, b, b / a) for n, a, b, _ in rows]

        results = on_each_loop(args.loop, run)
        for loop, rows in results.items():
            print(f"\n{loop}, {args.tasks} tasks, {args.nodes} nodes, median of {args.rounds}:")
            print(
                table(
                    ["telemetry on, with", "off (grants/s)", "on (grants/s)", "on / off"],
                    [(n, f"{a:,.0f}", f"{b:,.0f}", f"{r:.2f}") for n, a, b, r in rows],
                )
            )
    finally:
        for server in servers:
            server.stop()


if __name__ == "__main__":
    main()
