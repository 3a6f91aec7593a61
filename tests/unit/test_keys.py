"""Key layout: one hash slot per lock name, whatever the name holds."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis.crc import key_slot

from redlock_async import ConfigurationError
from redlock_async._base._keys import (
    KeyLayout,
    check_name,
    check_prefix,
    lock_key,
    wake_channel,
)
from redlock_async._core._commands import ExclusiveCommands


def hash_tag(key: bytes) -> bytes | None:
    """The part Redis Cluster hashes, per the cluster spec."""
    start = key.find(b"{")
    if start == -1:
        return None
    end = key.find(b"}", start + 1)
    if end == -1 or end == start + 1:
        return None
    return key[start + 1 : end]


def test_plain_name_is_readable() -> None:
    assert lock_key("redlock:", "orders:42") == b"redlock:{orders:42}"


@pytest.mark.parametrize("name", ["}", "}abc", "{", "a{b}c", "{}", "%7B", "%", "x}{y", "ü€"])
def test_braces_in_names_never_break_the_tag(name: str) -> None:
    key = lock_key("redlock:", name)
    tag = hash_tag(key)
    assert tag is not None
    assert b"{" not in tag
    assert b"}" not in tag


@given(st.text(min_size=1), st.text(min_size=1))
def test_encoding_is_injective_and_tagged(a: str, b: str) -> None:
    ka, kb = lock_key("p:", a), lock_key("p:", b)
    assert (ka == kb) == (a == b)
    assert hash_tag(ka) is not None
    # Any suffix a later key type adds stays in the same slot.
    assert key_slot(ka) == key_slot(ka + b":readers")


@pytest.mark.parametrize("bad", ["", b"bytes", 42, None])
def test_bad_names_are_refused(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="name"):
        check_name(bad)


@pytest.mark.parametrize("bad", ["a{b", "x}", 3])
def test_bad_prefixes_are_refused(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="prefix"):
        check_prefix(bad)


@pytest.mark.parametrize("name", ["a\ud800", "\udfff", "x\udc80y"])
def test_names_that_cannot_be_encoded_are_configuration_errors(name: str) -> None:
    from redlock_async import Redlock

    redlock = Redlock(["redis://127.0.0.1:1/0"])
    with pytest.raises(ConfigurationError, match="name"):
        redlock.lock(name)  # the fast path: a non-empty str skips check_name
    with pytest.raises(ConfigurationError, match="name"):
        redlock.rwlock(name).read()
    with pytest.raises(ConfigurationError, match="name"):
        check_name(name)
    with pytest.raises(ConfigurationError, match="name"):
        lock_key("redlock:", name)
    with pytest.raises(ConfigurationError, match="prefix"):
        Redlock(["redis://127.0.0.1:1/0"], prefix="p\ud800:")


@pytest.mark.parametrize("name", ["orders:42", "a{b}c", "%", "ü€"])
def test_a_layout_rebuilt_from_its_lock_key_spells_every_key_alike(name: str) -> None:
    # The exclusive commands keep only the lock key (100,000 held locks of as
    # many names keep 100,000 of them): the layout they give back is the same.
    layout = KeyLayout("redlock:", name)
    for rebuilt in (KeyLayout.of_lock(layout.lock), ExclusiveCommands(layout).keys):
        assert [getattr(rebuilt, key) for key in KeyLayout.NAMES] == [
            getattr(layout, key) for key in KeyLayout.NAMES
        ]
    assert wake_channel(layout.lock) == layout.wake == layout.lock + b":wake"
