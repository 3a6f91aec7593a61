"""Vote counting without sockets: when is the outcome known?

Every check drives the library's own ``Tally`` (tests/_tally.py), so what is
tested is the counting that runs, in every order the votes can arrive.
"""

from __future__ import annotations

import asyncio
import itertools
import random

import pytest

from redlock_async._base._errors import NodeConnectionError
from redlock_async._core._scripts import ACQUIRE
from redlock_async._engine._node import Command, Reply
from redlock_async._engine._quorum import Quorum
from redlock_async._engine._tally import PENDING, Tally, is_yes, quorum_of

from .._tally import decide, tally_of
from ._scripted import scripted_nodes


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


_KINDS: dict[str, Reply] = {
    "yes": 1,
    "fence": 7,  # a fencing token: a yes
    "no": 0,
    "readers": -1,  # rw/fair scripts refuse with negative numbers
    "failed": NodeConnectionError("down"),
}


def _tally(n: int, loop: asyncio.AbstractEventLoop) -> Tally:
    group = Quorum(scripted_nodes(n), node_timeout=10.0)
    return Tally(group, Command(ACQUIRE, [b"k"], [b"t", 100]), loop.create_future(), 0.0)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_tally_decides_as_soon_as_the_outcome_is_known(n: int) -> None:
    quorum = quorum_of(n)
    loop = asyncio.new_event_loop()
    try:
        for combo in itertools.product([*_KINDS, "silent"], repeat=n):
            # In index order, and in one shuffled order (seeded: reproducible).
            orders = [list(range(n)), random.Random(repr(combo)).sample(range(n), n)]
            for order in orders:
                tally = _tally(n, loop)
                yes = no = failed = 0
                for index in order:
                    kind = combo[index]
                    if kind == "silent":
                        continue
                    decided_before = tally.decided.done()
                    tally.settle(index, _KINDS[kind])
                    yes += kind in ("yes", "fence")
                    no += kind in ("no", "readers")
                    failed += kind == "failed"
                    if decided_before:
                        continue  # a decision never changes (checked below)
                    if yes >= quorum:
                        assert tally.decided.result() is True, (combo, order)
                    elif no + failed > n - quorum:
                        assert tally.decided.result() is False, (combo, order)
                    else:
                        assert not tally.decided.done(), (combo, order)
                assert tally.yes == yes
                assert tally.no == no  # refusals only: release and extend read this
                assert len(tally.errors()) == failed
                tally.expire(0.0)  # node_timeout: whoever is silent failed
                final = yes >= quorum
                assert tally.decided.result() is final, (combo, order)
                assert tally.expired is ("silent" in combo)
    finally:
        loop.close()


def test_a_node_is_never_counted_twice() -> None:
    loop = asyncio.new_event_loop()
    try:
        tally = _tally(3, loop)
        tally.settle(0, 1)
        tally.settle(0, 1)
        assert not tally.decided.done()
        assert tally.yes == 1
    finally:
        loop.close()
