"""Many grants renewed by one script call per node, each grant judged on its own.

A batch is a chunk of up to :data:`CHUNK` grants whose renewals fell due
together (``_renewal.Renewals`` makes them). One ``extend_many.lua`` call per
node renews them all, and the node answers a list with one vote per grant: 1
renewed, 0 refused (gone or someone else's), a string for an error on that
key alone. Each grant is then decided on its own quorum, exactly as a
fan-out of its own would be (``_grant.apply_votes``):

- a node that fails the whole call (down, timed out, an error reply) fails
  its vote for every grant of the batch;
- a key refused or failing on one node costs that grant's vote there only.

The engine's :class:`~.._engine.Tally` expects one integer per node, so a
list reply is neither yes nor no to it, and its decision is not used: a
batch reads the replies themselves (``Tally.when_settled``) and is decided
once every node has answered, once a quorum has said yes to every grant of
it, or once the tally has timed out every node still missing
(``Tally.when_expired``), whichever comes first. So a late vote is judged by
the rule of every other fan-out (an acquire's, an extend's): failed after
``node_timeout`` of the node's silence, or ``Tally.expire``'s bound for a
node busy with earlier commands - not by a deadline of the batch's own.
Validity is counted from ``started``, taken before the call was sent.

Where a node cannot run one script over keys of several hash slots (a Redis
Cluster), every grant is sent alone, with its own extend command: a batch of
one, whose nodes answer a single integer, read as a list of one - and which
the tally can count itself, so its decision is the batch's (``alone``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from typing import Generic, Protocol, TypeVar

from .._base._errors import NodeError, NodeResponseError
from .._base._timing import ttl_ms
from .._engine import Command, Reply, Tally
from ._grant import Grant
from ._scripts import EXTEND_MANY

__all__ = ["CHUNK", "Batch", "Target", "extend_many"]

CHUNK = 500
"""Most grants in one call. A node runs extend_many.lua at about 2 us per key,
so one call keeps it busy for about a millisecond: other clients' commands
are never held up for long, and a tick with more due is sent in several calls."""

_M = TypeVar("_M")

Column = Sequence[object] | NodeError
"""One node's answer for a whole batch: a vote per grant, or one error for all."""


class Target(Protocol):
    """What extend_many.lua needs of one grant's renewal, besides its token."""

    @property
    def kind(self) -> bytes:
        """``x``: a string key holding the token; ``r``: a reader set."""
        ...

    @property
    def key(self) -> bytes: ...


# Each grant's ttl in milliseconds, by ttl: one int object per distinct ttl,
# not one per renewal (nor one per held lock).
_MS: dict[float, int] = {}
_MS_KEPT = 256


def extend_many(targets: Sequence[Target], grants: Sequence[Grant]) -> Command:
    """One ``extend_many.lua`` call renewing each grant to its own ttl (see the script)."""
    keys = [target.key for target in targets]
    args: list[bytes | int] = []
    known = _MS
    for target, grant in zip(targets, grants, strict=True):
        ttl = grant.ttl
        ms = known.get(ttl)
        if ms is None:
            ms = ttl_ms(ttl)
            if len(known) < _MS_KEPT:
                known[ttl] = ms
        args += (target.kind, grant.token, ms)
    return Command(EXTEND_MANY, keys, args)


