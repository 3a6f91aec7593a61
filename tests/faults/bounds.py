"""Liveness checkers: every call returns within its bound, and nobody waits for nothing.

``checkers.py`` re-exports them next to the safety checkers. They read what
the mixed workload (``mixed.py``) writes besides its grants:

- ``("call", OP, key=RES, value=ID, detail="T=<s>")`` when a public call
  begins and ``("return", OP, key=RES, value=ID, detail=OUTCOME)`` when it
  ends (ID unique within the process). OP is ``lock``, ``multi``, ``read``,
  ``write`` or ``sem`` for acquires, ``release`` or ``adopt``; T is the
  timeout the caller gave (``inf``: none; ``0``: one attempt, as
  ``blocking=False``, or one round trip, as a release or an adopt).
- ``("hold", KIND, key=RES, token=T, value=ttl_ms)`` the moment a grant of RES
  under token T is known to its holder (a semaphore's says ``limit=N`` in its
  detail), and ``("free", KIND, key=RES, token=T, value=MS)``: from now on,
  T's keys live at most MS more (0: gone, a quorum confirmed the release).
  These are what the nodes hold (occupancy), not what holders claim
  (windows, which the safety checkers judge): a lock is busy from its grant
  until its release was confirmed, or until its keys may have expired.
- ``("lag", "loop", value=MS)``: the process's event loop ran MS late (the
  event's time is when it noticed): a stall of the harness (a loaded CI
  machine), which no library can answer through - allowed on top of a bound.
- the nemesis's ``fault``/``heal`` events: a process is unhealthy from a fault
  that reaches it (every process, or those in its ``workers=(...)``) until
  ``after_heal`` seconds after the heal - or, when the fault restarted a
  node (``RESTARTS``), until the documented end of the restart rule's
  quarantine (:func:`restart_out`). Waits are judged while healthy only.

RES is a name, several names joined by "," (a multilock), the read-write
lock's name (``read``/``write``) or the semaphore's (``sem``).
"""

from __future__ import annotations

import bisect
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from redlock_async._engine import vote_limit
from redlock_async._engine._restarts import MIN_QUARANTINE

from .history import WORKERS as _WORKERS
from .history import Event
from .verdict import Verdict

__all__ = [
    "Call",
    "Intervals",
    "adopt_scope",
    "call_bounds",
    "calls",
    "prompt_grants",
    "waits_only_for_its_names",
]

ACQUIRES = frozenset({"lock", "multi", "read", "write", "sem"})
"""Call ops that wait for a resource (acquires)."""

EXCLUSIVE = frozenset({"lock", "multi"})
"""Hold kinds that take names' exclusive keys (a multilock takes each name's)."""

Span = tuple[float, float]


@dataclass(frozen=True, slots=True)
class Call:
    """One public call: its op, what it was for, its bound T, and when it ran."""

    process: str
    op: str
    res: str
    timeout: float  # T: math.inf for none, 0.0 for one attempt or one round trip
    start: float
    end: float  # when it returned, or its process's last event if it never did
    outcome: str  # ok | false | cancelled | error:<type> | never returned

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.res.split(","))

    @property
    def line(self) -> tuple[str, str, str]:
        """One process's waiters for one lock: the library lines them up together."""
        return (self.process, self.op, self.res)

    def describe(self) -> str:
        bound = "no timeout" if math.isinf(self.timeout) else f"T={self.timeout:g}"
        return f"{self.process} {self.op} {self.res!r} ({bound}) [{self.start:.3f}, {self.end:.3f}]"


def _timeout(detail: str) -> float:
    text = detail.partition("T=")[2].split()[0] if "T=" in detail else "inf"
    try:
        return float(text)
    except ValueError:
        return math.inf


