"""The fault tier's mixed workload, run by simulated processes on virtual time.

Each simulated process runs :class:`SimMixed`: the fault tier's
:class:`~tests.faults.mixed.Mixed` (every primitive on shared names, calls
timed, cancellations, occupancy) on the simulation's clock, with what only a
simulation can add:

- hand-offs **across processes**: a taker posts its token on the
  :class:`Board`; a waiting task of another process adopts it (the fault
  tier adopts with a second ``Redlock`` of the same process);
- a **counter** under a plain lock (a read, a gap, a write - only while the
  lock is held), for ``no_lost_updates``, and **fenced writes** to a
  resource that refuses stale fences, for ``fencing_order``: both live in
  the simulation (:class:`Resource`);
- ``aclose()`` of the process's ``Redlock`` mid-flight (the nemesis asks,
  :meth:`SimMixed.close_redlock`), a fresh one made for what comes next.

Every event goes through a :class:`Recorder` stamped with the loop's time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from redlock_async import Lock, Redlock, RedlockError
from redlock_async._base._keys import lock_key
from redlock_async._engine._epochs import Epochs

from ..faults.history import ACQUIRE_OPS, Event
from ..faults.mixed import _GRANT_OPS, Mixed, _watch_releases
from ..faults.worker import _ATTEMPTS, _watch_tokens

PREFIX = "redlock:"  # the Redlocks' (the library's default)
DRIFT_FACTOR = 0.01  # the model's bound on a node clock's rate (the library's default)

if TYPE_CHECKING:
    from .process import SimProcess
    from .sim import Simulation

__all__ = ["Board", "Recorder", "Resource", "SimMixed", "start_mixed"]


class Recorder:
    """The history of one deployment: every process's events, in the order made.

    It also keeps what each process holds (grants' windows, occupancy), so
    that a crash can end them: a killed process claims nothing from then on,
    and its keys live out their ttl (``crashed``). And it looks, at each loss
    notice, which nodes still hold the token (``held_on=`` in its detail: the
    liveness checker of held locks reads it).
    """

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.events: list[Event] = []
        self._open: dict[str, dict[tuple[str, str], str]] = {}  # process -> (key, token) -> op
        self._holds: dict[str, dict[str, tuple[str, str, int]]] = {}  # process -> token -> ...
        self._calls: dict[str, dict[int, tuple[str, str]]] = {}  # process -> id -> (op, res)

    def for_process(self, process: str) -> Callable[..., None]:
        def record(kind: str, op: str, **fields: Any) -> None:
            self.add(process, kind, op, **fields)

        return record

    def add(self, process: str, kind: str, op: str, **fields: Any) -> None:
        given = {name: value for name, value in fields.items() if value is not None}
        if kind == "lost" and "detail" not in given and given.get("token"):
            given["detail"] = f"held_on={self.holding(given['token'])}"
        self.events.append(Event(self.sim.loop.time(), process, kind, op, **given))
        token = given.get("token", "")
        if kind == "ok" and op in ACQUIRE_OPS:
            self._open.setdefault(process, {})[given.get("key", ""), token] = op
            claim = given.get("valid_until")
            if op == "acquire" and claim is not None and token:
                self._claim_kept(process, given.get("key", ""), token, claim)
        elif kind in ("release", "lost") and token:
            self._open.get(process, {}).pop((given.get("key", ""), token), None)
        elif kind == "hold" and token:
            self._holds.setdefault(process, {})[token] = (op, given.get("key", ""),
                                                          int(given.get("value", 0)))  # fmt: skip
        elif kind == "free" and token:
            self._holds.get(process, {}).pop(token, None)
        elif kind == "call":
            self._calls.setdefault(process, {})[given["value"]] = (op, given.get("key", ""))
        elif kind == "return":
            self._calls.get(process, {}).pop(given["value"], None)

    def _claim_kept(self, process: str, name: str, token: str, claim: float) -> None:
        """A claimed validity must not outlive the keys: at the grant, a quorum of
        nodes keeps the token's key until the claim ends, at the fastest clock
        the model allows (``drift_factor`` ahead). Else a ``claim``
        ``outlives`` event (``claims_within_keys``): a holder that trusts it
        may still write when another is granted the name.

        Nodes that hold the token with a key too short for the claim are
        named; a node that lost it meanwhile (a restart) is neither, so only
        keys the grant wrote can fail it."""
        key = lock_key(PREFIX, name)
        raw = token.encode()
        now = self.sim.loop.time()
        covering, short = 0, []
        for index, server in enumerate(self.sim.servers):
            if server.stopped:
                continue
            node: Any = server.node  # a SimNode
            db = node.dbs[0]
            if db.data.get(key) != raw:
                continue
            at = db.expires.get(key)
            if at is None:
                covering += 1
                continue
            # What the grant can claim of this key, at the fastest clock: it was
            # set at or after the attempt began, and a claim ends 1% + 2 ms
            # short of the ttl from then. (No ms rounding here: the node's
            # whole ms - of true ones, whole too - may have jumped by two since
            # the write in under one; the claim's 2 ms cover that.)
            left = (at - node.clock()) / 1000.0 / (1.0 + DRIFT_FACTOR)
            if left <= 0:
                continue  # expired (the node has not dropped it yet)
            if now + left + 1e-6 >= claim:
                covering += 1
            else:
                short.append(f"node {index} {now + left:.6f}")
        if short and covering < len(self.sim.servers) // 2 + 1:
            self.events.append(Event(now, process, "claim", "outlives", key=name, token=token,
                                     valid_until=claim,
                                     detail=f"keys end by {', '.join(short)}"))  # fmt: skip

    def crashed(self, process: str) -> None:
        """``process`` was killed: its calls and windows end now, its keys live out
        their ttl."""
        for ident, (op, res) in sorted(self._calls.pop(process, {}).items()):
            self.add(process, "return", op, key=res, value=ident, detail="crashed")
        for (key, token), op in sorted(self._open.pop(process, {}).items()):
            self.add(process, "lost", op, key=key, token=token, detail="crashed")
        for token, (kind, res, ttl_ms) in sorted(self._holds.pop(process, {}).items()):
            self.add(process, "free", kind, key=res, token=token, value=ttl_ms)

    def holding(self, token: str) -> tuple[int, ...]:
        """The nodes (by index) whose keys hold ``token`` now."""
        raw = token.encode()
        return tuple(
            index
            for index, server in enumerate(self.sim.servers)
            if not server.stopped and _holds(server.node, raw)
        )


def _holds(node: Any, token: bytes) -> bool:
    db = node.dbs[0]
    now = node.clock()
    for key, value in db.data.items():
        at = db.expires.get(key)
        if at is not None and now > at:
            continue
        if isinstance(value, bytes):
            if token in value:
                return True
        elif isinstance(value, dict):
            if any(token in field or token in item for field, item in value.items()):
                return True
        elif any(token in member for member in getattr(value, "scores", ())):
            return True
    return False


class Resource:
    """What the locks protect, inside the simulation: counters and fenced registers, by name."""

    def __init__(self) -> None:
        self.counters: dict[str, int] = {}
        self.top_fence: dict[str, int] = {}
        self.accepted: dict[str, int] = {}


class Board:
    """Hand-offs between processes: a taker posts a token, a waiting adopter of
    another process gets it (at random, from the deployment's seed)."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.rng = sim.rng
        self.waiting: dict[str, asyncio.Future[tuple[str, str]]] = {}

    def post(self, process: str, name: str, token: str) -> bool:
        takers = [
            who for who, future in sorted(self.waiting.items())
            if who != process and not future.done()
        ]  # fmt: skip
        if not takers:
            return False
        self.waiting.pop(self.rng.choice(takers)).set_result((name, token))
        return True


class SimMixed(Mixed):
    """One simulated process's share of the mixed workload (see the module docstring)."""

    def __init__(
        self,
        process: SimProcess,
        config: dict[str, Any],
        recorder: Recorder,
        board: Board,
        resource: Resource,
    ) -> None:
        self.process = process
        self.board = board
        self.resource = resource
        self.recorder = recorder
        self.process_name = config["name"]
        urls = process.sim.urls
        options = config.get("redlock", {})

        self.trap: Callable[[], None] | None = None  # a stall to spring (deploy.py)

        def new_redlock(nodes: list[Any] | None) -> Redlock:
            redlock = _watch_tokens(Redlock(nodes or urls, **options))
            send = redlock._core.fanout

            def fanout(command: Any, **where: Any) -> Any:
                tally = send(command, **where)
                trap = self.trap
                if trap is not None and command.script.grants:
                    self.trap = None
                    trap()
                return tally

            redlock._core.fanout = fanout
            return redlock

        base = recorder.for_process(config["name"])
        told: list[Redlock] = []  # the Redlock whose census is in the history

        def record(kind: str, op: str, **fields: Any) -> None:
            # ``census ready`` when its Redlock has read the nodes' epochs, as
            # seen at its next event (its first grant may wait up to V before:
            # call_bounds allows a one-shot that V until then).
            redlock: Redlock | None = getattr(self, "redlock", None)
            if redlock is not None and told[-1:] != [redlock] and _read_epochs(redlock):
                told[:] = [redlock]
                base("census", "ready")
            base(kind, op, **fields)

        super().__init__(config, record, new_redlock, _ATTEMPTS)
        self.closing: set[asyncio.Task[None]] = set()

    async def ticker(self) -> None:
        """No loop lag to measure on virtual time: a process's stalls are the
        nemesis's pauses, in the history as ``pause-worker`` faults."""

    def granted(self, lock: Lock, kind: str, res: str, *, renewed: bool, limit: int = 0) -> str:
        """As the fault tier's, with the grant's fencing token in its events."""
        token = lock.token or ""
        self.record("hold", kind, key=res, token=token, value=round(lock.ttl * 1000),
                    detail=f"limit={limit}" if limit else None)  # fmt: skip
        claim = None if renewed else self.now() + lock.valid_for
        for name in res.split(","):
            self.record("ok", _GRANT_OPS[kind], key=name, token=token,
                        fence=lock.fencing_token, valid_until=claim)  # fmt: skip
        return token

    async def hold(self, lock: Lock, kind: str, res: str, token: str, seconds: float) -> bool:
        """As the fault tier's, and a renewed holder whose process was stopped past
        its validity (a pause, a stall) finds it gone as it resumes: its claim
        ends there (told), whether or not the renewal has said so yet."""
        kept = await super().hold(lock, kind, res, token, seconds)
        if kept and lock.options.auto_extend and not lock.held:
            self.lost(kind, res, token, lock.ttl)
            return False
        return kept

    # -- across processes --------------------------------------------------

    async def handoff(self) -> None:
        """Taken here with a short ttl, renewed; its token adopted by another process.

        The taker's object lives on, renewing at its own ttl, until forgotten
        (never released): the adopter's keys must not shorten (API.md).
        """
        rng = self.rng
        name = rng.choice(("b", "c", "d"))
        box, told = self.on_lost("lock", name)
        taker = self.redlock.lock(name, ttl=self.mix["taker_ttl"], auto_extend=True, on_lost=told)
        if not await self.take(taker, "lock", name, rng.uniform(0.5, 2.0), cancellable=False):
            return
        token = box["token"] = self.granted(taker, "lock", name, renewed=True)
        await asyncio.sleep(rng.uniform(0.0, 0.1))
        if taker.lost:
            self.lost("lock", name, token, taker.ttl)
            return
        box.clear()  # handed over: a later loss of the taker's copy ends no claim
        self.ended("lock", name, token, "release", 0)
        self.spawn(self.forget_later(taker, name, token, rng.uniform(0.0, 1.0)))
        del taker
        self.board.post(self.process_name, name, token)

    async def adopting(self) -> None:
        """Wait for a token another process hands over; adopt it, hold it, release it."""
        loop = asyncio.get_running_loop()
        while self.now() < self.deadline:
            waiter: asyncio.Future[tuple[str, str]] = loop.create_future()
            self.board.waiting[self.process_name] = waiter
            try:
                async with asyncio.timeout(max(0.0, self.deadline - self.now())):
                    name, token = await waiter
            except TimeoutError:
                return
            finally:
                if self.board.waiting.get(self.process_name) is waiter:
                    del self.board.waiting[self.process_name]
            await self.adopt_handed(name, token)

    async def adopt_handed(self, name: str, token: str) -> None:
        rng = self.rng
        auto = rng.random() < 0.5
        ttl = self.mix["adopter_ttl"]
        try:
            adopted = await self.call(
                "adopt", name, 0.0, self.redlock.adopt(name, token, ttl=ttl, auto_extend=auto)
            )
        except RedlockError as exc:  # expired or taken meanwhile, or no quorum
            self.record("fail", "adopt", key=name, token=token, detail=type(exc).__name__)
            return
        self.record("hold", "lock", key=name, token=token, value=round(ttl * 1000))
        claim = None if auto else self.now() + adopted.valid_for
        self.record("ok", "acquire", key=name, token=token, valid_until=claim, detail="adopted")
        seconds = rng.uniform(0.5, 1.2) if auto else adopted.valid_for * rng.uniform(0.5, 0.95)
        if await self.hold(adopted, "lock", name, token, seconds):
            await self.release(adopted, "lock", name, token)

    # -- the protected resource --------------------------------------------

    async def counter(self) -> None:
        """A read, a gap, a write of a counter under a plain lock on its name.

        The write is made only if the lock is still held, with no await
        between that check and it: a careful holder, whom a pause cannot
        catch between the two. A validity that lies shows as a lost update.
        """
        rng = self.rng
        name = rng.choice(COUNTERS)
        lock = self.redlock.lock(name, ttl=self.ttl, auto_extend=False)
        if not await self.take(lock, "lock", name, self.timeout(0.3, 2.0)):
            return
        token = self.granted(lock, "lock", name, renewed=False)
        # Mostly one increment; sometimes a long job in steps, each only while
        # the lock says it is held - up to its validity's very end, where a
        # validity that lies (elapsed time, drift) lets a step land late.
        steps = 1 if rng.random() < 0.7 else 1000
        until = self.now() + rng.uniform(0.5, 1.5) * lock.ttl
        counters = self.resource.counters
        while steps and lock.held and self.now() < until:
            steps -= 1
            value = counters.get(name, 0)
            await asyncio.sleep(rng.uniform(0.001, 0.003))
            if not lock.held:
                break
            counters[name] = value + 1
            self.record("ok", "increment", key=name, token=token, value=value + 1)
        if await self.hold(lock, "lock", name, token, rng.uniform(0.0, 0.02)):
            await self.release(lock, "lock", name, token)

    async def fenced(self) -> None:
        """A fenced write to a register under a fencing lock on its name: the
        resource refuses a fence below the highest it accepted."""
        rng = self.rng
        name = rng.choice(FENCED)
        ttl = self.mix.get("fenced_ttl", self.ttl)  # long: a key an acquire leaks outlives the run
        lock = self.redlock.lock(name, ttl=ttl, auto_extend=False, fencing=True)
        if not await self.take(lock, "lock", name, self.timeout(0.3, 2.0)):
            return
        token = self.granted(lock, "lock", name, renewed=False)
        fence = lock.fencing_token
        await asyncio.sleep(rng.uniform(0.001, 0.003))  # preparing the write
        if fence is not None:
            resource = self.resource
            if fence < resource.top_fence.get(name, -1):
                self.record("fail", "fenced-write", key=name, token=token, fence=fence)
            else:
                resource.top_fence[name] = fence
                accepted = resource.accepted[name] = resource.accepted.get(name, 0) + 1
                self.record("ok", "fenced-write", key=name, token=token, fence=fence,
                            value=accepted)  # fmt: skip
        if await self.hold(lock, "lock", name, token, rng.uniform(0.0, 0.02)):
            await self.release(lock, "lock", name, token)

    async def stream_read(self) -> None:
        """Readers that overlap one another on ``r2`` (a steady stream: a writer
        waiting for them must still get in, readers standing back)."""
        lock = self.redlock.rwlock("r2").read(ttl=self.ttl, auto_extend=False)
        hold = self.rng.uniform(0.15, 0.4)
        await self.cycle(lock, "read", "r2", 2.5, lambda _: hold)

    async def stream_write(self) -> None:
        """A write now and then: back to back, a writer that got in once kept
        the name (the readers, woken by its release, missed the few ms before
        its next attempt), and readers that ignore a waiting writer never
        starved it."""
        lock = self.redlock.rwlock("r2").write(ttl=self.ttl, auto_extend=False)
        await self.cycle(lock, "write", "r2", 2.5, lambda _: 0.05)
        await asyncio.sleep(self.rng.uniform(0.3, 0.6))

    # -- the nemesis's requests --------------------------------------------

    def close_redlock(self) -> None:
        """``aclose()`` of the Redlock the holders use, now; later grants go
        through a fresh one (as the fault tier's ``aclose_every``)."""
        # Made in the process's own world (the nemesis calls this from outside it).
        old, self.redlock = self.redlock, self.process.context.run(self.new_redlock, None)
        holding = sum(1 for _ in self.recorder._open.get(self.process_name, {}))
        self.record("aclose", "redlock", detail=f"{holding} holding")
        task = self.process.spawn(old.aclose())
        self.closing.add(task)
        task.add_done_callback(self.closing.discard)

    # -- the whole process -------------------------------------------------

    def more_tasks(self) -> list[Awaitable[None]]:
        mix = self.mix
        if self.role == "volume":  # the burst process (deploy.py): its stream and burst only
            return []
        extra: list[Awaitable[None]] = [
            self.adopting(),
            *(self.looping(self.counter) for _ in range(mix["counter_tasks"])),
            *(self.looping(self.fenced) for _ in range(mix["fenced_tasks"])),
        ]
        if self.index != mix["sem_worker"]:  # holders of the semaphore in every process
            extra += [self.looping(self.semaphore) for _ in range(mix["sem_others"])]
        if self.index % 4 == mix["volume_worker"]:  # the fault tier's volume stream
            extra.append(self.stream())
        if self.config.get("stream_readers"):
            extra += [self.looping(self.stream_read) for _ in range(mix["stream_readers"])]
        if self.config.get("stream_writer"):
            extra.append(self.looping(self.stream_write))
        return extra

    async def main(self) -> None:
        try:
            await super().main()
        finally:
            await asyncio.gather(*self.closing, return_exceptions=True)


def _read_epochs(redlock: Redlock) -> bool:
    """Whether ``redlock`` has read the nodes' epochs (its first census is done)."""
    epochs = redlock._core.epochs
    return isinstance(epochs, Epochs) and epochs.ready


COUNTERS = ("k0", "k1", "k2")
"""The counters' names (each its own lock): shared by every process, few enough to contend."""

FENCED = ("f0", "f1", "f2")
"""The fenced registers' names."""

SIM_MIX: dict[str, Any] = {
    # Only mix workers; no ticker, no hoard (the release burst needs a real
    # node's 65,536 commands in flight to mean anything).
    "roles": [],
    # Fewer semaphore waiters than the fault tier's 20 (for its limit of 8):
    # with the limit of 3 here, as many failed attempts as grants otherwise.
    "sem_tasks": 6,
    "sem_others": 2,  # semaphore tasks of each other process
    # A stream of readers on r2 and a writer (deploy.py picks their processes:
    # config "stream_readers", "stream_writer"). As the fault tier's
    # reader-stream schedule, five readers, each back within 10 ms, overlap
    # all the time - only readers standing back for a waiting writer let it in
    # (three left gaps it got through anyway). Their writer is in another
    # process: in theirs, a waiting writer holds the readers back in the
    # process's own line (the client's), and the nodes' rule - readers refused
    # while a writer waits - would go untested.
    "stream_readers": 5,
    # Every fourth process (w2, w6, ...): one-attempt acquires on v:0..49 every
    # 20 ms (at most 100 in flight), as the fault tier's volume worker: a slow
    # majority's backlog meets a steady stream of calls that must not wait it out.
    "volume_worker": 2,
    "stream_every": 0.02,
    "stream_cap": 100,
    # Long plain holds (auto-extended) longer than the fault tier's: a grant
    # outliving a node's restart by seconds, which others must not take.
    "long_hold": (0.8, 5.0),
    "counter_tasks": 1,
    "fenced_tasks": 1,
}


async def start_mixed(
    process: SimProcess,
    config: dict[str, Any],
    recorder: Recorder,
    board: Board,
    resource: Resource,
    made: Callable[[SimMixed], None],
) -> None:
    """A process's whole run: its workload, its Redlocks closed, ``done`` written
    with how many of its tasks were still running (none should be)."""
    _watch_releases()
    mixed = SimMixed(process, config, recorder, board, resource)
    made(mixed)
    await mixed.main()
    await asyncio.sleep(0)  # let cancelled callbacks run
    me = asyncio.current_task()
    stray = [task for task in process.tasks if task is not me and not task.done()]
    mixed.record("done", "worker", value=len(stray))
