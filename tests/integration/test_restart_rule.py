"""The restart rule across processes, with default options (issue 25).

A node that lost its data must not count toward a quorum while a grant it
may have held can still be valid - whoever made that grant, with whatever
ttl. Each ``make_redlock()`` below stands for another process: Redlocks
share nothing (one test also runs the newcomer in a real child process).
Three nodes A, B, C; B restarts empty while another process's grant on A
and B is valid.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap

import pytest

from redlock_async import Redlock
from redlock_async._engine._epochs import Epochs
from redlock_async._engine._tally import PENDING, is_yes
from redlock_async.testing import RedisNodes

from ..conftest import MakeRedlock, eventually


def _restart_empty(*nodes: object) -> None:
    for node in nodes:
        node.kill()  # type: ignore[attr-defined]
        node.restart()  # type: ignore[attr-defined]


async def _held_on_a_and_b(p1: Redlock, nodes: RedisNodes, ttl: float) -> tuple[float, object]:
    """P1 takes ``job`` while C is cut off; B then restarts empty and C comes
    back. Returns when P1's grant ends at the latest (loop time) and the lock."""
    _, b, c = nodes
    c.kill()
    loop = asyncio.get_running_loop()
    held = p1.lock("job", ttl=ttl, auto_extend=False)
    started = loop.time()
    assert await held.acquire(timeout=5.0)  # on A and B
    _restart_empty(b)
    c.restart()
    return started + ttl, held


async def _refused_until(lock: object, end: float) -> int:
    """Attempt ``lock`` (one-shot) until loop time ``end``: every attempt must fail."""
    loop = asyncio.get_running_loop()
    attempts = 0
    while loop.time() < end - 0.3:  # short of the end: the grant is certainly still valid
        granted = await lock.acquire(blocking=False)  # type: ignore[attr-defined]
        assert not granted, "a second holder while the first grant was valid"
        attempts += 1
        await asyncio.sleep(0.1)
    return attempts


