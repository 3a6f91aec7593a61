"""``redlock-async status NAME``: who holds a lock, per node.

Each node answers one script (lua/status.lua) over the keys
:class:`~redlock_async._keys.KeyLayout` names; the summary counts votes
against the library's quorum. Exit 69 when fewer than a quorum answered.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

from .._address import parse_url, redact_url
from .._engine import quorum_of
from .._engine._build import owned_client
from .._keys import KeyLayout, check_name, check_prefix
from .._scripts import STATUS
from ._exit import EX_OK, EX_UNAVAILABLE
from ._nodes import urls as node_urls
from ._output import print_table

__all__ = ["status"]


async def status(args: argparse.Namespace) -> int:
    """Print each node's view of ``args.name`` and the summary; the exit code."""
    name = check_name(args.name)
    urls = node_urls(args)
    check_prefix(args.prefix)
    for url in urls:
        parse_url(url)  # a ConfigurationError naming the (redacted) bad URL
    layout = KeyLayout(args.prefix, name)
    timeout = max(args.node_timeout, 1.0)  # an operator's tool: patience over speed
    rows = await asyncio.gather(*(_node_row(url, layout, timeout) for url in urls))
    quorum = quorum_of(len(urls))
    answered = sum(1 for row in rows if "error" not in row)
    summary = _summary(rows, quorum, answered)
    if args.json:
        report = {"name": name, "quorum": quorum, "answered": answered, "state": summary,
                  "nodes": rows}  # fmt: skip
        print(json.dumps(report, indent=2))
    else:
        _print(name, rows, quorum, summary)
    return EX_OK if answered >= quorum else EX_UNAVAILABLE


async def _node_row(url: str, layout: KeyLayout, timeout: float) -> dict[str, Any]:
    """One node's row: its view of the name, or ``error`` (one node's trouble is never a crash)."""
    row: dict[str, Any] = {"node": redact_url(url)}
    keys = (layout.lock, layout.writer, layout.readers, layout.writer_waiting,
            layout.fence, layout.rw_fence, layout.fair_queue, layout.rw_queue)  # fmt: skip
    # From the parsed address, not the URL: redis-py reads a raw "/" or
    # "?" in a password differently, and its error quoted part of it.
    client = owned_client(parse_url(url), timeout)
    try:
        async with asyncio.timeout(timeout * 2):
            reply = await client.eval(STATUS.source.decode(), len(keys), *keys)
        (token, ttl, wtoken, wttl, count, longest, waiting, fence, rwfence,
         queued, rwqueued) = reply  # fmt: skip
    except Exception as exc:
        row["error"] = _node_error(exc, url)
        return row
    finally:
        await client.aclose()
    row.update(
        exclusive=_short(token),
        exclusive_ttl_ms=ttl if token is not None else None,
        writer=_short(wtoken),
        writer_ttl_ms=wttl if wtoken is not None else None,
        readers=int(count),
        readers_ttl_ms=int(longest) if count else None,
        writer_waiting=bool(waiting),
        fencing_counter=int(fence) if fence is not None else None,
        rw_fencing_counter=int(rwfence) if rwfence is not None else None,
        queued=int(queued) + int(rwqueued),
    )
    return row


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


def _short(token: bytes | None) -> str | None:
    if token is None:
        return None
    text = token.decode(errors="replace")
    return text[:8] + "…" if len(text) > 8 else text


def _summary(rows: Sequence[dict[str, Any]], quorum: int, answered: int) -> str:
    def count(pred: Callable[[dict[str, Any]], bool]) -> int:
        return sum(1 for row in rows if "error" not in row and pred(row))

    tokens = [row["exclusive"] for row in rows if row.get("exclusive")]
    top = max(set(tokens), key=tokens.count) if tokens else None
    if top is not None and tokens.count(top) >= quorum:
        return f"held (exclusive) by {top}"
    writers = [row["writer"] for row in rows if row.get("writer")]
    wtop = max(set(writers), key=writers.count) if writers else None
    if wtop is not None and writers.count(wtop) >= quorum:
        return f"write-locked by {wtop}"
    reading = count(lambda r: r["readers"] > 0)
    if reading >= quorum:
        return "read-locked"
    if answered < quorum:
        # The silent nodes could make up a quorum with a holder: nobody can say.
        return f"unknown (only {answered} of {len(rows)} nodes answered)"
    if tokens or writers or reading:
        return "partly held (no quorum: an attempt in flight, or leftovers expiring)"
    return "free"


def _seconds(ms: int | None) -> str:
    return "-" if ms is None else f"{ms / 1000:.1f}s"


def _print(name: str, rows: Sequence[dict[str, Any]], quorum: int, summary: str) -> None:
    headers = ["node", "exclusive", "ttl", "writer", "ttl", "readers", "writer waiting",
               "fence", "rw fence", "queued"]  # fmt: skip
    table: list[list[str]] = []
    for row in rows:
        if "error" in row:
            table.append([row["node"], "unreachable"] + ["-"] * 8)
            continue
        table.append([
            row["node"], row["exclusive"] or "-", _seconds(row["exclusive_ttl_ms"]),
            row["writer"] or "-", _seconds(row["writer_ttl_ms"]),
            f"{row['readers']} ({_seconds(row['readers_ttl_ms'])})" if row["readers"] else "0",
            "yes" if row["writer_waiting"] else "no",
            "-" if row["fencing_counter"] is None else str(row["fencing_counter"]),
            "-" if row["rw_fencing_counter"] is None else str(row["rw_fencing_counter"]),
            str(row["queued"]),
        ])  # fmt: skip
    print_table(f"lock {name!r}: {summary} (quorum {quorum} of {len(rows)})", headers, table)
    for row in rows:
        if "error" in row:
            print(f"{row['node']}: {row['error']}")
