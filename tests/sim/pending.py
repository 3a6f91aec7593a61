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

SCHEDULES: dict[str, str] = {
    # Found by the simulation (seed 7, 2026-11-29), not in issue 40's list:
    # a taker's copy renewing after its hand-over is refused by a quorum in
    # which a node lost its data (restart-aof-prefix) and releases its token
    # everywhere (Lock._lose: "a quorum refused it"), deleting the adopter's
    # key on the one node that still held it: two holders.
    "lost-copy-refused-by-lost-node": "a lost copy's release after a node lost its data",
}
"""The schedules awaiting issue 40, by name: what each is."""

PENDING: list[str] = [
    *(f"fault {name}" for name, kind in KINDS.items() if kind.pending),
    *(f"checker {name}" for name in PENDING_CHECKERS),
    *(f"schedule {name}: {what}" for name, what in SCHEDULES.items()),
]
"""One line each: ``fault NAME``, ``checker NAME``, ``schedule NAME: what``."""

KNOWN: dict[str, str] = {
    "lost-copy-refused-by-lost-node": (
        "without --pending the nemesis loses no node's data while a taker's copy"
        " renews after its hand-over (nemesis.py: known_open)"
    ),
}
"""Known open findings the default run keeps clear of, and how (removed with the fix)."""