def calls(events: Iterable[Event]) -> list[Call]:
    """Every call in ``events``, paired with its return by (process, ID)."""
    history = sorted(events, key=lambda e: e.time)
    last: dict[str, float] = {}
    for event in history:
        last[event.process] = event.time
    started: dict[tuple[str, int | None], Event] = {}
    found: list[Call] = []
    for event in history:
        if event.kind == "call":
            started[(event.process, event.value)] = event
        elif event.kind == "return":
            begun = started.pop((event.process, event.value), None)
            if begun is not None:
                found.append(_call(begun, event.time, event.detail))
    found += [_call(e, last[e.process], "never returned") for e in started.values()]
    found.sort(key=lambda c: c.start)
    return found


def _call(begun: Event, end: float, outcome: str) -> Call:
    return Call(
        begun.process, begun.op, begun.key, _timeout(begun.detail), begun.time, end, outcome
    )


class Intervals:
    """Disjoint, sorted spans, with the total length before any instant (for overlaps)."""

    __slots__ = ("_before", "_ends", "spans")

    def __init__(self, spans: Iterable[Span] = ()) -> None:
        merged: list[Span] = []
        for start, end in sorted(s for s in spans if s[1] > s[0]):
            if merged and start <= merged[-1][1]:
                if end > merged[-1][1]:
                    merged[-1] = (merged[-1][0], end)
            else:
                merged.append((start, end))
        self.spans = merged
        self._ends = [end for _, end in merged]
        self._before = [0.0]
        for start, end in merged:
            self._before.append(self._before[-1] + (end - start))

    def within(self, start: float, end: float) -> list[Span]:
        """The spans that meet [start, end], cut to it."""
        out: list[Span] = []
        index = bisect.bisect_right(self._ends, start)
        while index < len(self.spans) and self.spans[index][0] < end:
            a, b = self.spans[index]
            out.append((max(a, start), min(b, end)))
            index += 1
        return out

    def covered(self, start: float, end: float) -> float:
        """How long [start, end] lies inside these spans."""
        return max(0.0, self._upto(end) - self._upto(start))

    def _upto(self, when: float) -> float:
        index = bisect.bisect_right(self._ends, when)
        total = self._before[index]
        if index < len(self.spans) and self.spans[index][0] < when:
            total += when - self.spans[index][0]
        return total


def _gaps(start: float, end: float, blocked: Sequence[Span]) -> list[Span]:
    """[start, end] less the (sorted, possibly overlapping) ``blocked`` spans."""
    out: list[Span] = []
    at = start
    for a, b in sorted(blocked):
        if a > at:
            out.append((at, min(a, end)))
        at = max(at, b)
        if at >= end:
            break
    if at < end:
        out.append((at, end))
    return [(a, b) for a, b in out if b > a]


def _stalls(events: Sequence[Event]) -> dict[str, Intervals]:
    spans: dict[str, list[Span]] = defaultdict(list)
    for event in events:
        if event.kind == "lag" and event.value:
            spans[event.process].append((event.time - event.value / 1000, event.time))
    return {process: Intervals(found) for process, found in spans.items()}


# Faults that restart a node (possibly empty): the restart rule keeps it out
# of every process's quorum a while after it is back (docs/guarantees.md,
# "Restarted nodes", Availability).
RESTARTS = frozenset({"kill-node", "restart-node-at-once", "restart-node-empty"})

_RECONNECT = 0.5  # a client's reconnection after a node is back, at the least
_BACKOFF_CAP = 2.0  # the lean driver's reconnection backoff, at most (resp/_node.py)


def restart_out(began: float, healed: float, ttl: float) -> float:
    """When a node restarted by a fault from ``began`` to ``healed`` votes again,
    at the latest, per the documented rule (docs/guarantees.md, Availability).

    A node that lost its data is suspect until the view records of every grant
    made with its old epoch have expired: 1.25 x max(ttl, 2 s) after the last
    one. A process makes such grants until it notices the restart - on
    reconnecting, after its backoff, which doubles from 50 ms while the node
    is down (about the outage's length, 2 s at most). Each Redlock also keeps
    the node out ``MIN_QUARANTINE`` from then, which the records outlast. So a
    quorum short of that node - one more node holding a leftover key is
    enough, as when a partitioned worker's release reached a bare quorum - is
    the model's, not a stall.
    """
    noticed = healed + max(_RECONNECT, min(_BACKOFF_CAP, healed - began + 0.05))
    return noticed + max(MIN_QUARANTINE, 1.25 * max(ttl, 2.0))


