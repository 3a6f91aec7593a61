"""The command table: every command a simulated node knows, with its arity and where it may run.

The commands come from the library's scripts (``redlock_async/lua/``) and
drivers (``_engine/resp/``, ``_engine/redispy/``, as redis-py 8 sends them:
``HELLO 3``, ``CLIENT SETINFO``, ``CLIENT MAINT_NOTIFICATIONS``), plus
``TYPE`` and ``FLUSHALL`` for tests. A name not in the table raises
:class:`~tests.sim.replies.NotModelled`.

Arity is Redis's: ``n`` exactly, ``-n`` at least ``n`` words, the name included.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, NamedTuple

from . import datacmds, servercmds, zsetcmds
from .keyspace import Keyspace
from .replies import Error, NotModelled, Reply, Verbatim

if TYPE_CHECKING:
    from .node import Session, SimNode

__all__ = ["COMMANDS", "Spec", "lookup"]

DataHandler = Callable[[Keyspace, list[bytes], int], Reply]
ServerHandler = Callable[["SimNode", "Session", list[bytes], int], Reply]


class Spec(NamedTuple):
    """One command: its name (lowercase, as errors spell it), arity and handlers."""

    name: str
    arity: int
    data: DataHandler | None  # runs on the session's database
    server: ServerHandler | None  # runs on the node
    script: bool = True  # may run inside a script
    pubsub: bool = False  # may run on a RESP2 connection in subscribed mode
    resp3: Callable[[Reply, list[bytes]], Reply] | None = None  # the reply's RESP3 shape
    # A container (SCRIPT, CLIENT): its subcommands, and Redis 7.0's others (not modelled).
    subcommands: Mapping[bytes, Spec] | None = None
    others: frozenset[bytes] = frozenset()


def _doubles(reply: Reply, args: list[bytes]) -> Reply:
    """A score (bytes) as RESP3 sends it: a double."""
    return float(reply) if type(reply) is bytes else reply


def _map(reply: Reply, args: list[bytes]) -> Reply:
    if type(reply) is not list:
        return reply
    flat: list[bytes] = reply  # type: ignore[assignment]
    return dict(zip(flat[::2], flat[1::2], strict=True))


def _scored(reply: Reply, args: list[bytes]) -> Reply:
    """WITHSCORES: RESP3 sends [member, double] pairs, not a flat array."""
    if type(reply) is not list or not any(arg.upper() == b"WITHSCORES" for arg in args[4:]):
        return reply
    flat: list[bytes] = reply  # type: ignore[assignment]
    return [[member, float(score)] for member, score in zip(flat[::2], flat[1::2], strict=True)]


def _info(reply: Reply, args: list[bytes]) -> Reply:
    return Verbatim(reply) if type(reply) is bytes else reply


def _data(name: str, arity: int, handler: DataHandler, **kw: object) -> Spec:
    return Spec(name, arity, handler, None, **kw)  # type: ignore[arg-type]


def _server(name: str, arity: int, handler: ServerHandler, **kw: object) -> Spec:
    return Spec(name, arity, None, handler, **kw)  # type: ignore[arg-type]


def _container(name: str, subcommands: list[Spec], others: bytes) -> Spec:
    table = {spec.name.split("|")[1].upper().encode(): spec for spec in subcommands}
    return Spec(
        name, -2, None, None, script=False, subcommands=table, others=frozenset(others.split())
    )


_SPECS = [
    _data("get", 2, datacmds.get),
    _data("set", -3, datacmds.set_),
    _data("incr", 2, datacmds.incr),
    _data("del", -2, datacmds.del_),
    _data("exists", -2, datacmds.exists),
    _data("type", 2, datacmds.type_),
    _data("pttl", 2, datacmds.pttl),
    _data("pexpire", -3, datacmds.pexpire),
    _data("hget", 3, datacmds.hget),
    _data("hset", -4, datacmds.hset),
    _data("hdel", -3, datacmds.hdel),
    _data("hgetall", 2, datacmds.hgetall, resp3=_map),
    _data("zadd", -4, zsetcmds.zadd),
    _data("zrem", -3, zsetcmds.zrem),
    _data("zscore", 3, zsetcmds.zscore, resp3=_doubles),
    _data("zcard", 2, zsetcmds.zcard),
    _data("zrank", 3, zsetcmds.zrank),
    _data("zrange", -4, zsetcmds.zrange, resp3=_scored),
    _data("zrangebyscore", -4, zsetcmds.zrangebyscore, resp3=_scored),
    _data("zremrangebyscore", 4, zsetcmds.zremrangebyscore),
    _server("time", 1, servercmds.time),
    _server("info", -1, servercmds.info, resp3=_info),
    _server("ping", -1, servercmds.ping, pubsub=True),
    _server("select", 2, servercmds.select),
    _server("flushall", -1, servercmds.flushall),
    _server("publish", 3, servercmds.publish, pubsub=False),
    _server("spublish", 3, servercmds.spublish),
    _server("eval", -3, servercmds.eval_, script=False),
    _server("evalsha", -3, servercmds.evalsha, script=False),
    _container(
        "script",
        [
            _server("script|load", 3, servercmds.script_load, script=False),
            _server("script|exists", -3, servercmds.script_exists, script=False),
            _server("script|flush", -2, servercmds.script_flush, script=False),
        ],
        b"DEBUG HELP KILL",
    ),
    _server("auth", -2, servercmds.auth, script=False),
    _server("hello", -1, servercmds.hello, script=False),
    _container(
        "client",
        [_server("client|setname", 3, servercmds.client_setname, script=False)],
        # Not SETINFO, MAINT_NOTIFICATIONS (redis-py 8 sends them): Redis 7.2's and later.
        b"CACHING GETNAME GETREDIR HELP ID INFO KILL LIST NO-EVICT PAUSE REPLY TRACKING "
        b"TRACKINGINFO UNBLOCK UNPAUSE",
    ),
    _server("subscribe", -2, servercmds.subscribe, script=False, pubsub=True),
    _server("unsubscribe", -1, servercmds.unsubscribe, script=False, pubsub=True),
    _server("ssubscribe", -2, servercmds.ssubscribe, script=False, pubsub=True),
    _server("sunsubscribe", -1, servercmds.sunsubscribe, script=False, pubsub=True),
]

COMMANDS: dict[bytes, Spec] = {}
for _spec in _SPECS:
    COMMANDS[_spec.name.encode()] = COMMANDS[_spec.name.upper().encode()] = _spec


def lookup(name: bytes) -> Spec | None:
    """The command ``name`` (any case)."""
    spec = COMMANDS.get(name)
    if spec is None:
        spec = COMMANDS.get(name.upper())
        if spec is not None and len(COMMANDS) < 1024:
            COMMANDS[name] = spec  # the spelling seen, for next time
    return spec


def resolve(args: list[bytes]) -> Spec | Error:
    """The command ``args`` names, its subcommand for a container; the error
    Redis gives first for an unknown subcommand. Raises NotModelled for a
    command (or subcommand) not in the table."""
    spec = lookup(args[0])
    if spec is None:
        raise NotModelled(f"command {args[0]!r}")
    table = spec.subcommands
    if table is None or len(args) < 2:
        return spec
    word = args[1].upper()
    found = table.get(word)
    if found is not None:
        return found
    if word in spec.others:
        raise NotModelled(f"{spec.name.upper()} {word.decode(errors='replace')}")
    given = args[1].decode(errors="replace")
    return Error(f"ERR unknown subcommand '{given}'. Try {spec.name.upper()} HELP.")
