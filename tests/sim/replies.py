"""What a simulated node answers, and the number rules Redis 7.0 parses and prints by.

A reply is a plain Python value, the same whichever protocol the connection
speaks (``resp.py`` writes it as RESP2 or RESP3):

====================  ==========================  ==========================
value                 RESP2                       RESP3
====================  ==========================  ==========================
``int``               ``:n``                      ``:n``
``bytes``             ``$len`` bulk               ``$len`` bulk
:class:`Verbatim`     ``$len`` bulk               ``=len`` ``txt:`` text
``float``             bulk, ``%.17g``             ``,`` double
:class:`Status`       ``+OK``                     ``+OK``
:class:`Error`        ``-ERR ...``                ``-ERR ...``
``None``              ``$-1``                     ``_``
``list``              ``*n``                      ``*n``
:class:`Push`         ``*n``                      ``>n``
``dict``              ``*2n``, flat               ``%n`` map
====================  ==========================  ==========================

:data:`NOREPLY` is what ``execute`` returns for a command whose answers went to
the connection's outbox instead ((S)SUBSCRIBE and (S)UNSUBSCRIBE: one
confirmation per channel).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

__all__ = [
    "NOREPLY",
    "WRONGTYPE",
    "Error",
    "NoReply",
    "NotModelled",
    "Push",
    "Reply",
    "Status",
    "Verbatim",
    "format_double",
    "parse_double",
    "parse_int",
    "parse_range_bound",
]


class Status(str):
    """A simple string reply (``+OK``, ``+PONG``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Status({str(self)!r})"


class Error(str):
    """An error reply, with its code and without the leading ``-``: ``"ERR syntax error"``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Error({str(self)!r})"


class Verbatim(bytes):
    """A bulk string RESP3 sends as verbatim text (INFO's reply)."""

    __slots__ = ()


class Push(list[object]):
    """An out-of-band message: a subscription's confirmation or a published message."""

    __slots__ = ()


class NoReply:
    """The type of :data:`NOREPLY`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NOREPLY"


NOREPLY = NoReply()
"""The command's answers are in the connection's outbox (see the module docstring)."""

Reply = (
    int | float | bytes | Status | Error | list[object] | Mapping[bytes, object] | NoReply | None
)
"""Any reply; lists and maps nest replies (typed ``object``: mypy gains nothing from a
recursive union here, the values are built and read by the node only)."""


class NotModelled(Exception):
    """The node got something the model does not implement.

    Raised, never answered: a command or option the library does not send
    is not simulated, and a simulation that meets one must stop loudly rather
    than go on with an answer the real server might not give.
    """


WRONGTYPE = Error("WRONGTYPE Operation against a key holding the wrong kind of value")
NOT_AN_INTEGER = Error("ERR value is not an integer or out of range")
NOT_A_FLOAT = Error("ERR value is not a valid float")
SYNTAX = Error("ERR syntax error")

# string2ll: an optional minus, then digits without a leading zero ("0"
# alone is fine, "-0", "+1", "01" and " 1" are not).
_INTEGER = re.compile(rb"(?:0|-?[1-9][0-9]*)\Z")
_INT64_MAX = (1 << 63) - 1
_INT_CACHE: dict[bytes, int] = {}


def parse_int(text: bytes) -> int | None:
    """``text`` as Redis's string2ll reads it (a signed 64-bit integer), else None."""
    value = _INT_CACHE.get(text)
    if value is not None:
        return value
    if _INTEGER.match(text) is None:
        return None
    value = int(text)
    if not -_INT64_MAX - 1 <= value <= _INT64_MAX:
        return None
    if len(_INT_CACHE) < 4096:
        _INT_CACHE[text] = value
    return value


_DOUBLE_CHARS = frozenset(b"0123456789+-.eEinfINFtyTYaxXpPabcdABCD")


def parse_double(text: bytes) -> float | None:
    """``text`` as Redis 7.0 reads a score (strtod, whole string, no NaN, no overflow)."""
    if not text or text[0] in b" \t\r\n\v\f" or not _DOUBLE_CHARS.issuperset(text):
        return None
    try:
        value = float(text)
    except ValueError:
        if b"0x" not in text.lower():
            return None
        try:  # strtod reads C99 hexadecimal floats too ("0x10")
            value = float.fromhex(text.decode())
        except ValueError:
            return None
    if math.isnan(value):
        return None
    if math.isinf(value) and b"inf" not in text.lower():
        return None  # ERANGE: "1e400"
    if value == 0.0 and any(c in b"123456789" for c in text.lower().split(b"e")[0]):
        return None  # ERANGE: an underflow to zero ("1e-400")
    return value


def parse_range_bound(text: bytes) -> tuple[float, bool] | None:
    """A ZRANGEBYSCORE bound: (value, exclusive), ``(`` marking an exclusive one."""
    if text[:1] == b"(":
        value = parse_double(text[1:])
        return None if value is None else (value, True)
    value = parse_double(text)
    return None if value is None else (value, False)


def format_double(value: float) -> bytes:
    """A score as Redis 7.0 prints it (``%.17g``; ``inf``, ``-inf``)."""
    if math.isinf(value):
        return b"inf" if value > 0 else b"-inf"
    if value.is_integer() and 0 < abs(value) < 1e17:
        return b"%d" % value
    return b"%.17g" % value
