"""The plugin from another project: docs/testing.md's files, as written, in strict and auto mode.

Each case is a throwaway project in ``tmp_path`` (the docs' pyproject.toml and
one test file, no conftest) run by ``python -m pytest`` in a subprocess, with
the plugin loaded through the installed ``pytest11`` entry point, warnings as
errors, and pytest-asyncio's mode set on the command line.
"""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs" / "testing.md"


def docs_config() -> str:
    found = re.search(r"```toml\n(# pyproject\.toml\n.*?)```", DOCS.read_text(), re.S)
    assert found, "docs/testing.md: no pyproject.toml block"
    return found.group(1)


def docs_test_file(mode: str) -> str:
    pattern = rf"```python\n(# test_job\.py, for {mode} mode[^\n]*\n.*?)```"
    found = re.search(pattern, DOCS.read_text(), re.S)
    assert found, f"docs/testing.md: no test_job.py block for {mode} mode"
    return found.group(1)


def run_project(project: Path, test_file: str, mode: str) -> tuple[int, str]:
    (project / "pyproject.toml").write_text(docs_config())
    (project / "test_job.py").write_text(test_file)
    args = [sys.executable, "-m", "pytest", "-q", "-W", "error", "--strict-markers"]
    args += ["-p", "no:cacheprovider", "-o", f"asyncio_mode={mode}"]
    entry_points = importlib.metadata.entry_points(group="pytest11")
    if "redlock_async" not in {ep.name for ep in entry_points}:
        args += ["-p", "redlock_async.testing.plugin"]  # not installed: load it by name
    done = subprocess.run(
        [*args, "test_job.py"], cwd=project, capture_output=True, timeout=100, check=False
    )
    return done.returncode, done.stdout.decode(errors="replace")


@pytest.mark.parametrize("mode", ["strict", "auto"])
def test_the_strict_mode_file_passes_in(mode: str, tmp_path: Path) -> None:
    code, output = run_project(tmp_path, docs_test_file("strict"), mode)
    assert code == 0, output
    assert re.search(r"\b2 passed\b", output), output


def test_the_auto_mode_file_passes_in_auto_mode(tmp_path: Path) -> None:
    code, output = run_project(tmp_path, docs_test_file("auto"), "auto")
    assert code == 0, output
    assert re.search(r"\b1 passed\b", output), output


def test_the_auto_mode_file_fails_in_strict_mode(tmp_path: Path) -> None:
    """Why the strict file marks its tests: the mode set here really is applied."""
    code, output = run_project(tmp_path, docs_test_file("auto"), "strict")
    assert code == 1, output
    # pytest's own words for an async fixture (or test) no plugin took.
    assert "requested an async fixture 'redlock', with no plugin" in output


def test_loading_the_plugin_imports_nothing_heavy() -> None:
    # pytest loads the plugin into every run wherever the package is installed:
    # redis-py, the engine and the node helpers wait until a fixture is used.
    check = """
import sys
import redlock_async.testing.plugin
heavy = ("redis", "hiredis", "anyio", "valkey", "opentelemetry", "redlock_async._")
loaded = sorted(name for name in sys.modules if name.startswith(heavy))
loaded += sorted(name for name in sys.modules if name.startswith("redlock_async.testing._"))
assert loaded == ["redlock_async._base", "redlock_async._base._version"], loaded
"""
    result = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, check=False, timeout=60
    )
    assert result.returncode == 0, result.stderr
