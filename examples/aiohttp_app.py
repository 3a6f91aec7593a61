"""redlock_async in an aiohttp.web app.

One ``Redlock`` per process, opened by a cleanup context at startup, stored
under a ``web.AppKey`` and closed at cleanup, shared by every request.
``POST /orders/{order_id}/charge`` does a read-modify-write under
``orders:{order_id}``; a middleware turns ``LockBusy`` (another request
holds the lock) into HTTP 409, and ``QuorumUnavailable`` (too few Redis
nodes answered), ``LockLost`` or ``LockNotOwned`` into HTTP 503.

Run it (nodes from ``REDLOCK_URLS``, comma separated)::

    REDLOCK_URLS=redis://10.0.0.1:6379/0,redis://10.0.0.2:6379/0,redis://10.0.0.3:6379/0 \
        python -m examples.aiohttp_app

See docs/frameworks.md.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from aiohttp import web
from aiohttp.typedefs import Handler

from redlock_async import LockBusy, LockLost, LockNotOwned, QuorumUnavailable, Redlock

__all__ = [
    "LEDGER",
    "REDLOCK",
    "SETTINGS",
    "Ledger",
    "LockSettings",
    "create_app",
    "lock_errors",
    "urls_from_env",
]

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


@dataclass(frozen=True)
class LockSettings:
    """``urls``: the Redis nodes; ``ttl``: validity of one grant (renewed in
    the background while the handler runs); ``timeout``: how long a request
    waits for a busy lock before answering 409; ``unavailable_timeout``: how
    long it keeps trying while too few nodes answer before answering 503."""

    urls: tuple[str, ...]
    ttl: float = 5.0
    timeout: float = 2.0
    unavailable_timeout: float = 0.5


SETTINGS = web.AppKey("settings", LockSettings)
REDLOCK = web.AppKey("redlock", Redlock)
LEDGER = web.AppKey("ledger", Ledger)


async def redlock_ctx(app: web.Application) -> AsyncIterator[None]:
    """One Redlock per process: opened at startup, closed at cleanup."""
    settings = app[SETTINGS]
    # A request answers 503 soon when the lock service is down; the client's
    # retry (Retry-After) rides out the failover instead (docs/frameworks.md).
    # A prefix of its own: short web-request locks apart from long cron ones
    # (a restart keeps a prefix out for its longest ttl: docs/guide.md).
    redlock = Redlock(
        settings.urls, prefix="redlock:web:", unavailable_timeout=settings.unavailable_timeout
    )
    app[REDLOCK] = redlock
    try:
        yield
    finally:
        await redlock.aclose()


@web.middleware
async def lock_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """``LockBusy`` -> 409; ``QuorumUnavailable``, ``LockLost``, ``LockNotOwned`` -> 503.

    After a 503 the body was cancelled at an ``await`` (``cancel_on_lost=True``),
    so some of its writes may have landed: the client must not assume nothing
    happened.
    """
    try:
        return await handler(request)
    except LockBusy as exc:
        _log.info("%s on %s: %s", type(exc).__name__, request.path, exc)
        return web.json_response(
            {"detail": "this order is being changed by another request; retry later"},
            status=409,
            headers={"Retry-After": "1"},
        )
    except QuorumUnavailable as exc:
        # Too few Redis nodes answered: ours to fix; the reasons go to the log only.
        _log.warning("%s on %s: %s", type(exc).__name__, request.path, exc)
        return web.json_response(
            {"detail": "the lock service is unavailable; retry later"},
            status=503,
            headers={"Retry-After": "5"},
        )
    except (LockLost, LockNotOwned) as exc:
        _log.warning("%s on %s: %s", type(exc).__name__, request.path, exc)
        return web.json_response(
            {"detail": "lost the lock on this order while changing it; retry later"},
            status=503,
            headers={"Retry-After": "1"},
        )


async def charge(request: web.Request) -> web.Response:
    order_id = int(request.match_info["order_id"])  # the route admits digits only
    settings = request.app[SETTINGS]
    ledger = request.app[LEDGER]
    redlock = request.app[REDLOCK]
    async with redlock.lock(f"orders:{order_id}", ttl=settings.ttl, timeout=settings.timeout):
        charges = await ledger.read(order_id) + 1
        await ledger.write(order_id, charges)
    return web.json_response({"order_id": order_id, "charges": charges})


def create_app(
    urls: Sequence[str],
    *,
    ttl: float = 5.0,
    timeout: float = 2.0,
    unavailable_timeout: float = 0.5,
    ledger: Ledger | None = None,
) -> web.Application:
    """The app over the Redis nodes ``urls`` (the keywords: :class:`LockSettings`)."""
    app = web.Application(middlewares=[lock_errors])
    app[SETTINGS] = LockSettings(
        tuple(urls), ttl=ttl, timeout=timeout, unavailable_timeout=unavailable_timeout
    )
    app[LEDGER] = ledger if ledger is not None else Ledger()
    app.cleanup_ctx.append(redlock_ctx)
    app.router.add_post(r"/orders/{order_id:\d+}/charge", charge)
    return app


def main() -> None:
    logging.basicConfig(level=logging.INFO)
    web.run_app(create_app(urls_from_env()))


if __name__ == "__main__":
    main()
