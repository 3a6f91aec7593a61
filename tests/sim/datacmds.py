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
    NOT_AN_INTEGER,
    SYNTAX,
    WRONGTYPE,
    Error,
    NotModelled,
    Reply,
    Status,
    parse_int,
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
]

OK = Status("OK")
_INT64_MAX = (1 << 63) - 1


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
