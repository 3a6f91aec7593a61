"""Vote counting without sockets: when is the outcome known?

Every check drives the library's own ``Tally`` (tests/_tally.py), so what is
tested is the counting that runs, in every order the votes can arrive.
"""

from __future__ import annotations

import itertools

import pytest

from redlock_async._engine._tally import PENDING, is_yes, quorum_of
from redlock_async._errors import NodeConnectionError

from .._tally import decide, tally_of


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
        verdict = decide(yes, no, failed, n)
        if yes >= quorum:
            assert verdict is True
        elif yes + pending < quorum:
            # Even if every pending node said yes, no quorum: decided now.
            assert verdict is False
        else:
            assert verdict is None


def test_decides_without_waiting_for_the_slow_minority() -> None:
    assert decide(3, 0, 0, 5) is True  # two nodes still pending
    assert decide(0, 2, 1, 5) is False


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_every_arrival_order_decides_once_and_right(n: int) -> None:
    # Each node says yes, no or fails, in every order: the tally decides at
    # the first moment the outcome is known, and never changes its mind.
    quorum = n // 2 + 1
    kinds = (1, 0, NodeConnectionError("down"))
    for votes in itertools.product(range(3), repeat=n):
        for order in set(itertools.permutations(range(n))):
            tally = tally_of(n)
            yes = no = failed = 0
            for index in order:
                vote = votes[index]
                tally.settle(index, kinds[vote])
                yes, no, failed = yes + (vote == 0), no + (vote == 1), failed + (vote == 2)
                pending = n - yes - no - failed
                if yes >= quorum or yes + pending < quorum:
                    assert tally.decided.done()
                    # Once decided it stays: yes only grows, and a quorum
                    # out of reach stays out of reach.
                    assert tally.decided.result() is (yes >= quorum)
                else:
                    assert not tally.decided.done()
            assert tally.yes == votes.count(0)
            assert tally.no == votes.count(1)
            assert tally.settled == n


def test_only_positive_integers_are_yes_votes() -> None:
    assert is_yes(1)
    assert is_yes(7)  # a fencing token is a yes
    for reply in (0, -1, None, b"1", PENDING, NodeConnectionError("down"), True):
        assert not is_yes(reply)
