"""The engine: nodes, fan-outs, votes and wake-ups, behind a narrow API.

The lock layer imports from here only. What it gets:

- :class:`Engine` - ``fanout(command, after=, only=) -> Tally``, ``cleanup``
  (the same for releases: queued past ``LIMIT`` in flight), ``undo``,
  ``wake`` (``subscribe``), ``drain``, ``close``, the clock, tokens, rng;
- :class:`Command` and :class:`Script` - what a fan-out runs (a
  :class:`SplitCommand` also says how a Redis Cluster node runs it, a slot at a time);
- :class:`Tally` and :func:`is_yes` - the votes of one fan-out; :class:`Settled`
  - what a held grant keeps of its acquire fan-out once every node answered;
  :func:`vote_limit` - the longest a vote can stay pending; :func:`tally_text`
  - a tally in words, every node named under what it said (for messages);
- :class:`Admission` - the slots of acquire attempts in flight
  (``Engine.admission``);
- :class:`Subscription` - a waiter's place in its lock's line on a wake
  channel (``active``: its turn to attempt; ``wait``, ``close``), and
  :class:`Waiting` - which line, heard on which channels (``wake.subscribe``).

Everything that makes it fast (cached loops, hand-built EVALSHA heads,
pipelined writes, the deadline queue) stays behind these names.
"""

from ._admission import Admission
from ._engine import Engine, TokenPool
from ._node import (
    CENSUS,
    SERVER_ID,
    STALE,
    Call,
    Command,
    Node,
    Reply,
    Script,
    SplitCommand,
    Unsent,
    stall_limit,
)
from ._restarts import TtlLedger, counted_refusals
from ._settled import Settled, settled
from ._tally import Tally, is_yes, quorum_of, vote_limit, when_done
from ._wake import Subscription, Waiting, WakeHub
from ._wording import ANSWERS, VOTES, tally_text

__all__ = [
    "ANSWERS",
    "CENSUS",
    "SERVER_ID",
    "STALE",
    "VOTES",
    "Admission",
    "Call",
    "Command",
    "Engine",
    "Node",
    "Reply",
    "Script",
    "Settled",
    "SplitCommand",
    "Subscription",
    "Tally",
    "TokenPool",
    "TtlLedger",
    "Unsent",
    "Waiting",
    "WakeHub",
    "counted_refusals",
    "is_yes",
    "quorum_of",
    "settled",
    "stall_limit",
    "tally_text",
    "vote_limit",
    "when_done",
]
