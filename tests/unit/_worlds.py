"""A made-up :class:`~redlock_async._base._world.World` for tests: fixed clocks,
seeded randomness, a fixed host and pid, and no name resolution."""

from __future__ import annotations

import random
from typing import Any

from redlock_async._base._world import World

__all__ = ["made_world"]


def _no_resolver(*args: Any, **kwargs: Any) -> list[tuple[Any, ...]]:
    raise OSError("this world resolves no host names")


def made_world(seed: int = 0, **fields: Any) -> World:
    """A world at monotonic 1000.0 and wall 1,700,000,000.123 s, host ``sim-host``,
    pid 4242, random bytes and jitter from ``random.Random(seed)``; ``fields`` override."""
    rng = random.Random(seed)
    made: dict[str, Any] = {
        "monotonic": lambda: 1000.0,
        "time_ns": lambda: 1_700_000_000_123_000_000,
        "token_bytes": rng.randbytes,
        "rng": rng,
        "hostname": lambda: "sim-host",
        "getpid": lambda: 4242,
        "getaddrinfo": _no_resolver,
    }
    made.update(fields)
    return World(**made)
