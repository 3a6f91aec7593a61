"""Checkers: each reads a history and returns a :class:`Verdict`, never raising.

They judge what the clients *claimed* (windows, fences, values written), so a
violation names the events that contradict each other, with their times.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence

# The liveness checkers live in bounds.py; both kinds are imported from here.
from .bounds import adopt_scope, call_bounds, prompt_grants, waits_only_for_its_names
from .history import ACQUIRE_OPS, Event, Window, windows
from .verdict import Verdict

__all__ = [
    "Verdict",
    "adopt_scope",
    "call_bounds",
    "cancel_safety",
    "fencing_order",
    "holder_told",
    "liveness",
    "mutual_exclusion",
    "no_keys_left",
    "no_lost_updates",
    "prompt_grants",
    "rw_exclusion",
    "semaphore_limit",
    "waits_only_for_its_names",
]

RW_OPS = frozenset({"read-acquire", "write-acquire"})
FENCED_OPS = frozenset({"acquire", "write-acquire"})
SEMAPHORE_OPS = frozenset({"sem-acquire"})


def _ms(seconds: float) -> str:
    return "forever" if math.isinf(seconds) else f"{seconds * 1000:.3f} ms"


def _by_key(items: Iterable[Window]) -> dict[str, list[Window]]:
    grouped: dict[str, list[Window]] = defaultdict(list)
    for item in items:
        grouped[item.key].append(item)
    return grouped


def _overlap(a: Window, b: Window) -> float:
    return min(a.end, b.end) - max(a.start, b.start)


def _overlapping_pairs(ordered: Sequence[Window]) -> Iterable[tuple[Window, Window]]:
    # Sweep by start: only windows still open when the next one starts can
    # overlap it, which keeps long histories near-linear.
    active: list[Window] = []
    for window in ordered:
        active = [other for other in active if other.end > window.start]
        for other in active:
            if other.overlaps(window):
                yield other, window
        active.append(window)


def mutual_exclusion(events: Iterable[Event], ops: Iterable[str] = ("acquire",)) -> Verdict:
    """No two grants' windows on one key overlap (touching is a hand-over)."""
    found = windows(events, ops)
    violations = [
        f"key {a.key!r}: {a.describe()} overlaps {b.describe()} by {_ms(_overlap(a, b))}"
        for per_key in _by_key(found).values()
        for a, b in _overlapping_pairs(per_key)
    ]
    counts = {
        "grants": len(found),
        "keys": len({w.key for w in found}),
        "released": sum(w.released for w in found),
        "overlaps": len(violations),
    }
    return Verdict("mutual_exclusion", not violations, violations, counts)


def semaphore_limit(
    events: Iterable[Event], limit: int, ops: Iterable[str] = SEMAPHORE_OPS
) -> Verdict:
    """Never more than ``limit`` grants' windows on one key at once (touching is a hand-over).

    A sweep over each key's window starts and ends, ends first at equal
    times; each grant that starts while ``limit`` others are open is a
    violation, naming the windows it overlaps.
    """
    found = windows(events, ops)
    violations: list[str] = []
    most = 0
    for key, per_key in _by_key(found).items():
        marks = sorted(
            [(w.start, 1, i) for i, w in enumerate(per_key)]
            + [(w.end, 0, i) for i, w in enumerate(per_key) if not math.isinf(w.end)]
        )
        open_now: set[int] = set()
        for _, starts, index in marks:
            if not starts:
                open_now.discard(index)
                continue
            if per_key[index].end <= per_key[index].start:
                continue  # an empty window (its validity ended before acquire returned)
            open_now.add(index)
            most = max(most, len(open_now))
            if len(open_now) > limit:
                window = per_key[index]
                others = "; ".join(
                    per_key[other].describe() for other in sorted(open_now) if other != index
                )
                violations.append(
                    f"key {key!r}: {window.describe()} is holder {len(open_now)} of a limit"
                    f" of {limit}, with {others}"
                )
    counts = {"grants": len(found), "most_at_once": most, "excess": len(violations)}
    return Verdict("semaphore_limit", not violations, violations, counts)


def rw_exclusion(events: Iterable[Event]) -> Verdict:
    """A writer's window overlaps no other window on its key; readers may share."""
    found = windows(events, RW_OPS)
    violations: list[str] = []
    for per_key in _by_key(found).values():
        for a, b in _overlapping_pairs(per_key):
            if a.op == "write-acquire" or b.op == "write-acquire":
                by = _ms(_overlap(a, b))
                violations.append(f"key {a.key!r}: {a.describe()} overlaps {b.describe()} by {by}")
    counts = {
        "readers": sum(w.op == "read-acquire" for w in found),
        "writers": sum(w.op == "write-acquire" for w in found),
        "overlaps": len(violations),
    }
    return Verdict("rw_exclusion", not violations, violations, counts)