def unhealthy(
    events: Sequence[Event], after_heal: float, ttl: float = 0.0
) -> dict[str | None, Intervals]:
    """Per process, when a fault reached it (until ``after_heal`` past the heal,
    or :func:`restart_out` for a restart, ``ttl`` being the schedule's).

    Key None: faults that reach every process. A nemesis fault names the
    workers it reaches in its detail (``workers=(1,)``; none: all of them);
    a fault a worker made in itself (a loop stall) reaches that worker only.
    """
    spans: dict[str | None, list[Span]] = defaultdict(list)
    open_faults: dict[tuple[str, str], list[tuple[float, list[str | None]]]] = defaultdict(list)
    end = max((e.time for e in events), default=0.0)
    for event in events:
        if event.kind == "fault":
            if event.process != "nemesis":
                reached: list[str | None] = [event.process]
            else:
                match = _WORKERS.search(event.detail)
                numbers = [n for n in re.split(r"[,\s]+", match.group(1)) if n] if match else []
                reached = [f"w{n}" for n in numbers] if numbers else [None]
            open_faults[(event.process, event.op)].append((event.time, reached))
        elif event.kind == "heal":
            pending = open_faults.get((event.process, event.op))
            if pending:
                began, reached = pending.pop(0)
                until = event.time + after_heal
                if event.op in RESTARTS:
                    until = max(until, restart_out(began, event.time, ttl))
                for process in reached:
                    spans[process].append((began, until))
    for (_, _), pending in open_faults.items():
        for began, reached in pending:
            for process in reached:
                spans[process].append((began, end + after_heal))
    return {process: Intervals(found) for process, found in spans.items()}


def _unhealthy_for(faults: dict[str | None, Intervals], process: str) -> Intervals:
    spans = list(faults.get(None, Intervals()).spans) + list(faults.get(process, Intervals()).spans)
    return Intervals(spans)


# Calls that are one fan-out, and acquires that may take a second round.
_ONE_FANOUT = frozenset({"release", "adopt", "extend"})
_TWO_ROUNDS = frozenset({"sem"})


def _oneshots_ahead(found: Sequence[Call]) -> dict[Call, int]:
    """For each one-attempt acquire: how many of its process's were in flight
    when it began (started before it, not yet returned)."""
    ends: dict[str, list[float]] = defaultdict(list)
    ahead: dict[Call, int] = {}
    for call in found:  # in order of start
        if call.timeout != 0 or call.op in _ONE_FANOUT:
            continue
        earlier = ends[call.process]
        ahead[call] = len(earlier) - bisect.bisect_right(earlier, call.start)
        bisect.insort(earlier, call.end)
    return ahead


def _unread(history: Sequence[Event], found: Sequence[Call]) -> dict[str, Intervals]:
    """Per process, when its ``Redlock`` may not have read the nodes' epochs
    yet: from its first event, and from each ``aclose`` (the next grants go
    through a fresh one), until a ``census ready`` event says it has (the
    simulation's) or, without those, until an acquire of it returns granted."""
    starts: dict[str, list[float]] = defaultdict(list)
    ready: dict[str, list[float]] = defaultdict(list)
    for event in history:
        if event.process not in starts or (event.kind == "aclose" and event.op == "redlock"):
            starts[event.process].append(event.time)
        if event.kind == "census" and event.op == "ready":
            ready[event.process].append(event.time)
    granted: dict[str, list[float]] = defaultdict(list)
    for call in found:
        if call.outcome == "ok" and call.op != "release":  # an adopt reads them too
            granted[call.process].append(call.end)
    out: dict[str, Intervals] = {}
    for process, begun in starts.items():
        ends = ready[process] if ready.get(process) else sorted(granted.get(process, []))
        spans = []
        for start in begun:
            index = bisect.bisect_left(ends, start)
            spans.append((start, ends[index] if index < len(ends) else math.inf))
        out[process] = Intervals(spans)
    return out


