"""The checkers on hand-made histories: clean ones pass, planted violations are named."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from .bounds import Intervals, calls, restart_out, unhealthy
from .checkers import (
    adopt_scope,
    call_bounds,
    cancel_safety,
    fencing_order,
    holder_told,
    liveness,
    mutual_exclusion,
    no_keys_left,
    no_lost_updates,
    prompt_grants,
    rw_exclusion,
    semaphore_limit,
    waits_only_for_its_names,
)
from .history import Event, History, dump, load, merge, stalls, windows


def grant(
    time: float,
    process: str,
    token: str,
    valid_until: float | None,
    *,
    key: str = "k",
    op: str = "acquire",
    fence: int | None = None,
) -> Event:
    return Event(time, process, "ok", op, key, token, fence=fence, valid_until=valid_until)


def release(time: float, process: str, token: str, *, key: str = "k") -> Event:
    return Event(time, process, "invoke", "release", key, token)


def invoke(time: float, process: str, op: str = "acquire", key: str = "k") -> Event:
    return Event(time, process, "invoke", op, key)


# -- history format ----------------------------------------------------------


def test_dump_load_round_trip(tmp_path: Path) -> None:
    events = [
        invoke(0.5, "w1"),
        grant(1.0, "w1", "t1", 2.5, fence=7),
        Event(1.2, "w1", "ok", "increment", "c", value=3, detail="under lock"),
        Event(1.3, "nemesis", "fault", "pause", detail="node2"),
    ]
    path = tmp_path / "w1.jsonl"
    dump(events, path)
    assert load(path) == events
    # Defaults stay out of the file: only what an event says is written.
    assert '"fence"' not in path.read_text().splitlines()[0]


def test_load_drops_a_torn_last_line_only(tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    dump([invoke(1.0, "w1"), invoke(2.0, "w1")], path)
    path.write_text(path.read_text() + '{"time": 3.0, "proc')
    assert [e.time for e in load(path)] == [1.0, 2.0]
    path.write_text('{"time": 1.0, "pro\n' + '{"time":2.0,"process":"w","kind":"ok","op":"x"}\n')
    with pytest.raises(ValueError, match=r"w\.jsonl:1:"):
        load(path)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"time": 1, "process": "w", "kind": "ok"}', "missing event fields"),
        ('{"time": 1, "process": "w", "kind": "ok", "op": "a", "colour": 1}', "unknown"),
        ('{"time": true, "process": "w", "kind": "ok", "op": "a"}', "time must be a number"),
        ('{"time": 1, "process": "w", "kind": "ok", "op": "a", "fence": 1.5}', "fence must be"),
        ("[1, 2]", "JSON object"),
    ],
)
def test_load_rejects_malformed_events(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(line + "\n" + line + "\n")
    with pytest.raises(ValueError, match=message):
        load(path)


def test_merge_orders_by_time_and_keeps_each_process_order(tmp_path: Path) -> None:
    w1 = [invoke(1.0, "w1"), grant(1.0, "w1", "a", 2.0), release(3.0, "w1", "a")]
    w2 = [invoke(0.5, "w2"), Event(2.0, "w2", "fail", "acquire", "k")]
    dump(w1, tmp_path / "w1.jsonl")
    dump(w2, tmp_path / "w2.jsonl")
    history = History.from_files([tmp_path / "w1.jsonl", tmp_path / "w2.jsonl"])
    assert [(e.time, e.process, e.kind) for e in history] == [
        (0.5, "w2", "invoke"),
        (1.0, "w1", "invoke"),
        (1.0, "w1", "ok"),
        (2.0, "w2", "fail"),
        (3.0, "w1", "invoke"),
    ]
    assert list(history) == merge([w1, w2])
    assert len(history) == 5
    assert history.keys() == ["k"]
    assert [e.kind for e in history.of(process="w2")] == ["invoke", "fail"]
    [window] = history.windows()
    assert (window.start, window.end, window.released) == (1.0, 2.0, True)


def test_windows_match_releases_by_token_then_by_process() -> None:
    found = windows(
        [
            grant(1.0, "w1", "a", 5.0),
            # Another process's release with a foreign token ends nothing.
            release(1.5, "w2", "a"),
            # A release naming no grant of this process leaves it open.
            release(2.0, "w1", "zzz"),
            grant(3.0, "w3", "", 9.0),
            release(4.0, "w3", ""),
        ]
    )
    assert [(w.process, w.start, w.end) for w in found] == [("w1", 1.0, 5.0), ("w3", 3.0, 4.0)]


def test_extend_moves_the_end_only_while_still_valid() -> None:
    extend = Event(1.5, "w1", "ok", "extend", "k", "a", valid_until=4.0)
    late = Event(5.0, "w2", "ok", "extend", "k", "b", valid_until=9.0)
    found = windows([grant(1.0, "w1", "a", 2.0), extend, grant(3.0, "w2", "b", 4.5), late])
    assert [(w.process, w.end) for w in found] == [("w1", 4.0), ("w2", 4.5)]


def test_an_extend_to_a_shorter_ttl_shortens_the_window() -> None:
    shorter = Event(1.5, "w1", "ok", "extend", "k", "a", valid_until=1.8)
    history = [grant(1.0, "w1", "a", 3.0), shorter, grant(2.0, "w2", "b", 4.0)]
    assert mutual_exclusion(history).ok


def test_lost_ends_the_window_and_worker_release_events_count() -> None:
    history = [
        grant(0.0, "w1", "a", 5.0),
        Event(1.0, "w1", "lost", "acquire", "k", "a"),
        grant(1.0, "w2", "b", 5.0),
        # The worker's form: kind "release", op naming what is released.
        Event(2.0, "w2", "release", "acquire", "k", "b"),
        grant(2.0, "w3", "c", 5.0),
    ]
    verdict = mutual_exclusion(history)
    assert verdict.ok, verdict
    assert verdict.counts["released"] == 2


# -- mutual exclusion --------------------------------------------------------


def test_mutual_exclusion_accepts_a_clean_history() -> None:
    history = [
        invoke(0.0, "w1"),
        grant(0.1, "w1", "a", 1.1),
        invoke(0.2, "w2"),
        release(0.9, "w1", "a"),
        grant(0.95, "w2", "b", 2.0),
        release(1.5, "w2", "b"),
        grant(0.5, "w3", "c", 1.5, key="other"),
    ]
    verdict = mutual_exclusion(history)
    assert verdict.ok, verdict
    assert verdict.counts == {"grants": 3, "keys": 2, "released": 2, "overlaps": 0}


def test_mutual_exclusion_catches_a_one_millisecond_overlap() -> None:
    verdict = mutual_exclusion([grant(0.0, "w1", "a", 1.0), grant(0.999, "w2", "b", 2.0)])
    assert not verdict.ok
    [violation] = verdict.violations
    assert "key 'k'" in violation
    assert "w1" in violation
    assert "w2" in violation
    assert "by 1.000 ms" in violation


def test_touching_windows_are_a_hand_over() -> None:
    assert mutual_exclusion([grant(0.0, "w1", "a", 1.0), grant(1.0, "w2", "b", 2.0)]).ok


def test_release_before_validity_end_shortens_the_window() -> None:
    early = [grant(0.0, "w1", "a", 10.0), release(1.0, "w1", "a"), grant(1.0, "w2", "b", 5.0)]
    assert mutual_exclusion(early).ok
    # The same grants without the release overlap by the rest of the validity.
    verdict = mutual_exclusion([early[0], early[2]])
    assert not verdict.ok
    assert "by 4000.000 ms" in verdict.violations[0]


def test_a_release_after_validity_end_does_not_lengthen_the_window() -> None:
    late = [grant(0.0, "w1", "a", 1.0), grant(1.0, "w2", "b", 2.0), release(1.8, "w1", "a")]
    assert mutual_exclusion(late).ok


def test_unknown_and_failed_outcomes_grant_nothing() -> None:
    history = [
        grant(0.0, "w1", "a", 1.0),
        Event(0.5, "w2", "unknown", "acquire", "k", "b", detail="timeout"),
        Event(0.6, "w3", "fail", "acquire", "k", "c"),
        Event(0.7, "w2", "unknown", "release", "k", "b"),
    ]
    verdict = mutual_exclusion(history)
    assert verdict.ok, verdict
    assert verdict.counts["grants"] == 1


def test_a_grant_without_validity_or_release_holds_forever() -> None:
    verdict = mutual_exclusion([grant(0.0, "w1", "a", None), grant(100.0, "w2", "b", 101.0)])
    assert not verdict.ok
    assert "inf" in verdict.violations[0]


def test_mutual_exclusion_catches_every_pair() -> None:
    verdict = mutual_exclusion(
        [grant(0.0, "w1", "a", 3.0), grant(1.0, "w2", "b", 4.0), grant(2.0, "w3", "c", 5.0)]
    )
    assert verdict.counts["overlaps"] == 3


# -- reader/writer exclusion -------------------------------------------------


def rgrant(time: float, process: str, token: str, valid_until: float) -> Event:
    return grant(time, process, token, valid_until, op="read-acquire")


def wgrant(time: float, process: str, token: str, valid_until: float) -> Event:
    return grant(time, process, token, valid_until, op="write-acquire")


def test_rw_exclusion_lets_readers_share() -> None:
    history = [
        rgrant(0.0, "r1", "a", 2.0),
        rgrant(0.5, "r2", "b", 3.0),
        Event(1.0, "r1", "invoke", "read-release", "k", "a"),
        wgrant(3.0, "w1", "c", 4.0),
        Event(3.5, "w1", "invoke", "write-release", "k", "c"),
        rgrant(3.5, "r1", "d", 5.0),
    ]
    verdict = rw_exclusion(history)
    assert verdict.ok, verdict
    assert verdict.counts == {"readers": 3, "writers": 1, "overlaps": 0}


def test_rw_exclusion_catches_a_writer_overlapping_a_reader() -> None:
    verdict = rw_exclusion([rgrant(0.0, "r1", "a", 2.0), wgrant(1.5, "w1", "b", 3.0)])
    assert not verdict.ok
    [violation] = verdict.violations
    assert "r1 (read-acquire" in violation
    assert "w1 (write-acquire" in violation
    assert "by 500.000 ms" in violation


def test_rw_exclusion_catches_two_writers() -> None:
    verdict = rw_exclusion([wgrant(0.0, "w1", "a", 2.0), wgrant(1.0, "w2", "b", 3.0)])
    assert verdict.counts["overlaps"] == 1


def test_rw_exclusion_ignores_plain_mutex_grants() -> None:
    assert rw_exclusion([grant(0.0, "w1", "a", 2.0), wgrant(1.0, "w2", "b", 3.0)]).ok


# -- semaphore limit -----------------------------------------------------------


def sgrant(time: float, process: str, token: str, valid_until: float | None) -> Event:
    return grant(time, process, token, valid_until, op="sem-acquire")


def test_semaphore_limit_lets_limit_holders_share_and_hand_over() -> None:
    history = [
        sgrant(0.0, "w1", "a", 2.0),
        sgrant(0.5, "w2", "b", 3.0),
        release(1.0, "w1", "a"),
        sgrant(1.0, "w3", "c", 4.0),  # takes the slot a hands over, at the same instant
        sgrant(3.0, "w1", "d", 5.0),  # b's validity ended at 3.0
        sgrant(2.0, "w4", "e", 1.5),  # valid for nothing: an empty window holds nothing
    ]
    verdict = semaphore_limit(history, limit=2)
    assert verdict.ok, verdict
    assert verdict.counts == {"grants": 5, "most_at_once": 2, "excess": 0}


def test_semaphore_limit_catches_a_third_holder_on_other_majorities() -> None:
    # {A,B}, {B,C}, {A,C}: what per-node counting admits under a limit of two.
    history = [
        sgrant(0.0, "w1", "a", 5.0),
        sgrant(1.0, "w2", "b", 5.0),
        sgrant(2.0, "w3", "c", 3.0),
        sgrant(4.0, "w4", "d", 6.0),  # a third again (w3's window has ended)
    ]
    verdict = semaphore_limit(history, limit=2)
    assert not verdict.ok
    assert verdict.counts == {"grants": 4, "most_at_once": 3, "excess": 2}
    assert "w3 (sem-acquire token 'c')" in verdict.violations[0]
    assert "holder 3 of a limit of 2" in verdict.violations[0]
    assert "w1 (sem-acquire" in verdict.violations[0]
    assert "w2 (sem-acquire" in verdict.violations[0]
    assert semaphore_limit(history, limit=3).ok


def test_semaphore_limit_counts_per_key_and_only_semaphore_grants() -> None:
    history = [
        sgrant(0.0, "w1", "a", 5.0),
        grant(0.0, "w2", "b", 5.0),  # a plain lock grant: not a semaphore holder
        Event(1.0, "w3", "ok", "sem-acquire", "other", "c", valid_until=5.0),
    ]
    assert semaphore_limit(history, limit=1).ok


# -- lost updates ------------------------------------------------------------


def increment(time: float, process: str, value: int, kind: str = "ok") -> Event:
    return Event(time, process, kind, "increment", "c", value=value)


def final_read(time: float, value: int) -> Event:
    return Event(time, "checker", "read", "read", "c", value=value)


def test_no_lost_updates_accepts_a_clean_counter() -> None:
    history = [increment(1.0, "w1", 1), increment(2.0, "w2", 2), increment(3.0, "w1", 3)]
    verdict = no_lost_updates([*history, final_read(4.0, 3)])
    assert verdict.ok, verdict
    assert verdict.counts == {"increments": 3, "unknown": 0, "keys": 1}


def test_no_lost_updates_catches_a_lost_update() -> None:
    # w2 read 1 before w1's write landed, wrote 2 over it... and then a
    # third increment raced too: final 2 after three successful increments.
    history = [increment(1.0, "w1", 1), increment(2.0, "w2", 2), increment(2.5, "w3", 3)]
    verdict = no_lost_updates([*history, final_read(4.0, 2)])
    assert not verdict.ok
    assert any(
        "final value 2" in v and "3 increments" in v and "lost" in v for v in verdict.violations
    )
    assert any("wrote 3" in v and "outside 1..2" in v for v in verdict.violations)


def test_no_lost_updates_catches_a_duplicate_write() -> None:
    history = [increment(1.0, "w1", 1), increment(2.0, "w2", 2), increment(2.1, "w3", 2)]
    verdict = no_lost_updates([*history, final_read(3.0, 2)])
    assert not verdict.ok
    assert any(
        "value 2 written 2 times" in v and "w2" in v and "w3" in v for v in verdict.violations
    )


def test_no_lost_updates_allows_for_increments_of_unknown_outcome() -> None:
    history = [increment(1.0, "w1", 1), increment(2.0, "w2", 0, kind="unknown")]
    assert no_lost_updates([*history, final_read(3.0, 1)]).ok
    assert no_lost_updates([*history, final_read(3.0, 2)]).ok
    verdict = no_lost_updates([*history, final_read(3.0, 3)])
    assert not verdict.ok
    assert "1..2 increments" in verdict.violations[0]
    assert "phantom" in verdict.violations[0]


def test_no_lost_updates_needs_a_final_read() -> None:
    verdict = no_lost_updates([increment(1.0, "w1", 1)])
    assert not verdict.ok
    assert "no final read" in verdict.violations[0]


# -- fencing -----------------------------------------------------------------


def fenced_write(time: float, process: str, fence: int, accepted: bool) -> Event:
    return Event(time, process, "ok" if accepted else "fail", "fenced-write", "k", fence=fence)


def test_fencing_order_accepts_a_clean_history() -> None:
    history = [
        grant(0.0, "w1", "a", 1.0, fence=1),
        fenced_write(0.5, "w1", 1, True),
        grant(1.0, "w2", "b", 2.0, fence=2),
        fenced_write(1.5, "w2", 2, True),
        # w1 paused past its validity: its late write is rejected, as it should be.
        fenced_write(1.6, "w1", 1, False),
        fenced_write(1.7, "w2", 2, True),
    ]
    verdict = fencing_order(history)
    assert verdict.ok, verdict
    assert verdict.counts == {
        "fenced_grants": 2,
        "writes_accepted": 3,
        "writes_rejected": 1,
        "stale_rejected": 1,
    }


def test_fencing_order_catches_a_decreasing_fence() -> None:
    verdict = fencing_order(
        [grant(0.0, "w1", "a", 1.0, fence=5), grant(1.0, "w2", "b", 2.0, fence=4)]
    )
    assert not verdict.ok
    [violation] = verdict.violations
    assert "fence 4" in violation
    assert "fence 5" in violation
    assert "not greater" in violation


def test_fencing_order_does_not_order_concurrent_grants() -> None:
    # Overlapping windows are mutual_exclusion's business, not this checker's.
    assert fencing_order(
        [grant(0.0, "w1", "a", 2.0, fence=5), grant(1.0, "w2", "b", 3.0, fence=4)]
    ).ok


def test_fencing_order_catches_a_duplicate_fence() -> None:
    history = [grant(0.0, "w1", "a", 1.0, fence=3), grant(5.0, "w2", "b", 6.0, fence=3)]
    verdict = fencing_order(history)
    assert not verdict.ok
    assert any("fence 3 given twice" in v for v in verdict.violations)


def test_fencing_order_catches_a_stale_write_accepted() -> None:
    history = [fenced_write(1.0, "w2", 2, True), fenced_write(2.0, "w1", 1, True)]
    verdict = fencing_order(history)
    assert not verdict.ok
    [violation] = verdict.violations
    assert "stale write accepted: fence 1 from w1" in violation
    assert "after fence 2 from w2" in violation


def test_fencing_keys_are_independent() -> None:
    history = [
        grant(0.0, "w1", "a", 1.0, fence=9, key="x"),
        grant(2.0, "w2", "b", 3.0, fence=1, key="y"),
        Event(2.5, "w2", "ok", "fenced-write", "y", fence=1),
    ]
    assert fencing_order(history).ok


# -- liveness ----------------------------------------------------------------


def attempt(time: float, process: str, kind: str) -> Event:
    return Event(time, process, kind, "acquire", "k")


def test_liveness_reports_rates_and_recovery() -> None:
    history = [
        attempt(0.5, "w1", "ok"),
        attempt(0.7, "w2", "fail"),
        attempt(0.8, "w1", "ok"),
        Event(1.0, "nemesis", "fault", "partition"),
        attempt(1.5, "w1", "fail"),
        attempt(1.7, "w2", "unknown"),
        Event(2.0, "nemesis", "heal", "partition"),
        attempt(2.1, "w1", "fail"),
        attempt(2.4, "w2", "ok"),
        attempt(2.6, "w1", "ok"),
    ]
    phases = [("healthy", 0.0, 1.0), ("faulty", 1.0, 2.0), ("healthy-after", 2.0, 3.0)]
    verdict = liveness(history, phases, max_recovery=1.0)
    assert verdict.ok, verdict
    assert verdict.counts["healthy.attempts"] == 3
    assert verdict.counts["healthy.ok"] == 2
    assert verdict.counts["faulty.ok"] == 0
    assert verdict.counts["heals"] == 1
    assert verdict.figures["faulty.success_rate"] == 0.0
    assert verdict.figures["healthy-after.success_rate"] == pytest.approx(2 / 3)
    assert verdict.figures["heal0.recovery"] == pytest.approx(0.4)
    assert verdict.figures["max_recovery"] == pytest.approx(0.4)


def test_liveness_fails_a_starved_healthy_phase() -> None:
    history = [attempt(0.1, "w1", "fail"), attempt(0.2, "w2", "fail"), attempt(0.3, "w1", "ok")]
    verdict = liveness(history, [("healthy", 0.0, 1.0), ("healthy-idle", 1.0, 2.0)])
    assert not verdict.ok
    assert "'healthy'" in verdict.violations[0]
    assert "1/3" in verdict.violations[0]
    assert "'healthy-idle'" in verdict.violations[1]
    assert "no attempt completed" in verdict.violations[1]
    # A fault phase may starve: that is what faults do.
    assert liveness(history, [("partition", 0.0, 1.0)]).ok


def test_liveness_fails_a_slow_or_missing_recovery() -> None:
    slow = [
        Event(1.0, "nemesis", "heal", "kill"),
        attempt(1.5, "w1", "fail"),
        attempt(4.0, "w1", "ok"),
    ]
    verdict = liveness(slow, [], max_recovery=2.0)
    assert not verdict.ok
    assert "took 3.000 s, over the bound of 2.000 s" in verdict.violations[0]
    never = slow[:2]
    verdict = liveness(never, [])
    assert not verdict.ok
    assert "no acquire succeeded after the heal at 1.000" in verdict.violations[0]
    assert math.isinf(verdict.figures["max_recovery"])
    # A heal at the very end, with nothing tried afterwards, proves nothing either way.
    assert liveness(slow[:1], []).ok


# -- loss notice (run.py) ----------------------------------------------------


def test_loss_notice_names_a_holder_that_claims_on_after_a_jump() -> None:
    from .run import loss_notice

    jump = Event(10.0, "nemesis", "fault", "expiry-jump")
    # Held for 2 s before the jump, told only 3 s after it (bound: 1.0 s at ttl 1).
    late = [grant(8.0, "w1", "a", 20.0), jump, Event(13.0, "w1", "lost", "acquire", "k", "a")]
    assert not loss_notice(late, ttl=1.0).ok
    # Told 0.4 s after it: in time.
    prompt = [grant(8.0, "w1", "a", 20.0), jump, Event(10.4, "w1", "lost", "acquire", "k", "a")]
    assert loss_notice(prompt, ttl=1.0).ok


def test_loss_notice_ignores_grants_made_as_the_jump_began() -> None:
    from .run import loss_notice

    # Granted 10 ms before the jump was stamped: its slower nodes may have
    # been written after the jump passed them, so a majority still holds it.
    racing = [
        grant(9.99, "w1", "a", 20.0),
        Event(10.0, "nemesis", "fault", "expiry-jump"),
        release(13.0, "w1", "a"),
    ]
    assert loss_notice(racing, ttl=1.0).ok


# -- keys left, holders told, cancellations (issue 14's findings) -----------


def left(time: float, key: str, token: str, node: int = 0) -> Event:
    return Event(time, "nemesis", "key", "left", key, token, detail=f"node {node} pttl 900 ms")


def test_no_keys_left_passes_when_none_is_left() -> None:
    history = [grant(1.0, "w1", "a", 2.0), Event(1.5, "w1", "release", "acquire", "k", "a")]
    history.append(Event(3.0, "nemesis", "keys", "left", value=0, detail="per node [0, 0, 0]"))
    verdict = no_keys_left(history)
    assert verdict.ok, verdict
    assert verdict.counts["keys_left"] == 0


def test_no_keys_left_traces_each_key_to_its_grant_and_release() -> None:
    history = [
        grant(1.0, "w1", "aaaa", 2.0),
        Event(1.5, "w1", "release", "acquire", "k", "aaaa"),
        Event(1.6, "w1", "fail", "release", "k", "aaaa", detail="LockNotOwned"),
        Event(3.0, "nemesis", "keys", "left", value=2, detail="per node [1, 1, 0]"),
        left(3.0, "redlock:{k}", "aaaa", node=0),
        left(3.0, "redlock:{k}", "zzzz", node=1),
        Event(0.5, "w2", "attempts", "acquire", "k", detail="r1 r2"),
        left(3.0, "redlock:{k}", "r2", node=2),
    ]
    verdict = no_keys_left(history)
    assert not verdict.ok
    first, second, third = verdict.violations
    assert "refused or rolled back in an acquire by w2 that ended at 0.500" in third
    assert "node 0" in first
    assert "granted to w1 at 1.000" in first
    assert "released at 1.500" in first
    assert "release failed (LockNotOwned) at 1.600" in first
    assert "no grant or cancelled acquire" in second


def test_no_keys_left_falls_back_to_the_count() -> None:
    history = [Event(3.0, "nemesis", "keys", "left", value=3, detail="per node [3, 0]")]
    verdict = no_keys_left(history)
    assert not verdict.ok
    assert verdict.violations == ["3 lock keys left: per node [3, 0]"]


def test_no_keys_left_counts_the_keys_it_did_not_list() -> None:
    # A release burst's dropped releases: thousands of keys, a few listed per node.
    history = [
        Event(3.0, "nemesis", "keys", "left", value=6465, detail="per node [0, 0, 0, 0, 6465]"),
        left(3.0, "redlock:{burst-release:7}", "t7", node=4),
        left(3.0, "redlock:{burst-release:9}", "t9", node=4),
    ]
    verdict = no_keys_left(history)
    assert not verdict.ok
    assert verdict.counts["keys_left"] == 6465
    assert verdict.violations[-1] == ("... 6465 lock keys left in all: per node [0, 0, 0, 0, 6465]")


def test_cancel_safety_names_a_key_left_by_a_cancelled_acquire() -> None:
    history = [
        Event(1.0, "w2", "cancel", "acquire", "k", detail="t1 t2"),
        grant(1.2, "w1", "t3", 2.0),
        Event(1.3, "w1", "release", "acquire", "k", "t3"),
        left(3.0, "redlock:{k}", "t2", node=4),
        left(3.0, "redlock:{k}", "t3", node=1),  # not from a cancelled call: no_keys_left's
    ]
    verdict = cancel_safety(history)
    assert not verdict.ok
    [violation] = verdict.violations
    assert "node 4" in violation
    assert "w2's acquire cancelled at 1.000" in violation
    assert verdict.counts["cancelled_acquires"] == 1
    assert "cancelled acquire by w2" not in no_keys_left(history).violations[1]
    assert "an acquire by w2 cancelled at 1.000" in no_keys_left(history).violations[0]


def test_cancel_safety_names_a_lock_renewed_after_its_release_was_cancelled() -> None:
    history = [
        grant(1.0, "w1", "t1", None),
        Event(1.5, "w1", "release", "acquire", "k", "t1"),
        Event(1.501, "w1", "cancel", "release", "k", "t1"),
        Event(9.0, "w1", "held", "abandoned", "k", "t1", detail="cancelled at 1.501"),
    ]
    verdict = cancel_safety(history)
    assert not verdict.ok
    assert "still held at 9.000" in verdict.violations[0]
    assert verdict.counts == {
        "cancelled": 1,
        "cancelled_acquires": 0,
        "cancelled_releases": 1,
        "still_held": 1,
    }
    # Cancelled calls that left nothing behind are fine.
    assert cancel_safety(history[:3]).ok


def test_holder_told_accepts_a_holder_told_within_the_bound() -> None:
    history = [
        grant(1.0, "w1", "a", None),
        Event(1.2, "w1", "aclose", "redlock"),
        Event(1.6, "w1", "lost", "acquire", "k", "a"),
        grant(1.1, "w2", "b", None, key="other"),  # another worker's grant: not its close
        Event(5.0, "w2", "release", "acquire", "other", "b"),
        Event(6.0, "w1", "done", "worker", value=0),
    ]
    verdict = holder_told(history, bound=0.8)
    assert verdict.ok, verdict
    assert verdict.counts == {"grants": 2, "acloses": 1, "late": 0}


def test_holder_told_names_a_body_running_on_after_aclose() -> None:
    history = [
        grant(1.0, "w1", "a", None),
        Event(1.2, "w1", "aclose", "redlock"),
        Event(1.9, "w1", "aclose", "redlock"),  # a second close: the same window, once
        Event(3.5, "w1", "release", "acquire", "k", "a"),
    ]
    verdict = holder_told(history, bound=0.8)
    assert not verdict.ok
    [violation] = verdict.violations
    assert "still claimed 2.30s after its Redlock was closed at 1.200" in violation


def test_holder_told_names_a_grant_that_never_ended() -> None:
    history = [grant(1.0, "w1", "a", None), Event(6.0, "w1", "done", "worker", value=0)]
    verdict = holder_told(history, bound=0.8)
    assert not verdict.ok
    assert "never ended" in verdict.violations[0]
    # A grant with a claimed validity end needs no notice: it ends by itself.
    assert holder_told([grant(1.0, "w1", "a", 2.0), history[1]], bound=0.8).ok


# -- liveness: bounds on calls and on waits (issue 24) ----------------------


def call(time: float, process: str, ident: int, op: str, res: str, timeout: float) -> Event:
    return Event(time, process, "call", op, res, value=ident, detail=f"T={timeout:g}")


def returned(time: float, process: str, ident: int, op: str, res: str, how: str = "ok") -> Event:
    return Event(time, process, "return", op, res, value=ident, detail=how)


def hold(time: float, process: str, token: str, kind: str, res: str, limit: int = 0) -> Event:
    detail = f"limit={limit}" if limit else ""
    return Event(time, process, "hold", kind, res, token, value=1000, detail=detail)


def free(time: float, process: str, token: str, kind: str, res: str, ms: int = 0) -> Event:
    return Event(time, process, "free", kind, res, token, value=ms)


def test_calls_pair_by_process_and_id_and_keep_the_unreturned() -> None:
    found = calls(
        [
            call(1.0, "w1", 1, "lock", "a", 2.0),
            call(1.0, "w2", 1, "multi", "a,c", math.inf),
            returned(1.5, "w1", 1, "lock", "a", "false"),
            Event(4.0, "w2", "done", "worker"),
        ]
    )
    first, second = found
    assert (first.process, first.timeout, first.end, first.outcome) == ("w1", 2.0, 1.5, "false")
    assert second.names == ("a", "c")
    assert (second.timeout, second.end, second.outcome) == (math.inf, 4.0, "never returned")


def test_intervals_merge_cut_and_measure() -> None:
    spans = Intervals([(3.0, 4.0), (1.0, 2.0), (1.5, 2.5), (5.0, 5.0)])
    assert spans.spans == [(1.0, 2.5), (3.0, 4.0)]
    assert spans.within(2.0, 3.5) == [(2.0, 2.5), (3.0, 3.5)]
    assert spans.covered(0.0, 10.0) == pytest.approx(2.5)
    assert spans.covered(2.0, 3.5) == pytest.approx(1.0)


def test_unhealthy_reads_which_workers_a_fault_reaches() -> None:
    faults = unhealthy(
        [
            Event(1.0, "nemesis", "fault", "delay", detail="nodes=(0, 1) workers=(3,)"),
            Event(2.0, "nemesis", "fault", "pause-node", detail="nodes=(0,) workers=()"),
            Event(3.0, "nemesis", "heal", "delay"),
            Event(4.0, "nemesis", "heal", "pause-node"),
        ],
        after_heal=1.0,
    )
    assert faults["w3"].spans == [(1.0, 4.0)]
    assert faults[None].spans == [(2.0, 5.0)]
    assert "w1" not in faults


def test_call_bounds_accepts_calls_within_their_bounds() -> None:
    history = [
        call(1.0, "w1", 1, "lock", "a", 2.0),
        returned(3.5, "w1", 1, "lock", "a", "false"),  # T + 0.5 of nt + slack: 0.55
        call(4.0, "w1", 2, "lock", "b", 0.0),
        returned(4.6, "w1", 2, "lock", "b"),  # blocking=False: 0.6 of 2 V + nt + slack
        call(5.0, "w1", 3, "sem", "s", math.inf),
        returned(60.0, "w1", 3, "sem", "s"),  # no timeout: no bound
    ]
    verdict = call_bounds(history, node_timeout=0.05)
    assert verdict.ok, verdict
    assert verdict.counts == {"calls": 3, "bounded": 2, "over": 0}


def test_call_bounds_names_a_call_that_waited_past_its_bound() -> None:
    # acquire(timeout=0.5) that took seconds: a vote kept pending, a queue
    # that ignored its deadline.
    history = [
        call(1.0, "w3", 7, "lock", "x:1", 0.5),
        returned(3.2, "w3", 7, "lock", "x:1", "false"),
        call(1.0, "w3", 8, "release", "v:2", 0.0),
        Event(9.0, "w3", "done", "worker"),
    ]
    verdict = call_bounds(history, node_timeout=0.05)
    assert not verdict.ok
    worst, other = verdict.violations  # the furthest over its bound first
    assert "w3 release 'v:2' (T=0) [1.000, 9.000] took 8.000 s (never returned)" in worst
    assert other.startswith("w3 lock 'x:1' (T=0.5) [1.000, 3.200] took 2.200 s (false)")
    assert "over its bound 1.050 s" in other
    assert verdict.figures == {"worst_over_timeout_s": 8.0}


def granted_before(process: str) -> list[Event]:
    """A grant of ``process`` at its start: its Redlock has read the nodes' epochs."""
    return [call(0.0, process, 0, "lock", "warm", 1.0), returned(0.1, process, 0, "lock", "warm")]


