"""Issue 40's schedules, found by an outside review, each on real nodes.

1. Eviction: the library does not cover it (docs/guarantees.md, "Eviction"):
   lock nodes must not evict. A node whose configuration lets it evict is
   flagged loudly, once, naming the setting and the fix.
2. A node never heard by one process must not become suspect for others.
3. Two processes that each miss a different node must not refuse each other:
   a held lock stays held, and each is granted free names at once.
4. A node that loses its data between two censuses of one chain must not
   leave a notice that refuses the view the chain then confirms.

Each of 2-4 failed on the set-based rule (before issue 40), every run; the
first found no warning. The fixtures are test_restart_straddle.py's: each
process on fault-proxy routes of its own.
"""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from redlock_async._engine._epochs import Epochs
from redlock_async.testing import RedisNodes

from ..conftest import MakeRouted, eventually

pytestmark = pytest.mark.parametrize("driver", ["resp", "redis-py"])

# Two retry delays of the defaults (retry_delay 0.2 s plus jitter < 0.2 s),
# the bound issue 40 sets for a free name.
TWO_RETRIES = 0.8


async def test_a_node_that_may_evict_is_flagged_once(
    redis_nodes: RedisNodes, routed: MakeRouted, caplog: pytest.LogCaptureFixture
) -> None:
    b = redis_nodes[1].client()
    b.config_set("maxmemory", "1gb")
    b.config_set("maxmemory-policy", "volatile-ttl")
    routes = redis_nodes.route()
    with caplog.at_level(logging.WARNING, logger="redlock_async.node"):
        for _ in range(2):  # two Redlocks of one process: flagged once
            p = routed(routes, 0.25)
            await p._core.epochs.first(5.0)
            job = p.lock("job", ttl=1.0, auto_extend=False)
            assert await job.acquire(blocking=False), job.errors
            await job.release()
    flagged = [r.getMessage() for r in caplog.records if "maxmemory-policy" in r.getMessage()]
    assert len(flagged) == 1, flagged
    assert "volatile-ttl" in flagged[0], flagged
    assert "noeviction" in flagged[0], flagged


async def test_a_node_unheard_at_one_process_start_is_not_suspect_for_others(
    redis_nodes: RedisNodes, routed: MakeRouted
) -> None:
    # C is down while P starts: P's records name (a, b, -). Later B is down,
    # the only fault. A newcomer must not take P's record for one written
    # before a loss (it was the set {a, b}: C looked lost, kept out for
    # 1.25 x max(ttl, 2 s) = 25 s with nothing held).
    p_routes = redis_nodes.route()
    p_routes[2].refuse()
    p = routed(p_routes, 0.25)
    warm = p.lock("warm", ttl=20.0, auto_extend=False)
    assert await warm.acquire(blocking=False), warm.errors
    await warm.release()  # its records on A and B live 25 s
    redis_nodes[1].kill()  # B down for everyone
    q = routed(redis_nodes.route(), 0.25)
    job = q.lock("job", ttl=2.0, auto_extend=False)
    # Within two retry delays, the censuses included (acquire's own deadline).
    granted = await job.acquire(timeout=TWO_RETRIES)
    assert granted, [str(error) for error in job.errors.values()]
    await job.release()


@pytest.mark.redis_nodes(5)
async def test_processes_missing_different_nodes_do_not_refuse_each_other(
    redis_nodes: RedisNodes, routed: MakeRouted
) -> None:
    # B is unreachable for holder H, C for newcomers Q1 and Q2 (two of five
    # faulty; A, D, E healthy and reachable by all). Q's notice, a set, made
    # A, D and E refuse H's view: H's lock was lost while they held it, and
    # the newcomers were refused for 1.5 x max(ttl, 2 s).
    ttl = 2.0
    h_routes = redis_nodes.route()
    h_routes[1].refuse()
    h = routed(h_routes, 0.25)
    held = h.lock("held", ttl=ttl)  # auto-extended
    assert await held.acquire(blocking=False), held.errors
    newcomers = []
    for _ in range(2):
        q_routes = redis_nodes.route()
        q_routes[2].refuse()
        newcomers.append(routed(q_routes, 0.25))
    for round_ in range(3):
        for i, q in enumerate(newcomers):
            free = q.lock(f"free-{i}-{round_}", ttl=ttl, auto_extend=False)
            granted = await free.acquire(timeout=TWO_RETRIES)
            assert granted, [str(error) for error in free.errors.values()]
            await free.release()
        await asyncio.sleep(ttl)  # H rewrites its record: the notices are checked
        assert not held.lost, [str(error) for error in held.errors.values()]
    await held.release()


