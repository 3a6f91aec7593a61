"""The sorted-set commands the library's scripts run (readers, fair queues, heartbeats).

As ``datacmds.py``: each takes the database, the command's words and the
node's clock (ms) and returns Redis 7.0's reply. Members are ordered by
score, then bytewise, as Redis orders them (``keyspace.ZSet``); scores are
read as Redis reads them (``strtod``) and written as it writes them
(``%.17g``).
"""

from __future__ import annotations

from .keyspace import Keyspace, ZSet
from .replies import (
    NOT_A_FLOAT,
    NOT_AN_INTEGER,
    SYNTAX,
    WRONGTYPE,
    Error,
    NotModelled,
    Reply,
    format_double,
    parse_double,
    parse_int,
    parse_range_bound,
)

__all__ = [
    "zadd",
    "zcard",
    "zrange",
    "zrangebyscore",
    "zrank",
    "zrem",
    "zremrangebyscore",
    "zscore",
]

_NOT_A_RANGE = Error("ERR min or max is not a float")


def _zset(ks: Keyspace, key: bytes, now: int) -> ZSet | Error | None:
    value = ks.get(key, now)
    if value is None or isinstance(value, ZSet):
        return value
    return WRONGTYPE


def zadd(ks: Keyspace, args: list[bytes], now: int) -> Reply:
    nx = xx = False
    i = 2
    while i < len(args):
        word = args[i].upper()
        if word == b"NX":
            nx = True
        elif word == b"XX":
            xx = True
        elif word in (b"GT", b"LT", b"CH", b"INCR"):
            raise NotModelled(f"ZADD ... {word.decode()}")
        else:
            break
        i += 1
    pairs = len(args) - i
    if pairs == 0 or pairs % 2:
        return SYNTAX
    if nx and xx:
        return Error("ERR XX and NX options at the same time are not compatible")
    scores = [parse_double(args[j]) for j in range(i, len(args), 2)]
    if None in scores:
        return NOT_A_FLOAT
    key = args[1]
    found = _zset(ks, key, now)
    if isinstance(found, Error):
        return found
    if found is None:
        if xx:
            return 0
        ks.write(key)
        found = ks.data[key] = ZSet()
    else:
        ks.write(key)
    added = 0
    for score, j in zip(scores, range(i + 1, len(args), 2), strict=True):
        member = args[j]
        assert score is not None
        if member in found.scores:
            if nx and "zadd_nx_updates" not in ks.quirks:
                continue
            found.add(member, score)
        elif not xx:
            added += found.add(member, score)
    return added


def zrem(ks: Keyspace, args: list[bytes], now: int) -> Reply:
    key = args[1]
    found = _zset(ks, key, now)
    if not isinstance(found, ZSet):
        return 0 if found is None else found
    ks.write(key)
    removed = sum(found.remove(member) for member in args[2:])
    if not found:
        ks.delete(key)
    return removed


def zscore(ks: Keyspace, args: list[bytes], now: int) -> Reply:
    found = _zset(ks, args[1], now)
    if not isinstance(found, ZSet):
        return found
    score = found.scores.get(args[2])
    return None if score is None else format_double(score)


def zcard(ks: Keyspace, args: list[bytes], now: int) -> Reply:
    found = _zset(ks, args[1], now)
    return len(found) if isinstance(found, ZSet) else (found or 0)


def zrank(ks: Keyspace, args: list[bytes], now: int) -> Reply:
    found = _zset(ks, args[1], now)
    if not isinstance(found, ZSet):
        return found
    return found.rank(args[2])


def _pairs(found: ZSet, start: int, end: int, scores: bool) -> list[object]:
    if not scores:
        return [member for _, member in found.order[start:end]]
    flat: list[object] = []
    for score, member in found.order[start:end]:
        flat += (member, format_double(score))
    return flat


def zrange(ks: Keyspace, args: list[bytes], now: int) -> Reply:
    scores = False
    for word in args[4:]:
        if word.upper() != b"WITHSCORES":
            raise NotModelled(f"ZRANGE ... {word.decode(errors='replace')}")
        scores = True
    start, stop = parse_int(args[2]), parse_int(args[3])
    if start is None or stop is None:
        return NOT_AN_INTEGER
    found = _zset(ks, args[1], now)
    if not isinstance(found, ZSet):
        return found or []
    n = len(found)
    start = max(0, start + n if start < 0 else start)
    stop = stop + n if stop < 0 else min(stop, n - 1)
    if start > stop or start >= n:
        return []
    return _pairs(found, start, stop + 1, scores)


def zrangebyscore(ks: Keyspace, args: list[bytes], now: int) -> Reply:
    scores = False
    for word in args[4:]:
        upper = word.upper()
        if upper == b"LIMIT":
            raise NotModelled("ZRANGEBYSCORE ... LIMIT")
        if upper != b"WITHSCORES":
            return SYNTAX
        scores = True
    low, high = parse_range_bound(args[2]), parse_range_bound(args[3])
    if low is None or high is None:
        return _NOT_A_RANGE
    found = _zset(ks, args[1], now)
    if not isinstance(found, ZSet):
        return found or []
    start, end = found.between(*low, *high)
    return _pairs(found, start, end, scores)


def zremrangebyscore(ks: Keyspace, args: list[bytes], now: int) -> Reply:
    low, high = parse_range_bound(args[2]), parse_range_bound(args[3])
    if low is None or high is None:
        return _NOT_A_RANGE
    key = args[1]
    found = _zset(ks, key, now)
    if not isinstance(found, ZSet):
        return found or 0
    start, end = found.between(*low, *high)
    if start == end:
        return 0
    ks.write(key)
    for _, member in found.order[start:end]:
        del found.scores[member]
    del found.order[start:end]
    if not found:
        ks.delete(key)
    return end - start