def call_bounds(
    events: Iterable[Event],
    *,
    node_timeout: float,
    slack: float = 0.5,
    slots: int = 1280,
    vote: float | None = None,
) -> Verdict:
    """Every call returned within its stated bound (API.md: "whatever other locks
    of the process are doing").

    The bounds are docs/guarantees.md's ("How long each call can take"),
    with V = ``vote_limit(node_timeout)``, the longest a vote stays pending:

    - an acquire with timeout T > 0: T + node_timeout (the attempt in flight
      is cut at the deadline; a refusal's judging waits up to node_timeout),
      and one V more for a semaphore (its second round may begin just
      before the deadline);
    - one with T = 0 (``blocking=False``): V x (w + 1) + node_timeout, where
      w = ceil((k + 1) / ``slots``) and k the one-attempt acquires of its
      process still in flight when it began (one-shots take the admission
      slots in waves of at most ``slots``, each decided within V, and the
      first may wait up to V for blocking attempts to give theirs up), one
      V more for a semaphore, and one V more when it began before its
      ``Redlock`` had read the nodes' epochs (its first grant waits up to V
      for that census, as ``adopt()``'s does);
    - a release, an adopt: V (one fan-out).

    ``slack`` on top of each, for a loaded machine. ``vote``: V itself, for a
    judge in a process whose library may be patched (a planted bug that
    changes the bound must not change what it is held to).
    Allowed on top: the time the call's own event loop was stalled meanwhile
    (``lag`` events). Calls with no timeout have no bound here. A call that
    never returned is judged at its process's last event. Whatever a call
    waited for - a slot among the attempts in flight, a vote a slow node
    keeps pending, its turn in a line - it must not wait past its bound.
    """
    history = sorted(events, key=lambda e: e.time)
    found = calls(history)
    stalls = _stalls(history)
    limit = vote_limit(node_timeout) if vote is None else vote
    ahead = _oneshots_ahead(found)
    unread = _unread(history, found)
    over: list[tuple[float, str]] = []
    worst = 0.0
    bounded = 0
    for call in found:
        if math.isinf(call.timeout):
            continue
        bounded += 1
        stalled = (
            stalls[call.process].covered(call.start, call.end) if call.process in stalls else 0
        )
        if call.op in _ONE_FANOUT:
            stated = limit
        elif call.timeout > 0:
            stated = call.timeout + node_timeout
        else:
            waves = math.ceil((ahead.get(call, 0) + 1) / slots)
            stated = limit * (waves + 1) + node_timeout
            if unread[call.process].covered(call.start, call.start + 1e-9) > 0:
                stated += limit
        if call.op in _TWO_ROUNDS:
            stated += limit
        bound = stated + slack + stalled
        took = call.end - call.start
        worst = max(worst, took - call.timeout - stalled)
        if took > bound:
            message = (
                f"{call.describe()} took {took:.3f} s ({call.outcome}): over its bound"
                f" {bound:.3f} s (stated {stated:.3f} s at node_timeout {node_timeout:g}"
                f" + {slack:g}"
                f" + {stalled:.3f} s of its own loop's stalls)"
            )
            over.append((took - bound, message))
    violations = [message for _, message in sorted(over, key=lambda o: -o[0])]  # worst first
    counts = {"calls": len(found), "bounded": bounded, "over": len(violations)}
    figures = {"worst_over_timeout_s": round(worst, 3)}
    return Verdict("call_bounds", not violations, violations, counts, figures)


@dataclass(slots=True)
class _Token:
    kind: str
    res: str
    start: float
    end: float = math.inf
    confirmed: bool = False
    limit: int = 0
    ttl: float = 0.0  # seconds, as its hold event says (0: not said)
    maybe: list[float] = field(default_factory=list)


# Faults under which a node runs a command long after it was sent: it
# queues behind a slow node's backlog, or waits while the node is paused,
# until the fault ends (the simulation's nodes, and a real one, catch up).
_LATE = frozenset({"slow-node", "slow-majority", "pause-node"})
_FAULT_ID = re.compile(r"\bid=(\d+)")