class Batch(Generic[_M]):
    """The renewal of ``members`` (their ``grants``), sent at ``started`` as one fan-out.

    ``then(batch)`` is told once, when the batch is decided; ``ballots()`` and
    ``errors()`` then say how each grant fared. ``alone``: one grant sent with
    its own extend command, whose one integer per node the tally counts
    itself - its decision is the batch's.
    """

    __slots__ = (
        "_agreed",
        "_common",
        "_then",
        "_waiter",
        "columns",
        "expired",
        "grants",
        "members",
        "missing",
        "started",
        "tally",
    )

    def __init__(
        self,
        members: list[_M],
        grants: list[Grant],
        started: float,
        tally: Tally,
        then: Callable[[Batch[_M]], None],
        *,
        alone: bool = False,
    ) -> None:
        self.members = members
        self.grants = grants
        self.started = started
        self.tally = tally
        self._then: Callable[[Batch[_M]], None] | None = then
        self._waiter: asyncio.Future[None] | None = None
        # Each node's answer, None until it came (or while it is late).
        self.columns: list[Column | None] = [None] * tally.n
        self.missing = tally.n
        self._agreed = 0  # nodes that said yes to every grant (see _replied)
        self.expired = False  # decided at the deadline, with answers missing
        self._common: dict[str, NodeError] | None = None  # see errors()
        if alone:
            tally.decided.add_done_callback(self._counted)
        else:
            for index in range(tally.n):
                tally.when_settled(index, partial(self._replied, index))
            tally.when_expired(self.expire)

    @property
    def decided(self) -> bool:
        return self._then is None

    def _column(self, index: int, reply: Reply) -> Column:
        size = len(self.members)
        if type(reply) is list and len(reply) == size:
            return reply
        if type(reply) is int and size == 1:
            return (reply,)  # a grant sent alone: extend.lua's one integer
        if isinstance(reply, NodeError):
            return reply
        node = self.tally.nodes[index].name
        return NodeResponseError(
            f"{node}: unexpected reply to a renewal of {size} grants: {type(reply).__name__}"
        )

    def _replied(self, index: int, reply: Reply) -> None:
        if self._then is None:
            return  # decided already: a late answer changes nothing
        column = self.columns[index] = self._column(index, reply)
        self.missing -= 1
        # A quorum that said yes to every grant decides it: the nodes still
        # missing cannot change an outcome, and a slow one would only hold
        # the batch - past a short ttl's loss deadline (sim seed 10035).
        if type(column) is list and column.count(1) == len(column):
            self._agreed += 1
        if not self.missing or self._agreed >= self.tally.quorum:
            self.decide()

    def _counted(self, _: object) -> None:
        # A grant sent alone: the tally decided (a quorum, or none possible,
        # or node_timeout); the nodes silent until then are left out.
        if self._then is None:
            return
        for index, reply in enumerate(self.tally.replies):
            if type(reply) is int or isinstance(reply, NodeError):
                self.columns[index] = self._column(index, reply)
        self.expired = self.tally.expired
        self.decide()

    def expire(self) -> None:
        """The tally timed out every node still missing: their votes failed."""
        if self._then is not None:
            self.expired = True
            self.decide()

    def decide(self) -> None:
        """Every node answered, or the deadline passed: tell ``then`` (once)."""
        then, self._then = self._then, None
        if then is None:
            return
        then(self)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def wait(self) -> asyncio.Future[None]:
        """Done once the batch is decided."""
        if self._waiter is None:
            self._waiter = asyncio.get_running_loop().create_future()
            if self._then is None:
                self._waiter.set_result(None)
        return self._waiter

    def unanimous(self, quorum: int) -> bool:
        """At least ``quorum`` nodes said yes to every grant of the batch."""
        agreed = 0
        for column in self.columns:
            if (type(column) is list or type(column) is tuple) and column.count(1) == len(column):
                agreed += 1
        return agreed >= quorum

    def ballots(self) -> Iterator[tuple[object, ...]]:
        """Each grant's votes, in order, one per node: 1 yes, 0 refused, anything
        else failed (None where the node failed the whole call or is silent)."""
        failed = (None,) * len(self.members)
        columns = [c if type(c) is list or type(c) is tuple else failed for c in self.columns]
        return zip(*columns, strict=True)

    def errors(self, position: int) -> Mapping[str, NodeError]:
        """Why each node that failed the grant at ``position`` failed it (read-only).

        What failed the whole call (a node's error, or its silence) is the
        same for every grant of the batch: it is worked out once, and grants
        whose votes carry no error of their own share it - a batch of 500
        retried grants made 500 copies of it, and 500 of the tally's timeouts.
        """
        common = self._common
        if common is None:
            common = self._common = self._whole_call_errors()
        own: dict[str, NodeError] | None = None
        for node, column in zip(self.tally.nodes, self.columns, strict=True):
            if type(column) is not list and type(column) is not tuple:
                continue
            vote = column[position]
            if vote != 0 and vote != 1:
                if own is None:
                    own = dict(common)
                text = vote.decode(errors="replace") if isinstance(vote, bytes) else repr(vote)
                own[node.name] = NodeResponseError(f"{node.name}: {text}")
        return common if own is None else own

    def _whole_call_errors(self) -> dict[str, NodeError]:
        result: dict[str, NodeError] = {}
        late = self.tally.errors() if self.expired else {}  # the tally's timeouts: why
        for node, column in zip(self.tally.nodes, self.columns, strict=True):
            if column is None:
                if node.name in late:
                    result[node.name] = late[node.name]
            elif isinstance(column, NodeError):
                result[node.name] = column
        return result
