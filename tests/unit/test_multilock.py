"""Multilocks over scripted nodes in virtual time: what each step sends, and the cluster split."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from typing import Any, Unpack

import pytest

from redlock_async import ConfigurationError
from redlock_async._base._config import LockOptions
from redlock_async._base._keys import KeyLayout
from redlock_async._core._lock import LockKeywords
from redlock_async._core._scripts import (
    ACQUIRE,
    EXTEND,
    EXTEND_MANY,
    MULTI_ACQUIRE,
    MULTI_EXTEND,
    MULTI_RELEASE,
    RELEASE,
)
from redlock_async._engine import Script, SplitCommand
from redlock_async._engine._node import Arg
from redlock_async._kinds._multilock import MultiCommands, MultiLock, check_names

from ._scripted import NEVER, Cluster, Late, run

NAMES = ("b", "a", "c", "a")
KEYS = (b"redlock:{a}", b"redlock:{b}", b"redlock:{c}")
WAKES = tuple(key + b":wake" for key in KEYS)


def multilock(c: Cluster, names: object = NAMES, **options: Unpack[LockKeywords]) -> MultiLock:
    return MultiLock(c.engine, c.holdings, names, LockOptions(**options), c.config.prefix)


# -- names and options ---------------------------------------------------------


def test_names_are_sorted_and_deduplicated() -> None:
    assert check_names(NAMES) == ("a", "b", "c")
    assert check_names(iter(["x"])) == ("x",)
    lock = multilock(Cluster())
    assert lock.names == ("a", "b", "c")
    assert lock.name == "a + b + c"
    assert "a + b + c" in repr(lock)


@pytest.mark.parametrize(
    ("names", "says"),
    [
        ([], "at least one"),
        ("ab", "list of lock names"),
        (b"ab", "list of lock names"),
        (42, "list of lock names"),
        (["ok", ""], "''"),
        (["ok", b"raw"], "b'raw'"),
        (["ok", "a\ud800"], "'a\\ud800'"),
    ],
)
def test_bad_names_are_refused_and_named(names: object, says: str) -> None:
    with pytest.raises(ConfigurationError, match="names") as info:
        check_names(names)
    assert says in str(info.value)


@pytest.mark.parametrize("option", ["fencing", "fair"])
def test_fencing_and_fair_are_refused(option: str) -> None:
    keywords: Any = {option: True}
    with pytest.raises(ConfigurationError, match=f"{option}=True"):
        multilock(Cluster(), **keywords)


# -- acquire, extend, release -------------------------------------------------


def test_one_attempt_is_one_script_per_node_over_every_key() -> None:
    c = Cluster()
    c.script(MULTI_ACQUIRE.name, 1)
    c.script(MULTI_RELEASE.name, 1)
    lock = multilock(c, ttl=10.0, auto_extend=False)

    async def main() -> None:
        assert await lock.acquire()
        await lock.extend()
        c.script(MULTI_EXTEND.name, 1)
        await lock.extend(ttl=20.0)
        await lock.release()

    c.script(MULTI_EXTEND.name, 1)
    run(main(), c.clock)
    sent = c.sent(MULTI_ACQUIRE.name)
    assert [name for name, _ in sent] == ["n0", "n1", "n2"]
    assert {s.keys for _, s in sent} == {KEYS}
    # The engine's token, marked as a multilock's (adopt() refuses it).
    assert {s.args for _, s in sent} == {(b"m:tok1", 10_000)}
    assert [s.args for _, s in c.sent(MULTI_EXTEND.name)][-1] == (b"m:tok1", 20_000)
    assert {s.keys for _, s in c.sent(MULTI_EXTEND.name)} == {KEYS}
    assert c.to(ACQUIRE.name) == []
    assert c.to(EXTEND.name) == []
    # The release covers every key; no wake-ups on scripted nodes (no pub/sub).
    assert {s.keys for _, s in c.sent(MULTI_RELEASE.name)} == {KEYS}
    assert {s.args for _, s in c.sent(MULTI_RELEASE.name)} == {(b"m:tok1", 3)}


def test_the_release_announces_on_every_names_channel() -> None:
    commands = MultiCommands(KeyLayout("redlock:", name) for name in ("a", "b", "c"))
    assert commands.release(b"t", True).keys == KEYS + WAKES
    assert commands.release(b"t", False).keys == KEYS
    assert commands.keys.wake == WAKES[0]  # a waiter listens on the first name's channel
    assert commands.renewal_target() is None  # renewed alone, never in extend_many


def test_a_minority_yes_is_refused_and_undone_over_every_key() -> None:
    c = Cluster()
    c.script(MULTI_ACQUIRE.name, 1, 0, 0)
    c.script(MULTI_RELEASE.name, 1)
    lock = multilock(c)

    async def main() -> bool:
        return await lock.acquire(blocking=False)

    assert not run(main(), c.clock)
    # Only the node that took the set gives it back; the refusals wrote nothing.
    assert c.to(MULTI_RELEASE.name) == ["n0"]
    assert c.sent(MULTI_RELEASE.name)[0][1].keys == KEYS


def test_a_cancelled_attempt_is_undone_on_every_node_that_may_hold_it() -> None:
    c = Cluster(node_timeout=0.05)
    c.script(MULTI_ACQUIRE.name, Late(1, 1.0), 0, NEVER)
    c.script(MULTI_RELEASE.name, 1)
    lock = multilock(c)

    async def main() -> None:
        task = asyncio.create_task(lock.acquire())
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(2.0)

    run(main(), c.clock)
    assert sorted(c.to(MULTI_RELEASE.name)) == ["n0", "n2"]
    assert {s.keys for _, s in c.sent(MULTI_RELEASE.name)} == {KEYS}


def test_renewals_go_alone_with_multi_extend_and_a_refusing_quorum_loses_it() -> None:
    c = Cluster()
    c.script(MULTI_ACQUIRE.name, 1)
    c.script(MULTI_RELEASE.name, 1)
    c.script(MULTI_EXTEND.name, 1)
    lock = multilock(c, ttl=3.0)
    plain = c.lock("z", ttl=3.0)
    c.script(ACQUIRE.name, 1)
    c.renewals(1)

    async def main() -> None:
        assert await lock.acquire()
        assert await plain.acquire()
        await asyncio.sleep(10.0)
        assert lock.held
        c.script(MULTI_EXTEND.name, 0, 0, 1)
        await asyncio.sleep(3.0)

    run(main(), c.clock)
    assert len(c.sent(MULTI_EXTEND.name)) >= 3 * 4
    # The plain lock is batched; the multilock never is.
    assert all(s.keys == (b"redlock:{z}",) for _, s in c.sent(EXTEND_MANY.name))
    assert lock.lost


# -- the split, for Redis Cluster nodes ---------------------------------------


class Node:
    """One cluster node's keys, run a script call at a time (the ``Call`` a split gets)."""

    def __init__(self, held: dict[bytes, bytes] | None = None) -> None:
        self.held = dict(held or {})
        self.calls: list[tuple[str, tuple[bytes, ...]]] = []

    async def __call__(self, script: Script, keys: Sequence[bytes], args: Sequence[Arg]) -> object:
        await asyncio.sleep(0)  # a round trip
        key, token = keys[0], args[0]
        assert isinstance(token, bytes)
        self.calls.append((script.name, tuple(keys)))
        if script is ACQUIRE:
            if key in self.held:
                return 0
            self.held[key] = token
            return 1
        mine = self.held.get(key) == token
        if script is RELEASE and mine:
            del self.held[key]
        return int(mine)


