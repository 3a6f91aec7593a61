"""The differential check: the simulated node against a real ``redis-server``, step by step.

Random sequences (``steps.py``: the library's scripts with plausible
arguments, raw commands, each sequence from a random prior state) run on a
:class:`~tests.sim.node.SimNode` and on a real server (``real.py``). After
every step the two must agree on the reply, on what a subscriber heard,
and on the whole database: keys, types, values and expiries, to the
millisecond.

Time is what makes that exact. The real server reads its clock while it
runs a command, so each step goes out between two ``TIME`` commands in one
pipeline, and the simulated node runs at those milliseconds: one, almost
always. When the two differ (the step straddled a millisecond), the node
is rolled back and run again under each way its clock reads could have
fallen (some at the first millisecond, the rest at the next: Redis reads
its clock live for ``TIME``, ``PTTL`` and new expiries even inside a script),
and one must agree. A step whose ``TIME``s are more than 3 ms apart (the
machine was busy) cannot be placed: it still runs on the node, for what
else it changes (a script loaded, a connection's state), the node then
takes the real database, and the step is counted as unaligned, not
compared (about 1 step in 15,000 on an idle 2-core machine).

Two things differ by design and are mapped, not compared: a new epoch's id
(``_epoch.lua`` hashes the server's microseconds into it: the check learns
which id of the node stands for which of the server's, once, when both make
one in the same step) and the parts of ``INFO`` that describe the process
(only the fields the library reads, the sections and field names are).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from .node import Entry, SimNode
from .real import DUMP, RealConn, RealServer
from .replies import NOREPLY, Error, NotModelled, Reply, Verbatim
from .resp import ReplyReader, encode
from .steps import LAYOUTS, SCRIPTS, Step, Workload

__all__ = ["Disagreement", "Report", "normal", "run", "typed"]

_CONNS = {"main": 0, "sub": 1, "resp3": 2}
_MAX_SPREAD = 3  # ms between a step's TIMEs beyond which it is not compared
_INFO_FIELDS = frozenset(
    {b"redis_version", b"redis_mode", b"run_id", b"uptime_in_seconds", b"uptime_in_days"}
    | {b"role", b"connected_slaves", b"master_replid", b"master_replid2"}
)


@dataclass
class Disagreement:
    """The first step where the two sides differed."""

    seed: int
    index: int
    step: Step
    what: str  # "reply", "pushes", "keyspace" or "not modelled"
    real: object
    sim: object

    def __str__(self) -> str:
        words = [_short(arg) for arg in self.step.args]
        return (
            f"seed {self.seed}, step {self.index} ({self.step.label}, {self.step.conn} connection):"
            f" {' '.join(words)}\n  {self.what} differs:\n    real: {_short(self.real, 2000)}\n"
            f"    sim:  {_short(self.sim, 2000)}"
        )


@dataclass
class Report:
    """One seed's run: how many steps, how they were placed in time, the first disagreement."""

    seed: int
    steps: int = 0
    straddled: int = 0  # steps whose TIMEs were a millisecond apart (run more than once)
    unaligned: int = 0  # steps too spread out to place in time: not compared
    disagreement: Disagreement | None = None
    labels: dict[str, int] = field(default_factory=dict)


class PlannedClock:
    """The simulated node's clock during one step: ``low`` for its first ``switch``
    reads, ``high`` for the rest."""

    def __init__(self) -> None:
        self.low = self.high = 0
        self.switch = 0
        self.reads = 0

    def plan(self, low: int, high: int | None = None, switch: int = 1 << 30) -> None:
        self.low, self.high, self.switch, self.reads = low, low if high is None else high, switch, 0

    def __call__(self) -> int:
        self.reads += 1
        return self.low if self.reads <= self.switch else self.high


def run(
    real: RealServer,
    seed: int,
    steps: int,
    *,
    quirks: frozenset[str] = frozenset(),
    sequence: int = 40,
) -> Report:
    """``steps`` steps from ``seed``, in sequences of about ``sequence`` from a
    random prior state; stops at the first disagreement."""
    check = _Check(real, seed, quirks)
    try:
        return check.run(steps, sequence)
    finally:
        check.close()


