"""The Lua scripts, loaded once from the package's ``lua/`` folder.

Scripts are plain data (name, source, SHA1): no script object is bound to a
client, so every node driver runs the same bytes with EVALSHA and falls back to
EVAL only when the node answers NOSCRIPT.
"""

from __future__ import annotations

from .._engine import SERVER_ID, Script

__all__ = [
    "ACQUIRE",
    "ALL_SCRIPTS",
    "EXTEND",
    "EXTEND_MANY",
    "FAIR_ACQUIRE",
    "FAIR_LEAVE",
    "FENCE_RAISE",
    "HOLDER",
    "LOCKED",
    "MULTI_ACQUIRE",
    "MULTI_EXTEND",
    "MULTI_RELEASE",
    "READ_ACQUIRE",
    "READ_EXTEND",
    "READ_RELEASE",
    "RELEASE",
    "SEM_ACQUIRE",
    "SEM_RELEASE",
    "STATUS",
    "WRITE_ACQUIRE",
]


ACQUIRE = Script.load("acquire", grants=True, fences=True)
RELEASE = Script.load("release")
EXTEND = Script.load("extend")
EXTEND_MANY = Script.load("extend_many")
READ_ACQUIRE = Script.load("rw_read_acquire", grants=True)
READ_RELEASE = Script.load("rw_read_release")
READ_EXTEND = Script.load("rw_read_extend")
WRITE_ACQUIRE = Script.load("rw_write_acquire", grants=True, fences=True)
FAIR_ACQUIRE = Script.load("fair_acquire", grants=True, fences=True)
FAIR_LEAVE = Script.load("fair_leave")
FENCE_RAISE = Script.load("fence_raise")
LOCKED = Script.load("locked")
HOLDER = Script.load("holder")
MULTI_ACQUIRE = Script.load("multi_acquire", grants=True)
MULTI_RELEASE = Script.load("multi_release")
MULTI_EXTEND = Script.load("multi_extend")
SEM_ACQUIRE = Script.load("sem_acquire", grants=True)
SEM_RELEASE = Script.load("sem_release")

ALL_SCRIPTS: tuple[Script, ...] = (
    ACQUIRE,
    RELEASE,
    EXTEND,
    EXTEND_MANY,
    READ_ACQUIRE,
    READ_RELEASE,
    READ_EXTEND,
    WRITE_ACQUIRE,
    FAIR_ACQUIRE,
    FAIR_LEAVE,
    FENCE_RAISE,
    LOCKED,
    HOLDER,
    MULTI_ACQUIRE,
    MULTI_RELEASE,
    MULTI_EXTEND,
    SEM_ACQUIRE,
    SEM_RELEASE,
    SERVER_ID,
)
"""The scripts a lock's nodes run: every node driver is handed these."""

STATUS = Script.load("status")
"""The CLI's ``status`` (one node's view of a name): sent with EVAL, never preloaded."""
