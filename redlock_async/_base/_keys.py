"""Key layout: every key of one lock name shares one Redis Cluster hash slot.

A lock named ``orders:42`` under the default prefix lives at::

    redlock:{orders:42}

with its companions (see :class:`KeyLayout` and docs/keys.md) under the same
tag. The part in braces is the cluster hash tag. Braces and ``%`` inside the name
are percent-encoded (``{`` -> ``%7B``, ``}`` -> ``%7D``, ``%`` -> ``%25``), so
the tag is always exactly the (encoded) name, never empty and never cut short
by a brace the user wrote. The encoding is injective: two names never share a
key. The prefix may not contain braces, for the same reason.

The restart rule's epoch hash is spelled here too: one per prefix, or one per
hash slot beside a Redis Cluster (:func:`slot_epoch_key`, with the slot math).
"""

from __future__ import annotations

import functools
from binascii import crc_hqx

from ._errors import ConfigurationError

__all__ = [
    "SLOTS",
    "KeyLayout",
    "check_name",
    "check_prefix",
    "epoch_key",
    "key_slot",
    "lock_key",
    "slot_epoch_key",
    "slot_tag",
    "wake_channel",
]

_ESCAPES = str.maketrans({"%": "%25", "{": "%7B", "}": "%7D"})


def check_name(name: object) -> str:
    """Return ``name`` if it is a usable lock name, else raise ConfigurationError."""
    if not isinstance(name, str):
        raise ConfigurationError(f"name must be a str, not {type(name).__name__}")
    if not name:
        raise ConfigurationError("name must be a non-empty str")
    lock_key("", name)  # raises for names that cannot be encoded
    return name


def check_prefix(prefix: object) -> str:
    if not isinstance(prefix, str):
        raise ConfigurationError(f"prefix must be a str, not {type(prefix).__name__}")
    if "{" in prefix or "}" in prefix:
        raise ConfigurationError(
            f"prefix={prefix!r} may not contain braces: the library owns the hash tag"
        )
    try:
        prefix.encode()
    except UnicodeEncodeError as exc:
        raise ConfigurationError(
            f"prefix={prefix!r} cannot be encoded as UTF-8: {exc.reason}"
        ) from None
    return prefix


def lock_key(prefix: str, name: str) -> bytes:
    """The key holding an exclusive grant's token.

    Raises ConfigurationError when ``name`` (or ``prefix``) cannot be encoded
    as UTF-8, e.g. a lone surrogate such as ``"a\\ud800"``.
    """
    try:
        return f"{prefix}{{{name.translate(_ESCAPES)}}}".encode()
    except UnicodeEncodeError as exc:
        raise ConfigurationError(
            f"name {name!r} cannot be encoded as UTF-8 for a Redis key: {exc.reason}"
        ) from None


def wake_channel(lock: bytes) -> bytes:
    """The wake channel of the name whose lock key is ``lock`` (:attr:`KeyLayout.wake`)."""
    return lock + b":wake"


def epoch_key(prefix: str) -> bytes:
    """A node's epoch and restart record for every name under ``prefix``: a hash
    with no expiry (``lua/_epoch.lua``, which spells it from a lock key's
    prefix: the two must agree)."""
    return f"{prefix}~epoch".encode()


SLOTS = 16384  # Redis Cluster's hash slots


def key_slot(key: bytes) -> int:
    """The Redis Cluster hash slot of ``key`` (its hash tag's, when it has one)."""
    start = key.find(b"{")
    if start > -1:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            key = key[start + 1 : end]
    return crc_hqx(key, 0) % SLOTS


@functools.cache
def _tags() -> tuple[bytes, ...]:
    # The first hexadecimal number hashing to each slot: fixed, so every
    # client spells a slot's epoch key alike. About 315,000 CRCs, once: 70 ms.
    tags: list[bytes | None] = [None] * SLOTS
    left, number = SLOTS, 0
    while left:
        tag = b"%x" % number
        slot = crc_hqx(tag, 0) % SLOTS
        if tags[slot] is None:
            tags[slot] = tag
            left -= 1
        number += 1
    return tuple(tag for tag in tags if tag is not None)


