"""The restart rule with a Redis Cluster among the nodes (issue 25).

Three Redlock nodes: a 3-master Redis Cluster, A and C. A grant is held on
the cluster and A while C is cut off; the shard that owns the name's hash
slot then restarts empty (its cluster config kept, its data gone) and C
comes back. Each ``_redlock()`` stands for another process, with its own
cluster client. Without the rule per hash slot (``_engine/_slots.py``) a
newcomer is granted on the restarted shard and C while the first grant is
valid: the restarted shard answered for its slot with no memory of it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import pytest
import redis
from redis.asyncio import Redis as RedisAsync
from redis.asyncio import RedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError

from redlock_async import Redlock
from redlock_async._base._errors import NodeConnectionError
from redlock_async._base._keys import epoch_key, key_slot, lock_key, slot_epoch_key
from redlock_async._engine._node import Arg, Command, Script, Sink
from redlock_async._engine._slots import SlotEpochs
from redlock_async._engine._tally import PENDING
from redlock_async._engine.redispy import RedisPyNode
from redlock_async._engine.resp._node import RespNode
from redlock_async._engine.resp._split import _Part
from redlock_async.testing import RedisClusterNodes, RedisNodes
from redlock_async.testing._server import RedisServer

from ..conftest import eventually

pytestmark = pytest.mark.redis_nodes(2)

_made: list[tuple[Redlock, RedisCluster]] = []


def _redlock(cluster: RedisClusterNodes, nodes: RedisNodes) -> Redlock:
    host, port = cluster.startup_nodes[0]
    client = RedisCluster(host=host, port=port)
    redlock = Redlock([client, nodes[0].url, nodes[1].url])
    _made.append((redlock, client))
    return redlock


@pytest.fixture(autouse=True)
async def _close_redlocks() -> AsyncIterator[None]:
    yield None
    while _made:
        redlock, client = _made.pop()
        await redlock.aclose()
        await client.aclose()  # passed in: aclose() leaves it open


def _owner(cluster: RedisClusterNodes, name: str) -> RedisServer:
    """The master that serves ``name``'s hash slot."""
    slot = key_slot(lock_key("redlock:", name))
    client = redis.Redis(port=cluster.servers[0].port)
    try:
        ranges = client.execute_command("CLUSTER", "SLOTS")  # type: ignore[no-untyped-call]
    finally:
        client.close()
    port = next(int(r[2][1]) for r in ranges if r[0] <= slot <= r[1])
    return next(server for server in cluster.servers if server.port == port)


async def _held(
    p1: Redlock, cluster: RedisClusterNodes, nodes: RedisNodes, ttl: float
) -> tuple[float, object]:
    """P1 takes ``job`` on the cluster and A while C is cut off; the shard of
    ``job`` then restarts empty and C comes back. Returns the grant's end
    (loop time) and the lock."""
    c = nodes[1]
    c.kill()
    held = p1.lock("job", ttl=ttl, auto_extend=False)
    started = asyncio.get_running_loop().time()
    assert await held.acquire(timeout=5.0)
    shard = _owner(cluster, "job")
    shard.kill()
    shard.restart()
    c.restart()
    return started + ttl, held


async def _refused_until(lock: object, end: float) -> tuple[int, list[str]]:
    """One-shot attempts until shortly before loop time ``end``: all refused.
    Returns how many, and the errors the cluster node gave them."""
    loop = asyncio.get_running_loop()
    attempts, cluster_errors = 0, []
    while loop.time() < end - 0.3:
        granted = await lock.acquire(blocking=False)  # type: ignore[attr-defined]
        assert not granted, "a second holder while the first grant was valid"
        attempts += 1
        errors = lock.errors  # type: ignore[attr-defined]
        cluster_errors += [str(e) for name, e in errors.items() if name.startswith("cluster(")]
        await asyncio.sleep(0.1)
    return attempts, cluster_errors


async def test_a_newcomer_is_not_granted_on_a_shard_that_restarted_empty(
    redis_cluster: RedisClusterNodes, redis_nodes: RedisNodes
) -> None:
    end, held = await _held(_redlock(redis_cluster, redis_nodes), redis_cluster, redis_nodes, 6.0)
    p3 = _redlock(redis_cluster, redis_nodes)
    lock = p3.lock("job", ttl=6.0, auto_extend=False)
    attempts, errors = await _refused_until(lock, end)
    assert attempts >= 10
    # The shard answered, and was kept out for what it lost: not merely down.
    assert any("lost its data" in error for error in errors), errors
    # Granted again within about a quarter of the ttl after the grant's end.
    loop = asyncio.get_running_loop()
    assert await lock.acquire(timeout=6.0 * 0.25 + 3.0)
    assert loop.time() >= end - 0.05
    await lock.release()
    del held


