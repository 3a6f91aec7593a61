"""examples/aiohttp_app.py against real redis-server nodes, over HTTP."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from examples.aiohttp_app import LEDGER, REDLOCK, Ledger, create_app, urls_from_env
from redlock_async import Redlock, RedlockError
from redlock_async.testing import RedisNodes

from ..conftest import eventually, no_keys_left
from ._util import LIVENESS, Gate, Inspector

Client = TestClient[web.Request, web.Application]


class GatedLedger(Ledger):
    """A ledger whose reads wait at a gate: the handler stays inside the lock."""

    def __init__(self, gate: Gate) -> None:
        super().__init__()
        self.gate = gate

    async def read(self, order_id: int) -> int:
        await self.gate.wait_here()
        return await super().read(order_id)


@asynccontextmanager
async def serve(app: web.Application) -> AsyncIterator[Client]:
    """The app on a local port (startup and cleanup run), and a client to it."""
    async with TestClient(TestServer(app)) as http:
        yield http


def errors_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The lock errors the app's handlers logged, by type name."""
    return [r.getMessage().split()[0] for r in caplog.records if r.name == "examples.aiohttp_app"]


async def test_a_request_charges_once(redis_nodes: RedisNodes) -> None:
    app = create_app(redis_nodes.urls, timeout=LIVENESS)
    async with serve(app) as http:
        response = await http.post("/orders/42/charge")
        assert response.status == 200
        assert await response.json() == {"order_id": 42, "charges": 1}
        assert app[LEDGER].charges == {42: 1}
    assert await no_keys_left(redis_nodes)


async def test_a_non_numeric_order_id_is_not_found(redis_nodes: RedisNodes) -> None:
    async with serve(create_app(redis_nodes.urls)) as http:
        assert (await http.post("/orders/abc/charge")).status == 404


async def test_concurrent_requests_on_one_order_are_serialized(redis_nodes: RedisNodes) -> None:
    app = create_app(redis_nodes.urls, ttl=5.0, timeout=60.0)
    async with serve(app) as http:

        async def charge() -> tuple[int, int]:
            async with http.post("/orders/7/charge") as response:
                body = await response.json()
                return response.status, int(body["charges"])

        results = await asyncio.gather(*(charge() for _ in range(20)))
        assert [status for status, _ in results] == [200] * 20
        assert app[LEDGER].charges == {7: 20}
        # Each request saw the one before it: no two read the same value.
        assert sorted(charges for _, charges in results) == list(range(1, 21))


async def test_a_lock_held_elsewhere_answers_409(
    redis_nodes: RedisNodes, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="examples.aiohttp_app")
    app = create_app(redis_nodes.urls, timeout=1.0)
    async with serve(app) as http, Redlock(redis_nodes.urls, prefix="redlock:web:") as elsewhere:
        # Connected first: the 409 below is the lock's doing, not a slow connect.
        assert (await http.post("/orders/4/charge")).status == 200
        other = elsewhere.lock("orders:3", ttl=30.0)
        assert await other.acquire(timeout=LIVENESS)
        busy = await http.post("/orders/3/charge")
        assert busy.status == 409
        assert busy.headers["Retry-After"] == "1"
        assert "another request" in (await busy.json())["detail"]
        assert app[LEDGER].charges == {4: 1}
        assert errors_logged(caplog) == ["LockBusy"]
        await other.release()
        assert (await http.post("/orders/3/charge")).status == 200
        assert app[LEDGER].charges == {3: 1, 4: 1}


async def test_too_few_nodes_answers_503_not_409(
    redis_nodes: RedisNodes, caplog: pytest.LogCaptureFixture
) -> None:
    # Two of three nodes dead is not "another request holds it": a 409 would
    # send the client to retry a conflict that does not exist.
    caplog.set_level(logging.INFO, logger="examples.aiohttp_app")
    # A long timeout: the 503 comes after unavailable_timeout, not after it.
    app = create_app(redis_nodes.urls, timeout=LIVENESS, unavailable_timeout=0.5)
    async with serve(app) as http:
        assert (await http.post("/orders/4/charge")).status == 200
        for node in redis_nodes[:2]:
            node.kill()
        start = time.monotonic()
        down = await http.post("/orders/5/charge")
        assert time.monotonic() - start < LIVENESS / 2
        assert down.status == 503
        assert down.headers["Retry-After"] == "5"
        assert "unavailable" in (await down.json())["detail"]
        assert errors_logged(caplog) == ["QuorumUnavailable"]
        assert app[LEDGER].charges == {4: 1}


async def test_a_lock_lost_in_the_handler_answers_503(
    redis_nodes: RedisNodes, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="examples.aiohttp_app")
    gate = Gate()
    app = create_app(redis_nodes.urls, ttl=1.0, timeout=LIVENESS, ledger=GatedLedger(gate))
    async with serve(app) as http:
        request = asyncio.create_task(http.post("/orders/9/charge"))
        await asyncio.wait_for(gate.entered.wait(), LIVENESS)
        for node in redis_nodes[:2]:  # a majority: renewal cannot reach quorum
            node.kill()
        async with await request as response:  # the handler is cancelled at its gate
            assert response.status == 503
            assert "lost the lock" in (await response.json())["detail"]
        assert not gate.proceed.is_set()
        assert errors_logged(caplog) == ["LockLost"]
        assert app[LEDGER].charges == {}


async def test_the_redlock_is_closed_at_cleanup(redis_nodes: RedisNodes) -> None:
    inspector = Inspector(redis_nodes)
    before = inspector.connections()
    # Straight to the servers: the fault proxy keeps a server-side connection
    # open when its client resets (closes with a reply unread).
    app = create_app(redis_nodes.direct_urls, timeout=LIVENESS)
    async with serve(app) as http:
        redlock = app[REDLOCK]
        assert not redlock.closed
        assert (await http.post("/orders/1/charge")).status == 200
        connected = inspector.connections()
        assert all(now > then for now, then in zip(connected, before, strict=True))
    assert redlock.closed
    with pytest.raises(RedlockError, match="closed"):
        redlock.lock("orders:1")
    assert await eventually(lambda: inspector.connections() == before, LIVENESS), (
        inspector.describe()
    )


def test_nodes_come_from_redlock_urls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDLOCK_URLS", "redis://a:1/0, redis://b:2/0,redis://c:3/0")
    assert urls_from_env() == ["redis://a:1/0", "redis://b:2/0", "redis://c:3/0"]
    monkeypatch.delenv("REDLOCK_URLS")
    assert urls_from_env() == ["redis://localhost:6379/0"]
