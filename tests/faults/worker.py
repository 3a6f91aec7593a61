"""One worker process of the fault suite: a seeded workload, its history on disk.

Run by the orchestrator as ``python -m tests.faults.worker '<json config>'``.
Every event is one JSON line, written (line-buffered) the moment it happens,
on ``time.monotonic()`` - the same clock in every process on the machine - so
a worker that is SIGKILLed still leaves its history up to that point.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import time
from typing import Any, TextIO

import redis.asyncio

from redlock_async import Lock, LockLost, Redlock, RedlockError

from . import mutants

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


async def run(config: dict[str, Any]) -> None:
    record = Recorder(config["out"], config["process"])
    rng = random.Random(config["seed"])
    workload: str = config["workload"]
    deadline = time.monotonic() + config["duration"]
    resource = redis.asyncio.Redis.from_url(config["resource"])
    redlock = Redlock(config["urls"], **config.get("redlock", {}))
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
        if workload in ("counter", "fenced") and lock.valid_for > 0:
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

    async def one_grant(index: int) -> None:
        kind = "exclusive"
        if workload == "rw":
            kind = "write" if rng.random() < config.get("write_share", 0.3) else "read"
            if config.get("writer_tasks"):  # dedicated writers and readers
                kind = "write" if index < config["writer_tasks"] else "read"
        op = {"exclusive": "acquire", "read": "read-acquire", "write": "write-acquire"}[kind]
        options: dict[str, Any] = {
            "ttl": ttl,
            "auto_extend": workload == "renew",
            "fencing": workload == "fenced" or (kind == "write" and config.get("fencing", False)),
            "fair": config.get("fair", False),
        }
        if workload == "rw":
            rw = redlock.rwlock(key)
            lock: Lock = rw.read(**options) if kind == "read" else rw.write(**options)
        else:
            lock = redlock.lock(key, cancel_on_lost=workload == "renew", **options)
        record("invoke", op, key=key)
        try:
            ok = await lock.acquire(timeout=config.get("acquire_timeout", 1.0))
        except RedlockError as exc:
            record("fail", op, key=key, detail=str(exc)[:200])
            return
        if not ok:
            record("fail", op, key=key, detail="timeout")
            return
        grant = lock._grant
        assert grant is not None
        token = grant.token.decode()
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

    async def loop(index: int) -> None:
        while time.monotonic() < deadline:
            await one_grant(index)
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
        await asyncio.gather(blocker(), ticker(), *(loop(i) for i in range(config.get("tasks", 2))))
    finally:
        await redlock.aclose()
        await resource.aclose()
        await asyncio.sleep(0)  # let cancelled callbacks run
        # After aclose(), nothing of the library may still run in this process.
        stray = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        record("done", "worker", value=len(stray), detail=f"loop lag max {lag * 1000:.0f} ms")


def _jumping_wall_clock(jumps: list[tuple[float, float]]) -> None:
    # The host's wall clock steps (NTP, an operator): (after s, by s) pairs.
    # The library must not care; only the monotonic clock may matter.
    real = time.time
    started = time.monotonic()

    def wall() -> float:
        elapsed = time.monotonic() - started
        return real() + sum(delta for at, delta in jumps if elapsed >= at)

    time.time = wall


def main() -> None:
    config = json.loads(sys.argv[1])
    if config.get("mutant"):
        mutants.apply(config["mutant"])
    if config.get("wall_clock_jumps"):
        _jumping_wall_clock([(float(a), float(d)) for a, d in config["wall_clock_jumps"]])
    asyncio.run(run(config))


if __name__ == "__main__":
    main()
