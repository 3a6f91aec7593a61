"""Vote counting without sockets: when is the outcome known?"""

from __future__ import annotations

import itertools

import pytest

from redlock_async._engine._quorum import PENDING, is_yes, outcome, quorum_of
from redlock_async._errors import NodeConnectionError


@pytest.mark.parametrize(("n", "quorum"), [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3), (7, 4)])
def test_quorum_is_a_strict_majority(n: int, quorum: int) -> None:
    assert quorum_of(n) == quorum


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7])
def test_outcome_over_every_vote_split(n: int) -> None:
    quorum = n // 2 + 1
    for yes, no, failed in itertools.product(range(n + 1), repeat=3):
        if yes + no + failed > n:
            continue
        pending = n - yes - no - failed
        verdict = outcome(yes, no, failed, n)
        if yes >= quorum:
            assert verdict is True
        elif yes + pending < quorum:
            # Even if every pending node said yes, no quorum: decided now.
            assert verdict is False
        else:
            assert verdict is None


def test_decides_without_waiting_for_the_slow_minority() -> None:
    assert outcome(3, 0, 0, 5) is True  # two nodes still pending
    assert outcome(0, 2, 1, 5) is False


def test_only_positive_integers_are_yes_votes() -> None:
    assert is_yes(1)
    assert is_yes(7)  # a fencing token is a yes
    for reply in (0, -1, None, b"1", PENDING, NodeConnectionError("down"), True):
        assert not is_yes(reply)
