"""Waiters woken by releases (sharded pub/sub), against real nodes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import subprocess
import sys
import textwrap
import time
from typing import Any

import pytest
import redis.asyncio
from redis.asyncio import RedisCluster
from redis.crc import key_slot

from redlock_async import Redlock
from redlock_async._base._keys import lock_key
from redlock_async._core._scripts import ACQUIRE
from redlock_async.testing import AclUser, RedisClusterNodes, RedisNode, RedisNodes

from ..conftest import MakeRedlock, eventually

CHANNEL = b"redlock:{job}:wake"


def subscribers(nodes: RedisNodes, channel: bytes = CHANNEL) -> list[int]:
    counts = []
    for node in nodes:
        ((_, count),) = node.client().pubsub_shardnumsub(channel)
        counts.append(int(count))
    return counts


async def test_waiter_is_woken_by_the_release(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # A retry delay far longer than the test: only a wake-up can hand over in time.
    redlock = make_redlock(retry_delay=60.0, retry_jitter=0.0)
    holder = redlock.lock("job", ttl=10.0)
    assert await holder.acquire()
    waiter = asyncio.ensure_future(redlock.lock("job", ttl=10.0).acquire(timeout=50.0))
    assert await eventually(lambda: subscribers(redis_nodes) == [1, 1, 1])
    await holder.release()
    assert await asyncio.wait_for(waiter, 30.0)


async def test_subscriptions_are_shared_and_dropped(redis_nodes: RedisNodes) -> None:
    async with Redlock(redis_nodes.urls, retry_delay=60.0, retry_jitter=0.0) as redlock:
        holder = redlock.lock("job", ttl=10.0)
        assert await holder.acquire()
        waiters = [
            asyncio.ensure_future(redlock.lock("job", ttl=10.0).acquire(timeout=50.0))
            for _ in range(20)
        ]
        # Twenty waiters, one subscription per node.
        assert await eventually(lambda: subscribers(redis_nodes) == [1, 1, 1])
        for node in redis_nodes:
            clients = node.client().client_list()
            assert sum(1 for c in clients if int(c.get("ssub", 0)) > 0) == 1
        # Some give up (cancelled); the rest are handed the lock one by one.
        for task in waiters[:5]:
            task.cancel()
        await holder.release()
        done, rest = await asyncio.wait(
            waiters[5:], timeout=30.0, return_when=asyncio.FIRST_COMPLETED
        )
        assert len(done) == 1  # one of them was woken and won
        assert done.pop().result() is True
        for task in rest:
            task.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)
        assert await eventually(lambda: subscribers(redis_nodes) == [0, 0, 0])
        hub = redlock._core.wake
        assert hub is not None
        assert hub._channels == {}


async def test_every_waiter_is_served_in_turn(redis_nodes: RedisNodes) -> None:
    async with Redlock(redis_nodes.urls, retry_delay=60.0, retry_jitter=0.0) as redlock:
        served = 0

        async def worker() -> None:
            nonlocal served
            async with redlock.lock("job", ttl=10.0, timeout=50.0):
                served += 1
                await asyncio.sleep(0.005)

        await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(8))), 30.0)
        assert served == 8


async def test_without_wake_ups_waiters_poll(make_redlock: MakeRedlock) -> None:
    redlock = make_redlock(wake_on_release=False, retry_delay=0.05, retry_jitter=0.05)
    assert redlock._core.wake is None
    holder = redlock.lock("job", ttl=10.0)
    assert await holder.acquire()
    waiter = asyncio.ensure_future(redlock.lock("job", ttl=10.0).acquire(timeout=10.0))
    await asyncio.sleep(0.2)
    await holder.release()
    assert await waiter


async def test_rwlock_waiters_are_woken(make_redlock: MakeRedlock, redis_nodes: RedisNodes) -> None:
    redlock = make_redlock(retry_delay=60.0, retry_jitter=0.0)
    rw = redlock.rwlock("job")
    reader = rw.read(ttl=10.0)
    assert await asyncio.ensure_future(reader.acquire())  # held by another task
    writer = rw.write(ttl=10.0)
    writer_task = asyncio.ensure_future(writer.acquire(timeout=50.0))
    assert await eventually(lambda: subscribers(redis_nodes) == [1, 1, 1])
    await reader.release()  # the last reader leaving wakes the writer
    assert await asyncio.wait_for(writer_task, 30.0)
    late_reader = asyncio.ensure_future(rw.read(ttl=10.0).acquire(timeout=50.0))
    assert await eventually(lambda: subscribers(redis_nodes) == [1, 1, 1])
    await writer.release()  # the writer's release wakes the reader
    assert await asyncio.wait_for(late_reader, 30.0)


async def test_a_node_reachable_only_after_the_wait_began_wakes_the_waiter(
    redis_nodes: RedisNodes,
) -> None:
    # The waiter's subscription on n3 cannot be made when it starts waiting;
    # it must be made once n3 answers, not left to the 60 s retry delay.
    n3 = redis_nodes[2]
    async with Redlock(redis_nodes.urls, retry_delay=60.0, retry_jitter=0.0) as redlock:
        holder = redlock.lock("job", ttl=10.0)
        n3.refuse()
        assert await holder.acquire()  # on n1 and n2
        waiter = asyncio.ensure_future(redlock.lock("job", ttl=10.0).acquire(timeout=50.0))
        assert await eventually(lambda: subscribers(redis_nodes) == [1, 1, 0])
        n3.heal()
        assert await eventually(lambda: subscribers(redis_nodes) == [1, 1, 1])
        await holder.release()
        assert await asyncio.wait_for(waiter, 30.0)


async def test_wake_ups_survive_a_lost_connection(redis_nodes: RedisNodes) -> None:
    async with Redlock(redis_nodes.urls, retry_delay=60.0, retry_jitter=0.0) as redlock:
        holder = redlock.lock("job", ttl=10.0)
        assert await holder.acquire()
        waiter = asyncio.ensure_future(redlock.lock("job", ttl=10.0).acquire(timeout=50.0))
        assert await eventually(lambda: subscribers(redis_nodes) == [1, 1, 1])
        for node in redis_nodes:
            node.reset_connections()  # every subscription is cut
        assert await eventually(lambda: subscribers(redis_nodes) == [1, 1, 1])
        await holder.release()
        assert await asyncio.wait_for(waiter, 30.0)


def shard_channels(nodes: RedisNodes) -> list[list[bytes | str]]:
    """Every node's subscribed shard channels, straight from the server."""
    return [list(node.client().pubsub_shardchannels()) for node in nodes]


