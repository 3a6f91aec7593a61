"""redlock_async: asyncio-native distributed locks over a quorum of Redis nodes.

The public names are re-exported here; the modules behind them are private.
They are imported on first use, all at once: the package's pytest plugin
(``redlock_async.testing.plugin``) loads into every pytest run wherever the
package is installed, and must not pay for redis-py and the engine there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._version import __version__ as __version__

if TYPE_CHECKING:
    from ._config import LockOptions as LockOptions
    from ._config import RedlockConfig as RedlockConfig
    from ._errors import ConfigurationError as ConfigurationError
    from ._errors import LockBusy as LockBusy
    from ._errors import LockLost as LockLost
    from ._errors import LockNotAcquired as LockNotAcquired
    from ._errors import LockNotOwned as LockNotOwned
    from ._errors import NodeConnectionError as NodeConnectionError
    from ._errors import NodeError as NodeError
    from ._errors import NodeResponseError as NodeResponseError
    from ._errors import NodeTimeoutError as NodeTimeoutError
    from ._errors import QuorumUnavailable as QuorumUnavailable
    from ._errors import RedlockError as RedlockError
    from ._errors import Votes as Votes
    from ._holderinfo import Holder as Holder
    from ._lock import Lock as Lock
    from ._multilock import MultiLock as MultiLock
    from ._redlock import Redlock as Redlock
    from ._rwlock import ReadLock as ReadLock
    from ._rwlock import RWLock as RWLock
    from ._rwlock import WriteLock as WriteLock
    from ._semaphore import SemaphoreLock as SemaphoreLock

__all__ = [
    "ConfigurationError",
    "Holder",
    "Lock",
    "LockBusy",
    "LockLost",
    "LockNotAcquired",
    "LockNotOwned",
    "LockOptions",
    "MultiLock",
    "NodeConnectionError",
    "NodeError",
    "NodeResponseError",
    "NodeTimeoutError",
    "QuorumUnavailable",
    "RWLock",
    "ReadLock",
    "Redlock",
    "RedlockConfig",
    "RedlockError",
    "SemaphoreLock",
    "Votes",
    "WriteLock",
    "__version__",
]


def __getattr__(name: str) -> object:
    from ._exports import HOMES, load

    if name in HOMES:
        load()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
