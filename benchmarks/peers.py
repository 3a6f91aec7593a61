"""Beside the peers: redlock_async against other Redlock clients, in the same run.

Workloads (5 local nodes unless stated; names are fresh per cycle except in 3):

1. ``seq``: one task, acquire (one attempt) + release: completed pairs/s;
2. ``tasks``: 50 tasks, each on its own names: pairs/s;
3. ``one_name``: 8 workers on ONE name, each waiting for it with the
   library's own waiting (defaults), holding it 1 ms: grants/s, handoff p50
   (a holder calling ``release()`` -> another worker's acquire returning),
   wait p50 and p99 (a worker wanting the lock -> its grant, failed
   attempts included) and the busiest worker's share of the grants (1/8
   is fair). Workers contend again as soon as they release;
4. ``blackhole``: workload 1 with node 0 of 5 behind the project's fault
   proxy, blackholed (connections accepted, nothing delivered either way):
   pairs/s, and the ratio to the same contender's workload 1 in this run;
5. ``sync1`` / ``sync8``: threads on ONE node: ``redlock_async.sync``
   against redis-py's ``redis.lock.Lock`` (and pottery's sync ``Redlock``),
   1 thread and 8 threads, beside the async API with 1 and 8 tasks.

Contenders, each skipped with a printed reason when it cannot be set up:

- redlock_async (``redis://`` URLs: its lean driver), ``auto_extend=False``;
- node-redlock (npm ``redlock`` 5.0.0-beta.2, the newest; its ``latest``
  tag is still 4.x) with ``ioredis`` 5, run by ``node`` from
  ``benchmarks/.peers/node`` (installed there with ``npm install --prefix``):
  workloads 1-4;
- redis-py's asyncio ``Lock`` on ONE node (not a quorum): workloads 1-3;
- pottery's ``AIORedlock`` (1-4) and sync ``Redlock`` (5), and ``aioredlock``
  (1-4), in a child process: this interpreter if it imports them, else a
  venv in ``benchmarks/.peers/venv`` (pip-installed on first use);
- two floors written here, workloads 1, 2, 4: an ``asyncio.Protocol`` with
  hiredis's reader per node, ``SET key token NX PX ttl`` to every node,
  deciding at quorum, then a compare-and-delete ``EVALSHA`` release; replies
  are checked and a refused acquire is undone. "per write" sends each
  command in its own write; "coalesced" buffers a loop iteration's commands
  per connection and flushes them with one ``call_soon``.

Rounds are interleaved (each round runs every workload, each contender in
turn), and each figure is the median over rounds: the machine is shared and
noisy, so only the same run's ratios mean much. Every contender waits with
its own defaults in workload 3: node-redlock retries every 200 +- 100 ms
(10 times), pottery after up to 200 ms, aioredlock after 100-300 ms (3
times), redis-py every 100 ms; redlock_async is woken by the release.

A round that has not ended ``GRACE`` seconds after its deadline (5 s in
workload 3) is cut and marked "stalled"; only pairs completed before the
deadline count. The pieces: ``_peers_workloads.py`` (the workloads, stdlib
only), ``_peers_child.py`` (the Python peers' process), ``_peers_node.js``
(node-redlock's), ``_peers_report.py`` (tables, ``--markdown``, ``--svg``).
A default run takes about 2.5 minutes per loop.

Run: ``python benchmarks/peers.py [--seconds 1] [--rounds 3]
[--loop asyncio|uvloop|both] [--json FILE] [--svg FILE] [--markdown]
[--no-install] [--workloads sync1,sync8]``; ``--replot FILE.json`` redraws
an earlier run's ``--svg`` and ``--markdown`` without measuring.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import importlib.metadata
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import hiredis
import redis
import redis.asyncio
from redis.exceptions import LockError

from redlock_async import LockNotOwned, Redlock
from redlock_async.sync import Redlock as SyncRedlock
from redlock_async.testing import RedisNodes

sys.path.insert(0, str(Path(__file__).parent))
from _common import BareConn, Votes, add_loop_option, count_warnings, on_each_loop
from _peers_child import CHILD_PEERS, POTTERY_SYNC
from _peers_report import FLOOR_C, FLOOR_W, NODE, markdown, report, svg
from _peers_workloads import GRACE, ONE_NAME_GRACE, TTL, WORKLOADS, run_workload, threads_for

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".peers"  # gitignored: the npm packages and the peers' venv
NODE_DIR = CACHE / "node"
VENV = CACHE / "venv"
NPM_PACKAGES = ("redlock@5.0.0-beta.2", "ioredis@5")
PIP_PACKAGES = ("pottery", "aioredlock", "uvloop", "hiredis")


# --- this process's contenders: redlock_async, redis-py, the floors ----------


class RedlockAsyncClient:
    def __init__(self, urls: list[str]) -> None:
        self.redlock = Redlock(urls)

    async def acquire(self, name: str, blocking: bool) -> object | None:
        lock = self.redlock.lock(name, ttl=TTL, auto_extend=False)
        return lock if await lock.acquire(blocking=blocking) else None

    async def release(self, handle: object) -> bool:
        try:
            await cast(Any, handle).release()
        except LockNotOwned:
            return False
        return True

    async def aclose(self) -> None:
        await self.redlock.aclose()


class RedisPyClient:
    """redis-py's own asyncio ``Lock``: one node, not a quorum."""

    def __init__(self, port: int) -> None:
        self.client = redis.asyncio.Redis(port=port)

    async def acquire(self, name: str, blocking: bool) -> object | None:
        lock = self.client.lock(name, timeout=TTL)
        return lock if await lock.acquire(blocking=blocking) else None

    async def release(self, handle: object) -> bool:
        try:
            await cast(Any, handle).release()
        except LockError:
            return False
        return True

    async def aclose(self) -> None:
        await self.client.aclose()


