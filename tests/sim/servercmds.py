"""The node's own commands: scripts, INFO, TIME, the drivers' handshakes, pub/sub.

Each takes the node, the session (a client connection, or a script's own:
``SELECT`` inside a script changes the script's database only, as in Redis
7.0), the command's words and the node's clock (ms). Replies and errors are
Redis 7.0.15's, read off the server installed here (``tests/sim/diff.py``
checks them).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from .lua import lua
from .replies import (
    NOREPLY,
    NOT_AN_INTEGER,
    SYNTAX,
    Error,
    NotModelled,
    Reply,
    Status,
    parse_int,
)

if TYPE_CHECKING:
    from .node import Session, SimNode

__all__ = [
    "auth",
    "client_setname",
    "eval_",
    "evalsha",
    "flushall",
    "hello",
    "info",
    "ping",
    "publish",
    "script_exists",
    "script_flush",
    "script_load",
    "select",
    "spublish",
    "ssubscribe",
    "subscribe",
    "sunsubscribe",
    "time",
    "unsubscribe",
]

OK = Status("OK")
DATABASES = 16
VERSION = b"7.0.15"
NOSCRIPT = Error("NOSCRIPT No matching script. Please use EVAL.")
_WRONGPASS = Error("WRONGPASS invalid username-password pair or user is disabled.")


def time(node: SimNode, session: Session, args: list[bytes], now: int) -> Reply:
    live = node.clock()  # live, even inside a script (gettimeofday)
    return [b"%d" % (live // 1000), b"%d" % (live % 1000 * 1000)]


def ping(node: SimNode, session: Session, args: list[bytes], now: int) -> Reply:
    if len(args) > 2:
        return Error("ERR wrong number of arguments for 'ping' command")
    if session.subscribed and session.proto == 2:
        return [b"pong", args[1] if len(args) > 1 else b""]
    return args[1] if len(args) > 1 else Status("PONG")


def select(node: SimNode, session: Session, args: list[bytes], now: int) -> Reply:
    db = parse_int(args[1])
    if db is None:
        return NOT_AN_INTEGER
    if not 0 <= db < DATABASES:
        return Error("ERR DB index is out of range")
    session.db = db
    return OK


def flushall(node: SimNode, session: Session, args: list[bytes], now: int) -> Reply:
    if len(args) > 2 or (len(args) == 2 and args[1].upper() not in (b"SYNC", b"ASYNC")):
        return SYNTAX
    for db in node.dbs:
        db.flush()
    return OK


# INFO -----------------------------------------------------------------------

_SECTIONS = frozenset({"server", "replication", "memory"})
_UNMODELLED = frozenset(
    {"clients", "persistence", "stats", "cpu", "modules", "commandstats"}
    | {"errorstats", "latencystats", "cluster", "keyspace", "all", "everything", "default"}
)


def info(node: SimNode, session: Session, args: list[bytes], now: int) -> Reply:
    if len(args) == 1:
        raise NotModelled("INFO without a section (the drivers ask for 'server')")
    words = {arg.decode(errors="replace").lower() for arg in args[1:]}
    for word in words & _UNMODELLED:
        raise NotModelled(f"INFO {word}")
    texts = []  # in Redis's order of sections, whatever the order asked
    if "server" in words:
        texts.append(_server_section(node, now))
    if "replication" in words:
        texts.append(_replication_section(node))
    if "memory" in words:
        texts.append(_memory_section(node))
    return "\r\n".join(texts).encode()


def _server_section(node: SimNode, now: int) -> str:
    uptime = now // 1000 - node.started // 1000
    fields = [
        ("redis_version", VERSION.decode()),
        ("redis_git_sha1", "00000000"),
        ("redis_git_dirty", "0"),
        ("redis_build_id", "5e55e55e55e55e55"),
        ("redis_mode", "standalone"),
        ("os", "Simulated"),
        ("arch_bits", "64"),
        ("monotonic_clock", "simulated"),
        ("multiplexing_api", "simulated"),
        ("atomicvar_api", "c11-builtin"),
        ("gcc_version", "0.0.0"),
        ("process_id", str(node.pid)),
        ("process_supervised", "no"),
        ("run_id", node.run_id),
        ("tcp_port", str(node.port)),
        ("server_time_usec", str(now * 1000)),
        ("uptime_in_seconds", str(uptime)),
        ("uptime_in_days", str(uptime // 86400)),
        ("hz", "10"),
        ("configured_hz", "10"),
        ("lru_clock", str(now // 1000 & 0xFFFFFF)),
        ("executable", "/usr/bin/redis-server"),
        ("config_file", ""),
        ("io_threads_active", "0"),
    ]
    return "# Server\r\n" + "".join(f"{k}:{v}\r\n" for k, v in fields)


def _replication_section(node: SimNode) -> str:
    fields = [
        ("role", "master"),
        ("connected_slaves", "0"),
        ("master_failover_state", "no-failover"),
        ("master_replid", node.replid),
        ("master_replid2", "0" * 40),
        ("master_repl_offset", "0"),
        ("second_repl_offset", "-1"),
        ("repl_backlog_active", "0"),
        ("repl_backlog_size", "1048576"),
        ("repl_backlog_first_byte_offset", "0"),
        ("repl_backlog_histlen", "0"),
    ]
    return "# Replication\r\n" + "".join(f"{k}:{v}\r\n" for k, v in fields)


def _memory_section(node: SimNode) -> str:
    # Only what the census reads (lua/census.lua: may the node evict?).
    return f"# Memory\r\nmaxmemory:{node.maxmemory}\r\nmaxmemory_policy:{node.maxmemory_policy}\r\n"


# Scripts --------------------------------------------------------------------


def _numkeys(args: list[bytes]) -> int | Error:
    numkeys = parse_int(args[2])
    if numkeys is None:
        return NOT_AN_INTEGER
    if numkeys < 0:
        return Error("ERR Number of keys can't be negative")
    if numkeys > len(args) - 3:
        return Error("ERR Number of keys can't be greater than number of args")
    return numkeys


def load(node: SimNode, body: bytes) -> bytes | Error:
    """Compile ``body`` and add it to the node's script cache: its SHA1, or the error."""
    if body[:2] == b"#!":
        raise NotModelled("a script with a shebang line (#!lua flags=...)")
    sha = hashlib.sha1(body).hexdigest().encode()
    error = lua.compile(sha, body)
    if error is not None:
        return error
    node.scripts.add(sha)
    return sha


