"""Several names at once: one grant over every name, all or none, on one quorum.

A :class:`MultiLock` is a :class:`~redlock_async.Lock` whose
:class:`MultiCommands` write the exclusive lock key of every name
(``KeyLayout(prefix, name).lock``) with one token, so a multilock and a
plain lock of any of its names exclude each other, and extend, release and
the CLI's ``status`` read those keys as they read a plain lock's.

One attempt is one script per node (multi_acquire.lua): every key absent,
then every key set, or nothing written. A refused attempt holds nothing
while it waits to retry, so overlapping multilocks cannot deadlock, whatever
order their names come in; the retry jitter breaks ties. A grant needs a
quorum of nodes that set every key. Extend and release go over every key
and touch only keys still holding the token; an extend that finds one key
gone on a node refuses there, touching nothing (multi_extend.lua says why).

A Redis Cluster node refuses one script over keys of several hash slots, so
there each command is split (``_engine.SplitCommand``): the names one by one
in sorted order, each with the plain lock's script, the node's vote yes only
if every name was taken, the ones taken undone otherwise (docs/multilock.md:
N round trips on that node, and a part of the set visible there briefly).

A multilock's token is ``m:`` and the engine's token (40 hex characters,
then the holder info: ``_holderinfo.py``) (:data:`TOKEN_PREFIX`), on the
nodes as in ``lock.token``. Its keys are the
plain locks' keys, so without a mark ``adopt()`` would take the token as a
plain lock of one name, whose release would free that name alone while the
multilock still reported the whole set held; marked, it is refused before
anything is sent (``_adopt.check_token``). A plain token starts with hex,
which never contains ``m`` or ``:``, so none, of this version or an older
one, carries the mark.

Not supported: ``fencing=True`` (one token for the set must be above every
name's counter, and the write-back after disagreeing nodes would have to
raise them all) and ``fair=True`` (a fair queue is per name): both raise
ConfigurationError.
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterable, Sequence
from typing import Final

from .._base._config import LockOptions
from .._base._errors import ConfigurationError
from .._base._keys import KeyLayout, check_name
from .._base._timing import ttl_ms
from .._core._commands import FairEntry
from .._core._lock import Holdings, Lock
from .._core._scripts import ACQUIRE, EXTEND, MULTI_ACQUIRE, MULTI_EXTEND, MULTI_RELEASE, RELEASE
from .._engine import STALE, Call, Command, Engine, SplitCommand, Tally, Waiting

__all__ = ["TOKEN_PREFIX", "MultiCommands", "MultiLock", "check_names"]

_KIND: Final = b"m:"

TOKEN_PREFIX: Final = b"m:"
"""Before every multilock token: what tells it from a plain lock's (see the module doc)."""


def check_names(names: object) -> tuple[str, ...]:
    """The distinct names of ``names``, sorted; raises ConfigurationError when
    ``names`` is not an iterable of names (a bare str included), is empty, or
    holds a bad name (named in the message)."""
    if isinstance(names, str | bytes) or not isinstance(names, Iterable):
        raise ConfigurationError(f"names must be a list of lock names, not {type(names).__name__}")
    checked: set[str] = set()
    for name in names:
        try:
            checked.add(check_name(name))
        except ConfigurationError as exc:
            raise ConfigurationError(f"names: {name!r}: {exc}") from None
    if not checked:
        raise ConfigurationError("names must hold at least one lock name")
    return tuple(sorted(checked))


