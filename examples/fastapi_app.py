"""redlock_async in a FastAPI app.

One ``Redlock`` per process, opened in the app's lifespan and closed at
shutdown, shared by every request. ``POST /orders/{order_id}/charge`` does a
read-modify-write under ``orders:{order_id}``. ``LockBusy`` (another request
holds the lock) becomes HTTP 409; ``QuorumUnavailable`` (too few Redis nodes
answered) and ``LockLost`` (or ``LockNotOwned``) become HTTP 503, each with
``Retry-After``.

Run it (nodes from ``REDLOCK_URLS``, comma separated)::

    REDLOCK_URLS=redis://10.0.0.1:6379/0,redis://10.0.0.2:6379/0,redis://10.0.0.3:6379/0 \
        uvicorn examples.fastapi_app:app

See docs/frameworks.md.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Annotated

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from redlock_async import LockBusy, LockLost, LockNotOwned, QuorumUnavailable, Redlock

__all__ = ["Charge", "Ledger", "app", "create_app", "urls_from_env"]

_log = logging.getLogger(__name__)

DEFAULT_URLS = "redis://localhost:6379/0"


def urls_from_env() -> list[str]:
    """Redis nodes from ``REDLOCK_URLS`` (comma separated), else a local default."""
    raw = os.environ.get("REDLOCK_URLS", DEFAULT_URLS)
    return [url.strip() for url in raw.split(",") if url.strip()]


class Ledger:
    """Charges per order: stands in for a database row.

    ``read`` and ``write`` each wait for "I/O", so two unlocked
    read-modify-writes interleave and one update is lost.
    """

    def __init__(self, io_delay: float = 0.005) -> None:
        self.io_delay = io_delay
        self.charges: dict[int, int] = {}

    async def read(self, order_id: int) -> int:
        await asyncio.sleep(self.io_delay)
        return self.charges.get(order_id, 0)

    async def write(self, order_id: int, charges: int) -> None:
        await asyncio.sleep(self.io_delay)
        self.charges[order_id] = charges


class Charge(BaseModel):
    order_id: int
    charges: int


def get_redlock(request: Request) -> Redlock:
    """The process-wide Redlock the lifespan opened."""
    redlock = getattr(request.app.state, "redlock", None)
    if not isinstance(redlock, Redlock):
        raise RuntimeError("no Redlock: the app's lifespan did not run")
    return redlock


def get_ledger(request: Request) -> Ledger:
    ledger = getattr(request.app.state, "ledger", None)
    if not isinstance(ledger, Ledger):
        raise RuntimeError("no Ledger on app.state")
    return ledger


RedlockDep = Annotated[Redlock, Depends(get_redlock)]
LedgerDep = Annotated[Ledger, Depends(get_ledger)]


async def lock_busy(request: Request, exc: Exception) -> JSONResponse:
    """``LockBusy``: someone else holds the lock for longer than we wait."""
    _log.info("%s on %s: %s", type(exc).__name__, request.url.path, exc)
    return JSONResponse(
        {"detail": "this order is being changed by another request; retry later"},
        status_code=409,
        headers={"Retry-After": "1"},
    )


async def no_quorum(request: Request, exc: Exception) -> JSONResponse:
    """``QuorumUnavailable``: too few Redis nodes answered - our fault, not the client's.

    Logged as a warning with the per-node reasons; the client only learns
    to come back later.
    """
    _log.warning("%s on %s: %s", type(exc).__name__, request.url.path, exc)
    return JSONResponse(
        {"detail": "the lock service is unavailable; retry later"},
        status_code=503,
        headers={"Retry-After": "5"},
    )


async def lock_lost(request: Request, exc: Exception) -> JSONResponse:
    """``LockLost`` / ``LockNotOwned``: exclusion ended before the handler did.

    The body was cancelled at an ``await`` (``cancel_on_lost=True``), so some
    of its writes may have landed: the client must not assume nothing happened.
    """
    _log.warning("%s on %s: %s", type(exc).__name__, request.url.path, exc)
    return JSONResponse(
        {"detail": "lost the lock on this order while changing it; retry later"},
        status_code=503,
        headers={"Retry-After": "1"},
    )


def create_app(
    urls: Sequence[str],
    *,
    ttl: float = 5.0,
    timeout: float = 2.0,
    unavailable_timeout: float = 0.5,
    ledger: Ledger | None = None,
) -> FastAPI:
    """The app over the Redis nodes ``urls``.

    ``ttl``: validity of one grant (renewed in the background while the
    handler runs); ``timeout``: how long a request waits for a busy lock
    before answering 409; ``unavailable_timeout``: how long it keeps trying
    while too few nodes answer before answering 503 (docs/frameworks.md).
    """
    nodes = list(urls)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # One Redlock per process: connections are opened on first use and
        # shared by every request; closed when the server shuts down.
        # A request answers 503 soon when the lock service is down; the
        # client's retry (Retry-After) rides out the failover instead.
        # A prefix of its own: short web-request locks apart from long cron ones
        # (a restart keeps a prefix out for its longest ttl: docs/guide.md).
        redlock = Redlock(nodes, prefix="redlock:web:", unavailable_timeout=unavailable_timeout)
        app.state.redlock = redlock
        try:
            yield
        finally:
            await redlock.aclose()

    app = FastAPI(title="orders", lifespan=lifespan)
    app.state.ledger = ledger if ledger is not None else Ledger()
    app.add_exception_handler(LockBusy, lock_busy)
    app.add_exception_handler(QuorumUnavailable, no_quorum)
    app.add_exception_handler(LockLost, lock_lost)
    app.add_exception_handler(LockNotOwned, lock_lost)

    @app.post("/orders/{order_id}/charge")
    async def charge(order_id: int, redlock: RedlockDep, ledger: LedgerDep) -> Charge:
        async with redlock.lock(f"orders:{order_id}", ttl=ttl, timeout=timeout):
            charges = await ledger.read(order_id) + 1
            await ledger.write(order_id, charges)
        return Charge(order_id=order_id, charges=charges)

    return app


app = create_app(urls_from_env())
