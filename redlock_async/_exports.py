"""The package's public names, imported on first use, all at once (see ``__init__.py``)."""

from __future__ import annotations

import sys
from importlib import import_module

__all__ = ["HOMES", "load"]

# Where each public name lives (``__init__.py`` imports the same for type checkers).
HOMES: dict[str, str] = {
    "LockOptions": "_base._config",
    "Holder": "_core._holderinfo",
    "RedlockConfig": "_base._config",
    "ConfigurationError": "_base._errors",
    "LockBusy": "_base._errors",
    "LockLost": "_base._errors",
    "LockNotAcquired": "_base._errors",
    "LockNotOwned": "_base._errors",
    "NodeConnectionError": "_base._errors",
    "NodeError": "_base._errors",
    "NodeResponseError": "_base._errors",
    "NodeTimeoutError": "_base._errors",
    "QuorumUnavailable": "_base._errors",
    "RedlockError": "_base._errors",
    "Votes": "_base._errors",
    "Lock": "_core._lock",
    "MultiLock": "_kinds._multilock",
    "Redlock": "_redlock",
    "ReadLock": "_kinds._rwlock",
    "RWLock": "_kinds._rwlock",
    "WriteLock": "_kinds._rwlock",
    "SemaphoreLock": "_kinds._semaphore",
}


def load() -> None:
    """Import every public name into the package, as an eager ``__init__`` would."""
    package = sys.modules["redlock_async"]
    for name, home in HOMES.items():
        obj = getattr(import_module(f"redlock_async.{home}"), name)
        # Show public objects as living in the package, not in private modules.
        if getattr(obj, "__module__", "").startswith("redlock_async._"):
            obj.__module__ = "redlock_async"
        setattr(package, name, obj)
