"""One grant: what a successful acquisition holds, and how an extend changes it."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from .._base._timing import shortened_validity_end, validity
from .._engine import Settled, Tally

__all__ = ["Grant", "Verdict", "apply_votes", "judge_extend", "refused_by_counted"]

Verdict = Literal["ok", "refused", "retry"]
"""An extend's outcome: renewed; refused by enough nodes that the grant is
gone; or undecided (nodes failed or were slow) and worth another try."""


@dataclass(slots=True, eq=False)
class Grant:
    """One successful acquisition: its token and how long it is guaranteed."""

    token: bytes
    ttl: float
    validity_end: float  # monotonic time after which the grant may be gone
    # The acquire fan-out: later commands are ordered after it, and a cleanup
    # goes where it may have run. Renewed grants keep only its votes once
    # every node has answered (_engine.settled, shared).
    acquired: Tally | Settled
    fencing_token: int | None = None
    since: float = 0.0  # when it was granted (monotonic), for how long it was held
    # Handed on: its token was read (``lock.token``, the documented way to pass
    # it to ``adopt()``) or it was adopted. Closing its Redlock then leaves its
    # keys to the copies elsewhere, which may hold it (``Lock._close``).
    shared: bool = False


def judge_extend(
    grant: Grant,
    tally: Tally,
    started: float,
    now: float,
    ttl: float,
    drift_factor: float,
) -> Verdict:
    """Apply one decided extend fan-out (sent at ``started``, to ``ttl``) to ``grant``."""
    left = validity(ttl, started, now, drift_factor) if tally.decided.result() else 0.0
    refused = tally.refused and refused_by_counted(tally, tally.replies)
    return apply_votes(grant, now + left if left > 0 else None, refused, started, ttl,
                       drift_factor)  # fmt: skip


def refused_by_counted(tally: Tally, votes: Sequence[object]) -> bool:
    """Whether ``votes`` (one per node of ``tally``'s fan-out) refuse so many
    that no quorum can hold the grant, counting only the nodes whose votes
    count now: a node that lost its data (held by its restart watch,
    quarantined, suspect) refuses a key it forgot, while a copy of the grant
    (``adopt()``) may hold it on the other nodes - within the model, a faulty
    minority. Asked only once the plain count says refused (the rare path)."""
    now = asyncio.get_running_loop().time()  # the watches' clock (Tally.settle's)
    return counted_refusals(tally.group.watches, votes, now) > tally.n - tally.quorum


class _Watch(Protocol):
    until: float  # loop time until which the node's yes votes do not count (_restarts.py)


def counted_refusals(
    watches: Sequence[_Watch | None] | None, votes: Sequence[object], now: float
) -> int:
    """How many of ``votes`` (one per node, in order; 0: refused) are refusals
    of nodes whose votes count at loop time ``now`` (held by the watch after
    a restart, quarantined, suspect or blind: left out; see above)."""
    if watches is None:
        return sum(1 for vote in votes if type(vote) is int and vote == 0)
    return sum(
        1
        for vote, watch in zip(votes, watches, strict=True)
        if type(vote) is int and vote == 0 and (watch is None or now >= watch.until)
    )


def apply_votes(
    grant: Grant,
    end: float | None,
    refused: bool,
    started: float,
    ttl: float,
    drift_factor: float,
) -> Verdict:
    """Apply one extend's votes to ``grant``: when the validity a quorum's yes
    gave ends (``end``: the time it was judged plus that validity; None
    without a quorum's yes, or when it left no validity), and whether so many
    nodes refused that a quorum no longer holds it (``refused``). The extend
    was sent at ``started``, to ``ttl``.

    One fan-out per grant (``judge_extend``) and a batch of grants in one call
    per node (``_renewal.Renewals``, which computes ``end`` once for all its
    grants of one ttl: sent and judged together, it is the same for each, and
    they share one float) are judged alike.
    """
    if end is not None:
        grant.validity_end = end
        grant.ttl = ttl
        return "ok"
    # Failed (or valid for too short): nodes it did reach now expire the key
    # `ttl` after `started` at the earliest.
    shortened = shortened_validity_end(started, ttl, drift_factor)
    if shortened < grant.validity_end:
        grant.validity_end = shortened
    if refused:
        return "refused"  # enough nodes no longer hold our token: it is gone
    return "retry"