async def test_a_process_started_after_the_restart_is_not_granted(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # Schedule 1: P3 never saw B before its restart.
    end, held = await _held_on_a_and_b(make_redlock(), redis_nodes, ttl=3.0)
    p3 = make_redlock()
    lock = p3.lock("job", ttl=3.0, auto_extend=False)
    assert await _refused_until(lock, end) >= 5
    assert lock.errors  # why: busy, STALE or quarantined
    # Available again soon after the old grant's end: the record that kept B
    # and C out outlives the grant by at most a quarter of max(ttl, 2 s).
    loop = asyncio.get_running_loop()
    assert await lock.acquire(timeout=3.0 * 0.25 + 3.0)
    assert loop.time() >= end - 0.05
    await lock.release()
    del held


async def test_a_process_with_a_shorter_ttl_is_not_granted(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # Schedule 2: P2 saw all three nodes, and only ever used ttl 1 s.
    p2 = make_redlock()
    warm = p2.lock("other", ttl=1.0, auto_extend=False)
    assert await warm.acquire()
    await warm.release()
    end, _ = await _held_on_a_and_b(make_redlock(), redis_nodes, ttl=6.0)
    await asyncio.sleep(2.5)  # past any quarantine P2's own ttls would give
    lock = p2.lock("job", ttl=1.0, auto_extend=False)
    assert await _refused_until(lock, end) >= 10
    assert await lock.acquire(timeout=6.0 * 0.25 + 3.0)
    await lock.release()


_NEWCOMER = textwrap.dedent(
    """
    import asyncio, json, sys
    from redlock_async import Redlock

    async def main():
        async with Redlock(sys.argv[1:]) as redlock:
            lock = redlock.lock("job", ttl=3.0, auto_extend=False)
            granted = await lock.acquire(blocking=False)
            errors = sorted(map(str, lock.errors.values()))
            print(json.dumps({"granted": granted, "errors": errors}))
            if granted:
                await lock.release()

    asyncio.run(main())
    """
)


async def test_a_new_process_is_not_granted(redis_nodes: RedisNodes) -> None:
    # Schedule 1 with a real newcomer: a child process, started after the restart.
    async with Redlock(redis_nodes.urls) as p1:
        end, _ = await _held_on_a_and_b(p1, redis_nodes, ttl=4.0)
        loop = asyncio.get_running_loop()
        runs = 0
        while loop.time() < end - 1.5:
            child = await asyncio.create_subprocess_exec(
                sys.executable, "-c", _NEWCOMER, *redis_nodes.urls, stdout=subprocess.PIPE
            )
            out, _ = await child.communicate()
            assert child.returncode == 0
            result = json.loads(out)
            assert not result["granted"], result
            runs += 1
        assert runs >= 1


async def _all_three_vote_yes(redlock: Redlock, prefix: str, ttl: float = 5.0) -> list[str]:
    """Take and release fresh names until a grant has all three yes votes (B's
    too); return every error seen on the way. Connections to the restarted node
    may fail at first, and a census may miss it once on a busy machine: each
    costs a vote, and the next attempt asks again."""
    seen: list[str] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 8.0  # a stale view's record lives 2.5 s: liveness, not speed
    attempt = 0
    while loop.time() < deadline:
        attempt += 1
        lock = redlock.lock(f"{prefix}{attempt}", ttl=ttl, auto_extend=False)
        assert await lock.acquire(blocking=False)
        assert lock._grant is not None
        replies = lock._grant.acquired.replies
        assert await eventually(lambda: all(r is not PENDING for r in replies))  # noqa: B023
        seen += [str(reply) for reply in replies if not is_yes(reply)]
        await lock.release()
        if all(is_yes(reply) for reply in replies):
            return seen
        await asyncio.sleep(0.05)
    raise AssertionError(f"B never voted yes again: {seen}")


async def test_nothing_locked_lately_costs_nothing_after_a_restart(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    b = redis_nodes[1]
    p1 = make_redlock()
    brief = p1.lock("job", ttl=0.2, auto_extend=False)
    assert await brief.acquire()
    await brief.release()
    await asyncio.sleep(2.6)  # its record (1.25 x max(ttl, 2 s)) has expired
    _restart_empty(b)
    # A newcomer is granted at once, and B's vote counts: never quarantined.
    p3 = make_redlock()
    errors = await _all_three_vote_yes(p3, "new")
    assert not any("quarantined" in error for error in errors), errors
    assert p3._core.epochs.count >= 1  # one before its first grant (more if B was missed)
    # P1 learns of B's new epoch from B's STALE answer (or, on the lean
    # driver, from the new run_id of its reconnection). A grant it makes with
    # its old view before that keeps B out for 1.25 x max(ttl, 2 s) - the
    # view holds B's old epoch, and A cannot tell it from a grant B lost: so
    # short grants here.
    await _all_three_vote_yes(p1, "again", ttl=0.2)
    assert p1._core.epochs.count >= 2


@pytest.mark.parametrize("kind", ["rwlock", "semaphore", "multilock"])
async def test_every_kind_of_grant_keeps_the_restarted_node_out(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes, kind: str
) -> None:
    # Grants of every kind raise the record, and a newcomer of any kind heeds it.
    _, b, c = redis_nodes
    c.kill()
    p1 = make_redlock()
    loop = asyncio.get_running_loop()
    started = loop.time()
    if kind == "rwlock":
        first: object = p1.rwlock("job", ttl=3.0, auto_extend=False).write()
    elif kind == "semaphore":
        first = p1.semaphore("job", 1, ttl=3.0, auto_extend=False)
    else:
        first = p1.multilock(["job", "job2"], ttl=3.0, auto_extend=False)
    assert await first.acquire(timeout=5.0)  # type: ignore[attr-defined]
    _restart_empty(b)
    c.restart()
    p3 = make_redlock()
    if kind == "rwlock":
        second: object = p3.rwlock("job", ttl=3.0, auto_extend=False).read()
    elif kind == "semaphore":
        second = p3.semaphore("job", 1, ttl=3.0, auto_extend=False)
    else:
        second = p3.multilock(["job2", "job3"], ttl=3.0, auto_extend=False)
    assert await _refused_until(second, started + 3.0) >= 3


async def test_a_flushed_node_is_kept_out_like_a_restarted_one(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # FLUSHALL loses the data without a restart (no new run_id, no new
    # connection): the epoch goes with it, so every process sees the loss.
    _, b, c = redis_nodes
    c.kill()
    p1 = make_redlock()
    loop = asyncio.get_running_loop()
    started = loop.time()
    held = p1.lock("job", ttl=6.0, auto_extend=False)
    assert await held.acquire(timeout=5.0)
    b.client().flushall()
    c.restart()
    p2 = make_redlock()
    for contender, until in ((p1, 3.0), (p2, 6.0)):  # the holder's own Redlock, a newcomer
        lock = contender.lock("job", ttl=3.0, auto_extend=False)
        assert await _refused_until(lock, started + until) >= 2


async def test_a_census_gives_a_new_epoch_to_another_server(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # A restart from disk, or a promoted replica: the data (the epoch with it)
    # is there, but the server is another one, which may lack the last
    # writes. The census makes a new epoch, and drops the old one's records.
    b = redis_nodes[1]
    p1 = make_redlock()
    lock = p1.lock("job", ttl=3.0, auto_extend=False)
    assert await lock.acquire()
    await lock.release()
    direct = b.client()
    before = direct.hget("redlock:~epoch", "id")
    records = direct.keys("redlock:~epoch:*")
    assert before
    assert records
    direct.hset("redlock:~epoch", "run", "0" * 40)  # as if another server made it
    p2 = make_redlock()
    assert await p2.lock("other", ttl=3.0, auto_extend=False).acquire(blocking=False)
    after = direct.hget("redlock:~epoch", "id")
    assert after
    assert after != before
    assert not any(direct.exists(record) for record in records)
    # The old epoch's view keeps B out for p2 (B may lack what it held), and
    # p1, whose view holds B's old epoch, gets STALE from B: no yes counts.
    epochs = p2._core.epochs
    assert isinstance(epochs, Epochs)  # one view: no Redis Cluster node here
    assert epochs.ids[1] == after
