"""Fencing tokens that stay monotonic across the quorum, against real nodes."""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest

from redlock_async import Redlock
from redlock_async.testing import RedisNodes

from ..conftest import MakeRedlock

FENCE = b"redlock:{job}:fence"

# The protected resource: accepts a write only with a token at least as high
# as the highest it has seen (a fenced storage service, in a few lines of Lua).
FENCED_WRITE = """
local last = tonumber(redis.call('HGET', KEYS[1], 'token') or '0')
local token = tonumber(ARGV[1])
if token < last then
    return 0
end
redis.call('HSET', KEYS[1], 'token', token, 'value', ARGV[2])
redis.call('RPUSH', KEYS[2], ARGV[2])
return 1
"""


async def test_tokens_rise_over_sequential_grants(redlock: Redlock) -> None:
    tokens = []
    for _ in range(10):
        async with redlock.lock("job", ttl=5.0, fencing=True) as lock:
            assert isinstance(lock.fencing_token, int)
            tokens.append(lock.fencing_token)
        assert lock.fencing_token is None  # not held any more
    assert tokens == sorted(set(tokens))
    assert tokens[0] >= 1


async def test_tokens_rise_in_grant_order_under_concurrency(make_redlock: MakeRedlock) -> None:
    redlocks = [make_redlock(retry_delay=0.005, retry_jitter=0.01) for _ in range(2)]
    grants: list[tuple[float, int]] = []

    async def worker(index: int) -> None:
        for _ in range(6):
            async with redlocks[index % 2].lock("job", ttl=5.0, fencing=True) as lock:
                assert lock.fencing_token is not None
                grants.append((time.monotonic(), lock.fencing_token))
                await asyncio.sleep(0.001)

    await asyncio.gather(*(worker(i) for i in range(8)))
    tokens = [token for _, token in sorted(grants)]
    assert len(tokens) == 48
    assert all(a < b for a, b in itertools.pairwise(tokens)), tokens


async def test_a_counter_that_raced_ahead_cannot_lower_the_next_token(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    """The case that breaks a naive max-of-INCR: a minority's high counter lends
    its value to one grant and then leaves; the next grant must still be higher."""
    redlock = make_redlock()
    a, b, c = redis_nodes
    async with redlock.lock("job", ttl=5.0, fencing=True) as lock:
        baseline = lock.fencing_token
    assert baseline is not None
    # Node c raced ahead while the others were away (far past any clock floor).
    c.client().set(FENCE, baseline + 10**12)
    b.kill()  # the grant must come from {a, c}
    async with redlock.lock("job", ttl=5.0, fencing=True) as lock:
        high = lock.fencing_token
    assert high is not None
    # +1 per attempt on c: a retry under load (a vote that timed out) adds one more.
    assert baseline + 10**12 < high <= baseline + 10**12 + 5
    assert int(a.client().get(FENCE) or 0) >= high  # written back
    b.restart()  # empty: its counter is gone
    b.client().set(FENCE, baseline)
    c.kill()  # the node that lent the high value leaves
    async with redlock.lock("job", ttl=5.0, fencing=True) as lock:
        assert lock.fencing_token is not None
        assert lock.fencing_token > high


async def test_write_locks_of_an_rwlock_are_fenced(redlock: Redlock) -> None:
    rw = redlock.rwlock("job")
    tokens = []
    for _ in range(3):
        async with rw.write(ttl=5.0, fencing=True) as writer:
            assert writer.fencing_token is not None
            tokens.append(writer.fencing_token)
        async with rw.read(ttl=5.0) as reader:
            assert reader.fencing_token is None
    assert tokens == sorted(set(tokens))


@pytest.mark.redis_nodes(4)
async def test_a_paused_holder_cannot_clobber_the_resource(redis_nodes: RedisNodes) -> None:
    """Holder A stalls past its validity, B takes the lock and writes; A's late
    write carries an older token and the resource rejects it. No update lost."""
    lock_nodes, resource_node = redis_nodes[:3], redis_nodes[3]
    resource = resource_node.client()
    write = resource.register_script(FENCED_WRITE)
    async with (
        Redlock([n.url for n in lock_nodes]) as a_side,
        Redlock([n.url for n in lock_nodes]) as b_side,
    ):
        a = a_side.lock("job", ttl=0.3, fencing=True, auto_extend=False)
        assert await a.acquire()
        token_a = a.fencing_token
        await asyncio.sleep(0.4)  # A is "paused": its lease runs out meanwhile
        assert not a.held
        b = b_side.lock("job", ttl=5.0, fencing=True)
        assert await b.acquire(timeout=5.0)
        assert b.fencing_token is not None
        assert token_a is not None
        assert b.fencing_token > token_a
        assert write(keys=["doc", "log"], args=[b.fencing_token, "from B"]) == 1
        # A wakes up and, unaware, writes with its stale token: rejected.
        assert write(keys=["doc", "log"], args=[token_a, "from A (stale)"]) == 0
        await b.release()
    assert resource.lrange("log", 0, -1) == [b"from B"]
    assert resource.hget("doc", "value") == b"from B"


async def test_tokens_rise_when_the_nodes_of_earlier_grants_lose_their_data_in_turn(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    """The outside review's schedule: at most one node down at a time, yet every
    node of the quorum that saw the latest token forgets it, one after another.

    A plain counter restarts at 0 on the node that lost its data, and the next
    grant got token 2 after tokens up to 5. Counters floored by the node's
    clock resume above every earlier token (docs/fencing.md).
    """
    a, b, c = redis_nodes
    redlock = make_redlock(retry_delay=0.05, retry_jitter=0.05)
    tokens: list[int | None] = []
    async with redlock.lock("job", ttl=1.0, fencing=True) as lock:  # on a, b, c
        tokens.append(lock.fencing_token)
    c.refuse()  # c is down, with its data
    for _ in range(4):  # on a and b
        async with redlock.lock("job", ttl=1.0, fencing=True) as lock:
            tokens.append(lock.fencing_token)
    c.heal()  # c is back, its counter as it was after the first grant
    a.restart()  # a comes back empty: its counter is gone
    b.kill()  # and b, the last node that saw the latest token, goes down
    # Wait out a's quarantine without asking (attempts during it would bump
    # the counters), then the grant comes from {a, c}.
    await asyncio.sleep(2.5)
    async with redlock.lock("job", ttl=1.0, fencing=True, timeout=15.0) as lock:
        tokens.append(lock.fencing_token)
    ints = [token for token in tokens if isinstance(token, int)]
    assert len(ints) == len(tokens) == 6
    assert ints == sorted(ints), ints
    assert len(set(ints)) == len(ints), ints
