"""The simulation's sweeps: a short one in the default tier, a long one behind REDLOCK_CI_FULL.

The short sweep simulates a few small deployments from fixed seeds with
every default fault kind and checker: no violation, and one seed run twice
gives the same history (the differential check, its default-tier partner,
is test_diff.py's). A few planted bugs that the simulation
catches quickly must be caught (each in a fresh interpreter: a planted bug
patches the library for good). The long sweep - a hundred thousand grants
on two worker processes, the same seeds on one giving the same history, and
every planted bug the simulation reaches - runs with REDLOCK_CI_FULL=1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .runner import run, run_seed

ROOT = Path(__file__).resolve().parents[2]
FULL = os.environ.get("REDLOCK_CI_FULL") == "1"
MINUTES = 0.2  # each short deployment's faulted part: 12 simulated seconds


def test_a_short_sweep_finds_no_violation() -> None:
    report = run(3900, 8_000, minutes=MINUTES)
    figures = report.as_json()
    assert figures["violations"] == [], figures["violations"]
    assert figures["grants"] >= 8_000
    assert figures["faults"] > 0
    assert len(figures["seeds"]) == len(set(figures["seeds"]))


def test_a_seed_gives_the_same_history_twice() -> None:
    first, again = run_seed(3901, minutes=0.1), run_seed(3901, minutes=0.1)
    assert first.history_sha256 == again.history_sha256
    assert first.grants == again.grants > 0
    assert first.faults == again.faults


def cli(*args: str, timeout: float = 600) -> tuple[int, dict[str, Any], str]:
    out = Path(f"/tmp/sim-{os.getpid()}-{abs(hash(args))}.json")
    done = subprocess.run(
        [sys.executable, "-m", "tests.sim", "run", "--json", str(out), "-q", *args],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
        timeout=timeout, check=False,
    )  # fmt: skip
    figures = json.loads(out.read_text()) if out.exists() else {}
    out.unlink(missing_ok=True)
    return done.returncode, figures, done.stdout + done.stderr


# Planted bugs the simulation catches within a few thousand grants, and by which checker.
FAST_MUTANTS = {
    "quorum-n2": "mutual_exclusion",
    "release-with-del": "mutual_exclusion",
    "semaphore-counts-per-node": "semaphore_limit",
    "no-drift-margin": "claims_within_keys",
}


@pytest.mark.parametrize("mutant", sorted(FAST_MUTANTS))
def test_a_planted_bug_is_caught(mutant: str) -> None:
    code, figures, output = cli("--seed", "1", "--grants", "20000", "--minutes", "0.2",
                                "--stop-at-first", "--mutant", mutant)  # fmt: skip
    assert code == 1, output
    checkers = {v["checker"] for v in figures["violations"]}
    assert FAST_MUTANTS[mutant] in checkers, output


@pytest.mark.skipif(not FULL, reason="the long sweep: REDLOCK_CI_FULL=1")
@pytest.mark.timeout(3000)
def test_the_long_sweep_finds_no_violation_on_any_number_of_workers() -> None:
    code, two, output = cli("--seed", "5000", "--grants", "100000", "--workers", "2",
                            timeout=1500)  # fmt: skip
    assert code == 0, output
    assert two["grants"] >= 100_000
    # Each seed's history is its own: one worker simulates the same seeds,
    # in the same order, to the same histories.
    code, one, output = cli("--seed", "5000", "--grants", "100000", "--workers", "1",
                            timeout=1500)  # fmt: skip
    assert code == 0, output
    assert one["seeds"] == two["seeds"]
    assert one["history_sha256"] == two["history_sha256"]
