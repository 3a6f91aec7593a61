"""What ``lock()`` remembers between calls, so a handler's lock per request is cheap.

Request handlers make a lock per call with the same few settings and names:
validating the options and encoding the keys once per distinct value, not
once per call, is most of what ``Redlock.lock()`` would otherwise cost.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any, Final

from .._base._config import LockOptions, check_ttl
from .._base._errors import ConfigurationError
from .._base._keys import KeyLayout, check_name
from .._base._peers import unknown_keyword
from .._base._timing import validity
from .._core._commands import ExclusiveCommands
from .._core._lock import REDLOCKS, LockKeywords, OnLost, Unset

__all__ = ["LOCK_KEYWORDS", "CommandsCache", "OptionsCache"]

LOCK_KEYWORDS: Final = LockKeywords.__optional_keys__
"""The keywords every lock factory takes."""

_MAX_OPTIONS = 256
_MAX_LAYOUTS = 1024


class OptionsCache:
    """Validated :class:`LockOptions` by keywords, for one Redlock's drift factor
    and default ``unavailable_timeout``."""

    __slots__ = ("_drift_factor", "_options", "_unavailable")

    def __init__(self, drift_factor: float, unavailable_timeout: float | None) -> None:
        self._drift_factor = drift_factor
        self._unavailable = unavailable_timeout  # the lock's when not given (REDLOCKS)
        self._options: dict[tuple[object, ...], LockOptions] = {}

    def __call__(
        self,
        ttl: float = 30.0,
        auto_extend: bool = True,
        timeout: float | None = None,
        fencing: bool = False,
        cancel_on_lost: bool = True,
        fair: bool = False,
        on_lost: OnLost | None = None,
        max_attempts: int | None = None,
        min_validity: float = 0.0,
        unavailable_timeout: float | Unset | None = REDLOCKS,
    ) -> LockOptions:
        spec: tuple[object, ...] = (ttl, auto_extend, timeout, fencing, cancel_on_lost, fair)
        if on_lost is not None:
            spec += (on_lost,)
        if max_attempts is not None or min_validity:
            spec += (max_attempts, min_validity, "limits")
        if isinstance(unavailable_timeout, Unset):  # not given (REDLOCKS): the Redlock's
            unavailable_timeout = self._unavailable
        else:
            spec += (unavailable_timeout, "unavailable")
        options = None
        # Only exact types may share a cache entry: True == 1, yet ttl=True is an error.
        cacheable = (
            (type(ttl) is float or type(ttl) is int)
            and (timeout is None or type(timeout) is float or type(timeout) is int)
            and type(auto_extend) is bool
            and type(fencing) is bool
            and type(cancel_on_lost) is bool
            and type(fair) is bool
            and (max_attempts is None or type(max_attempts) is int)
            and (type(min_validity) is float or type(min_validity) is int)
            and (
                unavailable_timeout is None
                or type(unavailable_timeout) is float
                or type(unavailable_timeout) is int
            )
        )
        if cacheable:
            # Not contextlib.suppress: this runs on every lock() call.
            try:
                options = self._options.get(spec)
            except TypeError:  # an unhashable on_lost callable
                options = None
        if options is None:
            options = LockOptions(
                ttl=ttl,
                auto_extend=auto_extend,
                timeout=timeout,
                fencing=fencing,
                cancel_on_lost=cancel_on_lost,
                fair=fair,
                on_lost=on_lost,
                max_attempts=max_attempts,
                min_validity=min_validity,
                unavailable_timeout=unavailable_timeout,
            )
            # LockOptions cannot know the drift factor; cached options passed this.
            check_ttl("ttl", options.ttl, self._drift_factor)
            best = validity(options.ttl, 0.0, 0.0, self._drift_factor)  # granted in no time
            if options.min_validity >= best:
                raise ConfigurationError(
                    f"min_validity={options.min_validity!r} can never be met: a grant of "
                    f"ttl={options.ttl!r} is valid for at most {best:.3f}s (ttl less the "
                    "drift allowance)"
                )
            if cacheable and len(self._options) < _MAX_OPTIONS:
                with contextlib.suppress(TypeError):
                    self._options[spec] = options
        return options

    def of(self, function: str, keywords: Mapping[str, Any]) -> LockOptions:
        """The options of ``keywords`` given to ``function`` (a factory's qualified
        name). An unknown keyword raises TypeError naming ``function``, and this
        library's keyword when it is another lock library's (_base/_peers.py)."""
        try:
            return self(**keywords)
        except TypeError:
            # Looked for only now: a check before the call would cost every call.
            error = unknown_keyword(function, keywords, LOCK_KEYWORDS)
            if error is None:
                raise  # not an unknown keyword: that TypeError stands
            raise error from None


class CommandsCache:
    """The exclusive commands (and with them the :class:`KeyLayout`) of recent names."""

    __slots__ = ("_commands", "_prefix")

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._commands: dict[str, ExclusiveCommands] = {}

    def __call__(self, name: str) -> ExclusiveCommands:
        """The commands of ``name``; raises ConfigurationError for a bad name."""
        commands = self._commands.get(name) if type(name) is str else None
        if commands is None:
            commands = ExclusiveCommands(KeyLayout(self._prefix, check_name(name)))
            if len(self._commands) >= _MAX_LAYOUTS:
                self._commands.clear()
            self._commands[name] = commands
        return commands