# Compare-and-delete: the usual Redlock release (returns 1 when it deleted).
RELEASE_LUA = (
    b"if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "
    b"else return 0 end"
)


class FloorClient:
    """The floors: ``SET NX PX`` at quorum, compare-and-delete at quorum."""

    def __init__(self, conns: list[BareConn], sha: bytes) -> None:
        self.conns = conns
        self.sha = sha
        self.pack: Callable[[tuple[object, ...]], bytes] = hiredis.pack_command  # type: ignore[assignment]
        self.px = str(int(TTL * 1000)).encode()

    @classmethod
    async def connect(cls, ports: list[int], coalesce: bool, sha: bytes) -> FloorClient:
        loop = asyncio.get_running_loop()
        conns = []
        for port in ports:
            _, conn = await loop.create_connection(
                lambda: BareConn(loop, coalesce), "127.0.0.1", port
            )
            conns.append(conn)
        return cls(conns, sha)

    def _fan(self, payload: bytes, expect: object) -> asyncio.Future[bool]:
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        votes = Votes(future, len(self.conns), expect)
        for conn in self.conns:
            conn.send(payload, votes)
        return future

    async def acquire(self, name: str, blocking: bool) -> object | None:
        key, token = name.encode(), secrets.token_hex(16).encode()
        if await self._fan(self.pack((b"SET", key, token, b"NX", b"PX", self.px)), b"OK"):
            return key, token
        await self.release((key, token))  # undo the minority it may have got
        return None

    async def release(self, handle: object) -> bool:
        key, token = cast(tuple[bytes, bytes], handle)
        return await self._fan(self.pack((b"EVALSHA", self.sha, b"1", key, token)), 1)

    async def aclose(self) -> None:
        for conn in self.conns:
            if conn.transport is not None:
                conn.transport.close()


# --- the children: node-redlock and the Python peers -------------------------


