"""``extend()`` while no quorum answers: it returns within V, the lock still held (issue 38).

Real nodes, both drivers and both loops. It used to retry until the grant's
validity ended - a whole ttl's worth of waiting - and then declare the lock
lost. Now, by default, one try: QuorumUnavailable while the grant is still
valid, the lock held and not lost, and its background renewal goes on, so
that it outlives the outage once the nodes are back. How long the call
takes is measured by ``benchmarks/extend_outage.py``, not asserted here.
"""

from __future__ import annotations

import asyncio

import pytest

from redlock_async import Lock, LockLost, QuorumUnavailable
from redlock_async.testing import RedisNode, RedisNodes

from ..conftest import MakeRedlock, eventually

KEY = b"redlock:{job}"

# What a majority of nodes suffers, and how it recovers with its data kept:
# paused (SIGSTOP: connections stay open, nothing is answered) or refusing
# connections (down, as seen from the client).
FAULTS = {
    "pause": (RedisNode.pause, RedisNode.resume),
    "refuse": (RedisNode.refuse, RedisNode.heal),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
async def test_an_unconfirmed_extend_keeps_the_lock_and_its_renewal(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes, fault: str
) -> None:
    redlock = make_redlock()
    told: list[Lock] = []
    lock = redlock.lock("job", ttl=3.0, on_lost=told.append)
    assert await lock.acquire()
    start, recover = FAULTS[fault]
    majority = redis_nodes[:2]
    try:
        for node in majority:
            start(node)
        with pytest.raises(QuorumUnavailable, match="still held") as caught:
            await lock.extend()
        assert len(caught.value.errors) >= 2  # the majority's, named
        assert lock.held
        assert not lock.lost
        # The renewal goes on meanwhile, failing as the extend did.
        await asyncio.sleep(0.5)
        assert lock.held
        assert not lock.lost
    finally:
        for node in majority:
            recover(node)
    # Renewed once the nodes are back: held past the validity it had.
    await asyncio.sleep(4.0)
    assert lock.held
    assert not lock.lost
    assert told == []
    # On a quorum at least: a node reconnecting late may have let its copy expire.
    assert sum(node.client().pttl(KEY) > 0 for node in redis_nodes) >= 2
    await lock.extend(timeout=5.0)  # confirmed again (retried while a node reconnects)
    await lock.release()


async def test_an_unconfirmed_extend_is_lost_only_when_its_renewal_cannot_keep_it(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    redlock = make_redlock()
    told: list[Lock] = []
    lock = redlock.lock("job", ttl=1.5, on_lost=told.append)
    assert await lock.acquire()
    for node in redis_nodes[:2]:
        node.kill()  # for good, with their data
    with pytest.raises(QuorumUnavailable):
        await lock.extend()
    assert lock.held
    assert not lock.lost
    assert told == []
    # The renewal retries until the validity ends, then tells the holder,
    # with the nodes' errors (not as if the event loop had been blocked).
    assert await eventually(lambda: lock.lost, within=10.0)
    assert told == [lock]
    assert not lock.held
    with pytest.raises(LockLost, match="could not reach a quorum"):
        await lock.extend()


async def test_extend_with_a_timeout_keeps_trying_until_the_nodes_are_back(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    redlock = make_redlock()
    lock = redlock.lock("job", ttl=5.0, auto_extend=False)
    assert await lock.acquire()
    majority = redis_nodes[:2]
    for node in majority:
        node.refuse()
    loop = asyncio.get_running_loop()
    handles = [loop.call_later(0.5, node.heal) for node in majority]
    try:
        await lock.extend(ttl=8.0, timeout=4.0)  # confirmed once they are back
    finally:
        for handle in handles:
            handle.cancel()
        for node in majority:
            node.heal()
    assert lock.ttl == 8.0
    assert lock.held
    await lock.release()