async def test_cancelled_while_subscribing_leaves_no_subscription(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A plain asyncio.timeout around acquire() can cancel it while it waits for
    # the nodes to confirm its subscription: the waiter must leave anyway.
    redlock = make_redlock(retry_delay=60.0, retry_jitter=0.0)
    names = [f"job{i}" for i in range(3)]
    for name in names:
        assert await redlock.lock(name, ttl=60.0).acquire()
    hub = redlock._core.wake
    assert hub is not None
    subscribe = hub.subscribe
    entered: dict[asyncio.Task[Any], asyncio.Event] = {}
    hits = 0

    async def spy(*args: Any, **kwargs: Any) -> Any:
        nonlocal hits
        task = asyncio.current_task()
        assert task is not None
        entered[task].set()
        try:
            return await subscribe(*args, **kwargs)
        except asyncio.CancelledError:
            hits += 1
            raise

    monkeypatch.setattr(hub, "subscribe", spy)
    rng = random.Random(14)

    async def cancel_soon(task: asyncio.Task[Any]) -> None:
        await asyncio.wait_for(entered[task].wait(), 10.0)
        for _ in range(rng.randrange(8)):  # a random point of the subscription
            await asyncio.sleep(0)
        task.cancel()

    for _ in range(25):
        tasks = []
        for name in rng.sample(names * 2, 4):  # some waiters share a channel
            task = asyncio.ensure_future(redlock.lock(name, ttl=10.0).acquire(timeout=50.0))
            entered[task] = asyncio.Event()
            tasks.append(task)
        await asyncio.gather(*(cancel_soon(task) for task in tasks))
        results = await asyncio.gather(*tasks, return_exceptions=True)
        assert all(isinstance(r, asyncio.CancelledError) for r in results), results
    assert hits >= 10  # most cancellations landed inside subscribe()
    assert hub._channels == {}
    left = shard_channels  # PUBSUB SHARDCHANNELS on every node
    assert await eventually(lambda: left(redis_nodes) == [[], [], []]), left(redis_nodes)


async def test_acquire_timeout_bounds_the_subscription(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # A blackholed node never confirms a subscription: acquire(timeout=) must
    # not wait node_timeout for it.
    redlock = make_redlock(node_timeout=1.0, retry_delay=60.0, retry_jitter=0.0)
    assert await redlock.lock("job", ttl=30.0).acquire()  # held elsewhere
    redis_nodes[2].blackhole()
    try:
        started = time.monotonic()
        assert not await redlock.lock("job", ttl=10.0).acquire(timeout=0.05)
        assert time.monotonic() - started < 0.5  # node_timeout + timeout would be 1.05
    finally:
        redis_nodes[2].heal()


# -- waiters in turn (issue 16: no wake-up storms) ----------------------------


def script_calls(node: RedisNode) -> int:
    stats = node.client().info("commandstats")
    return sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("evalsha", "eval"))


async def in_line(redlock: Redlock, n: int) -> bool:
    """True once ``n`` waiters of this Redlock have joined a line (and so wait)."""
    hub = redlock._core.wake
    assert hub is not None

    def waiters() -> int:
        # A multilock's line is on the channel of each of its names: counted once.
        lines = {id(q): q for c in hub._channels.values() for q in c.lines.values()}
        return sum(len(list(q)) for q in lines.values())

    return await eventually(lambda: waiters() >= n)


async def test_a_release_costs_one_attempt_not_one_per_waiter(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # Before, each release woke every waiter (once per node announcing it):
    # 40 waiters cost ~20 script calls per grant on a node, and more with N.
    redlock = make_redlock(retry_delay=60.0, retry_jitter=0.0)
    holder = redlock.lock("job", ttl=10.0, auto_extend=False)
    assert await holder.acquire()
    before = script_calls(redis_nodes[0])
    n = 40

    async def waiter() -> None:
        lock = redlock.lock("job", ttl=10.0, auto_extend=False)
        assert await lock.acquire(timeout=50.0)
        await lock.release()

    tasks = [asyncio.ensure_future(waiter()) for _ in range(n)]
    assert await in_line(redlock, n)
    await holder.release()
    await asyncio.wait_for(asyncio.gather(*tasks), 30.0)  # woken in turn: no 60 s delay
    per_grant = (script_calls(redis_nodes[0]) - before - 1) / n
    # A first (refused) attempt and a winning one, one release: 3 calls (through
    # redis-py each attempt also asks the server's identity: 5). Attempts that
    # time out on a busy machine add their undo; a storm adds ~n/2 per grant.
    assert per_grant <= 10, per_grant


async def test_tasks_taking_turns_on_one_name_cost_one_attempt_per_grant(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes, driver: str
) -> None:
    """8 tasks, each taking the lock, holding it a moment, releasing it and
    asking again at once (peers.py's contended workload). The holder asking
    again finds the others in line and joins it without an attempt (one
    would race the waiter its release woke: one of the two refused, and
    undone on every node), and the woken waiter's attempt follows the
    release: on a node, a grant costs its attempt and its release."""
    redlock = make_redlock(retry_delay=60.0, retry_jitter=0.0)
    rounds = 25
    granted = 0

    async def worker() -> None:
        nonlocal granted
        for _ in range(rounds):
            lock = redlock.lock("job", ttl=10.0, auto_extend=False)
            assert await lock.acquire(timeout=50.0)
            granted += 1
            await asyncio.sleep(0.001)
            await lock.release()

    first = redlock.lock("job", ttl=10.0, auto_extend=False)
    assert await first.acquire()  # the censuses and connections, before counting
    await first.release()
    before = script_calls(redis_nodes[0])
    await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(8))), 60.0)
    per_grant = (script_calls(redis_nodes[0]) - before) / granted
    # Clean hand-overs: 2 (3 through redis-py, where each attempt also asks
    # the server's identity). On top, the 8 first attempts race each other
    # (7 refused: attempt, undo, one more once subscribed): about 0.1. Before
    # this change a grant cost about 3.2 here (3.1 + 1 through redis-py): a
    # refused attempt and its undo in most grants.
    clean = 3 if driver == "redis-py" else 2
    assert per_grant < clean + 0.5, per_grant


