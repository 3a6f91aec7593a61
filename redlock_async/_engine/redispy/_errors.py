"""How a redis-py exception becomes a :class:`NodeError` (the one translation point).

The lean driver makes its errors itself; everything redis-py (or valkey-py,
its fork: same names, its own classes) raises for a node - error replies,
timeouts, broken or refused connections - is mapped here, so messages read
the same whichever driver served the node.
"""

from __future__ import annotations

from ..._base._errors import NodeConnectionError, NodeError, NodeResponseError, NodeTimeoutError
from ._kinds import errors

__all__ = ["never_sent", "translate"]


# redis-py strips the error code from replies it maps to its own classes; put
# it back, so messages read the same whichever driver served the node.
_ERROR_CODES: tuple[tuple[str, str], ...] = (
    ("OutOfMemoryError", "OOM"),
    ("ReadOnlyError", "READONLY"),
    ("BusyLoadingError", "LOADING"),
    ("NoPermissionError", "NOPERM"),
    ("TryAgainError", "TRYAGAIN"),
    ("ClusterDownError", "CLUSTERDOWN"),
    ("MasterDownError", "MASTERDOWN"),
)


# How redis-py words a failure to connect ("Error 111 connecting to h:p."):
# the command was never written.
_CONNECTING = "connecting to"


def translate(exc: BaseException, name: str) -> NodeError:
    """Map a driver exception onto the library's tree (the one translation point).

    The driver's exception stays reachable as the result's ``__cause__``.
    """
    if isinstance(exc, NodeError):
        return exc
    error = _translate(exc, name)
    error.__cause__ = exc
    return error


def _translate(exc: BaseException, name: str) -> NodeError:
    text = str(exc) or type(exc).__name__
    for cls, code in _ERROR_CODES:
        if isinstance(exc, errors(cls)):
            return NodeResponseError(f"{code} {text}")
    if isinstance(exc, (*errors("TimeoutError"), TimeoutError)):
        return NodeTimeoutError(f"{name}: {text}")
    if isinstance(exc, (*errors("ConnectionError"), OSError)):
        return NodeConnectionError(f"{name}: {text}")
    if isinstance(exc, RuntimeError) and "handler is closed" in text:
        # uvloop's word for writing to a connection that is gone.
        return NodeConnectionError(f"{name}: {text}")
    if isinstance(exc, errors("ResponseError")):
        return NodeResponseError(text)
    return NodeError(f"{name}: {type(exc).__name__}: {text}")


def never_sent(exc: BaseException) -> bool:
    """Did redis-py fail to connect, so the command was never written?"""
    return isinstance(exc, errors("ConnectionError")) and _CONNECTING in str(exc)