def test_call_bounds_allows_for_its_own_loop_stalls() -> None:
    late = [*granted_before("w1"), call(1.0, "w1", 1, "lock", "a", 0.0),
            returned(3.0, "w1", 1, "lock", "a")]  # fmt: skip
    assert not call_bounds(late, node_timeout=0.05).ok
    # The process's loop ran 400 ms late meanwhile: the harness, not the lock.
    stalled = [*late, Event(1.8, "w1", "lag", "loop", value=400)]
    assert call_bounds(stalled, node_timeout=0.05).ok
    # Another process's stalls are no excuse.
    elsewhere = [*late, Event(1.8, "w2", "lag", "loop", value=400)]
    assert not call_bounds(elsewhere, node_timeout=0.05).ok


def test_prompt_grants_accepts_a_waiter_that_takes_a_freed_lock() -> None:
    history = [
        hold(0.5, "w2", "t1", "lock", "b"),
        call(1.0, "w1", 1, "lock", "b", 3.0),
        free(2.0, "w2", "t1", "lock", "b"),  # confirmed gone
        hold(2.01, "w1", "t2", "lock", "b"),
        returned(2.01, "w1", 1, "lock", "b"),
    ]
    verdict = prompt_grants(history, retry=0.4)
    assert verdict.ok, verdict
    assert verdict.counts == {"waiters": 1, "idle_waits": 0}


