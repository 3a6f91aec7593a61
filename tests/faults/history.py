"""The history format of the fault suite: one event per line, one file per process.

Every worker (and the nemesis that injects faults) appends :class:`Event`
records to its own JSON-lines file, stamped with a clock shared by all of them
(the same monotonic clock on one host). The checkers read the merged history
and never the live system, so a failing history can be kept and re-checked.

A grant is the ``("ok", "acquire")`` event written when acquire returned. Its
holder may assume exclusivity from that moment until its claimed validity end
or until it starts releasing, whichever comes first: that interval is the
grant's *window*, and the safety checkers compare windows only.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "ACQUIRE_OPS",
    "EXTEND_OPS",
    "Event",
    "History",
    "Window",
    "dump",
    "is_release_start",
    "load",
    "merge",
    "stalls",
    "windows",
]

ACQUIRE_OPS = frozenset({"acquire", "read-acquire", "write-acquire", "sem-acquire"})
"""Operations whose ``ok`` event is a grant."""

EXTEND_OPS = frozenset({"extend", "read-extend", "write-extend"})
"""Operations whose ``ok`` event moves a grant's claimed validity end."""


@dataclass(frozen=True, slots=True)
class Event:
    """One thing one process saw or did, at one instant of the shared clock."""

    time: float
    process: str
    kind: str
    op: str
    key: str = ""
    token: str = ""
    fence: int | None = None
    valid_until: float | None = None
    value: int | None = None
    detail: str = ""

    def to_json(self) -> str:
        # Defaults are left out: a worker writes thousands of these per run,
        # and a line that shows only what matters is easier to read by eye.
        fields = {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name in _REQUIRED or getattr(self, f.name) != f.default
        }
        return json.dumps(fields, separators=(",", ":"))

    @classmethod
    def from_json(cls, line: str) -> Event:
        raw = json.loads(line)
        if not isinstance(raw, dict):
            raise ValueError(f"an event must be a JSON object, not {raw!r}")
        unknown = set(raw) - _FIELDS
        if unknown:
            raise ValueError(f"unknown event fields {sorted(unknown)}")
        missing = _REQUIRED - set(raw)
        if missing:
            raise ValueError(f"missing event fields {sorted(missing)}")
        return cls(
            time=_number(raw, "time"),
            process=_text(raw, "process"),
            kind=_text(raw, "kind"),
            op=_text(raw, "op"),
            key=_text(raw, "key"),
            token=_text(raw, "token"),
            fence=_integer(raw, "fence"),
            valid_until=_number(raw, "valid_until") if raw.get("valid_until") is not None else None,
            value=_integer(raw, "value"),
            detail=_text(raw, "detail"),
        )


_FIELDS = frozenset(f.name for f in dataclasses.fields(Event))
_REQUIRED = frozenset({"time", "process", "kind", "op"})


def _number(raw: dict[str, Any], name: str) -> float:
    value = raw[name]
    # bool is an int subclass: a stray true must not pass for time 1.0.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number, not {value!r}")
    return float(value)


def _integer(raw: dict[str, Any], name: str) -> int | None:
    value = raw.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, not {value!r}")
    return value


def _text(raw: dict[str, Any], name: str) -> str:
    value = raw.get(name, "")
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, not {value!r}")
    return value


def dump(events: Iterable[Event], path: str | Path) -> None:
    """Write ``events`` to ``path``, one JSON object per line."""
    with Path(path).open("w", encoding="utf-8") as out:
        for event in events:
            out.write(event.to_json())
            out.write("\n")


def load(path: str | Path) -> list[Event]:
    """Read a JSON-lines history file written by :func:`dump`.

    A worker killed mid-write leaves a partial last line: that one line is
    dropped, since the kill itself is part of the history. A bad line
    anywhere else is an error naming the file and line.
    """
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    events: list[Event] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            events.append(Event.from_json(line))
        except (ValueError, TypeError) as error:
            if number == len(lines) and isinstance(error, json.JSONDecodeError):
                break
            raise ValueError(f"{path}:{number}: {error}") from error
    return events


def merge(streams: Iterable[Iterable[Event]]) -> list[Event]:
    """One history from several per-process ones, in time order.

    The sort is stable, so events with equal times keep the order of their
    stream and then of the streams as given: within one process, the order
    written is the order it happened, even where the clock did not move.
    """
    return sorted((event for stream in streams for event in stream), key=lambda e: e.time)


