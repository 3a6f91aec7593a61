"""RESP encoding of the lean driver's commands, with the caches of the hot path.

hiredis.pack_command costs ~650 ns per command (it formats every length with
sprintf), a tenth of a grant's CPU at 50 tasks. A lock sends the same script
to the same keys over and over, so the encoded head of an EVALSHA (count,
EVALSHA, sha, numkeys, keys) is cached and only the arguments are encoded
each time; a head is built by hand (not by hiredis), so a name seen once
costs no more than pack_command. Bounded: cleared when full (thousands of
names renewing just rebuild their heads).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import hiredis

from .._node import Command

__all__ = ["CACHE_LIMIT", "HEADS", "INTS", "evalsha", "pack"]

# hiredis's stub types the argument as a 1-tuple; any tuple of str/bytes/int works.
pack: Callable[[tuple[object, ...]], bytes] = hiredis.pack_command  # type: ignore[assignment]
"""Any command, encoded by hiredis (everything off the hot path)."""

HEADS: dict[tuple[bytes, int, Sequence[bytes]], bytes] = {}  # keys: tuples only
INTS: dict[int, bytes] = {}
CACHE_LIMIT = 4096
_LENGTHS = [b"$%d\r\n" % n for n in range(256)]


def _length(n: int) -> bytes:
    return _LENGTHS[n] if n < 256 else b"$%d\r\n" % n


def evalsha(command: Command) -> bytes:
    """``EVALSHA sha numkeys keys... args...`` for ``command``, as pack_command would."""
    keys = command.keys
    args = command.args
    spec = (command.script.sha, len(args), keys)
    head = HEADS.get(spec) if type(keys) is tuple else None
    if head is None:
        head = _head(spec)
        if head is None:
            return _by_hiredis(command)
    out = [head]
    for arg in args:
        if type(arg) is bytes:
            value = arg
        elif type(arg) is int:
            value = INTS.get(arg) or _int(arg)
        else:  # anything else (str, ...): hiredis's rules, for the whole command
            return _by_hiredis(command)
        n = len(value)
        out += (_LENGTHS[n] if n < 256 else b"$%d\r\n" % n, value, b"\r\n")  # _length, inlined
    return b"".join(out)


def _by_hiredis(command: Command) -> bytes:
    keys = command.keys
    return pack((b"EVALSHA", command.script.sha, len(keys), *keys, *command.args))


def _head(spec: tuple[bytes, int, Sequence[bytes]]) -> bytes | None:
    """The encoded head for ``spec``, cached; None when a key is not bytes."""
    sha, argc, keys = spec
    numkeys = b"%d" % len(keys)
    out = [
        b"*%d\r\n$7\r\nEVALSHA\r\n" % (3 + len(keys) + argc),
        _length(len(sha)),
        sha,
        b"\r\n",
        _length(len(numkeys)),
        numkeys,
        b"\r\n",
    ]
    for key in keys:
        if type(key) is not bytes:
            return None
        n = len(key)
        out += (_LENGTHS[n] if n < 256 else b"$%d\r\n" % n, key, b"\r\n")  # _length, inlined
    head = b"".join(out)
    if type(keys) is tuple:
        if len(HEADS) >= CACHE_LIMIT:
            HEADS.clear()
        HEADS[spec] = head
    return head


def _int(value: int) -> bytes:
    encoded = b"%d" % value
    if len(INTS) >= CACHE_LIMIT:
        INTS.clear()
    INTS[value] = encoded
    return encoded
