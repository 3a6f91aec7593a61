"""One database of a simulated node: its keys, their expiries, and the write journal.

Values are ``bytes`` (a string), ``dict[bytes, bytes]`` (a hash, fields in
insertion order, as a small Redis hash keeps them) or :class:`ZSet`.
Expiries are absolute times in ms on the node's clock. A key is expired
once the clock is past its time (``now > at``, as Redis's ``keyIsExpired``)
and is then gone for every command: it is deleted lazily, the first time
anything looks at it (Redis also deletes in the background; no client can
tell the two apart).

The :class:`Journal`, when the node keeps one, records what every write
unit (a command, or a whole script: Redis 7.0 writes a script's effects to
the append-only file as one MULTI/EXEC) overwrote, so that a restart can come
back with the data as it was some writes ago (``SimNode.restart``).
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Callable

__all__ = ["Entry", "Journal", "Keyspace", "Saved", "Value", "ZSet"]


class ZSet:
    """A sorted set: member -> score, and the (score, member) pairs in Redis's order."""

    __slots__ = ("order", "scores")

    def __init__(self) -> None:
        self.scores: dict[bytes, float] = {}
        self.order: list[tuple[float, bytes]] = []

    def __len__(self) -> int:
        return len(self.scores)

    def copy(self) -> ZSet:
        other = ZSet()
        other.scores = dict(self.scores)
        other.order = list(self.order)
        return other

    def add(self, member: bytes, score: float) -> bool:
        """Set ``member``'s score; True when it was new."""
        old = self.scores.get(member)
        if old is not None:
            if old == score:
                return False
            del self.order[bisect.bisect_left(self.order, (old, member))]
        self.scores[member] = score
        bisect.insort(self.order, (score, member))
        return old is None

    def remove(self, member: bytes) -> bool:
        score = self.scores.pop(member, None)
        if score is None:
            return False
        del self.order[bisect.bisect_left(self.order, (score, member))]
        return True

    def rank(self, member: bytes) -> int | None:
        score = self.scores.get(member)
        if score is None:
            return None
        return bisect.bisect_left(self.order, (score, member))

    def between(self, low: float, low_open: bool, high: float, high_open: bool) -> tuple[int, int]:
        """The index range [start, end) of the pairs whose score is within the bounds."""
        order = self.order
        if low_open:
            start = len(order) if low == math.inf else bisect.bisect_left(order, (_above(low),))
        else:
            start = bisect.bisect_left(order, (low,))
        if high_open:
            end = bisect.bisect_left(order, (high,))
        else:
            end = len(order) if high == math.inf else bisect.bisect_left(order, (_above(high),))
        return start, max(start, end)


def _above(value: float) -> float:
    return math.nextafter(value, math.inf)


Value = bytes | dict[bytes, bytes] | ZSet

Entry = tuple[str, object, int | None]
"""A key in a snapshot: its type ("string", "hash", "zset"), value and expiry (ms) or None.
Values: bytes, a dict of the hash's fields, or a list of (member, score) in order."""

Saved = tuple[dict[bytes, Value], dict[bytes, int]]
"""A database's keys and expiries, copied (``Keyspace.save``)."""


def copy_value(value: Value) -> Value:
    if isinstance(value, bytes):
        return value
    if isinstance(value, ZSet):
        return value.copy()
    return dict(value)


class Journal:
    """The last write units: for each, what its writes overwrote (to undo it).

    ``limit`` units are kept; older ones can no longer be lost (they count as
    written to disk).
    """

    __slots__ = ("current", "units")

    def __init__(self, limit: int) -> None:
        self.units: deque[dict[tuple[int, bytes], tuple[Keyspace, bytes, Value | None, int | None]]]
        self.units = deque(maxlen=limit)
        self.current: dict[tuple[int, bytes], tuple[Keyspace, bytes, Value | None, int | None]] = {}

    def save(self, keyspace: Keyspace, key: bytes) -> None:
        """Before the first write to ``key`` in the current unit: keep what it held."""
        slot = (id(keyspace), key)
        if slot not in self.current:
            value = keyspace.data.get(key)
            old = None if value is None else copy_value(value)
            self.current[slot] = (keyspace, key, old, keyspace.expires.get(key))

    def close(self) -> None:
        """The command or script is over: its writes make one unit."""
        if self.current:
            self.units.append(self.current)
            self.current = {}

    def undo(self, count: int) -> int:
        """Take back the last ``count`` units (fewer if fewer are kept); how many were."""
        self.close()
        undone = 0
        while undone < count and self.units:
            for keyspace, key, value, at in self.units.pop().values():
                keyspace.restore(key, value, at)
            undone += 1
        return undone


