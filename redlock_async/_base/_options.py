"""Node URL parameters beyond ``db``, ``username`` and ``password``, read by redis-py.

``rediss://host?ssl_ca_certs=/etc/ca.pem&ssl_certfile=…`` takes the same
parameters as ``redis.asyncio.Redis.from_url``: redis-py's own
``parse_url`` casts their values, and a redis-py connection object is built
from them once, at parse time, so a parameter redis-py would refuse at the
first connection is refused here, when the Redlock is made. Only parameter
*names* redis-py knows are ever repeated in a message: an unknown key may be
a password written in the wrong place.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any

from redis.asyncio.connection import (
    URL_QUERY_ARGUMENT_PARSERS,
    AbstractConnection,
    Connection,
    ConnectionPool,
    SSLConnection,
    UnixDomainSocketConnection,
)
from redis.asyncio.connection import parse_url as redis_parse_url
from redis.exceptions import RedisError

from ._errors import ConfigurationError

__all__ = ["CONNECTION_CLASSES", "OPTION_NAMES", "Options", "parse_options"]

Options = tuple[tuple[str, object], ...]
"""Parsed URL parameters, as keyword arguments of a redis-py connection pool."""

CONNECTION_CLASSES: dict[str, type[AbstractConnection]] = {
    "redis": Connection,
    "rediss": SSLConnection,
    "unix": UnixDomainSocketConnection,
}

# Parameters whose value is a Python object (a class, a callable, a Retry) or
# that the URL itself names (host, port, socket path): text cannot set them.
_NOT_FROM_TEXT = frozenset(
    {
        "connection_class",
        "credential_provider",
        "driver_info",
        "encoder_class",
        "event_dispatcher",
        "himport_registry",
        "host",
        "maint_notifications_config",
        "maint_notifications_pool_handler",
        "maintenance_notification_hash",
        "maintenance_state",
        "orig_host_address",
        "orig_socket_connect_timeout",
        "orig_socket_timeout",
        "oss_cluster_maint_notifications_handler",
        "parser",
        "parser_class",
        "path",
        "port",
        "redis_connect_func",
        "retry",
        "retry_on_error",
        "socket_keepalive_options",
        "socket_type",
    }
)


def _parameters(classes: Iterable[type]) -> frozenset[str]:
    names: set[str] = set()
    for cls in classes:
        for klass in cls.__mro__:
            init = klass.__dict__.get("__init__")
            if init is None or klass is object:
                continue
            for param in inspect.signature(init).parameters.values():
                if param.kind not in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                    names.add(param.name)
    names.discard("self")
    return frozenset(names)


_ACCEPTED = {
    scheme: _parameters((cls, ConnectionPool)) - _NOT_FROM_TEXT
    for scheme, cls in CONNECTION_CLASSES.items()
}
OPTION_NAMES: frozenset[str] = _parameters(
    (*CONNECTION_CLASSES.values(), ConnectionPool)
) | frozenset(URL_QUERY_ARGUMENT_PARSERS)
"""Every parameter name redis-py knows: safe to repeat in a message."""


def parse_options(
    scheme: str, items: list[tuple[str, str]], shown: str, secrets: Iterable[str]
) -> Options:
    """The parameters ``items`` (decoded keys, raw values) of a ``scheme`` URL, cast by redis-py.

    ``shown`` is the URL without secrets, for messages; ``secrets`` (and any
    ``…password`` parameter) are hidden from any redis-py message quoted.
    Raises ConfigurationError when redis-py would refuse a parameter or its
    value.
    """
    if not items:
        return ()
    accepted = _ACCEPTED[scheme]
    unknown = sorted({key for key, _ in items} - accepted)
    if unknown:
        raise ConfigurationError(f"node URL {shown!r} {_refusal(scheme, unknown)}")
    query = "&".join(f"{key}={value}" for key, value in items)
    try:
        # The scheme and host are placeholders: only the query is read here.
        kwargs: dict[str, Any] = dict(redis_parse_url(f"redis://localhost/?{query}"))
    except ValueError as exc:  # "Invalid value for 'NAME' in connection URL."
        raise ConfigurationError(f"node URL {shown!r}: {exc}") from None
    kwargs.pop("host", None)
    options = tuple(sorted(kwargs.items()))
    where: dict[str, Any] = {"path": "/"} if scheme == "unix" else {"host": "localhost"}
    try:
        # What redis-py does at the first connection: refuse bad values now.
        pool = ConnectionPool(connection_class=CONNECTION_CLASSES[scheme], **where, **kwargs)
        pool.connection_class(**pool.connection_kwargs)
    except (TypeError, ValueError, RedisError) as exc:
        text = str(exc)
        hidden = [*secrets, *(str(v) for k, v in kwargs.items() if "password" in k)]
        for secret in sorted(hidden, key=len, reverse=True):
            if secret:
                text = text.replace(secret, "***")
        raise ConfigurationError(f"node URL {shown!r} has a bad parameter: {text}") from None
    return options


def _refusal(scheme: str, unknown: list[str]) -> str:
    named = [key for key in unknown if key in OPTION_NAMES]
    hidden = len(unknown) - len(named)
    listed = ", ".join([*named, *([f"{hidden} not shown"] if hidden else [])])
    if named and not hidden and scheme != "rediss" and set(named) <= _ACCEPTED["rediss"]:
        return f"has TLS parameter(s) without TLS: {listed} (use rediss://)"
    return f"has unsupported parameter(s): {listed}"