def test_prompt_grants_counts_a_lock_a_crash_cut_short_as_held_for_its_ttl() -> None:
    # w1 crashes in an acquire of "f" (ttl 1 s, as its grants show): the nodes
    # may have granted it, so "f" is not free before 1.1 + 1 s (sim seed 10012).
    history = [
        hold(0.5, "w1", "t1", "lock", "f"),
        free(0.6, "w1", "t1", "lock", "f"),
        call(1.0, "w1", 1, "lock", "f", 3.0),
        returned(1.1, "w1", 1, "lock", "f", "crashed"),
        call(1.2, "w2", 1, "lock", "f", 3.0),
        hold(2.3, "w2", "t2", "lock", "f"),
        returned(2.3, "w2", 1, "lock", "f"),
    ]
    assert prompt_grants(history, retry=0.4).ok
    # Had the acquire returned false, "f" was free from 1.2 on: 1.1 s untaken.
    refused = [*history[:3], returned(1.1, "w1", 1, "lock", "f", "false"), *history[4:]]
    verdict = prompt_grants(refused, retry=0.4)
    assert not verdict.ok
    assert "free for 1.100 s of its wait, [1.200, 2.300]" in verdict.violations[0]


def test_prompt_grants_counts_a_crashed_acquire_from_when_a_slow_node_caught_up() -> None:
    # w1 crashes in an acquire of "f" at 1.1 while node 0 is slow until 5.0:
    # its command ran there only then, so its key may live to 6.0 (ttl 1 s),
    # not 2.1 (sim seed 3901: a 14 s slow majority, a 10 s ttl).
    history = [
        hold(0.5, "w1", "t1", "lock", "f"),
        free(0.6, "w1", "t1", "lock", "f"),
        Event(0.9, "nemesis", "fault", "slow-node", detail="id=4 nodes=(0,) workers=()"),
        call(1.0, "w1", 1, "lock", "f", 3.0),
        returned(1.1, "w1", 1, "lock", "f", "crashed"),
        Event(5.0, "nemesis", "heal", "slow-node", detail="id=4 nodes=(0,) workers=()"),
        call(6.5, "w2", 1, "lock", "f", 3.0),  # not ill: after_heal 1 s
        hold(6.55, "w2", "t2", "lock", "f"),
        returned(6.55, "w2", 1, "lock", "f"),
        call(5.3, "w3", 1, "lock", "f", 1.0),
        hold(6.25, "w3", "t3", "lock", "f"),
        returned(6.25, "w3", 1, "lock", "f"),
        free(6.3, "w3", "t3", "lock", "f"),
    ]
    history.sort(key=lambda e: e.time)
    assert prompt_grants(history, retry=0.4, after_heal=0.0).ok
    # Without the slow node, "f" was free from 2.3: w3 waited 0.95 s for nothing.
    quick = [e for e in history if e.process != "nemesis"]
    verdict = prompt_grants(quick, retry=0.4, after_heal=0.0)
    assert not verdict.ok
    assert "w3 lock 'f'" in verdict.violations[0]


