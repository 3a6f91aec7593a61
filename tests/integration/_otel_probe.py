"""Run a few lock operations under an OpenTelemetry SDK; print what was reported, as JSON.

Run in a child process (``python -m tests.integration._otel_probe URL...``): the
global providers can be set once per process, and the rest of the suite must
not pay for an SDK.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from redlock_async import LockNotAcquired, Redlock


async def scenario(urls: list[str], dead: str) -> None:
    async with (
        Redlock(urls) as redlock,
        Redlock(urls) as other,
        redlock.lock("orders:1", ttl=5.0),
    ):
        try:
            async with other.lock("orders:1", timeout=0):
                pass
        except LockNotAcquired:
            pass
        await asyncio.sleep(0.05)
    async with Redlock([*urls[:2], dead]) as degraded, degraded.lock("orders:2"):
        pass  # the dead node fails its commands: node errors


def main() -> None:
    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    asyncio.run(scenario(sys.argv[1:-1], sys.argv[-1]))
    points: dict[str, list[dict[str, Any]]] = {}
    data = reader.get_metrics_data()
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    value = getattr(point, "value", None)
                    if value is None:
                        value = {"count": point.count, "sum": point.sum}  # type: ignore[union-attr]
                    points.setdefault(metric.name, []).append(
                        {"attributes": dict(point.attributes or {}), "value": value}
                    )
    spans = [
        {"name": span.name, "attributes": dict(span.attributes or {})}
        for span in exporter.get_finished_spans()
    ]
    print(json.dumps({"metrics": points, "spans": spans}))


if __name__ == "__main__":
    main()
