"""Every planted bug the simulation lists still applies to the library as it is.

A mutant patches the library by name and by the text of its scripts (the
restart rule's edit every script that carries ``lua/_epoch.lua``); when
either changes, applying it must fail here, not silently test nothing in a
``run --mutant``. Each is applied in a fresh interpreter, as a run's
worker does. Whether each is caught is the long sweep's (docs/faults.md).
"""

from __future__ import annotations

import pytest

from ..faults.test_mutants import _run
from .mutants import MUTANTS

_APPLY = """
from tests.sim import mutants
mutants.apply({name!r})
"""

# The script edits reach every module that holds a granting or renewing script.
_EDITS = """
import sys
from redlock_async._engine import Script
from tests.sim import mutants
mutants.apply({name!r})
for module in [m for n, m in sys.modules.items() if n.startswith("redlock_async")]:
    for attribute, script in vars(module).items():
        if isinstance(script, Script) and script.views:
            fences = script.name in ("acquire", "rw_write_acquire", "fair_acquire")
            fresh = Script.load(script.name, grants=script.grants, views=True, fences=fences)
            assert script.sha != fresh.sha, (module.__name__, attribute)
"""

_EDITED = ("restart-no-epoch-check", "restart-record-never-raised", "restart-record-lowered")


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_the_mutant_applies(name: str) -> None:
    result = _run(_APPLY.format(name=name))
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("name", _EDITED)
def test_a_restart_rule_edit_reaches_every_granting_script(name: str) -> None:
    result = _run(_EDITS.format(name=name))
    assert result.returncode == 0, result.stderr
