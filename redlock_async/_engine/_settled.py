"""What a held grant keeps of its acquire fan-out once every node has answered.

A held grant keeps its acquire fan-out for two things only: a later command
of the grant (its release) is ordered after it while a node's reply is
pending (``Quorum.fanout(after=)``), and a cleanup goes to the nodes it may
have written to (``Engine.undo``). Once every node has answered, the first
no longer applies, and for the second one vote per node is enough. A
``Tally`` keeps its group, future, replies and bookkeeping - about 400 bytes
a grant - where a :class:`Settled` is one object shared by every grant with
the same votes (``settled``; renewed grants keep one).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from ._node import Reply, Unsent

__all__ = ["Settled", "settled"]


class Settled:
    """The votes of a fan-out every node has answered, for a cleanup after it.

    Per node: 1, the node may hold what the command wrote (it said yes, or
    failed: a broken connection may still have run the command); 0, it wrote
    nothing (it refused, or the command was never written). Read as a
    tally's ``replies`` (``Engine.undo`` skips a 0 as it skips a "no").
    """

    __slots__ = ("replies",)

    missing: Final = 0
    """No node's reply is pending (as ``Tally.missing``)."""

    def __init__(self, replies: tuple[int, ...]) -> None:
        self.replies = replies

    def when_settled(self, index: int, then: Callable[[Reply], None]) -> None:
        """As ``Tally.when_settled``: every node has answered, so now."""
        then(self.replies[index])

    def __repr__(self) -> str:
        return f"Settled({self.replies})"


# One Settled per distinct vote pattern: at most 2**n of them for n nodes.
_SHARED: dict[tuple[int, ...], Settled] = {}
_SHARED_MAX = 4096


def settled(replies: Sequence[object]) -> Settled:
    """The shared :class:`Settled` of a fan-out whose every node answered: ``replies``
    (a ``Tally``'s, once its ``missing`` is 0)."""
    votes = tuple(
        0 if (type(reply) is int and reply == 0) or isinstance(reply, Unsent) else 1
        for reply in replies
    )
    shared = _SHARED.get(votes)
    if shared is None:
        shared = Settled(votes)
        if len(_SHARED) < _SHARED_MAX:
            _SHARED[votes] = shared
    return shared
