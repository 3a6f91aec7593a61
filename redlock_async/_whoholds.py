"""``Redlock.holder()``: who holds a name now, as a quorum of nodes sees it.

Every node answers one read-only script (lua/holder.lua: the exclusive
key, the writer key and the live readers, from one instant). The nodes'
answers are judged as ``Redlock.locked()`` and ``redlock-async status``
judge them (:func:`~redlock_async._kinds._adopt.verdict`): a grant holds the name
when its token is on a quorum of nodes. Which node's answer wins when they
differ: the token on a quorum - and since who took a grant is written in
its token (``_holderinfo.py``), every node holding that grant tells the
same host, pid and time; a leftover on a minority (a failed attempt) is
never reported. Kinds are looked at in order: the exclusive key (a plain
lock or a multilock's name), then the writer, then the readers.

Readers share: the name is read-held when a quorum of nodes has a live
reader (a writer is refused there, whichever readers they are). The holder
reported is then the reader on the most nodes, the longest-held among
equals, with ``readers`` the count ``status`` shows.

Semaphores are not looked at: a semaphore's slots are counted by its
``limit``, which only its holders know (each slot key's token still names
its holder: docs/keys.md).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple

from ._base._errors import QuorumUnavailable
from ._base._keys import KeyLayout
from ._core._holderinfo import Holder, HolderKind, holder_of, parse
from ._core._scripts import HOLDER
from ._engine import ANSWERS, Command, Engine, Tally, tally_text
from ._kinds._adopt import hear_out, verdict
from ._kinds._caches import CommandsCache

__all__ = ["Inspection", "NodeView", "judge", "who_holds"]


class Inspection:
    """``Redlock.holder()``, in a base of its own (Redlock's class stays small)."""

    __slots__ = ()

    _core: Engine
    _commands: CommandsCache

    async def holder(self, name: str) -> Holder | None:
        """Who holds ``name`` now, as a quorum of nodes sees it: a :class:`Holder`
        (host, pid, grant time, ttl left, kind), or None when it is free.

        Looks at the exclusive lock (a plain lock or a multilock's name), then
        a read-write lock's writer, then its readers (the longest-held one is
        described); not at semaphores. ``host``, ``pid`` and ``since`` are None
        for a grant taken with ``holder_info=False``. Read only, judged as
        :meth:`locked` judges: raises QuorumUnavailable when too few nodes
        answer to tell.
        """
        return await who_holds(self._core, name, self._commands(name).keys)


class NodeView(NamedTuple):
    """One node's answer: what holds the name there."""

    token: bytes | None
    """The exclusive key's value (None: absent)."""
    token_ttl_ms: int
    writer: bytes | None
    """The writer key's value (None: absent)."""
    writer_ttl_ms: int
    readers: dict[bytes, int]
    """Live readers: token -> ms left."""


async def who_holds(engine: Engine, name: str, keys: KeyLayout) -> Holder | None:
    """Who holds ``name`` now (see the module doc); None when free.

    Raises QuorumUnavailable when too few nodes answered to tell.
    """
    engine.check_open()
    sent = engine.clock()
    tally = engine.fanout(Command(HOLDER, (keys.lock, keys.writer, keys.readers), ()))
    await tally.decided  # every reply counts as "no" here: decided once a quorum came
    state, found = judge(_views(tally), tally.quorum)
    if state == "unknown":
        # A holder seen on one node of three, another node silent: the
        # nodes still answering are heard out first (as locked() does).
        await hear_out(engine, tally, sent)
        state, found = judge(_views(tally), tally.quorum)
    if state != "unknown":
        return found
    raise QuorumUnavailable(
        f"lock {name!r}: too few nodes answered to tell who holds it: {tally_text(tally, ANSWERS)}",
        tally.errors(),
    )


def judge(views: Sequence[NodeView | None], quorum: int) -> tuple[str, Holder | None]:
    """``("held", holder)``, ``("free", None)`` or ``("unknown", None)`` over the
    nodes' answers (None: a node that did not answer), as the module doc says."""
    answered = [view for view in views if view is not None]
    unheard = len(views) - len(answered)
    states = []
    kinds: tuple[HolderKind, ...] = ("exclusive", "write")
    for kind in kinds:
        held = [
            (view.token, view.token_ttl_ms)
            if kind == "exclusive"
            else (view.writer, view.writer_ttl_ms)
            for view in answered
        ]
        state, top = verdict([token for token, _ in held], unheard, quorum)
        if state == "held" and isinstance(top, bytes):
            return state, holder_of(top, _left([ms for t, ms in held if t == top], quorum), kind)
        states.append(state)
    state, _ = verdict([True if view.readers else None for view in answered], unheard, quorum)
    if state == "held":
        on: Counter[bytes] = Counter(token for view in answered for token in view.readers)
        top = max(on, key=lambda token: (on[token], -_since(token)))
        ttls = [view.readers[top] for view in answered if top in view.readers]
        counts = sorted((len(view.readers) for view in answered), reverse=True)
        return state, holder_of(top, _left(ttls, quorum), "read", counts[quorum - 1])
    states.append(state)
    return ("unknown" if "unknown" in states else "free"), None


def _left(ttls_ms: Sequence[int], quorum: int) -> float:
    """Seconds the grant keeps a quorum: the quorum-th longest of its keys' ttls
    (of fewer keys, the shortest); a key without expiry (-1) never ends."""
    ms = sorted(ttls_ms, reverse=True)[min(quorum, len(ttls_ms)) - 1]
    return ms / 1000 if ms >= 0 else math.inf


def _since(token: bytes) -> float:
    info = parse(token)
    return info[2] if info is not None else math.inf  # unknown: ranked last


def _views(tally: Tally) -> list[NodeView | None]:
    return [_view(reply) for reply in tally.replies]


def _view(reply: object) -> NodeView | None:
    """A node's reply as a view; None for an error or no answer yet."""
    if not isinstance(reply, list) or len(reply) != 5:
        return None
    token, token_ttl, writer, writer_ttl, flat = reply
    readers = {}
    if isinstance(flat, list):
        readers = {_raw(flat[i]) or b"": int(flat[i + 1]) for i in range(0, len(flat) - 1, 2)}
    return NodeView(_raw(token), int(token_ttl), _raw(writer), int(writer_ttl), readers)


def _raw(value: object) -> bytes | None:
    if isinstance(value, str):  # a redis-py client made with decode_responses=True
        return value.encode()
    return value if isinstance(value, bytes) else None
