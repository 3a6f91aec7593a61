"""Batched renewals over scripted nodes in virtual time: each grant judged on its own.

Many grants due together go out as one extend_many.lua call per node; each
node answers a list with a vote per grant. These tests script those lists.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping

import pytest

from redlock_async._base._config import LockOptions, RedlockConfig
from redlock_async._base._errors import LockLost, NodeConnectionError
from redlock_async._core._batch import CHUNK
from redlock_async._core._commands import ExclusiveCommands
from redlock_async._core._lock import Lock
from redlock_async._core._renewal import Renewals
from redlock_async._core._scripts import (
    ACQUIRE,
    EXTEND,
    EXTEND_MANY,
    READ_ACQUIRE,
    RELEASE,
    WRITE_ACQUIRE,
)
from redlock_async._engine import Engine

from ._scripted import NEVER, Answer, Cluster, Late, ScriptedNode, Sent, run

DOWN = NodeConnectionError("connection refused")
TTL = 3.0
DRIFT = TTL * 0.01 + 0.002


class NoSpread(random.Random):
    """Renewal spread 0: locks taken together stay due together (one batch)."""

    def random(self) -> float:
        return 0.0


def cluster(**config: object) -> Cluster:
    c = Cluster(**config)  # type: ignore[arg-type]
    c.engine.rng = NoSpread()
    c.script(ACQUIRE.name, 1)
    c.script(RELEASE.name, 1)
    return c


def tokens(sent: Sent) -> list[bytes]:
    """The tokens of an extend_many.lua call, in key order."""
    return [arg for arg in sent.args[1::3] if isinstance(arg, bytes)]


def by_token(votes: Mapping[bytes, object], default: object = 1) -> Callable[[Sent], Answer]:
    """A node answering each key of a batch with the vote given for its token."""

    def answer(sent: Sent) -> Answer:
        return [votes.get(token, default) for token in tokens(sent)]

    return answer


def batches(c: Cluster, node: str = "n0") -> list[list[bytes]]:
    """The tokens of each extend_many.lua call ``node`` got, in order."""
    return [tokens(sent) for name, sent in c.sent(EXTEND_MANY.name) if name == node]


async def hold(locks: list[Lock]) -> None:
    """Acquire every lock at the same instant (so their renewals fall due together)."""
    assert all(await asyncio.gather(*(lock.acquire() for lock in locks)))


def test_one_call_per_node_renews_many_grants_each_on_its_own_quorum() -> None:
    c = cluster()
    # tok1: yes everywhere. tok2: yes on n0 only, refused by n1 and n2 (a
    # quorum no longer holds it). tok3: refused by n2 only (still a quorum).
    c.script(
        EXTEND_MANY.name,
        by_token({}),
        by_token({b"tok2": 0}),
        by_token({b"tok2": 0, b"tok3": 0}),
    )
    lost: list[Lock] = []
    locks = [c.lock(f"r{i}", ttl=TTL, on_lost=lost.append) for i in range(3)]

    async def main() -> None:
        await hold(locks)
        await asyncio.sleep(1.5)  # one renewal

    run(main(), c.clock)
    assert batches(c) == [[b"tok1", b"tok2", b"tok3"]]  # one call per node for all three
    assert len(c.sent(EXTEND_MANY.name)) == 3
    assert c.to(EXTEND.name) == []
    first, second, third = locks
    assert lost == [second]
    assert second.lost
    assert not second.held
    assert first.held
    assert third.held
    assert not first.lost
    assert not third.lost
    # The lost grant alone is cleaned up.
    assert [sent.args for _, sent in c.sent(RELEASE.name)] == [(b"tok2",)] * 3
    # The batch's args: kind, token, ttl in ms, per key (extend_many.lua's layout).
    [(_, sent)] = c.sent(EXTEND_MANY.name)[:1]
    assert sent.keys == tuple(c.keys(f"r{i}").lock for i in range(3))
    assert sent.args == (b"x", b"tok1", 3000, b"x", b"tok2", 3000, b"x", b"tok3", 3000)


def test_a_key_failing_on_one_node_costs_that_grant_its_vote_there_only() -> None:
    c = cluster()
    wrongtype = b"WRONGTYPE Operation against a key holding the wrong kind of value"
    # tok2's key fails on n0 and n1 (a wrong type): no quorum for tok2 alone.
    c.script(
        EXTEND_MANY.name,
        by_token({b"tok2": wrongtype}),
        by_token({b"tok2": wrongtype}),
        by_token({}),
    )
    lost: list[Lock] = []
    locks = [c.lock(f"r{i}", ttl=TTL, on_lost=lost.append) for i in range(3)]
    errors: list[dict[str, str]] = []

    async def main() -> None:
        await hold(locks)
        await asyncio.sleep(1.5)  # the first renewal failed for tok2: it retries
        assert not lost
        await asyncio.wait_for(locks[1].lost_event.wait(), TTL)  # within one validity
        assert isinstance(locks[1]._loss.error, LockLost)
        errors.append({name: str(err) for name, err in locks[1]._loss.error.errors.items()})

    run(main(), c.clock)
    assert lost == [locks[1]]
    assert locks[0].held
    assert locks[2].held
    # Failed votes, not refusals: retried until the validity ran out, then
    # reported with each failing node's own error for that key.
    assert errors == [{"n0": f"n0: {wrongtype.decode()}", "n1": f"n1: {wrongtype.decode()}"}]
    retried = [toks for toks in batches(c) if toks == [b"tok2"]]
    assert len(retried) >= 5


def test_a_node_failing_the_whole_call_fails_its_vote_for_every_grant() -> None:
    c = cluster()
    c.script(EXTEND_MANY.name, DOWN, by_token({}), by_token({}))
    lost: list[Lock] = []
    locks = [c.lock(f"r{i}", ttl=TTL, on_lost=lost.append) for i in range(3)]

    async def main() -> None:
        await hold(locks)
        await asyncio.sleep(10.0)  # many renewals

    run(main(), c.clock)
    assert not lost  # two of three is a quorum for each
    assert all(lock.held for lock in locks)
    assert len(batches(c)) >= 9
    assert all(len(toks) == 3 for toks in batches(c))


def test_a_majority_failing_the_whole_call_loses_every_grant_with_both_errors() -> None:
    c = cluster(node_timeout=0.05)
    c.script(EXTEND_MANY.name, DOWN, NEVER, by_token({}))
    lost: list[Lock] = []
    locks = [c.lock(f"r{i}", ttl=TTL, on_lost=lost.append) for i in range(3)]

    async def main() -> None:
        await hold(locks)
        await asyncio.sleep(4.0)

    run(main(), c.clock)
    assert sorted(lock.name for lock in lost) == ["r0", "r1", "r2"]
    for lock in locks:
        error = lock._loss.error
        assert error is not None
        assert "could not reach a quorum" in str(error)
        assert set(error.errors) == {"n0", "n1"}
        assert "node_timeout" in str(error.errors["n1"])  # the silent one


def test_validity_is_counted_from_before_the_call_was_sent() -> None:
    c = cluster(node_timeout=0.5)
    # Every node answers 0.2 s after the call went out (within node_timeout).
    c.script(EXTEND_MANY.name, lambda sent: Late([1] * len(sent.keys), 0.2))
    lock = c.lock(ttl=TTL)
    valid: list[float] = []

    async def main() -> None:
        await hold([lock])
        await asyncio.sleep(1.2)  # the first renewal went out before +0.97 s; answered
        valid.append(lock.valid_for)

    run(main(), c.clock)
    sent_at = c.times(EXTEND_MANY.name)[0]
    # A full ttl less drift from the send, not from the answer.
    assert valid == [pytest.approx(sent_at + TTL - DRIFT - c.clock())]
    assert lock.valid_for < TTL - DRIFT - 0.2


def test_many_grants_due_together_go_out_in_chunks() -> None:
    c = cluster()
    order: list[str] = []
    for node in c.nodes:
        node.rules[EXTEND_MANY.name] = marking(node, order, by_token({}))
    count = 2 * CHUNK + 7
    locks = [c.lock(f"r{i}", ttl=TTL) for i in range(count)]

    async def main() -> None:
        await hold(locks)
        await asyncio.sleep(1.0)

    run(main(), c.clock)
    sizes = [len(toks) for toks in batches(c)]
    assert sorted(sizes, reverse=True) == [CHUNK, CHUNK, 7]
    every = [token for toks in batches(c) for token in toks]
    assert sorted(every) == sorted(b"tok%d" % i for i in range(1, count + 1))
    assert all(lock.held for lock in locks)
    # n0, n1, n2 for one chunk; the next chunk in the next loop iteration.
    assert order == ["n0", "n1", "n2", "|", "|", "|"] * 3


def marking(
    node: ScriptedNode, order: list[str], rule: Callable[[Sent], Answer]
) -> Callable[[Sent], Answer]:
    """``rule``, logging which node was asked in ``order``, and "|" in the next loop iteration."""

    def answer(sent: Sent) -> Answer:
        order.append(node.name)
        asyncio.get_running_loop().call_soon(order.append, "|")
        return rule(sent)

    return answer


def test_a_renewal_in_flight_past_the_loss_deadline_is_a_loss_at_the_deadline() -> None:
    # node_timeout 0.5 s: a renewal waits that long for the silent nodes, then
    # is retried 0.2 s later. The third try is sent at +2.345 s and would be
    # decided at +2.845 s - after the loss deadline at +2.668 s (validity end
    # less min(node_timeout, ttl/10)). The loss is told at the deadline.
    c = cluster(node_timeout=0.5, retry_delay=0.2)
    c.script(EXTEND_MANY.name, by_token({}), NEVER, NEVER)
    lost_at: list[float] = []
    lock = c.lock(ttl=TTL, on_lost=lambda _: lost_at.append(c.clock()))
    start = c.clock()

    async def main() -> None:
        await hold([lock])
        await asyncio.sleep(4.0)

    run(main(), c.clock)
    assert len(c.times(EXTEND_MANY.name)) == 3
    deadline = start + TTL - DRIFT - min(0.5, TTL / 10)
    assert c.times(EXTEND_MANY.name)[-1] < deadline < c.times(EXTEND_MANY.name)[-1] + 0.5
    assert lost_at == [pytest.approx(deadline, abs=1e-9)]


def test_a_quorum_that_renewed_every_grant_decides_the_batch_without_a_slow_node() -> None:
    # n0 and n1 renew at once; n2 answers each call 2.5 s late (busy with a
    # backlog: node_timeout 2 s keeps its vote). Waiting for it decided each
    # renewal past the loss deadline, and lost a lock a healthy majority
    # held (sim seed 10035). Their yes to every grant decides the batch.
    c = cluster(node_timeout=2.0)
    late = lambda sent: Late([1] * len(tokens(sent)), 2.5)  # noqa: E731
    c.script(EXTEND_MANY.name, by_token({}), by_token({}), late)
    lost: list[Lock] = []
    lock = c.lock(ttl=TTL, on_lost=lost.append)

    async def main() -> None:
        await hold([lock])
        await asyncio.sleep(3 * TTL)
        assert lock.held
        await lock.release()

    run(main(), c.clock)
    assert not lost, lost
    assert len(c.times(EXTEND_MANY.name)) >= 3 * 3  # renewed on, three calls a round


def test_read_and_write_grants_share_the_batch_each_with_its_own_kind_and_key() -> None:
    c = cluster()
    c.script(READ_ACQUIRE.name, 1)
    c.script(WRITE_ACQUIRE.name, 1)
    c.script(EXTEND_MANY.name, by_token({}))
    rw = c.rwlock("doc")
    reader = rw.read(ttl=TTL)
    writer = c.rwlock("other").write(ttl=TTL)
    plain = c.lock("plain", ttl=TTL)

    async def main() -> None:
        await hold([reader, writer, plain])
        await asyncio.sleep(1.5)

    run(main(), c.clock)
    [(_, sent)] = c.sent(EXTEND_MANY.name)[:1]
    assert sent.keys == (c.keys("doc").readers, c.keys("other").writer, c.keys("plain").lock)
    assert sent.args == (b"r", b"tok1", 3000, b"x", b"tok2", 3000, b"x", b"tok3", 3000)
    assert reader.held
    assert writer.held
    assert plain.held


def test_released_locks_leave_the_schedule() -> None:
    c = cluster()
    c.script(EXTEND_MANY.name, by_token({}))
    count = 3000
    locks = [c.lock(f"r{i}", ttl=30.0) for i in range(count)]
    renewals = c.holdings.renewals

    async def main() -> None:
        await hold(locks)
        assert renewals.timetable.entries == count
        for lock in locks[:2500]:
            await lock.release()
        # Stale entries are swept once they are most of the schedule, not
        # kept until their due time (here, in about 20 s).
        assert renewals.timetable.entries <= count - 2500 + 1100

    run(main(), c.clock)
    assert c.to(EXTEND_MANY.name) == []


def test_a_cluster_node_among_the_nodes_sends_renewals_one_by_one() -> None:
    nodes = [ScriptedNode("n0"), ScriptedNode("n1", cross_slot=False), ScriptedNode("n2")]
    engine = Engine(nodes, RedlockConfig(wake_on_release=False))
    assert not Renewals(engine, lambda owner, reason, errors, refused: None).batching
    everywhere = Engine([ScriptedNode(f"n{i}") for i in range(3)], RedlockConfig())
    assert Renewals(everywhere, lambda owner, reason, errors, refused: None).batching


class NotOneKey(ExclusiveCommands):
    """A kind of lock whose grant is not one key extend_many.lua knows."""

    __slots__ = ()

    def renewal_target(self) -> tuple[bytes, bytes] | None:
        return None


def test_a_kind_that_is_not_one_key_is_renewed_alone_beside_the_batch() -> None:
    c = cluster()
    c.renewals(1)
    alone = Lock(c.engine, c.holdings, "odd", LockOptions(ttl=TTL), NotOneKey(c.keys("odd")))
    batched = [c.lock(f"r{i}", ttl=TTL) for i in range(2)]

    async def main() -> None:
        await hold([alone, *batched])
        await asyncio.sleep(1.5)  # one renewal each

    run(main(), c.clock)
    assert batches(c) == [[b"tok2", b"tok3"]]
    assert [sent.args for name, sent in c.sent(EXTEND.name) if name == "n0"] == [(b"tok1", 3000)]
    assert all(lock.held for lock in [alone, *batched])
