"""A stall trap that springs at the instant its process resumes from a stop (deploy.py).

Seed 1004 before ededa30: w13, stalled in an acquire for 1.509 s, was stalled
again (a second ``pause-in-acquire``) by the first grant its resumed loop sent,
at that same instant - before its holder task's wake-up ran. The library had
told it of its lost lock then (its validity had ended 0.21 s earlier), but the
holder wrote ``lost`` only as the second stall ended, 0.152 s later: the
history's stall rule (``windows``, ``STALL_NOTICE``) then ended its renewed
claim when the second stall began, not the first, and that claim overlapped
w15's three grants of the name. Two stops back to back are one; the trap waits
for the process's next grant instead.
"""

from __future__ import annotations

from types import SimpleNamespace

from .deploy import Deployment, _Worker
from .faults import Fault
from .nemesis import DEFAULT_KINDS


def test_a_stall_at_the_instant_its_process_resumes_waits_for_its_next_grant() -> None:
    dep = Deployment(1004, DEFAULT_KINDS)
    try:
        loop = dep.sim.loop
        process = dep.sim.spawn()
        worker = _Worker(0, process, 1.5)
        mixed = SimpleNamespace(trap=None)
        worker.mixed = mixed  # type: ignore[assignment]
        dep.workers.append(worker)
        armed = Fault(400, "pause-in-acquire", loop.time(), 0.15, (), (0,))

        dep.resumed[0] = loop.time()  # back from a stop at this very instant
        dep.stall(0, armed)
        assert process not in loop._frozen  # not stopped again
        assert mixed.trap is not None  # at its next grant instead
        assert not [e for e in dep.recorder.events if e.process == "nemesis"]

        dep.resumed[0] = loop.time() - 0.001  # it has run since: the stall comes
        trap, mixed.trap = mixed.trap, None
        trap()
        assert process in loop._frozen
        assert dep.stalled[0] == loop.time()
        faults = [e for e in dep.recorder.events if e.process == "nemesis"]
        assert [(e.kind, e.op) for e in faults] == [("fault", "pause-in-acquire")]
    finally:
        dep.sim.close()
