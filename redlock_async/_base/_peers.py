"""Other Redis lock libraries' keywords, refused with the name of this library's.

Code moved from redis-py's ``Lock``, pottery's ``Redlock`` / ``AIORedlock`` or
python-redis-lock's ``Lock`` brings their keywords along, and some of them
would mean something else here if they were accepted under a similar name:
redis-py's ``timeout`` is the lease, this library's ``timeout=`` the wait.
A peer's keyword is refused as Python refuses any unknown keyword, with a
``TypeError`` and Python's own wording, followed by what to write here
instead (docs/migrating.md maps the three libraries side by side). A
keyword that is nobody's gets Python's message alone.

While every keyword is known the check costs next to nothing: the
factories taking ``**options`` look at the keywords only once the
``TypeError`` is raised, and ``lock()``, ``acquire()`` and ``extend()``
test one empty ``**unexpected``, typed :class:`NoKeywords` so that a type
checker still refuses every extra keyword.
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from types import MappingProxyType
from typing import Final, TypedDict

__all__ = ["GUIDE", "HINTS", "NoKeywords", "unexpected_keyword", "unknown_keyword"]

GUIDE: Final = "docs/migrating.md"

HINTS: Final = MappingProxyType(
    {
        # redis-py: Lock(redis, name, timeout=None, sleep=0.1, blocking=True,
        # blocking_timeout=None, thread_local=True, raise_on_release_error=True);
        # acquire(sleep=None, blocking=None, blocking_timeout=None, token=None) (the
        # asyncio Lock's without sleep); extend(additional_time, replace_ttl=False).
        "blocking_timeout": (
            "redis-py's blocking_timeout (how long to wait) is timeout= here; the lease is ttl="
        ),
        "sleep": (
            "redis-py's sleep (the pause between attempts) is Redlock(retry_delay=..., "
            "retry_jitter=...) here, set once per Redlock"
        ),
        "thread_local": (
            "redis-py's thread_local is not needed here: a grant's token belongs to "
            "the Lock object that took it; make one Lock per critical section"
        ),
        "blocking": (
            "blocking=False (one attempt) is acquire(blocking=False) here, "
            "or timeout=0 for `async with`"
        ),
        "raise_on_release_error": (
            "redis-py's raise_on_release_error has no switch here: a lock lost or "
            "expired before `async with` ends raises LockLost there"
        ),
        "token": (
            "redis-py's token (a grant taken elsewhere) is held with redlock.adopt(name, token)"
        ),
        "additional_time": (
            "redis-py's additional_time: extend(ttl) here renews to ttl seconds from "
            "now (redis-py's replace_ttl=True); it never adds to the time left"
        ),
        "replace_ttl": "redis-py's replace_ttl: extend(ttl) here always renews to ttl from now",
        # pottery: Redlock(key=, masters=, raise_on_redis_errors=False,
        # auto_release_time=10.0, num_extensions=3, context_manager_blocking=True,
        # context_manager_timeout=-1), AIORedlock alike.
        "auto_release_time": (
            "pottery's auto_release_time (the lease; seconds since pottery 3.0, "
            "milliseconds before) is ttl= here, in seconds, renewed in the background "
            "until release (auto_extend=True)"
        ),
        "num_extensions": (
            "pottery's num_extensions has no counterpart: a held lock is renewed "
            "without limit (auto_extend=True), or never (auto_extend=False)"
        ),
        "context_manager_blocking": (
            "pottery's context_manager_blocking=False is timeout=0 here (one attempt)"
        ),
        "context_manager_timeout": (
            "pottery's context_manager_timeout is timeout= here (pottery's -1 is None)"
        ),
        "raise_on_redis_errors": (
            "pottery's raise_on_redis_errors has no switch here: when too few nodes "
            "answer, `async with` raises QuorumUnavailable (after unavailable_timeout=), "
            "never LockBusy"
        ),
        # python-redis-lock: Lock(redis_client, name, expire=None, id=None,
        # auto_renewal=False, strict=True, signal_expire=1000, blocking=True);
        # acquire(blocking=True, timeout=None); extend(expire=None).
        "expire": "python-redis-lock's expire (the lease) is ttl= here, seconds as a float",
        "auto_renewal": "python-redis-lock's auto_renewal is auto_extend= here, on by default",
        "id": (
            "python-redis-lock's id (a lock taken elsewhere) is held with "
            "redlock.adopt(name, token)"
        ),
        "strict": (
            "python-redis-lock's strict has no switch here: release() of a grant "
            "that is gone always raises LockNotOwned (LockLost when it was lost)"
        ),
        "signal_expire": (
            "python-redis-lock's signal_expire has no counterpart: waiters are woken "
            "by the release itself (Redlock(wake_on_release=True), the default)"
        ),
        # redis-py's client.lock(name, ..., lock_class=None).
        "lock_class": (
            "redis-py's lock_class has no counterpart: the kind of lock is the "
            "factory (redlock.lock, rwlock, semaphore, multilock)"
        ),
    }
)
"""What to write here instead of a peer's keyword, by the peer's keyword."""


class NoKeywords(TypedDict, total=False):
    """No keyword at all: ``**unexpected: Unpack[NoKeywords]`` lets a function see
    the keywords it does not take (to name ours for a peer's) while type checkers
    still refuse every one."""


def unexpected_keyword(function: str, keyword: str) -> TypeError:
    """Python's ``TypeError`` for ``keyword`` given to ``function`` (its qualified
    name, as Python's message has it), naming this library's way when it is a peer's."""
    message = f"{function}() got an unexpected keyword argument {keyword!r}"
    hint = HINTS.get(keyword)
    if hint is None:
        return TypeError(message)
    return TypeError(f"{message}: {hint} ({GUIDE})")


def unknown_keyword(function: str, given: Iterable[str], known: Container[str]) -> TypeError | None:
    """:func:`unexpected_keyword` for the first of ``given`` not in ``known``, as
    Python names the first; None when every one is known."""
    for keyword in given:
        if keyword not in known:
            return unexpected_keyword(function, keyword)
    return None
