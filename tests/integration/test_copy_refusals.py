"""A copy of a grant refused by a node that lost its data leaves the other copy's keys.

The simulation's finding (tests/sim, "lost-copy-refused-by-lost-node"), on
real nodes: the taker's copy of a grant handed on with ``adopt()`` renews
after the hand-over; Y restarts from a snapshot older than the grant (its
epoch kept, the key gone), B never had the key. The taker's next renewal,
built before its connection to Y noticed the restart, is refused by Y and
B: before the fix, a quorum's refusal released the token everywhere - the
adopter's key on A with it - and a third process took the name while the
adopter held it. Y's refusal does not count: its watch holds its votes from
the moment its new run_id is seen (the lean driver); and a copy handed on is
never released when lost (through redis-py, which sees a restart only with
a granting script, Y's refusal still counts there).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

import pytest
import redis.asyncio

from redlock_async import LockNotOwned, Redlock
from redlock_async.testing import RedisNodes

from ..conftest import eventually

KEY = "redlock:{job}"


def _redlock(urls: Sequence[str], driver: str, clients: list[redis.asyncio.Redis]) -> Redlock:
    if driver == "resp":
        return Redlock(urls)
    made = [redis.asyncio.Redis.from_url(url) for url in urls]
    clients.extend(made)
    return Redlock(made)


@pytest.mark.parametrize("driver", ["resp", "redis-py"])
async def test_a_takers_copy_refused_by_a_restarted_node_leaves_the_adopters_keys(
    driver: str,
) -> None:
    nodes = RedisNodes().start(3, ("--dbfilename", "snap.bin"))
    clients: list[redis.asyncio.Redis] = []
    try:
        a, b, y = nodes
        async with (
            _redlock(nodes.urls, driver, clients) as taker,
            _redlock(nodes.urls, driver, clients) as adopter,
            _redlock(nodes.urls, driver, clients) as third,
        ):
            for redlock in (taker, adopter, third):  # each reads the nodes' epochs first
                warm = redlock.lock("warm", ttl=1.0, auto_extend=False)
                assert await warm.acquire()
                await warm.release()
            y.client().save()  # the snapshot Y comes back with: its epoch, no "job"
            b.client().set(KEY, "leftover", px=1200)  # a failed attempt's: B refuses
            took = taker.lock("job", ttl=0.6)  # auto-extended: renewed every 0.2 s or so
            assert await took.acquire(blocking=False)  # on A and Y
            token = took.token
            assert token is not None
            held = await adopter.adopt("job", token, ttl=10.0, auto_extend=False)
            assert held.held
            y.close_clients()
            y.server.restart()  # keeps snap.bin: only *.rdb is removed
            assert y.client().get(KEY) is None  # Y lost the key, kept its epoch
            # The taker's renewals meet Y back: refused by Y and B. Its copy is
            # lost (for want of a quorum's yes), without touching A's key.
            assert await eventually(lambda: took.lost, within=3.0)
            await asyncio.sleep(1.3)  # B's leftover has expired: B is free
            assert held.held
            assert a.client().get(KEY) == token.encode(), "the adopter's key on A went"
            contender = third.lock("job", ttl=1.0, auto_extend=False)
            granted = await contender.acquire(blocking=False)
            assert held.valid_for > 0
            assert not granted, f"a second holder while the adopted copy held: {contender.errors}"
            # Held on A alone now (Y lost it, B never had it): its release is
            # refused by a quorum, LockNotOwned - the keys go either way.
            with contextlib.suppress(LockNotOwned):
                await held.release()
    finally:
        for client in clients:
            await client.aclose()
        nodes.close()