def _late_spans(history: Sequence[Event]) -> list[Span]:
    """When a command sent may run only at the span's end (``_LATE`` faults)."""
    began: dict[str, float] = {}
    spans: list[Span] = []
    for event in history:
        if event.process != "nemesis" or event.op not in _LATE:
            continue
        match = _FAULT_ID.search(event.detail)
        ident = match.group(1) if match else event.op
        if event.kind == "fault":
            began[ident] = event.time
        elif event.kind == "heal" and ident in began:
            spans.append((began.pop(ident), event.time))
    spans += [(start, math.inf) for start in began.values()]  # never healed
    return spans


def _crashes(history: Sequence[Event]) -> dict[str, list[float]]:
    """When each worker process was crashed by the nemesis (``crash-process``)."""
    found: dict[str, list[float]] = defaultdict(list)
    for event in history:
        if event.process == "nemesis" and event.kind == "fault" and event.op == "crash-process":
            match = _WORKERS.search(event.detail)
            for number in re.split(r"[,\s]+", match.group(1)) if match else ():
                if number:
                    found[f"w{number}"].append(event.time)
    return found


def _cut_short(
    tokens: dict[str, _Token],
    found: Sequence[Call],
    retry: float,
    late: Sequence[Span] = (),
    crashes: dict[str, list[float]] | None = None,
) -> dict[str, list[tuple[str, Span]]]:
    """What acquires a process's crash (or end) cut short may hold with no grant
    of it in the history, per hold kind (``lock`` for the exclusive names;
    ``read``, ``write``; ``waiting`` for a writer's wait marker). The nodes may
    have granted the acquire as the process died, and its keys then live for
    its ttl from its last attempt - about its call's end, or as late as a
    slow or paused node ran it (``late``: the spans of such faults) - on each
    name: the longest any grant of that kind and name shows (``hold``
    events; none known, nothing is assumed). A writer's wait marker (``:ww``, docs/rwlock.md) keeps
    new readers out for three retry delays after its last attempt, granted
    or not."""
    ttls: dict[tuple[str, str], float] = {}
    for token in tokens.values():
        kind = "lock" if token.kind in EXCLUSIVE else token.kind
        if token.ttl:
            for name in token.res.split(",") if kind == "lock" else (token.res,):
                ttls[kind, name] = max(ttls.get((kind, name), 0.0), token.ttl)
    spans: dict[str, list[tuple[str, Span]]] = defaultdict(list)
    for call in found:
        kind = "lock" if call.op in EXCLUSIVE else call.op
        if kind not in ("lock", "read", "write"):
            continue
        # Its last commands ran by its end, or when a slow node caught up.
        ran = max([call.end] + [b for a, b in late if a <= call.end < b])
        if call.outcome not in ("crashed", "never returned"):
            # A failed attempt's undo waits for the slow node to answer: a
            # crash meanwhile leaves what it wrote there (sim seed 10017).
            died = any(call.end <= t < ran for t in (crashes or {}).get(call.process, ()))
            if call.outcome == "ok" or not died:
                continue
        for name in call.names if kind == "lock" else [call.res]:
            if (kind, name) in ttls:
                end = ran + ttls[kind, name] + _KEY_SLACK
                spans[kind].append((name, (call.start, end)))
        if kind == "write":
            marker = max(3 * retry, 0.1)  # the script's: at least 100 ms
            spans["waiting"].append((call.res, (call.start, call.end + marker + _KEY_SLACK)))
    return spans


# A node's clock may run slow within the drift factor (1 %), and a key is
# set when the command lands, a little after it was sent.
_KEY_SLACK = 0.2


