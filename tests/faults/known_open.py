"""Findings of the outside review (issue 14) the library still has, by schedule.

Each entry names the schedule that finds the bug and the checker that fires
on today's code. The every-CI tier runs those schedules as strict xfails
(tests/faults/test_smoke.py): they must fail, and by that checker. The
engineer merging a fix removes its entry here - then the schedule must pass,
or CI goes red (an XPASS with the entry still here is red too).
"""

from __future__ import annotations

__all__ = ["KNOWN_OPEN"]

# schedule -> (the checker that fires today, the finding)
KNOWN_OPEN: dict[str, tuple[str, str]] = {
    # Every finding of the outside review (issue 14) is fixed on main;
    # entries return here only for a bug found and not yet fixed.
}
