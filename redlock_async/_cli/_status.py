"""``redlock-async status NAME``: who holds a lock, per node.

Each node answers one script (lua/status.lua) over the keys
:class:`~redlock_async._base._keys.KeyLayout` names; the summary counts votes
against the library's quorum (:func:`judge`). Exit 0 held, 1 free, 69
unknown (the nodes that did not answer could make a holder's quorum).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import time
from collections.abc import Sequence
from typing import Any, cast
from urllib.parse import urlsplit

from .._base._address import parse_url, redact_url
from .._base._keys import KeyLayout, check_name, check_prefix
from .._core._holderinfo import Holder
from .._core._scripts import STATUS
from .._engine import quorum_of
from .._engine._build import owned_client
from .._kinds._adopt import verdict
from .._whoholds import NodeView
from .._whoholds import judge as judge_holder
from ._exit import EX_FREE, EX_HELD, EX_UNKNOWN
from ._nodes import announce
from ._output import print_table

__all__ = ["judge", "status"]


async def status(args: argparse.Namespace) -> int:
    """Print each node's view of ``args.name`` and the verdict; the exit code (held/free/...)."""
    name = check_name(args.name)
    check_prefix(args.prefix)
    urls = announce(args)  # a ConfigurationError naming the (redacted) bad URL
    layout = KeyLayout(args.prefix, name)
    timeout = max(args.node_timeout, 1.0)  # an operator's tool: patience over speed
    rows = await asyncio.gather(*(_node_row(url, layout, timeout) for url in urls))
    verdict = judge(rows, quorum_of(len(urls)))
    if args.json:
        print(json.dumps({"name": name, **verdict, "nodes": rows}, indent=2))
    else:
        _print(name, rows, verdict)
    return _EXIT[verdict["state"]]


_EXIT = {"held": EX_HELD, "free": EX_FREE, "unknown": EX_UNKNOWN}


def judge(rows: Sequence[dict[str, Any]], quorum: int) -> dict[str, Any]:
    """The verdict over all nodes' rows: state ``held``, ``free`` or ``unknown``, and the holder.

    Held: one token (exclusive or writer), or live readers, on a quorum of
    nodes. Unknown: not held, but the nodes that did not answer could make a
    quorum with what the others show. Free: neither - leftovers of a failed
    attempt on too few nodes expire by themselves and do not stop a grant.
    ``holder``: who took the grant (host, pid, since, ttl, kind, readers), as
    ``Redlock.holder()`` reports it, from the same rows.
    """
    answered = [row for row in rows if row["error"] is None]
    silent = len(rows) - len(answered)
    summary = ""
    kind: str | None = None
    token: str | None = None
    ttls: list[int] = []
    # Each kind judged as Redlock.locked() judges the exclusive lock (verdict).
    states = []
    for field, label in (("exclusive", "exclusive"), ("writer", "write"), ("readers", "read")):
        if field == "readers":  # readers share: "some live reader" is the value
            values: list[object] = [True if row[field] > 0 else None for row in answered]
        else:
            values = [row[field] for row in answered]
        state, top = verdict(values, silent, quorum)
        states.append(state)
        if state == "held" and kind is None:
            kind, summary = label, "read-locked" if label == "read" else f"held ({label})"
            if field == "readers":
                ttls = [row["readers_ttl_ms"] for row in answered if row[field] > 0]
            else:
                token = cast(str, top)
                ttls = [row[field + "_ttl_ms"] for row in answered if row[field] == top]
    if kind is not None:
        state = "held"
    else:
        counts = [row for row in answered if row["exclusive"] or row["writer"] or row["readers"]]
        if "unknown" in states:
            state = "unknown"
            summary = f"unknown (only {len(answered)} of {len(rows)} nodes answered)"
        elif counts:
            state = "free"
            summary = "free, with leftovers on too few nodes (a failed attempt; they expire)"
        else:
            state, summary = "free", "free"
    # The grant is valid while a quorum keeps its key: the quorum-th longest ttl.
    ttl = sorted(ttls, reverse=True)[quorum - 1] if len(ttls) >= quorum else None
    readers = sorted((row["readers"] for row in answered), reverse=True)
    fences = [row["fencing_counter"] for row in answered if row["fencing_counter"] is not None]
    return {
        "state": state,
        "kind": kind,
        "summary": summary,
        "token": token,
        "ttl_ms": ttl,
        "readers": readers[quorum - 1] if len(readers) >= quorum else 0,
        # The exclusive lock's counter; a token it gave is the max over its quorum.
        "fencing_counter": max(fences) if fences else None,
        # Who took it is written in the grant's token (docs/keys.md).
        "holder": _holder_json(judge_holder([_view(row) for row in rows], quorum)[1]),
        "quorum": quorum,
        "answered": len(answered),
        "nodes_total": len(rows),
    }


_FIELDS = ("exclusive", "exclusive_ttl_ms", "writer", "writer_ttl_ms", "readers",
           "readers_ttl_ms", "writer_waiting", "fencing_counter", "rw_fencing_counter",
           "queued", "live_readers")  # fmt: skip