def test_prompt_grants_counts_a_failed_acquire_whose_process_crashed_behind_a_slow_node() -> None:
    # w1's acquire of "f" fails at 1.1 while node 0 is slow until 5.0; its
    # undo waits for node 0 to answer, and w1 crashes at 2.0: the acquire
    # runs at 5.0 and nothing removes its key, which may live to 6.0 (sim
    # seed 10017: a failed attempt 13 s behind a slow majority's backlog).
    history = [
        hold(0.5, "w1", "t1", "lock", "f"),
        free(0.6, "w1", "t1", "lock", "f"),
        Event(0.9, "nemesis", "fault", "slow-node", detail="id=4 nodes=(0,) workers=()"),
        call(1.0, "w1", 1, "lock", "f", 3.0),
        returned(1.1, "w1", 1, "lock", "f", "false"),
        Event(2.0, "nemesis", "fault", "crash-process", detail="id=5 nodes=() workers=(1,)"),
        Event(5.0, "nemesis", "heal", "slow-node", detail="id=4 nodes=(0,) workers=()"),
        call(5.3, "w3", 1, "lock", "f", 1.0),
        hold(6.25, "w3", "t3", "lock", "f"),
        returned(6.25, "w3", 1, "lock", "f"),
        free(6.3, "w3", "t3", "lock", "f"),
    ]
    history.sort(key=lambda e: e.time)
    assert prompt_grants(history, retry=0.4, after_heal=0.0).ok
    # Had w1 lived, its undo followed the acquire there: "f" free from 5.3.
    lived = [e for e in history if e.op != "crash-process"]
    verdict = prompt_grants(lived, retry=0.4, after_heal=0.0)
    assert not verdict.ok
    assert "w3 lock 'f'" in verdict.violations[0]