def _occupancy(history: Sequence[Event]) -> dict[str, _Token]:
    tokens: dict[str, _Token] = {}
    for event in history:
        if event.kind == "hold" and event.token:
            if event.token not in tokens:
                limit = int(event.detail.partition("limit=")[2] or 0) if event.detail else 0
                ttl = (event.value or 0) / 1000
                tokens[event.token] = _Token(event.op, event.key, event.time, limit=limit, ttl=ttl)
        elif event.kind == "free" and event.token in tokens:
            token = tokens[event.token]
            if token.confirmed:
                continue
            if not event.value:
                token.confirmed, token.end = True, event.time
            else:
                token.maybe.append(event.time + event.value / 1000)
    for token in tokens.values():
        if not token.confirmed and token.maybe:
            token.end = max(token.maybe)
    return tokens


class _Resources:
    """When each waiter's want was out of reach, per the occupancy (and waiting writers)."""

    def __init__(
        self,
        tokens: dict[str, _Token],
        found: Sequence[Call],
        *,
        retry: float = 0.4,
        history: Sequence[Event] = (),
    ) -> None:
        names: dict[str, list[Span]] = defaultdict(list)
        readers: dict[str, list[Span]] = defaultdict(list)
        writers: dict[str, list[Span]] = defaultdict(list)
        slots: dict[str, list[tuple[float, int]]] = defaultdict(list)
        limits: dict[str, int] = {}
        for token in tokens.values():
            span = (token.start, token.end)
            if token.kind in EXCLUSIVE:
                for name in token.res.split(","):
                    names[name].append(span)
            elif token.kind == "read":
                readers[token.res].append(span)
            elif token.kind == "write":
                writers[token.res].append(span)
            elif token.kind == "sem":
                slots[token.res] += [(token.start, 1), (token.end, -1)]
                limits[token.res] = max(limits.get(token.res, 0), token.limit)
        waiting_writers: dict[str, list[Span]] = defaultdict(list)
        for call in found:
            if call.op == "write":
                waiting_writers[call.res].append((call.start, call.end))
        cut = _cut_short(tokens, found, retry, _late_spans(history), _crashes(history))
        for name, span in cut["lock"]:
            names[name].append(span)
        for res, span in cut["read"]:
            readers[res].append(span)
        for res, span in cut["write"]:
            writers[res].append(span)
        for res, span in cut["waiting"]:
            waiting_writers[res].append(span)
        self.names = {name: Intervals(spans) for name, spans in names.items()}
        self.write = {res: Intervals(spans) for res, spans in writers.items()}
        self.readers = {res: sorted(spans) for res, spans in readers.items()}
        self._reader_starts = {res: [a for a, _ in spans] for res, spans in self.readers.items()}
        self.any_rw = {
            res: Intervals(readers.get(res, []) + writers.get(res, []))
            for res in set(readers) | set(writers)
        }
        # Readers stand back while a writer holds or waits (docs/rwlock.md).
        self.read = {
            res: Intervals(writers.get(res, []) + waiting_writers.get(res, []))
            for res in set(writers) | set(waiting_writers)
        }
        self.full: dict[str, Intervals] = {}
        for res, marks in slots.items():
            full: list[Span] = []
            held, since = 0, 0.0
            # Ends first at equal times: a hand-over is not a moment of excess.
            for when, step in sorted(marks, key=lambda m: (m[0], m[1])):
                if held >= limits[res] and step < 0:
                    full.append((since, when))
                held += step
                # Full from when the count reached the limit, not from a later
                # grant above it (occupancy is conservative: a lost holder's
                # keys count until they may have expired).
                if held == limits[res] and step > 0:
                    since = when
            self.full[res] = Intervals(full)

    def blocked(self, call: Call, flag_down: Intervals | None = None) -> list[Span]:
        """When what ``call`` wants is taken. For a write, with ``flag_down``
        (when its wait flag may not stand on a majority: see
        :meth:`flag_down`), only the readers inside as it began or let in
        while its flag was down: later ones the nodes must turn away
        (docs/rwlock.md), so they are no reason to wait."""
        start, end = call.start, call.end
        none = Intervals()
        if call.op in EXCLUSIVE:
            return [s for n in call.names for s in self.names.get(n, none).within(start, end)]
        if call.op == "read":
            return self.read.get(call.res, none).within(start, end)
        if call.op == "write" and flag_down is not None:
            spans = self.write.get(call.res, none).within(start, end)
            readers = self.readers.get(call.res, [])
            for a, b in readers[: bisect.bisect_left(self._reader_starts[call.res], end)]:
                if b > start and (a <= start or flag_down.covered(a, a + 1e-9) > 0):
                    spans.append((max(a, start), min(b, end)))
            return spans
        if call.op == "write":
            # A writer is not held back by its own wait (only by grants).
            return self.any_rw.get(call.res, none).within(start, end)
        if call.op == "sem":
            return self.full.get(call.res, none).within(start, end)
        return [(start, end)]

    def flag_down(self, call: Call, sick: Sequence[Span], retry: float) -> Intervals:
        """When a writer's wait flag (``:ww``) may not stand on a majority of
        the nodes: until its first attempt set it, while it could not reach a
        healthy majority or its loop stalled (the flag may lapse: it lives
        three retry delays from the writer's last attempt), while another
        writer held the lock (no flag is raised then), and each time one
        retry delay past those, for its next attempt to set it again."""
        down = [(call.start, call.start + retry)]
        down += [(a, b + retry) for a, b in sick]
        down += [(b, b + retry) for _, b in self.write.get(call.res, Intervals()).within(
            call.start, call.end)]  # fmt: skip
        return Intervals(down)

    @staticmethod
    def shared(a: Call, b: Call) -> bool:
        """Whether ``a`` and ``b`` want something in common (they can collide)."""
        if a.op in EXCLUSIVE and b.op in EXCLUSIVE:
            return bool(set(a.names) & set(b.names))
        if {a.op, b.op} <= {"read", "write"}:
            return a.res == b.res
        return a.op == b.op and a.res == b.res


