"""release() and Redlock.aclose() over scripted nodes in virtual time."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Unpack

import pytest

from redlock_async import Redlock, _redlock
from redlock_async._base._errors import LockLost, LockNotOwned, NodeConnectionError, RedlockError
from redlock_async._core._lock import Lock, LockKeywords
from redlock_async._core._scripts import ACQUIRE, EXTEND, RELEASE
from redlock_async._engine._node import unsent

from ._scripted import Cluster, Rule, ScriptedNode, VirtualClock, run

DOWN = NodeConnectionError("connection refused")


def held(c: Cluster, release: Sequence[Rule], **options: Unpack[LockKeywords]) -> Lock:
    c.script(ACQUIRE.name, 1)
    c.script(RELEASE.name, *release)
    options.setdefault("auto_extend", False)
    return c.lock(**options)


def test_release_deletes_the_grant_on_every_node() -> None:
    c = Cluster()
    lock = held(c, [1])

    async def main() -> None:
        assert await lock.acquire()
        await lock.release()

    run(main(), c.clock)
    releases = c.sent(RELEASE.name)
    assert [name for name, _ in releases] == ["n0", "n1", "n2"]
    # No wake channel: nobody listens (wake_on_release=False).
    assert all(sent.keys == (c.keys().lock,) and sent.args == (b"tok1",) for _, sent in releases)
    assert not lock.held
    assert not lock.lost


def test_release_raises_lock_not_owned_when_a_quorum_says_no() -> None:
    c = Cluster()
    lock = held(c, [0, 0, 1])

    async def main() -> None:
        assert await lock.acquire()
        with pytest.raises(LockNotOwned, match="fewer than 2 nodes"):
            await lock.release()

    run(main(), c.clock)
    assert not lock.held


def test_release_left_undecided_by_failing_nodes_warns_and_resends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    c = Cluster()
    lock = held(c, [1, DOWN, DOWN])

    async def main() -> None:
        assert await lock.acquire()
        with caplog.at_level(logging.WARNING, logger="redlock_async"):
            await lock.release()  # no exception: the keys expire anyway
        await asyncio.sleep(0.2)

    start = c.clock()
    run(main(), c.clock)
    assert "not confirmed by a quorum" in caplog.text
    assert "n1: NodeConnectionError" in caplog.text
    # The broken connections may not have run it: resent after 50, then 100 ms.
    resent = sorted((round(sent.at - start, 6), name) for name, sent in c.sent(RELEASE.name)[3:])
    assert resent == [(0.05, "n1"), (0.05, "n2"), (0.15, "n1"), (0.15, "n2")]


def test_a_release_never_written_is_resent_where_its_acquire_ran() -> None:
    # n1 granted, then went down (or silent): the release could not even be
    # written there. The key is on n1 all the same, and a paused node runs
    # what it had read when it resumes: resent, as a release lost in flight is.
    c = Cluster()
    lock = held(c, [1, unsent(DOWN), 1])

    async def main() -> None:
        assert await lock.acquire()
        await lock.release()
        await asyncio.sleep(0.2)

    start = c.clock()
    run(main(), c.clock)
    resent = [(round(sent.at - start, 6), name) for name, sent in c.sent(RELEASE.name)[3:]]
    assert resent == [(0.05, "n1"), (0.15, "n1")]


def test_a_release_never_written_is_resent_for_as_long_as_the_node_stays_silent() -> None:
    # n1 ran the acquire, then went silent behind a backlog longer than the
    # ttl (the simulation's seed 50909: 11 s behind a slow node with ttl 10):
    # the acquire may run when it catches up, and its key live a ttl from
    # then. Resends stopped a ttl after the release left that key for a ttl.
    c = Cluster()
    lock = held(c, [1, unsent(DOWN), 1], ttl=1.0)

    async def main() -> None:
        assert await lock.acquire()
        await lock.release()
        await asyncio.sleep(3.0)

    start = c.clock()
    run(main(), c.clock)
    resent = [round(sent.at - start, 2) for _, sent in c.sent(RELEASE.name)[3:]]
    assert resent[-1] > 2.0, resent  # still resending, two ttls on


def test_a_release_never_written_is_not_resent_where_its_acquire_never_was() -> None:
    # n1 was down (or silent) for both: nothing of this grant is there, and a
    # node out for long must not collect a resend chain per release.
    c = Cluster()
    lock = held(c, [1, unsent(DOWN), 1])
    c.script(ACQUIRE.name, 1, unsent(DOWN), 1)

    async def main() -> None:
        assert await lock.acquire()
        await lock.release()
        await asyncio.sleep(0.2)

    run(main(), c.clock)
    assert c.to(RELEASE.name) == ["n0", "n1", "n2"]


def test_release_after_the_validity_ended_raises_lock_not_owned() -> None:
    c = Cluster()
    lock = held(c, [1], ttl=1.0)

    async def main() -> None:
        assert await lock.acquire()
        await asyncio.sleep(1.0)
        with pytest.raises(LockNotOwned, match="validity had ended"):
            await lock.release()

    run(main(), c.clock)
    assert c.to(RELEASE.name) == ["n0", "n1", "n2"]  # sent anyway


def test_release_without_a_grant_raises_lock_not_owned() -> None:
    c = Cluster()
    lock = held(c, [1])

    async def main() -> None:
        with pytest.raises(LockNotOwned, match="not held"):
            await lock.release()

    run(main(), c.clock)
    assert c.to(RELEASE.name) == []


def test_a_cancelled_release_still_releases() -> None:
    c = Cluster(node_timeout=1.0)
    lock = held(c, [1])
    c.script(RELEASE.name, 1)

    async def main() -> None:
        assert await lock.acquire()
        task = asyncio.create_task(lock.release())
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(main(), c.clock)
    assert c.to(RELEASE.name) == ["n0", "n1", "n2"]
    assert not lock.held


# -- aclose ------------------------------------------------------------------


def scripted_redlock(
    monkeypatch: pytest.MonkeyPatch, clock: VirtualClock, n: int = 3
) -> tuple[Redlock, list[ScriptedNode]]:
    """A real Redlock whose nodes are scripted (its node factory replaced)."""
    made = [ScriptedNode(f"n{i}") for i in range(n)]
    nodes = iter(made)
    monkeypatch.setattr(
        _redlock, "make_node", lambda spec, config, ttls, **_: (next(nodes), frozenset())
    )
    redlock = Redlock([f"redis://node{i}" for i in range(n)], wake_on_release=False)
    redlock._core.clock = clock
    for node in made:
        node.rules.update({ACQUIRE.name: 1, RELEASE.name: 1, EXTEND.name: 1})
    return redlock, made


def test_aclose_loses_held_locks_and_later_acquires_raise(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = VirtualClock()
    redlock, nodes = scripted_redlock(monkeypatch, clock)
    lost: list[Lock] = []
    lock = redlock.lock("a", ttl=3.0, on_lost=lost.append)
    idle = redlock.lock("b")
    body: list[str] = []

    async def holder() -> None:
        with pytest.raises(LockLost, match="closed"):
            async with lock:
                body.append("in")
                await asyncio.sleep(100.0)
                body.append("finished")

    async def main() -> None:
        task = asyncio.create_task(holder())
        await asyncio.sleep(0.5)
        await redlock.aclose()
        await task
        assert redlock.closed
        with pytest.raises(RedlockError, match="closed"):
            await idle.acquire()
        with pytest.raises(RedlockError, match="closed"):
            redlock.lock("c")
        with pytest.raises(LockLost):
            await lock.extend()

    run(main(), clock)
    assert body == ["in"]
    assert lost == [lock]
    assert lock.lost
    for node in nodes:
        assert node.scripts().count(RELEASE.name) == 1  # released before closing
        assert node.scripts().count(ACQUIRE.name) == 1  # idle never sent anything
