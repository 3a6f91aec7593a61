"""The checkers a deployment's history is judged by: the fault tier's, and ours.

The fault tier's checkers (``tests/faults/checkers.py``, ``bounds.py``) are
called as they are, on the same :class:`~tests.faults.history.Event`
history, so the simulation and the fault tier judge alike. Only the names of
fault kinds the fault tier does not have are translated for its health
rules (:func:`fault_tier_view`): a node that lost its data in any way is, to
them, a ``restart-node-empty`` (its quarantine lasts as long).

The liveness checkers of the restart rule's next version (``liveness.py``)
are pending (issue 40): run with ``pending``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from ..faults.checkers import (
    adopt_scope,
    call_bounds,
    cancel_safety,
    fencing_order,
    holder_told,
    mutual_exclusion,
    no_keys_left,
    no_lost_updates,
    prompt_grants,
    rw_exclusion,
    semaphore_limit,
    waits_only_for_its_names,
)
from ..faults.history import Event
from ..faults.verdict import Verdict
from .deploy import LONGEST_TTL
from .faults import KINDS
from .liveness import free_name_granted, held_lock_kept, never_kept_out

__all__ = ["CHECKERS", "PENDING_CHECKERS", "fault_tier_view", "judge"]

NODE_TIMEOUT = 0.05  # the library's defaults, which every process uses
RETRY = 0.2 + 0.2  # retry_delay + retry_jitter
LIMIT = 3  # the semaphore's (deploy.py)

Checker = Callable[[Sequence[Event]], Verdict]


def fault_tier_view(events: Sequence[Event]) -> list[Event]:
    """The history with every data-losing or restarting fault named as the fault
    tier names its own (its health rules key on the name)."""
    out: list[Event] = []
    for event in events:
        kind = KINDS.get(event.op) if event.process == "nemesis" else None
        if kind is not None and (kind.loses_data or kind.restarts):
            event = dataclasses.replace(event, op="restart-node-empty")
        out.append(event)
    return out


def _no_stray_tasks(events: Sequence[Event]) -> Verdict:
    done = [e for e in events if e.kind == "done"]
    stray = {e.process: e.value for e in done if e.value}
    return Verdict(
        "no_stray_tasks",
        not stray,
        [f"{p}: {n} tasks still running after its Redlocks were closed" for p, n in stray.items()],
        {"processes_done": len(done)},
    )


def _returned(events: Sequence[Event]) -> list[Event]:
    """The history without the calls a crash ended: they never returned, so
    no bound of theirs can be judged (the fault tier's workers never crash)."""
    crashed = {(e.process, e.value) for e in events if e.kind == "return" and e.detail == "crashed"}
    return [e for e in events if e.kind not in ("call", "return") or (e.process, e.value)
            not in crashed]  # fmt: skip


# After a heal, a process counts on the node again within its reconnection
# backoff (about the outage, 2 s at most) and a second: the fault tier's
# faults are short (1 s after the heal there); the nemesis's last longer.
AFTER_HEAL = 3.0


def writer_starvation(events: Sequence[Event], res: str = "r2") -> Verdict:
    """A writer is not starved by a steady stream of readers (API.md): of the
    write acquires on ``res`` that ended granted or out of time, at least half
    were granted (the fault tier's rule, on the mixed workload's calls)."""
    done = [e for e in events if e.kind == "return" and e.op == "write" and e.key == res]
    tried = [e for e in done if e.detail in ("ok", "false")]
    granted = sum(e.detail == "ok" for e in tried)
    violations = []
    if len(tried) >= 4 and granted < len(tried) / 2:
        violations.append(f"{granted} of {len(tried)} write acquires on {res!r} granted:"
                          " writers starved by readers")  # fmt: skip
    counts = {"write_attempts": len(tried), "writes_granted": granted}
    return Verdict("writer_starvation", not violations, violations, counts)


def _prompt(events: Sequence[Event]) -> Verdict:
    return prompt_grants(
        fault_tier_view(events), retry=RETRY, ttl=LONGEST_TTL, after_heal=AFTER_HEAL
    )


def _waits(events: Sequence[Event]) -> Verdict:
    return waits_only_for_its_names(
        fault_tier_view(events), retry=RETRY, ttl=LONGEST_TTL, after_heal=AFTER_HEAL
    )


CHECKERS: dict[str, Checker] = {
    "mutual_exclusion": lambda events: mutual_exclusion(events, ("acquire",)),
    "rw_exclusion": rw_exclusion,
    "semaphore_limit": lambda events: semaphore_limit(events, LIMIT),
    "fencing_order": fencing_order,
    "no_lost_updates": no_lost_updates,
    "no_keys_left": no_keys_left,
    "holder_told": lambda events: holder_told(events, bound=LONGEST_TTL + 0.3),
    "cancel_safety": cancel_safety,
    "adopt_scope": adopt_scope,
    "call_bounds": lambda events: call_bounds(_returned(events), node_timeout=NODE_TIMEOUT),
    "prompt_grants": _prompt,
    "waits_only_for_its_names": _waits,
    "no_stray_tasks": _no_stray_tasks,
    "writer_starvation": writer_starvation,
}
"""The checkers the code as it stands is expected to pass."""

PENDING_CHECKERS: dict[str, Checker] = {
    "never_kept_out": lambda events: never_kept_out(events, ttl=LONGEST_TTL),
    "held_lock_kept": held_lock_kept,
    "free_name_granted": lambda events: free_name_granted(events, retry=RETRY, ttl=LONGEST_TTL),
}
"""The restart rule's liveness, awaiting its next version (issue 40)."""


def judge(events: Sequence[Event], *, pending: bool = False) -> list[Verdict]:
    """Every checker's verdict on ``events`` (the pending ones too, with ``pending``)."""
    chosen = {**CHECKERS, **(PENDING_CHECKERS if pending else {})}
    return [check(events) for check in chosen.values()]