def eval_(node: SimNode, session: Session, args: list[bytes], now: int) -> Reply:
    numkeys = _numkeys(args)
    if isinstance(numkeys, Error):
        return numkeys
    sha = load(node, args[1])
    if isinstance(sha, Error):
        return sha
    return node.run_script(session, sha, args[3:], numkeys, now)


def evalsha(node: SimNode, session: Session, args: list[bytes], now: int) -> Reply:
    numkeys = _numkeys(args)
    if isinstance(numkeys, Error):
        return numkeys
    sha = args[1].lower()
    if sha not in node.scripts:
        return NOSCRIPT
    return node.run_script(session, sha, args[3:], numkeys, now)


def script_load(node: SimNode, session: Session, args: list[bytes], now: int) -> Reply:
    return load(node, args[2])


def script_exists(node: SimNode, session: Session, args: list[bytes], now: int) -> Reply:
    return [int(sha.lower() in node.scripts) for sha in args[2:]]


def script_flush(node: SimNode, session: Session, args: list[bytes], now: int) -> Reply:
    if len(args) > 3:
        return Error("ERR wrong number of arguments for 'script|flush' command")
    if len(args) == 3 and args[2].upper() not in (b"SYNC", b"ASYNC"):
        return Error("ERR SCRIPT FLUSH only support SYNC|ASYNC option")
    node.flush_scripts()
    return OK


# Handshakes -----------------------------------------------------------------


def _login(node: SimNode, session: Session, user: bytes | None, password: bytes) -> Reply:
    if user is not None and user != b"default":
        return _WRONGPASS
    if node.password is None:
        if user is None:
            return Error(
                "ERR AUTH <password> called without any password configured for the "
                "default user. Are you sure your configuration is correct?"
            )
    elif password != node.password.encode():
        return _WRONGPASS
    session.authed = True
    return OK


def auth(node: SimNode, session: Session, args: list[bytes], now: int) -> Reply:
    if len(args) > 3:
        return SYNTAX
    if len(args) == 3:
        return _login(node, session, args[1], args[2])
    return _login(node, session, None, args[1])


def hello(node: SimNode, session: Session, args: list[bytes], now: int) -> Reply:
    proto = session.proto
    if len(args) > 1:
        version = parse_int(args[1])
        if version is None:
            return Error("ERR Protocol version is not an integer or out of range")
        if version not in (2, 3):
            return Error("NOPROTO unsupported protocol version")
        proto = version
    name: bytes | None = None
    i = 2
    while i < len(args):
        word = args[i].upper()
        if word == b"AUTH" and i + 2 < len(args):
            answer = _login(node, session, args[i + 1], args[i + 2])
            if isinstance(answer, Error):
                return answer
            i += 3
        elif word == b"SETNAME" and i + 1 < len(args):
            name = args[i + 1]
            i += 2
        else:
            return Error(f"ERR Syntax error in HELLO option '{args[i].decode(errors='replace')}'")
    if not session.authed:
        return Error(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the "
            "HELLO AUTH <user> <pass> option can be used to authenticate the client and select "
            "the RESP protocol version at the same time"
        )
    session.proto = proto
    if name is not None:
        session.name = name
    return {
        b"server": b"redis",
        b"version": VERSION,
        b"proto": proto,
        b"id": session.client_id,
        b"mode": b"standalone",
        b"role": b"master",
        b"modules": [],
    }


def client_setname(node: SimNode, session: Session, args: list[bytes], now: int) -> Reply:
    if any(c <= 32 or c >= 127 for c in args[2]):
        return Error("ERR Client names cannot contain spaces, newlines or special characters.")
    session.name = args[2]
    return OK


# Pub/sub --------------------------------------------------------------------


def publish(node: SimNode, session: Session, args: list[bytes], now: int) -> Reply:
    return node.pubsub.publish(False, args[1], args[2])


def spublish(node: SimNode, session: Session, args: list[bytes], now: int) -> Reply:
    return node.pubsub.publish(True, args[1], args[2])


def subscribe(node: SimNode, session: Session, args: list[bytes], now: int) -> Reply:
    node.pubsub.subscribe(session, False, args[1:])
    return NOREPLY


def ssubscribe(node: SimNode, session: Session, args: list[bytes], now: int) -> Reply:
    node.pubsub.subscribe(session, True, args[1:])
    return NOREPLY


def unsubscribe(node: SimNode, session: Session, args: list[bytes], now: int) -> Reply:
    node.pubsub.unsubscribe(session, False, args[1:])
    return NOREPLY


def sunsubscribe(node: SimNode, session: Session, args: list[bytes], now: int) -> Reply:
    node.pubsub.unsubscribe(session, True, args[1:])
    return NOREPLY