async def test_a_process_with_a_shorter_ttl_is_not_granted_on_the_shard(
    redis_cluster: RedisClusterNodes, redis_nodes: RedisNodes
) -> None:
    p2 = _redlock(redis_cluster, redis_nodes)
    warm = p2.lock("job", ttl=1.0, auto_extend=False)  # the same slot, seen before
    assert await warm.acquire()
    await warm.release()
    end, _ = await _held(_redlock(redis_cluster, redis_nodes), redis_cluster, redis_nodes, 6.0)
    await asyncio.sleep(2.5)  # past any quarantine P2's own ttls would give
    lock = p2.lock("job", ttl=1.0, auto_extend=False)
    attempts, _ = await _refused_until(lock, end)
    assert attempts >= 10
    assert await lock.acquire(timeout=6.0 * 0.25 + 3.0)
    await lock.release()


async def test_a_multilock_over_several_slots_keeps_the_shard_out(
    redis_cluster: RedisClusterNodes, redis_nodes: RedisNodes
) -> None:
    # "job" and names of two other slots: the restarted shard's part is
    # judged by its own slot's records (each part carries its slot's view).
    names = ["job", "other-1", "other-2"]
    assert len({key_slot(lock_key("redlock:", name)) for name in names}) == 3
    p1 = _redlock(redis_cluster, redis_nodes)
    c = redis_nodes[1]
    c.kill()
    held = p1.multilock(names, ttl=6.0, auto_extend=False)
    started = asyncio.get_running_loop().time()
    assert await held.acquire(timeout=5.0)
    shard = _owner(redis_cluster, "job")
    shard.kill()
    shard.restart()
    c.restart()
    p3 = _redlock(redis_cluster, redis_nodes)
    attempts, _ = await _refused_until(p3.lock("job", ttl=6.0, auto_extend=False), started + 6.0)
    assert attempts >= 10
    del held  # expired by now


async def test_nothing_locked_lately_costs_nothing_after_a_shard_restart(
    redis_cluster: RedisClusterNodes, redis_nodes: RedisNodes
) -> None:
    p1 = _redlock(redis_cluster, redis_nodes)
    brief = p1.lock("job", ttl=0.2, auto_extend=False)
    assert await brief.acquire()
    await brief.release()
    await asyncio.sleep(2.6)  # its records (1.25 x max(ttl, 2 s)) have expired
    shard = _owner(redis_cluster, "job")
    shard.kill()
    shard.restart()
    p3 = _redlock(redis_cluster, redis_nodes)
    lock = p3.lock("job", ttl=5.0, auto_extend=False)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 5.0
    while True:  # the cluster client may need a try or two to reconnect
        assert await lock.acquire(timeout=2.0)
        votes = lock._grant.acquired.replies  # type: ignore[union-attr]
        await lock.release()
        if all(type(vote) is int and vote > 0 for vote in votes) or loop.time() > deadline:
            break
        await asyncio.sleep(0.1)
    assert all(type(vote) is int and vote > 0 for vote in votes), votes


async def test_a_shard_restarted_from_disk_gets_a_new_epoch(
    redis_cluster: RedisClusterNodes, redis_nodes: RedisNodes
) -> None:
    # A shard whose data survived (restarted from disk, or a promoted
    # replica) keeps the slot's epoch but may lack its last grants: the
    # scripts compare run_ids, answer STALE, and a census makes a new epoch.
    p1 = _redlock(redis_cluster, redis_nodes)
    lock = p1.lock("job", ttl=3.0, auto_extend=False)
    assert await lock.acquire()
    await lock.release()
    slot = key_slot(lock_key("redlock:", "job"))
    key = slot_epoch_key(epoch_key("redlock:"), slot)
    shard = redis.Redis(port=_owner(redis_cluster, "job").port)
    try:
        before = shard.hget(key, "id")
        assert before  # the slot's epoch lives on the shard that owns the slot
        shard.hset(key, "run", "0" * 40)  # as if another server made it
        assert await lock.acquire(timeout=3.0)  # decided by A and C, maybe before
        await lock.release()  # the shard's STALE asked for the census
        assert await eventually(lambda: shard.hget(key, "id") != before)
        after = shard.hget(key, "id")
        assert after
    finally:
        shard.close()
    epochs = p1._core.epochs
    assert isinstance(epochs, SlotEpochs)
    # Kept out of the view while the grant made with the old epoch's view
    # could still be valid (A and C hold that view's record), then in.
    domain = epochs.domain(slot)
    # Out of the view from the first census on (its STALE answers asked for
    # them). The acquire above was decided by A and C: that census may still
    # wait for their answers, the old epoch still in the view until then.
    assert domain.ids[0] in (None, before)
    assert await eventually(lambda: 0 in domain.held.ends)  # two censuses read it
    epoch, until = domain.held.ends[0]
    assert epoch == after
    assert await eventually(lambda: domain.ids[0] == after)
    assert asyncio.get_running_loop().time() >= until


