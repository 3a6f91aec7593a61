"""Parsing node URLs, printing them without secrets, telling servers apart, connecting.

A URL's *display* form is built only from parts that are never secret: the
scheme, the host, the port, a numeric database and a socket path. Anything
that could be a user name or password is replaced by ``***`` or left out.
When a URL can be read more than one way (a raw ``@``, ``/``, ``?`` or ``#``
in a password), the display hides more, never less.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar
from urllib.parse import unquote, unquote_plus

from ._errors import ConfigurationError
from ._options import OPTION_NAMES, Options, parse_options, withheld
from ._world import current

__all__ = ["Address", "Endpoint", "connect", "node_identity", "parse_url", "redact_url"]

P = TypeVar("P", bound=asyncio.Protocol)

_SCHEMES = ("redis", "rediss", "unix")
# Query keys the library understands; only ``db`` ever has its value shown.
_QUERY_KEYS = frozenset({"db", "password", "username"})
_SECRET_KEYS = frozenset({"password", "username"})
_SCHEME = re.compile(r"[a-z][a-z0-9+.-]{0,15}")
_HOST = re.compile(r"[a-z0-9_.-]+|\[[0-9a-f:.]+\]")


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
    # Parameters for redis-py (``ssl_ca_certs``…); may hold secrets (``ssl_password``).
    options: Options = field(default=(), repr=False)

    @property
    def lean(self) -> bool:
        """True when the lean driver can serve it: no TLS, no parameter only redis-py reads."""
        return not self.tls and not self.options

    def auth_command(self) -> tuple[object, ...] | None:
        """The AUTH command a new connection sends first; None without a password."""
        if self.password is None:
            return None
        if self.username is None:
            return (b"AUTH", self.password)
        return (b"AUTH", self.username, self.password)


@dataclass(frozen=True, slots=True)
class _Parts:
    """A URL cut into pieces; ``userinfo`` and ``query`` may hold secrets."""

    scheme: str
    userinfo: str | None
    hostport: str
    path: str
    query: str
    ambiguous: bool  # another reading would make ``hostport``/``path`` secret


def _split(url: str) -> _Parts | None:
    scheme, sep, rest = url.partition("://")
    if not sep:
        return None
    scheme = scheme.lower()
    # RFC 3986 reading: the authority ends at the first "/", "?" or "#".
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    authority, tail = rest[:end], rest[end:]
    ambiguous = False
    if "@" in tail:
        path, _, query = tail.partition("?")
        if (
            "@" not in path
            and "@" not in query.partition("#")[2]
            and all(
                (key in _QUERY_KEYS or key in OPTION_NAMES) and "@" not in key_text
                for key_text, key in (
                    (item.partition("=")[0], unquote_plus(item.partition("=")[0]))
                    for item in query.partition("#")[0].split("&")
                    if "@" in item
                )
            )
        ):
            # "?password=p@ss": the RFC reading holds, but in another one
            # everything before the last "@" is a password: show nothing.
            ambiguous = True
        else:
            # A raw "/", "?" or "#" in a password: the userinfo runs to the
            # last "@" (nothing after it is read as part of a password).
            at = rest.rfind("@")
            authority, tail = rest[: at + 1], rest[at + 1 :]
            # ... unless the part before it may hold a query ("?password=a@b"):
            # then what follows the "@" may be the rest of a password.
            ambiguous = "=" in authority.partition("?")[2]
            end = min((i for i in (tail.find(c) for c in "/?#") if i >= 0), default=len(tail))
            authority, tail = authority + tail[:end], tail[end:]
    userinfo: str | None = None
    if "@" in authority:
        userinfo, _, authority = authority.rpartition("@")
    tail = tail.split("#", 1)[0]  # fragments mean nothing here, and are never shown
    path, _, query = tail.partition("?")
    return _Parts(scheme, userinfo, authority, path, query, ambiguous)


def _query_items(query: str) -> list[tuple[str, str]]:
    # Keys are compared after percent-decoding: "pass%77ord" is "password".
    return [
        (unquote_plus(key), value)
        for key, value in (item.partition("=")[::2] for item in query.split("&") if item)
    ]


def _display(parts: _Parts) -> str:
    scheme = parts.scheme if _SCHEME.fullmatch(parts.scheme) else "?"
    if parts.ambiguous:
        return f"{scheme}://***"
    out = f"{scheme}://" + ("***@" if parts.userinfo is not None else "")
    if scheme == "unix":
        out += parts.path
    else:
        host, port = _host_port(parts.hostport)
        if host is not None and _HOST.fullmatch(host):
            out += host
        if port is not None and _digits(port):
            out += f":{port}"
        if parts.path == "/" or _digits(parts.path.strip("/")):
            out += parts.path
    shown = []
    for key, value in _query_items(parts.query):
        if key == "db" and _digits(value):
            shown.append(f"db={value}")
        elif key in _QUERY_KEYS:
            shown.append(f"{key}=***")
    return f"{out}?{'&'.join(shown)}" if shown else out


def _host_port(hostport: str) -> tuple[str | None, str | None]:
    """``(host, port)`` of ``host[:port]`` or ``[v6][:port]``; None where absent."""
    if hostport.startswith("["):
        close = hostport.find("]")
        if close < 0:
            return None, None
        host, rest = hostport[: close + 1], hostport[close + 1 :]
        if rest and not rest.startswith(":"):
            return None, None
        return host.lower(), rest[1:] if rest else None
    host, colon, port = hostport.partition(":")
    if ":" in port:
        return None, None
    return (host.lower() or None), (port if colon else None)


def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit()


def redact_url(url: str) -> str:
    """``url`` shown without secrets: user names, passwords, unknown parameters
    and fragments are hidden; only scheme, host, port, database and socket path
    remain. Never raises."""
    parts = _split(url)
    if parts is None:
        return "<url without scheme://>"
    return _display(parts)


def parse_url(url: str) -> Address:
    """Parse a ``redis://``, ``rediss://`` or ``unix://`` URL.

    Query parameters other than ``db``, ``username`` and ``password`` are
    those of ``redis.asyncio.Redis.from_url`` (``ssl_ca_certs``,
    ``ssl_certfile``, ``socket_keepalive``…), cast by redis-py's parser; a
    node with any of them (or ``rediss://``) is served through redis-py.
    Raises ConfigurationError naming the (redacted) URL when it cannot be used.
    """
    parts = _split(url)
    if parts is None:
        raise ConfigurationError("a node URL must start with redis://, rediss:// or unix://")
    shown = _display(parts)
    if parts.scheme not in _SCHEMES:
        raise ConfigurationError(
            f"node URL {shown!r} must start with redis://, rediss:// or unix://"
        )
    query = _query_items(parts.query)
    values = {  # the last one wins
        key: unquote_plus(value) for key, value in query if key in _QUERY_KEYS
    }
    username = password = None
    if parts.userinfo is not None:
        user, colon, secret = parts.userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if colon else None
    password = values.get("password", password)
    username = values.get("username", username)
    secrets = [
        username or "",
        password or "",
        parts.userinfo or "",
        *(unquote_plus(value) for key, value in query if key in _SECRET_KEYS),  # each, not the last
    ]
    options = parse_options(
        parts.scheme,
        [(key, value) for key, value in query if key not in _QUERY_KEYS],
        shown,
        secrets,
        withheld(parts.query, _QUERY_KEYS, _SECRET_KEYS),
    )
    db_text = values.get("db")
    if parts.scheme == "unix":
        if not parts.path:
            raise ConfigurationError(f"node URL {shown!r} names no socket path")
        return Address(
            shown,
            path=parts.path,
            db=_db(db_text, shown),
            username=username,
            password=password,
            options=options,
        )
    host, port_text = _host_port(parts.hostport)
    if host is None or not _HOST.fullmatch(host):
        raise ConfigurationError(f"node URL {shown!r} names no usable host")
    port = 6379
    if port_text is not None:
        if not _digits(port_text) or not 0 < int(port_text) < 65536:
            raise ConfigurationError(f"cannot parse node URL {shown!r}: bad port")
        port = int(port_text)
    path_db = parts.path.strip("/")
    return Address(
        shown,
        host=host.strip("[]"),
        port=port,
        db=_db(db_text if db_text is not None else (path_db or None), shown),
        username=username,
        password=password,
        tls=parts.scheme == "rediss",
        options=options,
    )


def _db(text: str | None, shown: str) -> int:
    if text is None:
        return 0
    if not _digits(text):
        raise ConfigurationError(f"node URL {shown!r} has a database that is not a number")
    return int(text)


Endpoint = tuple[str, str, int]
"""One way to reach a server: ``("tcp", ip, port)`` or ``("unix", realpath, 0)``."""

RESOLVED_FOR = 5.0
"""Seconds for which ``connect`` uses the addresses ``node_identity`` resolved.

A Redlock resolves its host names when it is made, and its first connections
follow within milliseconds: resolving each name again there took a trip to
the event loop's thread pool per node (and the pool's start), about a
millisecond of a process's first grant. Later connections resolve again: DNS
may have moved a node since."""

# (host, port) -> (when, the addresses getaddrinfo gave, in its order).
_resolved: dict[tuple[str, int], tuple[float, tuple[str, ...]]] = {}
_RESOLVED_LIMIT = 256


def node_identity(
    host: str | None, port: int = 6379, path: str | None = None
) -> frozenset[Endpoint]:
    """The endpoints of the server at ``host:port`` (or the unix socket ``path``).

    Two nodes whose sets intersect are one server, whatever the database
    number: each database would cast a vote of the same process. Host names
    are resolved with the world's ``getaddrinfo`` when this is called (at
    construction of a Redlock); a name that does not resolve is compared as
    its lowercased literal, so ``localhost`` and ``127.0.0.1`` are told apart
    only when resolution fails. The addresses found serve ``connect`` for
    ``RESOLVED_FOR`` seconds. Socket paths are compared after
    ``os.path.realpath``. An empty set means "unknown": nothing to compare.
    """
    if path is not None:
        return frozenset({("unix", os.path.realpath(path), 0)})
    if host is None:
        return frozenset()
    literal = host.strip("[]").lower().rstrip(".")
    try:
        return frozenset({("tcp", _canonical_ip(literal), port)})
    except ValueError:
        pass
    try:
        infos = current().getaddrinfo(literal, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return frozenset({("tcp", literal, port)})
    if literal == host:  # what connect() would resolve: keep it for a moment
        ips = (str(i[4][0]) for i in infos if i[0] in (socket.AF_INET, socket.AF_INET6))
        if len(_resolved) >= _RESOLVED_LIMIT:
            _resolved.clear()
        _resolved[host, port] = (current().monotonic(), tuple(dict.fromkeys(ips)))
    found = {
        ("tcp", _canonical_ip(str(info[4][0]).split("%", 1)[0]), port)
        for info in infos
        if info[0] in (socket.AF_INET, socket.AF_INET6)
    }
    return frozenset(found) or frozenset({("tcp", literal, port)})


def _canonical_ip(text: str) -> str:
    """One spelling per IP address (raises ValueError if ``text`` is not one)."""
    ip = ipaddress.ip_address(text)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


async def connect(address: Address, factory: Callable[[], P], timeout: float) -> P:
    """Open a plain TCP or unix-socket connection to ``address`` within ``timeout``.

    A host name ``node_identity`` resolved less than ``RESOLVED_FOR`` seconds
    ago is not resolved again: its addresses are tried in getaddrinfo's order.
    """
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(timeout):
        if address.path is not None:
            _, protocol = await loop.create_unix_connection(factory, address.path)
        else:
            host = address.host or "localhost"
            ips = _recently_resolved(host, address.port)
            if not ips:
                _, protocol = await loop.create_connection(factory, host, address.port)
            else:
                protocol = await _connect_first(loop, factory, ips, address.port)
    return protocol


def _recently_resolved(host: str, port: int) -> tuple[str, ...] | None:
    found = _resolved.get((host, port))
    if found is None or current().monotonic() - found[0] > RESOLVED_FOR:
        return None
    return found[1]


async def _connect_first(
    loop: asyncio.AbstractEventLoop, factory: Callable[[], P], ips: tuple[str, ...], port: int
) -> P:
    """Each address in turn, as create_connection tries a name's; the last error if none."""
    error: OSError | None = None
    for ip in ips:
        try:
            _, protocol = await loop.create_connection(factory, ip, port)
        except OSError as exc:
            error = exc
        else:
            return protocol
    assert error is not None
    raise error
