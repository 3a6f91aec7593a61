"""Known bugs, planted on purpose: the fault suite must catch them.

A worker process started with ``mutant=<name>`` applies one of these before
it builds its ``Redlock``: each replaces one piece of the library with the
broken version a careless implementation would have. Nothing here is
imported by the library; it only patches it inside that worker process.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable, Sequence
from typing import Any

from redlock_async import _redlock
from redlock_async._core import _attempt, _batch, _commands, _lock, _scripts
from redlock_async._core._commands import ExclusiveCommands
from redlock_async._core._grant import Grant
from redlock_async._core._lock import Lock
from redlock_async._engine import (
    Command,
    Engine,
    Script,
    Waiting,
    _admission,
    _engine,
    _epochs,
    _quorum,
    _restarts,
    _tally,
)
from redlock_async._kinds import _multilock, _rwlock, _semaphore
from redlock_async._kinds._multilock import MultiCommands

__all__ = ["MUTANTS", "apply"]


def _script(name: str, source: str, *, grants: bool = False, views: bool = False) -> Script:
    # ``views``: the source has lua/_epoch.lua prepended (an edited granting
    # or renewing script) and reads the caller's view as its last argument.
    # Without the flag nothing appends it, and every node answers STALE:
    # the mutant would test a lock that grants and renews nothing.
    body = source.encode()
    sha = hashlib.sha1(body).hexdigest().encode()
    return Script(name, body, sha, grants=grants, views=views)


def _quorum_of_half() -> None:
    # A "majority" of N // 2: two disjoint halves can both win.
    original = _tally.Tally.__init__

    def init(self: _tally.Tally, *args: object, **kwargs: object) -> None:
        original(self, *args, **kwargs)  # type: ignore[arg-type]
        self.quorum = self._yes_short = max(1, self.n // 2)
        self._no_short = self.n - self.quorum + 1

    _tally.Tally.__init__ = init  # type: ignore[method-assign]


def _set(module: object, name: str, value: object) -> None:
    # Module globals the library looks up at call time: setattr swaps them.
    assert hasattr(module, name), f"{module}.{name} is gone: update this mutant"
    setattr(module, name, value)


def _validity_ignoring_elapsed() -> None:
    _set(_attempt, "validity", lambda ttl, started, now, drift: ttl - ttl * drift - 0.002)


def _no_drift_margin() -> None:
    _set(_attempt, "validity", lambda ttl, started, now, drift: ttl - (now - started))


def _release_with_del() -> None:
    broken = _script("release", "return redis.call('DEL', KEYS[1])")
    _set(_commands, "RELEASE", broken)
    _set(_rwlock, "RELEASE", broken)


# Background renewals send extend_many.lua (each key's kind, token and ttl
# in ARGV[3i-2..3i]), extend() sends extend.lua: a bug planted in one must be
# planted in both.
_EACH_KEY = "local r = {} for i = 1, #KEYS do %s end return r"


def _unconditional_pexpire() -> None:
    broken = _script("extend", "return redis.call('PEXPIRE', KEYS[1], ARGV[2])")
    _set(_commands, "EXTEND", broken)
    _set(_rwlock, "EXTEND", broken)
    each = "r[i] = redis.call('PEXPIRE', KEYS[i], ARGV[3 * i])"
    _set(_batch, "EXTEND_MANY", _script("extend_many", _EACH_KEY % each))


def _extend_recreates() -> None:
    broken = _script("extend", "redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1")
    _set(_commands, "EXTEND", broken)
    _set(_rwlock, "EXTEND", broken)
    each = "redis.call('SET', KEYS[i], ARGV[3 * i - 1], 'PX', ARGV[3 * i]) r[i] = 1"
    _set(_batch, "EXTEND_MANY", _script("extend_many", _EACH_KEY % each))


def _edited(script: Script, *edits: tuple[str, str]) -> Script:
    """``script`` with each ``(old, new)`` edit made; fails loudly when ``old`` is gone."""
    source = script.source.decode()
    for old, new in edits:
        assert old in source, f"{script.name}.lua changed: update this mutant"
        source = source.replace(old, new)
    return _script(script.name, source, grants=script.grants, views=script.views)


# Each renewal script's "only raise" step (issue 24), as a PTTL (or score)
# comparison around the write: the mutant drops the comparison.
_RAISE_KEY = (
    "    if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then\n"
    "        redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "    end\n",
    "    redis.call('PEXPIRE', KEYS[1], ARGV[2])\n",
)
_RAISE_EACH_KEY = (
    "    if redis.call('PTTL', KEYS[i]) < ttl then\n"
    "        redis.call('PEXPIRE', KEYS[i], ARGV[2])\n"
    "    end\n",
    "    redis.call('PEXPIRE', KEYS[i], ARGV[2])\n",
)
_RAISE_BATCHED_KEY = (
    "    if redis.call('PTTL', key) < tonumber(ttl) then\n"
    "        redis.call('PEXPIRE', key, ttl)\n"
    "    end\n",
    "    redis.call('PEXPIRE', key, ttl)\n",
)
_RAISE_BATCHED_READER = (
    "    if tonumber(score) < now + ms then\n"
    "        redis.call('ZADD', key, 'XX', now + ms, token)\n"
    "    end\n",
    "    redis.call('ZADD', key, 'XX', now + ms, token)\n",
)
_RAISE_READER = (
    "if tonumber(score) < now + ttl then\n"
    "    redis.call('ZADD', KEYS[1], 'XX', now + ttl, ARGV[1])\n"
    "end\n",
    "redis.call('ZADD', KEYS[1], 'XX', now + ttl, ARGV[1])\n",
)


def _renewal_shortens() -> None:
    # Every renewal sets the expiry it asks for, lower or not (the scripts
    # before issue 24): a copy of a grant renewing to a short ttl cuts the
    # keys of another copy that claims a long one, and once the short one
    # stops renewing, the name is granted again while the long one holds it.
    # Every path a renewal takes: extend() and adopt() (extend.lua, through
    # each kind's module), background renewals (extend_many.lua), multilocks
    # (multi_extend.lua; extend.lua per key on a Redis Cluster) and readers.
    extend = _edited(_scripts.EXTEND, _RAISE_KEY)
    for module in (_commands, _rwlock, _semaphore, _multilock):
        _set(module, "EXTEND", extend)
    _set(_multilock, "MULTI_EXTEND", _edited(_scripts.MULTI_EXTEND, _RAISE_EACH_KEY))
    _set(_rwlock, "READ_EXTEND", _edited(_scripts.READ_EXTEND, _RAISE_READER))
    batched = _edited(_scripts.EXTEND_MANY, _RAISE_BATCHED_KEY, _RAISE_BATCHED_READER)
    _set(_batch, "EXTEND_MANY", batched)


def _lost_copy_releases() -> None:
    # A lock lost for want of answers in time (its event loop stalled, its
    # nodes slow) releases its token's keys, as every loss did before, handed
    # on or not: an adopted copy of the grant still holds them, and loses
    # them under it.
    original = Lock._lose
    handed_on = _lock._handed_on

    def lose(self: Lock, reason: str, errors: Any, release: bool = True) -> Any:
        _lock._handed_on = lambda lock, grant: False
        try:
            return original(self, reason, errors, True)
        finally:
            _lock._handed_on = handed_on

    Lock._lose = lose  # type: ignore[method-assign]


def _no_rollback() -> None:
    _engine.Engine.undo = lambda self, tally, release, until=0.0: None  # type: ignore[method-assign]


def _wall_clock() -> None:
    # Validity on the wall clock, and the wall clock steps back 1 s every
    # 1.5 s (a badly disciplined host): an attempt spanning a step looks 1 s
    # younger than it is.
    started = time.monotonic()

    def wall() -> float:
        steps = int((time.monotonic() - started) / 1.5)
        return time.time() - 1.0 * steps

    original = _engine.Engine.__init__

    def init(self: _engine.Engine, *args: object, **kwargs: object) -> None:
        original(self, *args, **kwargs)  # type: ignore[arg-type]
        self.clock = wall

    _engine.Engine.__init__ = init  # type: ignore[method-assign]


def _fence_without_write_back() -> None:
    async def fence(
        engine: object, commands: object, tally: _tally.Tally, token: bytes
    ) -> tuple[int, None]:
        values = [r for r in tally.replies if _tally.is_yes(r)]
        return max(values), None  # type: ignore[type-var, return-value]

    _set(_attempt, "_fence", fence)


def _reader_ignores_waiting_writer() -> None:
    source = _scripts.READ_ACQUIRE.source.decode()
    check = "if redis.call('EXISTS', KEYS[3]) == 1 then\n    return -1\nend\n"
    assert check in source, "rw_read_acquire.lua changed: update this mutant"
    broken = _script("rw_read_acquire", source.replace(check, ""), grants=True, views=True)
    _set(_rwlock, "READ_ACQUIRE", broken)


def _semaphore_counts_per_node() -> None:
    # Every node with room votes for the slot: a grant whenever a quorum has
    # room, as counting holders per node would decide.
    agreed = _semaphore.agreed_slot

    def per_node(replies: Sequence[object], width: int) -> tuple[int, int]:
        position, _ = agreed(replies, width)
        return position, sum(1 for reply in replies if type(reply) is int and reply > 0)

    _set(_semaphore, "agreed_slot", per_node)


def _adopt_without_confirmation() -> None:
    # A handed-over token held at once, its extend sent but never judged: a
    # grant that expired or was taken meanwhile is "adopted" all the same.
    async def adopt(lock: Lock, commands: ExclusiveCommands, engine: Engine, token: str) -> Lock:
        raw = token.encode()
        ttl = lock.options.ttl
        now = engine.clock()
        tally = engine.fanout(commands.extend(raw, ttl))
        lock._hold(Grant(raw, ttl, now + ttl * 0.9, tally, None, now), asyncio.current_task())
        lock._adopted = True
        return lock

    _set(_redlock, "adopt", adopt)


def _line_per_first_name() -> None:
    # Multilock waiters of a process line up by their first name and kind,
    # heard on that name's channel only (before issue 24): [a, c] waits,
    # without attempts, behind [a, b] waiting for b, though a and c are free.
    # A liveness bug, not a safety one: nothing is ever granted twice.
    def waiting(self: MultiCommands) -> Waiting:
        return Waiting(self.kind, (self.keys.wake,))

    _set(MultiCommands, "waiting", waiting)


# The release scripts of every kind of lock; past this many releases in
# flight, the next are dropped (issue 24: the lean driver failed what was
# beyond 65,536 commands in flight, here scaled down to what a worker does).
_RELEASES = frozenset({"release", "rw_read_release", "multi_release", "sem_release"})
_RELEASE_LIMIT = 16


def _dropped_release_under_volume() -> None:
    # A burst of releases past a client-side limit: the excess is sent to no
    # node and fails there as never written (so never resent); release()
    # only warns "not confirmed", returns, and the keys stay until their ttl.
    original = _quorum.Quorum.fanout
    in_flight = [0]

    def landed(_: object) -> None:
        in_flight[0] -= 1

    def fanout(self: _quorum.Quorum, command: Command, **where: Any) -> _tally.Tally:
        if command.script.name not in _RELEASES:
            return original(self, command, **where)
        if in_flight[0] >= _RELEASE_LIMIT:
            return original(self, command, **{**where, "only": ()})  # every node: SKIPPED
        in_flight[0] += 1
        tally = original(self, command, **where)
        tally.decided.add_done_callback(landed)
        return tally

    _quorum.Quorum.fanout = fanout  # type: ignore[method-assign]


def _admission_without_deadline() -> None:
    # The admission line as it was: strict arrival order, no deadline, no
    # one-shots' reserve - an acquire(timeout=0.3) or a blocking=False waits
    # behind every other name's attempt, for as long as they take.
    original = _admission.Admission.wait
    assert "oneshot" in original.__code__.co_varnames, "Admission.wait changed: update this mutant"

    async def wait(
        self: _admission.Admission, timeout: float | None = None, *, oneshot: bool = False
    ) -> bool:
        return await original(self, None, oneshot=False)

    _admission.Admission.wait = wait  # type: ignore[method-assign]


def _unbounded_backlog_vote() -> None:
    # Silence alone times a vote out: a node answering a backlog slowly, never
    # silent for node_timeout, keeps every vote (and every caller) waiting.
    _set(_tally, "backlog_limit", lambda node_timeout: float("inf"))


def _per_redlock_restart_rule() -> None:
    # The restart rule before issue 25: each Redlock quarantines a restart it
    # saw itself, for the longest ttl it granted itself. The census still runs
    # but finds no suspect: a process started after the restart never saw the
    # old server, and one with a short ttl lets the node back early, while
    # another process's long grant it forgot is still valid.
    _set(_epochs, "lost_until", lambda epoch, position, fields: 0.0)
    _set(
        _restarts,
        "restart_span",
        lambda ledger: max(ledger.longest, _restarts.MIN_QUARANTINE),
    )


MUTANTS: dict[str, Callable[[], None]] = {
    "quorum-n2": _quorum_of_half,
    "validity-ignores-elapsed": _validity_ignoring_elapsed,
    "no-drift-margin": _no_drift_margin,
    "release-with-del": _release_with_del,
    "unconditional-pexpire": _unconditional_pexpire,
    "no-rollback": _no_rollback,
    "wall-clock-validity": _wall_clock,
    "extend-recreates-key": _extend_recreates,
    "fence-before-write-back": _fence_without_write_back,
    "reader-ignores-waiting-writer": _reader_ignores_waiting_writer,
    "semaphore-counts-per-node": _semaphore_counts_per_node,
    "adopt-without-confirmation": _adopt_without_confirmation,
    "line-per-first-name": _line_per_first_name,
    "renewal-shortens": _renewal_shortens,
    "lost-copy-releases": _lost_copy_releases,
    "dropped-release-under-volume": _dropped_release_under_volume,
    "admission-without-deadline": _admission_without_deadline,
    "unbounded-backlog-vote": _unbounded_backlog_vote,
    "per-redlock-restart-rule": _per_redlock_restart_rule,
}


def apply(name: str) -> None:
    MUTANTS[name]()