def no_lost_updates(events: Iterable[Event]) -> Verdict:
    """Increments under the lock all landed, each on a distinct value.

    Each ``("ok", "increment")`` event carries the value written (the value
    read plus one); the last ``read`` event of a key carries the counter's
    final value. Two increments writing the same value read the same state:
    one overwrote the other. An increment of unknown outcome may or may not
    have landed, so it widens the accepted final value by one and no more.
    """
    written: dict[str, list[Event]] = defaultdict(list)
    unknown: dict[str, int] = defaultdict(int)
    final: dict[str, Event] = {}
    for event in sorted(events, key=lambda e: e.time):
        if event.op == "increment" and event.kind == "ok":
            written[event.key].append(event)
        elif event.op == "increment" and event.kind == "unknown":
            unknown[event.key] += 1
        elif event.kind == "read" or (event.op == "read" and event.kind == "ok"):
            final[event.key] = event
    violations: list[str] = []
    for key in sorted(set(written) | set(final) | set(unknown)):
        writes = written.get(key, [])
        by_value: dict[int | None, list[Event]] = defaultdict(list)
        for write in writes:
            by_value[write.value].append(write)
        for value, same in by_value.items():
            if value is None:
                violations.append(f"key {key!r}: {len(same)} increments recorded no value")
            elif len(same) > 1:
                who = ", ".join(f"{e.process} at {e.time:.6f}" for e in same)
                violations.append(f"key {key!r}: value {value} written {len(same)} times ({who})")
        read = final.get(key)
        if read is None or read.value is None:
            violations.append(f"key {key!r}: no final read, so lost updates cannot be ruled out")
            continue
        done, maybe = len(writes), unknown.get(key, 0)
        if not done <= read.value <= done + maybe:
            expected = f"{done}" if not maybe else f"{done}..{done + maybe}"
            violations.append(
                f"key {key!r}: final value {read.value} (read by {read.process} at"
                f" {read.time:.6f}) but {expected} increments succeeded:"
                f" {'lost' if read.value < done else 'phantom'} updates"
            )
        for write in writes:
            if write.value is not None and not 1 <= write.value <= read.value:
                violations.append(
                    f"key {key!r}: {write.process} wrote {write.value} at {write.time:.6f},"
                    f" outside 1..{read.value} of the final value"
                )
    counts = {
        "increments": sum(len(w) for w in written.values()),
        "unknown": sum(unknown.values()),
        "keys": len(set(written) | set(final)),
    }
    return Verdict("no_lost_updates", not violations, violations, counts)


def fencing_order(events: Iterable[Event], ops: Iterable[str] = FENCED_OPS) -> Verdict:
    """Fencing tokens are unique and grow with time; the resource only moves forward.

    Grants that were not concurrent (one's ok after the other's window ended)
    must carry increasing fences. ``fenced-write`` events record what the
    guarded resource did with a write: ``ok`` accepted, ``fail`` rejected.
    Accepted fences must never decrease in acceptance order.
    """
    history = sorted(events, key=lambda e: e.time)
    violations: list[str] = []
    fenced = [w for w in windows(history, ops) if w.fence is not None]
    for key, per_key in sorted(_by_key(fenced).items()):
        owners: dict[int, Window] = {}
        for window in per_key:
            assert window.fence is not None
            first = owners.setdefault(window.fence, window)
            if first is not window:
                violations.append(
                    f"key {key!r}: fence {window.fence} given twice:"
                    f" {first.describe()} and {window.describe()}"
                )
        # For each grant, the highest fence among grants whose window had
        # ended by its start: one pass over ends, one over starts.
        ends = sorted(per_key, key=lambda w: w.end)
        best: Window | None = None
        index = 0
        for window in per_key:  # already ordered by start
            while index < len(ends) and ends[index].end <= window.start:
                earlier = ends[index]
                assert earlier.fence is not None
                if best is None or best.fence is None or earlier.fence > best.fence:
                    best = earlier
                index += 1
            assert window.fence is not None
            if best is not None and best.fence is not None and window.fence <= best.fence:
                violations.append(
                    f"key {key!r}: {window.describe()} came after {best.describe()}"
                    f" but its fence is not greater"
                )
    accepted = rejected = stale_rejected = 0
    highest: dict[str, Event] = {}
    # The resource's own order of acceptance, where it told it (the counter
    # value it returned): a writer paused between the write and writing
    # down its event must not look like a late writer.
    writes = [e for e in history if e.op == "fenced-write" and e.fence is not None]
    if all(e.value is not None for e in writes if e.kind == "ok"):
        ok_order = iter(sorted((e for e in writes if e.kind == "ok"), key=lambda e: e.value or 0))
        writes = [next(ok_order) if e.kind == "ok" else e for e in writes]
    for event in writes:
        assert event.fence is not None  # filtered above
        top = highest.get(event.key)
        if event.kind == "ok":
            accepted += 1
            if top is not None and top.fence is not None and event.fence < top.fence:
                violations.append(
                    f"key {event.key!r}: stale write accepted: fence {event.fence} from"
                    f" {event.process} at {event.time:.6f} after fence {top.fence} from"
                    f" {top.process} at {top.time:.6f}"
                )
            else:
                highest[event.key] = event
        elif event.kind == "fail":
            rejected += 1
            if top is not None and top.fence is not None and event.fence < top.fence:
                stale_rejected += 1
    counts = {
        "fenced_grants": len(fenced),
        "writes_accepted": accepted,
        "writes_rejected": rejected,
        "stale_rejected": stale_rejected,
    }
    return Verdict("fencing_order", not violations, violations, counts)


