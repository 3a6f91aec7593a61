"""``with`` on an asyncio object: say what to write instead.

Without this, ``with redlock.lock(...)`` fails with the interpreter's bare
"does not support the context manager protocol", which names neither
``async with`` nor the API for threads.
"""

from __future__ import annotations

from typing import ClassVar, NoReturn

__all__ = ["AsyncOnly"]


class AsyncOnly:
    """A base whose ``with`` raises a TypeError pointing to ``async with`` and to
    :mod:`redlock_async.sync`."""

    __slots__ = ()

    _with_what: ClassVar[str] = "a lock"  # what the object is called
    _with_call: ClassVar[str] = "redlock.lock(...)"  # what goes after `async with`

    def __enter__(self) -> NoReturn:
        raise TypeError(
            f"{self._with_what} of redlock_async is asynchronous: use "
            f"`async with {self._with_call}` inside a coroutine; from threads or "
            "synchronous code, use redlock_async.sync"
        )

    def __exit__(self, *exc_info: object) -> None:  # pragma: no cover - __enter__ raises
        pass
