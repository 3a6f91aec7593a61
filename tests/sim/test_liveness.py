"""The restart rule's liveness checkers (liveness.py) on hand-made histories.

Each must fail on a history that breaks its rule, and pass when the fault
log excuses it: a checker that cannot fail is a defect.
"""

from __future__ import annotations

from ..faults.history import Event
from .liveness import FaultLog, free_name_granted, held_lock_kept, never_kept_out, settle

TTL = 2.0


def cluster(nodes: int = 3) -> list[Event]:
    return [Event(0.0, "sim", "nodes", "cluster", value=nodes)]


def fault(kind: str, start: float, end: float, nodes: str = "", workers: str = "",
          ident: int = 1) -> list[Event]:  # fmt: skip
    detail = f"id={ident} nodes=({nodes}) workers=({workers}) amount=0"
    return [
        Event(start, "nemesis", "fault", kind, detail=detail),
        Event(end, "nemesis", "heal", kind, detail=detail),
    ]


def call(process: str, op: str, res: str, start: float, end: float, outcome: str = "ok",
         timeout: float = 10.0, ident: int = 1) -> list[Event]:  # fmt: skip
    return [
        Event(start, process, "call", op, key=res, value=ident, detail=f"T={timeout:g}"),
        Event(end, process, "return", op, key=res, value=ident, detail=outcome),
    ]


def kept_out(process: str, node: int, start: float, end: float) -> list[Event]:
    return [
        Event(start, process, "out", "node", key=str(node), detail="watch"),
        Event(end, process, "in", "node", key=str(node)),
    ]


def busy_w0() -> list[Event]:
    """w0 started at 0 and has a call under way from 1 s to 60 s."""
    return [Event(0.0, "w0", "hold", "lock", key="x", token="t0", value=1000),
            *call("w0", "lock", "a", 1.0, 60.0)]  # fmt: skip


# -- never_kept_out ----------------------------------------------------------


def test_a_node_kept_out_for_nothing_is_a_violation() -> None:
    verdict = never_kept_out([*cluster(), *busy_w0(), *kept_out("w0", 1, 5.0, 9.0)], ttl=TTL)
    assert not verdict.ok
    assert "w0 kept node 1 out" in verdict.violations[0]


def test_a_partition_excuses_it_until_the_path_settles() -> None:
    events = [*cluster(), *busy_w0(), *fault("partition", 4.5, 8.0, "1,", "0,")]
    assert never_kept_out([*events, *kept_out("w0", 1, 5.0, 9.0)], ttl=TTL).ok
    late = 8.0 + settle(3.5) + 2.0  # kept out two seconds past the settling time
    assert not never_kept_out([*events, *kept_out("w0", 1, 5.0, late)], ttl=TTL).ok


def test_a_partition_of_another_process_or_node_excuses_nothing() -> None:
    others = [*fault("partition", 4.5, 8.0, "1,", "1,"), *fault("partition", 4.5, 8.0, "2,", "0,",
                                                                ident=2)]  # fmt: skip
    events = [*cluster(), *busy_w0(), *others, *kept_out("w0", 1, 5.0, 9.0)]
    assert not never_kept_out(events, ttl=TTL).ok


def test_a_loss_of_data_excuses_it_while_its_grants_may_be_valid() -> None:
    events = [*cluster(), *busy_w0(), *fault("restart-node-empty", 4.9, 4.9, "1,")]
    assert never_kept_out([*events, *kept_out("w0", 1, 5.0, 9.0)], ttl=TTL).ok
    # Past the records' life (1.25 x max(ttl, 2 s) after it was noticed, and
    # the brief hold): no reason left.
    verdict = never_kept_out([*events, *kept_out("w0", 1, 5.0, 40.0)], ttl=TTL)
    assert not verdict.ok


def test_a_loss_noticed_late_by_another_process_excuses_it_until_its_records_expire() -> None:
    # w1, cut off from node 1 when it lost its data, grants with node 1's old
    # epoch in its view until the partition heals at 12 s: its records keep
    # node 1 suspect for 1.25 x max(ttl, 2 s) after that.
    events = [*cluster(), *busy_w0(), *fault("restart-node-empty", 4.9, 4.9, "1,"),
              Event(0.0, "w1", "hold", "lock", key="y", token="t1", value=1000),
              *fault("partition", 3.0, 12.0, "1,", "1,", ident=2)]  # fmt: skip
    assert never_kept_out([*events, *kept_out("w0", 1, 5.0, 16.0)], ttl=TTL).ok
    assert not never_kept_out([*events, *kept_out("w0", 1, 5.0, 30.0)], ttl=TTL).ok


def test_a_restart_with_its_data_costs_what_a_loss_does() -> None:
    # The client cannot tell what a restart from disk kept (docs/guarantees.md).
    events = [*cluster(), *busy_w0(), *fault("restart-node-whole", 4.9, 5.5, "1,")]
    assert never_kept_out([*events, *kept_out("w0", 1, 5.0, 8.0)], ttl=TTL).ok
    assert not never_kept_out([*events, *kept_out("w0", 1, 5.0, 20.0)], ttl=TTL).ok