def liveness(
    events: Iterable[Event],
    phases: Sequence[tuple[str, float, float]],
    *,
    min_success: float = 0.5,
    max_recovery: float = math.inf,
    ops: Iterable[str] = ACQUIRE_OPS,
) -> Verdict:
    """Acquire success rate per phase, and how long the system took to recover.

    An attempt belongs to the phase in which it completed (``ok``, ``fail``
    or ``unknown``). Phases named ``healthy*`` must reach ``min_success``.
    Recovery after a ``heal`` is the time to the first ``ok`` acquire at or
    after it; it must stay within ``max_recovery``. A heal after which
    attempts kept completing but none succeeded never recovered.
    """
    wanted = frozenset(ops)
    history = sorted(events, key=lambda e: e.time)
    done = [e for e in history if e.op in wanted and e.kind in ("ok", "fail", "unknown")]
    violations: list[str] = []
    counts: dict[str, int] = {}
    figures: dict[str, float] = {}
    for name, start, end in phases:
        inside = [e for e in done if start <= e.time < end]
        succeeded = sum(e.kind == "ok" for e in inside)
        counts[f"{name}.attempts"] = len(inside)
        counts[f"{name}.ok"] = succeeded
        rate = succeeded / len(inside) if inside else 0.0
        figures[f"{name}.success_rate"] = rate
        if name.startswith("healthy") and rate < min_success:
            detail = f"{succeeded}/{len(inside)}" if inside else "no attempt completed"
            violations.append(
                f"phase {name!r} [{start:.3f}, {end:.3f}): success rate {rate:.2f}"
                f" ({detail}) is below {min_success:.2f}"
            )
    heals = [e for e in history if e.kind == "heal"]
    worst = 0.0
    for number, heal in enumerate(heals):
        after = [e for e in done if e.time >= heal.time]
        first = next((e for e in after if e.kind == "ok"), None)
        label = f"heal{number}"
        if first is None:
            figures[f"{label}.recovery"] = math.inf
            if after:
                worst = math.inf
                violations.append(
                    f"no acquire succeeded after the heal at {heal.time:.3f}"
                    f" ({heal.op} {heal.detail}) in {len(after)} attempts"
                )
            continue
        recovery = first.time - heal.time
        figures[f"{label}.recovery"] = recovery
        worst = max(worst, recovery)
        if recovery > max_recovery:
            violations.append(
                f"recovery after the heal at {heal.time:.3f} ({heal.op}) took"
                f" {recovery:.3f} s, over the bound of {max_recovery:.3f} s"
            )
    counts["heals"] = len(heals)
    figures["max_recovery"] = worst
    return Verdict("liveness", not violations, violations, counts, figures)