async def test_plain_urls_beside_a_cluster_keep_the_lean_driver_and_split_by_slot(
    redis_cluster: RedisClusterNodes, redis_nodes: RedisNodes
) -> None:
    redlock = _redlock(redis_cluster, redis_nodes)
    kinds = [type(node).__name__ for node in redlock._core.nodes]
    assert kinds == ["RedisPyNode", "RespNode", "RespNode"]
    assert not any(node.cross_slot for node in redlock._core.nodes)
    # A multilock over three slots, a slot at a time on every node; the lean
    # nodes keep commands sent after it in order behind it.
    names = ["job", "other-1", "other-2"]
    multi = redlock.multilock(names, ttl=5.0, auto_extend=False)
    assert await multi.acquire(timeout=5.0)
    assert multi._grant is not None
    votes = multi._grant.acquired.replies
    assert await eventually(lambda: all(vote is not PENDING for vote in votes))
    assert all(type(vote) is int and vote > 0 for vote in votes), votes
    for name in names:
        assert not await redlock.lock(name).acquire(blocking=False)
    await multi.release()
    for name in names:
        lock = redlock.lock(name, ttl=5.0, auto_extend=False)
        assert await lock.acquire(blocking=False)
        await lock.release()


async def test_a_plain_node_restarted_from_disk_leaves_every_slot_s_view(
    redis_cluster: RedisClusterNodes, redis_nodes: RedisNodes
) -> None:
    # A plain node beside the cluster keeps its run_id watch: restarted from
    # a snapshot, it has its epochs back but may lack the last grants; its new
    # run_id takes it out of each slot's view, and a census gives it a new epoch.
    p1 = _redlock(redis_cluster, redis_nodes)
    lock = p1.lock("job", ttl=3.0, auto_extend=False)
    assert await lock.acquire()
    await lock.release()
    slot = key_slot(lock_key("redlock:", "job"))
    key = slot_epoch_key(epoch_key("redlock:"), slot)
    a = redis_nodes[0]
    direct = redis.Redis(port=a.direct_port)
    try:
        before = direct.hget(key, "id")
        assert before
        direct.save()
    finally:
        direct.close()
    server = a.server
    if not isinstance(server, RedisServer):
        pytest.skip("restarts a local redis-server from its snapshot")
    a.kill()
    server.launch()  # not restart(): that removes the snapshot
    server.wait_ready(keep_port=True)
    direct = redis.Redis(port=a.direct_port)
    try:
        assert direct.hget(key, "id") == before  # back from disk
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10.0
        while direct.hget(key, "id") == before:
            assert loop.time() < deadline, "the restarted node kept its epoch"
            if await lock.acquire(timeout=2.0):
                await lock.release()
            await asyncio.sleep(0.05)
        after = direct.hget(key, "id")
    finally:
        direct.close()
    epochs = p1._core.epochs
    assert isinstance(epochs, SlotEpochs)
    domain = epochs.domain(slot)
    assert domain.ids[1] != before
    assert await eventually(lambda: domain.ids[1] == after or 1 in domain.held.ends)


