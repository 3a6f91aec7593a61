"""Quarantine length after a restart: pure logic, no sockets."""

from __future__ import annotations

import pytest

from redlock_async._errors import NodeError
from redlock_async._restarts import UPTIME_RESOLUTION, Restarts, TtlLedger


def _watched(longest: float = 4.0, grace: float | None = None) -> Restarts:
    ledger = TtlLedger()
    ledger.granted(longest)
    return Restarts("n1", ledger, grace)


def test_first_sight_is_not_a_restart() -> None:
    restarts = _watched()
    restarts.observe_fields(b"a" * 40, 0.0, now=100.0)
    assert restarts.until == 0.0
    assert restarts.vote(1, 100.0) == 1


@pytest.mark.parametrize("uptime", [0.0, 1.0, 2.0, 3.0])
def test_a_restart_is_quarantined_for_the_longest_ttl_from_the_earliest_start(
    uptime: float,
) -> None:
    restarts = _watched(longest=4.0)
    restarts.observe_fields(b"a" * 40, 50.0, now=90.0)
    restarts.observe_fields(b"b" * 40, uptime, now=100.0)
    # Redis's whole-second uptime can overstate by up to a second: the server
    # may have come back as late as now - (uptime - 1).
    earliest_start = 100.0 - max(0.0, uptime - UPTIME_RESOLUTION)
    assert restarts.until == pytest.approx(earliest_start + 4.0)
    assert isinstance(restarts.vote(1, restarts.until - 0.01), NodeError)
    assert restarts.vote(0, restarts.until - 0.01) == 0  # a no vote stays a no
    assert restarts.vote(1, restarts.until) == 1


def test_uptime_rounded_up_does_not_shorten_the_quarantine() -> None:
    # Started at x.99, asked at (x+1).01: Redis says 1 s, 20 ms have passed.
    restarts = _watched(longest=4.0)
    restarts.observe_fields(b"a" * 40, 9.0, now=0.0)
    restarts.observe_fields(b"b" * 40, 1.0, now=10.0)
    started = 10.0 - 0.02
    assert restarts.until >= started + 4.0


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
    restarts.observe(b"# Server\r\nrun_id:abc123\r\nuptime_in_seconds:9\r\n", now=0.0)
    restarts.observe(b"# Server\r\nrun_id:def456\r\nuptime_in_seconds:0\r\n", now=1.0)
    assert restarts.run_id == b"def456"
    assert restarts.until == pytest.approx(5.0)
