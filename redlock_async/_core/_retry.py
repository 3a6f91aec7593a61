"""Around the attempts of an ``acquire()``: the first census, the line, and what a refusal leads to.

After a refusal the call gives up (a one-shot, ``unavailable_timeout``
reached), attempts again at once (a census it waited for is done; first in
its lock's line), or waits: the retry delay with jitter, cut short by a
wake-up on release (pub/sub) and bounded by the caller's deadline. Waiters
of one process line up per lock (``_engine/_wake.py``): only those that can
win now (the first, or the leading readers) attempt; the others wait,
without attempts, for their turn (docs/guarantees.md, "Liveness").
"""

from __future__ import annotations

import asyncio

from .._base._timing import fair_heartbeat, retry_delay
from ._call import AGAIN, DONE, EARLY, WAIT, Call, Move
from ._outage import Outage

__all__ = ["after_refusal", "behind_waiters", "first_census", "leave", "pause", "wait_for_turn"]


async def first_census(call: Call) -> None:
    """This Redlock's first grant: read the nodes' epochs first (the restart rule).

    Two censuses, a round trip each (``_engine/_epochs.py``), decided within a
    vote's bound like any fan-out - node_timeout when a node is silent - and
    no longer than the caller's deadline allows.
    """
    left = call.left()
    wait = call.span if left is None else min(call.span, max(0.0, left))
    await call.engine.epochs.first(wait, call.commands.grant_keys())


def behind_waiters(call: Call) -> bool:
    """Whether others of this process already wait for this lock.

    An attempt now would jump their line (and race the waiter its release
    wakes): in line behind them instead, it attempts once its turn comes.
    Fair waiters do not line up here: the nodes' queue orders them.
    """
    wake = call.engine.wake
    return (
        not call.oneshot and call.fair is None and wake is not None and wake.waiting
        and wake.queued(call.commands.waiting())
    )  # fmt: skip


async def wait_for_turn(call: Call) -> Move:
    """Join the line behind this process's other waiters. AGAIN: its turn came
    meanwhile (or it joins a run of readers); WAIT: not yet."""
    engine = call.engine
    wake = engine.wake
    assert wake is not None
    call.queued = False
    call.joined = True
    outage = call.outage_count()
    if outage is not None:
        # Whether the nodes answer is unknown until it attempts: its
        # unavailable_timeout counts from now, as if an attempt no quorum
        # answered had just gone out. So it wakes by then and attempts (out
        # of turn): answered, even "busy", the run ends and it waits on;
        # unanswered, it gives up.
        outage.since = engine.clock()
    wait = engine.config.node_timeout  # for a reader joining a run (active)
    left = call.left()
    if left is not None:
        # Half the time left at most: its first attempt, right after, needs
        # the rest to be heard (a silent node never confirms).
        wait = max(0.0, min(wait, left / 2))
    call.subscription = await wake.subscribe(call.commands.waiting(), wait)
    if call.subscription.active:
        return AGAIN
    call.errors = {}
    return WAIT


async def after_refusal(call: Call) -> Move:
    """The attempt was refused: DONE (a one-shot; no quorum answered for
    ``unavailable_timeout``), AGAIN (a census it waited for is done; first
    in line once it listens) or WAIT."""
    engine = call.engine
    if engine.closing:
        engine.check_open()  # raises: nothing can be granted any more
    outage = call.outage_count()
    if outage is not None and await _outage_over(call, outage):
        return DONE
    if not call.refreshed and await _census_waited(call):
        return AGAIN
    if call.oneshot:
        return DONE  # timeout=0: one attempt, like blocking=False
    if not call.joined:
        call.joined = True
        return await _listen(call)
    return WAIT


async def _outage_over(call: Call, outage: Outage) -> bool:
    """Counts the attempt for ``unavailable_timeout``: True once no quorum has
    answered for that long (the call gives up)."""
    tally, failures, engine = call.last, call.failures, call.engine
    assert tally is not None  # after a refusal: its attempt's
    assert failures is not None
    if not outage.count(tally, call.started):
        # Votes still coming may make it "busy": as judged() waits.
        await outage.settle(tally, call.started, call.bounded(engine.config.node_timeout))
    rest = outage.left(engine.clock())
    if rest is not None and rest <= EARLY:
        failures.unavailable = outage.limit
        return True
    return False


async def _census_waited(call: Call) -> bool:
    """If a census is under way, wait for it once: True to attempt again at once.

    A node answered STALE (to this attempt or another) and this Redlock's
    view of the epochs may be behind (a node lost its data; or another
    process's census saw it first, and its notice refuses old views:
    lua/_epoch.lua). Once the census is done, one attempt more at once,
    one-shots included - in a one-shot's bound (docs/guarantees.md,
    "Liveness"): the wait and the attempt within a vote's span of this one.
    That span only, not node_timeout more: a refused last attempt is judged
    after the cut (Lock.acquire, judged(): up to node_timeout for the nodes
    still answering), so the retry ends within V + node_timeout of this
    send, as a lone attempt does - the bound's last node_timeout is the
    judging's. (Cut at V + node_timeout, seed 10004 of the simulation took
    6.64 s from its first send, nt=1 s.)
    """
    epochs, keys = call.engine.epochs, call.commands.grant_keys()
    if not epochs.refreshing(keys):
        return False
    call.refreshed = True
    if call.deadline is None and call.oneshot:
        call.deadline = call.started + call.span
    left = call.left()
    until = call.span if left is None else left / 2
    if until <= EARLY:
        return False
    await epochs.refreshed(min(call.span, until), keys)
    return True


