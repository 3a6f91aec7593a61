"""A census takes the nodes it did not hear out of the view (e8f6863), found
by an outside review: what that costs inside the model.

A view lacking a node is a view that node never voted with; but a census
cannot tell "lacks B" from "held B's old epoch": ``lost_until`` makes every
node whose epoch a pre-loss record lacks suspect. Before e8f6863 a node
missing from one census kept its place in the view; now any node down or
silent during any census leaves it, the grants made meanwhile write records
lacking it, and one later data loss elsewhere makes it suspect too - two
nodes of three out for 1.25 x max(ttl, 2 s), every name, every process,
although only one node lost anything (and nothing was held).

The fixtures are test_restart_straddle.py's: each process on proxy routes
of its own, so that a schedule is exact.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest
import redis.asyncio

from redlock_async import Redlock
from redlock_async._engine._epochs import Epochs
from redlock_async.testing import ProxyListener, RedisNodes

from ..conftest import eventually

pytestmark = pytest.mark.parametrize("driver", ["resp", "redis-py"])

MakeRouted = Callable[[list[ProxyListener], float], Redlock]


@pytest.fixture
async def routed(driver: str) -> AsyncIterator[MakeRouted]:
    """Redlocks over proxy routes of their own, through ``driver``."""
    made: list[Redlock] = []
    clients: list[redis.asyncio.Redis] = []

    def make(routes: list[ProxyListener], node_timeout: float) -> Redlock:
        urls = [f"redis://127.0.0.1:{route.port}/0" for route in routes]
        if driver == "resp":
            redlock = Redlock(urls, node_timeout=node_timeout)
        else:
            new = [redis.asyncio.Redis.from_url(url) for url in urls]
            clients.extend(new)
            redlock = Redlock(new, node_timeout=node_timeout)
        made.append(redlock)
        return redlock

    yield make
    for redlock in made:
        await redlock.aclose()
    for client in clients:
        await client.aclose()
    await asyncio.sleep(0.05)


async def test_a_node_down_during_a_census_is_quarantined_when_another_is_down_later(
    redis_nodes: RedisNodes, routed: MakeRouted
) -> None:
    # At every moment at most one node of three is faulty (down), and none
    # loses its data:
    # 1. C is down while P's first censuses run: C is out of P's view (as
    #    before e8f6863: never heard).
    # 2. C is back; B goes down. P's one-shot acquire: C answers STALE and
    #    P's censuses run without B. Before e8f6863 B kept its epoch in P's
    #    view; now it leaves it. (P's attempt is refused either way: C is
    #    suspect for a moment, the record of P's view {a, b} read while B
    #    was not heard.)
    # 3. B is back. P is granted "job" on A and C with its view {a, c}
    #    (B answers STALE, and P's censuses take it back); the record of
    #    {a, c}, on A and C, lives 1.25 x max(ttl, 2 s). P releases at once.
    # 4. C is down for Q, a newcomer, which acquires another name. Q's census
    #    does not hear c, so the record {a, c} on A looks written before a
    #    loss, and it lacks b: lost_until() makes B suspect. Only A counts:
    #    Q is refused for every name until that record expires, although the
    #    one faulty node is C and nothing is held. Before e8f6863 the record
    #    was {a, b, c}, which lacks none of Q's epochs: granted on A and B.
    # A reconnection to a server up for less than MIN_QUARANTINE (and
    # Redis's whole-second uptime) is held as a restart: older nodes only.
    await asyncio.sleep(3.5)
    p_routes = redis_nodes.route()
    p = routed(p_routes, 0.25)
    epochs = p._core.epochs
    assert isinstance(epochs, Epochs)
    p_routes[2].refuse()
    await epochs.first(5.0)
    assert epochs.ready
    assert epochs.ids[0] and epochs.ids[1] and not epochs.ids[2]
    p_routes[2].heal()
    await asyncio.sleep(1.0)  # P reconnects to C (backoff from 50 ms)
    p_routes[1].refuse()
    probe = p.lock("probe", ttl=2.0, auto_extend=False)
    if await probe.acquire(blocking=False):
        await probe.release()
    assert await eventually(lambda: epochs.ready and not epochs.refreshing())
    out_of_view = epochs.ids[1] is None  # True since e8f6863
    p_routes[1].heal()
    await asyncio.sleep(3.0)  # C's suspicion of step 2 is over; P reconnects to B
    job = p.lock("job", ttl=2.0, auto_extend=False)
    assert await job.acquire(blocking=False), [str(e) for e in job.errors.values()]
    view = epochs.view
    await job.release()
    q_routes = redis_nodes.route()
    q_routes[2].refuse()  # C is down for Q
    q = routed(q_routes, 0.25)
    other = q.lock("other", ttl=2.0, auto_extend=False)
    granted = await other.acquire(blocking=False)
    assert granted, (
        f"one node down (C) and nothing held, yet B is quarantined too (B left P's view: "
        f"{out_of_view}; P's view when granted: {view!r}): "
        f"{[str(error) for error in other.errors.values()]}"
    )
    await other.release()
