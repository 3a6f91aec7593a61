"""Holder info in tokens and the quorum's view of who holds a name (issue 26): no sockets."""

from __future__ import annotations

import math
import os
import socket
import time

import pytest

from redlock_async import Holder
from redlock_async._core import _holderinfo as info
from redlock_async._core._holderinfo import HolderKind
from redlock_async._whoholds import NodeView, judge

from ._worlds import made_world

A = b"a" * 40 + b"@web-1:11:1700000000123"
B = b"b" * 40 + b"@web-2:22:1700000000456"
C = b"c" * 40 + b"@web-3:33:1700000000789"
BARE = b"d" * 40


def test_tokens_carry_host_pid_and_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(info, "_me", b"")
    tokens = info.HolderTokens(lambda: b"0" * 40)
    before = time.time()
    token = tokens()
    after = time.time()
    host, pid, since = info.parse(token) or ("", 0, 0.0)
    assert token.startswith(b"0" * 40 + b"@")
    assert (host, pid) == (socket.gethostname(), os.getpid())
    assert before - 0.001 <= since <= after
    assert info.TOKEN.fullmatch(token.decode())


def test_the_host_is_printable_ascii() -> None:
    world = made_world(hostname=lambda: "héte\nl:1")
    token = info.HolderTokens(lambda: b"0" * 40, world)()
    assert info.TOKEN.fullmatch(token.decode("ascii"))
    assert info.parse(token) is not None
    assert (info.parse(token) or ("",))[0] == "h\\xe9te?l:1"  # a colon in a host parses too


def test_the_process_identity_is_computed_once() -> None:
    calls = []

    def gethostname() -> str:
        calls.append(1)
        return "h"

    tokens = info.HolderTokens(lambda: b"0" * 40, made_world(hostname=gethostname))
    for _ in range(3):
        tokens()
    assert calls == [1]


def test_this_process_identity_is_cached_and_made_again_after_a_fork(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # What a forked child's hook leaves (_forget): the next token makes it again.
    monkeypatch.setattr(info, "_me", b"@parent:1:")
    tokens = info.HolderTokens(lambda: b"0" * 40)
    assert info.parse(tokens())[:2] == ("parent", 1)  # type: ignore[index]
    monkeypatch.setattr(info, "_me", b"")
    assert info.parse(tokens())[:2] == (socket.gethostname(), os.getpid())  # type: ignore[index]


def test_parse_takes_only_tokens_with_holder_info() -> None:
    assert info.parse(A) == ("web-1", 11, 1700000000.123)
    assert info.parse(b"m:" + A) == ("web-1", 11, 1700000000.123)  # a multilock's
    for other in (BARE, b"x" + A, A + b"\n", b"a" * 39 + b"@h:1:2", b"a" * 40 + b"@:1:2"):
        assert info.parse(other) is None


def view(
    token: bytes | None = None,
    ttl: int = -2,
    writer: bytes | None = None,
    writer_ttl: int = -2,
    readers: dict[bytes, int] | None = None,
) -> NodeView:
    return NodeView(token, ttl, writer, writer_ttl, readers or {})


def named(token: bytes, ttl: float, kind: HolderKind = "exclusive", readers: int = 0) -> Holder:
    host, pid, since = info.parse(token.removeprefix(b"m:")) or (None, None, None)
    return Holder(host=host, pid=pid, since=since, ttl=ttl, kind=kind, readers=readers)


def test_a_token_on_a_quorum_holds_and_its_ttl_is_the_quorums() -> None:
    assert judge([view(A, 900), view(A, 800), view(B, 5_000)], 2) == ("held", named(A, 0.8))
    assert named(A, 0.8) == Holder(
        host="web-1", pid=11, since=1700000000.123, ttl=0.8, kind="exclusive", readers=0
    )
    # The quorum-th longest: the grant holds until fewer than a quorum keep it.
    assert judge([view(A, 900), view(A, 800), view(A, 700)], 2) == ("held", named(A, 0.8))
    assert judge([view(A, -1), view(A, -1), None], 2) == ("held", named(A, math.inf))


def test_leftovers_on_a_minority_are_no_holder() -> None:
    assert judge([view(A, 900), view(), view()], 2) == ("free", None)
    assert judge([view(A, 900), view(B, 900), view(C, 900)], 2) == ("free", None)
    assert judge([view(A, 900), view(), None], 2) == ("unknown", None)
    assert judge([view(), None, None], 2) == ("unknown", None)


def test_kinds_in_order_and_without_holder_info() -> None:
    writer = [view(writer=A, writer_ttl=500)] * 2 + [view()]
    assert judge(writer, 2) == ("held", named(A, 0.5, "write"))
    # A plain lock and a writer on one name: the plain lock is reported.
    assert judge([view(B, 100, A, 500)] * 3, 2) == ("held", named(B, 0.1))
    assert judge([view(b"m:" + A, 100)] * 2, 2) == ("held", named(A, 0.1, "multilock"))
    assert judge([view(BARE, 100)] * 2, 2) == (
        "held",
        Holder(host=None, pid=None, since=None, ttl=0.1, kind="exclusive"),
    )


def test_readers_name_the_longest_held_of_the_most_widely_held() -> None:
    nodes = [
        view(readers={A: 900, B: 9_000, C: 50}),
        view(readers={A: 800, B: 8_000}),
        view(readers={B: 7_000}),
    ]
    # B is on every node, A (held longer) on two, C on one: B wins by nodes.
    assert judge(nodes, 2) == ("held", named(B, 8.0, "read", 2))
    # Among readers on as many nodes, the longest-held; unknown times rank last.
    same = [view(readers={BARE: 1, B: 900, A: 800})] * 3
    assert judge(same, 2) == ("held", named(A, 0.8, "read", 3))
    # Readers on a quorum of nodes hold the name even when no reader is on a quorum.
    spread = [view(readers={A: 900}), view(readers={B: 900}), view()]
    assert judge(spread, 2) == ("held", named(A, 0.9, "read", 1))
