"""Developer sessions: ``nox -s tests lint typecheck docs`` and ``nox -s faults`` (as CI).

Two test tiers: ``tests`` is the fast default (``pytest``: unit, integration,
CLI, examples, the testing plugin; each test on one event loop and driver in
turn), ``faults`` the fault-injection tier (``pytest -m faults``: worker
processes, a nemesis, history checkers). ``matrix`` runs the default tier's
tests on every loop and driver (``pytest --matrix=full``).
"""

from __future__ import annotations

import nox

nox.options.sessions = ["tests", "lint", "typecheck"]
nox.options.default_venv_backend = "venv"

PYTHONS = ["3.11", "3.12", "3.13"]


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """The default tier against throwaway local redis-server nodes (the fault tier is left out)."""
    session.install("-e", ".[test]")
    session.run("python", "-m", "pytest", "-n", "2", *session.posargs)


@nox.session
def matrix(session: nox.Session) -> None:
    """The default tier's tests on every event loop and driver: ``pytest --matrix=full`` (as CI)."""
    session.install("-e", ".[test]")
    session.run("python", "-m", "pytest", "-n", "2", "--matrix=full", *session.posargs)


@nox.session
def faults(session: nox.Session) -> None:
    """The fault tier: ``pytest -m faults`` (tests/faults/test_smoke.py; minutes).

    Real nodes, worker processes, a nemesis and the history checkers: in-model
    schedules, out-of-model ones, the planted bugs. See docs/faults.md.
    """
    session.install("-e", ".[test]")
    session.run("python", "-m", "pytest", "-m", "faults", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check."""
    session.install("ruff>=0.8")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy --strict over the package, tests and benchmarks."""
    session.install("-e", ".[test,bench]", "mypy>=1.13")  # bench: benchmarks/plot.py
    session.run("mypy", "--strict")


@nox.session
def docs(session: nox.Session) -> None:
    """Build the documentation site (mkdocs) with warnings as errors."""
    session.install("-e", ".[docs]")
    # The theme's end-of-life banner (see the docs extra in pyproject.toml).
    session.run("mkdocs", "build", "--strict", env={"NO_MKDOCS_2_WARNING": "1"})


@nox.session
def chaos(session: nox.Session) -> None:
    """The full fault campaign: ``nox -s chaos -- --minutes 20 --seed 7``.

    Writes faults-report.json and faults-report.md (see docs/faults.md).
    """
    session.install("-e", ".[test]")
    session.run("python", "-m", "tests.faults.campaign", *session.posargs)
