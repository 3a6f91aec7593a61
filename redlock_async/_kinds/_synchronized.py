"""``Redlock.synchronized``: a coroutine function whose every call runs under a lock."""

from __future__ import annotations

import functools
import inspect
import string
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from .._base._errors import ConfigurationError
from .._core._lock import Lock, LockKeywords

__all__ = ["name_builder", "synchronized"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


def synchronized(
    make_lock: Callable[..., Lock], name: str | Callable[..., str], options: LockKeywords
) -> Callable[[Callable[_P, Awaitable[_R]]], Callable[_P, Coroutine[Any, Any, _R]]]:
    """The decorator: ``make_lock(name, **options)`` guards each call (see Redlock.synchronized)."""
    if not (isinstance(name, str) or callable(name)):
        raise ConfigurationError(f"name must be a str or a callable, not {type(name).__name__}")

    def decorate(
        func: Callable[_P, Awaitable[_R]],
    ) -> Callable[_P, Coroutine[Any, Any, _R]]:
        if not inspect.iscoroutinefunction(func):
            raise ConfigurationError(
                f"synchronized() decorates coroutine functions (async def), not {func!r}"
            )
        lock_name = name_builder(name, func)

        @functools.wraps(func)
        async def locked(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            async with make_lock(lock_name(args, kwargs), **options):
                return await func(*args, **kwargs)

        return locked

    return decorate


def name_builder(
    name: str | Callable[..., str], func: Callable[..., object]
) -> Callable[[tuple[Any, ...], dict[str, Any]], str]:
    """How a synchronized call's lock name is made from its arguments."""
    if not isinstance(name, str):
        builder = name
        return lambda args, kwargs: builder(*args, **kwargs)
    try:
        fields = [field for _, field, _, _ in string.Formatter().parse(name) if field is not None]
    except ValueError as exc:
        raise ConfigurationError(f"name template {name!r}: {exc}") from None
    if not fields:
        literal = name.replace("{{", "{").replace("}}", "}")
        return lambda args, kwargs: literal
    signature = inspect.signature(func)
    for field in fields:
        root = field.split(".", 1)[0].split("[", 1)[0]
        if root not in signature.parameters:
            raise ConfigurationError(
                f"name template {name!r} refers to {root!r}, which is not a parameter "
                f"of {func.__qualname__}; write {{{{ and }}}} for literal braces"
            )

    def build(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return name.format_map(bound.arguments)

    return build