class Child:
    """A child process answering one JSON line per command."""

    def __init__(self, proc: asyncio.subprocess.Process, label: str) -> None:
        self.proc = proc
        self.label = label
        self.log = Path(os.devnull)

    @classmethod
    async def start(cls, argv: list[str], label: str, log: Path) -> tuple[Child, dict[str, Any]]:
        """Start it; its stderr (the peers' own logging) goes to ``log``."""
        with log.open("w") as stderr:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, limit=1 << 20
            )
        self = cls(proc, label)
        self.log = log
        return self, await self._read(30.0)

    async def call(self, spec: dict[str, Any], limit: float = 60.0) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(spec).encode() + b"\n")
        await self.proc.stdin.drain()
        answer = await self._read(limit)
        if "error" in answer:
            raise RuntimeError(f"{self.label}: {answer['error']}")
        return answer

    async def _read(self, limit: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), limit)
        if not line:
            code = await self.proc.wait()
            raise RuntimeError(f"{self.label}: the child exited ({code}), see {self.log}")
        return cast(dict[str, Any], json.loads(line))

    async def close(self) -> None:
        if self.proc.returncode is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                await asyncio.wait_for(self.proc.wait(), 5.0)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()


def ensure_node(install: bool) -> str | None:
    """Install node-redlock into the cache; None when ready, else why not."""
    if shutil.which("node") is None:
        return "no `node` on PATH"
    if (NODE_DIR / "node_modules" / "redlock" / "package.json").exists():
        return None
    if not install:
        return f"not installed in {NODE_DIR} (--no-install)"
    if shutil.which("npm") is None:
        return "no `npm` on PATH to install it"
    print(f"installing {' '.join(NPM_PACKAGES)} into {NODE_DIR} ...", flush=True)
    done = subprocess.run(
        ["npm", "install", "--prefix", str(NODE_DIR), "--no-audit", "--no-fund", *NPM_PACKAGES],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        return f"npm install failed: {done.stderr.strip().splitlines()[-1:]}"
    return None


def python_for_peers(install: bool) -> tuple[str | None, str]:
    """The interpreter to run the Python peers in, and why that one (or why none)."""
    probe = "import pottery, aioredlock"
    if (
        subprocess.run([sys.executable, "-c", probe], capture_output=True, check=False).returncode
        == 0
    ):
        return sys.executable, "this interpreter"
    python = VENV / "bin" / "python"
    if not python.exists():
        if not install:
            return None, f"not importable here, and no venv in {VENV} (--no-install)"
        print(f"creating {VENV} for pottery and aioredlock ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    if subprocess.run([str(python), "-c", probe], capture_output=True, check=False).returncode != 0:
        if not install:
            return None, f"not importable in {VENV} (--no-install)"
        done = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", *PIP_PACKAGES],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            return None, f"pip install failed: {done.stderr.strip().splitlines()[-1:]}"
    return str(python), f"the venv {VENV.relative_to(HERE.parent)}"


# --- the run ------------------------------------------------------------------


Run = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


@dataclass
class Contender:
    label: str
    runs: dict[str, Run]  # by workload
    rounds: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


class Bench:
    """The contenders of one run on one event loop, and what closes them."""

    def __init__(self, args: argparse.Namespace, sets: dict[str, list[int]]) -> None:
        self.args = args
        self.sets = sets  # node ports: "healthy", "blackholed" (node 0 silent), "one"
        self.contenders: list[Contender] = []
        self.skipped: dict[str, str] = {}
        self.versions: dict[str, str] = {"python": sys.version.split()[0]}
        for module in ("redlock_async", "redis", "hiredis"):
            self.versions[module] = importlib.metadata.version(module)
        self.closers: list[Callable[[], Awaitable[None]]] = []
        self.sync_closers: list[Callable[[], None]] = []

    def add(self, label: str, run: Run, workloads: Iterable[str]) -> None:
        self.contenders.append(Contender(label, dict.fromkeys(workloads, run)))

    def add_local(self, label: str, clients: dict[str, Any], workloads: Iterable[str]) -> None:
        """A contender of this process: ``clients`` by node set."""
        self.closers += [client.aclose for client in clients.values()]

        def run(spec: dict[str, Any]) -> Awaitable[dict[str, Any]]:
            return run_workload(clients, spec)

        self.add(label, run, workloads)

    async def add_in_process(self, sha: bytes) -> None:
        sets, one = self.sets, self.sets["one"][0]
        lib = {name: RedlockAsyncClient([_url(p) for p in ports]) for name, ports in sets.items()}
        self.add_local("redlock_async", lib, ("seq", "tasks", "one_name", "blackhole"))
        self.add_local("redis-py asyncio Lock (1 node)", {"healthy": RedisPyClient(one)},
                       ("seq", "tasks", "one_name"))  # fmt: skip
        for label, coalesce in ((FLOOR_W, False), (FLOOR_C, True)):
            floors = {name: await FloorClient.connect(sets[name], coalesce, sha)
                      for name in ("healthy", "blackholed")}  # fmt: skip
            self.add_local(label, floors, ("seq", "tasks", "blackhole"))
        # Workload 5: threads through redlock_async.sync and redis-py's sync
        # Lock, and the async API's tasks, all on the one node.
        sync_lib = SyncRedlock([_url(one)])
        self.sync_closers.append(sync_lib.close)
        redis_sync = redis.Redis(port=one)
        self.sync_closers.append(redis_sync.close)
        self.add("redlock_async.sync", _threaded(sync_lib.lock, ttl=TTL, auto_extend=False),
                 ("sync1", "sync8"))  # fmt: skip
        self.add(
            "redis-py Lock (sync)", _threaded(redis_sync.lock, timeout=TTL), ("sync1", "sync8")
        )
        self.add_local("redlock_async (async, tasks)", {"one": RedlockAsyncClient([_url(one)])},
                       ("sync1", "sync8"))  # fmt: skip

    async def add_node(self) -> None:
        why = ensure_node(not self.args.no_install)
        if why is not None:
            self.skipped[NODE] = why
            return
        # A temporary copy beside node_modules, where require() finds the packages.
        script = tempfile.NamedTemporaryFile(  # noqa: SIM115 - removed by a closer
            "w", suffix=".cjs", prefix="peers-", dir=NODE_DIR, delete=False
        )
        with script:
            script.write((HERE / "_peers_node.js").read_text())
        self.sync_closers.append(functools.partial(os.unlink, script.name))
        node, hello = await Child.start(["node", script.name], NODE, CACHE / "node.log")
        self.closers.append(node.close)
        await node.call({"op": "setup", "sets": self.sets})
        self.versions.update({f"node-redlock/{k}": v for k, v in hello["versions"].items()})
        self.add(NODE, node.call, ("seq", "tasks", "one_name", "blackhole"))

    async def add_python_peers(self, loop_name: str) -> None:
        python, where = python_for_peers(not self.args.no_install)
        if python is None:
            for label in (*CHILD_PEERS, POTTERY_SYNC):
                self.skipped[label] = where
            return
        argv = [python, str(HERE / "_peers_child.py"), loop_name]
        peers, hello = await Child.start(argv, "python peers", CACHE / "python-peers.log")
        self.closers.append(peers.close)
        await peers.call({"op": "setup", "sets": self.sets})
        print(f"pottery / aioredlock run in {where} ({python})")
        if "uvloop" in hello["missing"]:
            print(f"  note: {hello['missing']['uvloop']}")
        for label, module in (*CHILD_PEERS.items(), (POTTERY_SYNC, "pottery")):
            if module not in hello["have"]:
                self.skipped[label] = hello["missing"][module]
                continue
            self.versions[module] = hello["have"][module]

            async def call(spec: dict[str, Any], label: str = label) -> dict[str, Any]:
                return await peers.call({**spec, "contender": label})

            sync = label == POTTERY_SYNC
            self.add(
                label,
                call,
                ("sync1", "sync8") if sync else ("seq", "tasks", "one_name", "blackhole"),
            )

    def spec(self, workload: str, seconds: float) -> dict[str, Any]:
        """What one round of ``workload`` is: the same dict for every contender."""
        args = self.args
        tasks = {"tasks": args.tasks, "sync8": args.workers}
        sets_of = {"blackhole": "blackholed", "sync1": "one", "sync8": "one"}
        return {"op": "run", "workload": workload, "seconds": seconds,
                "set": sets_of.get(workload, "healthy"), "tasks": tasks.get(workload, 1),
                "tag": workload, "workers": args.workers, "hold": args.hold,
                "grace": ONE_NAME_GRACE if workload == "one_name" else GRACE}  # fmt: skip

    async def measure(self, admins: list[redis.asyncio.Redis]) -> None:
        """Warm every contender up, then the rounds: each workload, each contender in turn."""

        async def once(contender: Contender, workload: str, seconds: float) -> dict[str, Any]:
            # Let trailing releases land; start every contender from nodes without its keys.
            await asyncio.sleep(0.1)
            for admin in admins:
                keys = [k async for k in admin.scan_iter(match="*peers:*", count=1000)]
                if keys:
                    await admin.delete(*keys)
            try:
                return await contender.runs[workload](self.spec(workload, seconds))
            except Exception as exc:
                print(f"  {contender.label} / {workload}: {exc}", file=sys.stderr)
                return {"ops_per_s": 0.0, "stalled": False, "error": str(exc)}

        args = self.args
        print(f"warm-up, then {args.rounds} rounds of {args.seconds} s per contender and workload")
        for workload in args.workloads:
            for contender in self.contenders:
                if workload in contender.runs:
                    await once(contender, workload, 0.3)
        for r in range(args.rounds):
            started = time.perf_counter()
            for workload in args.workloads:
                for contender in self.contenders:
                    if workload in contender.runs:
                        result = await once(contender, workload, args.seconds)
                        contender.rounds.setdefault(workload, []).append(result)
            elapsed = time.perf_counter() - started
            print(f"  round {r + 1}/{args.rounds}: {elapsed:.0f} s", flush=True)

    async def aclose(self) -> None:
        for close in self.closers:
            with contextlib.suppress(Exception):
                await close()
        for close_sync in self.sync_closers:
            with contextlib.suppress(Exception):
                close_sync()


def _rank(label: str) -> int:
    """The tables' order: the library, node-redlock, the Python peers, the floors."""
    order = ["redlock_async", NODE, "redis-py asyncio Lock (1 node)", *CHILD_PEERS, FLOOR_W,
             FLOOR_C, "redlock_async.sync", "redlock_async (async, tasks)", "redis-py Lock (sync)",
             POTTERY_SYNC]  # fmt: skip
    return order.index(label) if label in order else len(order)


def _workloads(text: str) -> list[str]:
    """``--workloads``: names of WORKLOADS, comma-separated, run in WORKLOADS' order."""
    chosen = {name.strip() for name in text.split(",") if name.strip()}
    unknown = chosen - WORKLOADS.keys()
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(
            f"not workloads: {sorted(unknown)} (have: {list(WORKLOADS)})"
        )
    return [name for name in WORKLOADS if name in chosen]


def _url(port: int) -> str:
    return f"redis://127.0.0.1:{port}/0"


def _threaded(make: Callable[..., Any], **options: Any) -> Run:
    """Workload 5 for a sync lock factory: ``make(name, **options)`` from threads."""

    def once(name: str) -> bool:
        lock = make(name, **options)
        if not lock.acquire(blocking=False):
            return False
        lock.release()
        return True

    async def run(spec: dict[str, Any]) -> dict[str, Any]:
        return await asyncio.to_thread(threads_for, spec["seconds"], spec["tasks"], once)

    return run


async def main(args: argparse.Namespace) -> dict[str, Any]:
    # The Python peers' child runs on the same kind of loop as this process.
    loop_name = "uvloop" if "uvloop" in type(asyncio.get_running_loop()).__module__ else "asyncio"
    nodes = RedisNodes().start(5)
    bench: Bench | None = None
    try:
        direct = [n.direct_port for n in nodes]
        # Node 0 through the proxy, blackholed: it accepts connections and never answers.
        nodes[0].blackhole()
        sets = {"healthy": direct, "blackholed": [nodes[0].port, *direct[1:]], "one": direct[:1]}
        bench = Bench(args, sets)
        admins = [redis.asyncio.Redis(port=p) for p in direct]
        bench.closers += [a.aclose for a in admins]
        shas = {await admin.script_load(RELEASE_LUA) for admin in admins}
        await bench.add_in_process(shas.pop().encode())
        await bench.add_node()
        await bench.add_python_peers(loop_name)
        bench.contenders.sort(key=lambda c: _rank(c.label))
        with count_warnings() as warnings:
            await bench.measure(admins)
        figures = summarize(bench.contenders)
        report(figures, bench.skipped, args)
        if warnings.total:
            print(f"redlock_async logged {warnings.total} warnings: {warnings.summary()}")
        return {"figures": figures, "skipped": bench.skipped, "versions": bench.versions,
                "warnings": warnings.total}  # fmt: skip
    finally:
        if bench is not None:
            await bench.aclose()
        nodes.close()


def summarize(contenders: list[Contender]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per workload and contender: each figure's median over rounds (and the rates' range)."""
    out: dict[str, dict[str, dict[str, Any]]] = {w: {} for w in WORKLOADS}
    for contender in contenders:
        for workload, rounds in contender.rounds.items():
            row: dict[str, Any] = {"rounds": [r["ops_per_s"] for r in rounds]}
            for key in (
                "ops_per_s",
                "handoff_p50_ms",
                "wait_p50_ms",
                "wait_p99_ms",
                "wait_max_ms",
                "busiest_share",
            ):
                values = [r[key] for r in rounds if r.get(key) is not None]
                if key in rounds[0]:  # None: no round had any (no handoff at all)
                    row[key] = statistics.median(values) if values else None
            row["handoffs"] = sum(r.get("handoffs", 0) for r in rounds)
            for key in ("refused", "failed"):
                row[key] = sum(r.get(key, 0) for r in rounds)
            row["stalled"] = sum(1 for r in rounds if r.get("stalled"))
            out[workload][contender.label] = row
    for workload, rows in out.items():
        bases = {"node": rows.get(NODE), "floor_w": rows.get(FLOOR_W), "floor_c": rows.get(FLOOR_C)}
        if workload.startswith("sync"):
            bases = {"redis_py": rows.get("redis-py Lock (sync)")}
        for label, row in rows.items():
            for name, base in bases.items():
                if base and base["ops_per_s"]:
                    row[f"vs_{name}"] = row["ops_per_s"] / base["ops_per_s"]
            healthy = out["seq"].get(label)
            if workload == "blackhole" and healthy and healthy["ops_per_s"]:
                row["vs_healthy"] = row["ops_per_s"] / healthy["ops_per_s"]
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="length of one round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per contender and workload")
    parser.add_argument("--tasks", type=int, default=50, help="tasks in workload 2")
    parser.add_argument("--workers", type=int, default=8, help="workers in 3, threads/tasks in 5")
    parser.add_argument("--hold", type=float, default=0.001, help="seconds held in workload 3")
    parser.add_argument(
        "--no-install",
        action="store_true",
        help="skip a peer that is not installed instead of installing it",
    )
    parser.add_argument(
        "--workloads",
        type=_workloads,
        default=list(WORKLOADS),
        help=f"comma-separated, of {','.join(WORKLOADS)} (default: all)",
    )
    parser.add_argument("--json", type=Path, help="also write the figures here, by loop")
    parser.add_argument("--svg", type=Path, help="also draw them here as bars")
    parser.add_argument("--markdown", action="store_true", help="also print a summary table")
    parser.add_argument("--replot", type=Path, help="measure nothing: take an earlier --json")
    add_loop_option(parser)
    args = parser.parse_args()
    if args.replot:  # the figures of an earlier --json, drawn again
        by_loop = json.loads(args.replot.read_text())
    else:
        by_loop = on_each_loop(args.loop, lambda: main(args))
    if args.markdown:
        print(markdown(by_loop))
    if args.json:
        args.json.write_text(json.dumps(by_loop, indent=2))
    if args.svg:
        args.svg.write_text(svg(by_loop))
