"""The longest ttl granted through one Redlock: how long a key it wrote can live.

Cleanups are resent until then where a connection failed (``Engine.undo``,
the semaphore's), and ``aclose()`` drains no longer (``_drain.py``). The
restart rule does not read it: a restart's grants are the census's
(``_epochs.py``), whatever their ttl.
"""

from __future__ import annotations

__all__ = ["TtlLedger"]


class TtlLedger:
    """The longest ttl (seconds) granted through one Redlock, 0 before any."""

    __slots__ = ("longest",)

    def __init__(self) -> None:
        self.longest = 0.0

    def granted(self, ttl: float) -> None:
        if ttl > self.longest:
            self.longest = ttl
