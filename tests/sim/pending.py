"""What the simulation knows the code does not pass yet: the restart rule's next version (issue 40).

``python -m tests.sim pending`` lists them, one a line: the fault kinds and
checkers ``run`` leaves out unless ``--pending``, and the schedules those
find on their own from random seeds (their seeds: ``test_pending.py``,
strict xfails until issue 40 lands). The engineer landing the fix removes
what it fixes here, and the xfail marks: the seeds must then pass.
"""

from __future__ import annotations

from .faults import KINDS
from .judge import PENDING_CHECKERS

__all__ = ["KNOWN", "PENDING", "SCHEDULES"]

SCHEDULES: dict[str, str] = {}
"""The schedules awaiting a fix, by name: what each is (none since issue 40;
``test_pending.py`` keeps the seeds that found the last ones)."""

PENDING: list[str] = [
    *(f"fault {name}" for name, kind in KINDS.items() if kind.pending),
    *(f"checker {name}" for name in PENDING_CHECKERS),
    *(f"schedule {name}: {what}" for name, what in SCHEDULES.items()),
]
"""One line each: ``fault NAME``, ``checker NAME``, ``schedule NAME: what``."""

KNOWN: dict[str, str] = {}
"""Known open findings the default run keeps clear of, and how (removed with the fix)."""
