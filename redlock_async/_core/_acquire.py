"""One ``acquire()``: attempts until granted, refused or out of time.

Read it in this order; each step is a function of its own, over one
:class:`~._call.Call` that holds the call's state, and tells the loop what
to do next (a :class:`~._call.Move`):

1. ``first_census`` (``_retry.py``): before this Redlock's first grant, the
   nodes' epochs are read (the restart rule, docs/guarantees.md,
   "Restarted nodes").
2. ``behind_waiters`` / ``wait_for_turn`` (``_retry.py``): behind waiters of this
   process for the same lock, it joins their line instead of attempting.
3. ``attempt`` (``_attempt.py``): admit, send, decide (the kind's judgement
   of the votes, the fencing write-back), then keep the grant if still
   valid, or undo the attempt everywhere.
4. ``after_refusal`` (``_retry.py``): give up, attempt again at once, or wait.
5. ``pause`` (``_retry.py``): the retry delay with jitter, cut short by a
   wake-up on release, bounded by the caller's deadline.
6. ``leave`` (``_retry.py``): pass its turn on, and clear what the kind's
   attempts marked (``Commands.attempts_over``), cancelled or not.

What differs between kinds of lock is their ``Commands`` (``_commands.py``):
the loop asks it what to send and how to judge the votes, never which kind
it is.
"""

from __future__ import annotations

from .._base._config import LockOptions
from .._engine import Engine
from ._attempt import attempt
from ._call import DONE, REFUSED, WAIT, Call, Failures, Outcome
from ._commands import Commands
from ._retry import after_refusal, behind_waiters, first_census, leave, pause, wait_for_turn

__all__ = ["Failures", "Outcome", "acquire"]


async def acquire(
    engine: Engine,
    commands: Commands,
    options: LockOptions,
    blocking: bool,
    limit: float | None,
    unavailable: float | None,
) -> Outcome:
    """Attempt until granted, refused (``blocking=False``) or ``limit`` seconds passed,
    or, while no quorum answers, ``unavailable`` seconds (None: no such limit).

    Raises RedlockError when the engine is closing (``aclose()`` began).
    """
    commands.attempts_begin()  # the kind checks and prepares (raises to refuse)
    call = Call(engine, commands, options, blocking, limit, unavailable)
    if not engine.epochs.ready:
        await first_census(call)
    call.queued = behind_waiters(call)
    try:
        while True:
            if call.queued:
                move = await wait_for_turn(call)
            else:
                move = await attempt(call)
                if move is REFUSED:
                    move = await after_refusal(call)
            if move is WAIT:
                move = await pause(call)
            if move is DONE:
                return call.outcome()
    finally:
        leave(call)
