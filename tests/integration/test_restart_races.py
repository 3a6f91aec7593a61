"""Races of the restart rule across processes (issue 25), found by an outside review.

Each of the first two let a node that lost a grant vote while the grant was
valid, before the fix: a census read one node before a grant's write and
another after its loss (an epoch now enters the view only when the next
census hears it again), and a restart from disk voted before its census
landed (a new run_id now holds the node's votes until censuses have read
it again). The third is the documented rule for Redlocks over different
node sets (docs/guarantees.md, "Restarted nodes").
"""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio

from redlock_async import Redlock
from redlock_async.testing import RedisNodes


async def test_a_census_read_before_the_grant_on_a_lets_a_flushed_node_vote(
    redis_nodes: RedisNodes,
) -> None:
    # A census is not a snapshot: P's census is answered by A before G's grant
    # lands on A, and by Y after Y lost G's key (FLUSHALL). The census then sees
    # no record of G's view anywhere and Y is not suspect; P is granted on B and
    # Y while G is valid on A (and was on Y). B is not faulty: it refused G
    # because of a leftover key of a failed attempt, which expired since.
    _, b, y = redis_nodes
    loop = asyncio.get_running_loop()
    routes = redis_nodes.route()  # P's own ports: only P's path to Y is slow
    urls = [f"redis://127.0.0.1:{listener.port}/0" for listener in routes]
    b.client().set("redlock:{job}", "leftover", px=1500)
    async with (
        Redlock(redis_nodes.urls, node_timeout=1.0) as g,
        Redlock(urls, node_timeout=1.0) as p,
    ):
        routes[2].delay(0.4)
        contender = p.lock("job", ttl=10.0, auto_extend=False)
        task = asyncio.ensure_future(contender.acquire(timeout=5.0))
        await asyncio.sleep(0.1)  # P's census has run on A and B, not yet on Y
        held = g.lock("job", ttl=10.0, auto_extend=False)
        started = loop.time()
        assert await held.acquire(blocking=False)  # on A and Y; B refused
        y.client().flushall()  # Y loses G's key, before P's census reaches it
        granted = await task
        assert loop.time() < started + 10.0
        assert not granted, (
            "a second holder while the first grant was valid: "
            f"P's census count {p._core.epochs.count}, errors {contender.errors}"
        )


@pytest.mark.parametrize("driver", ["resp", "redis-py"])
async def test_a_server_restarted_from_disk_votes_before_its_census_lands(driver: str) -> None:
    # Y restarts from a snapshot older than G's grant (Redis's default RDB
    # saves, or appendfsync everysec's last second): it keeps its old epoch,
    # without G's key. P next talks to Y more than 3 s later (idle until
    # then): its connection sees the new run_id, asks for a census (which
    # would give Y a new epoch and keep it out), but MIN_QUARANTINE counts
    # from Y's uptime, so nothing holds Y's yes to the very attempt that
    # noticed the restart, and it counts before the census lands.
    nodes = RedisNodes().start(3, ("--dbfilename", "snap.bin"))
    clients: list[redis.asyncio.Redis] = []

    def make() -> Redlock:
        if driver == "resp":
            return Redlock(nodes.urls)
        new = [redis.asyncio.Redis.from_url(url) for url in nodes.urls]
        clients.extend(new)
        return Redlock(new, node_timeout=0.25)

    try:
        _, b, y = nodes
        loop = asyncio.get_running_loop()
        async with make() as p, make() as h:
            warm = p.lock("warm", ttl=1.0, auto_extend=False)
            assert await warm.acquire()
            await warm.release()
            y.client().save()  # the snapshot Y comes back with: no "job" in it
            b.client().set("redlock:{job}", "leftover", px=2000)  # a failed attempt's
            held = h.lock("job", ttl=15.0, auto_extend=False)
            started = loop.time()
            assert await held.acquire(blocking=False)  # on A and Y; B refused
            y.close_clients()
            y.server.restart()  # keeps snap.bin: only *.rdb is removed
            assert y.client().get("redlock:{job}") is None  # Y lost G's key
            await asyncio.sleep(3.5)  # P idle meanwhile
            contender = p.lock("job", ttl=5.0, auto_extend=False)
            # A few attempts: redis-py's first command on a pooled connection
            # that died with the old server fails (a lost vote), then reconnects.
            granted = await contender.acquire(timeout=1.0)
            assert loop.time() < started + 15.0
            assert not granted, (
                f"a second holder while the first was valid: census count "
                f"{p._core.epochs.count}, Y's epoch {y.client().hget('redlock:~epoch', 'id')!r}"
            )
    finally:
        for client in clients:
            await client.aclose()
        nodes.close()


@pytest.mark.redis_nodes(4)
async def test_redlocks_over_other_nodes_use_a_prefix_of_their_own(
    redis_nodes: RedisNodes,
) -> None:
    # X over A, B, C and Z over A, B, D. Under one prefix, X's records on A
    # and B hold C's epoch, which Z cannot find on any node of its own: Z
    # would take them for views written before a data loss and keep D out
    # (and two node sets on one prefix cannot exclude each other anyway:
    # each may find a majority of its own). With a prefix each, nothing
    # of one is read by the other: D votes.
    a, b, c, d = redis_nodes
    async with (
        Redlock([a.url, b.url, c.url]) as x,
        Redlock([a.url, b.url, d.url], prefix="z:") as z,
    ):
        mine = x.lock("x-job", ttl=5.0, auto_extend=False)
        assert await mine.acquire()
        lock = z.lock("z-job", ttl=1.0, auto_extend=False)
        assert await lock.acquire()
        assert lock._grant is not None
        replies = lock._grant.acquired.replies
        await asyncio.sleep(0.2)
        await lock.release()
        assert replies == [1, 1, 1], replies
