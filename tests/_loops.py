"""The event loops the suite runs on: asyncio's own and, where installed, uvloop.

In-process async tests get both through pytest-asyncio's loop factories (see
``pytest_asyncio_loop_factories`` in conftest.py; ``--loop`` picks one).
Child processes started by a test (the CLI under test, a waiter in
another process) run on the test's own loop: the test passes its loop's
name down (:func:`name_of`, :func:`run`, :func:`child_command`). The fault
suite's workers take ``--loop`` (tests/faults/worker.py).

Run as ``python -m tests._loops LOOP -m MODULE [ARG...]``, it runs MODULE as
``python -m MODULE`` would, with every ``asyncio.run`` of it on LOOP.
"""

from __future__ import annotations

import asyncio
import os
import runpy
import sys
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
LoopFactory = Callable[[], asyncio.AbstractEventLoop]

REPO = Path(__file__).resolve().parents[1]


def _factories() -> dict[str, LoopFactory]:
    factories: dict[str, LoopFactory] = {"asyncio": asyncio.new_event_loop}
    try:
        import uvloop
    except ImportError:  # Windows, or an install without the test extra
        pass
    else:
        factories["uvloop"] = uvloop.new_event_loop
    return factories


LOOPS: dict[str, LoopFactory] = _factories()
"""Every loop available here, by name; asyncio's own first."""


def name_of(loop: asyncio.AbstractEventLoop) -> str:
    """``"uvloop"`` for a uvloop loop, else ``"asyncio"``."""
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"


def factory(name: str) -> LoopFactory:
    """The factory of the loop called ``name``; fails clearly when it is missing."""
    try:
        return LOOPS[name]
    except KeyError:
        raise SystemExit(f"event loop {name!r} is not available (have: {list(LOOPS)})") from None


def run(main: Coroutine[Any, Any, T], loop: str = "asyncio") -> T:
    """``asyncio.run(main)`` on the loop called ``loop``."""
    with asyncio.Runner(loop_factory=factory(loop)) as runner:
        return runner.run(main)


def child_command(loop: str, module: str) -> list[str]:
    """The argv prefix that runs ``python -m module`` on ``loop``.

    asyncio's loop: plain ``python -m module``. Another: through this module,
    which needs the repository on the child's path (:func:`child_env`).
    """
    if loop == "asyncio":
        return [sys.executable, "-m", module]
    return [sys.executable, "-m", "tests._loops", loop, "-m", module]


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment, the repository on PYTHONPATH, plus ``extra``."""
    env = dict(os.environ)
    paths = [str(REPO), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.update(extra or {})
    return env


def _main() -> None:
    if len(sys.argv) < 4 or sys.argv[2] != "-m":
        raise SystemExit("usage: python -m tests._loops LOOP -m MODULE [ARG...]")
    loop, module = sys.argv[1], sys.argv[3]
    make = factory(loop)

    def run_on_loop(main: Coroutine[Any, Any, T], *, debug: bool | None = None) -> T:
        with asyncio.Runner(debug=debug, loop_factory=make) as runner:
            return runner.run(main)

    # The module under test calls asyncio.run itself (e.g. the CLI): send
    # those calls to the chosen loop. A test process only, never the library.
    asyncio.run = run_on_loop
    sys.argv = [module, *sys.argv[4:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    _main()
