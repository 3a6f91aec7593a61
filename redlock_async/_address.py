"""Parsing node URLs, and printing them without secrets."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar
from urllib.parse import parse_qs, unquote, urlsplit

from ._errors import ConfigurationError

__all__ = ["Address", "connect", "parse_url", "redact_url"]

P = TypeVar("P", bound=asyncio.Protocol)

_QUERY_KEYS = frozenset({"db", "password", "username"})


@dataclass(frozen=True, slots=True)
class Address:
    """Where a node lives and how to log in. ``display`` is safe to print."""

    display: str
    host: str | None = None
    port: int = 6379
    path: str | None = None  # unix socket
    db: int = 0
    username: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)
    tls: bool = False


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (userinfo and query)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable url>"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:***@{hostport}" if ":" in userinfo else f"{user}@{hostport}"
    query = "&".join(
        "password=***" if item.split("=", 1)[0] == "password" else item
        for item in parts.query.split("&")
        if item
    )
    out = f"{parts.scheme}://{netloc}{parts.path}"
    return f"{out}?{query}" if query else out


def parse_url(url: str) -> Address:
    """Parse a ``redis://``, ``rediss://`` or ``unix://`` URL.

    Raises ConfigurationError naming the (redacted) URL when it cannot be used.
    """
    shown = redact_url(url)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ConfigurationError(f"cannot parse node URL {shown!r}: bad port") from exc
    if parts.scheme not in ("redis", "rediss", "unix"):
        raise ConfigurationError(
            f"node URL {shown!r} must start with redis://, rediss:// or unix://"
        )
    query = parse_qs(parts.query, keep_blank_values=True)
    unknown = sorted(set(query) - _QUERY_KEYS)
    if unknown:
        raise ConfigurationError(f"node URL {shown!r} has unsupported parameter(s) {unknown}")
    username = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password is not None else None
    if "password" in query:
        password = query["password"][-1]
    if "username" in query:
        username = query["username"][-1]
    db_text = query["db"][-1] if "db" in query else None
    if parts.scheme == "unix":
        if not parts.path:
            raise ConfigurationError(f"node URL {shown!r} names no socket path")
        return Address(
            shown, path=parts.path, db=_db(db_text, shown), username=username, password=password
        )
    if not parts.hostname:
        raise ConfigurationError(f"node URL {shown!r} names no host")
    path_db = parts.path.strip("/")
    return Address(
        shown,
        host=parts.hostname,
        port=port or 6379,
        db=_db(db_text if db_text is not None else (path_db or None), shown),
        username=username,
        password=password,
        tls=parts.scheme == "rediss",
    )


def _db(text: str | None, shown: str) -> int:
    if text is None:
        return 0
    if not text.isdigit():
        raise ConfigurationError(f"node URL {shown!r} has a database that is not a number")
    return int(text)


async def connect(address: Address, factory: Callable[[], P], timeout: float) -> P:
    """Open a plain TCP or unix-socket connection to ``address`` within ``timeout``."""
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(timeout):
        if address.path is not None:
            _, protocol = await loop.create_unix_connection(factory, address.path)
        else:
            host = address.host or "localhost"
            _, protocol = await loop.create_connection(factory, host, address.port)
    return protocol
