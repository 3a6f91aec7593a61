"""Why ``acquire()`` gave up: the name is busy, or no quorum answered.

``LockBusy``: the last attempt reached a quorum and it refused - the name
is held elsewhere (HTTP 409). ``QuorumUnavailable``: too few nodes
answered to decide - down, slow, refusing or misconfigured (HTTP 503).
A web handler must tell these apart: "someone else is changing this" and
"our Redis is down" call for different answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from ._engine import Tally
from ._errors import LockBusy, LockNotAcquired, NodeError, QuorumUnavailable

__all__ = ["not_acquired", "refused_by_quorum"]


async def not_acquired(
    name: str,
    tally: Tally | None,
    errors: Mapping[str, NodeError],
    timeout: float | None,
    node_timeout: float,
) -> tuple[LockNotAcquired, Mapping[str, NodeError]]:
    """The error of an ``async with`` that gave up, from its last attempt's ``tally``,
    and the per-node errors it reports (``errors`` and those that came in since)."""
    waited = f" (gave up after {timeout}s)" if timeout else ""
    if tally is None:
        return QuorumUnavailable(f"lock {name!r}: no attempt was made{waited}", errors), errors
    busy = await refused_by_quorum(tally, node_timeout)
    # Votes that came in while judging: their failures belong in the report.
    errors = {**tally.errors(), **errors}
    if busy:
        message = f"lock {name!r} is held elsewhere: {tally.no} of {tally.n} nodes refused"
        return LockBusy(message + waited, errors), errors
    answered = tally.yes + tally.no
    if answered >= tally.quorum and not tally.no:
        reason = "a quorum granted it too late for the grant to be valid (slow nodes)"
    else:
        reason = f"{answered} of {tally.n} nodes answered, {tally.quorum} needed"
    message = f"lock {name!r}: too few nodes answered to decide: {reason}{waited}"
    return QuorumUnavailable(message, errors), errors


async def refused_by_quorum(tally: Tally, wait: float) -> bool:
    """Did the attempt of ``tally`` reach a quorum that refused (the name is held elsewhere)?

    False: too few nodes answered to tell (down, slow, refusing scripts), or
    a quorum said yes too late to be valid. The decision may have come
    before every vote (two refusals of three decide): when the votes in
    are too few to tell but a refusal is among them, the nodes still
    answering are waited for, up to ``wait`` seconds, so that one dead node
    of three reads as "busy" when the others hold the name, not as
    "unavailable". Nodes already silent for ``node_timeout`` are not waited for.
    """
    if _busy(tally):
        return True
    if tally.no and tally.missing:
        answering = tally.answering()
        if answering and tally.yes + tally.no + len(answering) >= tally.quorum:
            loop = asyncio.get_running_loop()
            waits = [_answered(loop, tally, index) for index in answering]
            await asyncio.wait(waits, timeout=wait)
    return _busy(tally)


def _answered(loop: asyncio.AbstractEventLoop, tally: Tally, index: int) -> asyncio.Future[None]:
    """A future done once node ``index`` of ``tally`` has answered."""
    done: asyncio.Future[None] = loop.create_future()

    def answered(_: object) -> None:
        if not done.done():
            done.set_result(None)

    tally.when_settled(index, answered)
    return done


def _busy(tally: Tally) -> bool:
    return tally.no > 0 and tally.yes + tally.no >= tally.quorum
