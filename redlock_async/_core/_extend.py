"""``Lock.extend()``: renew one grant now, with a fan-out of its own, retrying while valid.

Background renewals go through the shared schedule (``_renewal.Renewals``,
many grants per call); an explicit, awaited extend is one grant, so it is
one extend command on every node, judged like any extend
(``_grant.judge_extend``). It first lets a background renewal in flight land,
and stops the schedule; the caller restarts it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from .._base._errors import NodeError
from .._base._timing import extend_retry_interval
from ._grant import Grant, judge_extend
from ._renewal import Renewals, Renewer

__all__ = ["extend_now"]


async def extend_now(
    renewals: Renewals[Any],
    renewer: Renewer[Any],
    grant: Grant,
    ttl: float,
    still_held: Callable[[], bool],
) -> tuple[str, Mapping[str, NodeError], bool] | None:
    """Renew ``grant`` to ``ttl`` now, retrying while it is valid.

    Returns None when renewed, else why it is lost (reason, per-node
    errors, whether a quorum refused it: only then may its keys be
    released, see ``Lock._lose``); ``renewer``'s schedule (in ``renewals``)
    is stopped and left for the caller to restart.
    """
    await renewer.settle()  # a renewal in flight lands first: no race with it
    renewals.stop(renewer)
    engine = renewals.engine
    config = engine.config
    while still_held():
        started = engine.clock()
        if started >= grant.validity_end:
            return "its validity ended before it could be extended", {}, False
        engine.ttls.granted(ttl)
        tally = engine.fanout(renewer.commands.extend(grant.token, ttl))
        await tally.decided
        verdict = judge_extend(grant, tally, started, engine.clock(), ttl, config.drift_factor)
        if verdict == "ok":
            return None
        if verdict == "refused":
            return "a quorum of nodes no longer holds it", tally.errors(), True
        interval = extend_retry_interval(config.retry_delay, grant.ttl)
        wait = min(interval, grant.validity_end - engine.clock())
        if wait > 0:
            await asyncio.sleep(wait)
    return "it was released or lost meanwhile", {}, False
