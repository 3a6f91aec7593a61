"""Node URL parameters beyond ``db``, ``username`` and ``password``, read by redis-py.

``rediss://host?ssl_ca_certs=/etc/ca.pem&ssl_certfile=…`` takes the same
parameters as ``redis.asyncio.Redis.from_url``: redis-py's own
``parse_url`` casts their values, and a redis-py connection object is built
from them once, at parse time, so a parameter redis-py would refuse at the
first connection is refused here, when the Redlock is made.

A parameter redis-py does not take is refused by its *name*, never its
value: a mistyped ``pasword=...`` must be found by the name the user wrote.
Two readings of a name hide it still: a name holding one of the URL's
secrets (``?hunter2=1``: a password in the wrong place) is shown with the
secret as ``***``, and a name right after a secret parameter's value
(``password=ab&cd``) may be the rest of that value - a raw ``&`` in a
password - so it is counted, with that said, not shown.
"""

from __future__ import annotations

import difflib
import inspect
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote_plus

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

__all__ = ["CONNECTION_CLASSES", "OPTION_NAMES", "Options", "parse_options", "withheld"]

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
    scheme: str,
    items: list[tuple[str, str]],
    shown: str,
    secrets: Iterable[str],
    withheld: Mapping[str, str] | None = None,
) -> Options:
    """The parameters ``items`` (decoded keys, raw values) of a ``scheme`` URL, cast by redis-py.

    ``shown`` is the URL without secrets, for messages; ``secrets`` (and any
    ``…password`` parameter) are hidden from any redis-py message quoted,
    and from the names of parameters refused. ``withheld``: unknown names
    that may be values (name -> why: :func:`withheld`): counted,
    with why, not shown.
    Raises ConfigurationError when redis-py would refuse a parameter or its
    value, naming every parameter it does not take.
    """
    if not items:
        return ()
    accepted = _ACCEPTED[scheme]
    unknown = sorted({key for key, _ in items} - accepted)
    if unknown:
        hidden = [
            *secrets,
            *(
                text
                for key, value in items
                if "password" in key
                for text in (value, unquote_plus(value))
            ),
        ]
        refusal = _refusal(scheme, unknown, hidden, withheld or {})
        raise ConfigurationError(f"node URL {shown!r} {refusal}")
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


def withheld(query: str, own: frozenset[str], secret_keys: frozenset[str]) -> dict[str, str]:
    """Unknown names in the URL query ``query`` a message must not show, each to why.

    ``own``: the names the URL parser reads itself (``db``, ``password``...),
    ``secret_keys`` those of them whose values are secret.

    A name is the user's to see, but two readings make one a value:
    ``?password=ab&cd`` - ``cd`` is a parameter, or the rest of a password
    with a raw ``&``; and ``?hunter2`` - an item without ``=`` is a name
    without a value, or a value without a name (a password in the wrong
    place). A name redis-py knows is a parameter, and ends a secret's value.
    """
    found: dict[str, str] = {}
    secret: str | None = None
    for item in query.split("&"):
        if not item:
            continue
        text, equals, _ = item.partition("=")
        key = unquote_plus(text)
        if key in own or key in OPTION_NAMES:
            secret = key if key in secret_keys or "password" in key else None
        elif secret is not None:
            found.setdefault(
                key,
                f"right after {secret!r} (not shown: it may be the rest of that value; "
                "write a '&' in a value as %26)",
            )
        elif not equals:
            found.setdefault(
                key, "without '=' (not shown: it may be a value, a password in the wrong place?)"
            )
    return found


def _refusal(
    scheme: str, unknown: list[str], secrets: list[str], withheld: Mapping[str, str]
) -> str:
    """Why the parameters ``unknown`` are refused, each named (see the module doc)."""
    tls = [key for key in unknown if scheme != "rediss" and key in _ACCEPTED["rediss"]]
    if tls and len(tls) == len(unknown):
        return f"has TLS parameter(s) without TLS: {', '.join(tls)} (use rediss://)"
    skip = {*tls, *withheld}
    named = [_name(key, scheme, secrets) for key in unknown if key not in skip]
    reasons = Counter(withheld[key] for key in unknown if key in withheld)
    for number, (why, count) in enumerate(sorted(reasons.items())):
        named.append(f"{'and ' if named and not number else ''}{count} {why}")
    refusal = f"has unsupported parameter(s): {', '.join(named)}"
    if tls:
        refusal += f"; and TLS parameter(s) without TLS: {', '.join(tls)} (use rediss://)"
    return refusal


def _name(key: str, scheme: str, secrets: list[str]) -> str:
    """``key`` quoted for a message, any secret of the URL in it as ``***``; with the
    name it may be a typo of."""
    shown = key
    for secret in sorted(secrets, key=len, reverse=True):
        if secret:
            shown = shown.replace(secret, "***")
    close = None
    if shown == key:  # else no suggestion: which name it is close to would tell of the secret
        known = sorted(_ACCEPTED[scheme] | {"db", "password", "username"})
        close = next(iter(difflib.get_close_matches(key, known, n=1)), None)
    if len(shown) > 64:
        shown = shown[:60] + "..."
    return repr(shown) + (f" (did you mean {close!r}?)" if close else "")