def test_prompt_grants_keeps_readers_out_while_a_crashed_writers_wait_marker_lives() -> None:
    # w0 crashes waiting to write "r" (readers held it): its wait marker keeps
    # new readers out for three retry delays after its last attempt, 1.2 s
    # here (sim seed 10034); w1's read is granted at 2.3.
    history = [
        call(1.0, "w0", 1, "write", "r", 3.0),
        returned(1.1, "w0", 1, "write", "r", "crashed"),
        call(1.2, "w1", 1, "read", "r", 3.0),
        hold(2.3, "w1", "t2", "read", "r"),
        returned(2.3, "w1", 1, "read", "r"),
    ]
    assert prompt_grants(history, retry=0.4).ok
    # Had the write returned false (its marker deleted), "r" was free from 1.2.
    refused = [history[0], returned(1.1, "w0", 1, "write", "r", "false"), *history[2:]]
    verdict = prompt_grants(refused, retry=0.4)
    assert not verdict.ok
    assert "free for 1.100 s of its wait, [1.200, 2.300]" in verdict.violations[0]


def test_prompt_grants_holds_a_writer_back_only_by_readers_in_before_its_flag() -> None:
    # w1 waits to write "r" from 1.0. The reader inside then (to 1.3), and one
    # let in before its first attempt could raise its flag (1.2, within one
    # retry delay), hold it back; readers let in later the nodes must turn
    # away (docs/rwlock.md): from 1.5 on it waited for nothing.
    history = [
        hold(0.5, "w0", "t1", "read", "r"),
        call(1.0, "w1", 1, "write", "r", 3.0),
        hold(1.2, "w0", "t2", "read", "r"),
        free(1.3, "w0", "t1", "read", "r"),
        free(1.5, "w0", "t2", "read", "r"),
        hold(1.6, "w0", "t3", "read", "r"),
        hold(2.3, "w0", "t4", "read", "r"),
        free(2.4, "w0", "t3", "read", "r"),
        returned(4.0, "w1", 1, "write", "r", "false"),
        free(4.0, "w0", "t4", "read", "r"),
    ]
    verdict = prompt_grants(history, retry=0.4)
    assert not verdict.ok
    assert "free for 2.500 s of its wait, [1.500, 4.000]" in verdict.violations[0]
    # Cut off from a majority for [1.7, 1.9] (its flag may lapse): the reader
    # let in at 2.3, before its next attempt after that (and the checker's
    # second after a heal), holds it back to the end; no violation.
    cut = Event(1.7, "nemesis", "fault", "partition", detail="id=1 nodes=(0,1,) workers=(1,)")
    healed = Event(1.9, "nemesis", "heal", "partition", detail="id=1 nodes=(0,1,) workers=(1,)")
    verdict = prompt_grants(sorted([*history, cut, healed], key=lambda e: e.time), retry=0.4)
    assert verdict.ok, verdict