def is_release_start(event: Event) -> bool:
    """Whether ``event`` marks the moment a holder began giving up its grant.

    Either a dedicated ``release`` event or the invoke of a release
    operation: from then on the holder may no longer rely on exclusivity,
    whatever the release's outcome turns out to be.
    """
    return event.kind == "release" or (event.kind == "invoke" and event.op.endswith("release"))


@dataclass(frozen=True, slots=True)
class Window:
    """The interval during which one grant's holder assumed exclusivity."""

    process: str
    key: str
    op: str
    token: str
    fence: int | None
    start: float
    end: float
    released: bool

    def overlaps(self, other: Window) -> bool:
        # Strict: a window ending exactly where another starts is a hand-over.
        return self.start < other.end and other.start < self.end

    def describe(self) -> str:
        token = f" token {self.token!r}" if self.token else ""
        fence = f" fence {self.fence}" if self.fence is not None else ""
        end = "inf" if math.isinf(self.end) else f"{self.end:.6f}"
        return f"{self.process} ({self.op}{token}{fence}) [{self.start:.6f}, {end}]"


STALL_NOTICE = 0.1
"""Seconds after its process resumed within which a holder told of a loss
was told at once (its loop runs the timers that came due while stopped)."""

WORKERS = re.compile(r"workers=\(([^)]*)\)")
"""The workers a nemesis fault reaches, in its detail (none: every worker)."""

IDENT = re.compile(r"\bid=(\d+)")
"""A nemesis fault's id, in its detail (the simulation's; the fault tier's have none)."""


def stalls(events: Iterable[Event]) -> dict[str, list[tuple[float, float]]]:
    """When each worker process could not run: stopped by the nemesis
    (``pause-worker``, its ``workers=(...)``) or its event loop running late
    (``lag`` events: the stall ends when noticed, ``value`` ms long).

    A heal ends the pause of its ``id=`` when it names one: the simulation
    ends a crashed process's pause at the crash, before an older pause of
    another process heals (sim seed 3000); without one, the oldest."""
    found: dict[str, list[tuple[float, float]]] = {}
    paused: list[tuple[float, list[str], str | None]] = []  # in order of the faults
    for event in sorted(events, key=lambda e: e.time):
        if event.kind == "lag" and event.value:
            found.setdefault(event.process, []).append(
                (event.time - event.value / 1000, event.time)
            )
        elif event.process == "nemesis" and event.op == "pause-worker":
            ident = IDENT.search(event.detail)
            key = ident.group(1) if ident else None
            if event.kind == "fault":
                match = WORKERS.search(event.detail)
                numbers = re.split(r"[,\s]+", match.group(1)) if match else []
                paused.append((event.time, [f"w{n}" for n in numbers if n], key))
            elif event.kind == "heal" and paused:
                ended = [i for i, pause in enumerate(paused) if key is not None and pause[2] == key]
                began, processes, _ = paused.pop(ended[0] if ended else 0)
                for process in processes:
                    found.setdefault(process, []).append((began, event.time))
    return found


def _told_on_resume(spans: Sequence[tuple[float, float]], told: float) -> float | None:
    """The start of a stall that ended just before ``told`` (None: none did).

    Stalls that overlap are one: a process stopped twice at once (a stall in
    its own code, a stop from outside) runs again only when both are over,
    and could not act from the first one's start (sim seed 10012)."""
    merged: list[tuple[float, float, list[float]]] = []  # start, end, its stalls' ends
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            start, end, ends = merged[-1]
            merged[-1] = (start, max(end, b), [*ends, b])
        else:
            merged.append((a, b, [b]))
    # Told as one of them ended (a second stall may have begun just before:
    # its loop blocked again, sim seed 10014).
    starts = [a for a, _, ends in merged
              if any(told - STALL_NOTICE <= b <= told + STALL_NOTICE for b in ends)]  # fmt: skip
    return min(starts) if starts else None