def _idle_waits(
    events: Iterable[Event],
    ops: frozenset[str],
    *,
    retry: float,
    slack: float,
    contended: float,
    after_heal: float,
    ttl: float,
) -> tuple[list[str], dict[str, int], dict[str, float]]:
    """Stretches in which a waiter's want was all free, healthy, and it still waited.

    Bound: ``retry + slack`` when no waiter of another line wanted any of it
    meanwhile (nothing to collide with: its line's first waiter attempts at
    once, woken by the release, or at its next retry if the wake-up was
    missed); ``contended * retry + slack`` when one did (split votes between
    lines: each retries after its jittered delay, and may split again).
    Plus the stalls of the waiter's own event loop within the stretch.
    """
    history = sorted(events, key=lambda e: e.time)
    found = calls(history)
    resources = _Resources(_occupancy(history), found, retry=retry, history=history)
    faults = unhealthy(history, after_heal, ttl)
    stalls = _stalls(history)
    waiters = [c for c in found if c.op in ops and c.timeout > 0]
    everyone = [c for c in found if c.op in ACQUIRES and c.timeout > 0]
    free_spans: dict[int, list[Span]] = {}
    sick_cache: dict[str, Intervals] = {}

    def free(call: Call) -> list[Span]:
        key = id(call)
        if key not in free_spans:
            sick = sick_cache.get(call.process)
            if sick is None:
                sick = sick_cache[call.process] = _unhealthy_for(faults, call.process)
            ill = sick.within(call.start, call.end)
            down = None
            if call.op == "write":
                stalled = stalls[call.process].within(call.start, call.end) if (
                    call.process in stalls) else []  # fmt: skip
                down = resources.flag_down(call, ill + stalled, retry)
            blocked = resources.blocked(call, down) + ill
            free_spans[key] = _gaps(call.start, call.end, blocked)
        return free_spans[key]

    starts = [c.start for c in everyone]
    found_idle: list[tuple[float, str]] = []
    longest = 0.0
    for call in waiters:
        for a, b in free(call):
            stalled = stalls[call.process].covered(a, b) if call.process in stalls else 0.0
            idle = b - a - stalled
            longest = max(longest, idle)
            if idle <= retry + slack:
                continue
            # Rivals: waiters of other lines that wanted some of it and could
            # have had it at some point of the stretch.
            rivals = [
                other
                for other in everyone[: bisect.bisect_left(starts, b)]
                if other.end > a
                and other.line != call.line
                and resources.shared(call, other)
                and any(x < b and y > a for x, y in free(other))
            ]
            bound = (contended if rivals else 1.0) * retry + slack
            if idle > bound:
                who = f"{len(rivals)} rival waiters" if rivals else "no rival waiter"
                found_idle.append((idle - bound, (
                    f"{call.describe()} ({call.outcome}): what it waited for was free for"
                    f" {b - a:.3f} s of its wait, [{a:.3f}, {b:.3f}], and it did not take it;"
                    f" {who} (bound {bound:.3f} s + {stalled:.3f} s of its own loop's stalls)"
                )))  # fmt: skip
    violations = [message for _, message in sorted(found_idle, key=lambda f: -f[0])]
    counts = {"waiters": len(waiters), "idle_waits": len(violations)}
    return violations, counts, {"longest_idle_s": round(longest, 3)}


