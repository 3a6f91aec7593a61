"""Epochs per hash slot: the restart rule for a Redlock with a Redis Cluster node.

A script may touch only keys of its own slot, and an INFO sent to a cluster
answers for any shard: so each slot met has its own :class:`Epochs` and epoch
hash (``slot_epoch_key``), and on the cluster the scripts compare run_ids
themselves (``lua/_epoch_cluster.lua``). Watches are per node, not per slot: a
node that lost grants still valid stays out of the slot's view until they
expire (``_held.py``). See docs/guarantees.md, "With a Redis Cluster among the nodes".
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING

from .._base._errors import NodeError
from .._base._keys import key_slot, slot_epoch_key
from ._epochs import Epochs

if TYPE_CHECKING:
    from ._quorum import Quorum

__all__ = ["SlotEpochs"]


class SlotEpochs:
    """One :class:`Epochs` per hash slot met, behind the interface of one."""

    # Never True: each slot's first grant waits for its own censuses (first()).
    ready = False

    def __init__(self, quorum: Quorum, key: bytes, drift: float) -> None:
        self._quorum = quorum
        self._key = key  # <prefix>~epoch: each slot's is this and its tag in braces
        self._drift = drift
        self.domains: dict[int, Epochs] = {}
        self.closed = False
        # Per plain node: the restart being held for (see _restarted).
        self._restarts = [0] * quorum.n
        quorum.epochs = self
        quorum.view_of = self.view_of
        for index, watch in enumerate(quorum.watches or ()):
            if watch is not None:  # a plain node (a cluster's has no watch)
                watch.on_restart = partial(self._restarted, index)

    @property
    def count(self) -> int:
        """Censuses sent, every slot's (tests)."""
        return sum(domain.count for domain in self.domains.values())

    def domain(self, slot: int) -> Epochs:
        """Slot ``slot``'s epochs, made on first use."""
        domain = self.domains.get(slot)
        if domain is None:
            key = slot_epoch_key(self._key, slot)
            domain = self.domains[slot] = Epochs(self._quorum, key, self._drift, slotted=True)
            if self.closed:
                domain.close()
        return domain

    def view_of(self, keys: Sequence[bytes]) -> bytes:
        """The record key a script over ``keys`` (of one slot) carries."""
        return self.domain(key_slot(keys[0])).view

    async def first(self, wait: float, keys: Sequence[bytes] = ()) -> None:
        """Before a grant over ``keys``: the censuses of their slots not read yet."""
        domains = [self.domain(slot) for slot in {key_slot(key) for key in keys}]
        pending = [domain.first(wait) for domain in domains if not domain.ready]
        if len(pending) == 1:
            await pending[0]
        elif pending:
            await asyncio.gather(*pending)

    def refreshing(self, keys: Sequence[bytes] = ()) -> bool:
        """Whether censuses of the slots of ``keys`` are under way."""
        return any(self.domain(key_slot(key)).refreshing() for key in keys)

    async def refreshed(self, wait: float, keys: Sequence[bytes] = ()) -> None:
        """Until the censuses under way for the slots of ``keys`` are done."""
        slots = {key_slot(key) for key in keys}
        await asyncio.gather(*(self.domain(slot).refreshed(wait) for slot in slots))

    def stale(self, index: int, keys: Sequence[bytes] = ()) -> NodeError:
        """Node ``index`` answered STALE to a command over ``keys`` (of a split
        command, its part's: ``SplitCommand.stale_keys``): their slots' censuses."""
        error: NodeError | None = None
        for slot in {key_slot(key) for key in keys}:
            error = self.domain(slot).stale(index)
        return error or NodeError(f"{self._quorum.nodes[index].name}: lost its data (STALE)")

    def _restarted(self, index: int) -> None:
        """Plain node ``index`` showed a new run_id: it may keep its epochs but
        lack the last grants. It leaves every slot's view (STALE until censuses
        read it again); its yes votes to commands sent with the old views are
        held until each has its reply."""
        for domain in self.domains.values():
            domain.forget(index)
        watches = self._quorum.watches
        watch = watches[index] if watches is not None else None
        pending = self._quorum.pending_on(index)
        if watch is None or not pending:
            return
        self._restarts[index] += 1
        restart, left = self._restarts[index], len(pending)
        watch.hold()

        def answered(_: object) -> None:
            nonlocal left
            left -= 1
            # Released by the last restart's answers only: an earlier one's
            # may all be in while commands sent before the later are not.
            if not left and self._restarts[index] == restart:
                watch.release()

        for tally in pending:
            tally.when_settled(index, answered)

    def reset(self) -> None:
        """The fan-outs moved to another loop or a forked child: a restart's
        hold waited for answers that will never come here, so it ends."""
        for domain in self.domains.values():
            domain.reset()
        for index, watch in enumerate(self._quorum.watches or ()):
            if watch is not None and watch.held:
                self._restarts[index] += 1  # an earlier hold's answers release nothing now
                watch.release()

    def close(self) -> None:
        self.closed = True
        for domain in self.domains.values():
            domain.close()