async def test_a_multilock_refused_by_a_held_node_asks_no_census_of_its_other_slots(
    redis_cluster: RedisClusterNodes, redis_nodes: RedisNodes
) -> None:
    # The cluster node (and C) are kept out of job's slot while the grant is
    # valid. A multilock over job and another slot is refused there at its
    # first part, STALE: that part's slot alone is judged - and it is held,
    # so no census at all. Before, every attempt asked for a census of every
    # slot of the multilock (hundreds a second with a few waiters).
    end, held = await _held(_redlock(redis_cluster, redis_nodes), redis_cluster, redis_nodes, 5.0)
    p3 = _redlock(redis_cluster, redis_nodes)
    job = p3.lock("job", ttl=5.0, auto_extend=False)
    epochs = p3._core.epochs
    assert isinstance(epochs, SlotEpochs)
    domain = epochs.domain(key_slot(lock_key("redlock:", "job")))
    loop = asyncio.get_running_loop()
    while 0 not in domain.held.ends:  # the cluster client may need a try or two to reconnect
        assert loop.time() < end - 2.0, "the cluster node was never kept out"
        assert not await job.acquire(blocking=False)
        await asyncio.sleep(0.05)
    multis = [p3.multilock(["job", "other-1"], ttl=5.0, auto_extend=False) for _ in range(5)]
    assert not await multis[0].acquire(blocking=False)  # the other slot's first censuses
    other = epochs.domain(key_slot(lock_key("redlock:", "other-1")))
    assert await eventually(lambda: other.ready and not other._running)
    before = other.count
    stop = min(loop.time() + 1.0, end - 0.5)

    async def attempts(multi: object) -> int:
        made = 0
        while loop.time() < stop:
            assert not await multi.acquire(blocking=False)  # type: ignore[attr-defined]
            made += 1
            await asyncio.sleep(0.02)
        return made

    made = sum(await asyncio.gather(*(attempts(multi) for multi in multis)))
    assert made >= 20
    assert other.count - before == 0, f"{other.count - before} censuses for {made} attempts"
    del held


async def test_a_multilock_sees_a_plain_node_restarted_from_disk(
    redis_cluster: RedisClusterNodes, redis_nodes: RedisNodes
) -> None:
    # Beside a cluster a multilock runs a slot at a time on every node, plain
    # ones too (RedisPyNode._call). Their parts grant, so each must go behind
    # server_id.lua as a whole script would: A restarted from a snapshot has
    # its epochs back but not the grant P1 holds, and its yes to the same
    # Redlock (whose view still holds A's old epoch) must not count.
    names = ["job", "other-1"]
    assert len({key_slot(lock_key("redlock:", name)) for name in names}) == 2
    a, c = redis_nodes
    server = a.server
    if not isinstance(server, RedisServer):
        pytest.skip("restarts a local redis-server from its snapshot")
    p1 = _redlock(redis_cluster, redis_nodes)
    warm = p1.multilock(names, ttl=2.0, auto_extend=False)
    assert await warm.acquire(timeout=5.0)  # both slots' views hold A's and C's epochs
    await warm.release()
    direct = redis.Redis(port=a.direct_port)
    try:
        direct.save()  # the epochs, no grant
    finally:
        direct.close()
    c.refuse()  # C misses the grant, and keeps its data
    held = p1.multilock(names, ttl=8.0, auto_extend=False)
    started = asyncio.get_running_loop().time()
    assert await held.acquire(timeout=5.0)  # on the cluster and A
    a.kill()
    server.launch()  # not restart(): that removes the snapshot
    server.wait_ready(keep_port=True)
    c.heal()
    second = p1.multilock(names, ttl=8.0, auto_extend=False)
    attempts, _ = await _refused_until(second, started + 8.0)
    assert attempts >= 10
    del held


async def test_a_restart_s_hold_ends_when_the_fan_outs_move_away(
    redis_cluster: RedisClusterNodes, redis_nodes: RedisNodes
) -> None:
    # A plain node's restart holds its yes votes until the commands already
    # sent to it have answered. After a fork (or a move to another loop) they
    # never will: the hold must end there, or the node never votes again.
    p1 = _redlock(redis_cluster, redis_nodes)
    lock = p1.lock("job", ttl=3.0, auto_extend=False)
    assert await lock.acquire()
    await lock.release()
    epochs = p1._core.epochs
    assert isinstance(epochs, SlotEpochs)
    watches = p1._core._quorum.watches
    assert watches is not None
    watch = watches[1]
    assert watch is not None
    a = redis_nodes[0]
    a.pause()  # A's answer to the next attempt stays pending
    try:
        attempt = asyncio.ensure_future(lock.acquire(blocking=False))
        assert await eventually(lambda: bool(p1._core._quorum.pending_on(1)))
        epochs._restarted(1)  # as A's watch does on a new run_id
        assert watch.held
        epochs.reset()
        assert not watch.held
    finally:
        a.resume()
    if await attempt:
        await lock.release()


