"""A node's clock: true time through a rate and an offset, as a machine's clock drifts."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["Clock"]


class Clock:
    """A node's clock in ms: true time (``true_ms()``) at ``rate``, plus ``offset``.

    The rate can change while it runs (``set_rate``): the clock goes on from
    where it is, never jumps. ``step`` jumps it (an operator or NTP setting it).
    """

    def __init__(self, true_ms: Callable[[], float], *, rate: float = 1.0, offset: int = 0) -> None:
        self.true_ms = true_ms
        self.rate = rate
        self._anchor = true_ms()
        self._base = self._anchor + offset

    def __call__(self) -> int:
        return int(self._base + (self.true_ms() - self._anchor) * self.rate)

    def set_rate(self, rate: float) -> None:
        now = self.true_ms()
        self._base += (now - self._anchor) * self.rate
        self._anchor = now
        self.rate = rate

    def step(self, ms: int) -> None:
        self._base += ms
