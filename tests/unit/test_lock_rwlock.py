"""The read-write lock's views over scripted nodes: each sends its own commands."""

from __future__ import annotations

import asyncio

import pytest

from redlock_async._base._errors import ConfigurationError, RedlockError
from redlock_async._core._scripts import (
    FAIR_ACQUIRE,
    FAIR_LEAVE,
    FENCE_RAISE,
    READ_ACQUIRE,
    READ_EXTEND,
    READ_RELEASE,
    RELEASE,
    WRITE_ACQUIRE,
)

from ._scripted import Cluster, Rule, run


def granted_on(*tokens: bytes) -> Rule:
    """Yes to the attempts with these tokens; -1 (readers hold it) to the others."""
    return lambda sent: 1 if sent.args[0] in tokens else -1


def test_a_reader_uses_the_reader_set() -> None:
    c = Cluster()
    c.script(READ_ACQUIRE.name, 1)
    c.script(READ_EXTEND.name, 1)
    c.script(READ_RELEASE.name, 1)
    reader = c.rwlock().read(ttl=2.0, auto_extend=False)

    async def main() -> None:
        assert await reader.acquire()
        await reader.extend()
        await reader.release()

    run(main(), c.clock)
    keys = c.keys()
    [(_, acquire)] = c.sent(READ_ACQUIRE.name)[:1]
    assert acquire.keys == (keys.writer, keys.readers, keys.writer_waiting)
    assert acquire.args == (b"tok1", 2000)
    [(_, extend)] = c.sent(READ_EXTEND.name)[:1]
    assert extend.keys == (keys.readers,)
    [(_, release)] = c.sent(READ_RELEASE.name)[:1]
    assert release.keys == (keys.readers,)
    assert release.args == (b"tok1",)
    assert c.to(RELEASE.name) == []  # the writer's script is never used
    assert len(c.sent(READ_RELEASE.name)) == 3


def test_a_writer_not_granted_cleanly_clears_its_waiting_marker() -> None:
    c = Cluster(retry_delay=0.1, retry_jitter=0.0)
    # Readers hold n2 throughout: our marker stays there after the grant.
    c.script(WRITE_ACQUIRE.name, granted_on(b"tok2"), granted_on(b"tok2"), -1)
    c.script(RELEASE.name, 1)
    writer = c.rwlock().write(auto_extend=False)

    async def main() -> bool:
        return await writer.acquire()

    assert run(main(), c.clock)
    keys = c.keys()
    attempts = [sent for _, sent in c.sent(WRITE_ACQUIRE.name)]
    assert len(attempts) == 6
    assert all(sent.keys == (keys.writer, keys.readers, keys.writer_waiting) for sent in attempts)
    markers = {sent.args[2] for sent in attempts}
    assert len(markers) == 1  # one marker id across the attempts
    [marker] = markers
    assert isinstance(marker, bytes)
    assert marker
    cleanups = [
        (name, sent) for name, sent in c.sent(RELEASE.name) if sent.keys[0] == keys.writer_waiting
    ]
    assert [name for name, _ in cleanups] == ["n0", "n1", "n2"]
    # Announced: readers held back by the marker may be waiting.
    assert all(sent.keys == (keys.writer_waiting, keys.wake) for _, sent in cleanups)
    assert all(sent.args == (marker,) for _, sent in cleanups)
    assert all(sent.at >= attempts[-1].at for _, sent in cleanups)


def test_a_writer_granted_by_every_node_after_refusals_needs_no_marker_cleanup() -> None:
    # rw_write_acquire.lua deletes our marker where it grants: all yes, all gone.
    c = Cluster(retry_delay=0.1, retry_jitter=0.0)
    c.script(WRITE_ACQUIRE.name, granted_on(b"tok2"))
    c.script(RELEASE.name, 1)
    writer = c.rwlock().write(auto_extend=False)

    async def main() -> bool:
        return await writer.acquire()

    assert run(main(), c.clock)
    keys = c.keys()
    assert all(sent.keys == (keys.writer,) for _, sent in c.sent(RELEASE.name))


