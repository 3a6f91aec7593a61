"""The data commands the library's scripts run, with Redis 7.0's replies and errors.

Each takes the database, the command's words (the name first) and the
node's clock (ms), and returns a reply (``replies.py``). Only the forms the
scripts send, and a few that build test states, are modelled; any other
option raises :class:`NotModelled`. Arity is checked by the caller
(``commands.py``), so each may index its words freely.

Time: ``now`` (the command's or script's start) decides which keys have
expired; what Redis 7.0 reads from the live clock even inside a script -
``PTTL``, the expiry ``SET ... PX`` and ``PEXPIRE`` set - reads the node's
clock again (``ks.clock()``). In a simulation the clock does not move while
a command runs, so the two agree; against a real server (``diff.py``) they
may not, and the model must read where Redis reads.

Planted differences (``SimNode(quirks=...)``, for the differential check's
own tests) are looked up only on the branch they change.
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
    Status,
    format_double,
    parse_double,
    parse_int,
    parse_range_bound,
)

__all__ = [
    "del_",
    "exists",
    "get",
    "hdel",
    "hget",
    "hgetall",
    "hset",
    "incr",
    "pexpire",
    "pttl",
    "set_",
    "type_",
    "zadd",
    "zcard",
    "zrange",
    "zrangebyscore",
    "zrank",
    "zrem",
    "zremrangebyscore",
    "zscore",
]

OK = Status("OK")
_INT64_MAX = (1 << 63) - 1
_NOT_A_RANGE = Error("ERR min or max is not a float")


# Strings ------------------------------------------------------------------


def get(ks: Keyspace, args: list[bytes], now: int) -> Reply:
    value = ks.get(args[1], now)
    if value is None or type(value) is bytes:
        return value
    if "get_wrongtype_nil" in ks.quirks:
        return None
    return WRONGTYPE


def set_(ks: Keyspace, args: list[bytes], now: int) -> Reply:
    key = args[1]
    nx = xx = keepttl = False
    unit: bytes | None = None
    number = b""
    i, n = 3, len(args)
    while i < n:
        word = args[i].upper()
        if word == b"NX" and not xx:
            nx = True
        elif word == b"XX" and not nx:
            xx = True
        elif word in (b"PX", b"EX") and not keepttl and unit in (None, word) and i + 1 < n:
            unit, number = word, args[i + 1]
            i += 1
        elif word == b"KEEPTTL" and unit is None:
            keepttl = True
        elif word in (b"GET", b"EXAT", b"PXAT"):
            raise NotModelled(f"SET ... {word.decode()}")
        else:
            return SYNTAX
        i += 1
    ms: int | None = None
    if unit is not None:  # checked once every option is read, as setGenericCommand does
        ms = parse_int(number)
        if ms is None:
            return NOT_AN_INTEGER
        if unit == b"EX":
            ms = ms * 1000 if ms <= _INT64_MAX // 1000 else 0
        live = ks.clock()
        if ms <= 0 or ms > _INT64_MAX - live:
            return Error("ERR invalid expire time in 'set' command")
        ms += live
    exists = ks.get(key, now) is not None  # an expired key goes first, its expiry with it
    if (nx and exists) or (xx and not exists):
        return None
    ks.write(key)
    ks.data[key] = args[2]
    if ms is not None:
        ks.expires[key] = ms
    elif not keepttl and "set_keeps_ttl" not in ks.quirks:
        ks.expires.pop(key, None)
    return OK


def incr(ks: Keyspace, args: list[bytes], now: int) -> Reply:
    key = args[1]
    value = ks.get(key, now)
    if value is None:
        number = 0
    elif type(value) is not bytes:
        return WRONGTYPE
    else:
        parsed = parse_int(value)
        if parsed is None:
            return NOT_AN_INTEGER
        number = parsed
    if number == _INT64_MAX:
        return Error("ERR increment or decrement would overflow")
    ks.write(key)
    ks.data[key] = b"%d" % (number + 1)  # the expiry stays
    return number + 1


# Keys ---------------------------------------------------------------------


def del_(ks: Keyspace, args: list[bytes], now: int) -> Reply:
    deleted = 0
    for key in dict.fromkeys(args[1:]):
        if ks.get(key, now) is not None:
            ks.delete(key)
            deleted += 1
    return deleted


def exists(ks: Keyspace, args: list[bytes], now: int) -> Reply:
    return sum(ks.get(key, now) is not None for key in args[1:])


def type_(ks: Keyspace, args: list[bytes], now: int) -> Reply:
    value = ks.get(args[1], now)
    if value is None:
        return Status("none")
    if type(value) is bytes:
        return Status("string")
    return Status("zset" if isinstance(value, ZSet) else "hash")


def pttl(ks: Keyspace, args: list[bytes], now: int) -> Reply:
    key = args[1]
    if ks.get(key, now) is None:
        return -2
    at = ks.expires.get(key)
    if at is None:
        return -2 if "pttl_persistent_absent" in ks.quirks else -1
    return max(0, at - ks.clock())


def pexpire(ks: Keyspace, args: list[bytes], now: int) -> Reply:
    if len(args) > 3:
        raise NotModelled(f"PEXPIRE ... {args[3].decode(errors='replace')}")
    key = args[1]
    ms = parse_int(args[2])
    if ms is None:
        return NOT_AN_INTEGER
    live = ks.clock()
    if ms > _INT64_MAX - live:
        return Error("ERR invalid expire time in 'pexpire' command")
    if ks.get(key, now) is None:
        return 0
    if ms <= 0:  # an expiry already past deletes the key (checkAlreadyExpired)
        ks.delete(key)
        return 1
    ks.write(key)
    ks.expires[key] = live + ms
    return 1


# Hashes -------------------------------------------------------------------


def _hash(ks: Keyspace, key: bytes, now: int) -> dict[bytes, bytes] | Error | None:
    value = ks.get(key, now)
    if value is None or type(value) is dict:
        return value
    return WRONGTYPE


def hget(ks: Keyspace, args: list[bytes], now: int) -> Reply:
    found = _hash(ks, args[1], now)
    if isinstance(found, dict):
        return found.get(args[2])
    return found  # None or WRONGTYPE


def hset(ks: Keyspace, args: list[bytes], now: int) -> Reply:
    if len(args) % 2:
        return Error("ERR wrong number of arguments for 'hset' command")
    key = args[1]
    found = _hash(ks, key, now)
    if isinstance(found, Error):
        return found
    ks.write(key)
    if found is None:
        found = ks.data[key] = {}
    added = len(found)
    for i in range(2, len(args), 2):
        found[args[i]] = args[i + 1]
    return len(found) - added


def hdel(ks: Keyspace, args: list[bytes], now: int) -> Reply:
    key = args[1]
    found = _hash(ks, key, now)
    if not isinstance(found, dict):
        return 0 if found is None else found
    ks.write(key)
    removed = sum(found.pop(field, None) is not None for field in args[2:])
    if not found:
        ks.delete(key)
    return removed


def hgetall(ks: Keyspace, args: list[bytes], now: int) -> Reply:
    found = _hash(ks, args[1], now)
    if isinstance(found, Error):
        return found
    flat: list[object] = []
    for field, value in (found or {}).items():
        flat += (field, value)
    return flat


# Sorted sets --------------------------------------------------------------


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
