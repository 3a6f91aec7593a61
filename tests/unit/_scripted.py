"""Scripted nodes, virtual time and a scripted engine: the lock layer without sockets.

* :class:`ScriptedNode` - a stand-in for one Redis node. It records every
  command it gets (:class:`Sent`: script name, keys, args, loop time) and
  answers by a rule the test sets per script name: a reply (int, bytes, a
  :class:`~redlock_async.NodeError` instance...), ``Late(reply, seconds)``,
  :data:`NEVER` (no answer at all), or a callable given the :class:`Sent`
  that returns one of those. A script without a rule waits for the test to
  call :meth:`ScriptedNode.answer` by hand.
* :class:`VirtualTimeLoop` - an asyncio event loop whose clock only moves
  when nothing is ready to run: it then jumps to the next timer. Every timer
  of the engine (node_timeout deadlines, retry sleeps, renewal timers set
  with ``loop.call_at``) fires at its exact time, and a test that covers
  minutes of schedule runs in milliseconds. The same :class:`VirtualClock`
  is the engine's ``clock``, so validity and the loop's timers agree.
* :class:`Cluster` - an :class:`Engine` over scripted nodes on a virtual
  clock, with deterministic tokens and ``random.Random(0)``, and the lock
  factories of ``Redlock`` (``lock``, ``rwlock``).

Why the loop is not simply "advance a fake clock by hand": the engine reads
time from the running loop (``loop.time()`` for fan-out deadlines, and
``loop.call_at`` for renewals). Replacing ``time()`` in a loop subclass and
letting ``_run_once`` (asyncio/base_events.py) compute a zero select timeout
once the clock has jumped to the earliest timer is the smallest change that
keeps asyncio's own scheduling (ready queue, heap order, cancellation) in
charge - the code under test sees an ordinary SelectorEventLoop.
"""

from __future__ import annotations

import asyncio
import random
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar, Unpack, cast

from redlock_async._base._config import LockOptions, RedlockConfig
from redlock_async._base._keys import KeyLayout
from redlock_async._core._commands import ExclusiveCommands
from redlock_async._core._lock import Holdings, Lock, LockKeywords
from redlock_async._core._scripts import EXTEND, EXTEND_MANY
from redlock_async._engine import Engine
from redlock_async._engine._node import Arg, Command, Reply, Sink
from redlock_async._engine._restarts import Restarts
from redlock_async._engine._ttls import TtlLedger
from redlock_async._kinds._rwlock import RWLock

__all__ = [
    "NEVER",
    "Cluster",
    "Late",
    "Rule",
    "ScriptedNode",
    "Sent",
    "Stuck",
    "VirtualClock",
    "VirtualTimeLoop",
    "busy_until",
    "per_key",
    "run",
    "scripted_nodes",
    "sequence",
]

T = TypeVar("T")


class Sent(NamedTuple):
    """One command a scripted node received."""

    script: str
    keys: tuple[bytes, ...]
    args: tuple[Arg, ...]  # without the view of the nodes' epochs (see view)
    at: float  # the loop's time when it was sent
    view: Arg | None = None  # the view a granting or renewing script carries last


class _Never:
    def __repr__(self) -> str:
        return "NEVER"


NEVER = _Never()
"""The node never answers this command (the fan-out's node_timeout decides)."""


@dataclass(frozen=True, slots=True)
class Late:
    """Answer ``reply`` after ``after`` seconds of loop time."""

    reply: Reply
    after: float


Answer = Reply | Late | _Never
Rule = Answer | Callable[[Sent], Answer]


class _Manual:
    pass


_MANUAL = _Manual()


