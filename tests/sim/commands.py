"""The command table: every command a simulated node knows, with its arity and where it may run.

The commands come from the library's scripts (``redlock_async/lua/``) and
drivers (``_engine/resp/``, ``_engine/redispy/``, as redis-py 8 sends them:
``HELLO 3``, ``CLIENT SETINFO``, ``CLIENT MAINT_NOTIFICATIONS``), plus
``TYPE`` and ``FLUSHALL`` for tests. A name not in the table raises
:class:`~tests.sim.replies.NotModelled`.

Arity is Redis's: ``n`` exactly, ``-n`` at least ``n`` words, the name included.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from . import datacmds, servercmds
from .keyspace import Keyspace
from .replies import Reply, Verbatim

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
    _data("zadd", -4, datacmds.zadd),
    _data("zrem", -3, datacmds.zrem),
    _data("zscore", 3, datacmds.zscore, resp3=_doubles),
    _data("zcard", 2, datacmds.zcard),
    _data("zrank", 3, datacmds.zrank),
    _data("zrange", -4, datacmds.zrange, resp3=_scored),
    _data("zrangebyscore", -4, datacmds.zrangebyscore, resp3=_scored),
    _data("zremrangebyscore", 4, datacmds.zremrangebyscore),
    _server("time", 1, servercmds.time),
    _server("info", -1, servercmds.info, resp3=_info),
    _server("ping", -1, servercmds.ping, pubsub=True),
    _server("select", 2, servercmds.select),
    _server("flushall", -1, servercmds.flushall),
    _server("publish", 3, servercmds.publish, pubsub=False),
    _server("spublish", 3, servercmds.spublish),
    _server("eval", -3, servercmds.eval_, script=False),
    _server("evalsha", -3, servercmds.evalsha, script=False),
    _server("script", -2, servercmds.script, script=False),
    _server("auth", -2, servercmds.auth, script=False),
    _server("hello", -1, servercmds.hello, script=False),
    _server("client", -2, servercmds.client, script=False),
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


def arity_ok(spec: Spec, n: int) -> bool:
    arity = spec.arity
    return n == arity if arity > 0 else n >= -arity
