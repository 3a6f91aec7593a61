"""Why ``acquire()`` gave up: the name is busy, or no quorum answered.

``LockBusy``: the last attempt reached a quorum and it refused - the name
is held elsewhere (HTTP 409). ``QuorumUnavailable``: too few nodes
answered to decide - down, slow, refusing or misconfigured (HTTP 503).
A web handler must tell these apart: "someone else is changing this" and
"our Redis is down" call for different answers.
"""

from __future__ import annotations

from collections.abc import Mapping

from .._base._errors import (
    LockBusy,
    LockNotAcquired,
    NodeError,
    NodeResponseError,
    QuorumUnavailable,
    Votes,
)
from .._engine import Tally, is_yes, tally_text
from ._call import Failures
from ._outage import answers

__all__ = ["answers", "judged", "not_acquired", "votes"]


async def judged(
    failures: Failures | None, errors: Mapping[str, NodeError], wait: float
) -> Mapping[str, NodeError]:
    """The per-node errors a failed ``acquire()`` reports, in ``lock.errors`` and
    in the ``LockNotAcquired`` of ``async with`` alike (one rule for both).

    The last attempt may have been decided before every node answered (two
    failures of three decide). When the votes in are too few to tell but a
    refusal is among them, the nodes still answering are waited for, up to
    ``wait`` seconds, so that one dead node of three reads as "busy" when
    the others hold the name, not as "unavailable" - and their errors are
    reported. Nodes already silent for ``node_timeout`` are not waited for;
    nor is anyone when no refusal came (a failure then decides at once,
    whatever a busy node would say later).
    """
    if failures is None or failures.unadmitted or not failures.tallies:
        return errors  # nothing was sent on the last try: no vote to wait for
    tally = failures.tallies[-1]
    if (
        not _busy(tally)
        and tally.no
        and tally.yes + tally.no + len(tally.answering()) >= tally.quorum
    ):
        await answers(tally, wait)
    # Votes that came in while judging: their failures belong in the report.
    return {**tally.errors(), **errors}


def not_acquired(
    name: str,
    failures: Failures | None,
    errors: Mapping[str, NodeError],
    timeout: float | None,
) -> LockNotAcquired:
    """The error of an ``async with`` that gave up, from its failed attempts
    (judged: see :func:`judged`) and the per-node ``errors`` they reported."""
    waited = f" (gave up after {timeout}s)" if timeout else ""
    if failures is None:
        return QuorumUnavailable(f"lock {name!r}: no attempt was made{waited}", errors)
    if failures.count > 1:
        spent = f"{timeout}s, " if timeout else ""
        waited = f" (gave up after {spent}{failures.count} attempts)"
    if failures.unavailable is not None:
        # Not the timeout: the nodes, for longer than this call waits for them.
        waited = (
            f" (gave up after unavailable_timeout={failures.unavailable}s without a quorum "
            f"answering, {failures.count} attempt{'s' if failures.count > 1 else ''})"
        )
    if failures.unadmitted:
        # The last try never left the client: what earlier attempts saw
        # ("held elsewhere"?) is not why it gave up. Unavailable (503): the
        # process cannot get an answer now, whatever the name's state.
        message = (
            f"lock {name!r}: not attempted: too many attempts in flight - "
            f"{failures.unadmitted} acquire attempts of this Redlock held every admission "
            f"slot until the timeout"
        )
        attempts = [votes(t) for t in failures.tallies]
        return QuorumUnavailable(message + waited, errors, attempts, failures.count)
    tally = failures.tallies[-1]
    attempts = [votes(t) for t in failures.tallies]
    count = failures.count
    if _busy(tally):
        message = f"lock {name!r} is held elsewhere: {tally.no} of {tally.n} nodes refused"
        return LockBusy(message + waited, errors, attempts, count)
    if tally.yes >= tally.quorum:
        # Every vote was in time for the nodes, not for the caller's validity.
        message = (
            f"lock {name!r}: a quorum granted it, but too slowly: less validity was "
            f"left than required (ttl less elapsed time and drift, against min_validity)"
        )
    else:
        # Every node accounted for, by name (_engine/_wording.py): counting only
        # the votes in when the attempt was decided made a majority outage read
        # "0 of 3 nodes answered" while the third node answered every command.
        # Nodes that answered with an error reply (an ACL's NOPERM, READONLY,
        # OOM) did not vote, but are up: "answered" would send an operator
        # looking for a network fault.
        verb = (
            "voted" if any(isinstance(r, NodeResponseError) for r in tally.replies) else "answered"
        )
        message = f"lock {name!r}: too few nodes {verb} to decide: {tally_text(tally)}"
    return QuorumUnavailable(message + waited, errors, attempts, count)


def votes(tally: Tally) -> Votes:
    """One attempt's votes, by node name."""
    granted: list[str] = []
    taken: list[str] = []
    unanswered: list[str] = []
    failed = tally.errors()
    for node, reply in zip(tally.nodes, tally.replies, strict=True):
        name = node.name
        if name in failed:
            continue
        if is_yes(reply):
            granted.append(name)
        elif type(reply) is int:
            taken.append(name)
        elif not isinstance(reply, NodeError):
            unanswered.append(name)  # pending (a skipped node is among the failed)
    return Votes(tuple(granted), tuple(taken), failed, tuple(unanswered))


def _busy(tally: Tally) -> bool:
    return tally.no > 0 and tally.yes + tally.no >= tally.quorum
