"""The package's public names, imported on first use, all at once (see ``__init__.py``)."""

from __future__ import annotations

import sys
from importlib import import_module

__all__ = ["HOMES", "load"]

# Where each public name lives (``__init__.py`` imports the same for type checkers).
HOMES: dict[str, str] = {
    "LockOptions": "_config",
    "Holder": "_holderinfo",
    "RedlockConfig": "_config",
    "ConfigurationError": "_errors",
    "LockBusy": "_errors",
    "LockLost": "_errors",
    "LockNotAcquired": "_errors",
    "LockNotOwned": "_errors",
    "NodeConnectionError": "_errors",
    "NodeError": "_errors",
    "NodeResponseError": "_errors",
    "NodeTimeoutError": "_errors",
    "QuorumUnavailable": "_errors",
    "RedlockError": "_errors",
    "Votes": "_errors",
    "Lock": "_lock",
    "MultiLock": "_multilock",
    "Redlock": "_redlock",
    "ReadLock": "_rwlock",
    "RWLock": "_rwlock",
    "WriteLock": "_rwlock",
    "SemaphoreLock": "_semaphore",
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
