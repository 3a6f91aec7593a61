"""``aclose()``'s wait for the fan-outs in flight: while the nodes answer, not a fixed time.

Attempts in flight decide and send their cleanups, and the cleanups' replies
come back, before the connections close (closing a connection throws its
unread replies away). A node silent for ``node_timeout`` is not waited for
(``Tally.expire`` drops its votes). While the nodes answer, this waits as
long as they need: the releases of 100,000 locks held when ``aclose()``
began take seconds, and cutting them short at a fixed stall limit left a
third of their keys behind.
"""

from __future__ import annotations

import asyncio

from ._cleanups import Cleanups
from ._quorum import Quorum

__all__ = ["drain"]


async def drain(quorum: Quorum, cleanups: Cleanups, quiet: float, limit: float) -> None:
    """Wait until ``quorum`` is idle and no cleanup is queued; give up once
    nothing has moved for ``quiet`` seconds (a safety net: votes expire long
    before that), or after ``limit``."""
    loop = asyncio.get_running_loop()
    now = moved = loop.time()
    deadline = now + limit

    def idle() -> bool:
        return not cleanups.queue and quorum.idle()

    def progress() -> tuple[int, int, int]:
        return (*quorum.progress(), len(cleanups.queue))

    seen = progress()
    # Polled: aclose() is rare, and a notification would cost every fan-out
    # a check on the hot path.
    while now < deadline and now - moved < quiet:
        if idle():
            # The tasks whose fan-outs just decided take their next step (a
            # cleanup is a new fan-out) in the next loop iterations.
            for _ in range(3):
                await asyncio.sleep(0)
            if idle():
                return
        await asyncio.sleep(0.005)
        now = loop.time()
        now_at = progress()
        if now_at != seen:
            seen, moved = now_at, now
