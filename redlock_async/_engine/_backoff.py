"""Backoff: how long to wait before trying a failing node again.

One rule for every retry loop of the engine: the delay starts at ``first``,
doubles with each failure in a row up to ``cap``, and is scaled by a random
factor drawn from ``spread`` (so that processes that failed together do not
retry together); a success resets it. The jitter comes from the random
source of the world the backoff was made in (``_world.py``).
"""

from __future__ import annotations

from .._base._world import current

__all__ = ["Backoff"]


class Backoff:
    """Delays that double with each failure in a row, up to a cap, with jitter.

    ``fail()`` records one more failure and returns the delay to wait before
    the next try; ``delay`` is that delay until ``reset()`` (0.0: not failing).
    ``spread`` ``(1.0, 1.0)`` gives exact doubling, no jitter.
    """

    __slots__ = ("_base", "_uniform", "cap", "delay", "first", "spread")

    def __init__(self, first: float, cap: float, spread: tuple[float, float] = (1.0, 1.0)) -> None:
        self.first = first
        self.cap = cap
        self.spread = spread
        self._base = 0.0  # the un-jittered delay of the last failure (0.0: none)
        self.delay = 0.0
        self._uniform = current().rng.uniform

    def fail(self) -> float:
        """One more failure in a row: the (jittered) delay before the next try."""
        self._base = min(self._base * 2, self.cap) if self._base else self.first
        low, high = self.spread
        self.delay = self._base * (self._uniform(low, high) if low != high else low)
        return self.delay

    def reset(self) -> None:
        """A success: the next failure waits ``first`` again."""
        self._base = self.delay = 0.0
