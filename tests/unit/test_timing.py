"""Validity math, checked exactly with made-up clock readings."""

from __future__ import annotations

import pytest

from redlock_async._timing import CLOCK_DRIFT_FLOOR, drift, validity


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
