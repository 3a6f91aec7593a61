"""The library on uvloop, the loop ``uvicorn[standard]`` runs apps on (issue 14).

The whole suite runs on uvloop too (``[uvloop]`` ids, see conftest.py); these
name the failure: every lean-driver and wake-up connection used to fail at
once there (``connection_made`` checked for asyncio's own transport class),
so every node answered nothing and a blocking ``acquire()`` retried forever.
"""

from __future__ import annotations

import asyncio

import pytest

from redlock_async.testing import RedisNodes

from .. import _loops
from ..conftest import MakeRedlock, eventually, no_keys_left
from .test_wake import subscribers

KEY = b"redlock:{job}"

pytestmark = pytest.mark.asyncio(loop_factories=["uvloop"])


async def test_acquire_and_release_work_on_uvloop(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    assert _loops.name_of(asyncio.get_running_loop()) == "uvloop"
    redlock = make_redlock()
    lock = redlock.lock("job", ttl=10.0)
    # Bounded: the old code never got a vote here and retried until the timeout.
    assert await lock.acquire(timeout=5.0)
    assert lock.held
    assert lock.errors == {}
    assert lock._grant is not None
    token = lock._grant.token
    assert await eventually(lambda: [node.client().get(KEY) for node in redis_nodes] == [token] * 3)
    await lock.release()
    assert await no_keys_left(redis_nodes)


async def test_a_waiter_is_woken_by_the_release_on_uvloop(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # A retry delay far longer than the test: only a wake-up hands over in time.
    redlock = make_redlock(retry_delay=60.0, retry_jitter=0.0)
    holder = redlock.lock("job", ttl=10.0)
    assert await holder.acquire(timeout=5.0)
    waiter = asyncio.ensure_future(redlock.lock("job", ttl=10.0).acquire(timeout=50.0))
    assert await eventually(lambda: subscribers(redis_nodes) == [1, 1, 1])
    await holder.release()
    assert await asyncio.wait_for(waiter, 30.0)
