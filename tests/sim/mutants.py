"""The planted bugs the simulation must catch: the fault tier's, and its own.

:data:`MUTANTS` starts from ``tests/faults/mutants.py``'s (the same
monkeypatches of the library, applied once in each simulating process) and
is the one registry ``python -m tests.sim mutants`` lists and ``run
--mutant NAME`` applies: add a bug here with :func:`register`.

Where a fault-tier mutant reads the host's real clock, the simulation's
version reads the simulated world's instead (virtual time runs far faster
than the host's: a real clock would not be the bug, only noise).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from functools import partial

from redlock_async._base import _world
from redlock_async._core import _lock
from redlock_async._core._lock import Lock
from redlock_async._engine import Script, _engine, _epochs, _restarts
from redlock_async._engine._tally import Tally

from ..faults.mutants import MUTANTS as FAULT_TIER
from ..faults.mutants import _edited, _set

__all__ = ["MUTANTS", "apply", "register"]

MUTANTS: dict[str, Callable[[], None]] = dict(FAULT_TIER)
"""Every planted bug by name: the fault tier's, with the simulation's versions."""


def register(name: str, plant: Callable[[], None]) -> None:
    """Add (or replace with a simulation's version) the planted bug ``name``."""
    MUTANTS[name] = plant


def _wall_clock_validity() -> None:
    # Validity judged on the wall clock of the process's world: a step of it
    # (an operator, NTP: the nemesis's wall-step) moves every deadline.
    original = _engine.Engine.__init__

    def init(self: _engine.Engine, *args: object, **kwargs: object) -> None:
        original(self, *args, **kwargs)  # type: ignore[arg-type]
        world = _world.current()
        self.clock = lambda: world.time_ns() / 1e9

    _engine.Engine.__init__ = init  # type: ignore[method-assign]


register("wall-clock-validity", _wall_clock_validity)


# -- the restart rule (issue 25: lua/_epoch.lua, census.lua, _epochs.py) -----
#
# Named by what each breaks, not by the mechanism it breaks today. Each lets
# a node that lost grants still valid vote for a second holder, which the
# default checkers (mutual_exclusion, no_lost_updates, fencing_order ...)
# would see. It takes a grant on a bare quorum, one of whose nodes loses its
# data (restart-node-empty, flushall, restart-aof-prefix, promote-replica)
# while the grant is held and the name wanted elsewhere: the default nemesis
# draws that rarely, and most of these go uncaught within 20,000 grants
# (docs/faults.md, "Planted bugs": the figures).


def _edit_views(*edits: tuple[str, str]) -> None:
    """Every granting or renewing script (lua/_epoch.lua prepended: ``views``)
    edited alike, in every module of the library that holds one."""
    import redlock_async  # noqa: F401 - every kind's module, so every holder is patched
    from redlock_async._core import _batch, _commands  # noqa: F401
    from redlock_async._kinds import _multilock, _rwlock, _semaphore  # noqa: F401

    edited: dict[bytes, Script] = {}
    for name, module in sorted(sys.modules.items()):
        if not name.startswith("redlock_async") or module is None:
            continue
        for attribute, value in list(vars(module).items()):
            if isinstance(value, Script) and value.views:
                if value.sha not in edited:
                    edited[value.sha] = _edited(value, *edits)
                setattr(module, attribute, edited[value.sha])
    assert edited, "no script carries lua/_epoch.lua: update this mutant"


def _restart_no_epoch_check() -> None:
    # A node answers a grant or renewal whatever view it carries: one that lost
    # its data (a FLUSHALL: the same run_id, so no restart watch sees it)
    # never answers STALE, no census runs, and its yes counts at once while
    # the grants it forgot are still valid elsewhere.
    _edit_views(("not string.find(view, ',' .. id .. ',', 1, true) or ", ""))


def _restart_record_never_raised() -> None:
    # A grant passes the check but raises no record of its view: a census after
    # a loss finds no live record, so the node that lost the grant is not
    # suspect and votes for a second holder while the first is valid.
    _edit_views(("    redis.call('SET', record, '1', 'PX', need + math.ceil(need / 4))\n", ""))


def _restart_record_lowered() -> None:
    # Each grant raises its view's record, but to a quarter of what it must
    # cover (max(ttl, 2 s)): the record expires while grants written with that
    # view are still valid, and a census after a loss lets the node that lost
    # them back in time for a second holder.
    _edit_views(("redis.call('SET', record, '1', 'PX', need + math.ceil(need / 4))",
                 "redis.call('SET', record, '1', 'PX', math.ceil(need / 4))"))  # fmt: skip


def _restart_suspect_node_counted() -> None:
    # The census finds the grants a node may have lost, and the node's votes
    # count anyway (past the restart watch's two seconds, or at once after a
    # FLUSHALL, which no watch sees).
    def suspect(self: _restarts.Restarts, until: float) -> None:
        pass

    _restarts.Restarts.suspect = suspect  # type: ignore[method-assign]


def _restart_census_stops_early() -> None:
    # A census judges what a quorum of nodes answered, not waiting for every
    # node to answer or time out: when the node that kept a lost grant's record
    # answers last, the node that lost it is counted at once.
    def collect(
        tally: Tally, loop: asyncio.AbstractEventLoop, done: Callable[[_epochs.Answers], None]
    ) -> None:
        answers: _epochs.Answers = {}
        over = [False]
        enough = tally.n // 2 + 1

        def finish() -> None:
            if not over[0]:
                over[0] = True
                done(answers)

        def answer(index: int, reply: object) -> None:
            if isinstance(reply, list) and reply and isinstance(reply[0], bytes | str):
                reply = [x.encode() if isinstance(x, str) else x for x in reply]
                answers[index] = (reply, loop.time())
                if len(answers) >= enough:
                    finish()

        for index in range(tally.n):
            tally.when_settled(index, partial(answer, index))
        tally.when_expired(finish)

    _set(_epochs, "_collect", collect)


def _restart_from_disk_trusted() -> None:
    # A new run_id (seen on each new connection) is taken for nothing: a node
    # back from an append-only file that lacks its last writes, or a promoted
    # replica, keeps its old epoch, so no script answers STALE and no census
    # runs - its yes counts at once, though the grants it lost are valid.
    def restarted(self: _epochs.Epochs, index: int) -> None:
        pass

    _epochs.Epochs._restarted = restarted  # type: ignore[method-assign]
    _set(_restarts, "restart_span", lambda ledger: 0.0)


register("restart-no-epoch-check", _restart_no_epoch_check)
register("restart-from-disk-trusted", _restart_from_disk_trusted)
register("restart-record-never-raised", _restart_record_never_raised)
register("restart-record-lowered", _restart_record_lowered)
register("restart-suspect-node-counted", _restart_suspect_node_counted)
register("restart-census-stops-early", _restart_census_stops_early)


# -- grant lifecycle ----------------------------------------------------------


def _close_releases_handed_on() -> None:
    # aclose() releases every grant it ends, handed on or not: a taker's copy
    # still renewing when its Redlock closes deletes the keys under the
    # process that adopted its token, and a third process takes the name.
    original = Lock._close
    assert "_handed_on" in original.__code__.co_names, "Lock._close changed: update this mutant"

    def close(self: Lock, reason: str) -> None:
        handed_on = _lock._handed_on
        _set(_lock, "_handed_on", lambda lock, grant: False)
        try:
            original(self, reason)
        finally:
            _lock._handed_on = handed_on

    Lock._close = close


register("close-releases-handed-on", _close_releases_handed_on)


_applied: list[str] = []


def apply(name: str) -> None:
    """Plant ``name`` in this process (once: a second, other one is refused)."""
    if _applied:
        if _applied == [name]:
            return
        raise RuntimeError(f"{_applied[0]} is planted in this process already")
    MUTANTS[name]()
    _applied.append(name)