class Keyspace:
    """One database: ``data`` (key -> value) and ``expires`` (key -> ms).

    ``now``, which the commands get, is the node's clock when the command (or
    the script running it) began: whether a key has expired is judged by it,
    as Redis 7.0 judges it by its cached time.
    """

    __slots__ = ("clock", "data", "expires", "journal", "quirks")

    def __init__(
        self, clock: Callable[[], int], journal: Journal | None, quirks: frozenset[str]
    ) -> None:
        self.clock = clock  # the node's, read live (PTTL, SET PX, PEXPIRE): see datacmds
        self.data: dict[bytes, Value] = {}
        self.expires: dict[bytes, int] = {}
        self.journal = journal
        self.quirks = quirks

    def get(self, key: bytes, now: int) -> Value | None:
        """The live value at ``key`` (an expired key is deleted first)."""
        at = self.expires.get(key)
        if at is not None and now > at:
            self.delete(key)
            return None
        return self.data.get(key)

    def write(self, key: bytes) -> None:
        """About to change ``key`` (its value, type or expiry): journal it."""
        if self.journal is not None:
            self.journal.save(self, key)

    def delete(self, key: bytes) -> bool:
        if key not in self.data:
            return False
        if self.journal is not None:
            self.journal.save(self, key)
        del self.data[key]
        self.expires.pop(key, None)
        return True

    def restore(self, key: bytes, value: Value | None, at: int | None) -> None:
        """Put ``key`` back as it was (the journal's undo)."""
        if value is None:
            self.data.pop(key, None)
        else:
            self.data[key] = value
        if at is None:
            self.expires.pop(key, None)
        else:
            self.expires[key] = at

    def flush(self) -> None:
        if self.journal is not None:
            for key in self.data:
                self.journal.save(self, key)
        self.data.clear()
        self.expires.clear()

    def live_keys(self, now: int) -> list[bytes]:
        """Every key not expired at ``now`` (expired ones are deleted)."""
        for key, at in list(self.expires.items()):
            if now > at:
                self.delete(key)
        return list(self.data)

    # Whole-database copies: snapshots to compare, saves to roll back --------------

    def snapshot(self, now: int) -> dict[bytes, Entry]:
        """Every key alive at ``now``, as plain values (nothing is deleted)."""
        found: dict[bytes, Entry] = {}
        for key, value in self.data.items():
            at = self.expires.get(key)
            if at is not None and now > at:
                continue
            if isinstance(value, bytes):
                found[key] = ("string", value, at)
            elif isinstance(value, ZSet):
                found[key] = ("zset", [(member, score) for score, member in value.order], at)
            else:
                found[key] = ("hash", dict(value), at)
        return found

    def load(self, snapshot: dict[bytes, Entry]) -> None:
        """Hold exactly ``snapshot`` (as ``snapshot`` gives it)."""
        self.data.clear()
        self.expires.clear()
        for key, (kind, value, at) in snapshot.items():
            if kind == "string" and isinstance(value, bytes):
                self.data[key] = value
            elif kind == "hash" and isinstance(value, dict):
                self.data[key] = dict(value)
            elif kind == "zset" and isinstance(value, list):
                zset = self.data[key] = ZSet()
                for member, score in value:
                    zset.add(member, score)
            else:
                raise ValueError(f"a key of type {kind} cannot be loaded: {value!r}")
            if at is not None:
                self.expires[key] = at

    def save(self) -> Saved:
        return {key: copy_value(value) for key, value in self.data.items()}, dict(self.expires)

    def restore_all(self, saved: Saved) -> None:
        data, expires = saved
        self.data = {key: copy_value(value) for key, value in data.items()}
        self.expires = dict(expires)