class _Check:
    def __init__(self, real: RealServer, seed: int, quirks: frozenset[str]) -> None:
        self.rng = random.Random(seed)
        self.report = Report(seed)
        self.clock = PlannedClock()
        self.sim = SimNode(
            self.clock,
            run_id=real.run_id,
            replid=real.replid,
            started=real.started,
            port=real.port,
            seed=seed,
            quirks=quirks,
        )
        self.sim.pid = real.pid
        self.work = Workload(self.rng, real.run_id, real.replid)
        self.conns = {name: RealConn(real.port) for name in _CONNS}
        self.alias: dict[bytes, bytes] = {}  # a node's epoch id -> the server's
        self.index = 0
        self.reads = 0

    def close(self) -> None:
        for conn in self.conns.values():
            conn.close()

    def run(self, steps: int, sequence: int) -> Report:
        self._do(Step([b"FLUSHALL"], label="flushall"))  # what an earlier run left
        self._do(Step([b"SCRIPT", b"FLUSH"], label="script flush"))
        self._do(Step([b"HELLO", b"3"], "resp3", "handshake"))
        channels = [layout.wake for layout in LAYOUTS]
        self._do(Step([b"SSUBSCRIBE", *channels[:2]], "sub", "subscribe"))
        self._do(Step([b"SUBSCRIBE", channels[2]], "sub", "subscribe"))
        while self.report.steps < steps and self.report.disagreement is None:
            for step in self._sequence(sequence):
                self._do(step)
                if self.report.disagreement is not None or self.report.steps >= steps:
                    break
        return self.report

    def _sequence(self, length: int) -> Iterator[Step]:
        r = self.rng
        yield Step([b"FLUSHALL"], label="flushall")
        if r.random() < 0.3:
            yield Step([b"SCRIPT", b"FLUSH"], label="script flush")
        if r.random() < 0.5:
            for script in SCRIPTS.values():
                yield Step([b"SCRIPT", b"LOAD", script.source], label="load")
        yield from self.work.prior()
        for _ in range(length):
            yield self.work.next()

    # One step ----------------------------------------------------------------

    def _do(self, step: Step) -> None:
        self.index += 1
        report = self.report
        report.steps += 1
        report.labels[step.label] = report.labels.get(step.label, 0) + 1
        conn = self.conns[step.conn]
        if step.conn == "sub":
            conn.send(step.args)
            t0 = t1 = None
            reply: object = NOREPLY
        else:
            t0, reply, t1 = conn.call([b"TIME"], step.args, [b"TIME"])
        dump = self.conns["main"].call([b"EVAL", DUMP, b"0"])[0]
        real_state, at = _parse_dump(dump)
        self.work.state, self.work.now = real_state, at
        low, high = (at, at) if t0 is None else (_ms(t0), _ms(t1))
        if high - low > _MAX_SPREAD:
            # Run, for what else it changes (scripts loaded, a connection's
            # state); its database is then the real one.
            report.unaligned += 1
            self.clock.plan(high)
            self.sim.execute(self._to_sim(step.args), _CONNS[step.conn])  # type: ignore[arg-type]
            self.sim.load(self._to_sim(real_state))  # type: ignore[arg-type]
            self.sim.outbox.clear()
            self.conns["sub"].pending(0.05)
            return
        if high > low:
            report.straddled += 1
        checkpoint = self.sim.checkpoint() if high > low else None
        heard = self.conns["sub"].pending(0.0)
        first: tuple[str, object, object] | None = None
        for n, plan in enumerate(self._plans(low, high)):
            if n and checkpoint is not None:
                self.sim.rollback(checkpoint)
            self.sim.outbox.clear()
            outcome = self._try(step, plan, reply, real_state, at, heard)
            if isinstance(outcome, Disagreement):
                report.disagreement = outcome
                return
            if outcome is None:
                return
            first = first or outcome
        assert first is not None
        what, real, sim = first
        report.disagreement = Disagreement(report.seed, self.index, step, what, real, sim)

    def _plans(self, low: int, high: int) -> Iterator[tuple[int, int, int]]:
        """Clock plans (first value, then value, reads before the switch), likeliest first."""
        yield (low, low, 0)
        if high == low:
            return
        reads = self.reads  # how many times the first run read the clock
        for value in range(low + 1, high + 1):
            yield (value, value, 0)
        for a in range(low, high + 1):
            for b in range(a + 1, high + 1):
                for switch in range(1, reads):
                    yield (a, b, switch)

    def _try(
        self,
        step: Step,
        plan: tuple[int, int, int],
        reply: object,
        real_state: dict[bytes, Entry],
        at: int,
        heard: list[object],
    ) -> Disagreement | tuple[str, object, object] | None:
        """Run the step on the node under one clock plan: None if all agrees, else what differs."""
        sim = self.sim
        self.clock.plan(*plan)
        conn = _CONNS[step.conn]
        try:
            answer = sim.execute(self._to_sim(step.args), conn)  # type: ignore[arg-type]
        except NotModelled as exc:
            return Disagreement(self.report.seed, self.index, step, "not modelled", reply, exc)
        self.reads = self.clock.reads
        self.clock.plan(at)
        snapshot = sim.snapshot()
        pushes = [typed(push, sim.sessions[_CONNS["sub"]].proto) for push in sim.take(1)]
        if step.conn == "sub" and answer is not NOREPLY:  # read there with what is pushed
            pushes.insert(0, typed(answer, sim.sessions[conn].proto))
            answer = NOREPLY
        if len(pushes) > len(heard):  # sent before the reply, perhaps written after it
            heard += self.conns["sub"].pending(0.05)
        alias = self._learn(real_state, snapshot)
        if answer is not NOREPLY:
            mine = normal(_replace(typed(answer, sim.sessions[conn].proto), alias))
            if mine != normal(reply):
                return ("reply", reply, mine)
        if _replace(pushes, alias) != heard:
            return ("pushes", heard, pushes)
        differs = _compare(real_state, _replace(snapshot, alias), at)
        if differs is not None:
            return ("keyspace", *differs)
        self.alias = alias
        return None

    # Epoch ids -----------------------------------------------------------------

    def _learn(
        self, real_state: dict[bytes, Entry], snapshot: dict[bytes, Entry]
    ) -> dict[bytes, bytes]:
        """The alias map, with the epochs both sides made in this step paired."""
        alias = dict(self.alias)
        for key, (kind, value, _) in snapshot.items():
            real = real_state.get(key)
            if kind != "hash" or real is None or real[0] != "hash" or b"~epoch" not in key:
                continue
            assert isinstance(value, dict)
            assert isinstance(real[1], dict)
            mine, theirs = value.get(b"id"), real[1].get(b"id")
            if (
                isinstance(mine, bytes)
                and isinstance(theirs, bytes)
                and mine not in alias
                and theirs not in alias.values()
            ):
                alias[mine] = theirs
        return alias

    def _to_sim(self, value: object) -> object:
        return _replace(value, {theirs: mine for mine, theirs in self.alias.items()})