def prompt_grants(
    events: Iterable[Event],
    *,
    retry: float,
    slack: float = 0.3,
    contended: float = 3.0,
    after_heal: float = 1.0,
    ttl: float = 0.0,
    ops: Iterable[str] = ("lock", "read", "write", "sem"),
) -> Verdict:
    """A free lock (a free semaphore slot) is taken by a waiting caller within a bound.

    For each waiting acquire (a timeout above 0) of a plain lock, a read or
    write grant, or a semaphore slot: the stretches of its wait in which what
    it wanted was free per the history (no grant's keys on the name, no
    writer holding or waiting for a reader, a slot below the limit), its
    process healthy, must each be shorter than ``retry`` (the retry delay
    plus its jitter) + ``slack``, or ``contended`` times ``retry`` + slack
    when a waiter of another line could have collided with it.
    """
    violations, counts, figures = _idle_waits(
        events, frozenset(ops), retry=retry, slack=slack, contended=contended,
        after_heal=after_heal, ttl=ttl,
    )  # fmt: skip
    return Verdict("prompt_grants", not violations, violations, counts, figures)


def waits_only_for_its_names(
    events: Iterable[Event],
    *,
    retry: float,
    slack: float = 0.3,
    contended: float = 3.0,
    after_heal: float = 1.0,
    ttl: float = 0.0,
) -> Verdict:
    """No acquire waits on a lock it was not waiting for.

    A multilock on [a, c] waits for a and c only: while both were free per
    the history (and its process healthy) for longer than the bound of
    ``prompt_grants``, it must have taken them - whatever another waiter of
    its process (a multilock on [a, b], b held elsewhere) waits for.
    """
    violations, counts, figures = _idle_waits(
        events, frozenset({"multi"}), retry=retry, slack=slack, contended=contended,
        after_heal=after_heal, ttl=ttl,
    )  # fmt: skip
    return Verdict("waits_only_for_its_names", not violations, violations, counts, figures)


def adopt_scope(events: Iterable[Event]) -> Verdict:
    """A multilock's token is never adopted as one of its names (API.md).

    The mixed workload sometimes hands a held multilock's token to
    ``adopt(first name, token)``: an ``("ok", "adopt-probe")`` event whose
    detail is not ``MultiLock`` (adopted as the whole set, which the
    contract allows) is a violation; ``fail`` (refused) is what must happen.
    """
    probes = [e for e in events if e.op == "adopt-probe" and e.kind in ("ok", "fail")]
    violations = [
        f"{e.process} adopted {e.key!r} with a multilock's token {e.token[:12]} at"
        f" {e.time:.3f} (got a {e.detail or 'lock'}, not the whole set)"
        for e in probes
        if e.kind == "ok" and e.detail != "MultiLock"
    ]
    counts = {"probes": len(probes), "refused": sum(e.kind == "fail" for e in probes)}
    return Verdict("adopt_scope", not violations, violations, counts)
