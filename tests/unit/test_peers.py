"""Other lock libraries' keywords: Python's TypeError, with the name of ours (issue 38).

redis-py's ``blocking_timeout``, pottery's ``auto_release_time``,
python-redis-lock's ``expire`` and the rest (``_base/_peers.py``), given to
any lock factory or to ``acquire()`` / ``extend()``, async and sync, raise
``TypeError`` - what Python raises for any unknown keyword, so callers
catching it still do - and the message says what to write here instead. A
keyword that is nobody's gets Python's own message, word for word.

The ``# type: ignore[call-arg]`` comments of the last tests are tests too:
mypy runs ``--strict`` over tests/ (``warn_unused_ignores``), so if a type
checker ever accepted one of those keywords, the comment would be unused and
the type check would fail.

No sockets: a Redlock connects at its first command, and every call here
is refused before any.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from redlock_async import Redlock, sync
from redlock_async._base._peers import HINTS, unknown_keyword
from redlock_async._kinds._caches import LOCK_KEYWORDS

URL = "redis://127.0.0.1:1/0"

# Each peer keyword, and what its message must name of ours.
OURS = {
    # redis-py
    "blocking_timeout": "timeout=",
    "sleep": "retry_delay=",
    "thread_local": "one Lock per critical section",
    "blocking": "acquire(blocking=False)",
    "raise_on_release_error": "LockLost",
    "token": "redlock.adopt(name, token)",
    "additional_time": "extend(ttl)",
    "replace_ttl": "extend(ttl)",
    "lock_class": "redlock.lock, rwlock, semaphore, multilock",
    # pottery
    "auto_release_time": "ttl=",
    "num_extensions": "auto_extend=",
    "context_manager_blocking": "timeout=0",
    "context_manager_timeout": "timeout=",
    "raise_on_redis_errors": "QuorumUnavailable",
    # python-redis-lock
    "expire": "ttl=",
    "auto_renewal": "auto_extend=",
    "id": "redlock.adopt(name, token)",
    "strict": "LockNotOwned",
    "signal_expire": "wake_on_release=True",
}

# The keywords the brief of issue 38 names: each must be answered on every factory.
REQUIRED = {
    *("blocking_timeout", "sleep", "thread_local"),  # redis-py
    "auto_release_time",  # pottery
    *("expire", "auto_renewal", "blocking"),  # python-redis-lock (and redis-py: blocking)
}

Call = Callable[[Any, dict[str, Any]], object]

# The calls of the async API: (its name in Python's message, the call).
ASYNC_CALLS: dict[str, tuple[str, Call]] = {
    "lock": ("Redlock.lock", lambda r, kw: r.lock("x", **kw)),
    "adopt": ("Redlock.lock", lambda r, kw: r.adopt("x", "t", **kw)),  # forwards to lock()
    "rwlock": ("Redlock.rwlock", lambda r, kw: r.rwlock("x", **kw)),
    "read": ("RWLock.read", lambda r, kw: r.rwlock("x").read(**kw)),
    "write": ("RWLock.write", lambda r, kw: r.rwlock("x").write(**kw)),
    "multilock": ("Redlock.multilock", lambda r, kw: r.multilock(["a", "b"], **kw)),
    "semaphore": ("Redlock.semaphore", lambda r, kw: r.semaphore("s", 2, **kw)),
    "synchronized": ("Redlock.synchronized", lambda r, kw: r.synchronized("x", **kw)),
    "acquire": ("Lock.acquire", lambda r, kw: r.lock("x").acquire(**kw)),
    "semaphore acquire": ("Lock.acquire", lambda r, kw: r.semaphore("s", 2).acquire(**kw)),
    "read acquire": ("Lock.acquire", lambda r, kw: r.rwlock("x").read().acquire(**kw)),
    "multilock acquire": ("Lock.acquire", lambda r, kw: r.multilock(["a"]).acquire(**kw)),
    "extend": ("Lock.extend", lambda r, kw: r.lock("x").extend(**kw)),
}

# The same through redlock_async.sync (adopt apart: it runs on the loop thread).
SYNC_CALLS: dict[str, tuple[str, Call]] = {
    "lock": ("Redlock.lock", lambda r, kw: r.lock("x", **kw)),
    "rwlock": ("Redlock.rwlock", lambda r, kw: r.rwlock("x", **kw)),
    "read": ("RWLock.read", lambda r, kw: r.rwlock("x").read(**kw)),
    "write": ("RWLock.write", lambda r, kw: r.rwlock("x").write(**kw)),
    "multilock": ("Redlock.multilock", lambda r, kw: r.multilock(["a", "b"], **kw)),
    "semaphore": ("Redlock.semaphore", lambda r, kw: r.semaphore("s", 2, **kw)),
    "synchronized": ("Redlock.synchronized", lambda r, kw: r.synchronized("x", **kw)),
    "acquire": ("Lock.acquire", lambda r, kw: r.lock("x").acquire(**kw)),
    "semaphore acquire": ("Lock.acquire", lambda r, kw: r.semaphore("s", 2).acquire(**kw)),
    "extend": ("Lock.extend", lambda r, kw: r.lock("x").extend(**kw)),
}


def peer_keywords(call: str) -> Iterator[str]:
    """The peers' keywords ``call`` does not take as its own (``acquire(blocking=)``,
    ``adopt(name, token)``)."""
    own = {"blocking"} if call.endswith("acquire") else {"token"} if call == "adopt" else set()
    return (keyword for keyword in OURS if keyword not in own)


async def refusal(function: Call, redlock: Redlock, keyword: str) -> str:
    """The message of the TypeError ``function`` raises for ``keyword``; fails if none."""
    with pytest.raises(TypeError) as raised:
        result = function(redlock, {keyword: 1})
        if inspect.isawaitable(result):
            await result
    assert type(raised.value) is TypeError  # Python's own, not a subclass
    return str(raised.value)


def sync_refusal(function: Call, redlock: sync.Redlock, keyword: str) -> str:
    """:func:`refusal` of a blocking call (outside any event loop, as threads call it)."""
    with pytest.raises(TypeError) as raised:
        function(redlock, {keyword: 1})
    assert type(raised.value) is TypeError
    return str(raised.value)


def check_message(message: str, function: str, keyword: str) -> list[str]:
    """What is wrong with ``message`` as the refusal of a peer's ``keyword``."""
    wrong = []
    start = f"{function}() got an unexpected keyword argument {keyword!r}: "
    if not message.startswith(start):
        wrong.append(f"does not start as Python's {start!r}")
    if OURS[keyword] not in message:
        wrong.append(f"does not name {OURS[keyword]!r}")
    if not message.endswith("(docs/migrating.md)"):
        wrong.append("does not point at docs/migrating.md")
    return [f"{function}({keyword}=...): {message!r} {why}" for why in wrong]


