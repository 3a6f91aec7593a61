"""One attempt of an ``acquire()``: admit, send, decide, then keep or undo.

The attempt runs the kind's acquire script on every node at once (the
engine's fan-out) and is decided as soon as the quorum outcome is known
(docs/guarantees.md, "Mutual exclusion"). Its kind judges the votes
(``Commands.judge``: a semaphore also agrees on one slot); with fencing on,
the token is written back to a quorum. A grant is kept only if still valid
then: validity = ttl - elapsed - drift, on the monotonic clock, elapsed
counted from before the send ("Validity"). Whatever a failed, cancelled or
late attempt may have left on a node is undone by the engine, ordered after
the attempt on each node ("Failed attempts leave nothing").

The hot path - a grant at the first try - is one coroutine, :func:`attempt`:
its steps are plain functions, and no timer is set unless the caller's
deadline could cut the votes short.
"""

from __future__ import annotations

import asyncio
from asyncio import TimerHandle

from .._base._errors import NodeError
from .._base._timing import validity
from .._engine import Admission, Command, Engine, Tally, when_done
from ._call import DONE, REFUSED, Call, Failures, Move
from ._commands import Commands
from ._fence import fence as _fence
from ._grant import Grant

__all__ = ["attempt"]


async def attempt(call: Call) -> Move:
    """One attempt. DONE: granted (``call.grant``), or the call ends here (its
    deadline came before it could attempt, no admission slot in time, the
    last of ``max_attempts``). REFUSED: refused or no longer valid, undone."""
    engine = call.engine
    if engine.closing:
        engine.check_open()  # raises: aclose() has begun
    if call.failures is not None and call.past_deadline():
        # The deadline came while it did not attempt (subscribing, a silent
        # node's confirmation awaited): the last attempt's verdict stands -
        # one sent now is cut before any vote.
        return DONE
    token, command = _prepare(call)
    admission = engine.admission
    if admission.free > 0:  # a free slot, taken inline: no await on the hot path
        admission.free -= 1
    elif not await admission.wait(call.left(), oneshot=call.oneshot):  # cancelled: none sent
        _unadmitted(call, admission)
        return DONE
    call.started = engine.clock()  # validity counts from before the send
    behind = call.behind
    if behind is None:
        tally = call.last = engine.fanout(command)
    else:  # ordered after the last attempt's undo on each node
        tally = call.last = engine.fanout(command, after=behind)
        tally.after = call.behind = None  # no chain of attempts kept alive
    # Decide (inline: no second coroutine per attempt on the hot path): the quorum's
    # votes as the kind judges them, then the fencing write-back. Cut at the
    # deadline: an attempt still undecided then is abandoned (and undone, like
    # any failed one), so a node slow to vote does not hold the caller past
    # its timeout.
    cut = None if call.deadline is None else _cut_at_deadline(call, tally)
    fencing: int | None = None
    call.errors = None
    try:
        granted = await call.commands.judge(tally)
        if granted and call.options.fencing:
            fencing, call.errors = await _fence(engine, call.commands, tally, token)
            granted = fencing is not None
    except asyncio.CancelledError:
        _abandon(call, tally, token)
        raise
    finally:
        admission.leave()
        if cut is not None:
            cut.cancel()
    if granted and _keep(call, tally, token, fencing):
        return DONE
    return _undo(call, tally, token)


def _prepare(call: Call) -> tuple[bytes, Command]:
    """The attempt's token and command (the kind's acquire script)."""
    engine, commands, options = call.engine, call.commands, call.options
    token = commands.token_prefix + engine.new_token()
    command = commands.acquire(token, options.ttl_ms, options.fencing, call.fair)
    # Recorded before sending: a node may keep this grant even if the attempt
    # fails here, and a restart seen meanwhile must cover it. (Compared
    # first: the ledger is called only when the ttl is a new longest.)
    ttls = engine.ttls
    if options.ttl > ttls.longest:
        ttls.granted(options.ttl)
    return token, command


def _abandon(call: Call, tally: Tally, token: bytes) -> None:
    """Cancelled while deciding: the attempt is abandoned and undone everywhere."""
    engine, commands = call.engine, call.commands
    tally.abandon()
    undo = engine.undo(tally, commands.release(token, False))
    if undo is not None:
        wake_after(engine, undo, commands, None)


def _cut_at_deadline(call: Call, tally: Tally) -> TimerHandle | None:
    """A timer abandoning ``tally`` at the deadline, if its votes may outlast it.

    Only then: further deadlines cost the hot path one comparison, no timer.
    """
    deadline = call.deadline
    assert deadline is not None
    if deadline - call.started >= call.span:
        return None
    return call.engine.loop().call_later(deadline - call.started, tally.abandon)


def _keep(call: Call, tally: Tally, token: bytes, fencing: int | None) -> bool:
    """Granted: kept if still valid for longer than ``min_validity``, judged after
    the fencing write-back (it is part of the grant)."""
    engine, options = call.engine, call.options
    now = engine.clock()
    left = validity(options.ttl, call.started, now, engine.config.drift_factor)
    if left <= options.min_validity:
        return False
    if engine.closing:
        # Granted while aclose() waited for attempts in flight: nobody will
        # hold it. Released, and the caller told.
        engine.undo(tally, call.commands.release(token, False))
        engine.check_open()  # raises
    call.grant = Grant(token, options.ttl, now + left, tally, fencing, now)
    return True


def _undo(call: Call, tally: Tally, token: bytes) -> Move:
    """Refused (or granted too late): undone on every node it may have reached,
    the failure counted. DONE when it was the last of ``max_attempts``."""
    engine, commands = call.engine, call.commands
    if call.errors is None:
        call.errors = tally.errors()
    failures = call.failures
    if failures is None:
        failures = call.failures = Failures()
        if call.subscription is not None:
            call.subscription.caller = failures
    call.behind = engine.undo(tally, commands.release(token, False))
    if call.behind is not None:
        # Its leftovers may refuse this lock's other waiters here until it
        # has run: they are woken then (WakeHub.undone).
        wake_after(engine, call.behind, commands, failures)
    if failures.add(tally) == call.options.max_attempts:
        return DONE
    # A yes may be among the votes still coming (refused at once on a quorum
    # of noes): looked at once the quick retry is due (_retry.pause).
    call.split = not call.quick and (tally.yes > 0 or tally.missing > 0)
    return REFUSED


def wake_after(engine: Engine, undo: Tally, commands: Commands, caller: Failures | None) -> None:
    """Once ``undo`` has run on every node, the waiters of its lock here that
    its leftovers may have refused attempt again (``WakeHub.undone``)."""
    wake = engine.wake
    if wake is not None:
        waiting = commands.waiting()
        when_done(undo, lambda: wake.undone(waiting, caller))


def _unadmitted(call: Call, admission: Admission) -> None:
    """The deadline came while waiting for an admission slot: nothing was sent.

    Every node reports why in ``lock.errors``: this call's command never
    left the client, because the Redlock's other attempts filled its slots.
    """
    failures = call.failures
    if failures is None:
        failures = call.failures = Failures()
    failures.unadmitted = admission.limit - admission.free  # the attempts in flight
    call.errors = {
        node.name: NodeError(
            f"{node.name}: not sent: {failures.unadmitted} acquire attempts of this Redlock "
            "were in flight (admission)"
        )
        for node in call.engine.nodes
    }