def _replace(value: object, alias: dict[bytes, bytes]) -> object:
    if not alias:
        return value
    if isinstance(value, bytes):
        for old, new in alias.items():
            if old in value:
                value = value.replace(old, new)
        return value
    if isinstance(value, list):
        return type(value)(_replace(item, alias) for item in value)
    if isinstance(value, tuple):
        return tuple(_replace(item, alias) for item in value)
    if isinstance(value, dict):
        return {_replace(k, alias): _replace(v, alias) for k, v in value.items()}
    return value


def typed(reply: Reply | object, proto: int) -> object:
    """A node's reply as a client reads it: through the encoder and the reader."""
    reader = ReplyReader()
    reader.feed(encode(reply, proto))  # type: ignore[arg-type]
    return reader.get()


def normal(reply: object) -> object:
    """What of a reply is compared: of INFO, the sections, the field names and
    the values the library reads; of HELLO, all but the connection's id."""
    if isinstance(reply, bytes) and reply.startswith(b"# "):
        sections = []
        for part in reply.split(b"\r\n\r\n"):
            lines = [line for line in part.split(b"\r\n") if line]
            fields = [
                line if line.split(b":", 1)[0] in _INFO_FIELDS else line.split(b":", 1)[0]
                for line in lines
            ]
            sections.append(fields)
        return ("INFO", type(reply) is Verbatim, sections)
    if isinstance(reply, dict) and b"id" in reply and b"proto" in reply:
        return {k: v for k, v in reply.items() if k != b"id"}
    if isinstance(reply, list) and reply[:2] == [b"server", b"redis"] and b"id" in reply[::2]:
        pairs = dict(zip(reply[::2], reply[1::2], strict=True))  # HELLO in RESP2: flat
        return normal({k: v for k, v in pairs.items() if isinstance(k, bytes)})
    if isinstance(reply, list):
        return [normal(item) for item in reply]
    return reply


def _ms(time: object) -> int:
    assert isinstance(time, list), time
    return int(time[0]) * 1000 + int(time[1]) // 1000


def _parse_dump(dump: object) -> tuple[dict[bytes, Entry], int]:
    if isinstance(dump, Error) or not isinstance(dump, list):
        raise RuntimeError(f"the dump script failed: {dump!r}")
    at = _ms(dump[:2])
    state: dict[bytes, Entry] = {}
    for key, kind, expiry, value in dump[2:]:
        assert isinstance(kind, bytes)
        entry: object = value
        if kind == b"hash":
            entry = dict(zip(value[::2], value[1::2], strict=True))
        elif kind == b"zset":
            entry = [(m, float(s)) for m, s in zip(value[::2], value[1::2], strict=True)]
        state[key] = (kind.decode(), entry, None if expiry == -1 else expiry)
    return state, at


def _compare(real: dict[bytes, Entry], sim: object, at: int) -> tuple[object, object] | None:
    """The first key on which the databases differ. A key on one side only
    may be one expiring about when the real database was read (``at``)."""
    assert isinstance(sim, dict)

    def expiring(entry: Entry) -> bool:
        return entry[2] is not None and at - 2 <= entry[2] <= at + 1

    for key in sorted(set(real) | set(sim)):
        mine, theirs = sim.get(key), real.get(key)
        if mine == theirs:
            continue
        alone = mine if theirs is None else theirs if mine is None else None
        if alone is not None and expiring(alone):
            continue
        return {key: theirs}, {key: mine}
    return None


def _short(value: object, limit: int = 120) -> str:
    text = repr(value)
    if isinstance(value, bytes) and len(value) > 200:
        text = repr(value[:60]) + f"...({len(value)} bytes)"
    return text if len(text) <= limit else text[:limit] + "..."
