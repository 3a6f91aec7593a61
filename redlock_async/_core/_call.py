"""One ``acquire()`` call's state, shared by its steps (``_acquire.py`` reads them in order).

Every step (``_attempt.py``: one attempt; ``_retry.py``: what comes after a
refusal) takes the :class:`Call` and returns a :class:`Move`, the loop's one
decision: attempt again now, wait first, judge a refusal, or stop. Nothing
else passes between steps.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Mapping

from .._base._config import LockOptions
from .._base._errors import NodeError
from .._engine import Engine, Subscription, Tally
from ._commands import Commands, FairEntry
from ._grant import Grant
from ._outage import Outage

__all__ = ["AGAIN", "DONE", "EARLY", "REFUSED", "WAIT", "Call", "Failures", "Move", "Outcome"]

NodeErrors = Mapping[str, NodeError]

# Timers may fire up to a millisecond early (uvloop counts whole
# milliseconds): a deadline that close counts as come, or a timer set for
# it (the cut of an attempt, a sleep) would find it a hair away, and the
# loop would start an attempt with no time left for it.
EARLY = 0.001


class Move(enum.Enum):
    """What a step tells the loop to do next."""

    AGAIN = "attempt again now"
    WAIT = "wait: the retry delay, a wake-up, or its turn"
    REFUSED = "the attempt was refused and undone: judge what next"
    DONE = "stop: Call.outcome() is the answer"


AGAIN, WAIT, REFUSED, DONE = Move.AGAIN, Move.WAIT, Move.REFUSED, Move.DONE


class Failures:
    """The failed attempts of one ``acquire()``: how many, and the last few tallies.

    Made at the first failure only (a grant at the first try pays nothing);
    the tallies become ``LockNotAcquired.attempts`` (``_refusal.py``).
    ``unadmitted``: the call ended waiting for an admission slot, with this
    many attempts of the Redlock in flight (0: it did not). ``unavailable``:
    the call gave up because no quorum had answered for this many seconds,
    its ``unavailable_timeout`` (None: it did not).
    """

    __slots__ = ("count", "tallies", "unadmitted", "unavailable")

    KEPT = 10  # a waiter with timeout=None may fail for hours: keep the last few

    def __init__(self) -> None:
        self.count = 0
        self.tallies: deque[Tally] = deque(maxlen=self.KEPT)
        self.unadmitted = 0
        self.unavailable: float | None = None

    def add(self, tally: Tally) -> int:
        self.count += 1
        self.tallies.append(tally)
        return self.count


Outcome = tuple[Grant | None, NodeErrors, Failures | None]
"""What ``acquire`` ended with: the grant, or None and the last attempt's errors;
and the failed attempts (None when none failed)."""


class Call:
    """One ``acquire()`` call: its bounds, its kind, and what its attempts left.

    Set when the call begins: ``deadline`` (None: no timeout; a one-shot
    gets one later, when a census under way makes it wait), ``oneshot``
    (``blocking=False`` or ``timeout=0``: one attempt, admitted from the
    one-shots' reserve), ``span`` (the longest a vote may take: an attempt
    may outlive the deadline only if its votes may take longer), ``fair``
    (its fair-queue entry, or None), ``unavailable`` (``unavailable_timeout``,
    None for a one-shot or no such limit; its count is ``outage``).
    """

    __slots__ = (
        "behind",
        "commands",
        "deadline",
        "engine",
        "errors",
        "failures",
        "fair",
        "grant",
        "joined",
        "last",
        "oneshot",
        "options",
        "outage",
        "queued",
        "quick",
        "refreshed",
        "span",
        "split",
        "started",
        "subscription",
        "unavailable",
    )

    def __init__(
        self,
        engine: Engine,
        commands: Commands,
        options: LockOptions,
        blocking: bool,
        limit: float | None,
        unavailable: float | None,
    ) -> None:
        self.engine = engine
        self.commands = commands
        self.options = options
        # timeout=0 is one attempt, as blocking=False: no deadline to cut it at.
        self.oneshot = not blocking or limit == 0
        self.deadline = None if not limit else engine.clock() + limit
        self.span = engine.vote_span
        self.fair = FairEntry.new(commands.kind, engine) if options.fair else None
        self.unavailable = None if self.oneshot else unavailable
        # Made at its first use (a refusal, or a wait for its turn): a grant
        # at the first try pays nothing for it.
        self.outage: Outage | None = None
        self.queued = False  # in line behind waiters of this process: no attempt yet
        self.joined = False  # past its first refusal's listening step (or queued at once)
        self.subscription: Subscription | None = None
        self.grant: Grant | None = None
        self.last: Tally | None = None  # the last attempt's votes
        self.started = 0.0  # when the last attempt was sent
        self.errors: NodeErrors | None = None  # the last attempt's (None: from its tally)
        self.failures: Failures | None = None
        # The last attempt's undo: the next attempt follows it on each node, or
        # its own leftover could refuse it (a pool may reorder commands).
        self.behind: Tally | None = None
        # Refused but granted somewhere: maybe a split vote, undone unannounced.
        # One retry a jittered node_timeout later (``quick``), not a retry delay.
        self.split = self.quick = False
        self.refreshed = False  # waited once for a census a STALE answer began

    def outcome(self) -> Outcome:
        if self.grant is not None:
            return self.grant, {}, self.failures
        return None, self.errors or {}, self.failures

    def outage_count(self) -> Outage | None:
        """``unavailable_timeout``'s count, made at its first use (None: no limit)."""
        if self.outage is None and self.unavailable is not None:
            self.outage = Outage(self.unavailable)
        return self.outage

    def left(self) -> float | None:
        """Seconds to the deadline (None: no deadline)."""
        deadline = self.deadline
        return None if deadline is None else deadline - self.engine.clock()

    def bounded(self, wait: float) -> float:
        """``wait``, cut to the time left before the deadline."""
        deadline = self.deadline
        return wait if deadline is None else min(wait, deadline - self.engine.clock())

    def past_deadline(self) -> bool:
        deadline = self.deadline
        return deadline is not None and deadline - self.engine.clock() <= EARLY
