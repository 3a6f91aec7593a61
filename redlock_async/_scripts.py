"""The Lua scripts, loaded once from the package's ``lua/`` folder.

Scripts are plain data (name, source, SHA1): no script object is bound to a
client, so every node driver runs the same bytes with EVALSHA and falls back to
EVAL only when the node answers NOSCRIPT.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources

__all__ = [
    "ACQUIRE",
    "ALL_SCRIPTS",
    "EXTEND",
    "FAIR_ACQUIRE",
    "FAIR_LEAVE",
    "FENCE_RAISE",
    "READ_ACQUIRE",
    "READ_EXTEND",
    "READ_RELEASE",
    "RELEASE",
    "SERVER_ID",
    "WRITE_ACQUIRE",
    "Script",
]


@dataclass(frozen=True, slots=True)
class Script:
    """A Lua script and the SHA1 digest Redis files it under."""

    name: str
    source: bytes
    sha: bytes  # lowercase hex digest, as EVALSHA and SCRIPT LOAD spell it
    grants: bool = False  # a yes vote creates a grant (a quarantined node's does not count)

    @classmethod
    def load(cls, name: str, *, grants: bool = False, fences: bool = False) -> Script:
        """Read ``lua/<name>.lua``; ``fences``: prepend ``lua/_fence.lua`` (next_fence)."""
        lua = resources.files(__package__).joinpath("lua")
        source = lua.joinpath(f"{name}.lua").read_bytes()
        if fences:
            # One copy of the fencing counter step for every script that
            # hands out tokens (a local function, defined before its use).
            source = lua.joinpath("_fence.lua").read_bytes() + source
        return cls(name, source, hashlib.sha1(source).hexdigest().encode(), grants)

    def __repr__(self) -> str:
        return f"Script({self.name!r}, sha={self.sha.decode()})"


ACQUIRE = Script.load("acquire", grants=True, fences=True)
RELEASE = Script.load("release")
EXTEND = Script.load("extend")
READ_ACQUIRE = Script.load("rw_read_acquire", grants=True)
READ_RELEASE = Script.load("rw_read_release")
READ_EXTEND = Script.load("rw_read_extend")
WRITE_ACQUIRE = Script.load("rw_write_acquire", grants=True, fences=True)
FAIR_ACQUIRE = Script.load("fair_acquire", grants=True, fences=True)
FAIR_LEAVE = Script.load("fair_leave")
FENCE_RAISE = Script.load("fence_raise")
SERVER_ID = Script.load("server_id")

ALL_SCRIPTS: tuple[Script, ...] = (
    ACQUIRE,
    RELEASE,
    EXTEND,
    READ_ACQUIRE,
    READ_RELEASE,
    READ_EXTEND,
    WRITE_ACQUIRE,
    FAIR_ACQUIRE,
    FAIR_LEAVE,
    FENCE_RAISE,
    SERVER_ID,
)
