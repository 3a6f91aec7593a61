"""A Redlock's first connections use the addresses it resolved when it was made.

Host names are resolved at construction (``node_identity``, to tell servers
apart); resolving them again for the first connections cost a trip through
the event loop's thread pool per node. The tests name the nodes by a host
name only a patched resolver knows, and patch it only while the Redlock is
made: a connection that resolved the name again could not connect.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import pytest

from redlock_async import LockNotAcquired, Redlock
from redlock_async._base import _address as address
from redlock_async.testing import RedisNodes

NAME = "redlock-test-node"  # resolves nowhere but through the patched resolver


def made_with_name(
    nodes: RedisNodes, monkeypatch: pytest.MonkeyPatch, ips: tuple[str, ...] = ("127.0.0.1",)
) -> Redlock:
    real: Callable[..., Any] = socket.getaddrinfo

    def resolve(host: str, *args: Any, **kwargs: Any) -> Any:
        if host != NAME:
            return real(host, *args, **kwargs)
        return [info for ip in ips for info in real(ip, *args, **kwargs)]

    with monkeypatch.context() as patch:
        patch.setattr(socket, "getaddrinfo", resolve)
        return Redlock([node.url.replace("127.0.0.1", NAME) for node in nodes])


async def test_the_first_connections_use_the_names_resolved_at_construction(
    redis_nodes: RedisNodes, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with made_with_name(redis_nodes, monkeypatch) as redlock:
        lock = redlock.lock("job", ttl=5.0, auto_extend=False)
        assert await lock.acquire(blocking=False)
        await lock.release()


async def test_each_address_of_a_name_is_tried_in_turn(
    redis_nodes: RedisNodes, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As create_connection does with a name: nothing listens on 127.0.0.2.
    async with made_with_name(redis_nodes, monkeypatch, ("127.0.0.2", "127.0.0.1")) as redlock:
        lock = redlock.lock("job", ttl=5.0, auto_extend=False)
        assert await lock.acquire(blocking=False)
        await lock.release()


async def test_later_connections_resolve_the_name_again(
    redis_nodes: RedisNodes, monkeypatch: pytest.MonkeyPatch
) -> None:
    # DNS may move a node: what was resolved at construction serves only the
    # connections made soon after it.
    async with made_with_name(redis_nodes, monkeypatch) as redlock:
        lock = redlock.lock("job", ttl=5.0, auto_extend=False)
        assert await lock.acquire(blocking=False)
        await lock.release()
        monkeypatch.setattr(address, "RESOLVED_FOR", 0.0)
        for node in redis_nodes:
            node.reset_connections()
        # A call that writes before the client has seen the resets fails with
        # "connection lost" instead (seen under load): the calls after it find
        # no connection, make one, and must resolve the name to do so. Were the
        # name still resolved, they would connect, and be granted.
        for _ in range(5):
            with pytest.raises(LockNotAcquired) as raised:
                async with redlock.lock("job", ttl=5.0, timeout=0.5):
                    pass
            errors = [str(error) for error in raised.value.errors.values()]
            if all("cannot connect" in error for error in errors):
                break
        assert all("cannot connect" in error for error in errors), errors
