"""redlock_async for threads: Django views, Celery tasks, management commands, scripts.

``from redlock_async.sync import Redlock`` takes the arguments of
:class:`redlock_async.Redlock`; its locks block the calling thread, and run
on one event-loop thread per ``Redlock`` (``_portal.py``). The errors are
those of :mod:`redlock_async`. See docs/sync.md.
"""

from __future__ import annotations

from .._exports import load
from ._locks import Lock as Lock
from ._locks import RWLock as RWLock
from ._redlock import Redlock as Redlock

__all__ = ["Lock", "RWLock", "Redlock"]

# The errors raised here are redlock_async's: named as the package shows them
# (which its first use of a public name sets up).
load()

# Show public objects as living here, not in private modules.
for _name in __all__:
    globals()[_name].__module__ = __name__
del _name