def test_prompt_grants_names_a_semaphore_slot_left_free_while_waiters_wait() -> None:
    # Limit 2, both slots freed at 2.0; the line's first waiter takes one at
    # once, the second only after 1.2 s: one retry delay per waiter.
    history = [
        hold(0.5, "w0", "s1", "sem", "s", limit=2),
        hold(0.5, "w0", "s2", "sem", "s", limit=2),
        call(1.0, "w0", 1, "sem", "s", 3.0),
        call(1.0, "w0", 2, "sem", "s", 3.0),
        free(2.0, "w0", "s1", "sem", "s"),
        free(2.0, "w0", "s2", "sem", "s"),
        hold(2.01, "w0", "s3", "sem", "s", limit=2),
        returned(2.01, "w0", 1, "sem", "s"),
        hold(3.2, "w0", "s4", "sem", "s", limit=2),
        returned(3.2, "w0", 2, "sem", "s"),
    ]
    verdict = prompt_grants(history, retry=0.4)
    assert not verdict.ok
    [violation] = verdict.violations
    assert violation.startswith("w0 sem 's' (T=3) [1.000, 3.200] (ok)")
    assert "free for 1.200 s of its wait, [2.000, 3.200]" in violation
    assert "no rival waiter (bound 0.700 s" in violation


def test_prompt_grants_holds_a_semaphore_full_from_when_it_filled() -> None:
    # Limit 2, full from 0.5; a third grant at 1.0 (a lost holder's keys still
    # count) does not move when it filled: no slot was free while w0 waited.
    history = [
        hold(0.5, "w0", "s1", "sem", "s", limit=2),
        hold(0.5, "w0", "s2", "sem", "s", limit=2),
        call(0.6, "w0", 1, "sem", "s", 3.0),
        hold(1.8, "w1", "s3", "sem", "s", limit=2),
        free(3.0, "w0", "s1", "sem", "s"),
        returned(3.6, "w0", 1, "sem", "s", "false"),
    ]
    verdict = prompt_grants(history, retry=0.4)
    assert verdict.ok, verdict


def test_prompt_grants_gives_colliding_lines_more_time() -> None:
    # Two processes wait for b: their attempts can split the votes, and both
    # retry after their delay - 1.0 s of a free b is within 3 x 0.4 + 0.3.
    history = [
        hold(0.5, "w2", "t1", "lock", "b"),
        call(1.0, "w0", 1, "lock", "b", 3.0),
        call(1.0, "w1", 1, "lock", "b", 3.0),
        free(2.0, "w2", "t1", "lock", "b"),
        hold(3.0, "w0", "t2", "lock", "b"),
        returned(3.0, "w0", 1, "lock", "b"),
        returned(3.5, "w1", 1, "lock", "b", "false"),
    ]
    assert prompt_grants(history, retry=0.4).ok
    slower = [e for e in history if e.time < 3.0]
    slower += [hold(3.8, "w0", "t2", "lock", "b"), returned(3.8, "w0", 1, "lock", "b")]
    slower += [returned(3.9, "w1", 1, "lock", "b", "false")]
    verdict = prompt_grants(slower, retry=0.4)
    assert not verdict.ok
    assert "1 rival waiters (bound 1.500 s" in verdict.violations[0]


def test_prompt_grants_counts_unconfirmed_releases_and_faults_as_busy() -> None:
    waiting = [call(1.0, "w1", 1, "lock", "b", 3.0), returned(4.0, "w1", 1, "lock", "b", "false")]
    # The release was not confirmed: b's keys may live their ttl (2 s) on.
    unconfirmed = [
        hold(0.5, "w2", "t1", "lock", "b"),
        free(1.0, "w2", "t1", "lock", "b", ms=2000),
        *waiting,
    ]
    assert not prompt_grants(unconfirmed, retry=0.4).ok  # free from 3.0 to 4.0
    unconfirmed[1] = free(1.0, "w2", "t1", "lock", "b", ms=2600)
    assert prompt_grants(unconfirmed, retry=0.4).ok  # free 0.4 s only
    # A fault that reaches w1 (and 1 s after its heal) is not judged.
    faulted = [
        *waiting,
        Event(0.9, "nemesis", "fault", "partition", detail="nodes=(0, 1, 2) workers=(1,)"),
        Event(2.5, "nemesis", "heal", "partition"),
    ]
    assert prompt_grants(faulted, retry=0.4).ok
    # One that reaches another worker is no excuse.
    other = [
        *waiting,
        Event(0.9, "nemesis", "fault", "partition", detail="nodes=(0, 1, 2) workers=(2,)"),
        Event(2.5, "nemesis", "heal", "partition"),
    ]
    assert not prompt_grants(other, retry=0.4).ok