async def test_a_split_failing_unsent_after_a_part_ran_still_gets_its_undo(
    redis_cluster: RedisClusterNodes, redis_nodes: RedisNodes
) -> None:
    # A's connection breaks between two parts of a multilock's acquire: the
    # second part is never written (A backs off), but the first one took its
    # key there. The vote must not read "never sent" (Unsent): the attempt's
    # undo would skip A, leaving the key to block the name for a whole ttl.
    redlock = _redlock(redis_cluster, redis_nodes)
    node = redlock._core.nodes[1]
    assert isinstance(node, RespNode)
    turns = node._turns
    assert turns is not None
    names = ["job", "other-1", "other-2"]
    first, last = lock_key("redlock:", names[0]), lock_key("redlock:", names[-1])
    send = turns._send
    parts = 0

    def breaking(command: Command, sink: Sink) -> None:
        nonlocal parts
        if isinstance(sink, _Part):
            parts += 1
            if parts == 2 and node._conn is not None:  # part 1 answered: A drops
                node._conn.abort(NodeConnectionError("cut between two parts"))
        send(command, sink)

    turns._send = breaking
    # C holds the last name: C refuses, so the attempt fails and is undone.
    c = redis.Redis(port=redis_nodes[1].port)
    a = redis.Redis(port=redis_nodes[0].port)
    try:
        c.set(last, b"someone-else", px=10_000)
        multi = redlock.multilock(names, ttl=10.0, auto_extend=False)
        assert not await multi.acquire(blocking=False)
        # The undo reaches A once it takes commands again (resent).
        assert await eventually(lambda: not a.exists(first), within=3.0)
    finally:
        turns._send = send
        a.close()
        c.close()


async def test_aclose_still_sends_a_release_waiting_behind_a_split(
    redis_cluster: RedisClusterNodes, redis_nodes: RedisNodes
) -> None:
    # A is paused under a multilock's acquire (its first part written, not
    # answered); the release is queued behind it on A. aclose() must send it
    # (as the lean driver sends every queued cleanup before closing), not
    # cancel it: A resumes, runs the acquire, and the key would stay a ttl.
    host, port = redis_cluster.startup_nodes[0]
    client = RedisCluster(host=host, port=port)
    redlock = Redlock([client, redis_nodes[0].url, redis_nodes[1].url], node_timeout=0.2)
    _made.append((redlock, client))
    names = ["job", "other-1", "other-2"]
    a = redis.Redis(port=redis_nodes[0].port)
    try:
        multi = redlock.multilock(names, ttl=10.0, auto_extend=False)
        assert await multi.acquire(blocking=False)  # warm: A's connection is up
        await multi.release()
        redis_nodes[0].pause()
        # The cluster and C; retried: on a loaded machine the cluster's three
        # parts (a round trip each) may miss node_timeout=0.2 once.
        assert await multi.acquire(timeout=5.0)
        await multi.release()  # A's waits behind A's acquire
        closing = asyncio.ensure_future(redlock.aclose())
        await asyncio.sleep(0.4)  # A's votes have timed out: aclose() closes A
        redis_nodes[0].resume()
        await closing
        keys = [lock_key("redlock:", name) for name in names]
        assert await eventually(lambda: not a.exists(*keys), within=2.0)  # ttl 10 s
    finally:
        redis_nodes[0].resume()
        a.close()


async def test_a_redis_py_split_failing_to_connect_after_a_part_ran_gets_its_undo(
    redis_cluster: RedisClusterNodes, redis_nodes: RedisNodes
) -> None:
    # The same through redis-py (a client passed in for A): a part that cannot
    # even connect after an earlier part took its key is not "never sent".
    host, port = redis_cluster.startup_nodes[0]
    client = RedisCluster(host=host, port=port)
    plain = RedisAsync(port=redis_nodes[0].port)
    redlock = Redlock([client, plain, redis_nodes[1].url])
    _made.append((redlock, client))
    node = redlock._core.nodes[1]
    assert isinstance(node, RedisPyNode)
    call = node._call
    parts = 0

    async def refusing(script: Script, keys: Sequence[bytes], args: Sequence[Arg]) -> object:
        nonlocal parts
        parts += 1
        if parts == 2:  # the first part ran: the next cannot connect
            raise RedisConnectionError("Error 111 connecting to 127.0.0.1:1. Connection refused.")
        return await call(script, keys, args)

    node._call = refusing  # type: ignore[method-assign]
    names = ["job", "other-1", "other-2"]
    first, last = lock_key("redlock:", names[0]), lock_key("redlock:", names[-1])
    c = redis.Redis(port=redis_nodes[1].port)
    a = redis.Redis(port=redis_nodes[0].port)
    try:
        c.set(last, b"someone-else", px=10_000)  # C refuses: the attempt fails, undone
        multi = redlock.multilock(names, ttl=10.0, auto_extend=False)
        assert not await multi.acquire(blocking=False)
        assert await eventually(lambda: not a.exists(first), within=3.0)
    finally:
        node._call = call  # type: ignore[method-assign]
        a.close()
        c.close()
        await plain.aclose()
