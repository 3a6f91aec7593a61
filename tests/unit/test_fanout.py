"""The fan-out's decisions, driven by in-memory stand-in nodes (no sockets).

These nodes only record what was sent and answer when the test says so: they
check the vote counting and ordering logic, never lock semantics (those are
proven against real redis-server processes in tests/integration).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Sequence

import pytest

from redlock_async._base._config import RedlockConfig
from redlock_async._base._errors import NodeConnectionError, NodeResponseError, NodeTimeoutError
from redlock_async._core._scripts import ACQUIRE, RELEASE
from redlock_async._engine import Engine
from redlock_async._engine._node import Command
from redlock_async._engine._quorum import Quorum
from redlock_async._engine._restarts import Restarts
from redlock_async._engine._tally import PENDING, Tally
from redlock_async._engine._ttls import TtlLedger

from .._loops import LOOPS
from ._scripted import ScriptedNode, scripted_nodes


def nodes(n: int, *, ordered: bool = True) -> list[ScriptedNode]:
    return scripted_nodes(n, ordered=ordered)


def fanout(group: Sequence[ScriptedNode], node_timeout: float = 10.0) -> Tally:
    return Quorum(group, node_timeout).fanout(Command(ACQUIRE, [b"k"], [b"t", 100]))


async def test_decides_at_quorum_without_waiting_for_the_rest() -> None:
    group = nodes(5)
    tally = fanout(group)
    assert all(node.sent for node in group)  # sent to all at once
    for node in group[:3]:
        node.answer(1)
    assert tally.decided.done()
    assert tally.decided.result() is True
    assert tally.replies[3] is PENDING
    assert tally.errors() == {}  # a node that simply has not answered yet is no error


async def test_decides_failure_once_quorum_is_out_of_reach() -> None:
    group = nodes(5)
    tally = fanout(group)
    group[0].answer(0)
    group[1].answer(NodeConnectionError("down"))
    assert not tally.decided.done()
    group[2].answer(0)
    assert tally.decided.result() is False
    assert set(tally.errors()) == {"n1"}


async def test_silent_nodes_time_out_as_failed_votes() -> None:
    group = nodes(3)
    tally = fanout(group, node_timeout=0.01)
    group[0].answer(1)
    assert await tally.decided is False
    errors = tally.errors()
    assert set(errors) == {"n1", "n2"}
    assert all(isinstance(e, NodeTimeoutError) for e in errors.values())
    assert group[1].stall_checks == group[2].stall_checks == 1
    group[1].answer(1)  # a late reply is still recorded
    assert tally.replies[1] == 1


async def test_cleanup_waits_for_the_in_flight_command_on_unordered_nodes() -> None:
    group = nodes(3, ordered=False)
    core = Engine(group, RedlockConfig(node_timeout=10.0))
    acquire = core.fanout(Command(ACQUIRE, [b"k"], [b"tok", 100]))
    group[0].answer(1)
    group[1].answer(0)
    acquire.abandon()
    core.undo(acquire, Command(RELEASE, [b"k"], [b"tok"]))
    # Node 0 said yes: released now. Node 1 said no: left alone.
    assert group[0].sent[-1][:3] == ("release", (b"k",), (b"tok",))
    assert group[1].scripts() == ["acquire"]
    # Node 2 has not answered: its release waits until the acquire settles.
    assert group[2].scripts() == ["acquire"]
    group[2].answer(1)
    assert group[2].sent[-1][:3] == ("release", (b"k",), (b"tok",))


async def test_ordered_nodes_get_cleanup_at_once() -> None:
    group = nodes(3)
    core = Engine(group, RedlockConfig(node_timeout=10.0))
    acquire = core.fanout(Command(ACQUIRE, [b"k"], [b"tok", 100]))
    core.undo(acquire, Command(RELEASE, [b"k"], [b"tok"]))
    assert all(node.sent[-1].script == RELEASE.name for node in group)


async def test_fanout_outcomes_never_raise() -> None:
    group = nodes(3)
    tally = fanout(group)
    for node in group:
        node.answer(NodeConnectionError("refused"))
    assert await asyncio.wait_for(tally.decided, 1) is False
    assert len(tally.errors()) == 3


async def test_only_incomplete_fanouts_wait_for_their_deadline() -> None:
    group = nodes(3)
    quorum = Quorum(group, node_timeout=0.01)
    complete = quorum.fanout(Command(ACQUIRE, [b"k"], [b"t", 100]))
    silent = quorum.fanout(Command(ACQUIRE, [b"k2"], [b"t", 100]))
    for node in group:
        node.answer(1)  # every node answers the first fan-out
    # The complete tally left the deadline queue at once (it would otherwise
    # live on until its deadline: garbage the collector has to promote).
    assert list(quorum._due) == [silent]
    group[0].answer(1)
    assert await silent.decided is False  # n1, n2 stayed silent: timed out
    assert silent.expired
    assert not complete.expired
    assert not quorum._due
    quorum.close()


async def test_a_failed_extend_to_a_shorter_ttl_shortens_the_validity() -> None:
    # Found by the model (tests/faults/test_model.py): an extend to 0.1 s that
    # reached one node of three failed; that node now drops the key 0.1 s
    # after the extend was sent, so the grant's old validity is no longer
    # held by a majority and must not be claimed any more.
    from redlock_async._core._grant import Grant, judge_extend

    group = nodes(3)
    core = Engine(group, RedlockConfig(node_timeout=10.0))
    started = core.clock()
    acquired = core.fanout(Command(ACQUIRE, [b"k"], [b"tok", 5000]))
    for node in group:
        node.answer(1)
    grant = Grant(b"tok", 5.0, started + 4.9, acquired)
    extend = core.fanout(Command(ACQUIRE, [b"k"], [b"tok", 100]))
    group[0].answer(1)
    group[1].answer(NodeConnectionError("down"))
    group[2].answer(NodeConnectionError("down"))
    assert await extend.decided is False
    assert extend.replies[0] == 1  # it reached one node, decided without waiting
    assert not extend.expired
    assert judge_extend(grant, extend, started, core.clock(), 0.1, 0.01) == "retry"
    assert grant.validity_end <= started + 0.1
    core.close()  # no deadline timer left for the loop to wait out


def test_fanouts_use_the_loop_they_run_in() -> None:
    # The quorum remembers its loop (asking costs a syscall); a fan-out from
    # another loop, later or in another thread, must still use that loop.
    group = nodes(3)
    quorum = Quorum(group, node_timeout=10.0)

    async def fan() -> asyncio.AbstractEventLoop:
        tally = quorum.fanout(Command(ACQUIRE, [b"k"], [b"t", 100]))
        for node in group:
            node.answer(1)
        assert await tally.decided
        return tally.decided.get_loop()

    first = asyncio.new_event_loop()
    second = asyncio.new_event_loop()
    try:
        assert first.run_until_complete(fan()) is first
        assert second.run_until_complete(fan()) is second
        assert first.run_until_complete(fan()) is first
        results: list[asyncio.AbstractEventLoop] = []
        thread = threading.Thread(target=lambda: results.append(asyncio.run(fan())))
        thread.start()
        thread.join()
        assert len(results) == 1
        assert results[0] not in (first, second)
    finally:
        first.close()
        second.close()


@pytest.mark.skipif("uvloop" not in LOOPS, reason="uvloop is not installed")
def test_fanouts_switch_between_asyncio_and_uvloop() -> None:
    # uvloop's loop is no BaseEventLoop: the quorum asks for it on every
    # fan-out instead of remembering it, and must never keep using a loop
    # (or its clock, or its futures) that is not the running one.
    group = nodes(3)
    quorum = Quorum(group, node_timeout=0.05)

    async def fan() -> tuple[bool, bool]:
        running = asyncio.get_running_loop()
        assert quorum.running_loop() is running
        tally = quorum.fanout(Command(ACQUIRE, [b"k"], [b"t", 100]))
        assert tally.decided.get_loop() is running
        for node in group[:2]:
            node.answer(1)
        decided = await tally.decided
        # One node stays silent: the deadline timer, on this loop, fails it.
        silent = quorum.fanout(Command(ACQUIRE, [b"k"], [b"t", 100]))
        group[2].waiting.clear()
        group[0].answer(1)
        group[1].answer(NodeConnectionError("down"))
        # Undecided (one yes, one failure) until the deadline expires it.
        assert not await asyncio.wait_for(silent.decided, 5.0)
        return decided, silent.expired

    made = [LOOPS[name]() for name in ("asyncio", "uvloop", "asyncio", "uvloop")]
    try:
        for loop in made:
            assert loop.run_until_complete(fan()) == (True, True)
    finally:
        for loop in made:
            loop.close()


async def test_a_forked_child_uses_its_own_loop() -> None:
    # Forked while this loop runs: the child's copy of it looks like it runs
    # in the child's thread too, yet the child must use the loop it starts.
    group = nodes(3)
    quorum = Quorum(group, node_timeout=10.0)
    warm = quorum.fanout(Command(ACQUIRE, [b"k"], [b"t", 100]))  # remembers this loop
    for node in group:
        node.answer(1)
    assert await warm.decided

    async def fan_in_child() -> bool:
        tally = quorum.fanout(Command(ACQUIRE, [b"k"], [b"t", 100]))
        for node in group:
            node.answer(1)
        return await tally.decided and tally.decided.get_loop() is asyncio.get_running_loop()

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, then leave at once
        os.close(read)
        try:
            ok = asyncio.run(fan_in_child())
        except BaseException:
            ok = False
        os.write(write, b"ok" if ok else b"no")
        os._exit(0)
    os.close(write)
    report = os.read(read, 10)
    os.close(read)
    os.waitpid(pid, 0)  # noqa: ASYNC222 - it has reported and is exiting
    assert report == b"ok"


async def test_the_tally_applies_restart_quarantine_to_granting_scripts_only() -> None:
    # Drivers only report what they see of the server; the tally alone turns
    # a watched node's yes into a failed vote, whichever driver it uses.
    group = scripted_nodes(3)
    blind = Restarts("n0", TtlLedger(), None)
    blind.unknown("INFO refused")  # restarts cannot be seen: yes votes fail
    group[0].restarts = blind
    acquire = fanout(group)
    group[0].answer(1)
    assert isinstance(acquire.replies[0], NodeResponseError)
    assert set(acquire.errors()) == {"n0"}
    release = Quorum(group, 10.0).fanout(Command(RELEASE, [b"k"], [b"t"]))
    group[0].answer(1)
    assert release.replies[0] == 1  # not a grant: counted as given
