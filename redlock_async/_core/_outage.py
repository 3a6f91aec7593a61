"""``unavailable_timeout``: how long ``acquire()`` keeps trying while no quorum answers.

Busy is not down. A name held elsewhere is waited for up to ``timeout``;
nodes that do not answer are another matter, bounded by
``unavailable_timeout``. Its clock is the *outage*: the time since the
first attempt of the current unbroken run of attempts that too few nodes
answered to decide - fewer than a quorum voted, yes or no (down, refusing
connections, silent for ``node_timeout``, quarantined after a restart,
answering with an error). An attempt a quorum answered, even to refuse,
ends the run: the wait goes on as a wait for a busy lock.

An attempt is decided as soon as its outcome is known, which may be before
every vote is in: of three nodes, one dead and one refusal decide "not
granted", and the third node's refusal comes a moment later. Such an
attempt is judged once the nodes still answering have answered (at most
``node_timeout``), as :func:`~._refusal.judged` judges the error it
reports: one attempt is never "busy" there and "unavailable" here.
"""

from __future__ import annotations

import asyncio

from .._engine import Tally

__all__ = ["Outage", "answers", "heard"]


def heard(tally: Tally) -> bool | None:
    """Did a quorum of ``tally``'s nodes vote (yes or no)? None: not yet known,
    the nodes still answering may make it one."""
    votes = tally.yes + tally.no
    if votes >= tally.quorum:
        return True
    if votes + len(tally.answering()) < tally.quorum:
        return False
    return None


class Outage:
    """The current run of attempts that no quorum answered, for one ``acquire()``."""

    __slots__ = ("limit", "since")

    def __init__(self, limit: float) -> None:
        self.limit = limit
        """``unavailable_timeout``: how long a run may last before the call gives up."""
        self.since: float | None = None
        """When the first attempt of the current run was sent; None: no run."""

    def count(self, tally: Tally, started: float) -> bool:
        """Count a failed attempt, ``tally``, sent at ``started``; False when it
        cannot tell yet whether a quorum answered: then :meth:`settle` counts it."""
        answered = heard(tally)
        if answered is None:
            return False
        self._counted(answered, started)
        return True

    async def settle(self, tally: Tally, started: float, wait: float) -> None:
        """Count an attempt :meth:`count` could not: a refusal came, and nodes
        still answering could make a quorum of votes. Waits for them, at most
        ``wait`` seconds; still undecided then, it counts as answered: those
        nodes are alive."""
        await answers(tally, wait)
        self._counted(heard(tally) is not False, started)

    def _counted(self, answered: bool, started: float) -> None:
        if answered:
            self.since = None
        elif self.since is None:
            self.since = started

    def left(self, now: float) -> float | None:
        """Seconds until the run reaches ``limit`` (<= 0: reached); None: no run."""
        since = self.since
        return None if since is None else since + self.limit - now


async def answers(tally: Tally, wait: float) -> None:
    """Wait, at most ``wait`` seconds, for the nodes of ``tally`` still answering
    (pending, and not yet silent for ``node_timeout``)."""
    answering = tally.answering()
    if answering and wait > 0:
        loop = asyncio.get_running_loop()
        await asyncio.wait([_answered(loop, tally, index) for index in answering], timeout=wait)


def _answered(loop: asyncio.AbstractEventLoop, tally: Tally, index: int) -> asyncio.Future[None]:
    """A future done once node ``index`` of ``tally`` has answered."""
    done: asyncio.Future[None] = loop.create_future()

    def answered(_: object) -> None:
        if not done.done():
            done.set_result(None)

    tally.when_settled(index, answered)
    return done
