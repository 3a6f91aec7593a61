"""The public names of ../shared/API.md, pinned."""

from __future__ import annotations

import redlock_async


def test_export_list_is_pinned() -> None:
    assert set(redlock_async.__all__) == {
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
    }


def test_public_objects_live_in_the_package() -> None:
    for name in redlock_async.__all__:
        obj = getattr(redlock_async, name)
        if isinstance(obj, type):
            assert obj.__module__ == "redlock_async", name


def test_error_tree() -> None:
    for name in ("ConfigurationError", "LockNotAcquired", "LockLost", "LockNotOwned", "NodeError"):
        assert issubclass(getattr(redlock_async, name), redlock_async.RedlockError)
    assert issubclass(redlock_async.ConfigurationError, ValueError)
    assert issubclass(redlock_async.NodeTimeoutError, TimeoutError)
    assert issubclass(redlock_async.NodeConnectionError, ConnectionError)
    # Both refusals are LockNotAcquired: code written before them still catches them.
    assert issubclass(redlock_async.LockBusy, redlock_async.LockNotAcquired)
    assert issubclass(redlock_async.QuorumUnavailable, redlock_async.LockNotAcquired)


def test_py_typed_is_shipped() -> None:
    from importlib import resources

    assert resources.files("redlock_async").joinpath("py.typed").is_file()
