"""Releases under volume, over scripted nodes in virtual time: queued, then confirmed.

A vote stays pending at most ``vote_limit`` after its send, however steadily
its node answers earlier commands. Releases are not admitted like attempts,
so a burst of them used to be sent at once, and the last of a long burst
waited behind the client's own queue past that limit: "not confirmed",
returned early, its key still there. Now cleanups past ``LIMIT`` in flight
wait in the engine and each is timed from its own send (``_cleanups.py``);
and a vote is not bounded from a send our own blocked loop had not written.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest

from redlock_async._core._lock import Lock
from redlock_async._core._scripts import ACQUIRE, RELEASE
from redlock_async._engine._cleanups import Cleanups
from redlock_async._engine._tally import vote_limit

from ._scripted import Cluster, Late, Sent, run

NODE_TIMEOUT = 0.05


def serially(every: float) -> Callable[[Sent], Late]:
    """A node that answers one release every ``every`` s, in order (a real one's pace)."""
    busy = [0.0]

    def rule(sent: Sent) -> Late:
        busy[0] = max(sent.at, busy[0]) + every
        return Late(1, busy[0] - sent.at)

    return rule


def always_answering(c: Cluster) -> None:
    """Every node keeps answering something: only the backlog bound can fail a vote."""
    for node in c.nodes:
        node.quiet_since = float("inf")


def burst(c: Cluster, n: int, every: float) -> list[Lock]:
    c.script(ACQUIRE.name, 1)
    c.script(RELEASE.name, serially(every), serially(every), serially(every))
    always_answering(c)
    return [c.lock(f"res{i}", auto_extend=False) for i in range(n)]


async def acquire_then_release(locks: list[Lock]) -> list[None]:
    assert all(await asyncio.gather(*(lock.acquire() for lock in locks)))
    return await asyncio.gather(*(lock.release() for lock in locks))


# 200 releases at 5 ms each: the last is answered a second after the burst
# began, past vote_limit (0.55 s); 64 in flight at most (the engine's bound,
# lowered here like the burst) wait 0.32 s at most after their own send.
BURST, EVERY, IN_FLIGHT = 200, 0.005, 64


def test_a_burst_of_releases_longer_than_a_votes_limit_is_all_confirmed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert BURST * EVERY > vote_limit(NODE_TIMEOUT) > IN_FLIGHT * EVERY
    c = Cluster(node_timeout=NODE_TIMEOUT)
    locks = burst(c, BURST, EVERY)
    limited(c, IN_FLIGHT)
    start = c.clock()
    with caplog.at_level(logging.WARNING, logger="redlock_async"):
        assert run(acquire_then_release(locks), c.clock) == [None] * BURST
    assert [r.getMessage() for r in caplog.records][:3] == []  # none "not confirmed"
    assert c.clock() == pytest.approx(start + BURST * EVERY, abs=0.01)  # the nodes' pace
    assert len(c.sent(RELEASE.name)) == 3 * BURST


def test_sent_at_once_the_tail_of_such_a_burst_is_not_confirmed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The control: without the queue, the releases the nodes reach after
    # vote_limit are reported unconfirmed (though they still land).
    c = Cluster(node_timeout=NODE_TIMEOUT)
    locks = burst(c, BURST, EVERY)
    c.engine.cleanup = c.engine.fanout
    with caplog.at_level(logging.WARNING, logger="redlock_async"):
        run(acquire_then_release(locks), c.clock)
    assert "not confirmed by a quorum" in caplog.text


def test_a_release_sent_before_our_loop_blocked_is_timed_from_when_it_runs_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    c = Cluster(node_timeout=NODE_TIMEOUT)
    c.script(ACQUIRE.name, 1)  # releases: answered by hand
    always_answering(c)
    lock = c.lock(auto_extend=False)

    async def main() -> None:
        assert await lock.acquire()
        release = asyncio.ensure_future(lock.release())
        await asyncio.sleep(0)  # queued for the nodes
        c.clock.advance(1.0)  # our loop blocked, far past vote_limit, before writing it
        await asyncio.sleep(0.01)  # running again: the deadlines are looked at
        for node in c.nodes:
            node.answer(1)
        await release

    with caplog.at_level(logging.WARNING, logger="redlock_async"):
        run(main(), c.clock)
    assert [r.getMessage() for r in caplog.records] == []  # confirmed, not timed out


def limited(c: Cluster, limit: int) -> Cleanups:
    cleanups = c.engine.cleanups = Cleanups(c.engine._quorum, limit)
    c.engine.cleanup = cleanups.send
    return cleanups


def test_a_queued_release_whose_caller_is_cancelled_still_goes_out() -> None:
    c = Cluster(node_timeout=NODE_TIMEOUT)
    c.script(ACQUIRE.name, 1)
    c.script(RELEASE.name, Late(1, 0.03))
    cleanups = limited(c, 1)
    first, second = c.lock("a", auto_extend=False), c.lock("b", auto_extend=False)
    start = c.clock()

    async def main() -> None:
        assert await first.acquire()
        assert await second.acquire()
        releasing = asyncio.ensure_future(first.release())
        cancelled = asyncio.ensure_future(second.release())
        await asyncio.sleep(0)
        assert len(cleanups.queue) == 1  # the second waits for the first
        cancelled.cancel()
        await releasing
        await asyncio.sleep(0.2)

    run(main(), c.clock)
    assert not second.held
    times = sorted({sent.at - start for _, sent in c.sent(RELEASE.name)})
    assert times == pytest.approx([0.0, 0.03])  # one after the other, both sent
    assert not cleanups.queue
    assert cleanups.free == 1


def test_cleanups_still_queued_when_the_engine_closes_go_out_then() -> None:
    c = Cluster(node_timeout=NODE_TIMEOUT)
    c.script(ACQUIRE.name, 1)  # releases: answered by hand
    cleanups = limited(c, 1)
    locks: list[Lock] = [c.lock(f"res{i}", auto_extend=False) for i in range(2)]

    async def main() -> None:
        assert all([await lock.acquire() for lock in locks])
        releases = [asyncio.ensure_future(lock.release()) for lock in locks]
        await asyncio.sleep(0)
        assert len(c.sent(RELEASE.name)) == 3  # the first release; the second waits
        c.engine.close()
        assert len(c.sent(RELEASE.name)) == 6  # sent as the engine closed
        assert not cleanups.queue
        await asyncio.gather(*releases)  # unanswered: "not confirmed", never raised

    run(main(), c.clock)
