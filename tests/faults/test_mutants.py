"""Every planted bug still applies to the library as it is (fast tier: no nodes).

A mutant patches the library by name and by the text of its scripts; when
either changes, applying it must fail here, not silently test nothing in a
fault run. Each is applied in a fresh interpreter, as a fault worker does.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from .._loops import REPO, child_env
from .mutants import MUTANTS

# Applied, then every script the library holds still matches its flags: a
# script that reads the caller's view of the nodes' epochs (ARGV[#ARGV], in
# its code, not its comments) must be sent with it appended (``views``), or
# every node answers STALE and the mutant tests a lock that grants nothing.
_APPLY = """
import re, sys
from tests.faults import mutants
from redlock_async._engine._node import Script
mutants.apply({name!r})
for module in [m for n, m in sys.modules.items() if n.startswith("redlock_async")]:
    for attribute, script in vars(module).items():
        if isinstance(script, Script):
            code = re.sub(rb"--[^\\n]*", b"", script.source)
            reads_view = b"ARGV[#ARGV]" in code
            assert reads_view == script.views, (module.__name__, attribute, script.views)
"""

# Every module global a renewal is sent through gets a mutated script.
_RENEWALS = """
from tests.faults import mutants
from redlock_async._core import _batch, _commands, _scripts
from redlock_async._kinds import _multilock, _rwlock, _semaphore
paths = [(_commands, "EXTEND"), (_rwlock, "EXTEND"), (_semaphore, "EXTEND"),
         (_multilock, "EXTEND"), (_multilock, "MULTI_EXTEND"), (_rwlock, "READ_EXTEND"),
         (_batch, "EXTEND_MANY")]
mutants.apply("renewal-shortens")
for module, name in paths:
    mutated = getattr(module, name)
    assert mutated.sha != getattr(_scripts, name).sha, (module.__name__, name)
"""


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("name", MUTANTS)
def test_the_mutant_applies(name: str) -> None:
    result = _run(_APPLY.format(name=name))
    assert result.returncode == 0, result.stderr


def test_renewal_shortens_reaches_every_renewal_path() -> None:
    result = _run(_RENEWALS)
    assert result.returncode == 0, result.stderr
