"""Quarantine length after a restart: pure logic, no sockets."""

from __future__ import annotations

import logging
import math

import pytest

from redlock_async._base._errors import NodeError, NodeResponseError
from redlock_async._engine._restarts import MIN_QUARANTINE, UPTIME_RESOLUTION, Restarts
from redlock_async._engine._ttls import TtlLedger
from redlock_async._engine.resp._handshake import observe_info


def _watched(longest: float = 4.0, grace: float | None = None) -> Restarts:
    ledger = TtlLedger()
    ledger.granted(longest)
    return Restarts("n1", ledger, grace)


def test_first_sight_is_not_a_restart() -> None:
    restarts = _watched()
    restarts.observe_fields(b"a" * 40, 0.0, now=100.0)
    assert restarts.until == 0.0
    assert restarts.vote(1, 100.0) == 1


@pytest.mark.parametrize("uptime", [0.0, 1.0, 2.0])
def test_a_restart_is_quarantined_from_the_earliest_start(uptime: float) -> None:
    # MIN_QUARANTINE, whatever the ttls: grants are the census's (test_epochs.py).
    restarts = _watched(longest=4.0)
    restarts.observe_fields(b"a" * 40, 50.0, now=90.0)
    restarts.observe_fields(b"b" * 40, uptime, now=100.0)
    # Redis's whole-second uptime can overstate by up to a second: the server
    # may have come back as late as now - (uptime - 1).
    earliest_start = 100.0 - max(0.0, uptime - UPTIME_RESOLUTION)
    assert restarts.until == pytest.approx(earliest_start + MIN_QUARANTINE)
    assert isinstance(restarts.vote(1, restarts.until - 0.01), NodeError)
    assert restarts.vote(0, restarts.until - 0.01) == 0  # a no vote stays a no
    assert restarts.vote(1, restarts.until) == 1


def test_uptime_rounded_up_does_not_shorten_the_quarantine() -> None:
    # Started at x.99, asked at (x+1).01: Redis says 1 s, 20 ms have passed.
    restarts = _watched(longest=4.0)
    restarts.observe_fields(b"a" * 40, 9.0, now=0.0)
    restarts.observe_fields(b"b" * 40, 1.0, now=10.0)
    started = 10.0 - 0.02
    assert restarts.until >= started + MIN_QUARANTINE


def test_a_restart_long_ago_is_not_quarantined() -> None:
    restarts = _watched(longest=4.0)
    restarts.observe_fields(b"a" * 40, 50.0, now=0.0)
    restarts.observe_fields(b"b" * 40, 60.0, now=10.0)
    assert restarts.until == 0.0


def test_strict_mode_quarantines_young_nodes_seen_first() -> None:
    restarts = _watched(longest=1.0, grace=5.0)
    restarts.observe_fields(b"a" * 40, 2.0, now=10.0)
    assert restarts.until == pytest.approx(10.0 + 5.0 - (2.0 - UPTIME_RESOLUTION))
    old = _watched(longest=1.0, grace=5.0)
    old.observe_fields(b"a" * 40, 7.0, now=10.0)
    assert old.until == 0.0


def test_info_text_is_parsed() -> None:
    restarts = _watched(longest=4.0)
    observe_info(restarts, b"# Server\r\nrun_id:abc123\r\nuptime_in_seconds:9\r\n", now=0.0)
    observe_info(restarts, b"# Server\r\nrun_id:def456\r\nuptime_in_seconds:0\r\n", now=1.0)
    assert restarts.run_id == b"def456"
    assert restarts.until == pytest.approx(1.0 + MIN_QUARANTINE)


def test_a_restart_is_quarantined_long_enough_for_fencing_clocks() -> None:
    # Short ttls still quarantine for MIN_QUARANTINE: fencing counters resume
    # at the node's clock in whole seconds (lua/_fence.lua).
    restarts = _watched(longest=0.5)
    restarts.observe_fields(b"a" * 40, 50.0, now=90.0)
    restarts.observe_fields(b"b" * 40, 0.0, now=100.0)
    assert restarts.until == pytest.approx(100.0 + MIN_QUARANTINE)


# -- restarts that cannot be detected (INFO refused): fail closed --------------

NOPERM = "NOPERM this user has no permissions to run the 'info' command"


def test_unknown_refuses_yes_votes_naming_the_permission() -> None:
    restarts = _watched()
    restarts.observe_fields(b"a" * 40, 50.0, now=0.0)
    cause = NodeResponseError(NOPERM)
    restarts.unknown(cause)
    assert restarts.until  # the tally consults vote() only when this is truthy
    refused = restarts.vote(1, now=1e9)  # for good, not for a while
    assert isinstance(refused, NodeResponseError)
    assert str(refused) == (
        f"n1: restart detection needs INFO ({NOPERM}); "
        "grant the ACL user +info, see docs/security.md"
    )
    assert refused.__cause__ is cause
    assert isinstance(restarts.vote(7, now=1e9), NodeResponseError)  # a fencing counter too
    for no in (0, -1, -2, None):
        assert restarts.vote(no, now=1e9) == no  # a no vote still counts as a no