def test_kept_out_while_nothing_needed_a_quorum_is_no_violation() -> None:
    events = [*cluster(), Event(0.0, "w0", "hold", "lock", key="x", token="t0", value=1000),
              *call("w0", "lock", "a", 20.0, 21.0), *kept_out("w0", 1, 5.0, 9.0)]  # fmt: skip
    assert never_kept_out(events, ttl=TTL).ok


# -- held_lock_kept ----------------------------------------------------------


def loss(held_on: str, at: float = 5.0, process: str = "w0") -> list[Event]:
    return [
        Event(1.0, process, "hold", "lock", key="d", token="T1", value=2000),
        Event(1.0, process, "ok", "acquire", key="d", token="T1"),
        Event(at, process, "lost", "acquire", key="d", token="T1", detail=f"held_on=({held_on})"),
    ]


def test_a_lock_lost_while_a_healthy_majority_held_it_is_a_violation() -> None:
    verdict = held_lock_kept([*cluster(), *loss("0, 1, 2")])
    assert not verdict.ok
    assert "w0 lost 'd'" in verdict.violations[0]


def test_a_lock_lost_when_its_majority_was_cut_off_is_no_violation() -> None:
    cut = fault("partition", 3.0, 5.0, "0,1,", "0,")
    assert held_lock_kept([*cluster(), *cut, *loss("0, 1, 2")]).ok


def test_a_lock_lost_when_only_a_minority_held_it_is_no_violation() -> None:
    assert held_lock_kept([*cluster(), *loss("2,")]).ok
    assert not held_lock_kept([*cluster(), *loss("1, 2")]).ok


def test_a_lock_lost_when_a_node_lost_its_data_is_no_violation() -> None:
    flushed = fault("flushall", 3.0, 3.0, "0,")
    assert held_lock_kept([*cluster(), *flushed, *loss("0, 1")]).ok


def test_a_lock_lost_by_a_closed_redlock_or_a_crash_is_no_violation() -> None:
    closed = Event(4.0, "w0", "aclose", "redlock")
    assert held_lock_kept([*cluster(), closed, *loss("0, 1, 2")]).ok
    crashed = Event(5.0, "w0", "lost", "acquire", key="d", token="T1", detail="crashed")
    assert held_lock_kept([*cluster(), crashed]).ok


# -- free_name_granted -------------------------------------------------------


def occupied(until: float) -> list[Event]:
    """w0 holds 'a' from 0.5 s; its release was confirmed at ``until``."""
    return [
        Event(0.5, "w0", "hold", "lock", key="a", token="T0", value=1000),
        Event(until, "w0", "free", "lock", key="a", token="T0", value=0),
    ]


def test_a_free_name_nobody_takes_is_a_violation() -> None:
    events = [*cluster(), *occupied(2.0), *call("w1", "lock", "a", 1.0, 6.0, "false", 5.0)]
    verdict = free_name_granted(events, retry=0.4, ttl=TTL)
    assert not verdict.ok
    assert "'a' was free for" in verdict.violations[0]


def test_a_free_name_taken_within_two_retries_is_no_violation() -> None:
    events = [*cluster(), *occupied(2.0), *call("w1", "lock", "a", 1.0, 2.9, "ok", 5.0)]
    assert free_name_granted(events, retry=0.4, ttl=TTL).ok


def test_a_rival_waiter_allows_split_votes_three_retries() -> None:
    # Free from 2.0 s; w1 gives up at 3.3 s: 1.3 s, past two retries (1.1 s).
    alone = [*cluster(), *occupied(2.0), *call("w1", "lock", "a", 1.0, 3.3, "false", 2.3)]
    assert not free_name_granted(alone, retry=0.4, ttl=TTL).ok
    # w2 wanted it too: their votes may split, each retrying after its
    # jittered delay; three retries (1.5 s) allowed, no more.
    rival = call("w2", "lock", "a", 1.5, 3.3, "false", 1.8, ident=2)
    assert free_name_granted([*alone, *rival], retry=0.4, ttl=TTL).ok
    late = [*cluster(), *occupied(2.0), *call("w1", "lock", "a", 1.0, 3.8, "false", 2.8), *rival]
    assert not free_name_granted(late, retry=0.4, ttl=TTL).ok


def test_a_waiter_without_a_healthy_majority_is_not_judged() -> None:
    cut = fault("blackhole", 1.5, 7.0, "0,1,", "1,")
    events = [*cluster(), *occupied(2.0), *cut, *call("w1", "lock", "a", 1.0, 6.0, "false", 5.0)]
    assert free_name_granted(events, retry=0.4, ttl=TTL).ok
    # A minority cut off leaves it a healthy majority: judged.
    cut = fault("blackhole", 1.5, 7.0, "0,", "1,")
    events = [*cluster(), *occupied(2.0), *cut, *call("w1", "lock", "a", 1.0, 6.0, "false", 5.0)]
    assert not free_name_granted(events, retry=0.4, ttl=TTL).ok


def test_the_fault_log_pairs_faults_with_their_heals_by_id() -> None:
    events = [*fault("pause-node", 1.0, 4.0, "0,", ident=1),
              *fault("pause-node", 2.0, 3.0, "1,", ident=2)]  # fmt: skip
    log = FaultLog(sorted(events, key=lambda e: e.time))
    assert [(f.start, f.end, f.nodes) for f in log.faults] == [(1.0, 4.0, (0,)), (2.0, 3.0, (1,))]
