"""Who holds a lock (issue 26): ``Redlock.holder()`` and the holder info in tokens,
against real nodes through both drivers."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from redlock_async import Holder, LockNotOwned, QuorumUnavailable, Redlock
from redlock_async.testing import RedisNodes

from ..conftest import MakeRedlock, eventually, lock_keys, no_keys_left, settle

HOST = socket.gethostname()


def since_of(token: str | None) -> float:
    """The grant time a token carries (its last field, ms)."""
    assert token is not None
    return int(token.rsplit(":", 1)[1]) / 1000


def assert_ours(who: Holder | None, kind: str, token: str | None, ttl: float) -> Holder:
    assert who is not None
    assert (who.host, who.pid, who.kind) == (HOST, os.getpid(), kind)
    assert who.since == since_of(token)
    assert 0 < who.ttl <= ttl
    return who


async def test_a_plain_lock_names_its_host_pid_and_grant_time(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    taker, observer = make_redlock(), make_redlock()
    assert await observer.holder("job") is None  # never held
    before = time.time()
    async with taker.lock("job", ttl=10.0) as lock:
        after = time.time()
        token = lock.token
        assert token is not None
        assert re.fullmatch(r"[0-9a-f]{40}@.+:[0-9]+:[0-9]+", token)
        assert token.startswith(token[:40] + "@" + HOST + f":{os.getpid()}:")
        who = assert_ours(await observer.holder("job"), "exclusive", token, 10.0)
        assert who.since is not None
        assert before - 0.002 <= who.since <= after + 0.002  # ms precision
        assert who.readers == 0
        # The record is the token itself: one key per node, nothing beside it.
        assert await eventually(lambda: lock_keys(redis_nodes) == [[b"redlock:{job}"]] * 3)
    assert await observer.holder("job") is None  # released: free
    assert await no_keys_left(redis_nodes)


async def test_a_write_lock_and_a_multilocks_names(
    redlock: Redlock, redis_nodes: RedisNodes
) -> None:
    async with redlock.rwlock("report").write(ttl=10.0) as writer:
        assert_ours(await redlock.holder("report"), "write", writer.token, 10.0)
    assert await redlock.holder("report") is None
    async with redlock.multilock(["a", "b"], ttl=10.0) as multi:
        assert multi.token is not None
        assert multi.token.startswith("m:")
        for name in ("a", "b"):
            assert_ours(await redlock.holder(name), "multilock", multi.token, 10.0)
        assert await redlock.holder("c") is None
    for name in ("a", "b"):
        assert await redlock.holder(name) is None
    assert await no_keys_left(redis_nodes)


async def test_readers_show_the_longest_held_one(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    first, second = make_redlock(), make_redlock()
    async with first.rwlock("report").read(ttl=10.0) as early:
        await asyncio.sleep(0.02)  # a later grant time, in whole ms
        async with second.rwlock("report").read(ttl=20.0) as late:
            assert since_of(late.token) > since_of(early.token)
            who = assert_ours(await first.holder("report"), "read", early.token, 10.0)
            assert who.readers == 2
        who = assert_ours(await second.holder("report"), "read", early.token, 10.0)
        assert who.readers == 1
    assert await first.holder("report") is None
    assert await no_keys_left(redis_nodes)


async def test_semaphore_slots_carry_their_holders_but_holder_does_not_read_them(
    redlock: Redlock, redis_nodes: RedisNodes
) -> None:
    async with (
        redlock.semaphore("exports", limit=3, ttl=10.0) as one,
        redlock.semaphore("exports", limit=3, ttl=10.0) as two,
    ):
        # The number of slots is the semaphore's limit, which only its holders know.
        assert await redlock.holder("exports") is None
        tokens = {str(one.token).encode(), str(two.token).encode()}

        def slots_hold_the_grants() -> bool:
            client = redis_nodes[0].client()
            slots = [key for key in lock_keys(redis_nodes)[0] if b":sem:" in key]
            return {client.get(key) for key in slots} == tokens

        assert await eventually(slots_hold_the_grants)
        for token in (one.token, two.token):
            assert str(token).split("@")[1].startswith(f"{HOST}:{os.getpid()}:")
    assert await no_keys_left(redis_nodes)


async def test_without_holder_info_tokens_are_bare_and_the_holder_is_unnamed(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    quiet = make_redlock(holder_info=False)
    assert quiet.config.holder_info is False
    async with quiet.lock("job", ttl=10.0) as lock:
        assert lock.token is not None
        assert re.fullmatch(r"[0-9a-f]{40}", lock.token)
        who = await make_redlock().holder("job")
        assert who is not None
        assert (who.host, who.pid, who.since, who.kind) == (None, None, None, "exclusive")
        assert 0 < who.ttl <= 10.0
    assert await quiet.holder("job") is None
    assert await no_keys_left(redis_nodes)


async def test_renewal_keeps_the_holder_and_expiry_takes_it_away(
    redlock: Redlock, redis_nodes: RedisNodes
) -> None:
    async with redlock.lock("job", ttl=0.4) as lock:
        first = await redlock.holder("job")
        await asyncio.sleep(1.0)  # past two ttls: alive by renewal only
        assert lock.held
        again = assert_ours(await redlock.holder("job"), "exclusive", lock.token, 0.4)
        assert first is not None
        assert again.since == first.since  # renewals keep the grant's time
    assert await no_keys_left(redis_nodes)
    crashed = redlock.lock("job", ttl=0.3, auto_extend=False)
    assert await crashed.acquire()
    assert await redlock.holder("job") is not None
    # Never released, as by a crashed holder: the record expires with the grant.
    assert await eventually(lambda: not any(lock_keys(redis_nodes)))
    assert await redlock.holder("job") is None
    with pytest.raises(LockNotOwned):
        await crashed.release()


async def test_a_minority_leftover_is_not_a_holder(
    redlock: Redlock, redis_nodes: RedisNodes
) -> None:
    redis_nodes[0].client().set(b"redlock:{job}", b"f" * 40 + b"@elsewhere:1:2", px=10_000)
    assert await redlock.holder("job") is None
    lock = redlock.lock("taken", auto_extend=False)
    assert await lock.acquire()
    assert await redlock.holder("taken") is not None
    await settle(0.05)
    for node in redis_nodes[1:]:
        node.client().delete(b"redlock:{taken}")  # lost on two of three
    assert await redlock.holder("taken") is None
    for node in redis_nodes:
        node.client().delete(b"redlock:{job}", b"redlock:{taken}")


async def test_an_adopted_grant_still_names_its_taker(make_redlock: MakeRedlock) -> None:
    taker, worker = make_redlock(), make_redlock()
    lock = taker.lock("job", ttl=10.0, auto_extend=False)
    assert await lock.acquire()
    adopted = await worker.adopt("job", str(lock.token), ttl=10.0, auto_extend=False)
    assert_ours(await worker.holder("job"), "exclusive", lock.token, 10.0)
    await adopted.release()


async def test_too_few_nodes_is_unavailable(redlock: Redlock, redis_nodes: RedisNodes) -> None:
    redis_nodes[0].kill()
    redis_nodes[1].kill()
    with pytest.raises(QuorumUnavailable, match="too few nodes answered") as raised:
        await redlock.holder("job")
    assert len(raised.value.errors) == 2
    # The node that answered is named as such (issue 38), the others as failed.
    failed = ", ".join(redlock.nodes[:2])
    said = f"1 of 3 nodes answered ({redlock.nodes[2]}), 2 failed ({failed}); 2 needed"
    assert said in str(raised.value), raised.value


async def test_a_forked_child_writes_its_own_pid(
    driver: str, redlock: Redlock, redis_nodes: RedisNodes
) -> None:
    if driver != "resp":
        pytest.skip("the child process uses URLs: one driver suffices")
    # The parent takes a grant first, so its pid is cached before the fork.
    async with redlock.lock("parent") as lock:
        assert_ours(await redlock.holder("parent"), "exclusive", lock.token, 30.0)
    child = textwrap.dedent(
        """
        import asyncio, os, sys
        from redlock_async import Redlock

        redlock = Redlock(sys.argv[1].split(","))

        async def take(name):
            async with redlock.lock(name, ttl=10.0) as lock:
                who = await redlock.holder(name)
                print(name, who.pid, lock.token.split(":")[-2])

        asyncio.run(take("parent"))
        sys.stdout.flush()  # or the child would print the parent's lines again
        pid = os.fork()
        if pid == 0:
            asyncio.run(take("child"))
            sys.stdout.flush()
            os._exit(0)
        os.waitpid(pid, 0)
        print("forked", pid)
        """
    )
    urls = ",".join(node.url for node in redis_nodes)
    result = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", child, urls],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    parent, child_pid = lines["parent"].split(), lines["forked"]
    assert parent[0] == parent[1] != child_pid
    assert lines["child"].split() == [child_pid, child_pid]
    assert await no_keys_left(redis_nodes)