def windows(events: Iterable[Event], ops: Iterable[str] = ACQUIRE_OPS) -> list[Window]:
    """The window of every grant in ``events`` whose op is in ``ops``.

    A grant ends at the earliest of its claimed validity end (as replaced by
    later successful extends, while it was still valid), the start of its
    release, and the moment its holder was told it was ``lost``. A release
    belongs to the grant with the same token on the same key, or, when
    either lacks a token, to the same process's latest open grant on that
    key. A grant with no claimed validity end and no release claims
    exclusivity for good: its window never ends.

    An auto-renewed grant (no claimed end) whose holder was told of its loss,
    or released it, as its process resumed from a stall (stopped, or its loop
    late: see :func:`stalls`) ends when that stall began: a process that
    cannot run cannot be told, nor act on what it holds; once it runs, it is
    told at once (within ``STALL_NOTICE``), or its first act is to let go. A
    claimed validity end is never moved.
    """
    events = sorted(events, key=lambda e: e.time)
    stalled = stalls(events)
    wanted = frozenset(ops)
    open_grants: dict[tuple[str, str], list[_Open]] = {}
    done: list[Window] = []
    for event in events:
        slot = (event.process, event.key)
        if event.kind == "ok" and event.op in wanted:
            grant = _Open(event)
            open_grants.setdefault(slot, []).append(grant)
        elif event.kind == "ok" and event.op in EXTEND_OPS:
            grant_or_none = _find(open_grants.get(slot, []), event.token)
            # An extend confirmed after the validity already ran out cannot
            # bridge the gap: the holder was exposed in between, so its
            # window stays closed at the old end. One confirmed in time
            # replaces the claim, even with an earlier end: the nodes' keys
            # now expire by the new ttl, so the old end is no longer backed.
            if (
                grant_or_none is not None
                and event.valid_until is not None
                and event.time < grant_or_none.valid_until
            ):
                grant_or_none.valid_until = event.valid_until
        elif is_release_start(event) or event.kind == "lost":
            grants = open_grants.get(slot, [])
            grant_or_none = _find(grants, event.token)
            if grant_or_none is not None:
                grants.remove(grant_or_none)
                end = event.time
                # Told of the loss, or releasing, the moment it runs again: a
                # renewed grant it could not renew nor act on since the stall
                # began (its hold's timer fell due meanwhile: sim seed 10007).
                if math.isinf(grant_or_none.valid_until):
                    began = _told_on_resume(stalled.get(event.process, ()), end)
                    if began is not None:
                        end = max(grant_or_none.ok.time, min(end, began))
                done.append(grant_or_none.close(end))
    for grants in open_grants.values():
        done.extend(grant.close(None) for grant in grants)
    done.sort(key=lambda w: (w.start, w.end))
    return done


class _Open:
    __slots__ = ("ok", "valid_until")

    def __init__(self, ok: Event) -> None:
        self.ok = ok
        self.valid_until = math.inf if ok.valid_until is None else ok.valid_until

    def close(self, released_at: float | None) -> Window:
        ok = self.ok
        end = self.valid_until if released_at is None else min(self.valid_until, released_at)
        return Window(
            process=ok.process,
            key=ok.key,
            op=ok.op,
            token=ok.token,
            fence=ok.fence,
            # A validity that had ended before acquire returned is an empty window.
            start=ok.time,
            end=max(end, ok.time),
            released=released_at is not None,
        )


def _find(grants: Sequence[_Open], token: str) -> _Open | None:
    if token:
        for grant in reversed(grants):
            if grant.ok.token == token:
                return grant
        # A tokened release that matches no grant is not this process's
        # grant on this key: leave the open ones alone.
        if any(grant.ok.token for grant in grants):
            return None
    return grants[-1] if grants else None


class History:
    """A merged, time-ordered history, with the views the checkers use."""

    __slots__ = ("events",)

    def __init__(self, events: Iterable[Event]) -> None:
        self.events: list[Event] = merge([events])

    @classmethod
    def from_files(cls, paths: Iterable[str | Path]) -> History:
        """Merge per-process history files (as written by :func:`dump`)."""
        return cls(merge(load(path) for path in paths))

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)

    def __len__(self) -> int:
        return len(self.events)

    def keys(self) -> list[str]:
        """Every non-empty key mentioned, in order of first appearance."""
        return list(dict.fromkeys(event.key for event in self.events if event.key))

    def of(self, *, key: str | None = None, process: str | None = None) -> list[Event]:
        return [
            event
            for event in self.events
            if (key is None or event.key == key) and (process is None or event.process == process)
        ]

    def windows(self, ops: Iterable[str] = ACQUIRE_OPS) -> list[Window]:
        return windows(self.events, ops)

    def dump(self, path: str | Path) -> None:
        dump(self.events, path)
