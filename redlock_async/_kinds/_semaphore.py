"""Semaphores: at most ``limit`` holders at once, as ``limit`` exclusive slots.

A semaphore of limit L on a name is L slots, ``{name}:sem:0`` ... ``:sem:L-1``,
each an exclusive Redlock key. One attempt runs sem_acquire.lua on every node
at once: from a random offset, it takes (SET NX PX, like acquire.lua) the first
free slots of a window and answers a bitmask of them. The client grants itself
one slot whose bit a quorum of nodes set - an ordinary exclusive grant of that
slot - and releases the other slots it reserved at once. At most one valid
holder per slot, hence at most L holders: the proof, and why counting holders
per node is not safe, are in docs/semaphore.md.

A held grant is the exclusive lock's on the chosen slot key: extend.lua,
release.lua and batched renewals (extend_many.lua) serve it unchanged. The
engine's one hook is :meth:`SemaphoreCommands.judge` (``Commands.judge``),
called by the attempt (``_core/_attempt.py``): a quorum's yes, then
:meth:`~SemaphoreCommands.agree` on one slot.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Final, Self, Unpack

from .._base._config import LockOptions
from .._base._errors import ConfigurationError, LockBusy, QuorumUnavailable, RedlockError
from .._base._keys import KeyLayout
from .._base._peers import NoKeywords
from .._base._timing import ttl_ms
from .._core._lock import UNSET, Holdings, Lock, Unset
from .._core._scripts import EXTEND, RELEASE, SEM_ACQUIRE, SEM_RELEASE
from .._engine import Command, Engine, Tally, Unsent, Waiting

__all__ = ["MAX_LIMIT", "SemaphoreCommands", "SemaphoreLock", "agreed_slot", "semaphore"]

MAX_LIMIT: Final = 1024
"""The largest ``limit`` accepted: one key per slot, each a few dozen bytes."""

WINDOW: Final = 30
"""Slots one attempt looks at (from its random offset): the reply's bitmask
must fit a positive 32-bit integer. With ``limit`` above this, an attempt
sees only part of the slots (see docs/semaphore.md, liveness)."""

SPREAD: Final = 3
"""Slots an attempt reserves after a split vote (a quorum found room, but not
a quorum on one slot): nodes disagree on which slots are free, and more
reserved slots per node make a common one likelier. Otherwise one: nodes
that agree on the free slots then reserve the same one, and no other slot
needs releasing."""


def check_limit(limit: object) -> int:
    """Validate a semaphore's ``limit``; raise ConfigurationError naming it."""
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise ConfigurationError(f"limit must be an int, not {limit!r}")
    if not 1 <= limit <= MAX_LIMIT:
        raise ConfigurationError(f"limit must be in [1, {MAX_LIMIT}], not {limit!r}")
    return limit


def semaphore(
    engine: Engine,
    holdings: Holdings[Lock],
    name: str,
    keys: KeyLayout,
    limit: int,
    options: LockOptions,
) -> SemaphoreLock:
    """A new :class:`SemaphoreLock` (``Redlock.semaphore``'s body).

    Raises ConfigurationError for a bad ``limit``, ``fencing=True`` and ``fair=True``.
    """
    limit = check_limit(limit)
    if options.fencing:
        raise ConfigurationError(
            "fencing=True is for exclusive locks: a semaphore has up to `limit` "
            "holders at once, so a fencing token could not order them"
        )
    if options.fair:
        raise ConfigurationError("fair=True is not supported by semaphores")
    commands = SemaphoreCommands(engine, keys, limit)
    return SemaphoreLock(engine, holdings, name, options, commands)


def agreed_slot(replies: Sequence[object], width: int) -> tuple[int, int]:
    """The window position a quorum of ``replies`` (sem_acquire.lua bitmasks) agree on.

    Returns (position, votes): the position set by the most nodes, the lowest
    of those on a tie, and how many set it; position -1 when no node set any.
    The caller grants it only with ``votes >= quorum``.
    """
    counts = [0] * width
    for reply in replies:
        if type(reply) is int and reply > 0:
            mask, position = reply, 0
            while mask:
                if mask & 1:
                    counts[position] += 1
                mask >>= 1
                position += 1
    best = max(counts) if counts else 0
    if not best:
        return -1, 0
    return counts.index(best), best


