"""Validity math, checked exactly with made-up clock readings."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from redlock_async._base._timing import (
    CLOCK_DRIFT_FLOOR,
    drift,
    extend_retry_interval,
    loss_deadline,
    renewal_delay,
    renewal_due,
    renewal_due_in,
    shortened_validity_end,
    validity,
)


def test_drift_is_proportional_plus_two_ms() -> None:
    assert drift(10.0, 0.01) == pytest.approx(0.1 + 0.002)
    assert drift(1.0, 0.0) == CLOCK_DRIFT_FLOOR == 0.002


def test_validity_subtracts_elapsed_and_drift() -> None:
    # ttl 10 s, 0.25 s spent acquiring, 1% drift: 10 - 0.25 - 0.102
    assert validity(10.0, started=100.0, now=100.25, drift_factor=0.01) == pytest.approx(9.648)


def test_validity_is_measured_from_the_start_of_the_attempt() -> None:
    late = validity(1.0, started=5.0, now=5.9, drift_factor=0.01)
    early = validity(1.0, started=5.0, now=5.1, drift_factor=0.01)
    assert early - late == pytest.approx(0.8)


def test_validity_runs_out_when_acquiring_took_longer_than_the_ttl() -> None:
    assert validity(0.5, started=0.0, now=0.5, drift_factor=0.01) < 0
    # Exactly at the boundary the drift margin already makes it unusable.
    assert validity(0.5, started=0.0, now=0.5 - 0.007, drift_factor=0.01) == pytest.approx(0.0)


# The lock layer calls these functions (nothing inlines them): _attempt.py
# and _grant.py call validity(), _renewal.py the renewal and loss formulas.
# tests/unit/test_lock_*.py check the same numbers through the running code.


def test_renewal_due_rounds_down_to_the_ttl_grid_but_never_into_the_past() -> None:
    grid = 3.0 / 64
    due = renewal_due(now=100.0, delay=0.968, ttl=3.0)
    assert due <= 100.968 < due + grid
    assert (due / grid) == pytest.approx(round(due / grid))
    # Closer than a grid step: due now.
    assert renewal_due(now=100.0, delay=grid / 2, ttl=3.0) == 100.0
    # The grid is clamped to [1 ms, 50 ms].
    assert renewal_due(0.0, 0.0123, ttl=0.01) == pytest.approx(0.012)
    assert renewal_due(0.0, 0.123, ttl=3600.0) == pytest.approx(0.1)


def test_renewal_delay_keeps_two_thirds_of_the_ttl_less_the_spread() -> None:
    assert renewal_delay(left=2.968, ttl=3.0, spread=0.1) == pytest.approx(0.868)
    assert renewal_delay(left=1.0, ttl=3.0, spread=0.0) == 0.0  # overdue: at once


def test_loss_is_declared_before_the_validity_ends() -> None:
    assert loss_deadline(10.0, ttl=3.0, node_timeout=0.05) == pytest.approx(9.95)
    assert loss_deadline(10.0, ttl=0.1, node_timeout=0.05) == pytest.approx(9.99)


def test_a_failed_extend_leaves_the_reached_nodes_expiring_from_its_start() -> None:
    assert shortened_validity_end(started=5.0, ttl=0.1, drift_factor=0.01) == pytest.approx(5.097)


def test_extend_retries_at_most_six_times_per_ttl() -> None:
    assert extend_retry_interval(0.2, ttl=3.0) == 0.2
    assert extend_retry_interval(0.2, ttl=0.6) == pytest.approx(0.1)


@given(
    now=st.floats(0.0, 1e7),
    left=st.floats(-10.0, 1e5),
    ttl=st.floats(0.01, 1e5),
    spread=st.floats(0.0, 1e4),
)
def test_renewal_due_in_is_the_two_formulas_composed(
    now: float, left: float, ttl: float, spread: float
) -> None:
    # Written out in one function for the renewal schedule: the same float.
    composed = renewal_due(now, renewal_delay(left, ttl, spread), ttl)
    assert renewal_due_in(now, left, ttl, spread) == composed
