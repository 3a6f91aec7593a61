"""A release whose connection is killed before the reply is sent again.

Deleting a key only if it still holds our token is safe to resend, so a node
whose connection broke under the release must not keep the key for a ttl.
"""

from __future__ import annotations

import asyncio

from redlock_async.testing import RedisNodes

from ..conftest import MakeRedlock, eventually, lock_keys, no_keys_left


async def test_a_release_whose_connection_is_killed_is_retried(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # node_timeout well above the time the release stays in flight below, so
    # the command to n1 is not abandoned as late before its connection dies.
    redlock = make_redlock(node_timeout=1.0)
    lock = redlock.lock("job", ttl=30.0, auto_extend=False)
    assert await lock.acquire()
    # Held on every node (the decision does not wait for the slowest one).
    assert await eventually(lambda: lock_keys(redis_nodes) == [[b"redlock:{job}"]] * 3)
    n1 = redis_nodes[0]
    n1.blackhole()  # the release to n1 stays in flight, held by the proxy
    try:
        release = asyncio.ensure_future(lock.release())
        await asyncio.sleep(0.2)
        assert lock_keys(redis_nodes)[0] == [b"redlock:{job}"]  # n1 has not seen it
        # Its connection dies before any reply: the held command is lost with it.
        assert n1.client().client_kill_filter(_type="normal") >= 1
    finally:
        n1.heal()
    await release  # n2 and n3 are a quorum: the release itself succeeds
    # Resent once the connection is back, the release removes n1's key too,
    # long before its 30 s ttl would.
    assert await no_keys_left(redis_nodes, within=5.0), lock_keys(redis_nodes)
