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

from redlock_async._engine import vote_limit

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
from .deploy import BURST, BURST_NODE_TIMEOUT
from .episode import LONGEST_TTL
from .faults import KINDS
from .liveness import free_name_granted, held_lock_kept, never_kept_out

__all__ = ["CHECKERS", "PENDING_CHECKERS", "fault_tier_view", "judge"]

NODE_TIMEOUT = 0.05  # the library's defaults, which every process uses
# The longest a vote stays pending, as the library states it - taken once, at
# import: a planted bug (unbounded-backlog-vote) patches the library of the
# process that judges, and must not move the bound it is held to.
VOTE_LIMIT = vote_limit(NODE_TIMEOUT)
BURST_VOTE_LIMIT = vote_limit(BURST_NODE_TIMEOUT)
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


def claims_within_keys(events: Sequence[Event]) -> Verdict:
    """No holder's claimed validity outlives its keys (docs/guarantees.md: the
    validity acquire() reports is a lower bound on how long a quorum of nodes
    keeps the grant, elapsed time and clock drift taken off): each grant's
    claim is held to the nodes' keys as it is made (``Recorder._claim_kept``)."""
    found = [e for e in events if e.kind == "claim" and e.op == "outlives"]
    claims = sum(
        1 for e in events if e.kind == "ok" and e.op == "acquire" and e.valid_until is not None
    )
    violations = [
        f"{e.process} at {e.time:.6f}: the claim on {e.key!r} (token {e.token[:12]}) until"
        f" {e.valid_until:.6f} outlives its keys on a quorum: {e.detail}"
        for e in found
    ]
    return Verdict("claims_within_keys", not violations, violations,
                   {"claims": claims, "outliving": len(found)})  # fmt: skip


def writer_starvation(events: Sequence[Event], res: str = "r2") -> Verdict:
    """A writer is not starved by a steady stream of readers (API.md): of the
    write acquires on ``res`` that ended granted or out of time, at least half
    were granted (the fault tier's rule, on the mixed workload's calls)."""
    done = [e for e in events if e.kind == "return" and e.op == "write" and e.key == res]
    tried = sorted((e for e in done if e.detail in ("ok", "false")), key=lambda e: e.time)
    granted = sum(e.detail == "ok" for e in tried)
    violations = []
    if len(tried) >= 4 and granted < len(tried) / 2:
        # When the history first showed it: the earliest end of a write
        # acquire by which the ones so far broke the rule too.
        so_far = 0
        for count, event in enumerate(tried, start=1):
            so_far += event.detail == "ok"
            if count >= 4 and so_far < count / 2:
                break
        violations.append(f"{granted} of {len(tried)} write acquires on {res!r} granted: writers"
                          f" starved by readers (so at {event.time:.3f} already)")  # fmt: skip
    counts = {"write_attempts": len(tried), "writes_granted": granted}
    return Verdict("writer_starvation", not violations, violations, counts)


def _call_bounds(events: Sequence[Event]) -> Verdict:
    """Every call within its bound: the burst process's (``deploy.py``) at its
    own node_timeout, every other process's at the default."""
    returned = _returned(events)
    mine = [e for e in returned if e.process != BURST]
    burst = [e for e in returned if e.process == BURST]
    verdict = call_bounds(mine, node_timeout=NODE_TIMEOUT, vote=VOTE_LIMIT)
    if not burst:
        return verdict
    theirs = call_bounds(burst, node_timeout=BURST_NODE_TIMEOUT, vote=BURST_VOTE_LIMIT)
    counts = {name: verdict.counts.get(name, 0) + theirs.counts.get(name, 0)
              for name in verdict.counts}  # fmt: skip
    counts["burst_calls"] = theirs.counts.get("calls", 0)
    violations = theirs.violations + verdict.violations
    return Verdict("call_bounds", not violations, violations, counts, verdict.figures)


def _waiters(events: Sequence[Event]) -> list[Event]:
    """The history for the waiting checkers, without the burst's own acquires
    (``deploy.py``): thousands of callers on names of their own, waiting their
    turn at the admission line by design - which ``call_bounds`` judges - not
    for a name (and each judged against every other, a quadratic cost)."""
    return fault_tier_view([e for e in events if e.process != BURST or not e.key.startswith("x:")])


def _prompt(events: Sequence[Event]) -> Verdict:
    return prompt_grants(_waiters(events), retry=RETRY, ttl=LONGEST_TTL, after_heal=AFTER_HEAL)


def _waits(events: Sequence[Event]) -> Verdict:
    return waits_only_for_its_names(
        _waiters(events), retry=RETRY, ttl=LONGEST_TTL, after_heal=AFTER_HEAL
    )


def _protected(events: Sequence[Event], *, names: bool = False) -> list[Event]:
    """The history without the grants a node evicted (``faults.py``: evict):
    a node that may evict is outside the model - the docs require
    noeviction, and the census flags it - so their safety is not claimed.
    Whatever else happened, with those grants on the same names, is judged;
    with ``names``, nothing on those names is (a counter incremented under
    an evicted grant and under the next holder's has no count to check)."""
    evicted = " ".join(e.detail for e in events if e.kind == "evicted")
    if not evicted:
        return list(events)
    gone = {e.token for e in events if e.token and e.token in evicted}
    if names:
        keys = {e.key for e in events if e.token in gone}
        return [e for e in events if e.key not in keys]
    return [e for e in events if e.token not in gone]


def _safe(check: Checker, *, names: bool = False) -> Checker:
    return lambda events: check(_protected(events, names=names))


CHECKERS: dict[str, Checker] = {
    "mutual_exclusion": _safe(lambda events: mutual_exclusion(events, ("acquire",))),
    "rw_exclusion": _safe(rw_exclusion),
    "semaphore_limit": _safe(lambda events: semaphore_limit(events, LIMIT)),
    "fencing_order": _safe(fencing_order),
    "no_lost_updates": _safe(no_lost_updates, names=True),
    "no_keys_left": no_keys_left,
    "holder_told": lambda events: holder_told(events, bound=LONGEST_TTL + 0.3),
    "cancel_safety": cancel_safety,
    "adopt_scope": adopt_scope,
    "call_bounds": _call_bounds,
    "prompt_grants": _prompt,
    "waits_only_for_its_names": _waits,
    "no_stray_tasks": _no_stray_tasks,
    "writer_starvation": writer_starvation,
    "claims_within_keys": claims_within_keys,
    # The restart rule's liveness (liveness.py; issue 40):
    "never_kept_out": lambda events: never_kept_out(events, ttl=LONGEST_TTL),
    "held_lock_kept": held_lock_kept,
    "free_name_granted": lambda events: free_name_granted(
        _waiters(events), retry=RETRY, ttl=LONGEST_TTL
    ),
}
"""The checkers the code as it stands is expected to pass."""

PENDING_CHECKERS: dict[str, Checker] = {}
"""Checkers awaiting a fix (``run --pending`` adds them): none since issue 40."""


def judge(events: Sequence[Event], *, pending: bool = False) -> list[Verdict]:
    """Every checker's verdict on ``events`` (the pending ones too, with ``pending``)."""
    chosen = {**CHECKERS, **(PENDING_CHECKERS if pending else {})}
    return [check(events) for check in chosen.values()]
