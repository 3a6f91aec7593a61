"""Grants across tasks and processes (lock.token, adopt, locked), attempt limits and
vote records, against real nodes through both drivers."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap

import pytest

from redlock_async import (
    ConfigurationError,
    LockBusy,
    LockNotAcquired,
    LockNotOwned,
    QuorumUnavailable,
    Redlock,
)
from redlock_async.testing import RedisNodes

from ..conftest import MakeRedlock, no_keys_left


async def test_token_is_the_grants_and_none_when_not_held(redlock: Redlock) -> None:
    lock = redlock.lock("job")
    assert lock.token is None
    async with lock:
        token = lock.token
        assert isinstance(token, str)
        int(token[:40], 16)  # random; then the holder's @HOST:PID:MS (test_holder.py)
        assert token[40] == "@"
    assert lock.token is None


async def test_another_process_adopts_and_releases(make_redlock: MakeRedlock) -> None:
    taker, worker, third = make_redlock(), make_redlock(), make_redlock()
    lock = taker.lock("job", ttl=10.0, auto_extend=False)
    assert await lock.acquire()
    assert lock.token is not None
    adopted = await worker.adopt("job", lock.token, ttl=5.0, auto_extend=False)
    assert adopted.held
    assert adopted.token == lock.token
    assert 4.0 < adopted.valid_for <= 5.0
    assert not await third.lock("job").acquire(blocking=False)  # still one grant
    await adopted.release()
    assert await third.lock("job").acquire(blocking=False)  # the adopter's release freed it
    with pytest.raises(LockNotOwned):
        await lock.release()  # the taker's copy: that grant is gone


async def test_adopting_a_released_grant_is_not_owned(
    redlock: Redlock, redis_nodes: RedisNodes
) -> None:
    lock = redlock.lock("job")
    async with lock:
        token = lock.token
    assert token is not None
    with pytest.raises(LockNotOwned, match="no longer holds that token"):
        await redlock.adopt("job", token)
    assert await no_keys_left(redis_nodes)  # an extend never re-creates a key


async def test_an_adopted_grant_is_renewed(make_redlock: MakeRedlock) -> None:
    taker, worker = make_redlock(), make_redlock()
    lock = taker.lock("job", ttl=0.6, auto_extend=False)
    assert await lock.acquire()
    assert lock.token is not None
    async with await worker.adopt("job", lock.token, ttl=0.6) as adopted:
        await asyncio.sleep(1.5)  # well past the taker's ttl: renewed by the adopter
        assert adopted.held
        assert not await taker.lock("job").acquire(blocking=False)


async def test_bad_tokens_are_configuration_errors(redlock: Redlock) -> None:
    for token in ("", "x" * 40, "A" * 40, "0" * 39, "m:" + "0" * 39, "m-" + "0" * 40,
                  "0" * 40 + "@", "0" * 40 + "@h:1", "0" * 40 + "@h:x:1", "0" * 40 + "@h\n:1:2",
                  "0" * 40 + ":h:1:2"):  # fmt: skip
        with pytest.raises(ConfigurationError, match="token"):
            await redlock.adopt("job", token)
    with pytest.raises(ConfigurationError, match="token"):
        await redlock.adopt("job", b"0" * 40)  # type: ignore[arg-type]


async def test_a_multilocks_token_is_refused_and_the_multilock_keeps_every_name(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # Its names' keys are plain locks' keys: adopted as "a", the token's
    # release used to free "a" alone, and a plain lock then took "a" while
    # the multilock still reported "a + b" held.
    taker, worker, third = make_redlock(), make_redlock(), make_redlock()
    multi = taker.multilock(["a", "b"], ttl=10.0, auto_extend=False)
    assert await multi.acquire()
    token = multi.token
    assert token is not None
    for name in ("a", "b", "c"):
        with pytest.raises(ConfigurationError, match=r"multilock's: adopt\(\) takes a plain lock"):
            await worker.adopt(name, token)
    assert token.startswith("m:")  # what adopt() tells it by, on the nodes too
    assert multi.held
    for name in ("a", "b"):
        assert await third.locked(name)
        assert not await third.lock(name).acquire(blocking=False)
    await multi.release()
    assert await no_keys_left(redis_nodes)


@pytest.mark.parametrize("kind", ["read", "write", "semaphore"])
async def test_tokens_of_other_kinds_are_not_plain_grants(
    kind: str, make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # Their keys are not the plain lock key: the nodes refuse the extend.
    taker, worker = make_redlock(), make_redlock()
    rw = taker.rwlock("job")
    lock = {
        "read": rw.read(ttl=10.0, auto_extend=False),
        "write": rw.write(ttl=10.0, auto_extend=False),
        "semaphore": taker.semaphore("job", limit=2, ttl=10.0, auto_extend=False),
    }[kind]
    assert await lock.acquire()
    assert lock.token is not None
    with pytest.raises(LockNotOwned, match="plain locks only"):
        await worker.adopt("job", lock.token)
    assert lock.held
    assert not await worker.locked("job")  # no plain lock key written
    await lock.release()
    assert await no_keys_left(redis_nodes)


@pytest.mark.parametrize("driver", ["resp"])  # the child process uses URLs: one suffices
async def test_adopt_in_a_separate_process(
    driver: str, redlock: Redlock, redis_nodes: RedisNodes
) -> None:
    lock = redlock.lock("job", ttl=10.0, auto_extend=False)
    assert await lock.acquire()
    child = textwrap.dedent(
        """
        import asyncio, sys
        from redlock_async import Redlock

        async def main() -> None:
            async with Redlock(sys.argv[1].split(",")) as redlock:
                adopted = await redlock.adopt("job", sys.argv[2], ttl=5.0)
                print("held", adopted.held)
                await adopted.release()
                print("locked", await redlock.locked("job"))

        asyncio.run(main())
        """
    )
    urls = ",".join(node.url for node in redis_nodes)
    result = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", child, urls, str(lock.token)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["held", "True", "locked", "False"]
    assert not await redlock.locked("job")


async def test_locked_answers_for_the_quorum(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    holder, observer = make_redlock(), make_redlock()
    assert await observer.locked("job") is False
    async with holder.lock("job"):
        assert await observer.locked("job") is True
        redis_nodes[0].kill()
        assert await observer.locked("job") is True  # two of three still hold it
    assert await observer.locked("job") is False


async def test_locked_with_too_few_nodes_is_unavailable(
    redlock: Redlock, redis_nodes: RedisNodes
) -> None:
    redis_nodes[0].kill()
    redis_nodes[1].kill()
    with pytest.raises(QuorumUnavailable) as raised:
        await redlock.locked("job")
    assert len(raised.value.errors) == 2
    # The node that answered is named as such (issue 38), the others as failed.
    failed = ", ".join(redlock.nodes[:2])
    said = f"1 of 3 nodes answered ({redlock.nodes[2]}), 2 failed ({failed}); 2 needed"
    assert said in str(raised.value), raised.value


async def test_adopting_with_too_few_nodes_names_the_node_that_answered(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    taker, worker = make_redlock(), make_redlock()
    lock = taker.lock("job", ttl=30.0, auto_extend=False)
    assert await lock.acquire()
    await worker.locked("job")  # connections up, as in a running service
    redis_nodes[0].kill()
    redis_nodes[1].kill()
    with pytest.raises(QuorumUnavailable, match="too few nodes answered to adopt") as raised:
        await worker.adopt("job", str(lock.token), ttl=30.0)
    message = str(raised.value)
    assert "of 3 answered" not in message  # the old count, of the votes in when decided
    failed = ", ".join(worker.nodes[:2])
    healthy = worker.nodes[2]
    assert (
        f"1 of 3 nodes said yes ({healthy}), 2 failed ({failed}); 2 needed" in message
        or f"0 of 3 nodes said yes, 2 failed ({failed}), 1 not waited for ({healthy})" in message
    ), message


async def test_max_attempts_gives_up_and_records_every_vote(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    holder = make_redlock()
    waiter = make_redlock(retry_delay=0.01, retry_jitter=0.01)
    async with holder.lock("job"):
        with pytest.raises(LockBusy) as raised:
            async with waiter.lock("job", max_attempts=3):
                pytest.fail("entered")
    error = raised.value
    assert error.attempt_count == 3
    assert len(error.attempts) == 3
    assert "3 attempts" in str(error)
    names = {node.url for node in redis_nodes}
    for votes in error.attempts:
        assert not votes.granted
        assert not votes.failed
        # The decision comes at two refusals of three; the third may still be on its way.
        assert len(votes.taken) >= 2
        assert set(votes.taken) | set(votes.unanswered) <= {n.split("//")[1] for n in names} | {
            *votes.taken,
            *votes.unanswered,
        }


async def test_min_validity_refuses_a_grant_that_would_be_too_short(
    make_redlock: MakeRedlock, redis_nodes: RedisNodes
) -> None:
    # Two of three nodes answer 100 ms late: ttl 1.0 s less that and the drift
    # allowance is below the 0.95 s asked for - the nodes say yes, the client refuses.
    redlock = make_redlock(node_timeout=0.5)
    async with redlock.lock("warm"):  # connected before the delay (redis-py's handshake)
        pass
    for node in redis_nodes[:2]:
        node.delay(0.05)
    lock = redlock.lock("job", ttl=1.0, min_validity=0.95, timeout=0)
    with pytest.raises(QuorumUnavailable, match="too slowly") as raised:
        async with lock:
            pytest.fail("entered")
    assert len(raised.value.attempts[-1].granted) >= 2  # the nodes said yes
    for node in redis_nodes[:2]:
        node.delay(0.0)
    assert await no_keys_left(redis_nodes)
    assert await redlock.lock("job", ttl=1.0, min_validity=0.5).acquire(blocking=False)


async def test_lock_not_acquired_still_catches_both(redlock: Redlock) -> None:
    async with redlock.lock("job"):
        with pytest.raises(LockNotAcquired):
            await asyncio.create_task(_enter(redlock))


async def _enter(redlock: Redlock) -> None:
    async with redlock.lock("job", timeout=0):
        pass