class ScriptedNode:
    """A node the test answers: by rules per script name, or by hand (``answer``)."""

    def __init__(
        self,
        name: str,
        *,
        ordered: bool = True,
        cross_slot: bool = True,
        rules: Mapping[str, Rule] | None = None,
        log: list[tuple[str, Sent]] | None = None,
    ) -> None:
        self.name = name
        self.ordered = ordered
        self.cross_slot = cross_slot  # False: like a Redis Cluster (renewals one by one)
        self.rules: dict[str, Rule] = dict(rules or {})
        self.sent: list[Sent] = []
        self.log = log  # shared by a cluster's nodes: every command, in order
        self.waiting: list[tuple[Sink, int]] = []  # commands waiting for answer()
        self.never_answered: list[Sent] = []
        self.stall_checks = 0
        self.concurrency = 1024
        # What silent_since() answers: -inf (default), silent since always, so
        # a command fails node_timeout after its fan-out; a test sets a time
        # to play a node busy answering earlier commands.
        self.quiet_since = float("-inf")
        self.wake_source = None
        self.restarts: Restarts | None = None  # set by a test to watch restarts
        self.index = -1
        # Ordered nodes answer in the order commands came, whatever the delays.
        self._outbox: deque[tuple[Sink, Reply]] = deque()
        self._last_due = float("-inf")

    def bind(self, index: int) -> None:
        self.index = index

    def run(self, command: Command, sink: Sink) -> None:
        loop = asyncio.get_running_loop()
        args, view = tuple(command.args), None
        if command.script.views:
            args, view = args[:-1], args[-1]
        sent = Sent(command.script.name, tuple(command.keys), args, loop.time(), view)
        self.sent.append(sent)
        if self.log is not None:
            self.log.append((self.name, sent))
        rule = self.rules.get(sent.script, _MANUAL)
        if isinstance(rule, _Manual):
            self.waiting.append((sink, self.index))
            return
        answer = rule(sent) if callable(rule) else rule
        if isinstance(answer, _Never):
            self.never_answered.append(sent)
            return
        delay, reply = (answer.after, answer.reply) if isinstance(answer, Late) else (0.0, answer)
        due = loop.time() + delay
        if self.ordered:
            due = self._last_due = max(due, self._last_due)
            self._outbox.append((sink, reply))
            loop.call_at(due, self._deliver)
        else:
            loop.call_at(due, sink.settle, self.index, reply)

    def _deliver(self) -> None:
        if self._outbox:  # empty after reset()
            sink, reply = self._outbox.popleft()
            sink.settle(self.index, reply)

    def answer(self, reply: Reply) -> None:
        """Answer the oldest command that has no rule, now."""
        sink, index = self.waiting.pop(0)
        sink.settle(index, reply)

    def silent_since(self) -> float:
        self.stall_checks += 1
        return self.quiet_since

    def reset(self) -> None:
        self.waiting.clear()
        self._outbox.clear()

    async def aclose(self) -> None:
        return None

    def scripts(self) -> list[str]:
        """The script names this node got, in order."""
        return [sent.script for sent in self.sent]


def scripted_nodes(n: int, *, ordered: bool = True) -> list[ScriptedNode]:
    """``n`` nodes answered by hand (no rules)."""
    return [ScriptedNode(f"n{i}", ordered=ordered) for i in range(n)]


class VirtualClock:
    """A mutable float: the time of a :class:`VirtualTimeLoop`, and the engine's clock."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Time passes with nothing running (a blocked event loop, a slow write)."""
        self.now += seconds


class Stuck(RuntimeError):
    """The virtual loop would wait forever, or spins without time ever moving."""


# Loop iterations at one instant before a busy loop is reported: the code
# under test keeps scheduling work for "now" and virtual time cannot move.
SPIN_LIMIT = 20_000


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop on a :class:`VirtualClock` that jumps to the next timer when idle.

    ``BaseEventLoop._run_once`` selects with ``timeout = when - self.time()``
    for the earliest timer when nothing is ready: once ``time()`` has been
    moved to ``when``, that is a zero timeout, and the timer is run in the
    same iteration. With nothing ready and no timer, a real loop would block
    on I/O; no test here does I/O, so that raises :class:`Stuck` instead of
    hanging the suite (and so does spinning ``SPIN_LIMIT`` iterations at one
    instant).
    """

    def __init__(self, clock: VirtualClock | None = None) -> None:
        super().__init__()
        self.clock = clock if clock is not None else VirtualClock()
        self._spun = 0
        self._spun_at = self.clock.now

    def time(self) -> float:
        return self.clock.now

    def reset_spin(self) -> None:
        self._spun = 0

    def _run_once(self) -> None:
        base = cast(Any, self)
        if not base._ready and not base._stopping:
            pending = [handle.when() for handle in base._scheduled if not handle.cancelled()]
            if not pending:
                raise Stuck(f"at t={self.clock.now}: nothing is ready and no timer is set")
            self.clock.now = max(self.clock.now, min(pending))
        if self.clock.now == self._spun_at:
            self._spun += 1
            if self._spun > SPIN_LIMIT:
                raise Stuck(
                    f"{SPIN_LIMIT} loop iterations at t={self.clock.now} without time moving: "
                    "something reschedules itself for 'now' forever"
                )
        else:
            self._spun, self._spun_at = 0, self.clock.now
        cast(Any, super())._run_once()


def run(main: Awaitable[T], clock: VirtualClock | None = None) -> T:
    """Run ``main`` to completion on a fresh :class:`VirtualTimeLoop` over ``clock``."""
    loop = VirtualTimeLoop(clock)
    try:
        return loop.run_until_complete(main)
    finally:
        try:
            loop.reset_spin()  # the cleanup gets its own budget after a Stuck
            left = asyncio.all_tasks(loop)
            for task in left:
                task.cancel()
            if left:
                loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
        finally:
            loop.close()


class Tokens:
    """Deterministic grant tokens: ``tok1``, ``tok2``..."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> bytes:
        self.count += 1
        return b"tok%d" % self.count