async def _node_row(url: str, layout: KeyLayout, timeout: float) -> dict[str, Any]:
    """One node's row: its view of the name, or ``error`` (one node's trouble is never a crash).

    Every row has every key (None where a node did not answer), so a script
    reads them all the same way.
    """
    row: dict[str, Any] = {"node": redact_url(url), "error": None, **dict.fromkeys(_FIELDS)}
    keys = (layout.lock, layout.writer, layout.readers, layout.writer_waiting,
            layout.fence, layout.rw_fence, layout.fair_queue, layout.rw_queue)  # fmt: skip
    # From the parsed address, not the URL: redis-py reads a raw "/" or
    # "?" in a password differently, and its error quoted part of it.
    client = owned_client(parse_url(url), timeout)
    try:
        async with asyncio.timeout(timeout * 2):
            reply = await client.eval(STATUS.source.decode(), len(keys), *keys)
        (token, ttl, wtoken, wttl, count, longest, waiting, fence, rwfence,
         queued, rwqueued, live) = reply  # fmt: skip
    except Exception as exc:
        row["error"] = _node_error(exc, url)
        return row
    finally:
        await client.aclose()
    row.update(
        exclusive=_full(token),
        exclusive_ttl_ms=ttl if token is not None else None,
        writer=_full(wtoken),
        writer_ttl_ms=wttl if wtoken is not None else None,
        readers=int(count),
        readers_ttl_ms=int(longest) if count else None,
        writer_waiting=bool(waiting),
        fencing_counter=int(fence) if fence is not None else None,
        rw_fencing_counter=int(rwfence) if rwfence is not None else None,
        queued=int(queued) + int(rwqueued),
        live_readers={_full(live[i]): int(live[i + 1]) for i in range(0, len(live) - 1, 2)},
    )
    return row


def _view(row: dict[str, Any]) -> NodeView | None:
    """A row as ``Redlock.holder()`` reads a node's answer; None for a node in error."""
    if row["error"] is not None:
        return None

    def raw(token: str | None) -> bytes | None:
        return None if token is None else token.encode()

    return NodeView(
        raw(row["exclusive"]),
        row["exclusive_ttl_ms"] if row["exclusive"] is not None else -2,
        raw(row["writer"]),
        row["writer_ttl_ms"] if row["writer"] is not None else -2,
        {token.encode(): ms for token, ms in (row.get("live_readers") or {}).items()},
    )


def _holder_json(holder: Holder | None) -> dict[str, Any] | None:
    if holder is None:
        return None
    found = dataclasses.asdict(holder)
    if math.isinf(holder.ttl):  # a key without expiry: JSON has no infinity
        found["ttl"] = None
    return found


def _node_error(exc: BaseException, url: str) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out"
    text = str(exc) or type(exc).__name__
    # redis-py quotes host and port, never the password; keep it that way.
    password = _password_of(url)
    if password:
        text = text.replace(password, "***")
    return text


def _password_of(url: str) -> str | None:
    try:
        return urlsplit(url).password
    except ValueError:
        return None


def _full(token: bytes | None) -> str | None:
    return None if token is None else token.decode(errors="replace")


def _short(token: str | None) -> str:
    if token is None:
        return "-"
    return token[:8] + "…" if len(token) > 8 else token


def _held(token: str | None, ttl_ms: int | None) -> str:
    return "-" if token is None else f"{_short(token)} {ttl_ms / 1000 if ttl_ms else 0:.1f}s"


def _print(name: str, rows: Sequence[dict[str, Any]], verdict: dict[str, Any]) -> None:
    # Token and ttl share a cell, and a waiting writer shows in the writer's:
    # the table fits 120 columns with whole node URLs and fencing counters.
    headers = ["node", "exclusive", "writer", "readers", "fence", "rw fence", "queued"]
    table: list[list[str]] = []
    for row in rows:
        if row["error"] is not None:
            table.append([row["node"], "unreachable"] + ["-"] * 5)
            continue
        writer = _held(row["writer"], row["writer_ttl_ms"])
        if row["writer_waiting"]:
            writer = "waiting" if writer == "-" else f"{writer}, waiting"
        readers = row["readers"]
        table.append([
            row["node"], _held(row["exclusive"], row["exclusive_ttl_ms"]), writer,
            f"{readers} {row['readers_ttl_ms'] / 1000:.1f}s" if readers else "0",
            "-" if row["fencing_counter"] is None else str(row["fencing_counter"]),
            "-" if row["rw_fencing_counter"] is None else str(row["rw_fencing_counter"]),
            str(row["queued"]),
        ])  # fmt: skip
    summary = verdict["summary"] + _by(verdict["token"], verdict["holder"])
    title = f"lock {name!r}: {summary}; quorum {verdict['quorum']} of {len(rows)}"
    print_table(title, headers, table)
    for row in rows:
        if row["error"] is not None:
            print(f"{row['node']}: {row['error']}")


def _by(token: str | None, holder: dict[str, Any] | None) -> str:
    """`` by HOST, pid PID, since TIME (N s ago)``; the token when the grant has no holder info."""
    if holder is None:
        return f" by {_short(token)}" if token else ""
    readers = holder["kind"] == "read"
    by = f" by {holder['readers']} readers" if readers else f" by {_short(token)}"
    if holder["host"] is None:
        return by + " (no holder info)"
    since = holder["since"]
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(since))
    ago = max(0.0, time.time() - since)  # the holder's clock may run ahead of ours
    who = f"{holder['host']}, pid {holder['pid']}, since {when} UTC ({ago:.1f}s ago)"
    if readers:
        return f"{by}, the longest-held {who}"
    of = " (a multilock's name)" if holder["kind"] == "multilock" else ""
    return f" by {who}{of}"
