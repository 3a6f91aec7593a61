"""Misconfigured node URLs cost a vote or work with a warning, never leave a key.

A password given for a server that has none, and a database the server does
not have: the lean driver pipelines commands behind its handshake, so a
failed AUTH or SELECT used to leave an acquire running on the server (in
database 0, for SELECT) while its reply was thrown away - a grant nobody
released until its ttl ran out.
"""

from __future__ import annotations

import pytest

from redlock_async import QuorumUnavailable, Redlock
from redlock_async.testing import RedisNodes

from ..conftest import eventually, lock_keys, no_keys_left


async def test_a_password_for_a_server_without_one_works_with_a_warning(
    redis_nodes: RedisNodes, caplog: pytest.LogCaptureFixture
) -> None:
    urls = [f"redis://:not-needed-pw@127.0.0.1:{node.port}/0" for node in redis_nodes]
    async with Redlock(urls) as redlock, redlock.lock("job"):
        # Granted once two of three said yes: the third write may land later.
        assert await eventually(lambda: lock_keys(redis_nodes) == [[b"redlock:{job}"]] * 3)
    assert await no_keys_left(redis_nodes)
    warnings = [r.getMessage() for r in caplog.records if "has no password" in r.getMessage()]
    assert warnings
    assert not any("not-needed-pw" in message for message in warnings)


async def test_a_database_the_server_lacks_costs_the_vote_and_leaves_nothing(
    redis_nodes: RedisNodes,
) -> None:
    urls = [f"redis://127.0.0.1:{node.port}/9999" for node in redis_nodes]
    async with Redlock(urls) as redlock:
        with pytest.raises(QuorumUnavailable) as raised:
            async with redlock.lock("job", timeout=0):
                pytest.fail("entered")
    assert len(raised.value.errors) >= 2  # decided once a quorum was out of reach
    assert "SELECT" in str(raised.value)
    assert lock_keys(redis_nodes) == [[]] * 3  # database 0 holds nothing either


async def test_a_user_the_server_lacks_costs_the_vote_and_leaves_nothing(
    redis_nodes: RedisNodes,
) -> None:
    # The default user needs no password, so commands that reached the server
    # behind a refused AUTH would run as it.
    urls = [f"redis://ghost:pw@127.0.0.1:{node.port}/0" for node in redis_nodes]
    async with Redlock(urls) as redlock:
        with pytest.raises(QuorumUnavailable) as raised:
            async with redlock.lock("job", timeout=0):
                pytest.fail("entered")
    assert "AUTH failed" in str(raised.value)
    assert "pw@" not in str(raised.value)
    assert lock_keys(redis_nodes) == [[]] * 3