class MultiCommands:
    """A multilock's commands: every name's exclusive lock key, one token.

    ``keys`` is the first name's layout. A waiter listens on every name's
    wake channel, in the line of its whole name set (``waiting``).
    """

    __slots__ = ("keys", "locks", "wakes")

    kind = _KIND
    token_prefix = TOKEN_PREFIX

    def __init__(self, layouts: Iterable[KeyLayout]) -> None:
        layouts = tuple(layouts)
        self.keys = layouts[0]
        self.locks = tuple(layout.lock for layout in layouts)
        self.wakes = tuple(layout.wake for layout in layouts)

    def acquire(self, token: bytes, ttl_ms: int, fencing: bool, fair: FairEntry | None) -> Command:
        # fencing and fair are refused when the lock is made (MultiLock).
        locks, args = self.locks, (token, ttl_ms)

        async def split(call: Call) -> object:
            taken: list[bytes] = []
            for key in locks:
                reply = await call(ACQUIRE, (key,), args)
                if reply != 1:
                    # Refused (or an odd reply): give back what this attempt took
                    # here, so the node's vote is no and it holds nothing. A
                    # STALE stays one: the vote fails and a census is asked for.
                    for done in taken:
                        await call(RELEASE, (done,), (token,))
                    return STALE if reply == STALE else 0
                taken.append(key)
            return 1

        return SplitCommand(MULTI_ACQUIRE, locks, args, split)

    def judge(self, tally: Tally) -> Awaitable[bool]:
        return tally.decided

    def grant_keys(self) -> Sequence[bytes]:
        return self.locks  # one per name: each name's hash slot has its epochs

    def release(self, token: bytes, announce: bool) -> Command:
        # As for the plain lock: only real releases announce themselves.
        locks, wakes = self.locks, self.wakes
        keys = locks + wakes if announce else locks

        async def split(call: Call) -> object:
            every = 1
            for key, wake in zip(locks, wakes, strict=True):
                one = (key, wake) if announce else (key,)
                if await call(RELEASE, one, (token,)) != 1:
                    every = 0
            return every

        return SplitCommand(MULTI_RELEASE, keys, (token, len(locks)), split)

    def extend(self, token: bytes, ttl: float) -> Command:
        locks, args = self.locks, (token, ttl_ms(ttl))

        async def split(call: Call) -> object:
            # Not atomic across slots: keys renewed before a refused one stay
            # renewed (still ours; the release or their expiry ends them).
            for key in locks:
                reply = await call(EXTEND, (key,), args)
                if reply != 1:
                    return STALE if reply == STALE else 0
            return 1

        return SplitCommand(MULTI_EXTEND, locks, args, split)

    def renewal_target(self) -> tuple[bytes, bytes] | None:
        return None  # several keys: renewed alone, with multi_extend.lua

    def fence_keys(self) -> tuple[bytes, bytes]:
        raise ConfigurationError("a multilock has no fencing token")

    def waiting(self) -> Waiting:
        # The line of the whole set, not of its first name: [a, b] waiting for
        # b must not hold back [a, c] (a free). The keys in sorted order are
        # the set, and unambiguous joined (each ends in the closing brace of
        # its hash tag, and names' braces are escaped). Woken by a release
        # of any name: each may be the one it waits for.
        return Waiting(_KIND + b"".join(self.locks), self.wakes)

    def attempts_begin(self) -> None:
        pass

    def attempts_over(
        self, last: Tally | None, granted: bool, fair: FairEntry | None
    ) -> tuple[Command, ...]:
        return ()


class MultiLock(Lock):
    """An exclusive lock on several names at once: all of them or none.

    Get it from :meth:`Redlock.multilock`. Methods and properties are
    :class:`Lock`'s; ``name`` reads ``"a + b"``, ``names`` is the sorted tuple.
    """

    __slots__ = ("_names",)

    def __init__(
        self,
        engine: Engine,
        holdings: Holdings[Lock],
        names: object,
        options: LockOptions,
        prefix: str,
    ) -> None:
        checked = check_names(names)
        if options.fencing:
            raise ConfigurationError(
                "fencing=True is not supported by multilock: take a plain lock with "
                "fencing on the one name the fenced resource checks"
            )
        if options.fair:
            raise ConfigurationError("fair=True is not supported by multilock")
        commands = MultiCommands(KeyLayout(prefix, name) for name in checked)
        super().__init__(engine, holdings, " + ".join(checked), options, commands)
        self._names = checked

    @property
    def names(self) -> tuple[str, ...]:
        """The names held together: distinct, sorted."""
        return self._names