def slot_tag(slot: int) -> bytes:
    """A hash tag of slot ``slot``: the shortest-first hexadecimal number hashing to it."""
    return _tags()[slot]


def slot_epoch_key(key: bytes, slot: int) -> bytes:
    """Slot ``slot``'s epoch hash, for the epoch key ``key`` (``<prefix>~epoch``),
    where a Redis Cluster is among the nodes (``_engine/_slots.py``)."""
    return key + b"{" + slot_tag(slot) + b"}"


class KeyLayout:
    """Every key and channel of one lock name, spelled in this one place.

    All share the hash tag of :attr:`lock`, so one name lives in one Redis
    Cluster slot. Locks, the read-write views and the CLI's ``status`` all
    read their keys from here (docs/keys.md lists them for operators).
    Only the key every grant uses is kept; the others, the wake channel
    included, are spelled when asked for (a process holding 100,000 locks
    keeps 100,000 layouts: a kept channel was 60 bytes a lock, spelled once
    per release).
    """

    __slots__ = ("lock",)

    NAMES = (
        "lock",
        "fence",
        "wake",
        "fair_queue",
        "heartbeats",
        "fair_readers",
        "writer",
        "readers",
        "writer_waiting",
        "rw_fence",
        "rw_queue",
        "rw_heartbeats",
    )
    """Every key and channel a layout names, for whoever needs them all."""

    def __init__(self, prefix: str, name: str) -> None:
        self.lock = lock_key(prefix, name)
        """Exclusive lock: the string holding the grant's token."""

    @classmethod
    def of_lock(cls, lock: bytes) -> KeyLayout:
        """The layout whose :attr:`lock` key is ``lock`` (spelled by another layout)."""
        layout = cls.__new__(cls)
        layout.lock = lock
        return layout

    @property
    def wake(self) -> bytes:
        """The sharded pub/sub channel releases of the name are announced on."""
        return wake_channel(self.lock)

    @property
    def fence(self) -> bytes:
        """Exclusive lock: the fencing counter (no expiry)."""
        return self.lock + b":fence"

    @property
    def fair_queue(self) -> bytes:
        """Fair exclusive waiters: sorted set, waiter id -> ticket."""
        return self.lock + b":q"

    @property
    def heartbeats(self) -> bytes:
        """Fair exclusive waiters: sorted set, waiter id -> expiry (server ms)."""
        return self.lock + b":qh"

    @property
    def fair_readers(self) -> bytes:
        """A key never written: the fair script's reader set, for an exclusive lock."""
        return self.lock + b":xr"

    @property
    def writer(self) -> bytes:
        """Read-write lock: the writer's token."""
        return self.lock + b":w"

    @property
    def readers(self) -> bytes:
        """Read-write lock: sorted set, reader token -> expiry (server ms)."""
        return self.lock + b":r"

    @property
    def writer_waiting(self) -> bytes:
        """Read-write lock: a writer is waiting, new readers are refused."""
        return self.lock + b":ww"

    @property
    def rw_fence(self) -> bytes:
        """Read-write lock: the writers' fencing counter (no expiry)."""
        return self.lock + b":rwfence"

    @property
    def rw_queue(self) -> bytes:
        """Fair read-write waiters: sorted set, waiter id -> ticket."""
        return self.lock + b":rwq"

    @property
    def rw_heartbeats(self) -> bytes:
        """Fair read-write waiters: sorted set, waiter id -> expiry (server ms)."""
        return self.lock + b":rwqh"

    def semaphore_slot(self, index: int) -> bytes:
        """Semaphore: slot ``index`` (0 to limit - 1), a string holding its holder's token."""
        return b"%s:sem:%d" % (self.lock, index)

    def __repr__(self) -> str:
        return f"KeyLayout({self.lock!r})"