async def test_a_waiter_s_own_undos_never_wake_it(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    """A holder keeps two nodes of three; each attempt of the waiter is
    granted on the third and undone. Its own undos wake nobody: it attempts
    three times (its first, once more once subscribed, and once a
    node_timeout later, as after a split vote), then waits. The undo of the
    first ran while the nodes confirmed the subscription, and woke the
    waiter for one more (its acquire call was set on the subscription only
    once subscribed)."""
    redlock = make_redlock(retry_delay=60.0, retry_jitter=0.0)
    first = redlock.lock("job", ttl=10.0, auto_extend=False)
    assert await first.acquire()  # the censuses and connections, before counting
    await first.release()
    for node in list(redis_nodes)[1:]:
        node.client().set(lock_key("redlock:", "job"), b"a holder elsewhere", px=30_000)
    engine = redlock._core
    fanout = engine.fanout
    attempts = 0

    def counted(command: Any, **options: Any) -> Any:
        nonlocal attempts
        if command.script is ACQUIRE:
            attempts += 1
        return fanout(command, **options)

    engine.fanout = counted
    waiter = asyncio.ensure_future(redlock.lock("job", ttl=10.0).acquire(timeout=50.0))
    assert await in_line(redlock, 1)
    await asyncio.sleep(2.0)
    assert not waiter.done()
    waiter.cancel()
    assert attempts == 3


@pytest.mark.parametrize("how", ["timeout", "cancelled"])
async def test_a_waiter_that_leaves_without_the_lock_passes_its_turn_on(
    make_redlock: MakeRedlock, how: str
) -> None:
    redlock = make_redlock(retry_delay=60.0, retry_jitter=0.0)
    holder = redlock.lock("job", ttl=10.0)
    assert await holder.acquire()
    first = asyncio.ensure_future(redlock.lock("job", ttl=10.0).acquire(timeout=1.0))
    assert await in_line(redlock, 1)
    second = asyncio.ensure_future(redlock.lock("job", ttl=10.0).acquire(timeout=50.0))
    assert await in_line(redlock, 2)
    if how == "cancelled":
        first.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        assert not await first
    await holder.release()  # the second, first in line now, is woken by it
    assert await asyncio.wait_for(second, 30.0)


async def test_waiting_readers_are_granted_together(make_redlock: MakeRedlock) -> None:
    redlock = make_redlock(retry_delay=60.0, retry_jitter=0.0)
    rw = redlock.rwlock("job")
    writer = rw.write(ttl=10.0)
    assert await writer.acquire()
    n = 10
    everyone_in = asyncio.Event()
    holding = 0

    async def reader() -> None:
        nonlocal holding
        lock = rw.read(ttl=10.0)
        assert await lock.acquire(timeout=50.0)
        holding += 1
        if holding == n:
            everyone_in.set()
        await everyone_in.wait()  # held until every reader holds: they overlap
        await lock.release()

    tasks = [asyncio.ensure_future(reader()) for _ in range(n)]
    assert await in_line(redlock, n)
    await writer.release()
    await asyncio.wait_for(asyncio.gather(*tasks), 30.0)


# No permission for any channel: nobody can be woken.
DEAF = AclUser("deaf", "deaf-user-pw", "~* resetchannels +@all -@dangerous +info")


@pytest.mark.redis_nodes(3, acl_user=DEAF)
async def test_when_no_node_can_wake_them_every_waiter_polls(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # As without wake-ups: in line but each polling at its retry delay, so a
    # release is found as soon as the first of them polls (not only the first
    # in line, once per retry delay).
    redlock = make_redlock(retry_delay=0.1, retry_jitter=0.0)
    holder = redlock.lock("job", ttl=10.0)
    assert await holder.acquire()
    n = 8
    tasks = [
        asyncio.ensure_future(redlock.lock("job", ttl=10.0).acquire(timeout=50.0)) for _ in range(n)
    ]
    assert await in_line(redlock, n)
    before = script_calls(redis_nodes[0])
    await asyncio.sleep(1.0)
    polls = script_calls(redis_nodes[0]) - before
    # ~10 per waiter on an idle machine (18 in all seen on a loaded one); the
    # first in line alone could make at most 11 (every 0.1 s for 1 s).
    assert polls >= 2 * n, polls
    await holder.release()
    done, _ = await asyncio.wait(tasks, timeout=30.0, return_when=asyncio.FIRST_COMPLETED)
    assert done
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_clients_that_decode_responses_wake_waiters_too(redis_nodes: RedisNodes) -> None:
    # Their pub/sub hands out str channels and messages: they must still match.
    clients = [redis.asyncio.Redis.from_url(url, decode_responses=True) for url in redis_nodes.urls]
    try:
        async with Redlock(
            clients, retry_delay=60.0, retry_jitter=0.0, node_timeout=0.25
        ) as redlock:
            holder = redlock.lock("job", ttl=10.0)
            assert await holder.acquire()
            waiter = asyncio.ensure_future(redlock.lock("job", ttl=10.0).acquire(timeout=50.0))
            assert await eventually(lambda: subscribers(redis_nodes) == [1, 1, 1])
            await holder.release()
            assert await asyncio.wait_for(waiter, 30.0)
    finally:
        for client in clients:
            await client.aclose()


# -- one line per lock (issue 24) ---------------------------------------------


async def test_a_multilock_never_waits_behind_one_for_another_set(
    make_redlock: MakeRedlock,
) -> None:
    # [a, b] and [a, c] share their first name, not their lock: [a, c] must
    # attempt on its own, and take a and c once they are free, while [a, b]
    # still waits for b. Before, both stood in one line per first name: [a, c]
    # made no attempt until [a, b] left (here: never within its timeout).
    other = make_redlock()
    redlock = make_redlock(retry_delay=0.5, retry_jitter=0.0)
    b, c = other.lock("b", ttl=30.0), other.lock("c", ttl=30.0)
    assert await b.acquire()
    assert await c.acquire()
    ab = asyncio.ensure_future(redlock.multilock(["a", "b"], ttl=10.0).acquire(timeout=50.0))
    assert await in_line(redlock, 1)
    ac_lock = redlock.multilock(["a", "c"], ttl=10.0)
    ac = asyncio.ensure_future(ac_lock.acquire(timeout=50.0))
    assert await in_line(redlock, 2)
    await c.release()
    # Fixed: woken by c's release, or at worst at its next retry (0.5 s).
    assert await asyncio.wait_for(ac, 5.0)
    assert not ab.done()
    await ac_lock.release()
    await b.release()
    assert await asyncio.wait_for(ab, 30.0)


async def test_a_multilock_is_woken_by_the_release_of_any_of_its_names(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # A retry delay far longer than the test: only a wake-up on b's channel
    # (not its first name's, a) can hand [a, b] over in time.
    other = make_redlock()
    redlock = make_redlock(retry_delay=60.0, retry_jitter=0.0)
    b = other.lock("b", ttl=30.0)
    assert await b.acquire()
    ab = asyncio.ensure_future(redlock.multilock(["a", "b"], ttl=10.0).acquire(timeout=50.0))
    assert await in_line(redlock, 1)
    # Subscribed (on a: before, only there), and past the attempt it makes
    # once subscribed: a release before that attempt would be found by it.
    assert await eventually(lambda: subscribers(redis_nodes, b"redlock:{a}:wake") == [1, 1, 1])
    await asyncio.sleep(1.0)
    assert not ab.done()
    await b.release()
    assert await asyncio.wait_for(ab, 10.0)


async def test_a_multilock_on_a_cluster_is_woken_by_a_name_in_another_slot(
    redis_cluster: RedisClusterNodes,
) -> None:
    # Each name's channel lives in its name's slot, maybe on another shard:
    # the waiter subscribes there too.
    names = ("account:1", "account:2")
    assert key_slot(lock_key("redlock:", names[0])) != key_slot(lock_key("redlock:", names[1]))
    host, port = redis_cluster.startup_nodes[0]
    clients = [RedisCluster(host=host, port=port) for _ in range(2)]
    try:
        async with (
            Redlock([clients[0]]) as other,
            Redlock([clients[1]], retry_delay=60.0, retry_jitter=0.0) as redlock,
        ):
            held = other.lock(names[1], ttl=30.0)
            assert await held.acquire()
            waiter = asyncio.ensure_future(redlock.multilock(names, ttl=10.0).acquire(timeout=50.0))
            assert await in_line(redlock, 1)
            await asyncio.sleep(1.5)  # subscribed on both shards, past its one more attempt
            assert not waiter.done()
            await held.release()
            assert await asyncio.wait_for(waiter, 10.0)
    finally:
        for client in clients:
            await client.aclose()


async def test_a_plain_lock_never_waits_behind_a_multilock_of_its_name(
    make_redlock: MakeRedlock,
) -> None:
    # A plain lock on a and a multilock [a, b] are different locks: while the
    # multilock waits for b, a is free and the plain lock takes it at once.
    other = make_redlock()
    redlock = make_redlock(retry_delay=60.0, retry_jitter=0.0)
    a, b = other.lock("a", ttl=30.0), other.lock("b", ttl=30.0)
    assert await a.acquire()
    assert await b.acquire()
    ab = asyncio.ensure_future(redlock.multilock(["a", "b"], ttl=10.0).acquire(timeout=50.0))
    assert await in_line(redlock, 1)
    plain = redlock.lock("a", ttl=10.0)
    waiting = asyncio.ensure_future(plain.acquire(timeout=50.0))
    assert await in_line(redlock, 2)
    await a.release()  # a wakes both; only the plain lock can win (b is held)
    assert await asyncio.wait_for(waiting, 10.0)
    assert not ab.done()
    await b.release()
    await plain.release()  # a's release wakes the multilock
    assert await asyncio.wait_for(ab, 10.0)


async def test_freed_semaphore_slots_reach_every_waiter_of_a_process_at_once(
    make_redlock: MakeRedlock,
) -> None:
    # Eight slots held by another Redlock (another process, for the lines),
    # eight waiters here. Before, one grant passed the turn on as if nothing
    # were left: the next waiter polled at its retry delay, and the eight
    # were granted at 0.0, 0.5 ... 3.5 s. Now each grant wakes the next at
    # once: all eight within a few round trips.
    limit, retry = 8, 0.5
    other = make_redlock()
    redlock = make_redlock(retry_delay=retry, retry_jitter=0.0)
    held = [other.semaphore("jobs", limit, ttl=30.0) for _ in range(limit)]
    assert all([await lock.acquire(blocking=False) for lock in held])
    loop = asyncio.get_running_loop()
    granted: list[float] = []

    async def waiter() -> None:
        lock = redlock.semaphore("jobs", limit, ttl=30.0)
        assert await lock.acquire(timeout=50.0)
        granted.append(loop.time())

    tasks = [asyncio.ensure_future(waiter()) for _ in range(limit)]
    assert await in_line(redlock, limit)
    released = loop.time()
    await asyncio.gather(*(lock.release() for lock in held))
    await asyncio.wait_for(asyncio.gather(*tasks), 30.0)
    # Broken: 3.5 s at least (seven retry delays). Fixed: milliseconds; the
    # margin is for a loaded machine, where an attempt may meet a split vote
    # while releases are still landing and wait one retry delay (1.58 s seen
    # once in CI): still well apart from the broken 3.5 s.
    assert max(granted) - released < 4 * retry, [round(t - released, 3) for t in granted]


_TURNS = textwrap.dedent(
    """
    import asyncio, json, sys, time
    import redis.asyncio
    from redlock_async import Redlock

    async def main():
        driver, urls = sys.argv[1], sys.argv[2:]
        if driver == "redis-py":
            nodes = [redis.asyncio.Redis.from_url(url) for url in urls]
            redlock = Redlock(nodes, node_timeout=0.25, retry_delay=60.0, retry_jitter=0.0)
        else:
            redlock = Redlock(urls, retry_delay=60.0, retry_jitter=0.0)
        granted, longest = 0, 0.0
        async with redlock:
            for _ in range(50):
                lock = redlock.lock("job", ttl=10.0, auto_extend=False)
                started = time.monotonic()
                if not await lock.acquire(timeout=20.0):
                    break
                longest = max(longest, time.monotonic() - started)
                granted += 1
                await asyncio.sleep(0.001)
                await lock.release()
        print(json.dumps({"granted": granted, "longest": longest}))

    asyncio.run(main())
    """
)


async def test_processes_taking_turns_are_not_held_up_by_split_votes(
    redis_nodes: RedisNodes, driver: str
) -> None:
    """Six processes take turns on one name, a retry delay of 60 s. When
    their attempts split the votes (each granted on some node, none on a
    quorum) all are undone, and nobody announces an undo: before, every
    process's waiter then waited out its 60 s for a lock nobody held (6
    processes of 50 turns: 28-53 s in all, waits up to 10.5 s with a 5 s
    retry delay). A waiter granted somewhere now retries a jittered
    node_timeout later."""
    children = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-c", _TURNS, driver, *redis_nodes.urls, stdout=subprocess.PIPE
        )
        for _ in range(6)
    ]
    results = []
    for child in children:
        out, _ = await child.communicate()
        assert child.returncode == 0
        results.append(json.loads(out))
    assert all(result["granted"] == 50 for result in results), results
