"""The Python peers' side of benchmarks/peers.py: pottery and aioredlock.

Run by peers.py as ``python _peers_child.py LOOP`` with an interpreter that
imports them (this project's, or the venv ``benchmarks/.peers/venv``): one
JSON command per stdin line, one JSON answer per stdout line.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import os
import sys
from collections.abc import Callable
from typing import Any, cast

from _peers_workloads import TTL, Client, run_workload, threads_for


class PotteryClient:
    def __init__(self, ports: list[int]) -> None:
        import redis.asyncio

        self.masters = {redis.asyncio.Redis(port=p) for p in ports}

    async def acquire(self, name: str, blocking: bool) -> object | None:
        from pottery import AIORedlock  # type: ignore[import-not-found, unused-ignore]

        lock = AIORedlock(key=name, masters=self.masters, auto_release_time=TTL)
        return lock if await lock.acquire(blocking=blocking) else None

    async def release(self, handle: object) -> bool:
        from pottery import ReleaseUnlockedLock  # type: ignore[import-not-found, unused-ignore]

        try:
            await cast(Any, handle).release()
        except ReleaseUnlockedLock:
            return False
        return True


class AioredlockClient:
    def __init__(self, ports: list[int]) -> None:
        from aioredlock import Aioredlock  # type: ignore[import-not-found, unused-ignore]

        nodes = [{"host": "127.0.0.1", "port": p} for p in ports]
        self.once = Aioredlock(nodes, retry_count=1)
        self.waiting = Aioredlock(nodes)  # its defaults: 3 tries, 100-300 ms apart

    async def acquire(self, name: str, blocking: bool) -> object | None:
        from aioredlock import LockError  # type: ignore[import-not-found, unused-ignore]

        manager = self.waiting if blocking else self.once
        try:
            # A lock_timeout turns off aioredlock's auto-extension, as for the others.
            lock: object = await manager.lock(name, lock_timeout=TTL)
        except LockError:
            return None
        return lock

    async def release(self, handle: object) -> bool:
        from aioredlock import LockError  # type: ignore[import-not-found, unused-ignore]

        try:
            await cast(Any, handle).release()
        except LockError:
            return False
        return True


def pottery_sync(port: int) -> Callable[[str], bool]:
    import redis
    from pottery import Redlock  # type: ignore[import-not-found, unused-ignore]

    masters = {redis.Redis(port=port)}

    def once(name: str) -> bool:
        lock = Redlock(key=name, masters=masters, auto_release_time=TTL)
        if not lock.acquire(blocking=False):
            return False
        lock.release()
        return True

    return once


CHILD_PEERS = {"pottery AIORedlock": "pottery", "aioredlock": "aioredlock"}  # label: module
POTTERY_SYNC = "pottery Redlock (sync)"


def child(loop_name: str) -> None:
    """The Python peers' side: one JSON command per stdin line, one answer per line."""
    have: dict[str, str] = {}
    missing: dict[str, str] = {}
    for module in ("pottery", "aioredlock"):
        try:
            __import__(module)
            have[module] = importlib.metadata.version(module)
        except Exception as exc:  # an incompatible peer fails in many ways
            missing[module] = f"{type(exc).__name__}: {exc}"
    factory = asyncio.new_event_loop
    if loop_name == "uvloop":
        try:
            import uvloop

            factory = uvloop.new_event_loop
        except ImportError:
            missing["uvloop"] = "not importable: this child runs on asyncio's loop"
    runner = asyncio.Runner(loop_factory=factory)
    clients: dict[str, dict[str, Client]] = {}
    syncs: dict[str, Callable[[str], bool]] = {}
    print(json.dumps({"ready": True, "have": have, "missing": missing}), flush=True)

    async def setup(sets: dict[str, list[int]]) -> None:
        makers: dict[str, Callable[[list[int]], Client]] = {
            "pottery AIORedlock": PotteryClient,
            "aioredlock": AioredlockClient,
        }
        for label, module in CHILD_PEERS.items():
            if module in have:
                clients[label] = {name: makers[label](ports) for name, ports in sets.items()}

    for line in sys.stdin:
        spec = json.loads(line)
        try:
            if spec["op"] == "setup":
                runner.run(setup(spec["sets"]))
                if "pottery" in have:
                    syncs[POTTERY_SYNC] = pottery_sync(spec["sets"]["one"][0])
                answer: dict[str, Any] = {"ok": True}
            elif spec["op"] == "run" and spec["workload"].startswith("sync"):
                answer = threads_for(spec["seconds"], spec["tasks"], syncs[spec["contender"]])
            elif spec["op"] == "run":
                answer = runner.run(run_workload(clients[spec["contender"]], spec))
            else:
                break
        except Exception as exc:
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    child(sys.argv[1])
    # Not sys.exit: the peers' clients stuck on the blackholed node would
    # log their way through a closed loop at interpreter shutdown.
    os._exit(0)
