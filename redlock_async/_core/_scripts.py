"""The Lua scripts, loaded once from the package's ``lua/`` folder.

Scripts are plain data (name, source, SHA1): no script object is bound to a
client, so every node driver runs the same bytes with EVALSHA and falls back to
EVAL only when the node answers NOSCRIPT.
"""

from __future__ import annotations

from .._engine import CENSUS, SERVER_ID, Script

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


ACQUIRE = Script.load("acquire", grants=True, fences=True, views=True)
RELEASE = Script.load("release")
EXTEND = Script.load("extend", views=True)
EXTEND_MANY = Script.load("extend_many", views=True)
READ_ACQUIRE = Script.load("rw_read_acquire", grants=True, views=True)
READ_RELEASE = Script.load("rw_read_release")
READ_EXTEND = Script.load("rw_read_extend", views=True)
WRITE_ACQUIRE = Script.load("rw_write_acquire", grants=True, fences=True, views=True)
FAIR_ACQUIRE = Script.load("fair_acquire", grants=True, fences=True, views=True)
FAIR_LEAVE = Script.load("fair_leave")
FENCE_RAISE = Script.load("fence_raise")
LOCKED = Script.load("locked")
HOLDER = Script.load("holder")
MULTI_ACQUIRE = Script.load("multi_acquire", grants=True, views=True)
MULTI_RELEASE = Script.load("multi_release")
MULTI_EXTEND = Script.load("multi_extend", views=True)
SEM_ACQUIRE = Script.load("sem_acquire", grants=True, views=True)
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
    CENSUS,
)
"""The scripts a lock's nodes run: every node driver is handed these."""

STATUS = Script.load("status")
"""The CLI's ``status`` (one node's view of a name): sent with EVAL, never preloaded."""