def test_a_writer_that_gives_up_clears_its_marker_and_announces_it() -> None:
    c = Cluster()
    c.script(WRITE_ACQUIRE.name, -1, -1, 1)
    c.script(RELEASE.name, 1)
    writer = c.rwlock().write()

    async def main() -> bool:
        return await writer.acquire(blocking=False)

    assert run(main(), c.clock) is False
    keys = c.keys()
    [(_, attempt)] = c.sent(WRITE_ACQUIRE.name)[:1]
    releases = c.sent(RELEASE.name)
    # The attempt is undone (writer key) wherever it got more than a plain
    # 0 (the undo does not tell -1 from a yes: a harmless compare-and-delete),
    # and the marker cleared everywhere, announced.
    undo = [name for name, sent in releases if sent.keys == (keys.writer,)]
    marker = [name for name, sent in releases if sent.keys == (keys.writer_waiting, keys.wake)]
    assert undo == ["n0", "n1", "n2"]
    assert marker == ["n0", "n1", "n2"]
    clears = [sent for _, sent in releases if sent.keys[0] == keys.writer_waiting]
    assert all(sent.args == (attempt.args[2],) for sent in clears)


def test_a_clean_first_writer_grant_sends_no_cleanup() -> None:
    c = Cluster()
    c.script(WRITE_ACQUIRE.name, 1)
    writer = c.rwlock().write(auto_extend=False)

    async def main() -> bool:
        return await writer.acquire()

    assert run(main(), c.clock)
    assert c.to(RELEASE.name) == []


def test_a_writer_with_fencing_uses_the_rwlocks_counter() -> None:
    c = Cluster()
    c.script(WRITE_ACQUIRE.name, 4, 9, 9)
    c.script(FENCE_RAISE.name, 1)
    writer = c.rwlock().write(fencing=True, auto_extend=False)

    async def main() -> bool:
        return await writer.acquire()

    assert run(main(), c.clock)
    keys = c.keys()
    assert writer.fencing_token == 9
    assert all(sent.keys[-1] == keys.rw_fence for _, sent in c.sent(WRITE_ACQUIRE.name))
    assert all(sent.keys == (keys.writer, keys.rw_fence) for _, sent in c.sent(FENCE_RAISE.name))


def test_upgrading_a_read_held_by_the_same_task_raises() -> None:
    c = Cluster()
    c.script(READ_ACQUIRE.name, 1)
    c.script(WRITE_ACQUIRE.name, -1)
    c.script(RELEASE.name, 1)
    rw = c.rwlock()

    async def other_task_writes() -> bool:
        return await rw.write().acquire(blocking=False)

    async def main() -> None:
        reader = rw.read(auto_extend=False)
        assert await reader.acquire()
        with pytest.raises(RedlockError, match="upgrading read to write"):
            await rw.write().acquire()
        assert c.to(WRITE_ACQUIRE.name) == []
        # Another task's writer simply waits for the reader (refused here).
        assert await asyncio.create_task(other_task_writes()) is False
        assert len(c.sent(WRITE_ACQUIRE.name)) == 3

    run(main(), c.clock)


def test_fencing_on_a_read_lock_is_refused() -> None:
    c = Cluster()
    rw = c.rwlock()
    with pytest.raises(ConfigurationError, match="fencing=True is for write locks"):
        rw.read(fencing=True)
    with pytest.raises(ConfigurationError):
        c.rwlock(fencing=True).read()


def test_fair_views_share_the_rwlock_queue() -> None:
    c = Cluster()
    c.script(FAIR_ACQUIRE.name, 1, 1, -2)
    c.script(FAIR_LEAVE.name, 1)
    rw = c.rwlock(fair=True)
    reader = rw.read(auto_extend=False)
    writer = rw.write(auto_extend=False)

    async def main() -> None:
        assert await reader.acquire()
        await reader.release()
        assert await writer.acquire()

    c.script(READ_RELEASE.name, 1)
    run(main(), c.clock)
    keys = c.keys()
    attempts = [sent for _, sent in c.sent(FAIR_ACQUIRE.name)]
    assert [sent.args[2][:2] for sent in attempts] == [b"r:"] * 3 + [b"w:"] * 3  # type: ignore[index]
    assert all(sent.keys[2:4] == (keys.rw_queue, keys.rw_heartbeats) for sent in attempts)
    leaves = [sent for _, sent in c.sent(FAIR_LEAVE.name)]
    assert len(leaves) == 6  # n2 still queued each of them
    assert all(sent.keys == (keys.rw_queue, keys.rw_heartbeats) for sent in leaves)
