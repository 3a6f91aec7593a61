"""The drivers' handshakes, with and without a password, against the real server.

The random check (``diff.py``) runs on a server without a password; this
one walks through what each driver sends when a connection opens - the
lean driver's ``AUTH [user] password``, ``SELECT``, ``PING``; redis-py 8's
``HELLO 3 [AUTH user password]``, ``CLIENT MAINT_NOTIFICATIONS``, ``CLIENT
SETINFO`` - with right and wrong passwords, and a few wrong forms, on a
server started with ``--requirepass`` and on one without. Each reply must
be the real server's (``HELLO``'s connection id aside).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from .diff import normal, typed
from .node import SimNode
from .real import RealConn
from .replies import NOREPLY

__all__ = ["HANDSHAKES", "compare"]

_PW = b"s3cret"

HANDSHAKES: list[tuple[int, list[bytes]]] = [
    # connection, command: each connection starts unauthenticated, in RESP2
    (0, [b"PING"]),
    (0, [b"GET", b"k"]),
    (0, [b"AUTH", b"wrong"]),
    (0, [b"AUTH", _PW]),  # the lean driver, a URL with a password
    (0, [b"SELECT", b"2"]),
    (0, [b"PING"]),
    (0, [b"SET", b"k", b"v"]),
    (1, [b"HELLO", b"3"]),
    (1, [b"HELLO", b"3", b"AUTH", b"default", b"wrong"]),
    (1, [b"HELLO", b"3", b"AUTH", b"default", _PW]),  # redis-py with a password
    (1, [b"CLIENT", b"MAINT_NOTIFICATIONS", b"ON", b"moving-endpoint-type", b"internal-fqdn"]),
    (1, [b"CLIENT", b"SETINFO", b"LIB-NAME", b"redis-py"]),
    (1, [b"CLIENT", b"SETINFO", b"LIB-VER", b"8.1.0"]),
    (1, [b"SELECT", b"2"]),
    (1, [b"GET", b"k"]),
    (1, [b"HGETALL", b"k"]),
    (2, [b"AUTH", b"default", _PW]),  # the lean driver, a URL with a user name too
    (2, [b"AUTH", b"nobody", _PW]),
    (2, [b"AUTH"]),
    (2, [b"AUTH", b"a", b"b", b"c"]),
    (3, [b"HELLO", b"2", b"AUTH", b"default", _PW, b"SETNAME", b"sim"]),
    (3, [b"HELLO"]),
    (3, [b"HELLO", b"3", b"SETNAME"]),
    (3, [b"CLIENT", b"SETNAME", b"has space"]),
    (3, [b"SSUBSCRIBE", b"ch"]),
    (3, [b"GET", b"k"]),
    (3, [b"PING", b"x"]),
]


def compare(
    port: int, password: bytes | None, steps: Sequence[tuple[int, list[bytes]]]
) -> list[str]:
    """Run ``steps`` on the real server at ``port`` and on a node with ``password``;
    the steps whose replies differ, described."""
    node = SimNode(
        lambda: int(time.time() * 1000), password=None if password is None else password.decode()
    )
    conns: dict[int, RealConn] = {}
    found = []
    try:
        for conn, command in steps:
            real = conns.get(conn)
            if real is None:
                real = conns[conn] = RealConn(port)
            mine: object
            if command[0] == b"SSUBSCRIBE":  # confirmed with a push, read as one
                real.send(command)
                theirs: object = real.pending(0.2)
                assert node.execute(command, conn) is NOREPLY
                mine = [typed(push, node.sessions[conn].proto) for push in node.take(conn)]
            else:
                theirs = real.call(command)[0]
                reply = node.execute(command, conn)
                mine = typed(reply, node.sessions[conn].proto)
            if normal(mine) != normal(theirs):
                found.append(f"{command!r} on connection {conn}: real {theirs!r}, sim {mine!r}")
    finally:
        for real in conns.values():
            real.close()
    return found
