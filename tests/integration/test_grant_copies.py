"""Live copies of one grant never shorten each other's keys (issue 24), on real nodes.

A grant may be renewed by several copies at once: the lock that took it and
the one that adopted it, or one lock extended to a long ttl and then to a
short one. Every renewal script only raises an expiry (a reader's score
included), so each copy's ``held`` and ``valid_for`` stay a lower bound of
how long a quorum keeps the keys, whatever the other copies ask for.
"""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import NamedTuple

import pytest

from redlock_async import Lock, Redlock, SemaphoreLock
from redlock_async._base._keys import KeyLayout
from redlock_async._core._batch import extend_many
from redlock_async._engine import Command
from redlock_async.testing import RedisNode, RedisNodes

from ..conftest import MakeRedlock, eventually

JOB = KeyLayout("redlock:", "job")


def server_ms(node: RedisNode) -> int:
    seconds, micros = node.client().time()
    return int(seconds) * 1000 + int(micros) // 1000


def key_ms(node: RedisNode, key: bytes) -> int:
    """How long ``key`` has left on ``node``, in ms (-2: absent)."""
    return int(node.client().pttl(key))


def reader_ms(node: RedisNode, key: bytes, token: bytes) -> int:
    """How long the reader ``token`` has left in the set ``key`` on ``node``, in ms."""
    score = node.client().zscore(key, token)
    return -2 if score is None else int(score) - server_ms(node)


class _Target(NamedTuple):
    """One grant's part of a batched renewal (``_batch.Target``)."""

    kind: bytes
    key: bytes


def token_of(lock: Lock) -> bytes:
    assert lock.token is not None
    return lock.token.encode()


