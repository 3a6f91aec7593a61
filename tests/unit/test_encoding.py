"""The lean driver's EVALSHA encoding matches hiredis's, byte for byte (no sockets)."""

from __future__ import annotations

import hiredis
import pytest

from redlock_async._core._scripts import ACQUIRE, FAIR_ACQUIRE, RELEASE
from redlock_async._engine import Script
from redlock_async._engine._node import Arg, Command
from redlock_async._engine.resp import _encode


def _reference(command: Command) -> bytes:
    keys = list(command.keys)
    parts = (b"EVALSHA", command.script.sha, len(keys), *keys, *command.args)
    encoded: bytes = hiredis.pack_command(parts)  # type: ignore[arg-type]
    return encoded


CASES: list[tuple[Script, tuple[bytes, ...], tuple[Arg, ...]]] = [
    (ACQUIRE, (b"redlock:{job}",), (b"f" * 40, 30_000)),
    (ACQUIRE, (b"redlock:{job}", b"redlock:{job}:fence"), (b"0" * 40, 1)),
    (RELEASE, (b"redlock:{job}", b"redlock:{job}:wake"), (b"a" * 40,)),
    (RELEASE, (b"redlock:{" + b"x" * 300 + b"}",), (b"t" * 300,)),  # lengths past the table
    (FAIR_ACQUIRE, (b"k", b"r", b"q", b"h"), (b"t", 0, -5, 2**63, b"", b"x:ab")),
    (ACQUIRE, (b"redlock:{caf\xc3\xa9}",), ("str argument", 7)),  # not bytes/int: hiredis path
]


@pytest.mark.parametrize(("script", "keys", "args"), CASES)
def test_encoding_matches_hiredis(
    script: Script, keys: tuple[bytes, ...], args: tuple[Arg, ...]
) -> None:
    for _ in range(2):  # the second time from the cached head
        command = Command(script, keys, args)
        assert _encode.evalsha(command) == _reference(command)


def test_keys_given_as_a_list_are_encoded_too() -> None:
    command = Command(ACQUIRE, [b"redlock:{job}"], [b"t" * 40, 100])
    assert _encode.evalsha(command) == _reference(command)


def test_the_caches_stay_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_encode, "CACHE_LIMIT", 8)
    monkeypatch.setattr(_encode, "HEADS", {})
    monkeypatch.setattr(_encode, "INTS", {})
    for i in range(50):
        command = Command(ACQUIRE, (b"redlock:{job%d}" % i,), (b"t" * 40, 1000 + i))
        assert _encode.evalsha(command) == _reference(command)
    assert len(_encode.HEADS) <= 8
    assert len(_encode.INTS) <= 8


def test_keys_that_are_not_bytes_take_hiredis_rules() -> None:
    command = Command(ACQUIRE, ("redlock:{job}",), (b"t" * 40, 100))  # type: ignore[arg-type]
    assert _encode.evalsha(command) == _reference(command)