def test_unknown_warns_once_per_node_not_per_connection_or_vote(
    caplog: pytest.LogCaptureFixture,
) -> None:
    restarts = _watched()
    with caplog.at_level(logging.DEBUG, logger="redlock_async"):
        for _ in range(3):
            restarts.unknown(NodeResponseError(NOPERM))
            restarts.vote(1, now=0.0)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "n1: restart detection needs INFO" in warnings[0].getMessage()
    assert "+info" in warnings[0].getMessage()


def test_a_later_successful_observe_trusts_the_node_again() -> None:
    restarts = _watched()
    restarts.unknown("NOPERM")
    restarts.observe_fields(b"a" * 40, 50.0, now=10.0)  # first sight: nothing to compare
    assert restarts.until == 0.0
    assert restarts.vote(1, now=10.0) == 1


def test_a_restart_while_blind_is_still_quarantined() -> None:
    restarts = _watched(longest=4.0)
    restarts.observe_fields(b"a" * 40, 50.0, now=0.0)
    restarts.unknown("NOPERM")
    restarts.observe_fields(b"b" * 40, 0.0, now=10.0)  # +info granted, a new run_id
    assert restarts.until == pytest.approx(12.0)
    assert isinstance(restarts.vote(1, now=11.0), NodeError)
    assert "quarantined" in str(restarts.vote(1, now=11.0))
    assert restarts.vote(1, now=12.0) == 1


def test_a_quarantine_outlives_a_blind_spell() -> None:
    restarts = _watched(longest=4.0)
    restarts.observe_fields(b"a" * 40, 50.0, now=0.0)
    restarts.observe_fields(b"b" * 40, 0.0, now=10.0)  # quarantined until 12
    restarts.unknown("NOPERM")
    assert restarts.until == math.inf
    restarts.observe_fields(b"b" * 40, 1.0, now=11.0)  # the same server: not a new restart
    assert restarts.until == pytest.approx(12.0)
    assert "quarantined" in str(restarts.vote(1, now=11.5))


def test_warns_again_after_recovering_and_losing_info_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    restarts = _watched()
    with caplog.at_level(logging.WARNING, logger="redlock_async"):
        restarts.unknown("NOPERM")
        restarts.observe_fields(b"a" * 40, 50.0, now=0.0)
        restarts.unknown("NOPERM")
    assert sum("restart detection" in r.getMessage() for r in caplog.records) == 2


@pytest.mark.parametrize(
    "info", [b"# Server\r\nuptime_in_seconds:9\r\n", b"# Server\r\nrun_id:abc123\r\n", b""]
)
def test_info_without_the_fields_is_blind_too(info: bytes) -> None:
    restarts = _watched()
    observe_info(restarts, info, now=0.0)
    assert isinstance(restarts.vote(1, now=0.0), NodeResponseError)


def test_an_empty_run_id_is_blind_too() -> None:
    restarts = _watched()  # server_id.lua answers '' when INFO has no run_id
    restarts.observe_fields(b"", 10.0, now=0.0)
    assert "restart detection needs INFO" in str(restarts.vote(1, now=0.0))


def test_a_failover_is_quarantined_from_now_whatever_the_uptime() -> None:
    # A promoted replica may have run for hours, yet lack the old primary's
    # last grants: the span runs from now (the census gives it a new epoch).
    ledger = TtlLedger()
    ledger.granted(4.0)
    restarts = Restarts("sentinel:lock-a", ledger, None, failover=True)
    restarts.observe_fields(b"a" * 40, 50.0, now=90.0)
    restarts.observe_fields(b"b" * 40, 3600.0, now=100.0)
    assert restarts.until == pytest.approx(100.0 + MIN_QUARANTINE)
    assert isinstance(restarts.vote(1, 101.9), NodeError)
    assert restarts.vote(1, 102.0) == 1


def test_a_new_run_id_asks_for_a_census_first_sight_does_not() -> None:
    restarts = _watched()
    asked: list[float] = []
    restarts.on_restart = lambda: asked.append(1.0)
    restarts.observe_fields(b"a" * 40, 50.0, now=0.0)  # first sight
    restarts.observe_fields(b"a" * 40, 51.0, now=1.0)  # the same server
    assert asked == []
    restarts.observe_fields(b"b" * 40, 0.0, now=2.0)  # restarted (from disk, perhaps)
    assert asked == [1.0]


def test_suspect_keeps_yes_votes_out_until_then() -> None:
    restarts = _watched()
    restarts.observe_fields(b"a" * 40, 50.0, now=0.0)
    restarts.suspect(7.5)  # what a census found (_epochs.py)
    assert "quarantined" in str(restarts.vote(1, now=7.0))
    assert restarts.vote(0, now=7.0) == 0
    assert restarts.vote(1, now=7.5) == 1
    assert restarts.until == 0.0