def test_prompt_grants_holds_readers_back_for_a_waiting_writer() -> None:
    history = [
        hold(0.5, "w2", "r1", "read", "r"),
        call(0.8, "w2", 1, "write", "r", 3.0),  # waits for the reader
        call(1.0, "w1", 1, "read", "r", 3.0),  # stands back for the writer
        free(2.0, "w2", "r1", "read", "r"),
        hold(2.01, "w2", "w1", "write", "r"),
        returned(2.01, "w2", 1, "write", "r"),
        free(2.5, "w2", "w1", "write", "r"),
        hold(2.51, "w1", "r2", "read", "r"),
        returned(2.51, "w1", 1, "read", "r"),
    ]
    assert prompt_grants(history, retry=0.4).ok


def test_waits_only_for_its_names_accepts_a_multilock_waiting_for_a_busy_name() -> None:
    history = [
        hold(0.5, "w2", "t1", "lock", "b"),
        call(1.0, "w1", 1, "multi", "a1,b", 2.0),
        returned(3.0, "w1", 1, "multi", "a1,b", "false"),  # b busy throughout
        call(1.2, "w1", 2, "multi", "a1,q1", 2.0),
        hold(1.21, "w1", "t2", "multi", "a1,q1"),
        returned(1.21, "w1", 2, "multi", "a1,q1"),
    ]
    verdict = waits_only_for_its_names(history, retry=0.4)
    assert verdict.ok, verdict


def test_waits_only_for_its_names_names_a_multilock_held_back_by_another_set() -> None:
    # [a1, q1] waits behind [a1, b] in one process: both its names free.
    history = [
        hold(0.5, "w2", "t1", "lock", "b"),
        call(1.0, "w1", 1, "multi", "a1,b", 2.0),
        call(1.2, "w1", 2, "multi", "a1,q1", 1.5),
        returned(2.7, "w1", 2, "multi", "a1,q1", "false"),
        returned(3.0, "w1", 1, "multi", "a1,b", "false"),
    ]
    verdict = waits_only_for_its_names(history, retry=0.4)
    assert not verdict.ok
    [violation] = verdict.violations
    assert violation.startswith("w1 multi 'a1,q1' (T=1.5) [1.200, 2.700] (false)")
    assert "free for 1.500 s of its wait" in violation
    # prompt_grants leaves multilocks to it.
    assert prompt_grants(history, retry=0.4).ok


def test_adopt_scope_accepts_a_refused_or_whole_set_adoption() -> None:
    history = [
        Event(1.0, "w1", "fail", "adopt-probe", "a1", "t1", detail="LockNotOwned"),
        Event(2.0, "w1", "ok", "adopt-probe", "a1", "t2", detail="MultiLock"),
    ]
    verdict = adopt_scope(history)
    assert verdict.ok, verdict
    assert verdict.counts == {"probes": 2, "refused": 1}


def test_adopt_scope_names_a_multilock_token_adopted_as_one_name() -> None:
    history = [Event(1.0, "w1", "ok", "adopt-probe", "a1", "t1" * 10, detail="Lock")]
    verdict = adopt_scope(history)
    assert not verdict.ok
    assert verdict.violations == [
        "w1 adopted 'a1' with a multilock's token t1t1t1t1t1t1 at 1.000 (got a Lock, not the"
        " whole set)"
    ]


