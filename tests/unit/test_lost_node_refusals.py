"""A renewal refused by a node that lost its data: no evidence the grant is gone.

The simulation's finding (tests/sim, "lost-copy-refused-by-lost-node"): a
taker's copy of a grant handed on with ``adopt()`` renews after the
hand-over; node n0 restarted from an append-only file missing the key (its
epoch kept: only the new run_id tells), n2 never had it, n1 still holds it
for the adopter. n0 and n2 refusing made a quorum's refusal, and a lock a
quorum refused releases its token everywhere (``Lock._lose``): n1's key went
too, and another process took the name while the adopter held it.

A refusal counts only from a node whose votes count for this Redlock - not
one held by its restart watch (a restart seen, no census since), nor one
quarantined or suspect. Scripted nodes in virtual time (see _scripted.py):
the renewals either way (batched, and one by one as beside a Redis
Cluster), and extend().
"""

from __future__ import annotations

import asyncio

import pytest

from redlock_async._base._errors import LockLost, QuorumUnavailable
from redlock_async._core._grant import counted_refusals
from redlock_async._core._lock import Lock
from redlock_async._core._scripts import ACQUIRE, EXTEND, RELEASE
from redlock_async._engine import CENSUS
from redlock_async._engine._restarts import Restarts
from redlock_async._engine._ttls import TtlLedger

from ._scripted import NEVER, Cluster, run

FIRST_RUN, SECOND_RUN = b"a" * 40, b"b" * 40


@pytest.fixture(params=[True, False], ids=["batched", "one-by-one"])
def batched(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


def taker_cluster(batched: bool = True) -> Cluster:
    """n0 and n1 hold the grant, n2 never did; n0's watch has seen its server."""
    c = Cluster(watched=True, cross_slot=batched)
    c.script(ACQUIRE.name, 1, 1, 0)
    c.script(RELEASE.name, 1)
    c.script(CENSUS.name, NEVER)  # the census a restart asks for: unanswered, n0 stays held
    return c


def watch(c: Cluster, index: int = 0) -> Restarts:
    restarts = c.nodes[index].restarts
    assert restarts is not None
    return restarts


def restarted(c: Cluster) -> None:
    """n0's server restarted from disk (a new run_id, up for no time), missing the key."""
    watch(c).observe_fields(SECOND_RUN, 0.0, asyncio.get_running_loop().time())


def test_a_renewal_refused_by_a_node_held_after_its_restart_releases_nothing(
    batched: bool,
) -> None:
    c = taker_cluster(batched)
    lost: list[Lock] = []
    lock = c.lock(ttl=3.0, on_lost=lost.append)

    async def main() -> None:
        watch(c).observe_fields(FIRST_RUN, 100.0, asyncio.get_running_loop().time())
        assert await lock.acquire()
        assert lock.token  # handed on: a copy adopted elsewhere may hold it
        await asyncio.sleep(0.1)
        restarted(c)
        assert watch(c).held
        c.renewals(0, 1, 0)  # n0 forgot the key, n2 never had it, n1 holds it
        await asyncio.sleep(4.0)

    run(main(), c.clock)
    assert c.sent(EXTEND.name) or c.sent("extend_many")  # it did renew, and was refused
    assert lost == [lock]
    assert lock.lost
    # Lost for want of a quorum's yes, not refused by a quorum: its keys are
    # left to expire, n1's with them - where the adopted copy holds it.
    assert c.sent(RELEASE.name) == []
    assert "could not reach a quorum" in str(lock._loss.error)


def test_an_extend_refused_by_a_node_held_after_its_restart_is_unconfirmed() -> None:
    c = taker_cluster()
    c.script(EXTEND.name, 0, 1, 0)
    lock = c.lock(ttl=3.0, auto_extend=False)

    async def main() -> None:
        watch(c).observe_fields(FIRST_RUN, 100.0, asyncio.get_running_loop().time())
        assert await lock.acquire()
        assert lock.token
        restarted(c)
        with pytest.raises(QuorumUnavailable, match="still held"):
            await lock.extend()

    run(main(), c.clock)
    assert lock.held
    assert c.sent(RELEASE.name) == []


def test_a_suspect_nodes_refusal_does_not_count_until_its_votes_count_again(
    batched: bool,
) -> None:
    # A census found grants n0 may have lost that can still be valid: n0 is
    # suspect for 1.5 s. Its refusal then is no evidence; once its votes
    # count again, it is - the same votes lose the lock, refused, released.
    c = taker_cluster(batched)
    c.renewals(0, 1, 0)
    lock = c.lock(ttl=3.0)
    verdicts: list[tuple[float, bool]] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        start = loop.time()
        assert await lock.acquire()
        watch(c).suspect(start + 1.5)
        await asyncio.sleep(1.4)  # the first renewal (at about ttl/3) was not refused
        verdicts.append((loop.time() - start, lock.lost))
        await asyncio.sleep(3.0)
        verdicts.append((loop.time() - start, lock.lost))

    run(main(), c.clock)
    assert verdicts[0][1] is False
    assert lock.lost
    assert "refused the renewal" in str(lock._loss.error)
    assert c.to(RELEASE.name) == ["n0", "n1"]  # where the acquire may have written


def test_a_quorum_of_counted_refusals_still_loses_and_releases(batched: bool) -> None:
    # n1 and n2 refuse, n0 held: two refusals of nodes that count - refused.
    c = taker_cluster(batched)
    lock = c.lock(ttl=3.0)

    async def main() -> None:
        watch(c).observe_fields(FIRST_RUN, 100.0, asyncio.get_running_loop().time())
        assert await lock.acquire()
        restarted(c)
        c.renewals(0, 0, 0)
        await asyncio.sleep(4.0)

    run(main(), c.clock)
    assert lock.lost
    assert isinstance(lock._loss.error, LockLost)
    assert "refused the renewal" in str(lock._loss.error)
    assert c.to(RELEASE.name) == ["n0", "n1"]


def test_counted_refusals_leaves_out_nodes_whose_votes_do_not_count() -> None:
    ledger = TtlLedger()
    held, quarantined, fine = (Restarts(f"n{i}", ledger, None) for i in range(3))
    held.hold()
    quarantined.suspect(10.0)
    votes = (0, 0, 0, 0)
    assert counted_refusals(None, votes, 5.0) == 4
    assert counted_refusals((held, quarantined, fine, None), votes, 5.0) == 2
    assert counted_refusals((held, quarantined, fine, None), votes, 10.0) == 3  # suspect no more
    # Only refusals: a yes, a failure, a STALE (-9) are none.
    assert counted_refusals((fine, fine, fine, None), (1, None, -9, b"ERR"), 5.0) == 0
