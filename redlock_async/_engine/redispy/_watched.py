"""A granting script behind ``server_id.lua``: how redis-py's nodes are watched for restarts."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from redis.asyncio import Redis, RedisCluster

from .._node import SERVER_ID, Arg, Script
from .._restarts import Restarts
from ._kinds import errors

__all__ = ["watched"]


async def watched(
    client: Redis | RedisCluster,
    restarts: Restarts,
    noscript: tuple[type[Exception], ...],
    script: Script,
    keys: Sequence[bytes],
    args: Sequence[Arg],
) -> object:
    """``script`` (granting, or a split part of one) behind ``server_id.lua`` on one connection:
    redis-py reconnects on its own, so a restart can only be seen by
    asking: the pipeline keeps the two in order, so a vote from a server
    that just restarted is judged with that knowledge (told to ``restarts``).

    After a NOSCRIPT (scripts are loaded on first use, and again after a
    SCRIPT FLUSH) only what did not run is resent, as EVAL: an acquire
    that ran must not run again (it would answer 0 to its own grant).
    Resending is safe for ordering here, unlike on the lean driver: the
    cleanup of this attempt is chained after this command's outcome.
    ``noscript``: the client's NOSCRIPT classes (redis-py's, valkey-py's).
    """
    pipe = client.pipeline(transaction=False)
    pipe.evalsha(SERVER_ID.sha.decode(), 0)
    pipe.evalsha(script.sha.decode(), len(keys), *keys, *args)
    server, result = await pipe.execute(raise_on_error=False)
    if isinstance(result, noscript):
        # The script did not run: both again, in order, as EVAL.
        pipe = client.pipeline(transaction=False)
        pipe.eval(SERVER_ID.source.decode(), 0)
        pipe.eval(script.source.decode(), len(keys), *keys, *args)
        server, result = await pipe.execute(raise_on_error=False)
    elif isinstance(server, noscript):
        # The script ran but the server was not asked who it is: ask now.
        # A restart in between is seen as one and quarantines this vote.
        server = await client.eval(SERVER_ID.source.decode(), 0)
    if isinstance(server, list) and len(server) == 2:
        run_id, uptime = server
        restarts.observe_fields(
            run_id.encode() if isinstance(run_id, str) else bytes(run_id),
            float(uptime),
            asyncio.get_running_loop().time(),
        )
    elif isinstance(server, errors("ResponseError")):
        # INFO refused inside server_id.lua (an ACL without +info): fail closed.
        restarts.unknown(server)
    if isinstance(result, Exception):
        raise result
    return result