class SemaphoreCommands:
    """One semaphore lock's commands; it remembers its current attempt and slot.

    Not shared between lock objects (unlike ``ExclusiveCommands``): the slot
    a grant holds is this object's state, and one lock object holds one
    grant and makes one attempt at a time.
    """

    __slots__ = (
        "_engine",
        "_offset",
        "_reserve",
        "_token",
        "_window",
        "keys",
        "limit",
        "slot",
        "split",
    )

    kind = b"s:"
    token_prefix = b""

    def __init__(self, engine: Engine, keys: KeyLayout, limit: int) -> None:
        self._engine = engine
        self.keys = keys
        self.limit = limit
        self.slot: int | None = None  # the granted slot's number, while granted
        self._token = b""  # the current attempt's (or grant's) token
        self._window: tuple[bytes, ...] = ()  # the current attempt's slot keys, in order
        self._offset = 0  # the slot number of the window's first key
        self._reserve = 1
        self.split = False  # the last attempt: a quorum had room, but not on one slot

    def _slot_key(self) -> bytes:
        if self.slot is None:
            raise RedlockError("this semaphore lock holds no slot")
        return self.keys.semaphore_slot(self.slot)

    def acquire(self, token: bytes, ttl_ms: int, fencing: bool, fair: object) -> Command:
        limit = self.limit
        width = min(limit, WINDOW)
        offset = self._engine.rng.randrange(limit)
        self._window = tuple(self.keys.semaphore_slot((offset + i) % limit) for i in range(width))
        self._token = token
        self.slot = None
        self.split = False
        self._offset = offset
        return Command(SEM_ACQUIRE, self._window, (token, ttl_ms, min(self._reserve, width)))

    async def judge(self, tally: Tally) -> bool:
        """A quorum's yes, and one slot agreed on by a quorum (``agree``)."""
        return await tally.decided and await self.agree(tally)

    def grant_keys(self) -> Sequence[bytes]:
        # Its slots are keys of the name's hash slot: the name's lock key stands for them.
        return (self.keys.lock,)

    async def agree(self, tally: Tally) -> bool:
        """A quorum said yes (reserved some slot): is one slot reserved on a quorum?

        If not yet, waits for the nodes still answering - at most until the
        fan-out's ``node_timeout`` - while their votes could still make one.
        On agreement the slot is this attempt's grant, and every other slot
        it reserved is released at once (ordered after the attempt).
        """
        width = len(self._window)
        position, votes = agreed_slot(tally.replies, width)
        if votes < tally.quorum:
            position, votes = await _more_votes(tally, width)
        if votes < tally.quorum:
            self._reserve = SPREAD  # a split vote: spread the next attempt
            self.split = True
            return False
        self._reserve = 1
        self.slot = (self._offset + position) % self.limit
        self._trim(tally, position)
        return True

    def _trim(self, tally: Tally, position: int) -> None:
        """Release the slots the attempt reserved besides the chosen one.

        Sent where they may be: nodes that reserved another slot too, failed
        (the command may have run) or have not answered yet - after the
        attempt on each node. A node that reserved exactly the chosen slot
        needs nothing.
        """
        engine = self._engine
        chosen = 1 << position
        targets = [
            index
            for index, reply in enumerate(tally.replies)
            if not (type(reply) is int and reply in (0, chosen)) and not isinstance(reply, Unsent)
        ]
        others = self._window[:position] + self._window[position + 1 :]
        if targets and others and not engine.closed:
            command = Command(SEM_RELEASE, others, (self._token,))
            cleanup = engine.fanout(command, after=tally, only=targets)
            cleanup.resend_until = engine.clock() + engine.ttls.longest

    def release(self, token: bytes, announce: bool) -> Command:
        if self.slot is not None and token == self._token:
            key = self._slot_key()
            # Only real releases announce themselves (see ExclusiveCommands.release).
            return Command(RELEASE, (key, self.keys.wake) if announce else (key,), (token,))
        # An attempt that did not end in a grant: every slot of its window.
        return Command(SEM_RELEASE, self._window, (token,))

    def extend(self, token: bytes, ttl: float) -> Command:
        return Command(EXTEND, (self._slot_key(),), (token, ttl_ms(ttl)))

    def renewal_target(self) -> tuple[bytes, bytes] | None:
        # A granted slot is an exclusive lock key: batched renewals take it as one.
        return (b"x", self._slot_key()) if self.slot is not None else None

    def fence_keys(self) -> tuple[bytes, bytes]:
        raise RedlockError("semaphores have no fencing tokens")  # refused at construction

    def waiting(self) -> Waiting:
        # One line per semaphore: its name (the channel) and its limit (another
        # limit is another set of slots). A grant may leave slots free for the
        # next waiter, which then tries at once (one attempt at a time: no herd).
        limit = self.limit
        return Waiting(b"s:%d" % limit, (self.keys.wake,), room=limit > 1)

    def attempts_begin(self) -> None:
        pass

    def attempts_over(self, last: Tally | None, granted: bool, fair: object) -> tuple[Command, ...]:
        return ()


