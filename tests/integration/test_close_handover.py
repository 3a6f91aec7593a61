"""Closing a Redlock never ends a grant held elsewhere (issue 38), on real nodes.

The guide's hand-over: a taker acquires with ``auto_extend=False``, passes
``lock.token`` on, and a worker ``adopt()``s it. The taker's process then
shuts down cleanly (``aclose()`` in a lifespan). Its close used to release
every grant it had, the adopter's keys with it: a third client was granted
the name while the adopter reported ``held`` with ~30 s left. The rule now:
a grant handed on (its token read, or adopted) is left to its copies at
close; a grant never handed on is still released (nobody waits out a ttl);
only a grant still valid is reported lost.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from redlock_async import Lock, LockLost, Redlock, RedlockError
from redlock_async._base._keys import KeyLayout
from redlock_async.testing import RedisNodes

from ..conftest import MakeRedlock, eventually

JOB = KeyLayout("redlock:", "job")


def on_a_quorum(redis_nodes: RedisNodes, token: str) -> bool:
    """The grant's key holds ``token`` on a quorum of the nodes (a grant needs no
    more: a node may have refused the acquire, slow or still holding an old key)."""
    holding = sum(node.client().get(JOB.lock) == token.encode() for node in redis_nodes)
    return holding >= len(redis_nodes) // 2 + 1


def nowhere(redis_nodes: RedisNodes) -> bool:
    return all(node.client().get(JOB.lock) is None for node in redis_nodes)


async def refused(redlock: Redlock) -> bool:
    """A third client is refused the name now (one attempt)."""
    return not await redlock.lock("job", ttl=5.0).acquire(blocking=False)


async def test_closing_the_taker_leaves_the_adopted_grant_to_its_adopter(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    taker, worker, third = make_redlock(), make_redlock(), make_redlock()
    told: list[Lock] = []
    job = taker.lock("job", ttl=30.0, auto_extend=False, on_lost=told.append)
    assert await job.acquire()
    token = job.token
    assert token is not None
    adopted = await worker.adopt("job", token, ttl=30.0)
    await taker.aclose()  # the web process's lifespan ends
    # Still valid at the close: lost for the taker, as any loss is told.
    assert job.lost
    assert told == [job]
    # The worker's grant stands on a quorum: nobody else gets the name.
    assert adopted.held
    assert adopted.valid_for > 25.0
    assert on_a_quorum(redis_nodes, token)
    assert await refused(third)
    # An explicit release by the copy that holds it ends it for all.
    await adopted.release()
    assert nowhere(redis_nodes)
    assert not await refused(third)


async def test_a_taker_whose_validity_ended_closes_without_touching_the_adopter(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # The reviewer's second case: the taker's own validity had already ended
    # when it closed; its close still deleted the adopter's keys.
    taker, worker, third = make_redlock(), make_redlock(), make_redlock()
    told: list[Lock] = []
    job = taker.lock("job", ttl=0.5, auto_extend=False, on_lost=told.append)
    assert await job.acquire()
    token = job.token
    assert token is not None
    adopted = await worker.adopt("job", token, ttl=30.0)
    assert await eventually(lambda: not job.held)
    await taker.aclose()
    assert not job.lost  # it expired in the taker's hands; nothing was lost at the close
    assert told == []
    assert adopted.held
    assert on_a_quorum(redis_nodes, token)
    assert await refused(third)


async def test_a_grant_never_handed_on_is_released_at_close(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    holder, other = make_redlock(), make_redlock()
    job = holder.lock("job", ttl=30.0)
    assert await job.acquire()
    await holder.aclose()
    assert job.lost
    assert nowhere(redis_nodes)  # aclose() waits for the releases' replies
    assert not await refused(other)  # granted at once, not after 30 s


async def test_an_adopters_close_leaves_the_takers_grant(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    taker, worker, third = make_redlock(), make_redlock(), make_redlock()
    job = taker.lock("job", ttl=30.0, auto_extend=False)
    assert await job.acquire()
    token = job.token
    assert token is not None
    adopted = await worker.adopt("job", token, ttl=30.0)
    await worker.aclose()
    assert adopted.lost
    assert job.held
    assert on_a_quorum(redis_nodes, token)
    assert await refused(third)


async def test_an_expired_grant_is_not_reported_lost_and_its_name_is_left_alone(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # An auto_extend=False grant that expired, its name now someone else's:
    # aclose() used to call it "lost ... while it was held" and call on_lost.
    first, second = make_redlock(), make_redlock()
    told: list[Lock] = []
    old = first.lock("job", ttl=0.3, auto_extend=False, on_lost=told.append)
    assert await old.acquire()
    now = second.lock("job", ttl=30.0)
    assert await now.acquire(timeout=10.0)
    await first.aclose()
    assert not old.lost
    assert told == []
    assert now.held
    assert now.token is not None
    assert on_a_quorum(redis_nodes, now.token)


async def test_an_expired_grant_in_a_running_body_is_told_at_its_exit(
    make_redlock: MakeRedlock,
) -> None:
    redlock = make_redlock()
    entered = asyncio.Event()
    closed = asyncio.Event()
    outcome: list[BaseException | None] = []

    async def body() -> None:
        lock = redlock.lock("job", ttl=0.3, auto_extend=False)
        try:
            async with lock:
                entered.set()
                await asyncio.sleep(0.5)  # past the validity
                await closed.wait()  # not cancelled by the close: nothing was lost
        except BaseException as err:
            outcome.append(err)
        else:
            outcome.append(None)

    task = asyncio.create_task(body())
    await entered.wait()
    await asyncio.sleep(0.4)
    await redlock.aclose()
    closed.set()
    await task
    assert len(outcome) == 1
    assert outcome[0] is not None
    assert "expired before the body finished" in str(outcome[0])


async def test_an_auto_renewed_grant_past_its_validity_at_close_is_lost_and_its_body_stopped(
    make_redlock: MakeRedlock,
) -> None:
    # Found by the simulation (seed 3017, a process paused past its
    # validity): the loop stalls, aclose() runs before the overdue renewal,
    # and the close let the expired grant go silently - the renewal that
    # would have told the holder was stopped, so the body ran on unstopped
    # while another process could be granted the name. An auto-renewed
    # grant past its validity is a loss: told, and its body cancelled.
    redlock = make_redlock()
    told: list[Lock] = []
    entered = asyncio.Event()
    outcome: list[BaseException | None] = []

    async def body() -> None:
        lock = redlock.lock("job", ttl=0.5, on_lost=told.append)
        try:
            async with lock:
                entered.set()
                await asyncio.Event().wait()  # works until stopped
        except BaseException as err:
            outcome.append(err)
        else:
            outcome.append(None)

    task = asyncio.create_task(body())
    await entered.wait()
    time.sleep(0.8)  # the whole loop stalls past the grant's validity  # noqa: ASYNC251
    await redlock.aclose()  # runs before the overdue renewal gets a turn
    await asyncio.wait_for(task, 5.0)
    assert len(told) == 1
    assert told[0].lost
    assert len(outcome) == 1
    assert isinstance(outcome[0], (LockLost, asyncio.CancelledError))


async def test_an_adopt_that_races_the_close_holds_nothing_here(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # From the outside review: an adopt() in flight when its Redlock closed
    # returned a Lock reporting held=True that nothing renewed or could
    # release (lean driver: its release never left). It now raises.
    taker = make_redlock()
    job = taker.lock("job", ttl=30.0, auto_extend=False)
    assert await job.acquire()
    token = job.token
    assert token is not None
    for delay in (0.0, 0.001, 0.003):
        worker = make_redlock()
        task = asyncio.create_task(worker.adopt("job", token, ttl=30.0))
        await asyncio.sleep(delay)
        await worker.aclose()
        outcome: Lock | RedlockError
        try:
            outcome = await task
        except RedlockError as err:
            outcome = err
        if isinstance(outcome, RedlockError):
            assert "closed" in str(outcome)
        else:  # decided before the close: then the close ended it here
            assert outcome.lost
            assert not outcome.held
    assert job.held  # handed on: no close released the taker's grant
    assert on_a_quorum(redis_nodes, token)


async def test_a_handed_on_grant_that_expires_in_its_body_is_left_to_the_adopter(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # From the outside review: leaving `async with` after the grant expired
    # in the body (a loss: LockLost) sent a release by token, which deleted
    # the adopter's keys while it held the grant with ~28 s left.
    taker, worker, third = make_redlock(), make_redlock(), make_redlock()
    adopted: Lock | None = None
    with pytest.raises(LockLost, match="expired before the body finished"):
        async with taker.lock("job", ttl=0.5, auto_extend=False) as lock:
            token = lock.token
            assert token is not None
            adopted = await worker.adopt("job", token, ttl=30.0)
            await asyncio.sleep(0.7)  # the taker's own validity ends in the body
    assert adopted is not None
    assert adopted.held
    assert adopted.token is not None
    assert on_a_quorum(redis_nodes, adopted.token)
    assert await refused(third)
