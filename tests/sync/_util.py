"""Waits for the sync tests: liveness bounds, not speed requirements."""

from __future__ import annotations

import time
from collections.abc import Callable

from redlock_async.testing import RedisNodes

from ..conftest import lock_keys


def eventually(check: Callable[[], bool], within: float = 15.0) -> bool:
    """True once ``check()`` holds (a liveness bound, not a speed requirement)."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def no_keys_left(nodes: RedisNodes) -> bool:
    """No key but fencing counters (kept on purpose, docs/keys.md) on any node."""

    def clean() -> bool:
        return all(key.endswith(b":fence") for keys in lock_keys(nodes) for key in keys)

    return eventually(clean)
