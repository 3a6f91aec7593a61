"""One fan-out's outcome in words, node by node: what every error message that counts nodes says.

A fan-out is decided as soon as its outcome is known, often before every
node has answered: of three nodes, two failures decide "no quorum" while
the third is still answering. A message that counted only the votes in
("0 of 3 nodes answered") then told an operator that all of Redis was
down while one node answered every command. So every node is accounted
for, by its redacted name, under what it said when the message was made::

    0 of 3 nodes said yes, 2 failed (redis://a:6379/0, redis://b:6379/0),
    1 not waited for (redis://c:6379/0); 2 needed

- *said yes* / *said no*: a vote (for fan-outs whose replies are not votes,
  such as reads, both are *answered*);
- *answered with an error*: an error reply (an ACL's NOPERM, READONLY, OOM):
  the node is up, it refuses the command;
- *failed*: no usable answer - a connection refused or lost, silent for
  ``node_timeout``, a yes the restart quarantine refused, a node that lost
  its data (the error says which);
- *not waited for*: its reply had not come when the fan-out was decided,
  and it was not yet overdue;
- *not sent*: left out of the fan-out on purpose.

Counts of zero are left out, but for the first (the yes votes, which the
``needed`` at the end is counted against): the counts always add up to N.
Why each node failed is the caller's to add (``LockNotAcquired`` appends
``.errors``).
"""

from __future__ import annotations

from .._base._errors import NodeError, NodeResponseError
from ._tally import PENDING, SKIPPED, Tally, is_yes

__all__ = ["ANSWERS", "VOTES", "tally_text"]

VOTES = ("said yes", "said no")
"""Labels of a vote's replies (acquire, extend, adopt)."""
ANSWERS = ("answered", "answered")
"""Labels of a read's replies (``locked()``, ``holder()``): any reply is an answer."""


def tally_text(tally: Tally, said: tuple[str, str] = VOTES) -> str:
    """``tally`` in words, every node named under what it said (see the module doc).

    ``said``: the labels of a yes and of any other reply (:data:`VOTES`,
    :data:`ANSWERS`); equal labels count the two together.
    """
    failed = tally.errors()  # silent nodes included once their vote timed out
    groups: dict[str, list[str]] = {
        said[0]: [],
        said[1]: [],
        "answered with an error": [],
        "failed": [],
        "not waited for": [],
        "not sent": [],
    }
    for node, reply in zip(tally.nodes, tally.replies, strict=True):
        name = node.name
        if reply is SKIPPED:
            group = "not sent"
        elif isinstance(reply, NodeResponseError):
            group = "answered with an error"
        elif name in failed or isinstance(reply, NodeError):
            group = "failed"
        elif reply is PENDING:
            group = "not waited for"
        elif is_yes(reply):
            group = said[0]
        else:
            group = said[1]
        groups[group].append(name)
    parts = []
    for position, (label, names) in enumerate(groups.items()):
        if not names and position:
            continue
        count = f"{len(names)} of {tally.n} nodes" if not position else str(len(names))
        listed = f" ({', '.join(names)})" if names else ""
        parts.append(f"{count} {label}{listed}")
    return f"{', '.join(parts)}; {tally.quorum} needed"
