"""Key layout: every key of one lock name shares one Redis Cluster hash slot.

A lock named ``orders:42`` under the default prefix lives at::

    redlock:{orders:42}

The part in braces is the cluster hash tag. Braces and ``%`` inside the name
are percent-encoded (``{`` -> ``%7B``, ``}`` -> ``%7D``, ``%`` -> ``%25``), so
the tag is always exactly the (encoded) name, never empty and never cut short
by a brace the user wrote. The encoding is injective: two names never share a
key. The prefix may not contain braces, for the same reason.
"""

from __future__ import annotations

from ._errors import ConfigurationError

__all__ = ["check_name", "check_prefix", "lock_key", "rw_keys", "wake_channel"]

_ESCAPES = str.maketrans({"%": "%25", "{": "%7B", "}": "%7D"})


def check_name(name: object) -> str:
    """Return ``name`` if it is a usable lock name, else raise ConfigurationError."""
    if not isinstance(name, str):
        raise ConfigurationError(f"name must be a str, not {type(name).__name__}")
    if not name:
        raise ConfigurationError("name must be a non-empty str")
    lock_key("", name)  # raises for names that cannot be encoded
    return name


def check_prefix(prefix: object) -> str:
    if not isinstance(prefix, str):
        raise ConfigurationError(f"prefix must be a str, not {type(prefix).__name__}")
    if "{" in prefix or "}" in prefix:
        raise ConfigurationError(
            f"prefix={prefix!r} may not contain braces: the library owns the hash tag"
        )
    try:
        prefix.encode()
    except UnicodeEncodeError as exc:
        raise ConfigurationError(
            f"prefix={prefix!r} cannot be encoded as UTF-8: {exc.reason}"
        ) from None
    return prefix


def lock_key(prefix: str, name: str) -> bytes:
    """The key holding an exclusive grant's token.

    Raises ConfigurationError when ``name`` (or ``prefix``) cannot be encoded
    as UTF-8, e.g. a lone surrogate such as ``"a\\ud800"``.
    """
    try:
        return f"{prefix}{{{name.translate(_ESCAPES)}}}".encode()
    except UnicodeEncodeError as exc:
        raise ConfigurationError(
            f"name {name!r} cannot be encoded as UTF-8 for a Redis key: {exc.reason}"
        ) from None


def rw_keys(prefix: str, name: str) -> tuple[bytes, bytes, bytes]:
    """The keys of a read-write lock: writer, reader set, writer-waiting marker.

    They share the exclusive lock key's hash tag (one slot), with suffixes that
    keep them apart from it: ``redlock:{NAME}:w``, ``:r`` and ``:ww``.
    """
    base = lock_key(prefix, name)
    return base + b":w", base + b":r", base + b":ww"


def wake_channel(prefix: str, name: str) -> bytes:
    """The sharded pub/sub channel on which releases of ``name`` are announced."""
    return lock_key(prefix, name) + b":wake"
