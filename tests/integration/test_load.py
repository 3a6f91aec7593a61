"""Under load, no collapse: a burst larger than the nodes answer in node_timeout is all granted.

Before votes timed out by node silence (``Tally.expire``) and attempts were
admitted in bounded numbers (``_engine/_admission.py``), a burst of 5,000
one-shot acquires on free names granted about half, and 10,000 none: every
vote was timed from the fan-out, so the client's own queue failed healthy
nodes. How long a burst takes is a benchmark's business
(benchmarks/burst.py); here, only that nothing is refused or lost.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from redlock_async.testing import RedisNodes

from ..conftest import MakeRedlock, no_keys_left

# Big enough that the nodes need several times node_timeout to answer it all
# on these machines (the lean driver answers ~30,000 attempts a second here;
# redis-py ~1,000, so it gets fewer).
BURST = {"resp": 4000, "redis-py": 600}


async def test_a_burst_of_one_shot_acquires_is_all_granted_and_all_released(
    make_redlock: MakeRedlock,
    redis_nodes: RedisNodes,
    driver: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    redlock = make_redlock()  # node_timeout: 0.05 s (lean driver), 0.25 s (redis-py)
    n = BURST[driver]
    # Connected first: a cold connection's connect and handshake count as the
    # node's silence (a node that cannot be reached must cost its vote), and
    # through the test proxy on a busy machine they can outlast node_timeout.
    warm = redlock.lock("burst:warm", auto_extend=False)
    assert await warm.acquire()
    await warm.release()
    locks = [redlock.lock(f"burst:{i}", ttl=60.0, auto_extend=False) for i in range(n)]
    with caplog.at_level(logging.WARNING, logger="redlock_async"):
        granted = await asyncio.gather(*(lock.acquire(blocking=False) for lock in locks))
        refused = [lock.errors for lock, ok in zip(locks, granted, strict=True) if not ok]
        assert not refused, f"{len(refused)} of {n} refused, e.g. {refused[0]}"
        await asyncio.gather(*(lock.release() for lock in locks))
    assert not caplog.records  # no "release not confirmed by a quorum"
    assert redlock._core.admission.waiting == 0
    assert await no_keys_left(redis_nodes)
