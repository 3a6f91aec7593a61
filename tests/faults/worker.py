"""One worker process of the fault suite: a seeded workload, its history on disk.

Run by the orchestrator as ``python -m tests.faults.worker '<json config>'``.
Every event is one JSON line, written (line-buffered) the moment it happens,
on ``time.monotonic()`` - the same clock in every process on the machine - so
a worker that is SIGKILLed still leaves its history up to that point.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import random
import sys
import time
from typing import Any, TextIO

import redis.asyncio

from redlock_async import (
    Lock,
    LockLost,
    LockNotAcquired,
    QuorumUnavailable,
    Redlock,
    RedlockError,
)
from redlock_async._base import _world

from . import mixed, mutants

# The resource's fenced increment: a write carrying a fencing token lower than
# one the resource has already seen is refused (how a fenced store behaves).
FENCED_INCR = """
local top = tonumber(redis.call('GET', KEYS[2]) or '-1')
local fence = tonumber(ARGV[1])
if fence < top then return -1 end
redis.call('SET', KEYS[2], fence)
return redis.call('INCR', KEYS[1])
"""


class Recorder:
    def __init__(self, path: str, process: str) -> None:
        self._file: TextIO = open(path, "a", buffering=1)  # noqa: SIM115 - lives as long as the process
        self.process = process

    def __call__(self, kind: str, op: str, **fields: Any) -> None:
        event = {"time": time.monotonic(), "process": self.process, "kind": kind, "op": op}
        event.update({k: v for k, v in fields.items() if v is not None})
        self._file.write(json.dumps(event) + "\n")


# The tokens of the attempts the current task's acquire made (see _watch_tokens):
# a cancelled acquire's tokens go into its history event, so a key left
# behind can be traced to it.
_ATTEMPTS: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "attempts", default=None
)


def _watch_tokens(redlock: Redlock) -> Redlock:
    make = redlock._core.new_token

    def new_token() -> bytes:
        token = make()
        tokens = _ATTEMPTS.get()
        if tokens is not None:
            tokens.append(token.decode())
        return token

    redlock._core.new_token = new_token
    return redlock


MULTI_NAMES = ["a", "b", "c", "d"]
"""The names of the ``multi`` workload: sets of 1-3 of them overlap often."""


def _token(lock: Lock) -> str:
    grant = lock._grant
    return grant.token.decode() if grant is not None else ""


async def run(config: dict[str, Any]) -> None:
    record = Recorder(config["out"], config["process"])
    rng = random.Random(config["seed"])
    workload: str = config["workload"]
    start: float = config.get("start", 0.0)
    if start:
        # A process started later (after a restart, say): it has seen nothing
        # of the nodes before, so it waits before making any connection or
        # Redlock, and its run still ends about when the others' do.
        await asyncio.sleep(max(0.0, config["epoch"] + start - time.monotonic()))
    deadline = time.monotonic() + config["duration"] - start
    resource = redis.asyncio.Redis.from_url(config["resource"])
    clients: list[redis.asyncio.Redis] = []
    if config.get("driver") == "redis-py":
        # Clients passed in: the library's redis-py driver (Redlock leaves them open).
        clients = [redis.asyncio.Redis.from_url(url) for url in config["urls"]]

    def new_redlock(urls: list[Any] | None = None) -> Redlock:
        nodes: list[Any] = urls or list(clients) or list(config["urls"])
        return _watch_tokens(Redlock(nodes, **config.get("redlock", {})))

    if workload == "mixed":
        # Every primitive at once (mixed.py): its own tasks, same history.
        try:
            lag = await mixed.run(config, record, new_redlock, _ATTEMPTS)
        finally:
            await resource.aclose()
        await asyncio.sleep(0)  # let cancelled callbacks run
        stray = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        record("done", "worker", value=len(stray), detail=f"loop lag max {lag * 1000:.0f} ms")
        return

    redlock = new_redlock()
    ttl: float = config["ttl"]
    hold_min, hold_max = config.get("hold", (0.0, 0.05))
    overrun: float = config.get("overrun", 0.0)
    key = config.get("key", "job")
    holding: set[str] = set()
    stall_share, stall = config.get("stall_in_acquire", (0.0, 0.0))
    if stall_share:
        # A stall of this process's event loop while an acquire is in flight
        # (sent, replies not yet read): the attempt takes that much longer,
        # and its validity must say so.
        send = redlock._core.fanout
        event_loop = asyncio.get_running_loop()

        def fanout(command: Any, **kwargs: Any) -> Any:
            tally = send(command, **kwargs)
            if command.script.grants and rng.random() < stall_share:
                record("fault", "stall-in-acquire", detail=f"{stall}s")
                event_loop.call_soon(time.sleep, stall)  # after the writes already queued
            return tally

        redlock._core.fanout = fanout

    async def critical_section(lock: Lock, token: str, fence: int | None) -> None:
        # A careful holder acts only while its lease is valid. Pauses between
        # that check and the write are the nemesis's business.
        if workload == "counter" and config.get("work_while_held"):
            # A long job in steps, each only while the lock says it is held:
            # how careful code uses `lock.held`. A clock that lies shows as
            # lost updates: steps taken after the lease had really ended.
            end = time.monotonic() + rng.uniform(hold_min, hold_max)
            while lock.held and time.monotonic() < end:
                value = int(await resource.get("counter") or 0)
                await asyncio.sleep(config.get("gap", 0.002))
                await resource.set("counter", value + 1)
                record("ok", "increment", key=key, token=token, value=value + 1)
            return
        if workload in ("counter", "fenced", "handoff") and lock.valid_for > 0:
            gap = config.get("gap", 0.002)
            if workload == "fenced":
                assert fence is not None
                await asyncio.sleep(rng.uniform(gap / 2, gap))  # preparing the write
                result = await resource.eval(FENCED_INCR, 2, "counter", "fence", fence)
                ok = int(result) >= 0
                record("ok" if ok else "fail", "fenced-write", key=key, token=token,
                       fence=fence, value=int(result) if ok else None)  # fmt: skip
            else:
                value = int(await resource.get("counter") or 0)
                await asyncio.sleep(rng.uniform(gap / 2, gap))  # the read-modify-write gap
                await resource.set("counter", value + 1)
                record("ok", "increment", key=key, token=token, value=value + 1)
        if rng.random() < overrun:
            # Late: the lease runs out while the holder dawdles (it acts no
            # more). Then it releases, or tries to extend: a late extend may
            # only succeed if its keys were never lost - if it does, the
            # holder claims the lock again, from now.
            await asyncio.sleep(lock.valid_for + rng.uniform(0.05, 0.3))
            if rng.random() < 0.5:
                try:
                    await lock.extend()
                except RedlockError:
                    return
                record("ok", "acquire", key=key, token=token, fence=fence,
                       valid_until=time.monotonic() + lock.valid_for)  # fmt: skip
                await asyncio.sleep(min(rng.uniform(hold_min, hold_max), lock.valid_for))
            return
        await asyncio.sleep(min(rng.uniform(hold_min, hold_max), lock.valid_for))

    def attempts(op: str, tokens: list[str], granted: str) -> None:
        # The tokens of attempts that did not become the grant (refused,
        # rolled back): a key one of them left can be traced to it.
        failed = [t for t in tokens if t != granted]
        if failed:
            record("attempts", op, key=key, detail=" ".join(failed))

    async def one_grant(index: int) -> None:
        kind = "exclusive"
        if workload == "rw":
            kind = "write" if rng.random() < config.get("write_share", 0.3) else "read"
            if config.get("writer_tasks"):  # dedicated writers and readers
                kind = "write" if index < config["writer_tasks"] else "read"
        if workload == "semaphore":
            kind = "semaphore"
        op = {
            "exclusive": "acquire",
            "read": "read-acquire",
            "write": "write-acquire",
            "semaphore": "sem-acquire",
        }[kind]
        options: dict[str, Any] = {
            "ttl": ttl,
            "auto_extend": workload == "renew",
            "fencing": workload == "fenced" or (kind == "write" and config.get("fencing", False)),
            "fair": config.get("fair", False),
        }
        if workload == "rw":
            rw = redlock.rwlock(key)
            lock: Lock = rw.read(**options) if kind == "read" else rw.write(**options)
        elif workload == "semaphore":
            # Holders only claim their windows (semaphore_limit judges them).
            lock = redlock.semaphore(key, config["limit"], **options)
        else:
            lock = redlock.lock(key, cancel_on_lost=workload == "renew", **options)
        record("invoke", op, key=key)
        tokens: list[str] = []
        _ATTEMPTS.set(tokens)
        try:
            ok = await lock.acquire(timeout=config.get("acquire_timeout", 1.0))
        except RedlockError as exc:
            attempts(op, tokens, "")
            record("fail", op, key=key, detail=str(exc)[:200])
            return
        if not ok:
            attempts(op, tokens, "")
            record("fail", op, key=key, detail="timeout")
            return
        grant = lock._grant
        assert grant is not None
        token = grant.token.decode()
        attempts(op, tokens, token)  # before the grant: holders() reads the last line
        now = time.monotonic()
        # An auto-renewed holder claims the lock until it is told of a loss
        # (or releases); others until the validity acquire() reported.
        claim = None if workload == "renew" else now + lock.valid_for
        record("ok", op, key=key, token=token, fence=lock.fencing_token, valid_until=claim)
        holding.add(token)
        try:
            if workload == "renew":
                await renewed_hold(lock, token)
            else:
                await critical_section(lock, token, lock.fencing_token)
        finally:
            holding.discard(token)
            record("release", op, key=key, token=token)
            try:
                await lock.release()
            except (RedlockError, LockLost) as exc:
                record("fail", "release", key=key, token=token, detail=type(exc).__name__)

    async def multi_grant() -> None:
        # Overlapping sets of names, each named in a shuffled order; a set of
        # one is a plain lock. Each name is recorded as a grant of its own
        # (one token), so mutual exclusion is checked per name, across
        # multilocks and plain locks alike.
        names = rng.sample(MULTI_NAMES, rng.choice((1, 2, 2, 3)))
        lock = (
            redlock.multilock(names, ttl=ttl, auto_extend=False)
            if len(names) > 1
            else redlock.lock(names[0], ttl=ttl, auto_extend=False)
        )
        for name in names:
            record("invoke", "acquire", key=name)
        try:
            ok = await lock.acquire(timeout=config.get("acquire_timeout", 1.0))
        except RedlockError as exc:
            ok, detail = False, str(exc)[:200]
        else:
            detail = "timeout"
        if not ok:
            for name in names:
                record("fail", "acquire", key=name, detail=detail)
            return
        token = _token(lock)
        claim = time.monotonic() + lock.valid_for
        for name in names:
            record("ok", "acquire", key=name, token=token, valid_until=claim)
        holding.add(token)
        try:
            await asyncio.sleep(min(rng.uniform(hold_min, hold_max), lock.valid_for))
        finally:
            holding.discard(token)
            for name in names:
                record("release", "acquire", key=name, token=token)
            try:
                await lock.release()
            except (RedlockError, LockLost) as exc:
                record("fail", "release", key=names[0], token=token, detail=type(exc).__name__)

    # The handoff workload's second Redlock: its own connections, as the
    # process a grant is handed to (a background job) would have.
    adopter = new_redlock() if workload == "handoff" else None

    async def handoff_grant() -> None:
        # Taken here, its token handed on (after a while: sometimes longer
        # than the ttl, when adopting must fail), adopted by the other
        # Redlock, which increments the counter under it and releases it.
        # Each holder's window is recorded: the taker's ends at the handoff.
        assert adopter is not None
        lock = redlock.lock(key, ttl=ttl, auto_extend=False)
        record("invoke", "acquire", key=key)
        try:
            ok = await lock.acquire(timeout=config.get("acquire_timeout", 1.0))
        except RedlockError as exc:
            record("fail", "acquire", key=key, detail=str(exc)[:200])
            return
        if not ok:
            record("fail", "acquire", key=key, detail="timeout")
            return
        token = lock.token
        assert token is not None
        record("ok", "acquire", key=key, token=token, valid_until=time.monotonic() + lock.valid_for)
        await asyncio.sleep(rng.uniform(0.0, 1.5 * ttl))  # the hand-over takes its time
        record("release", "acquire", key=key, token=token)  # the taker is done with it
        record("invoke", "acquire", key=key, token=token, detail="adopt")
        try:
            adopted = await adopter.adopt(key, token, ttl=ttl, auto_extend=False)
        except RedlockError as exc:  # LockNotOwned (expired, taken), QuorumUnavailable
            record("fail", "acquire", key=key, token=token, detail=f"adopt: {exc}"[:200])
            return
        record("ok", "acquire", key=key, token=token,
               valid_until=time.monotonic() + adopted.valid_for, detail="adopted")  # fmt: skip
        holding.add(token)
        try:
            await critical_section(adopted, token, None)
        finally:
            holding.discard(token)
            record("release", "acquire", key=key, token=token)
            try:
                await adopted.release()
            except (RedlockError, LockLost) as exc:
                record("fail", "release", key=key, token=token, detail=type(exc).__name__)

    async def renewed_hold(lock: Lock, token: str) -> None:
        # Long holds, renewed in the background: the nemesis takes the majority
        # away at times. The holder's window ends when it is told of a loss.
        lost = asyncio.ensure_future(lock.lost_event.wait())
        try:
            await asyncio.wait({lost}, timeout=rng.uniform(hold_min, hold_max))
        finally:
            lost.cancel()
        if lock.lost:
            record("lost", "acquire", key=key, token=token)

    cancel_share: float = config.get("cancel_share", 0.0)
    # Locks whose release (or acquire) was cancelled: an application keeps
    # such an object (an attribute, a registry) - dropping it would let the
    # garbage collector stop a renewal the library should have stopped.
    abandoned: list[tuple[Lock, float]] = []

    def cancels(share: float = 1.0) -> bool:
        return cancel_share > 0 and rng.random() < cancel_share * share

    def soon() -> float:
        # A random point: mid-command (a few ms) or mid-wait (retries, renewals).
        return rng.uniform(0.0, 0.004) if rng.random() < 0.7 else rng.uniform(0.0, 0.3)

    async def chaos_hold(lock: Lock, token: str) -> bool:
        """A renewed holder's body; False once it was told the lock is lost."""
        if workload == "counter" and lock.held:
            value = int(await resource.get("counter") or 0)
            try:
                await asyncio.sleep(rng.uniform(0, config.get("gap", 0.002)))
            except asyncio.CancelledError:
                record("unknown", "increment", key=key, token=token)  # never written
                raise
            await resource.set("counter", value + 1)
            record("ok", "increment", key=key, token=token, value=value + 1)
        end = time.monotonic() + rng.uniform(hold_min, hold_max)
        while (left := end - time.monotonic()) > 0:
            if lock.lost:
                record("lost", "acquire", key=key, token=token)
                return False
            step = min(left, 0.05)
            if rng.random() < config.get("extend_rate", 0.0) * step:
                try:
                    if cancels():
                        async with asyncio.timeout(soon()):
                            await lock.extend()
                    else:
                        await lock.extend()
                except TimeoutError:
                    record("cancel", "extend", key=key, token=token)
                except QuorumUnavailable:
                    pass  # unconfirmed while still valid: still held, its renewal goes on
                except RedlockError as exc:
                    record("lost", "acquire", key=key, token=token, detail=type(exc).__name__)
                    return False
                continue
            lost = asyncio.ensure_future(lock.lost_event.wait())
            try:
                await asyncio.wait({lost}, timeout=step)
            finally:
                lost.cancel()
        if lock.lost:
            record("lost", "acquire", key=key, token=token)
            return False
        return True

    async def chaos_grant() -> None:
        # An auto-renewed lock, taken with acquire()/release() or `async with`,
        # any public await of it possibly cancelled at a random point.
        timeout = config.get("acquire_timeout", 1.0)
        fencing = workload == "fenced"
        lock = redlock.lock(key, ttl=ttl, timeout=timeout, fencing=fencing, cancel_on_lost=True)
        tokens: list[str] = []
        _ATTEMPTS.set(tokens)
        record("invoke", "acquire", key=key)
        if rng.random() < 0.5:
            try:
                # Acquires a third as often: a cancelled one grants nothing,
                # and the releases and renewals need grants to happen at all.
                if cancels(1 / 3):
                    async with asyncio.timeout(soon()):
                        ok = await lock.acquire(timeout=timeout)
                else:
                    ok = await lock.acquire(timeout=timeout)
            except TimeoutError:
                record("cancel", "acquire", key=key, detail=" ".join(tokens))
                abandoned.append((lock, time.monotonic()))
                return
            except RedlockError as exc:
                attempts("acquire", tokens, "")
                record("fail", "acquire", key=key, detail=str(exc)[:200])
                return
            if not ok:
                attempts("acquire", tokens, "")
                record("fail", "acquire", key=key, detail="timeout")
                return
            token = _token(lock)
            attempts("acquire", tokens, token)
            record("ok", "acquire", key=key, token=token, fence=lock.fencing_token)
            holding.add(token)
            try:
                told = await chaos_hold(lock, token)
            finally:
                holding.discard(token)
            if not told:
                return
            record("release", "acquire", key=key, token=token)
            try:
                if cancels():
                    async with asyncio.timeout(soon()):
                        await lock.release()
                else:
                    await lock.release()
            except TimeoutError:
                record("cancel", "release", key=key, token=token)
                abandoned.append((lock, time.monotonic()))
            except RedlockError as exc:
                record("fail", "release", key=key, token=token, detail=type(exc).__name__)
            return
        # The same through `async with`: its enter and its exit cancelled at random.
        token = ""
        told = True
        try:
            async with asyncio.timeout(soon() if cancels(1 / 3) else None) as scope:
                async with lock:
                    scope.reschedule(None)
                    token = _token(lock)
                    attempts("acquire", tokens, token)
                    record("ok", "acquire", key=key, token=token, fence=lock.fencing_token)
                    holding.add(token)
                    try:
                        told = await chaos_hold(lock, token)
                    except asyncio.CancelledError:
                        # The library cancelled the body: the lock was lost.
                        record("lost", "acquire", key=key, token=token, detail="body cancelled")
                        told = False
                        raise
                    finally:
                        holding.discard(token)
                    if told:
                        record("release", "acquire", key=key, token=token)
                        if cancels():
                            scope.reschedule(asyncio.get_running_loop().time() + soon())
        except TimeoutError:
            if not token:
                record("cancel", "acquire", key=key, detail=" ".join(tokens))
            else:
                record("cancel", "release", key=key, token=token, detail="async with exit")
            abandoned.append((lock, time.monotonic()))
        except LockNotAcquired as exc:
            attempts("acquire", tokens, "")
            record("fail", "acquire", key=key, detail=str(exc)[:200])
        except LockLost as exc:
            if told and token:
                # Told only at exit, after the body had finished.
                record("fail", "release", key=key, token=token, detail=type(exc).__name__)
        except RedlockError as exc:
            record("fail", "acquire" if not token else "release", key=key, token=token or None,
                   detail=str(exc)[:200])  # fmt: skip

    async def closer() -> None:
        # aclose() of this worker's Redlock while its holders work; new grants
        # go through a fresh one from then on.
        nonlocal redlock
        spread = config.get("aclose_every")
        if not spread:
            return
        while time.monotonic() < deadline - 1.0:
            await asyncio.sleep(rng.uniform(*spread))
            while not holding and time.monotonic() < deadline - 1.0:  # noqa: ASYNC110 - a harness polls
                await asyncio.sleep(0.005)
            if not holding:
                return
            old, redlock = redlock, new_redlock()
            record("aclose", "redlock", detail=f"{len(holding)} holding")
            await old.aclose()

    chaotic = bool(cancel_share or config.get("aclose_every"))

    async def loop(index: int) -> None:
        while time.monotonic() < deadline:
            if workload == "multi":
                await multi_grant()
            elif workload == "handoff":
                await handoff_grant()
            else:
                await (chaos_grant() if chaotic else one_grant(index))
            await asyncio.sleep(rng.uniform(0, config.get("think", 0.01)))

    async def blocker() -> None:
        # Faults inside this process: its event loop stops for a while.
        for at, seconds in config.get("block_loop", []):
            await asyncio.sleep(max(0.0, at - (time.monotonic() - started)))
            # Stall while holding, the worst moment (polling: a test harness).
            while config.get("block_when_holding") and not holding:
                if time.monotonic() >= deadline:
                    return  # the workload is over: nobody will hold again
                await asyncio.sleep(0.001)
            record("fault", "block-loop", detail=f"{seconds}s")
            time.sleep(seconds)  # noqa: ASYNC251 - blocking the loop is the fault
            record("heal", "block-loop")

    lag = 0.0

    async def ticker() -> None:
        # How late this process's event loop runs (harness overload; the
        # stalls the nemesis asks for show here too).
        nonlocal lag
        while time.monotonic() < deadline:
            due = time.monotonic() + 0.05
            await asyncio.sleep(0.05)
            lag = max(lag, time.monotonic() - due)

    started = time.monotonic()
    try:
        await asyncio.gather(
            blocker(), ticker(), closer(), *(loop(i) for i in range(config.get("tasks", 2)))
        )
    finally:
        for lock, cancelled_at in abandoned:
            # A lock whose release (or acquire) was cancelled must not stay
            # held: past one ttl it can only be a renewal nobody stops.
            if lock.held and time.monotonic() - cancelled_at > lock.ttl + 0.1:
                record("held", "abandoned", key=key, token=_token(lock),
                       detail=f"cancelled at {cancelled_at:.3f}")  # fmt: skip
        await redlock.aclose()
        if adopter is not None:
            await adopter.aclose()
        await resource.aclose()
        for client in clients:
            await client.aclose()
        await asyncio.sleep(0)  # let cancelled callbacks run
        # After aclose(), nothing of the library may still run in this process.
        stray = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        record("done", "worker", value=len(stray), detail=f"loop lag max {lag * 1000:.0f} ms")