def test_call_bounds_gives_a_burst_of_one_attempt_acquires_its_waves() -> None:
    # 3,000 one-attempt acquires at once take the admission slots in three
    # waves of 1,280: the last may take V x 4 + node_timeout (2.25 s) + slack.
    warm = granted_before("w3")
    burst = [*warm, *(call(1.0, "w3", i, "lock", f"x:{i}", 0.0) for i in range(1, 3001))]
    # Each wave returns before the next is let in; the last one 2.6 s in.
    burst += [returned(1.6 + 0.5 * ((i - 1) // 1280), "w3", i, "lock", f"x:{i}")
              for i in range(1, 3001)]  # fmt: skip
    assert call_bounds(burst, node_timeout=0.05).ok
    # The same all waiting to the end: the first waves had no excuse.
    late = [*burst[:3002], *(returned(3.6, "w3", i, "lock", f"x:{i}") for i in range(1, 3001))]
    assert call_bounds(late, node_timeout=0.05).counts["over"] == 2560
    # One on its own has no wave ahead of it: 2 V + node_timeout (1.15 s) + slack.
    alone = [*warm, call(1.0, "w3", 1, "lock", "x", 0.0),
             returned(3.6, "w3", 1, "lock", "x", "false")]  # fmt: skip
    assert not call_bounds(alone, node_timeout=0.05).ok


def test_call_bounds_gives_a_one_shot_before_the_first_census_one_v_more() -> None:
    # A one-shot that is its Redlock's first grant waits up to V for the
    # nodes' epochs to be read, then 2 V + node_timeout (sim seed 10004's
    # process b0): 3 V + node_timeout (1.7 s) + slack here.
    first = [call(1.0, "w3", 1, "lock", "x", 0.0), returned(3.1, "w3", 1, "lock", "x", "false")]
    assert call_bounds(first, node_timeout=0.05).ok
    # After a grant, or after a fresh Redlock's (aclose) first grant, not.
    later = [*granted_before("w3"), *first]
    assert not call_bounds(later, node_timeout=0.05).ok
    closed = [*later[:2], Event(0.5, "w3", "aclose", "redlock"), *first]
    assert call_bounds(closed, node_timeout=0.05).ok
    # Where the history says when the census was done (the simulation's
    # "census ready"), until then only, grant or not.
    read = [Event(0.9, "w3", "census", "ready"), *first]
    assert not call_bounds(read, node_timeout=0.05).ok
    assert call_bounds([Event(1.1, "w3", "census", "ready"), *first], node_timeout=0.05).ok


def test_phases_skip_a_healthy_stretch_too_short_to_judge() -> None:
    """A fault due one second after a heal lands a few us after the heal's
    grace: that sliver is no healthy phase (liveness would find no attempt
    in it). A real healthy stretch is kept."""
    from .run import phases

    nemesis = [
        Event(1.0, "nemesis", "fault", "delay"),
        Event(2.0, "nemesis", "heal", "delay"),
        Event(3.00008, "nemesis", "fault", "kill-node"),
        Event(4.0, "nemesis", "heal", "kill-node"),
    ]
    names = [
        (name.rstrip("0123456789"), start, end) for name, start, end in phases(nemesis, 0.0, 8.0)
    ]
    assert names == [
        ("healthy", 0.0, 1.0),
        ("faulted", 1.0, 2.0),
        ("faulted", 3.00008, 4.0),
        ("healthy", 5.0, 8.0),
    ]


def test_prompt_grants_allows_a_restarted_nodes_quarantine() -> None:
    """mixed-workload's seed 1184710264: node 1 back empty at 2.0, a writer's
    want free from 3.1 while the restart rule still kept node 1 out (2 s from
    the restart, after a reconnection) and a partitioned worker's leftover
    reader keys sat on two more nodes: not a stall of the library's. The same
    wait after a pause (no restart) is one."""

    def history(fault: str) -> list[Event]:
        return [
            Event(1.0, "nemesis", "fault", fault, detail="nodes=(1,) workers=()"),
            Event(2.0, "nemesis", "heal", fault),
            hold(2.5, "w1", "t1", "lock", "b"),
            call(3.0, "w0", 1, "lock", "b", 3.0),
            free(3.1, "w1", "t1", "lock", "b"),
            hold(4.3, "w0", "t2", "lock", "b"),
            returned(4.3, "w0", 1, "lock", "b"),
        ]

    assert prompt_grants(history("kill-node"), retry=0.4, ttl=1.0).ok
    stalled = prompt_grants(history("pause-node"), retry=0.4, ttl=1.0)
    assert not stalled.ok
    assert "free for 1.200 s of its wait, [3.100, 4.300]" in stalled.violations[0]
    # Past the quarantine (down 1 s: noticed up to 1.05 s after the heal, and
    # the old view's records live 2.5 s more), it counts.
    late = [*history("kill-node")[:-2], hold(7.0, "w0", "t2", "lock", "b")]
    late.append(returned(7.0, "w0", 1, "lock", "b"))
    assert not prompt_grants(late, retry=0.4, ttl=1.0).ok
    assert restart_out(1.0, 2.0, 1.0) == pytest.approx(2.0 + 1.05 + 2.5)
    assert restart_out(1.0, 1.0, 4.0) == pytest.approx(1.0 + 0.5 + 5.0)  # back at once


def test_phases_begin_when_the_workers_do() -> None:
    """Workers that started late (a loaded machine) have no healthy phase
    before they ran: phases() counts from the start it is given, and a
    fault and heal before it do not move that start back."""
    from .run import phases

    nemesis = [
        Event(1.0, "nemesis", "fault", "delay"),
        Event(1.2, "nemesis", "heal", "delay"),
        Event(4.0, "nemesis", "fault", "pause-node"),
        Event(4.5, "nemesis", "heal", "pause-node"),
    ]
    names = [(name.rstrip("0123456789"), a, b) for name, a, b in phases(nemesis, 1.5, 8.0)]
    assert names == [("healthy", 2.2, 4.0), ("faulted", 4.0, 4.5), ("healthy", 5.5, 8.0)]


def test_a_renewed_grant_lost_while_its_holder_was_stopped_ends_when_it_stopped() -> None:
    """mixed-paused-handoffs: w1 took 'c' auto-renewed (ttl 0.3 s) and was
    stopped 0.4 s at once; its keys expired, w2 took the name, and w1 was
    told of the loss as it resumed. Nothing ran in w1 meanwhile: its window
    ends when it was stopped. A loss told late without a stall is still an
    overlap, and a claimed validity end is never moved."""
    stopped = [
        Event(1.0, "nemesis", "fault", "pause-worker", detail="nodes=(0,) workers=(1,)"),
        Event(1.4, "nemesis", "heal", "pause-worker"),
    ]
    base = [
        Event(0.99, "w1", "ok", "acquire", key="c", token="t1"),
        Event(1.39, "w2", "ok", "acquire", key="c", token="t2", valid_until=2.0),
        Event(1.41, "w1", "lost", "acquire", key="c", token="t1"),
    ]
    assert mutual_exclusion([*stopped, *base]).ok
    assert not mutual_exclusion(base).ok  # no stall: told late, an overlap
    lagged = [*base, Event(1.405, "w1", "lag", "loop", value=400)]
    assert mutual_exclusion(lagged).ok  # its loop stalled instead: the same
    claimed = [
        Event(0.99, "w1", "ok", "acquire", key="c", token="t1", valid_until=1.8),
        *base[1:],
    ]
    assert not mutual_exclusion([*stopped, *claimed]).ok


def test_a_renewed_grant_let_go_as_its_stopped_process_runs_again_ends_at_the_stop() -> None:
    # w1 holds "c" (auto-renewed) and is stopped by two overlapping pauses
    # (1.0-2.0, 1.5-3.0: one stop); its keys expire and w2 takes "c" at 2.5;
    # w1's first act when it runs, at 3.0, is its release (sim seeds 10007,
    # 10012): it held "c" until 1.0, not 3.0.
    def pause(time: float, kind: str, ident: int) -> Event:
        return Event(time, "nemesis", kind, "pause-worker", detail=f"id={ident} workers=(1,)")

    history = [
        Event(0.5, "w1", "ok", "acquire", "c", "t1"),
        pause(1.0, "fault", 1),
        pause(1.5, "fault", 2),
        pause(2.0, "heal", 1),
        Event(2.5, "w2", "ok", "acquire", "c", "t2", valid_until=2.8),
        Event(2.6, "w2", "release", "acquire", "c", "t2"),
        pause(3.0, "heal", 2),
        Event(3.0, "w1", "release", "acquire", "c", "t1"),
    ]
    assert mutual_exclusion(history).ok
    [first, _] = windows(history)
    assert (first.start, first.end) == (0.5, 1.0)
    # Had it run at 2.0 (the first pause's end), its release at 3.0 came
    # after a second in which it could act: its claim ran to 3.0.
    apart = [e for e in history if "id=2" not in e.detail]
    assert not mutual_exclusion(apart).ok


def test_a_pause_ended_by_its_process_crash_is_paired_by_its_id() -> None:
    # Sim seed 3000: w22 is paused (id 394), then w21 (id 395), holding "b"
    # auto-renewed; w21 crashes while paused, which ends its pause at once -
    # before w22's, an older one. Its keys expired meanwhile and w20 took "b".
    # w21 could not act from its pause on: its window ends there, not at the
    # crash (paired by arrival, the heal was w22's and w21 looked stopped later).
    def pause(time: float, kind: str, ident: int, worker: int) -> Event:
        detail = f"id={ident} nodes=() workers=({worker},) amount=0"
        return Event(time, "nemesis", kind, "pause-worker", detail=detail)

    history = [
        Event(1.0, "w21", "ok", "acquire", "b", "t1"),
        pause(2.0, "fault", 394, 22),
        pause(2.1, "fault", 395, 21),
        Event(2.5, "w20", "ok", "acquire", "b", "t2", valid_until=3.0),
        Event(2.55, "w20", "release", "acquire", "b", "t2"),
        pause(2.7, "heal", 395, 21),
        Event(2.7, "w21", "lost", "acquire", "b", "t1", detail="crashed"),
        pause(3.4, "heal", 394, 22),
    ]
    assert stalls(history) == {"w21": [(2.1, 2.7)], "w22": [(2.0, 3.4)]}
    assert mutual_exclusion(history).ok


def test_a_loss_told_as_a_stop_ends_counts_though_the_loop_stalls_again_at_once() -> None:
    # Sim seed 10014: w11 holds "c" (auto-renewed) and is stopped 1.0-2.0;
    # its keys expire and w19 takes "c" at 1.8. It is told of the loss as it
    # runs again, at 2.0, and its loop stalls anew from 1.9999 to 3.1 (a
    # pause inside its next acquire, the lag measured in whole ms). The two
    # stalls overlap, but it was told as the first ended: its window ends at
    # 1.0, not at the merged stall's end.
    def pause(time: float, kind: str) -> Event:
        return Event(time, "nemesis", kind, "pause-worker", detail="id=1 workers=(11,)")

    history = [
        Event(0.5, "w11", "ok", "acquire", "c", "t1"),
        pause(1.0, "fault"),
        Event(1.8, "w19", "ok", "acquire", "c", "t2", valid_until=2.5),
        Event(1.9, "w19", "release", "acquire", "c", "t2"),
        pause(2.0, "heal"),
        Event(2.0, "w11", "lost", "acquire", "c", "t1"),
        Event(3.1, "w11", "lag", "loop", value=1101),
    ]
    assert mutual_exclusion(history).ok
    [first, _] = windows(history)
    assert (first.start, first.end) == (0.5, 1.0)
