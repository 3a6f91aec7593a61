"""The hand-over through the sync API: closing the taker leaves the adopter its grant.

A Django view or a cron script takes a lock with ``auto_extend=False``,
passes ``lock.token`` to a worker, which adopts it, and exits: the sync
``close()`` (or the ``with`` block's end) must not delete the worker's keys.
"""

from __future__ import annotations

from redlock_async._base._keys import KeyLayout
from redlock_async.sync import Redlock
from redlock_async.testing import RedisNodes

JOB = KeyLayout("redlock:", "job").lock


def test_closing_the_sync_taker_leaves_the_adopted_grant(redis_nodes: RedisNodes) -> None:
    worker = Redlock(redis_nodes.urls)
    third = Redlock(redis_nodes.urls)
    try:
        with Redlock(redis_nodes.urls) as taker:
            job = taker.lock("job", ttl=30.0, auto_extend=False)
            assert job.acquire()
            token = job.token
            assert token is not None
            adopted = worker.adopt("job", token, ttl=30.0)
        # The taker's Redlock is closed: its grant was handed on, so kept.
        assert job.lost
        assert adopted.held
        holding = sum(node.client().get(JOB) == token.encode() for node in redis_nodes)
        assert holding >= 2  # a quorum of the three keeps the adopter's grant
        assert not third.lock("job", ttl=5.0).acquire(blocking=False)
        adopted.release()
        assert third.lock("job", ttl=5.0).acquire(blocking=False)
    finally:
        third.close()
        worker.close()


def test_closing_a_sync_holder_releases_a_grant_never_handed_on(redis_nodes: RedisNodes) -> None:
    with Redlock(redis_nodes.urls) as other:
        with Redlock(redis_nodes.urls) as holder:
            job = holder.lock("job", ttl=30.0)
            assert job.acquire()
        assert job.lost
        assert other.lock("job", ttl=5.0).acquire(blocking=False)
