"""The exception tree of redlock_async.

Every exception the library raises on purpose derives from :class:`RedlockError`::

    RedlockError
    ├── ConfigurationError (also ValueError)   bad argument, raised by the call that got it
    ├── LockNotAcquired                          ``async with`` gave up; ``.errors`` per node
    │   ├── LockBusy                             a quorum answered: held elsewhere (HTTP 409)
    │   └── QuorumUnavailable                    too few nodes answered to decide (HTTP 503)
    ├── LockLost                                 a held grant could not be kept
    ├── LockNotOwned                             release found < quorum still holding the grant
    └── NodeError                                one node's failure, as a vote (in ``.errors``)
        ├── NodeConnectionError (also ConnectionError)
        ├── NodeTimeoutError (also TimeoutError)
        └── NodeResponseError                  the node answered with an error reply

Driver exceptions (redis-py's, OSError, hiredis reply errors) are translated into
``NodeError`` at one boundary, the node layer, so callers never see a driver type;
the driver's exception stays reachable as the ``NodeError``'s ``__cause__``.
Messages name nodes by their redacted address: passwords never appear.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

__all__ = [
    "ConfigurationError",
    "LockBusy",
    "LockLost",
    "LockNotAcquired",
    "LockNotOwned",
    "NodeConnectionError",
    "NodeError",
    "NodeResponseError",
    "NodeTimeoutError",
    "QuorumUnavailable",
    "RedlockError",
    "Votes",
]


class RedlockError(Exception):
    """Base class of every error redlock_async raises."""


class ConfigurationError(RedlockError, ValueError):
    """An argument is invalid; the message names it."""


class NodeError(RedlockError):
    """One node failed to answer a command usefully; it costs that node's vote."""


class NodeConnectionError(NodeError, ConnectionError):
    """The node could not be reached, or its connection broke."""


class NodeTimeoutError(NodeError, TimeoutError):
    """The node did not answer within ``node_timeout``."""


class NodeResponseError(NodeError):
    """The node answered with an error reply (READONLY, WRONGTYPE, OOM, ...)."""


def describe_errors(errors: Mapping[str, BaseException]) -> str:
    """``node: Type: message; ...``, naming each node once (most messages name it already)."""
    parts = []
    for node, exc in errors.items():
        text = f"{type(exc).__name__}: {exc}"
        parts.append(text if node in str(exc) else f"{node}: {text}")
    return "; ".join(parts)


def _describe(errors: Mapping[str, BaseException]) -> str:
    return f" ({describe_errors(errors)})" if errors else ""


class _WithNodeErrors(RedlockError):
    def __init__(self, message: str, errors: Mapping[str, BaseException] | None = None) -> None:
        self.errors: Mapping[str, BaseException] = MappingProxyType(dict(errors or {}))
        super().__init__(message + _describe(self.errors))


@dataclass(frozen=True, slots=True)
class Votes:
    """How the nodes answered one acquire attempt, each named by its redacted address."""

    granted: tuple[str, ...]
    """Nodes that said yes (their grant was undone when the attempt failed)."""
    taken: tuple[str, ...]
    """Nodes that said the name is held elsewhere."""
    failed: Mapping[str, NodeError]
    """Nodes that failed (errors, or silent for ``node_timeout``), with why."""
    unanswered: tuple[str, ...]
    """Nodes that had not answered when the attempt was decided or given up."""


class LockNotAcquired(_WithNodeErrors):
    """The lock could not be acquired before the timeout (or ``max_attempts``).

    ``errors`` maps each node (by its redacted address) that failed in the last
    attempt to the exception it raised; nodes that simply voted "held by someone
    else" are not errors and do not appear. ``attempts`` holds the votes of the
    last attempts (at most 10, oldest first; ``attempts[-1]`` is the last one);
    ``attempt_count`` says how many were made in all.
    """

    def __init__(
        self,
        message: str,
        errors: Mapping[str, BaseException] | None = None,
        attempts: Sequence[Votes] = (),
        attempt_count: int = 0,
    ) -> None:
        super().__init__(message, errors)
        self.attempts: tuple[Votes, ...] = tuple(attempts)
        self.attempt_count = max(attempt_count, len(self.attempts))


class LockBusy(LockNotAcquired):
    """The lock is held elsewhere: the last attempt reached a quorum, which refused.

    Nothing is wrong with the nodes; someone else holds the name (in HTTP
    terms, 409 Conflict). ``errors`` still lists any minority of nodes that
    failed.
    """


class QuorumUnavailable(LockNotAcquired):
    """Too few nodes answered to decide: down, slow, refusing or misconfigured.

    ``errors`` says why, per node (in HTTP terms, 503 Service Unavailable).
    Whether the name is held elsewhere is unknown. Raised by ``extend()``
    too, when no quorum confirmed it in time while the grant is still valid:
    the lock is then still held, and its background renewal goes on.
    """


class LockLost(_WithNodeErrors):
    """A held grant was lost: renewal could not reach a quorum before validity ended."""


class LockNotOwned(_WithNodeErrors):
    """``release()`` found fewer than a quorum of nodes still holding this grant."""
