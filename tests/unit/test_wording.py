"""How a tally is put in words (``_engine/_wording.py``): every node named under what it said.

Issue 38: an attempt decided by two failures of three, while the third node
was still answering, read "0 of 3 nodes answered". These drive the library's
own ``Tally`` (tests/_tally.py) and read the words it gives.
"""

from __future__ import annotations

import re

import pytest

from redlock_async._base._errors import NodeConnectionError, NodeResponseError
from redlock_async._engine import ANSWERS, Reply, tally_text
from redlock_async._engine._tally import SKIPPED

from .._tally import tally_of

DOWN = NodeConnectionError("connection refused")
NOPERM = NodeResponseError("NOPERM no permissions to run the 'evalsha' command")


def test_a_majority_outage_names_the_node_not_waited_for() -> None:
    tally = tally_of(3)
    tally.settle(1, DOWN)
    tally.settle(2, DOWN)
    assert tally.decided.done()  # decided without n0
    assert tally_text(tally) == (
        "0 of 3 nodes said yes, 2 failed (n1, n2), 1 not waited for (n0); 2 needed"
    )
    tally.settle(0, 1)  # n0's yes, after the decision
    assert tally_text(tally) == "1 of 3 nodes said yes (n0), 2 failed (n1, n2); 2 needed"


def test_every_kind_of_outcome_is_counted_and_named() -> None:
    tally = tally_of(7)
    replies: tuple[Reply, ...] = (1, 0, NOPERM, DOWN, SKIPPED)
    for index, reply in enumerate(replies):
        tally.settle(index, reply)
    assert tally_text(tally) == (
        "1 of 7 nodes said yes (n0), 1 said no (n1), 1 answered with an error (n2), "
        "1 failed (n3), 2 not waited for (n5, n6), 1 not sent (n4); 4 needed"
    )
    tally.expire(0.0, force=True)  # the silent ones time out: failed, not pending
    assert tally_text(tally) == (
        "1 of 7 nodes said yes (n0), 1 said no (n1), 1 answered with an error (n2), "
        "3 failed (n3, n5, n6), 1 not sent (n4); 4 needed"
    )


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7])
def test_the_counts_always_add_up_to_every_node(n: int) -> None:
    outcomes: tuple[Reply, ...] = (1, 0, DOWN, NOPERM)
    tally = tally_of(n)
    for index in range(n - 1):  # the last node never answers
        tally.settle(index, outcomes[index % len(outcomes)])
    text = tally_text(tally)
    counts = [int(c) for c in re.findall(r"(?:^|, )(\d+) (?:of \d+ nodes )?[a-z]", text)]
    assert sum(counts) == n, text
    assert text.endswith(f"; {n // 2 + 1} needed")
    assert f"n{n - 1}" in text  # named, never dropped


def test_a_read_counts_answers_not_votes() -> None:
    tally = tally_of(3)
    tally.settle(0, b"token")  # a read's replies are values: any of them is an answer
    tally.settle(1, None)
    tally.settle(2, DOWN)
    assert tally_text(tally, ANSWERS) == "2 of 3 nodes answered (n0, n1), 1 failed (n2); 2 needed"
    none = tally_of(3)
    none.settle(0, DOWN)
    none.settle(1, DOWN)
    assert tally_text(none, ANSWERS) == (
        "0 of 3 nodes answered, 2 failed (n0, n1), 1 not waited for (n2); 2 needed"
    )
