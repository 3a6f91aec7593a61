"""Project files that must agree with each other."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```sh\n# [^\n]*\n([^\n]+)\n```", text)


def test_readme_names_the_main_job_and_the_tests_near_the_top() -> None:
    commands = readme_commands()
    assert len(commands) >= 2
    assert "redlock_async demo" in commands[0]
    assert "pytest" in commands[1]
    top = (ROOT / "README.md").read_text()[:1500]
    assert commands[0] in top
    assert commands[1] in top


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    # CI extracts the second sh block of README.md and runs it verbatim.
    assert '"tests": (1, "second")' in ci
    assert 'bash -c "$test_command"' in ci


def test_every_lua_script_documents_its_contract() -> None:
    for script in (ROOT / "redlock_async" / "lua").glob("*.lua"):
        lines = script.read_text().splitlines()
        # The header: every comment line before the first line of code.
        header = "\n".join(
            line
            for line in lines[
                : next(i for i, text in enumerate(lines) if text and not text.startswith("--"))
            ]
        )
        # A script that takes no keys or arguments says so in those words.
        for part, none in (("KEYS[1]", "No KEYS"), ("ARGV[1]", "No ARGV"), ("Returns", None)):
            assert part in header or (none is not None and none.lower() in header.lower()), (
                script.name,
                part,
            )


def test_ci_runs_the_full_matrix_the_readme_shows() -> None:
    commands = readme_commands()
    assert len(commands) >= 4
    assert "--matrix" not in commands[1]
    assert commands[3].endswith("pytest -n 2 --matrix=full")
    ci = (ROOT / ".ci" / "run").read_text()
    assert '"matrix": (3, "fourth")' in ci
    assert 'bash -c "$matrix_command"' in ci


def collected(*args: str) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return [line for line in result.stdout.splitlines() if "::" in line]


def test_the_default_matrix_runs_each_test_once_on_every_loop_and_driver_in_turn() -> None:
    module = "tests/integration/test_lock.py"
    full, default = collected(module, "--matrix=full"), collected(module)

    def base(nodeid: str) -> str:  # the test without its loop and driver
        return re.sub(r"\b(asyncio|uvloop|resp|redis-py)\b-?", "", nodeid)

    assert {base(n) for n in default} == {base(n) for n in full}
    assert len(default) == len({base(n) for n in default})  # each test once
    assert len(full) > 3 * len(default)
    for param in ("asyncio", "uvloop", "resp", "redis-py"):
        assert any(re.search(rf"[\[-]{param}[\]-]", n) for n in default), param


def _imported_top_level(root: Path) -> set[str]:
    """Every top-level module name the package's own code imports."""
    import ast

    names: set[str] = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names


def test_every_runtime_dependency_is_imported_by_the_package() -> None:
    # A user should not install what is never used (anyio was, until the
    # sync API's hand-off replaced its portal): every declared runtime
    # dependency must be imported somewhere in redlock_async/.
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {
        re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower().replace("-", "_")
        for requirement in project["dependencies"]
    }
    imported = _imported_top_level(ROOT / "redlock_async")
    assert declared, "no runtime dependency declared"
    assert declared <= imported, f"declared but never imported: {sorted(declared - imported)}"