async def test_a_loss_inside_a_census_chain_leaves_no_notice_against_its_view(
    redis_nodes: RedisNodes, routed: MakeRouted
) -> None:
    # P's first census reads B's epoch b; B then loses its data before the
    # second reads it (b'), and that second census writes the first's
    # findings, b included, as a notice. The third confirms b'. The set
    # notice {a, b, c} was incomparable with the view {a, b', c}: STALE on
    # every node for 1.5 x max(ttl, 2 s). A notice naming b now refuses
    # only views naming an epoch of B older than b.
    d = 0.3
    routes = redis_nodes.route()
    routes[1].delay(d)
    # A node_timeout long enough for redis-py's handshake and NOSCRIPT retry
    # through the delayed route: the first census must hear B.
    p = routed(routes, 10 * d)
    epochs = p._core.epochs
    assert isinstance(epochs, Epochs)
    b = redis_nodes[1].client()
    first = asyncio.create_task(epochs.first(10.0))
    # The first census's read of B made its epoch; its reply is d away, and
    # the second census's read d after that.
    assert await eventually(lambda: bool(b.hget("redlock:~epoch", "id")), within=5.0)
    await asyncio.sleep(1.5 * d)
    b.flushall()
    await first
    assert epochs.ready
    assert epochs.count >= 3, epochs.count
    assert epochs.ids[1] == b.hget("redlock:~epoch", "id")
    routes[1].heal()
    count = epochs.count
    job = p.lock("job", ttl=2.0, auto_extend=False)
    assert await job.acquire(blocking=False), [str(e) for e in job.errors.values()]
    # Accepted as the chain made it: no node answered STALE, no census more
    # (before, a STALE everywhere and an incidental census that dropped the
    # notice hid it; without that census, refused for 1.5 x max(ttl, 2 s)).
    assert epochs.count == count, [str(e) for e in job.errors.values()]
    assert not job.errors, job.errors
    await job.release()


async def test_processes_listing_the_nodes_in_another_order_still_grant_and_are_warned(
    redis_nodes: RedisNodes, routed: MakeRouted, caplog: pytest.LogCaptureFixture
) -> None:
    # An outside review: A lists the nodes (0, 1, 2), B (1, 0, 2). Each census
    # chain leaves, per position, the newest epoch it heard there as a
    # notice: on every node, positions 1 and 2 came to name the later-born of
    # nodes 0's and 1's epochs, and every view - A's, B's, a newcomer's in A's
    # order - named an older one at one of them: STALE everywhere, for good.
    # A notice naming an epoch the view holds at another position is another
    # order's now, and refuses nothing; the census warns once.
    routes = redis_nodes.route()
    a = routed(routes, 0.25)
    b = routed([routes[1], routes[0], routes[2]], 0.25)
    with caplog.at_level(logging.WARNING, logger="redlock_async.node"):
        for process in (a, b, a, b):
            epochs = process._core.epochs
            assert isinstance(epochs, Epochs)
            await epochs.first(5.0)
            job = process.lock("job", ttl=2.0, auto_extend=False)
            assert await job.acquire(timeout=TWO_RETRIES), [str(e) for e in job.errors.values()]
            await job.release()
        c = routed(redis_nodes.route(), 0.25)
        job = c.lock("job", ttl=2.0, auto_extend=False)
        assert await job.acquire(timeout=TWO_RETRIES), [str(e) for e in job.errors.values()]
        await job.release()
    warned = [r.getMessage() for r in caplog.records if "another node list" in r.getMessage()]
    assert warned, "no process warned of the other order"


async def test_an_epoch_replacing_anothers_is_born_after_it(
    redis_nodes: RedisNodes, routed: MakeRouted
) -> None:
    # A promoted replica, or a slot moved to another shard, makes the node's
    # new epoch on another server's clock: one lagging the old epoch's birth
    # made the dead epoch read as the newer, and its notices refused every
    # view naming the live one. The census makes it later than the one it
    # replaces, whatever its clock says.
    a = redis_nodes[0].client()
    ahead = f"t{(int(time.time() * 1000) + 3_600_000):011x}beef"  # an hour ahead
    a.hset("redlock:~epoch", mapping={"id": ahead, "run": "f" * 40, "repl": "e" * 40})
    p = routed(redis_nodes.route(), 0.25)
    epochs = p._core.epochs
    assert isinstance(epochs, Epochs)
    await epochs.first(5.0)
    made = a.hget("redlock:~epoch", "id")
    assert made is not None
    assert made != ahead.encode()  # another server's: replaced
    assert int(made[1:12], 16) > int(ahead[1:12], 16)  # born after it
    job = p.lock("job", ttl=2.0, auto_extend=False)
    assert await job.acquire(timeout=5.0), [str(e) for e in job.errors.values()]
    await job.release()