def split(command: object) -> SplitCommand:
    assert isinstance(command, SplitCommand)
    return command


def drive(step: Awaitable[object]) -> object:
    async def main() -> object:
        return await step

    return asyncio.run(main())


def commands() -> MultiCommands:
    return MultiCommands(KeyLayout("redlock:", name) for name in ("a", "b", "c"))


def test_split_acquire_takes_the_names_in_order_and_gives_back_on_a_refusal() -> None:
    node = Node()
    assert drive(split(commands().acquire(b"t", 1000, False, None)).split(node)) == 1
    assert node.held == dict.fromkeys(KEYS, b"t")
    assert [keys for _, keys in node.calls] == [(k,) for k in KEYS]

    node = Node({KEYS[2]: b"other"})
    assert drive(split(commands().acquire(b"t", 1000, False, None)).split(node)) == 0
    # a and b were taken, c refused: a and b given back, c untouched.
    assert node.held == {KEYS[2]: b"other"}
    assert node.calls[-2:] == [("release", (KEYS[0],)), ("release", (KEYS[1],))]


def test_split_release_and_extend_touch_only_keys_still_ours() -> None:
    node = Node({KEYS[0]: b"t", KEYS[1]: b"other", KEYS[2]: b"t"})
    release = split(commands().release(b"t", True))
    assert drive(release.split(node)) == 0  # not all were ours
    assert node.held == {KEYS[1]: b"other"}
    assert node.calls[0] == ("release", (KEYS[0], WAKES[0]))  # each with its channel

    node = Node(dict.fromkeys(KEYS, b"t"))
    assert drive(split(commands().extend(b"t", 1.0)).split(node)) == 1
    node = Node({KEYS[0]: b"t", KEYS[1]: b"other", KEYS[2]: b"t"})
    assert drive(split(commands().extend(b"t", 1.0)).split(node)) == 0
    assert [keys for _, keys in node.calls] == [(KEYS[0],), (KEYS[1],)]  # stops at the refusal


# -- self-deadlock -------------------------------------------------------------


def test_a_task_waiting_for_a_multilock_over_a_name_it_holds_is_refused_at_once() -> None:
    from redlock_async import RedlockError
    from redlock_async._core._scripts import ACQUIRE

    c = Cluster()
    c.script(ACQUIRE.name, 1)
    c.script(MULTI_ACQUIRE.name, 1)
    c.script(RELEASE.name, 1)
    c.script(MULTI_RELEASE.name, 1)

    async def main() -> list[str]:
        said = []
        async with c.lock("b"):
            c.script(MULTI_ACQUIRE.name, 0)  # "b" is taken on the nodes: it would wait for ever
            with pytest.raises(RedlockError, match="'b': this task already holds it") as one:
                await multilock(c, ["a", "b"], timeout=None).acquire()
            said.append(str(one.value))
        c.script(MULTI_ACQUIRE.name, 1)
        async with multilock(c, ["a", "b"]):
            c.script(ACQUIRE.name, 0)
            with pytest.raises(RedlockError, match="'a': this task already holds it") as two:
                await c.lock("a", timeout=None).acquire()
            said.append(str(two.value))
            assert not await c.lock("a").acquire(blocking=False)  # asking is still fine
        c.script(ACQUIRE.name, 1)
        async with c.lock("a", timeout=None):  # released: no longer this task's
            pass
        return said

    assert len(run(main(), c.clock)) == 2
