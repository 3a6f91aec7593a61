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

from collections.abc import Callable

from redlock_async._base import _world
from redlock_async._engine import _engine

from ..faults.mutants import MUTANTS as FAULT_TIER

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


_applied: list[str] = []


def apply(name: str) -> None:
    """Plant ``name`` in this process (once: a second, other one is refused)."""
    if _applied:
        if _applied == [name]:
            return
        raise RuntimeError(f"{_applied[0]} is planted in this process already")
    MUTANTS[name]()
    _applied.append(name)
