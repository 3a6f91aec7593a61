"""redlock_async: asyncio-native distributed locks over a quorum of Redis nodes.

The public names are re-exported here; the modules behind them are private.
"""

from __future__ import annotations

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
from ._version import __version__ as __version__

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

# Show public objects as living in the package, not in private modules.
for _name in __all__:
    _obj = globals()[_name]
    if getattr(_obj, "__module__", "").startswith("redlock_async._"):
        _obj.__module__ = __name__
del _name, _obj
