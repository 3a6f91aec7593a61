"""Busy or unavailable, against real nodes through both drivers.

A web handler answers 409 for :class:`LockBusy` and 503 for
:class:`QuorumUnavailable`: the split must hold with real failures - dead
processes, refused connections - not only with scripted votes.
"""

from __future__ import annotations

import re

import pytest

from redlock_async import LockBusy, LockNotAcquired, NodeError, QuorumUnavailable, Redlock
from redlock_async.testing import RedisNodes

from ..conftest import MakeRedlock


async def refusal(redlock: Redlock, name: str = "job") -> LockNotAcquired:
    with pytest.raises(LockNotAcquired) as raised:
        async with redlock.lock(name, timeout=0):
            pytest.fail("entered the body without the lock")
    return raised.value


async def test_held_elsewhere_is_busy(make_redlock: MakeRedlock) -> None:
    holder, other = make_redlock(), make_redlock()
    async with holder.lock("job"):
        error = await refusal(other)
    assert type(error) is LockBusy
    assert re.search(r"held elsewhere: [23] of 3 nodes refused", str(error)), error
    assert dict(error.errors) == {}


async def test_held_elsewhere_with_one_node_dead_is_still_busy(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    holder, other = make_redlock(), make_redlock()
    async with holder.lock("job"):
        redis_nodes[1].kill()
        for _ in range(3):  # whichever node's answer decides first
            error = await refusal(other)
            assert type(error) is LockBusy, error
            assert len(error.errors) <= 1


@pytest.mark.redis_nodes(3)
async def test_two_dead_nodes_of_three_is_unavailable(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    redlock = make_redlock()
    redis_nodes[0].kill()
    redis_nodes[2].kill()
    error = await refusal(redlock)
    assert type(error) is QuorumUnavailable
    assert len(error.errors) == 2
    assert "too few nodes answered" in str(error)
    for node_error in error.errors.values():
        assert isinstance(node_error, NodeError)


async def test_held_elsewhere_with_two_dead_nodes_is_unavailable(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    holder, other = make_redlock(), make_redlock()
    async with holder.lock("job", auto_extend=False, ttl=30.0):
        redis_nodes[0].kill()
        redis_nodes[1].kill()
        error = await refusal(other)
    # One node refused, but two of three failing leave nothing to decide with.
    assert type(error) is QuorumUnavailable


async def test_a_refused_connection_keeps_the_drivers_exception_as_cause(
    driver: str, make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    for node in redis_nodes:
        node.server.kill()  # the proxies stay: connections are accepted, then cut
    redlock = make_redlock()
    error = await refusal(redlock)
    assert type(error) is QuorumUnavailable
    causes = [node_error.__cause__ for node_error in error.errors.values()]
    assert causes, error
    assert all(cause is not None for cause in causes), (driver, error.errors)
    # The driver's own exception (OSError, redis.exceptions.ConnectionError), not ours.
    assert not any(isinstance(cause, NodeError) for cause in causes), causes
