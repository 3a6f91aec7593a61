"""Census notices: what one census writes on the nodes for the next (issue 25).

A census is no snapshot (``_epochs.py``): the write of a grant sent before
some node Y lost its data may land on another node X only after a census
read X. That census then sees no record of the grant's view, and counts
Y's new epoch. So each census sent once another had finished writes, on
every node it reaches, the epochs that one heard: a *notice*
(``lua/census.lua``).
A granting script that must write its view's record refuses a view that
holds an epoch the notice lacks and lacks one it holds - a view made before
a loss the notice's census saw - for 1.5 x max(ttl, 2 s) after the notice,
past which such a grant could not count anyway (``epoch_noticed`` in
``lua/_epoch.lua``; the proof is in docs/guarantees.md, "A loss in the
middle of a grant's writes").

A notice also refuses views *newer* than it: a view with Y's new epoch is
incomparable with a notice written before Y's loss. So the census that
writes a notice drops, on each node X, the notices written there before a
time that this module computes on X's own clock (``cutoffs``): before the
youngest epoch the previous census heard was made, or - when that census
heard every node - before it was sent. Either way the new notice refuses
every view made before a loss an old one saw: such a view lacks that new
epoch (made later), or the lost node's current one (heard by a complete
census), and holds the lost node's old epoch, which no census hears.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

__all__ = ["Answer", "census_args", "parse"]

Answer = tuple[list[object], float]
"""A census reply (``lua/census.lua``: epoch, clock ms, age ms, then views and
their ms left) and the loop time it was heard."""


def parse(reply: list[object]) -> tuple[bytes, int | None, int | None]:
    """A census reply's epoch, the node's clock and the epoch's age (ms;
    None where unknown: an earlier release's script or epoch)."""
    epoch = reply[0]
    assert isinstance(epoch, bytes)
    clock = reply[1] if len(reply) > 1 and type(reply[1]) is int else None
    age = reply[2] if len(reply) > 2 and type(reply[2]) is int and reply[2] >= 0 else None
    return epoch, clock, age


def census_args(
    answers: Mapping[int, Answer], sent: float, n: int, drift: float
) -> tuple[bytes, bytes]:
    """What the next census carries, from ``answers`` to the one sent at loop
    time ``sent`` over ``n`` nodes: the notice (the epochs heard, sorted, so
    that every process that heard the same writes one field) and the cutoffs
    (",epoch=ms,...": per node, by its own clock, before when its notices
    are dropped). Empty when nothing was heard.

    Clocks: each node's time at the census's read is known to within the
    round trip (the read came after ``sent`` and before the reply), and an
    age is a span on the node's own clock; every span is stretched by the
    drift allowed (``drift_factor``) and rounded away, so a cutoff is never
    later than the instant it stands for.
    """
    parsed = [(parse(reply), heard) for reply, heard in answers.values()]
    if not parsed:
        return b"", b""
    notice = b"," + b",".join(sorted(epoch for (epoch, _, _), _ in parsed)) + b","
    stretch = 1.0 + drift
    ages = [age for (_, _, age), _ in parsed if age is not None]
    youngest = math.ceil(min(ages) * stretch * stretch) if ages else None
    full = len(parsed) == n
    parts = []
    for (epoch, clock, _), heard in parsed:
        if clock is None or (youngest is None and not full):
            continue
        # This node's clock when the census was sent, at the earliest.
        at_send = clock - math.ceil((heard - sent) * 1000.0 * stretch) - 1
        # A complete census read every node after its send; else, the
        # youngest epoch it heard was made after the notices before it.
        cutoff = at_send if full else at_send - youngest  # type: ignore[operator]
        parts.append(b"%s=%d" % (epoch, cutoff))
    cutoffs = b"," + b",".join(parts) + b"," if parts else b""
    return notice, cutoffs
