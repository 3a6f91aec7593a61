"""redlock_async: asyncio-native distributed locks over a quorum of Redis nodes.

The public names are re-exported here; the modules behind them are private.
They are imported on first use, all at once: the package's pytest plugin
(``redlock_async.testing.plugin``) loads into every pytest run wherever the
package is installed, and must not pay for redis-py and the engine there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._base._version import __version__ as __version__

if TYPE_CHECKING:
    from ._base._config import LockOptions as LockOptions
    from ._base._config import RedlockConfig as RedlockConfig
    from ._base._errors import ConfigurationError as ConfigurationError
    from ._base._errors import LockBusy as LockBusy
    from ._base._errors import LockLost as LockLost
    from ._base._errors import LockNotAcquired as LockNotAcquired
    from ._base._errors import LockNotOwned as LockNotOwned
    from ._base._errors import NodeConnectionError as NodeConnectionError
    from ._base._errors import NodeError as NodeError
    from ._base._errors import NodeResponseError as NodeResponseError
    from ._base._errors import NodeTimeoutError as NodeTimeoutError
    from ._base._errors import QuorumUnavailable as QuorumUnavailable
    from ._base._errors import RedlockError as RedlockError
    from ._base._errors import Votes as Votes
    from ._core._holderinfo import Holder as Holder
    from ._core._lock import Lock as Lock
    from ._kinds._multilock import MultiLock as MultiLock
    from ._kinds._rwlock import ReadLock as ReadLock
    from ._kinds._rwlock import RWLock as RWLock
    from ._kinds._rwlock import WriteLock as WriteLock
    from ._kinds._semaphore import SemaphoreLock as SemaphoreLock
    from ._redlock import Redlock as Redlock

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