def _jumping_wall_clock(jumps: list[tuple[float, float]]) -> None:
    # The host's wall clock steps (NTP, an operator): (after s, by s) pairs.
    # The library must not care; only the monotonic clock may matter. It reads
    # the wall clock through its world (redlock_async/_base/_world.py), so the
    # jumping clock is installed there, for every task this process starts;
    # time.time jumps too, for anything else that reads it.
    real = time.time_ns
    started = time.monotonic()

    def wall_ns() -> int:
        elapsed = time.monotonic() - started
        return real() + round(sum(delta for at, delta in jumps if elapsed >= at) * 1e9)

    time.time = lambda: wall_ns() / 1e9
    r = _world.REAL
    _world.install(  # the process's own world, its wall clock replaced
        _world.World(
            monotonic=r.monotonic,
            time_ns=wall_ns,
            token_bytes=r.token_bytes,
            rng=r.rng,
            hostname=r.hostname,
            getpid=r.getpid,
            getaddrinfo=r.getaddrinfo,
        )
    )


def main() -> None:
    # python -m tests.faults.worker '<json config>' [--loop asyncio|uvloop]
    config = json.loads(sys.argv[1])
    loop = sys.argv[sys.argv.index("--loop") + 1] if "--loop" in sys.argv else "asyncio"
    if config.get("mutant"):
        mutants.apply(config["mutant"])
    if config.get("wall_clock_jumps"):
        _jumping_wall_clock([(float(a), float(d)) for a, d in config["wall_clock_jumps"]])
    if loop == "uvloop":
        import uvloop  # only the workers that ask for it need it

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(run(config))
        return
    asyncio.run(run(config))


if __name__ == "__main__":
    main()