async def test_an_adopters_longer_ttl_survives_the_takers_renewals(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # The schedule of issue 24: A takes the lock auto-extended with a short
    # ttl and hands its token to B, which adopts it with a long ttl. A's
    # renewals used to cut the key back to A's ttl while B reported ~30 s;
    # once A stopped renewing, a third client was granted the name while B
    # still claimed it: two holders.
    taker, worker, third = make_redlock(), make_redlock(), make_redlock()
    a = taker.lock("job", ttl=1.0)  # auto_extend: renewed in batches (extend_many.lua)
    assert await a.acquire()
    b = await worker.adopt("job", a.token or "", ttl=30.0)
    await asyncio.sleep(1.2)  # three or four of A's renewals, each to 1 s
    assert a.held
    assert b.held
    claim = b.valid_for
    assert claim > 25.0
    for node in redis_nodes:
        assert key_ms(node, JOB.lock) >= claim * 1000, node.url
    # A is dropped (a process that stops renewing): no release, its renewals end.
    dropped = weakref.ref(a)
    del a
    gc.collect()
    assert dropped() is None
    await asyncio.sleep(1.5)  # past A's ttl
    assert b.held
    assert not await third.lock("job").acquire(blocking=False)  # B's: still one holder
    await b.release()
    assert await third.lock("job").acquire(blocking=False)


async def test_a_copy_lost_for_want_of_answers_leaves_the_adopted_copy_its_keys(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # The mixed workload's overlap (issue 25's open one): the taker, auto-
    # extended with a short ttl, could not renew in time (its event loop
    # stalled, or its nodes were slow) and was told it lost the lock - and
    # then released the token's keys, which were the adopter's too: a third
    # client was granted the name while the adopter still claimed it. A copy
    # lost for want of answers must leave the keys to expire.
    proxy = redis_nodes._proxy
    assert proxy is not None
    listeners = [proxy.add(node.direct_port) for node in redis_nodes]
    taker_nodes = [
        RedisNode(node.server, listener)
        for node, listener in zip(redis_nodes, listeners, strict=True)
    ]
    taker, worker, third = make_redlock(taker_nodes), make_redlock(), make_redlock()
    a = taker.lock("job", ttl=1.0)  # auto_extend
    assert await a.acquire()
    token = token_of(a)
    b = await worker.adopt("job", a.token or "", ttl=30.0)
    for listener in listeners:  # the taker's nodes answer too late from now on
        listener.delay(0.5)
    assert await eventually(lambda: a.lost)
    for listener in listeners:
        listener.heal()
    await asyncio.sleep(1.5)  # anything the taker sent (or resent) has landed
    assert b.held
    for node in redis_nodes:
        assert node.client().get(JOB.lock) == token, node.url
    assert not await third.lock("job").acquire(blocking=False)  # still one holder: B
    await b.release()
    assert await third.lock("job").acquire(blocking=False)


async def test_an_adoption_with_a_shorter_ttl_keeps_the_takers_expiry(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # adopt() is an extend: a short ttl there must not cut the taker's key.
    taker, worker, third = make_redlock(), make_redlock(), make_redlock()
    a = taker.lock("job", ttl=20.0, auto_extend=False)
    assert await a.acquire()
    b = await worker.adopt("job", a.token or "", ttl=0.5, auto_extend=False)
    assert 0 < b.valid_for <= 0.5  # its own claim: a lower bound
    claim = a.valid_for
    for node in redis_nodes:
        assert key_ms(node, JOB.lock) >= claim * 1000, node.url
    await asyncio.sleep(0.8)  # past B's ttl
    assert not b.held  # B claims nothing beyond its own ttl...
    assert a.held  # ...and A keeps all of its own
    assert not await third.lock("job").acquire(blocking=False)
    await a.release()


def _exclusive(redlock: Redlock) -> Lock:
    return redlock.lock("job", ttl=2.0, auto_extend=False)


def _writer(redlock: Redlock) -> Lock:
    return redlock.rwlock("job").write(ttl=2.0, auto_extend=False)


def _reader(redlock: Redlock) -> Lock:
    return redlock.rwlock("job").read(ttl=2.0, auto_extend=False)


def _semaphore(redlock: Redlock) -> Lock:
    return redlock.semaphore("job", limit=3, ttl=2.0, auto_extend=False)


def _multilock(redlock: Redlock) -> Lock:
    return redlock.multilock(["job", "other"], ttl=2.0, auto_extend=False)


def _left(node: RedisNode, lock: Lock, kind: str, token: bytes) -> list[int]:
    """How long each key (or reader entry) of the grant ``token`` has left on ``node``,
    in ms; empty when the node does not hold the grant."""
    if kind == "reader":
        entry = reader_ms(node, JOB.readers, token)
        return [] if entry < 0 else [entry, key_ms(node, JOB.readers)]
    if kind == "writer":
        keys = [JOB.writer]
    elif kind == "semaphore":
        assert isinstance(lock, SemaphoreLock)
        assert lock.slot is not None
        keys = [JOB.semaphore_slot(lock.slot)]
    elif kind == "multilock":
        keys = [JOB.lock, KeyLayout("redlock:", "other").lock]
    else:
        keys = [JOB.lock]
    client = node.client()
    return [key_ms(node, key) for key in keys if client.get(key) == token]


KINDS: dict[str, Callable[[Redlock], Lock]] = {
    "exclusive": _exclusive,
    "writer": _writer,
    "reader": _reader,
    "semaphore": _semaphore,
    "multilock": _multilock,
}


@pytest.mark.parametrize("kind", KINDS)
async def test_a_shorter_extend_never_shortens_a_key(
    kind: str, redlock: Redlock, redis_nodes: RedisNodes
) -> None:
    # One lock object, extended to 30 s and then to 1 s: two renewals of one
    # grant asking for different expiries, as two copies would. The second
    # succeeds and reports only its own 1 s; the keys keep the 30 s.
    lock = KINDS[kind](redlock)
    assert await lock.acquire(blocking=False)
    token = token_of(lock)
    await lock.extend(ttl=30.0)
    await lock.extend(ttl=1.0)
    assert lock.held
    assert 0 < lock.valid_for <= 1.0

    def kept() -> bool:
        # A quorum holds it with its keys at the 30 s. (Not every node that
        # holds it: one whose vote on the 30 s extend timed out on a loaded
        # machine keeps the acquire's shorter key, which the 1 s extend did
        # not shorten either.)
        held = [_left(node, lock, kind, token) for node in redis_nodes]
        return sum(1 for left in held if left and all(ms > 28_000 for ms in left)) >= 2

    assert await eventually(kept, within=3.0), [_left(n, lock, kind, token) for n in redis_nodes]
    await lock.release()


async def _everywhere(redlock: Redlock, command: Command) -> Sequence[object]:
    """Every node's reply to ``command`` (a list reply is neither yes nor no to a
    tally: read the replies once all are in)."""
    tally = redlock._core.fanout(command)
    assert await eventually(lambda: tally.missing == 0)
    return tally.replies


async def test_a_batched_renewal_never_lowers_a_key_or_a_readers_expiry(
    redlock: Redlock, redis_nodes: RedisNodes
) -> None:
    # The background renewals' call (extend_many.lua, built as Renewals builds
    # it), sent as two copies of each grant would send it: to 30 s, then to 1 s.
    lock = redlock.lock("job", ttl=2.0, auto_extend=False)
    reader = redlock.rwlock("job").read(ttl=2.0, auto_extend=False)
    assert await lock.acquire(blocking=False)
    assert await reader.acquire(blocking=False)
    r = token_of(reader)
    # Every node holds both first (decisions do not wait for the slowest node).
    assert await eventually(
        lambda: all(
            reader_ms(n, JOB.readers, r) > 0 and key_ms(n, JOB.lock) > 0 for n in redis_nodes
        )
    )
    assert lock._grant is not None
    assert reader._grant is not None
    targets = [_Target(b"x", JOB.lock), _Target(b"r", JOB.readers)]
    for ttl in (30.0, 1.0):  # each grant renewed to its own ttl, as a copy of it would
        grants = [replace(lock._grant, ttl=ttl), replace(reader._grant, ttl=ttl)]
        replies = await _everywhere(redlock, extend_many(targets, grants))
        assert replies == [[1, 1]] * len(redis_nodes)  # the shorter ask is a yes too
    for node in redis_nodes:
        assert key_ms(node, JOB.lock) > 28_000
        assert reader_ms(node, JOB.readers, r) > 28_000  # the reader's own score kept
        assert key_ms(node, JOB.readers) > 28_000
    await lock.release()
    await reader.release()
