"""What operators see: OpenTelemetry metrics and spans, and structured, rate-limited logs."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from redlock_async import Redlock
from redlock_async._base._observe import RATE, _Limiter
from redlock_async.testing import RedisNodes
from redlock_async.testing._server import free_port

from ..conftest import MakeRedlock

ROOT = Path(__file__).resolve().parents[2]


def child(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=90, cwd=ROOT, check=False
    )


async def probe(redis_nodes: RedisNodes, dead: str) -> dict[str, Any]:
    urls = [node.url for node in redis_nodes]
    result = await asyncio.to_thread(child, "-m", "tests.integration._otel_probe", *urls, dead)
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def total(report: dict[str, Any], metric: str) -> float:
    return float(sum(point["value"] for point in report["metrics"].get(metric, [])))


@pytest.mark.parametrize("driver", ["resp"])  # the probe runs in its own process, over URLs
async def test_metrics_and_spans_under_an_sdk(redis_nodes: RedisNodes, driver: str) -> None:
    dead = f"redis://:hunter2-secret@127.0.0.1:{free_port()}/0"
    report = await probe(redis_nodes, dead)
    assert total(report, "redlock.grants") == 2
    assert total(report, "redlock.refusals") == 1
    acquires = report["metrics"]["redlock.acquire.duration"]
    assert sum(point["value"]["count"] for point in acquires) == 3
    holds = report["metrics"]["redlock.hold.duration"]
    assert sum(point["value"]["count"] for point in holds) == 2
    assert all(point["value"]["sum"] > 0 for point in holds)
    # No lock names in metric attributes by default: one series, whatever the name.
    for points in report["metrics"].values():
        for point in points:
            assert "redlock.name" not in point["attributes"]
    errors = report["metrics"]["redlock.node.errors"]
    assert total(report, "redlock.node.errors") >= 1
    assert {point["attributes"]["node"] for point in errors} == {
        dead.replace(":hunter2-secret@", "***@")
    }
    assert "hunter2" not in json.dumps(report)
    spans = {(span["name"], span["attributes"].get("redlock.outcome")) for span in report["spans"]}
    assert ("redlock.acquire", "granted") in spans
    assert ("redlock.acquire", "refused") in spans
    assert ("redlock.release", "released") in spans
    assert {span["attributes"]["redlock.name"] for span in report["spans"]} == {
        "orders:1",
        "orders:2",
    }


HIDDEN = textwrap.dedent(
    """
    import asyncio, sys
    import importlib.abc

    class Hide(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "opentelemetry" or name.startswith("opentelemetry."):
                raise ModuleNotFoundError(name)
            return None

    if sys.argv[2] == "hidden":
        sys.meta_path.insert(0, Hide())
    from redlock_async import Redlock

    async def main():
        async with Redlock([sys.argv[1]], telemetry=sys.argv[2] != "off") as redlock:
            async with redlock.lock("job"):
                pass
            print(redlock._core.telemetry is None, "opentelemetry" in sys.modules)

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("driver", ["resp"])  # one driver suffices
@pytest.mark.parametrize("mode", ["hidden", "off"])
async def test_nothing_is_imported_without_the_extra_or_when_off(
    redis_nodes: RedisNodes, driver: str, mode: str
) -> None:
    result = await asyncio.to_thread(child, "-c", HIDDEN, redis_nodes[0].url, mode)
    assert result.returncode == 0, result.stderr
    off, imported = result.stdout.split()
    assert off == "True"
    if mode == "hidden":  # not installed: the lock works, and nothing tried to import it
        assert imported == "False"
    # With it installed and telemetry=False, redis-py itself imports opentelemetry.


LATE_SDK = textwrap.dedent(
    """
    import asyncio, sys
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from redlock_async import Redlock

    async def main():
        async with Redlock([sys.argv[1]]) as redlock:
            async with redlock.lock("before"):
                pass
            idle = redlock._core.telemetry is None  # the API's proxies: nothing records
            exporter = InMemorySpanExporter()
            provider = TracerProvider()
            provider.add_span_processor(SimpleSpanProcessor(exporter))
            trace.set_tracer_provider(provider)
            for attempt in range(50):  # reporting starts within RECHECK (1 s)
                async with redlock.lock("after"):
                    pass
                if exporter.get_finished_spans():
                    break
                await asyncio.sleep(0.1)
            names = {span.attributes["redlock.name"] for span in exporter.get_finished_spans()}
            print(idle, ",".join(sorted(names)))

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("driver", ["resp"])  # one driver suffices
async def test_without_an_sdk_nothing_is_built_and_a_later_sdk_is_reported_to(
    redis_nodes: RedisNodes, driver: str
) -> None:
    # opentelemetry-api installed, no SDK yet: its proxies would drop every
    # span, so none is built (6 % of the client's instructions per cycle).
    # Providers installed later are reported to, as before.
    result = await asyncio.to_thread(child, "-c", LATE_SDK, redis_nodes[0].url)
    assert result.returncode == 0, result.stderr
    idle, names = result.stdout.split()
    assert idle == "True"
    assert names == "after"


async def test_grants_and_releases_are_debug_records_with_fields(
    redlock: Redlock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="redlock_async.lock")
    async with redlock.lock("job"):
        pass
    records = [r for r in caplog.records if r.name == "redlock_async.lock"]
    outcomes = [getattr(r, "redlock_outcome", None) for r in records]
    assert outcomes == ["granted", "released"]
    for record in records:
        assert record.levelno == logging.DEBUG
        assert getattr(record, "redlock_name", None) == "job"
        assert isinstance(getattr(record, "redlock_elapsed", None), float)


async def test_a_dead_node_is_one_warning_not_a_flood(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="redlock_async")
    redlock = make_redlock()
    redis_nodes[2].kill()
    for _ in range(30):
        async with redlock.lock("job"):
            pass
    dead = redis_nodes[2].url
    warned = [
        r for r in caplog.records if r.name == "redlock_async.node" and dead in r.getMessage()
    ]
    assert len(warned) == 1
    node = getattr(warned[0], "redlock_node", "")
    assert node.startswith(dead)  # a client passed in is named after its URL and id


def test_the_limiter_lets_one_through_per_period_and_counts_the_rest() -> None:
    limiter = _Limiter()
    key = ("failed", "n0")
    assert limiter.allow(key, 100.0) == 0
    assert limiter.allow(key, 100.5) is None
    assert limiter.allow(key, 101.0) is None
    assert limiter.allow(("failed", "n1"), 101.0) == 0  # another node: its own budget
    assert limiter.allow(key, 100.0 + RATE) == 2  # two held back, said with the next
    assert limiter.allow(key, 100.0 + RATE + 1) is None