def no_keys_left(events: Iterable[Event]) -> Verdict:
    """No lock key is left on any node once the workers stopped (and cleanup had its bound).

    The orchestrator writes a ``("keys", "left")`` event with the count per
    node and one ``("key", "left")`` event per key, carrying the value (the
    token) it held. Each key is traced to where its token came from: a grant
    (and what became of its release), an attempt that did not become the
    grant (``("attempts", op)`` events list their tokens), or an acquire its
    caller cancelled (``("cancel", "acquire")`` events list its attempts').
    """
    history = sorted(events, key=lambda e: e.time)
    origin: dict[str, str] = {}
    for event in history:
        if event.kind == "ok" and event.op in ACQUIRE_OPS and event.token:
            origin[event.token] = f"granted to {event.process} at {event.time:.3f}"
        elif event.kind == "attempts" and event.op in ACQUIRE_OPS:
            for token in event.detail.split():
                origin[token] = (
                    f"an attempt refused or rolled back in an acquire by {event.process}"
                    f" that ended at {event.time:.3f}"
                )
        elif event.kind == "cancel" and event.op.endswith("acquire"):
            for token in event.detail.split():
                origin[token] = f"an acquire by {event.process} cancelled at {event.time:.3f}"
        elif event.kind in ("cancel", "fail") and event.op.endswith("release") and event.token:
            what = "cancelled" if event.kind == "cancel" else f"failed ({event.detail})"
            seen = origin.get(event.token, f"grant of {event.process}")
            origin[event.token] = f"{seen}, release {what} at {event.time:.3f}"
        elif event.kind == "release" and event.token and event.token in origin:
            origin[event.token] += f", released at {event.time:.3f}"
    summary = [e for e in history if e.kind == "keys" and e.op == "left"]
    keys = [e for e in history if e.kind == "key" and e.op == "left"]
    count = summary[-1].value or 0 if summary else len(keys)
    violations = [
        f"{e.key} {e.detail}: token {e.token[:12] or '?'}"
        f" ({origin.get(e.token, 'no grant or cancelled acquire of this token recorded')})"
        for e in keys
    ]
    if count and not violations:
        violations.append(f"{count} lock keys left: {summary[-1].detail}")
    elif count > len(keys):
        # A burst of dropped releases leaves thousands: the orchestrator
        # lists a few per node, the count is all of them.
        violations.append(f"... {count} lock keys left in all: {summary[-1].detail}")
    cancelled = sum(1 for e in keys if "cancelled" in origin.get(e.token, ""))
    return Verdict(
        "no_keys_left",
        not violations,
        violations,
        {"keys_left": max(count, len(keys)), "from_cancelled_calls": cancelled},
    )


def holder_told(events: Iterable[Event], bound: float) -> Verdict:
    """Every holder learns when its grant ends: by releasing it or a loss notice.

    A ``("aclose", "redlock")`` event says a worker closed the Redlock its
    holders were using: renewals stop, so a holder's keys expire within one
    ttl. Each grant of that worker open at that moment must end (its release
    starts, or it is told ``lost``) within ``bound`` (the ttl plus slack); a
    body running on past that works on a lock nobody holds. And every grant
    of a worker that finished (``done``) ends with a release or a loss notice.
    """
    history = sorted(events, key=lambda e: e.time)
    found = windows(history, ACQUIRE_OPS)
    closes = [e for e in history if e.kind == "aclose"]
    finished = {e.process for e in history if e.kind == "done"}
    violations: list[str] = []
    late: set[Window] = set()
    for close in closes:
        for window in found:
            if window.process != close.process or not window.start < close.time < window.end:
                continue
            if window in late:
                continue  # reported at the first close it outlived
            if window.end > close.time + bound:
                late.add(window)
                end = "never" if math.isinf(window.end) else f"{window.end - close.time:.2f}s after"
                violations.append(
                    f"{window.describe()} was still claimed {end} its Redlock was closed at"
                    f" {close.time:.3f}, without a loss notice (bound {bound:.2f}s)"
                )
    for window in found:
        if window.process in finished and math.isinf(window.end) and window not in late:
            violations.append(f"{window.describe()} never ended: no release, no loss notice")
    counts = {"grants": len(found), "acloses": len(closes), "late": len(late)}
    return Verdict("holder_told", not violations, violations, counts)


def cancel_safety(events: Iterable[Event]) -> Verdict:
    """A cancelled public call leaves nothing behind.

    A cancelled acquire leaves no key once its commands settle (the keys
    left at the end are traced by token to the ``("cancel", "acquire")``
    events that list the attempts' tokens), and a lock whose release was
    cancelled is not held (renewed) a ttl later: workers write a
    ``("held", "abandoned")`` event for each such lock at the end.
    """
    history = sorted(events, key=lambda e: e.time)
    cancelled: dict[str, Event] = {}
    for event in history:
        if event.kind == "cancel" and event.op.endswith("acquire"):
            for token in event.detail.split():
                cancelled[token] = event
    violations = [
        f"{e.key} {e.detail}: left by {cancelled[e.token].process}'s acquire cancelled at"
        f" {cancelled[e.token].time:.3f} (token {e.token[:12]})"
        for e in history
        if e.kind == "key" and e.op == "left" and e.token in cancelled
    ]
    held = [e for e in history if e.kind == "held" and e.op == "abandoned"]
    violations += [
        f"{e.process}: lock {e.key!r} (token {e.token[:12]}) still held at {e.time:.3f},"
        f" its release {e.detail}: renewed by nobody's will"
        for e in held
    ]
    counts = {
        "cancelled": sum(1 for e in history if e.kind == "cancel"),
        "cancelled_acquires": sum(1 for e in history if e.kind == "cancel" and "acquire" in e.op),
        "cancelled_releases": sum(1 for e in history if e.kind == "cancel" and "release" in e.op),
        "still_held": len(held),
    }
    return Verdict("cancel_safety", not violations, violations, counts)
