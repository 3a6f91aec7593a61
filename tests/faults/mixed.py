"""The mixed workload: every primitive at once, on shared names, every call timed.

Each primitive was proven on its own schedules; an outside review (issue 24)
combined them and broke them. Here one worker process runs, on the same
names as the others: plain locks (some held long, auto-extended), multilocks
over overlapping sets of those names, a read-write lock, grants handed over
with ``adopt()`` while the taker keeps renewing at a shorter ttl, and (one
worker) more semaphore waiters than slots, whose holders all release at
once. A ``volume`` worker adds a steady stream of one-attempt acquires, a
burst of them, and - after the others stopped - a burst of tens of thousands
of releases in one ``gather``. Cancellations and timeouts come at random.

Besides the grants' windows (``history.py``, for the safety checkers), it
writes what the liveness checkers (``bounds.py``) read: every public call's
start and end with its bound, each grant's occupancy of the nodes (``hold``
and ``free``), and its event loop's stalls (``lag``).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from redlock_async import Lock, LockLost, Redlock, RedlockError

__all__ = ["MIX", "run"]

NAMES = ("a", "b", "c", "d")
"""The shared names: plain locks, multilocks and handoffs all take them."""


def multi_sets(worker: int) -> tuple[tuple[str, ...], ...]:
    """The multilock sets of one worker: each shares its first name, ``a<worker>``.

    The second names are the shared ones (plain locks and handoffs take them
    too) or ``q<worker>``, which only this worker's multilocks take: while
    one of them waits for a busy shared name, another on its first name and
    ``q<worker>`` has nothing to wait for (issue 24: one line per first name
    kept it waiting).
    """
    a, q = f"a{worker}", f"q{worker}"
    return ((a, "b"), (a, "c"), (a, "d"), (a, "b", "c"), (a, q), (a, q), (a, "c", q))


MIX: dict[str, Any] = {
    # Each worker's role by index; past the end: "mix".
    "roles": ["mix", "mix", "mix", "volume", "hoard"],
    "plain_tasks": 2,
    "multi_tasks": 2,
    "rw_tasks": 1,
    "handoff_tasks": 1,
    "lines_tasks": 1,
    # Plain holds: this share long (seconds, auto-extended), the rest short.
    "long_share": 0.25,
    "long_hold": (0.8, 2.0),
    # The semaphore (limit: Schedule.limit): this worker's tasks, more than
    # the limit; holders release together at every tick of the run clock.
    "sem_worker": 0,
    "sem_tasks": 20,
    "sem_tick": 2.0,
    # A holder lets go at a tick and is back in line this long before the next.
    "sem_lead": 0.2,
    # Handoffs: the taker renews at taker_ttl until it forgets the lock
    # (garbage-collected, never released); the adopter holds at adopter_ttl.
    "taker_ttl": 0.3,
    "adopter_ttl": 1.5,
    # Of multilock grants, this share is handed to adopt() on one name (refused),
    # and, while another multilock of the process waits, this share has one
    # more task want the first name and q<worker> at once.
    "probe_share": 0.15,
    "follow_share": 0.3,
    # The volume worker: a one-attempt acquire every stream_every s (at most
    # stream_cap in flight), and a burst of burst_size of them at burst_at s
    # (on the nemesis's clock: Fault.at counts from the same instant).
    # The hoard worker: hoard grants on one node, straight (ttl hoard_ttl),
    # taken over the run and all released in one gather once it is over.
    "stream_every": 0.01,
    # The stream's acquires take these timeouts in turn (0: blocking=False).
    "stream_timeouts": (0.0,),
    "stream_cap": 400,
    "burst_at": None,
    "burst_size": 3000,
    "burst_timeout": 0.0,
    "hoard": 0,
    "hoard_node": 4,
    "hoard_ttl": 30.0,
}

_T = TypeVar("_T")

# Where Lock.release() leaves its release tally for the task that called it
# (see _watch_releases): whether a quorum confirmed the release.
_RELEASES: contextvars.ContextVar[dict[bytes, Any] | None] = contextvars.ContextVar(
    "releases", default=None
)


def _watch_releases() -> None:
    """Keep each release's tally where the releasing task can read its outcome."""
    from redlock_async._core import _lock

    send = getattr(_lock, "send_release", None)
    if send is None or getattr(send, "watched", False):
        return  # renamed: every release then counts as confirmed when it returns

    def send_release(engine: Any, commands: Any, grant: Any, *args: Any, **kwargs: Any) -> Any:
        sent = send(engine, commands, grant, *args, **kwargs)
        box = _RELEASES.get()
        if box is not None:
            box[grant.token] = sent[0] if isinstance(sent, tuple) else sent
        return sent

    send_release.watched = True  # type: ignore[attr-defined]
    setattr(_lock, "send_release", send_release)  # noqa: B010 - a module global it looks up


