"""``Redlock.aclose()``: end every held lock here, let commands in flight land, close."""

from __future__ import annotations

import asyncio
import logging

from .._core._lock import Holdings, Lock
from .._engine import Engine, stall_limit

__all__ = ["close"]

_log = logging.getLogger("redlock_async.lock")


async def close(core: Engine, holdings: Holdings[Lock]) -> None:
    """Close ``core`` and its nodes (see ``Redlock.aclose``); a second call returns at once."""
    if core.closing:
        return
    # Connections made on a loop that has ended (or in the parent, before
    # a fork) are forgotten first: only this loop's can be closed here.
    core.loop()
    core.closing = True  # no new attempt from here on
    bodies = holdings.close_all("its Redlock was closed (aclose) while it was held")
    # Their releases go out as their bodies stop; those that do not stop
    # in time are released anyway (they were told and cancelled).
    limit = stall_limit(core.config.node_timeout)
    for _ in range(int(limit / 0.005)):  # polled: aclose() is rare
        if all(body.pending is None for body in bodies):
            break
        await asyncio.sleep(0.005)
    for body in bodies:
        body.flush(core)
    # Attempts in flight decide (a grant now is released at once), and
    # every cleanup gets its replies, before the connections close: for as
    # long as the nodes keep answering (however many locks were held), not
    # for a node silent for node_timeout (see Quorum.drain).
    await core.drain(limit)
    core.close()
    if core.wake is not None:
        await core.wake.aclose()
    results = await asyncio.gather(*(node.aclose() for node in core.nodes), return_exceptions=True)
    for node, result in zip(core.nodes, results, strict=True):
        if isinstance(result, Exception):
            _log.warning("redlock_async: closing %s failed: %s", node.name, result)
