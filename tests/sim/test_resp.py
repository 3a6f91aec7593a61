"""The simulated network's RESP: commands read in pieces, replies written in either protocol."""

from __future__ import annotations

import hiredis
import pytest

from tests.sim.replies import Error, Push, Status, Verbatim
from tests.sim.resp import INCOMPLETE, CommandReader, ProtocolError, ReplyReader, encode

PIPELINE = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n"


def test_commands_are_read_whole_whatever_the_pieces() -> None:
    for size in (1, 2, 3, 7, len(PIPELINE)):
        reader = CommandReader()
        commands = []
        for start in range(0, len(PIPELINE), size):
            reader.feed(PIPELINE[start : start + size])
            while (command := reader.get()) is not None:
                commands.append(command)
        assert commands == [[b"GET", b"k"], [b"PING"], [b"SET", b"k", b""]], size


def test_commands_the_drivers_pack_are_read_back() -> None:
    command = (b"EVALSHA", b"a" * 40, b"1", b"redlock:{x}", b"\r\n\x00", b"30000")
    reader = CommandReader()
    reader.feed(hiredis.pack_command(command))  # type: ignore[arg-type]
    assert reader.get() == list(command)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"*x\r\n", "invalid multibulk length"),
        (b"*1\r\n+GET\r\n", "expected '$', got '+'"),
        (b"*1\r\n$-3\r\n", "invalid bulk length"),
    ],
)
def test_a_broken_command_is_a_protocol_error(data: bytes, message: str) -> None:
    reader = CommandReader()
    reader.feed(data)
    with pytest.raises(ProtocolError) as raised:
        reader.get()
    assert str(raised.value) == f"Protocol error: {message}"


REPLIES: list[tuple[object, bytes, bytes]] = [
    (1, b":1\r\n", b":1\r\n"),
    (b"x", b"$1\r\nx\r\n", b"$1\r\nx\r\n"),
    (None, b"$-1\r\n", b"_\r\n"),
    (Status("OK"), b"+OK\r\n", b"+OK\r\n"),
    (Error("ERR no"), b"-ERR no\r\n", b"-ERR no\r\n"),
    (1.5, b"$3\r\n1.5\r\n", b",1.5\r\n"),
    (Verbatim(b"# Server"), b"$8\r\n# Server\r\n", b"=12\r\ntxt:# Server\r\n"),
    ([1, [None]], b"*2\r\n:1\r\n*1\r\n$-1\r\n", b"*2\r\n:1\r\n*1\r\n_\r\n"),
    (Push([b"m", None]), b"*2\r\n$1\r\nm\r\n$-1\r\n", b">2\r\n$1\r\nm\r\n_\r\n"),
    ({b"a": 1}, b"*2\r\n$1\r\na\r\n:1\r\n", b"%1\r\n$1\r\na\r\n:1\r\n"),
]


@pytest.mark.parametrize(("reply", "resp2", "resp3"), REPLIES)
def test_replies_are_written_in_the_connections_protocol(
    reply: object, resp2: bytes, resp3: bytes
) -> None:
    assert encode(reply, 2) == resp2  # type: ignore[arg-type]
    assert encode(reply, 3) == resp3  # type: ignore[arg-type]
    reader = ReplyReader()
    reader.feed(resp3[:-1])
    assert reader.get() is INCOMPLETE
    reader.feed(resp3[-1:])
    assert reader.get() == reply


def test_hiredis_reads_what_the_node_writes() -> None:
    reader = hiredis.Reader()
    reader.feed(encode([1, b"x", None, Status("OK"), {b"k": 1.5}], 3))
    assert reader.gets() == [1, b"x", None, b"OK", {b"k": 1.5}]
