"""A loss in the middle of a grant's writes (issue 25): the census notices.

G's acquire reaches Y, Y then loses its data, and G's write on another node
lands only after a newcomer's censuses have read that node. The censuses
then see no record of G's view anywhere, Y is not suspect, and the newcomer
is granted on Y and a third node while G, counting Y's earlier yes and the
late one, holds the same name. Each census sent once another had finished
now leaves the epochs that one heard on the nodes as notices, one per
position (``lua/census.lua``), and a grant whose view names, at some
position, an epoch older than the notice's there is refused wherever it
lands later (``epoch_refused``, ``lua/_epoch.lua``; docs/guarantees.md).

The schedules are made exact with the fault proxy, each process on routes
of its own: G's path to B is cut (B never runs G's script, so no record of
G's view is written there), its path to A delayed.
"""

from __future__ import annotations

import asyncio

import pytest

from redlock_async import Redlock
from redlock_async._engine._epochs import Epochs
from redlock_async._engine._tally import PENDING, is_yes
from redlock_async.testing import RedisNodes

from ..conftest import MakeRouted, eventually

pytestmark = pytest.mark.parametrize("driver", ["resp", "redis-py"])


async def test_a_grant_written_late_after_another_node_lost_it_is_refused(
    redis_nodes: RedisNodes, routed: MakeRouted, driver: str
) -> None:
    a, _, y = redis_nodes
    # The scripts loaded on every server first: through redis-py, G's first
    # EVALSHA on A would come back NOSCRIPT and its retry miss node_timeout
    # behind the delay (no grant, nothing tested). Another prefix: no record
    # of a view under this one.
    async with Redlock(redis_nodes.urls, prefix="warm:") as warm:
        probe = warm.lock("probe", ttl=1.0, auto_extend=False)
        assert await probe.acquire()
        await probe.release()
    g_routes, p_routes = redis_nodes.route(), redis_nodes.route()
    # redis-py opens another connection for G's acquire, its handshake
    # behind the delay too: G must wait longer for A's vote, and P's write
    # to A come later still.
    slow = 1.0 if driver == "resp" else 2.5
    g = routed(g_routes, 0.8 if driver == "resp" else 2.0)
    p = routed(p_routes, 1.0)
    await g._core.epochs.first(5.0)  # G's view: every node's epoch, no record yet
    assert g._core.epochs.ready
    g_routes[1].blackhole()
    g_routes[0].delay(0.25)  # G's write reaches A 0.25 s late, its answer 0.5 s
    held = g.lock("job", ttl=10.0, auto_extend=False)
    g_task = asyncio.ensure_future(held.acquire(blocking=False))
    assert await eventually(lambda: bool(y.client().exists("redlock:{job}")))
    y.client().flushall()  # Y loses G's key
    await p._core.epochs.first(5.0)  # P's two censuses read A before G's write lands
    assert p._core.epochs.ready
    assert not a.client().exists("redlock:{job}"), "the schedule did not hold: G on A too early"
    p_routes[0].delay(slow)  # P's own write reaches A after G's
    contender = p.lock("job", ttl=10.0, auto_extend=False)
    p_granted = await contender.acquire(blocking=False)  # on Y and B
    g_granted = await g_task
    # Both ttls are 10 s: had both been granted, both would be held now.
    assert not (p_granted and g_granted), "two holders: G counted Y's yes and A's late one"
    assert p_granted, f"the newcomer was refused: {contender.errors}"
    assert not g_granted


async def test_a_node_that_lost_its_data_twice_leaves_no_notice_in_the_way(
    redis_nodes: RedisNodes, routed: MakeRouted
) -> None:
    # B loses its data twice in a row: a notice naming its second epoch must
    # not refuse views with its third (issue 40: a notice names dead only the
    # epochs older than its own, so nothing needs dropping), and a newcomer
    # is granted at once, with all three votes. (Nothing is granted before: no record
    # keeps B out.)
    a, b, _ = redis_nodes
    for round_ in range(3):
        if round_:
            # Each loss gives B an epoch made later on its clock: the notice
            # naming the one before refuses only views older than that.
            await asyncio.sleep(0.2)
            b.client().flushall()
        newcomer = routed(redis_nodes.route(), 0.25)
        await newcomer._core.epochs.first(5.0)
        assert newcomer._core.epochs.ready
    lock = newcomer.lock("job", ttl=1.0, auto_extend=False)
    assert await lock.acquire(blocking=False), lock.errors
    assert lock._grant is not None
    replies = lock._grant.acquired.replies
    assert await eventually(lambda: all(reply is not PENDING for reply in replies))
    assert all(is_yes(reply) for reply in replies), replies
    await lock.release()
    epochs = newcomer._core.epochs
    assert isinstance(epochs, Epochs)
    ids = epochs.ids
    assert all(ids)
    # A notice is one field per position, naming its newest epoch: every
    # older one there is dead (issue 40: no cutoff, no window to outlive).
    for node in (a, b):
        kept = node.client().hgetall("redlock:~epoch~newest")
        assert kept == {b"n3.%d" % (i + 1): epoch for i, epoch in enumerate(ids)}, kept


async def test_a_process_with_an_old_view_is_granted_after_anothers_census(
    redis_nodes: RedisNodes, routed: MakeRouted
) -> None:
    # P1's view predates B's loss; P2's census wrote a notice that refuses it
    # on A and C, and B answers STALE: P1's one-shot attempt is refused
    # everywhere, for its view. It reads the nodes again and makes one more
    # attempt at once, and is granted.
    p1 = routed(redis_nodes.route(), 0.25)
    warm = p1.lock("warm", ttl=1.0, auto_extend=False)
    assert await warm.acquire(blocking=False)
    await warm.release()
    await asyncio.sleep(2.6)  # the warm grant's records have expired: no fast path
    redis_nodes[1].client().flushall()
    p2 = routed(redis_nodes.route(), 0.25)
    await p2._core.epochs.first(5.0)
    count = p1._core.epochs.count
    lock = p1.lock("job", ttl=1.0, auto_extend=False)
    assert await lock.acquire(blocking=False), lock.errors
    assert p1._core.epochs.count >= count + 2  # its view read again, then granted
    await lock.release()


async def test_a_notice_from_before_a_loss_does_not_keep_out_views_after_it(
    redis_nodes: RedisNodes, routed: MakeRouted
) -> None:
    # P0's census left its notices (a, b, c by position). C goes down and B
    # loses its data: a newcomer's view (a, b', -) names b', newer than P0's
    # notice for B, and nothing at C: nothing refuses it.
    a, b, c = redis_nodes
    p0 = routed(redis_nodes.route(), 0.25)
    await p0._core.epochs.first(5.0)
    assert len(a.client().hgetall("redlock:~epoch~newest")) == 3  # one per position
    c.kill()
    b.client().flushall()
    p1 = routed(redis_nodes.route(), 0.25)
    await p1._core.epochs.first(5.0)
    lock = p1.lock("job", ttl=1.0, auto_extend=False)
    assert await lock.acquire(blocking=False), lock.errors  # on A and B
    await lock.release()
    kept = a.client().hgetall("redlock:~epoch~newest")
    # P0's notice for B named b, older than b': P1's census replaced it. C's stays
    # (P1 did not hear C), and refuses nothing: C kept its epoch.
    assert kept[b"n3.2"] == b.client().hget("redlock:~epoch", "id"), kept
    assert kept[b"n3.1"] == a.client().hget("redlock:~epoch", "id"), kept