def _confirmed(tally: Any) -> bool:
    decided = getattr(tally, "decided", None)
    if decided is None:
        return True
    return bool(decided.done() and not decided.cancelled() and decided.result())


class Mixed:
    """One worker's share of the mixed workload."""

    def __init__(
        self,
        config: dict[str, Any],
        record: Callable[..., None],
        new_redlock: Callable[[list[Any] | None], Redlock],
        attempts: contextvars.ContextVar[list[str] | None],
    ) -> None:
        self.config = config
        self.mix = {**MIX, **config.get("mix", {})}
        self.record = record
        self.new_redlock = new_redlock
        self.attempts = attempts
        self.rng = random.Random(config["seed"])
        self.ttl: float = config["ttl"]
        # The clock of every deadline, claim and tick: the host's monotonic
        # one here; the simulation's virtual one there (tests/sim/mixed.py).
        self.now: Callable[[], float] = config.get("clock") or time.monotonic
        self.started = self.now()
        self.deadline = self.started + config["duration"]
        # The nemesis's clock: burst_at counts from it, so bursts meet the faults.
        self.epoch: float = config.get("epoch", self.started)
        self.cancel_share: float = config.get("cancel_share", 0.0)
        index: int = config.get("worker", 0)
        roles = self.mix["roles"]
        self.index = index
        self.role = roles[index] if index < len(roles) else "mix"
        self.redlock = new_redlock(None)
        self.adopter = new_redlock(None)  # a second process's connections, as it were
        self.ids = 0
        self.abandoned: list[tuple[Lock, float]] = []
        self.told: set[str] = set()  # tokens whose loss is in the history already
        self.background: set[asyncio.Task[None]] = set()
        self.lag = 0.0
        self.multi_waiting = 0  # this process's multilock acquires under way

    # -- recording ---------------------------------------------------------

    async def call(self, op: str, res: str, timeout: float, awaitable: Awaitable[_T]) -> _T:
        """Await one public call, its start and end (and outcome) in the history."""
        self.ids += 1
        ident = self.ids
        self.record("call", op, key=res, value=ident, detail=f"T={timeout:g}")
        try:
            result = await awaitable
        except asyncio.CancelledError:
            self.record("return", op, key=res, value=ident, detail="cancelled")
            raise
        except Exception as exc:
            self.record("return", op, key=res, value=ident, detail=f"error:{type(exc).__name__}")
            raise
        self.record("return", op, key=res, value=ident, detail="false" if result is False else "ok")
        return result

    def cancels(self, share: float = 1.0) -> bool:
        return self.cancel_share > 0 and self.rng.random() < self.cancel_share * share

    def soon(self) -> float:
        # Mid-command (a few ms) or mid-wait (retries, renewals).
        rng = self.rng
        return rng.uniform(0.0, 0.004) if rng.random() < 0.7 else rng.uniform(0.0, 0.3)

    # -- acquiring and releasing -------------------------------------------

    async def take(
        self, lock: Lock, op: str, res: str, timeout: float | None, *, cancellable: bool = True
    ) -> bool:
        """acquire() with ``timeout`` (0: blocking=False), maybe cancelled; True when granted."""
        tokens: list[str] = []
        self.attempts.set(tokens)
        first = res.split(",")[0]
        grant_op = _GRANT_OPS[op]
        bound = math.inf if timeout is None else timeout
        attempt = lock.acquire(blocking=False) if timeout == 0 else lock.acquire(timeout=timeout)
        try:
            if cancellable and self.cancels(1 / 3):
                async with asyncio.timeout(self.soon()):
                    ok = await self.call(op, res, bound, attempt)
            else:
                ok = await self.call(op, res, bound, attempt)
        except TimeoutError:
            self.record("cancel", grant_op, key=first, detail=" ".join(tokens))
            self.abandoned.append((lock, self.now()))
            return False
        except RedlockError:
            ok = False
        if not ok:
            if tokens:
                self.record("attempts", grant_op, key=first, detail=" ".join(tokens))
            return False
        token = lock.token or ""
        failed = [t for t in tokens if t != token]
        if failed:
            self.record("attempts", grant_op, key=first, detail=" ".join(failed))
        return True

    def granted(self, lock: Lock, kind: str, res: str, *, renewed: bool, limit: int = 0) -> str:
        """Write a fresh grant's occupancy and each name's window; returns its token."""
        token = lock.token or ""
        ttl_ms = round(lock.ttl * 1000)
        self.record("hold", kind, key=res, token=token, value=ttl_ms,
                    detail=f"limit={limit}" if limit else None)  # fmt: skip
        # An auto-extended holder claims the lock until told of a loss (or it
        # releases); others until the validity acquire() reported.
        claim = None if renewed else self.now() + lock.valid_for
        for name in res.split(","):
            self.record("ok", _GRANT_OPS[kind], key=name, token=token, valid_until=claim)
        return token

    def ended(self, kind: str, res: str, token: str, how: str, keys_ms: int) -> None:
        """The holder stops claiming (``how``: release or lost); its keys live keys_ms more."""
        for name in res.split(","):
            self.record(how, _GRANT_OPS[kind], key=name, token=token)
        if how == "lost":
            self.record("free", kind, key=res, token=token, value=keys_ms)

    async def release(self, lock: Lock, kind: str, res: str, token: str) -> None:
        """Release (maybe cancelled); the occupancy ends when a quorum confirmed it."""
        ttl_ms = round(lock.ttl * 1000)
        self.ended(kind, res, token, "release", ttl_ms)
        box: dict[bytes, Any] = {}
        _RELEASES.set(box)
        try:
            if self.cancels():
                async with asyncio.timeout(self.soon()):
                    await self.call("release", res, 0.0, lock.release())
            else:
                await self.call("release", res, 0.0, lock.release())
        except TimeoutError:
            self.record("cancel", "release", key=res.split(",")[0], token=token)
            self.abandoned.append((lock, self.now()))
            self.record("free", kind, key=res, token=token, value=ttl_ms)
            return
        except (RedlockError, LockLost) as exc:
            self.record("fail", "release", key=res.split(",")[0], token=token,
                        detail=type(exc).__name__)  # fmt: skip
            self.record("free", kind, key=res, token=token, value=ttl_ms)
            return
        finally:
            _RELEASES.set(None)
        confirmed = _confirmed(box.get(token.encode()))
        self.record("free", kind, key=res, token=token, value=0 if confirmed else ttl_ms)

    async def hold(self, lock: Lock, kind: str, res: str, token: str, seconds: float) -> bool:
        """Hold for ``seconds`` (never past the validity unless renewed); False if lost."""
        if not lock.options.auto_extend:
            seconds = min(seconds, max(0.0, lock.valid_for))
        lost = asyncio.ensure_future(lock.lost_event.wait())
        try:
            await asyncio.wait({lost}, timeout=seconds)
        finally:
            lost.cancel()
        if lock.lost:
            self.lost(kind, res, token, lock.ttl)
            return False
        return True

    def lost(self, kind: str, res: str, token: str, ttl: float) -> None:
        """The holder was told of a loss: in the history once, when first seen."""
        if token not in self.told:
            self.told.add(token)
            self.ended(kind, res, token, "lost", round(ttl * 1000))

    def on_lost(self, kind: str, res: str) -> tuple[dict[str, str], Callable[[Lock], None]]:
        """An ``on_lost`` callback that puts the loss in the history as the library
        tells it, for a holder busy elsewhere meanwhile (``lines``' blocker
        waits for its gate; a taker sleeps before its hand-over): seen only
        later, the loss would stretch its window past the name's next grant.
        Fill the box's ``token`` once granted."""
        box: dict[str, str] = {}

        def told(lock: Lock) -> None:
            if "token" in box:
                self.lost(kind, res, box["token"], lock.ttl)

        return box, told

    async def cycle(
        self,
        lock: Lock,
        kind: str,
        res: str,
        timeout: float | None,
        seconds: Callable[[Lock], float],
        *,
        limit: int = 0,
    ) -> None:
        """Acquire, hold, release: one grant of any kind."""
        if not await self.take(lock, kind, res, timeout):
            return
        token = self.granted(lock, kind, res, renewed=lock.options.auto_extend, limit=limit)
        if await self.hold(lock, kind, res, token, seconds(lock)):
            await self.release(lock, kind, res, token)

    # -- the tasks ---------------------------------------------------------

    def timeout(self, low: float, high: float) -> float | None:
        """A waiting acquire's timeout: mostly [low, high), sometimes one attempt."""
        roll = self.rng.random()
        if roll < 0.15:
            return 0.0  # blocking=False: one attempt
        return self.rng.uniform(low, high)

    async def plain(self) -> None:
        rng = self.rng
        name = rng.choice(("a", "b", "b", "c", "c", "d", "d"))
        long = rng.random() < self.mix["long_share"]
        auto = long or rng.random() < 0.3
        lock = self.redlock.lock(name, ttl=self.ttl, auto_extend=auto)
        hold = rng.uniform(*self.mix["long_hold"]) if long else rng.uniform(0.0, 0.05)
        await self.cycle(lock, "lock", name, self.timeout(0.3, 2.0), lambda _: hold)

    async def multi(
        self, names: tuple[str, ...] | None = None, timeout: float | None = None
    ) -> None:
        rng = self.rng
        names = names or rng.choice(multi_sets(self.index))
        res = ",".join(names)
        lock = self.redlock.multilock(list(names), ttl=self.ttl, auto_extend=False)
        if timeout is None:
            timeout = self.timeout(1.0, 3.0)
        self.multi_waiting += 1
        try:
            taken = await self.take(lock, "multi", res, timeout)
        finally:
            self.multi_waiting -= 1
        if not taken:
            return
        token = self.granted(lock, "multi", res, renewed=False)
        quiet = (f"a{self.index}", f"q{self.index}")
        hold = rng.uniform(0.0, 0.1)
        if self.multi_waiting and names != quiet and rng.random() < self.mix["follow_share"]:
            # Another task wants this set's first name with the quiet one now:
            # its first attempt fails (held here a while yet), so it waits in
            # line - behind this process's waiters for other sets on that name.
            self.spawn(self.multi(quiet))
            hold = rng.uniform(0.05, 0.15)
        if rng.random() < self.mix["probe_share"]:
            await self.probe(names[0], token)
        if await self.hold(lock, "multi", res, token, hold):
            await self.release(lock, "multi", res, token)

    async def lines(self) -> None:
        """Two multilocks of this process on one first name: each waits for its own names.

        ``[a, p]`` waits while a plain lock here holds ``p`` for a while;
        then ``[a, q]`` comes, while another plain lock holds ``a`` for a
        moment, so its first attempt is refused and it waits too. Once ``a``
        is released, ``a`` and ``q`` are free: ``[a, q]`` must take them at
        once, not wait behind ``[a, p]`` (issue 24: lines keyed by the first
        name). The names are this worker's own, so nobody else takes them.
        """
        rng = self.rng
        a, p, q = f"a{self.index}", f"p{self.index}", f"q{self.index}"
        box, told = self.on_lost("lock", p)
        blocker = self.redlock.lock(p, ttl=self.ttl, auto_extend=True, on_lost=told)
        if not await self.take(blocker, "lock", p, 1.0, cancellable=False):
            return
        token = box["token"] = self.granted(blocker, "lock", p, renewed=True)
        blocked_for = rng.uniform(1.5, 2.5)
        ends = self.now() + blocked_for
        waiters = [self.spawn(self.multi((a, p), timeout=blocked_for + 1.0))]
        await asyncio.sleep(0.2)
        gate = self.redlock.lock(a, ttl=self.ttl, auto_extend=False)
        if await self.take(gate, "lock", a, 1.0, cancellable=False):
            gate_token = self.granted(gate, "lock", a, renewed=False)
            waiters.append(self.spawn(self.multi((a, q), timeout=rng.uniform(1.2, 1.8))))
            await asyncio.sleep(0.1)
            await self.release(gate, "lock", a, gate_token)
        if await self.hold(blocker, "lock", p, token, ends - self.now()):
            await self.release(blocker, "lock", p, token)
        await asyncio.gather(*waiters, return_exceptions=True)

    async def probe(self, name: str, token: str) -> None:
        """Hand a held multilock's token to adopt() on one of its names: it must refuse."""
        try:
            adopted = await self.call(
                "adopt", name, 0.0, self.adopter.adopt(name, token, ttl=self.ttl, auto_extend=False)
            )
        except RedlockError as exc:
            self.record("fail", "adopt-probe", key=name, token=token, detail=type(exc).__name__)
            return
        # Never released: the multilock's own release removes the keys.
        self.record("ok", "adopt-probe", key=name, token=token, detail=type(adopted).__name__)

    async def rw(self) -> None:
        rng = self.rng
        rw = self.redlock.rwlock("r")
        kind = "write" if rng.random() < 0.3 else "read"
        view = rw.write if kind == "write" else rw.read
        lock = view(ttl=self.ttl, auto_extend=False)
        hold = rng.uniform(0.0, 0.1)
        await self.cycle(lock, kind, "r", self.timeout(0.3, 1.5), lambda _: hold)

    async def handoff(self) -> None:
        """Taken with a short ttl, auto-extended; adopted elsewhere with a longer one.

        The taker hands the token on and stops claiming the lock, but its
        lock object lives on a while - renewing at its own, shorter ttl -
        before it is forgotten (garbage-collected, never released). Live
        copies of one grant must never shorten each other's keys (API.md):
        if the taker's renewals do, the keys expire under the adopter, and
        mutual exclusion shows it.
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
        box.clear()  # handed over: a later loss of the taker's copy is no end of a claim
        self.ended("lock", name, token, "release", 0)  # the taker is done with it
        keeper = self.spawn(self.forget_later(taker, name, token, rng.uniform(0.0, 1.0)))
        del taker  # the keeper holds the only reference now
        auto = rng.random() < 0.5
        ttl = self.mix["adopter_ttl"]
        try:
            adopted = await self.call(
                "adopt", name, 0.0, self.adopter.adopt(name, token, ttl=ttl, auto_extend=auto)
            )
        except RedlockError as exc:  # expired or taken meanwhile, or no quorum
            self.record("fail", "adopt", key=name, token=token, detail=type(exc).__name__)
            return
        self.record("hold", "lock", key=name, token=token, value=round(ttl * 1000))
        claim = None if auto else self.now() + adopted.valid_for
        self.record("ok", "acquire", key=name, token=token, valid_until=claim, detail="adopted")
        # Long enough for the taker's renewals to matter: most of the validity.
        seconds = rng.uniform(0.5, 1.2) if auto else adopted.valid_for * rng.uniform(0.5, 0.95)
        if await self.hold(adopted, "lock", name, token, seconds):
            await self.release(adopted, "lock", name, token)
        del keeper

    async def forget_later(self, taker: Lock, name: str, token: str, after: float) -> None:
        """Keep the taker's lock object (renewing) ``after`` seconds, then forget it."""
        keep = [taker]
        del taker
        try:
            await asyncio.sleep(after)
        finally:
            keep.clear()  # renewals stop with the object: its keys expire after its ttl
            self.record("free", "lock", key=name, token=token,
                        value=round(self.mix["taker_ttl"] * 1000))  # fmt: skip

    async def semaphore(self) -> None:
        """Holders let go together at each tick; the others are in line by then.

        A holder releases at a tick and comes back ``sem_lead`` before the
        next one, so at each tick up to ``limit`` slots free at once with
        this process's waiters lined up for them: each must be taken at once,
        not one retry delay after the other (issue 24).
        """
        limit: int = self.config["limit"]
        tick: float = self.mix["sem_tick"]
        lock = self.redlock.semaphore("s", limit, ttl=2 * tick, auto_extend=False)

        def next_tick() -> float:
            elapsed = self.now() - self.started
            return (math.floor(elapsed / tick) + 1) * tick - elapsed

        await self.cycle(lock, "sem", "s", self.rng.uniform(1.5, 1.5 * tick),
                         lambda _: next_tick(), limit=limit)  # fmt: skip
        await asyncio.sleep(max(0.0, next_tick() - self.mix["sem_lead"]))

    async def looping(self, one: Callable[[], Awaitable[None]]) -> None:
        while self.now() < self.deadline:
            await one()
            await asyncio.sleep(self.rng.uniform(0.0, 0.01))

    # -- the volume worker -------------------------------------------------

    async def one_attempt(self, name: str, timeout: float) -> None:
        lock = self.redlock.lock(name, ttl=self.ttl, auto_extend=False)
        await self.cycle(lock, "lock", name, timeout, lambda _: 0.0)

    async def stream(self) -> None:
        """One-attempt acquires (and their releases) on a few names, steadily.

        They keep every node's replies coming: a node that is slow but steady
        answers something all the time, and must not keep a vote pending
        past the call's bound for it.
        """
        every: float = self.mix["stream_every"]
        cap: int = self.mix["stream_cap"]
        timeouts: Sequence[float] = self.mix["stream_timeouts"]
        inflight: set[asyncio.Task[None]] = set()
        number = 0
        while self.now() < self.deadline:
            if len(inflight) < cap:
                number += 1
                timeout = timeouts[number % len(timeouts)]
                task = asyncio.ensure_future(self.one_attempt(f"v:{number % 50}", timeout))
                inflight.add(task)
                task.add_done_callback(inflight.discard)
            await asyncio.sleep(every)
        await asyncio.gather(*inflight, return_exceptions=True)

    async def burst(self) -> None:
        """Many acquires in one gather (more than the attempts let in flight at once)."""
        at = self.mix["burst_at"]
        if at is None:
            return
        await asyncio.sleep(max(0.0, self.epoch + at - self.now()))
        size: int = self.mix["burst_size"]
        timeout: float = self.mix["burst_timeout"]
        self.record("burst", "acquire", value=size, detail=f"T={timeout:g}")
        await asyncio.gather(*(self.one_attempt(f"x:{i}", timeout) for i in range(size)))
        self.record("burst", "done", value=size)

    async def hoard(self) -> Redlock | None:
        """Grants on one node, straight (ttl hoard_ttl), acquired steadily over the run."""
        count: int = self.mix["hoard"]
        if not count:
            return None
        node = self.config["direct_urls"][self.mix["hoard_node"]]
        straight = self.new_redlock([node])
        ttl = self.mix["hoard_ttl"]
        locks = [straight.lock(f"burst-release:{i}", ttl=ttl, auto_extend=False)
                 for i in range(count)]  # fmt: skip
        self.hoarded: list[Lock] = []
        chunk = 500
        pace = max(0.5, self.deadline - self.now() - 1.0) / (count / chunk)
        for start in range(0, count, chunk):
            due = self.now() + pace
            part = locks[start : start + chunk]
            results = await asyncio.gather(*(lock.acquire(timeout=5.0) for lock in part),
                                           return_exceptions=True)  # fmt: skip
            self.hoarded += [lock for lock, ok in zip(part, results, strict=True) if ok is True]
            await asyncio.sleep(max(0.0, due - self.now()))
        return straight

    async def release_burst(self) -> None:
        """Every hoarded grant released in one gather: each release must reach its node."""
        locks = getattr(self, "hoarded", [])
        if not locks:
            return
        self.record("burst", "release", value=len(locks))
        started = self.now()
        # One warning per unconfirmed release would be thousands of lines:
        # what is left behind is the keys, which no_keys_left names.
        quiet = logging.getLogger("redlock_async")
        level, quiet.level = quiet.level, logging.ERROR
        try:
            results = await asyncio.gather(*(lock.release() for lock in locks),
                                           return_exceptions=True)  # fmt: skip
        finally:
            quiet.setLevel(level)
        failed = sum(isinstance(r, BaseException) for r in results)
        self.record("burst", "released", value=len(locks) - failed,
                    detail=f"{failed} raised; {self.now() - started:.2f} s")  # fmt: skip
        self.hoarded = []

    # -- the whole worker --------------------------------------------------

    def spawn(self, coro: Awaitable[None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coro)
        self.background.add(task)
        task.add_done_callback(self.background.discard)
        return task

    async def ticker(self) -> None:
        # Stalls of this process's event loop (lag events): allowed on top of bounds.
        while self.now() < self.deadline + 1.0:
            due = self.now() + 0.02
            await asyncio.sleep(0.02)
            late = self.now() - due
            self.lag = max(self.lag, late)
            if late >= 0.005:
                self.record("lag", "loop", value=round(late * 1000))

    def more_tasks(self) -> list[Awaitable[None]]:
        """What a variant of the workload runs besides (tests/sim/mixed.py): run
        and waited for like the rest, before the Redlocks close."""
        return []

    async def main(self) -> None:
        mix = self.mix
        tasks: list[Awaitable[None]] = []
        if self.role == "volume":
            tasks += [self.stream(), self.burst()]
        elif self.role == "mix":
            kinds = [
                (self.plain, mix["plain_tasks"]),
                (self.multi, mix["multi_tasks"]),
                (self.rw, mix["rw_tasks"]),
                (self.handoff, mix["handoff_tasks"]),
                (self.lines, mix["lines_tasks"]),
            ]
            if self.index == mix["sem_worker"]:
                kinds.append((self.semaphore, mix["sem_tasks"]))
            tasks += [self.looping(kind) for kind, n in kinds for _ in range(n)]
        tasks += self.more_tasks()
        ticker = asyncio.ensure_future(self.ticker())
        straight: Redlock | None = None
        try:
            await asyncio.gather(*tasks)
            if self.role == "hoard":
                straight = await self.hoard()
                await self.release_burst()
        finally:
            for task in list(self.background):
                task.cancel()
            await asyncio.gather(*self.background, return_exceptions=True)
            ticker.cancel()
            for lock, cancelled_at in self.abandoned:
                # A lock whose release (or acquire) was cancelled must not stay
                # held: past one ttl it can only be a renewal nobody stops.
                if lock.held and self.now() - cancelled_at > lock.ttl + 0.1:
                    self.record("held", "abandoned", key=lock.name, token=lock.token or "",
                                detail=f"cancelled at {cancelled_at:.3f}")  # fmt: skip
            for redlock in (self.redlock, self.adopter, straight):
                if redlock is not None:
                    await redlock.aclose()


# Each call op's grant op (the windows the safety checkers judge).
_GRANT_OPS = {
    "lock": "acquire",
    "multi": "acquire",
    "read": "read-acquire",
    "write": "write-acquire",
    "sem": "sem-acquire",
}


async def run(
    config: dict[str, Any],
    record: Callable[..., None],
    new_redlock: Callable[[list[Any] | None], Redlock],
    attempts: contextvars.ContextVar[list[str] | None],
) -> float:
    """Run this worker's share; returns its worst event-loop lag (seconds)."""
    _watch_releases()
    mixed = Mixed(config, record, new_redlock, attempts)
    await mixed.main()
    return mixed.lag
