"""What a census carries for the next (``_engine/_notices.py``): pure arithmetic."""

from __future__ import annotations

import math

from redlock_async._engine._notices import census_args, parse


def reply(epoch: bytes, clock: int | None, age: int | None, *views: object) -> list[object]:
    return [epoch, -1 if clock is None else clock, -1 if age is None else age, *views]


def test_a_reply_tells_its_epoch_clock_and_age() -> None:
    assert parse(reply(b"e1", 5_000, 120, b",e1,", 900)) == (b"e1", 5_000, 120)
    assert parse(reply(b"e1", 5_000, None)) == (b"e1", 5_000, None)  # an earlier release's epoch
    assert parse([b"e1"]) == (b"e1", None, None)


def test_nothing_heard_carries_nothing() -> None:
    assert census_args({}, 10.0, 3, 0.01) == (b"", b"")


def test_the_notice_is_the_epochs_heard_sorted() -> None:
    answers = {0: (reply(b"cc", 1_000, 5), 10.002), 2: (reply(b"aa", 2_000, 9), 10.003)}
    notice, _ = census_args(answers, 10.0, 3, 0.0)
    assert notice == b",aa,cc,"  # whatever the order of the answers


def test_a_complete_census_drops_what_came_before_its_send() -> None:
    # Each node's clock at the read, less the time from the send to its reply
    # (stretched by the drift, rounded up), less a millisecond.
    answers = {
        0: (reply(b"aa", 50_000, 10_000), 10.004),
        1: (reply(b"bb", 70_000, 20_000), 10.010),
    }
    _, cutoffs = census_args(answers, 10.0, 2, 0.01)
    a = 50_000 - math.ceil(4.0 * 1.01) - 1
    b = 70_000 - math.ceil(10.0 * 1.01) - 1
    assert cutoffs == b",aa=%d,bb=%d," % (a, b)


def test_a_partial_census_drops_what_came_before_the_youngest_epoch() -> None:
    # One node of three did not answer: what the nodes wrote before the
    # youngest epoch heard (made 300 ms before its read) was made goes.
    answers = {
        0: (reply(b"aa", 50_000, 86_400_000), 10.004),
        1: (reply(b"bb", 70_000, 300), 10.002),
    }
    _, cutoffs = census_args(answers, 10.0, 3, 0.01)
    young = math.ceil(300 * 1.01 * 1.01)
    a = 50_000 - math.ceil(4.0 * 1.01) - 1 - young
    b = 70_000 - math.ceil(2.0 * 1.01) - 1 - young
    assert cutoffs == b",aa=%d,bb=%d," % (a, b)


def test_a_partial_census_with_no_age_known_drops_nothing() -> None:
    answers = {0: (reply(b"aa", 50_000, None), 10.004), 1: (reply(b"bb", 70_000, None), 10.002)}
    notice, cutoffs = census_args(answers, 10.0, 3, 0.01)
    assert notice == b",aa,bb,"
    assert cutoffs == b""


def test_a_node_that_tells_no_clock_gets_no_cutoff() -> None:
    # An earlier release's census script: its notices stay.
    old: list[object] = [b"bb"]
    answers = {0: (reply(b"aa", 50_000, 10), 10.004), 1: (old, 10.002)}
    _, cutoffs = census_args(answers, 10.0, 3, 0.0)  # partial: a third node is silent
    assert cutoffs == b",aa=%d," % (50_000 - 4 - 1 - 10)