def test_every_hint_is_tested_and_none_shadows_a_keyword_of_ours() -> None:
    assert set(OURS) == set(HINTS)
    assert set(OURS) >= REQUIRED
    assert not set(HINTS) & LOCK_KEYWORDS
    # "blocking" is acquire()'s own; given to a factory, it is redis-py's.
    assert not set(HINTS) & set(inspect.signature(Redlock.lock).parameters)


@pytest.mark.parametrize("call", sorted(ASYNC_CALLS))
async def test_async_api_names_ours_for_every_peer_keyword(call: str) -> None:
    function, make = ASYNC_CALLS[call]
    redlock = Redlock([URL])
    wrong = []
    for keyword in peer_keywords(call):
        wrong += check_message(await refusal(make, redlock, keyword), function, keyword)
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("call", sorted(SYNC_CALLS))
def test_sync_api_names_ours_for_every_peer_keyword(call: str) -> None:
    function, make = SYNC_CALLS[call]
    redlock = sync.Redlock([URL])  # no call here needs its loop thread
    wrong = []
    for keyword in peer_keywords(call):
        wrong += check_message(sync_refusal(make, redlock, keyword), function, keyword)
    assert not wrong, "\n".join(wrong)


def test_sync_adopt_raises_it_from_the_loop_thread() -> None:
    expected = r"^Redlock\.lock\(\) got .* 'expire': .*ttl="
    with sync.Redlock([URL]) as redlock, pytest.raises(TypeError, match=expected):
        redlock.adopt("x", "t", expire=5)  # type: ignore[call-arg]


@pytest.mark.parametrize("call", sorted(ASYNC_CALLS))
async def test_a_typo_gets_pythons_own_message(call: str) -> None:
    function, make = ASYNC_CALLS[call]
    message = await refusal(make, Redlock([URL]), "tmeout")
    assert message == f"{function}() got an unexpected keyword argument 'tmeout'"


@pytest.mark.parametrize("call", sorted(SYNC_CALLS))
def test_a_typo_gets_pythons_own_message_from_sync(call: str) -> None:
    function, make = SYNC_CALLS[call]
    message = sync_refusal(make, sync.Redlock([URL]), "tmeout")
    assert message == f"{function}() got an unexpected keyword argument 'tmeout'"


def test_the_first_unknown_keyword_is_named_as_python_does() -> None:
    error = unknown_keyword("f", ["ttl", "tmeout", "expire"], LOCK_KEYWORDS)
    assert str(error) == "f() got an unexpected keyword argument 'tmeout'"
    assert unknown_keyword("f", ["ttl", "timeout"], LOCK_KEYWORDS) is None
    with pytest.raises(TypeError, match=r"^Redlock\.lock\(\) got .* 'tmeout'$"):
        Redlock([URL]).lock("x", tmeout=1, expire=1)  # type: ignore[call-arg]


def test_keywords_of_ours_still_work() -> None:
    redlock = Redlock([URL])
    assert redlock.lock("x", ttl=5.0, timeout=1.0).options.timeout == 1.0
    assert redlock.rwlock("x", fair=True).write(ttl=2.0).options.fair
    assert redlock.semaphore("s", 2, auto_extend=False).options.auto_extend is False


async def test_type_checkers_refuse_them_too() -> None:
    """mypy must flag each call below (see the module's docstring)."""
    redlock = Redlock([URL])
    lock = redlock.lock("x")
    with pytest.raises(TypeError, match="timeout="):
        redlock.lock("x", blocking_timeout=5)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="ttl="):
        await redlock.adopt("x", "t", expire=5)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="retry_delay="):
        redlock.rwlock("x", sleep=0.1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="ttl="):
        redlock.rwlock("x").read(auto_release_time=10)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="auto_extend="):
        redlock.multilock(["a"], auto_renewal=True)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="timeout=0"):
        redlock.semaphore("s", 2, blocking=False)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="one Lock per critical section"):
        redlock.synchronized("x", thread_local=False)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="timeout="):
        await lock.acquire(blocking_timeout=5)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="ttl="):
        await lock.extend(expire=5)  # type: ignore[call-arg]


def test_type_checkers_refuse_them_in_sync_code_too() -> None:
    redlock = sync.Redlock([URL])
    with pytest.raises(TypeError, match="timeout="):
        redlock.lock("x", blocking_timeout=5)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="timeout="):
        redlock.lock("x").acquire(blocking_timeout=5)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"extend\(ttl\)"):
        redlock.lock("x").extend(additional_time=5)  # type: ignore[call-arg]