class Cluster:
    """An Engine over ``n`` scripted nodes on a virtual clock; makes locks like Redlock."""

    def __init__(
        self,
        n: int = 3,
        *,
        clock: VirtualClock | None = None,
        ordered: bool = True,
        cross_slot: bool = True,
        rules: Mapping[str, Rule] | None = None,
        watched: bool = False,
        **config: Any,
    ) -> None:
        """``watched``: each node has a restart watch (``node.restarts``), as
        the drivers' nodes do; the test tells it what the server says."""
        self.clock = clock if clock is not None else VirtualClock()
        self.log: list[tuple[str, Sent]] = []
        self.nodes = [
            ScriptedNode(f"n{i}", ordered=ordered, cross_slot=cross_slot, rules=rules, log=self.log)
            for i in range(n)
        ]
        ttls = TtlLedger()
        if watched:
            for node in self.nodes:
                node.restarts = Restarts(node.name, ttls, None)
        config.setdefault("wake_on_release", False)  # scripted nodes have no pub/sub
        self.config = RedlockConfig(**config)
        self.tokens = Tokens()
        self.engine = Engine(
            self.nodes,
            self.config,
            clock=self.clock,
            token_factory=self.tokens,
            rng=random.Random(0),
            ttls=ttls,
        )
        self.holdings = Holdings(self.engine, Lock._lose)
        # The epochs census is tested on its own (test_epochs.py) and against
        # real nodes: here a census is taken as done, and the view stays ",".
        self.engine.epochs.ready = True

    def keys(self, name: str = "res") -> KeyLayout:
        return KeyLayout(self.config.prefix, name)

    def lock(self, name: str = "res", **options: Unpack[LockKeywords]) -> Lock:
        opts = LockOptions(**options)
        commands = ExclusiveCommands(self.keys(name))
        return Lock(self.engine, self.holdings, name, opts, commands)

    def rwlock(self, name: str = "res", **defaults: Unpack[LockKeywords]) -> RWLock:
        def options(function: str, keywords: Mapping[str, Any]) -> LockOptions:
            return LockOptions(**keywords)

        return RWLock(self.engine, self.holdings, name, self.keys(name), options, defaults)

    def script(self, script: str, *rules: Rule) -> None:
        """Set the rule for ``script``: one for every node, or one per node."""
        if len(rules) == 1:
            rules = rules * len(self.nodes)
        assert len(rules) == len(self.nodes), "one rule, or one per node"
        for node, rule in zip(self.nodes, rules, strict=True):
            node.rules[script] = rule

    def renewals(self, *rules: Rule) -> None:
        """Set how renewals are answered on both paths: ``rules`` as for
        :meth:`script`, for extend.lua (one grant per call), and each key of
        an extend_many.lua call answered alike (:func:`per_key`)."""
        self.script(EXTEND.name, *rules)
        self.script(EXTEND_MANY.name, *(per_key(rule) for rule in rules))

    def sent(self, script: str) -> list[tuple[str, Sent]]:
        """Every ``script`` command sent, as (node name, command), in order."""
        return [(name, sent) for name, sent in self.log if sent.script == script]

    def to(self, script: str) -> list[str]:
        """The names of the nodes that got ``script``, in order sent."""
        return [name for name, _ in self.sent(script)]

    def times(self, script: str) -> list[float]:
        """When each fan-out of ``script`` went out (one entry per fan-out, not per node)."""
        seen: list[float] = []
        for _, sent in self.sent(script):
            if not seen or sent.at != seen[-1]:
                seen.append(sent.at)
        return seen


def busy_until(c: Cluster, index: int, start: float, until: float, every: float) -> None:
    """Play node ``index`` answering earlier commands every ``every`` s, ``start`` to ``until``
    (its ``silent_since`` moves on: its votes wait, up to the backlog limit)."""
    node = c.nodes[index]
    loop = asyncio.get_running_loop()
    t = start
    while t <= until + 1e-9:
        loop.call_at(t, setattr, node, "quiet_since", t)
        t += every


def per_key(rule: Rule) -> Rule:
    """``rule``, written for a one-key script (extend.lua), for extend_many.lua.

    Each call gets the answer ``rule`` gives, once per key: an integer
    becomes a list with that vote for every key; an error, ``Late`` delay or
    :data:`NEVER` applies to the whole call, as a node failing it would.
    """

    def each_key(sent: Sent) -> Answer:
        answer = rule(sent) if callable(rule) else rule
        return _for_keys(answer, len(sent.keys))

    return each_key


def _for_keys(answer: Answer, keys: int) -> Answer:
    if isinstance(answer, Late):
        reply = _for_keys(answer.reply, keys)
        assert not isinstance(reply, Late | _Never)
        return Late(reply, answer.after)
    if type(answer) is int:
        return [answer] * keys
    return answer


def sequence(*answers: Answer) -> Callable[[Sent], Answer]:
    """A rule answering one command after another with ``answers``, the last one forever."""
    queue = list(answers)

    def next_answer(_: Sent) -> Answer:
        return queue.pop(0) if len(queue) > 1 else queue[0]

    return next_answer