async def _listen(call: Call) -> Move:
    """After its first refusal: listen for releases (its lock's line).

    AGAIN when first in line: a release before the subscription would be
    missed. Behind another waiter, that one's attempts cover it: WAIT.
    """
    wake = call.engine.wake
    if wake is None:
        return WAIT
    # The deadline bounds the wait for confirmations too.
    wait = call.bounded(call.engine.config.node_timeout)
    if wait <= 0:
        return WAIT
    # The line of this lock (never of another sharing a name). Its caller
    # given at once: the undo of its attempt may run while the nodes confirm
    # (WakeHub.undone).
    call.subscription = await wake.subscribe(call.commands.waiting(), wait, call.failures)
    return AGAIN if call.subscription.active else WAIT


async def pause(call: Call) -> Move:
    """Wait before the next attempt: AGAIN once it may attempt, DONE at the deadline."""
    delays = _delays(call)
    if delays is None:
        return DONE  # an attempt cut at the deadline ends it here
    delay, idle = delays
    if call.subscription is None:
        await asyncio.sleep(delay)
    else:
        await _wait_in_line(call, delay, idle)
    # Written as the loop always wrote it: in floats, clock >= deadline - EARLY
    # is not deadline - clock <= EARLY, and a seed must replay the same history.
    deadline = call.deadline
    return DONE if deadline is not None and call.engine.clock() >= deadline - EARLY else AGAIN


def _delays(call: Call) -> tuple[float, float | None] | None:
    """The retry delay with jitter, and how long a waiter not in turn waits
    (None: until its turn). None: the deadline has come."""
    engine = call.engine
    config = engine.config
    delay = retry_delay(config.retry_delay, config.retry_jitter, engine.rng)
    idle: float | None = None
    if call.fair is not None:  # attempts are also the queue entry's heartbeat
        idle = fair_heartbeat(config.node_timeout) / 3
        delay = min(delay, idle)
    remaining = call.left()
    if remaining is not None:
        if remaining <= EARLY:
            return None
        delay = min(delay, remaining)
        if call.failures is None:
            # In line since the start, never attempted: once, before the
            # deadline, out of turn if need be - so a caller that gives up
            # knows what the nodes said, not only its place.
            remaining = max(0.0, remaining - config.node_timeout)
        idle = remaining if idle is None else min(idle, remaining)
    if call.outage is not None and (rest := call.outage.left(engine.clock())) is not None:
        # The last attempt comes when the outage reaches its limit: nodes back
        # by then are asked again, and it decides. A waiter not in turn wakes
        # for it too (nodes down, nobody is woken).
        delay = min(delay, rest)
        idle = rest if idle is None else min(idle, rest)
    return delay, idle


async def _wait_in_line(call: Call, delay: float, idle: float | None) -> None:
    """In turn: early on a release (a hint only), else after ``delay``. Not
    yet: until its turn comes (or ``idle`` passes).

    After a refusal that may hide a split vote, a quick retry instead:
    contenders' votes are decided within node_timeout, then undone; the
    jitter pulls them apart. Once per wake-up or delay: a holder keeping
    part of the nodes costs one more attempt.
    """
    subscription, engine = call.subscription, call.engine
    assert subscription is not None
    call.quick = call.split and subscription.active
    if not call.quick:
        woken = await subscription.wait(delay, idle)
    else:
        began = engine.clock()
        short = min(delay, engine.config.node_timeout * (0.5 + engine.rng.random()))
        woken = await subscription.wait(short, idle)
        if not woken and call.last is not None and not call.last.yes:
            # Refused with votes still coming, and none was a yes by now: no
            # split vote seen, the rest of the delay. (Awaited before the
            # wait, a silent node's vote held back wake-ups and stretched the
            # deadline.)
            call.quick = False
            remains = delay - (engine.clock() - began)
            woken = remains > 0 and await subscription.wait(remains, idle)
    if woken:
        call.quick = False  # woken: a new turn, a quick retry allowed again


def leave(call: Call) -> None:
    """The call ends, granted or not, cancelled too (nobody awaits these)."""
    granted = call.grant is not None
    if call.subscription is not None:
        # Its turn passes on: woken at once if it leaves without a grant (it
        # may have taken a wake-up with it), else at that grant's release.
        call.subscription.close(granted)
    last = call.last
    for cleanup in call.commands.attempts_over(last, granted, call.fair):
        call.engine.fanout(cleanup, after=last)
