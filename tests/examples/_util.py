"""Helpers for the framework examples' tests."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import redis

from redlock_async.testing import RedisNode


class Gate:
    """Holds a handler inside its critical section until the test lets it go."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.proceed = asyncio.Event()

    async def wait_here(self) -> None:
        self.entered.set()
        await self.proceed.wait()


class Inspector:
    """One direct connection per node, to count the clients each node serves."""

    def __init__(self, nodes: Sequence[RedisNode]) -> None:
        self._clients: list[redis.Redis] = [node.client() for node in nodes]

    def connections(self) -> list[int]:
        """Clients connected to each node, this inspector's own included."""
        return [len(client.client_list()) for client in self._clients]

    def describe(self) -> str:
        """Every node's CLIENT LIST, for a failure message."""
        return "\n".join(
            f"node {i}: {client.client_list()}" for i, client in enumerate(self._clients)
        )


# Waiting for a handler to reach its gate, or for a node to drop closed
# connections: liveness bounds, not speed requirements.
LIVENESS = 30.0