async def _more_votes(tally: Tally, width: int) -> tuple[int, int]:
    """Wait for ``tally``'s nodes still answering until one slot has a quorum,
    none can get one any more, or the fan-out's ``node_timeout`` has passed."""
    loop = asyncio.get_running_loop()
    while True:
        position, votes = agreed_slot(tally.replies, width)
        answering = tally.answering()
        if votes >= tally.quorum or votes + len(answering) < tally.quorum:
            return position, votes
        if loop.time() >= tally.deadline:
            return position, votes
        heard: asyncio.Future[None] = loop.create_future()

        def settled(_: object, heard: asyncio.Future[None] = heard) -> None:
            if not heard.done():
                heard.set_result(None)

        for index in answering:
            tally.when_settled(index, settled)
        timer = loop.call_at(tally.deadline, settled, None)
        try:
            await heard
        finally:
            timer.cancel()


class SemaphoreLock(Lock):
    """A lock on one of a semaphore's ``limit`` slots: at most ``limit`` are held
    at once. Get it from :meth:`Redlock.semaphore`; methods and properties are
    :class:`Lock`'s."""

    __slots__ = ("_semaphore",)

    def __init__(
        self,
        engine: Engine,
        holdings: Holdings[Lock],
        name: str,
        options: LockOptions,
        commands: SemaphoreCommands,
    ) -> None:
        super().__init__(engine, holdings, name, options, commands)
        self._semaphore = commands

    @property
    def limit(self) -> int:
        """The most holders the semaphore allows at once."""
        return self._semaphore.limit

    @property
    def slot(self) -> int | None:
        """The slot (0 to ``limit - 1``) the current grant holds; None when not held."""
        return self._semaphore.slot if self._grant is not None else None

    async def acquire(
        self,
        blocking: bool = True,
        timeout: float | Unset | None = UNSET,
        *,
        unavailable_timeout: float | Unset | None = UNSET,
        **unexpected: Unpack[NoKeywords],
    ) -> bool:
        if self._grant is None and not self._acquiring:
            # A renewer reads its key once, when made: a new grant may hold
            # another slot than the last one this object held.
            self._renewer = None
        return await super().acquire(
            blocking, timeout, unavailable_timeout=unavailable_timeout, **unexpected
        )

    acquire.__doc__ = Lock.acquire.__doc__

    async def __aenter__(self) -> Self:
        try:
            return await super().__aenter__()
        except QuorumUnavailable as error:
            if not self._semaphore.split:
                raise
            # Every node that answered had room, but they split over the
            # slots: contention, not nodes down (409, not 503).
            timeout = self._options.timeout
            waited = f" (gave up after {timeout}s)" if timeout else ""
            message = f"semaphore {self._name!r} is contended: nodes had room but no quorum"
            raise LockBusy(
                f"{message} agreed on one slot{waited}",
                error.errors,
                error.attempts,
                error.attempt_count,
            ) from None
