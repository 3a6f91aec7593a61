"""Nodes a census did not hear stay in the view (issue 25), unless a notice
refused it - found by an outside review of a version that always dropped them.

That version took every node missing from a census out of the view, so
any node down or silent during any census left it, and the views made
meanwhile lacked it. Two things then read those views as "made before a
loss" once another node was missing from a later census:
- a census cannot tell "lacks B" from "held B's old epoch", and counts the
  epochs it did not hear as lost: ``lost_until`` makes B suspect for the
  life of a record lacking b (1.25 x max(ttl, 2 s));
- a census's notice lacking one node is incomparable with a later view
  lacking another: STALE wherever the record must be written, for
  1.5 x max(ttl, 2 s) - the process's own notice included.
With one node faulty at a time (three nodes), or two (five), nothing was
granted for any name (first test), and a held, renewed lock was lost
(second). Now unheard nodes leave the view only when a node answered STALE
with its epoch unchanged - a notice refused the view - which
test_restart_notices.py's held-lock test needs.

The fixtures are test_restart_straddle.py's: each process on proxy routes
of its own, so that a schedule is exact.
"""

from __future__ import annotations

import asyncio

import pytest

from redlock_async._engine._epochs import Epochs
from redlock_async.testing import RedisNodes

from ..conftest import MakeRouted, eventually

pytestmark = pytest.mark.parametrize("driver", ["resp", "redis-py"])


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
    assert epochs.ids[0]
    assert epochs.ids[1]
    assert not epochs.ids[2]
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


@pytest.mark.redis_nodes(5)
async def test_a_held_lock_is_lost_after_a_node_down_during_a_census_comes_back(
    redis_nodes: RedisNodes, routed: MakeRouted
) -> None:
    # P holds an auto-renewed lock on all five nodes. At every moment at
    # most two nodes of five are faulty, and A and D never are:
    # 1. E loses its data (faulty until its votes count again) and B is down.
    #    P's renewal gets STALE from E; P's censuses run without B: since
    #    e8f6863 B leaves P's view (before, it kept its place). P renews on
    #    A, C and D with its view {a, c, d, e'}: that record is written there.
    # 2. B is back; C goes down. P's renewal gets STALE from B; P's census
    #    does not hear C: C leaves the view, B comes back. Two things then
    #    refuse P's renewals on A, D and E, or B's vote, for longer than the
    #    lock's validity (seen in the failures: either or both):
    #    - P's own notice of step 1 ({a, c, d, e'}, on A, C, D, E) is
    #      incomparable with P's view now ({a, b, d, e'}): STALE wherever the
    #      record must be written, for 1.5 x max(ttl, 2 s);
    #    - the record {a, c, d, e'} holds c, which the census did not hear,
    #      so it looks written before a loss, and it lacks b: B comes back
    #      suspect for 1.25 x max(ttl, 2 s).
    #    The lock is lost although A, B and D - a majority, none faulty -
    #    hold it and never refused it. Before e8f6863 B and C never left the
    #    view ({a, b, c, d, e'} throughout, a superset of the notice, and
    #    no record lacking b): renewed on A, B and D.
    await asyncio.sleep(3.5)  # older nodes only (MIN_QUARANTINE, as above)
    routes = redis_nodes.route()
    p = routed(routes, 0.25)
    epochs = p._core.epochs
    assert isinstance(epochs, Epochs)
    ttl = 4.0  # a margin for redis-py's reconnections to B (its votes fail meanwhile)
    lock = p.lock("job", ttl=ttl)  # auto_extend
    assert await lock.acquire(blocking=False), lock.errors
    assert all(epochs.ids)
    # P's first notice ({a, b, c, d, e}) past its window (1.5 x max(ttl, 2 s)):
    # B, down when the census after E's loss drops it elsewhere, would
    # otherwise refuse P's view with e' until then (as before e8f6863).
    await asyncio.sleep(1.5 * ttl + 0.2)
    routes[1].refuse()  # B down (for P)
    old = epochs.ids[4]
    redis_nodes[4].client().flushall()  # E loses its data
    assert await eventually(lambda: epochs.ids[4] not in (None, old) and not epochs.refreshing())
    left_view = epochs.ids[1] is None  # True since e8f6863
    await asyncio.sleep(1.0)  # P renews with its view without B
    assert not lock.lost, [str(error) for error in lock.errors.values()]
    routes[1].heal()
    routes[2].refuse()  # C down (for P)
    for _ in range(int(30 * ttl)):
        if lock.lost:
            break
        await asyncio.sleep(0.1)
    names = {node.name: i for i, node in enumerate(p._core.nodes)}
    assert not lock.lost, (
        f"lost, though A, B and D held it (B left the view: {left_view}); "
        f"P's view {epochs.view!r}, ids {epochs.ids}; notices: "
        f"{[n.client().hgetall('redlock:~epoch~newest') for n in redis_nodes]}; "
        f"epochs: {[n.client().hget('redlock:~epoch', 'id') for n in redis_nodes]}; nodes {names}"
    )
    await lock.release()
