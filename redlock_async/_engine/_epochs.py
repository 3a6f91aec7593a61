"""Epochs: the restart rule for every process, whatever ttls they use.

The model, the rule and its proof: docs/guarantees.md, "Restarted nodes";
the scripts: ``lua/_epoch.lua``, ``lua/census.lua``. Here, one Redlock's
part (or one hash slot's, ``_slots.py``): its *view* of the nodes' epochs,
the *censuses* that confirm them, and who is *suspect* (``lost_until``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING

from .._base._errors import NodeError
from .._base._observe import warn_once
from ._held import SUSPECT, Held
from ._node import CENSUS, Command, Reply

if TYPE_CHECKING:
    from ._quorum import Quorum
    from ._tally import Tally

__all__ = ["Epochs", "born", "lost_until"]

_log = logging.getLogger("redlock_async.node")

_SLACK = 0.002  # records' ends are whole ms, each node's clock read once a script
UNHEARD = b"-"

Answers = dict[int, tuple[list[object], float]]
"""A census's answers by node index, each with the loop time it came."""

Field = tuple[tuple[bytes, ...] | None, frozenset[bytes], float]
"""A live record: its epochs by position (None: another list's), as a set,
and the loop time by which it has expired."""


def born(epoch: bytes) -> int:
    """When ``epoch`` was made, on its node's clock (ms; 0: an earlier release's)."""
    return int(epoch[1:12], 16) if epoch[:1] == b"t" and len(epoch) >= 12 else 0


def lost_until(epoch: bytes, position: int, fields: list[Field]) -> float:
    """Until when (loop time) the node at ``position``, now of ``epoch``, may
    have lost grants still valid: the latest end of a record naming another
    epoch there (0: none); one of another list counts when it lacks ``epoch``.
    Looked up at call time: the fault suite's ``per-redlock-restart-rule`` swaps it."""
    ends = [0.0]
    for entries, epochs, end in fields:
        if entries is None:
            if epoch not in epochs:
                ends.append(end)
        elif position < len(entries) and entries[position] not in (UNHEARD, epoch):
            ends.append(end)
    return max(ends)


def _collect(
    tally: Tally, loop: asyncio.AbstractEventLoop, done: Callable[[Answers], None]
) -> None:
    """A census's answers, with the loop time each came, to ``done`` once:
    after every node answered, or at the tally's deadline."""
    answers: Answers = {}
    left = [tally.n]  # -1 once done

    def answer(index: int, reply: Reply) -> None:
        if isinstance(reply, list) and reply and isinstance(reply[0], bytes | str):
            # A client made with decode_responses=True answers in str.
            reply = [x.encode() if isinstance(x, str) else x for x in reply]
            answers[index] = (reply, loop.time())
        elif isinstance(reply, NodeError):
            _log.debug("redlock_async: census: %s", reply)
        left[0] -= 1
        if not left[0]:
            finish()

    def finish() -> None:
        if left[0] >= 0:
            left[0] = -1  # once: after every answer, or at the deadline
            done(answers)

    for index in range(tally.n):
        tally.when_settled(index, partial(answer, index))
    tally.when_expired(finish)


def _read(epochs: Epochs, answers: Answers) -> list[Field]:
    """What a census read besides the epochs: flags a node that may evict, takes
    out of ``epochs``' view each epoch a notice names dead, returns the live records."""
    # epoch -> the position of the node that has it now
    where = {reply[0]: index for index, (reply, _) in answers.items()}
    mark, n, stretch = epochs.mark, len(epochs.ids), 1.0 + epochs.drift
    fields: list[Field] = []
    for index, (reply, heard) in answers.items():
        name = epochs.names[index]
        if isinstance(reply[1], bytes) and reply[1]:
            warn_once(
                f"evict:{name.partition('#')[0]}",  # the server, not the client object
                "redlock_async: %s has a maxmemory and maxmemory-policy %r: it may evict a "
                "held lock's key and grant the name again; set maxmemory-policy noeviction "
                "on lock nodes (docs/guarantees.md, 'Eviction')",
                name,
                reply[1].decode(),
            )
        k = reply[2] if type(reply[2]) is int else 0
        for field, epoch in zip(reply[3 : 3 + k : 2], reply[4 : 3 + k : 2], strict=False):
            of, _, at = field.partition(b".") if isinstance(field, bytes) else (b"", b"", b"")
            if of != mark or not at.isdigit() or not 0 < int(at) <= n:
                if at.isdigit() and of != mark:
                    _misplaced(name)  # another node list's (not an earlier release's)
                continue
            position = int(at) - 1
            if not isinstance(epoch, bytes) or where.get(epoch, position) != position:
                _misplaced(name)
                continue
            mine = epochs.ids[position]
            if mine is not None and born(mine) < born(epoch):
                epochs.ids[position] = None  # dead: its successor is yet to be heard
        for view, ms in zip(reply[3 + k :: 2], reply[4 + k :: 2], strict=False):
            if isinstance(view, bytes) and type(ms) is int and ms > 0:
                of, *entries = view.split(b",")[:-1]
                end = heard + ms / 1000.0 * stretch + _SLACK
                ours = of == mark and all(where.get(e, p) == p for p, e in enumerate(entries))
                if not ours and of:  # another node list's (not the first version's: ",e1,...")
                    _misplaced(name)
                fields.append((tuple(entries) if ours else None, frozenset(entries), end))
    return fields


def _misplaced(name: str) -> None:
    warn_once(
        f"list:{name}",
        "redlock_async: %s holds restart records of another node list on this prefix "
        "(other nodes, or the same in another order): they cost votes here, and the "
        "restart rule needs one order; list the nodes in the same order everywhere, or "
        "give each list its own prefix (docs/guarantees.md, 'Lists in another order')",
        name,
    )


class Epochs:
    """This Redlock's view of the nodes' epochs, and the censuses that update it."""

    def __init__(self, quorum: Quorum, key: bytes, drift: float, *, slotted: bool = False) -> None:
        """``slotted``: one hash slot's (``_slots.py``)."""
        self._quorum = quorum
        self._key = key
        self.drift = drift
        self.names = [node.name for node in quorum.nodes]
        # Positions: the order the Redlock was given its nodes (docs/guarantees.md).
        self.mark = b"n%d" % quorum.n
        self.ids: list[bytes | None] = [None] * quorum.n  # the view's (None: '-')
        self.candidates: list[bytes | None] = [None] * quorum.n  # heard once
        self.ready = False  # the first grant waits for the censuses, later ones never
        self._running = False  # a census is scheduled or in flight
        self._again = False  # a node answered STALE after it was sent
        self._waiters: list[asyncio.Future[None]] = []
        self._heard = b""  # what the last census heard: the next one's notice
        self.closed = False
        self.count = 0  # censuses sent (tests; the docs' cost figures)
        self.slotted = slotted
        self.held = Held(self.admit)  # suspect nodes, out of the view until their time
        self._set_view()  # self.view: the key of the view's record (lua/_epoch.lua)
        if slotted:
            return  # restarts from disk are caught by lua/_epoch_cluster.lua there
        quorum.epochs = self
        for index, watch in enumerate(quorum.watches or ()):
            if watch is not None:
                watch.on_restart = partial(self._restarted, index)

    def stale(self, index: int, keys: Sequence[bytes] = ()) -> NodeError:
        """Node ``index`` answered STALE: ask for a census; the error to record."""
        name = self._quorum.nodes[index].name
        held = self.held.ends.get(index)
        if held is not None:  # kept out on purpose: a census now would find the same
            left = held[1] - self._quorum.running_loop().time()
            return NodeError(
                f"{name} lost its data while grants it may have held can still be valid; "
                f"its votes count again in {max(left, 0.0):.1f}s, once they have expired"
            )
        self.request()
        return NodeError(
            f"{name}: its epoch changed (it lost its data: a restart?), or another process "
            "saw a node's new epoch that this Redlock has not; its votes count after a census"
        )

    def _restarted(self, index: int) -> None:
        """Node ``index`` showed a new run_id: it may keep its epoch but not the
        last grants; held, and out of the view, until two censuses read it."""
        self.forget(index)  # nothing to drop: a node with a watch is never held here
        watches = self._quorum.watches
        watch = watches[index] if watches is not None else None
        if watch is not None:
            watch.hold()
        self.request()

    def forget(self, index: int) -> None:
        """Node ``index`` restarted: out of the view until censuses read it again."""
        self.ids[index] = self.candidates[index] = None
        self.held.drop(index)
        self._set_view()

    def admit(self, index: int, epoch: bytes) -> None:
        """Node ``index``'s ``epoch`` joins the view (its hold is over)."""
        if not self.closed:
            self.ids[index] = epoch
            self._set_view()

    def _spell(self, epochs: Sequence[bytes | None]) -> bytes:
        """``epochs`` by node index, as a view: by position, '-' where None."""
        return b",".join([self.mark, *(epoch or UNHEARD for epoch in epochs)]) + b","

    def _set_view(self) -> None:
        self.view = self._key + b":" + self._spell(self.ids)
        if not self.slotted:
            self._quorum.view = self.view

    def request(self) -> None:
        if self.closed:
            return
        if self._running:
            self._again = True
            return
        self._running = True
        # Soon, not now: every STALE of one fan-out then asks for one census.
        self._quorum.running_loop().call_soon(self._start)

    async def first(self, wait: float, keys: Sequence[bytes] = ()) -> None:
        """Before this Redlock's first grant: the censuses, ``wait`` s at most
        (not done by then, nodes missing from the view answer STALE)."""
        if self.ready or self.closed:
            return
        self._quorum.running_loop()  # first: a loop moved to resets a census left running
        self.request()
        await self.refreshed(wait)

    def refreshing(self, keys: Sequence[bytes] = ()) -> bool:
        """Whether censuses are under way (a node answered STALE)."""
        return self._running and not self.closed

    async def refreshed(self, wait: float, keys: Sequence[bytes] = ()) -> None:
        """Until the censuses under way are done, ``wait`` s at most."""
        if not self._running or self.closed:
            return
        waiter = self._quorum.running_loop().create_future()
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout(wait):
                await waiter
        except TimeoutError:
            pass

    def _start(self) -> None:
        if self.closed:
            self._running = False
            return
        self._again = False
        self.count += 1
        heard, self._heard = self._heard, b""
        tally = self._quorum.fanout(Command(CENSUS, (self._key,), (heard,) if heard else ()))
        _collect(tally, self._quorum.running_loop(), self._finish)

    def _finish(self, answers: Answers) -> None:
        self._running = False
        if self.closed:
            return
        quorum = self._quorum
        now = quorum.running_loop().time()
        fields = _read(self, answers)
        again = False
        for index in range(quorum.n):
            if index not in answers:
                self.candidates[index] = None  # unheard: not two censuses in a row (below)
        for index, (reply, _) in answers.items():
            epoch = reply[0]
            assert isinstance(epoch, bytes)
            if self.ids[index] == epoch:
                continue  # in the view already, and unchanged
            name = quorum.nodes[index].name
            held = self.held.ends.get(index)
            if held is not None:
                if held[0] == epoch:
                    until = lost_until(epoch, index, fields)
                    self.held.hold(index, epoch, until, now, name)
                    continue  # still out, until what this census read has expired too
                self.held.drop(index)  # a new epoch again: judged anew below
            if self.candidates[index] != epoch:
                # A census is not a snapshot: an epoch enters the view once the next
                # census, sent after this one was complete, hears it too; that one
                # leaves this one's findings as notices (the proof's (4)).
                if self.ids[index] is not None:
                    _log.info("redlock_async: %s has a new epoch (it lost its data)", name)
                    self.ids[index] = None  # out of the view: it answers STALE meanwhile
                self.candidates[index] = epoch
                again = True
                continue
            self.candidates[index] = None
            until = lost_until(epoch, index, fields)
            watch = quorum.watches[index] if quorum.watches is not None else None
            if self.slotted or watch is None:
                # No restart watch to hold its votes: out of the view till then.
                self.held.hold(index, epoch, until, now, name)
                continue
            self.ids[index] = epoch
            if until > now:
                watch.suspect(until)
                _log.warning(SUSPECT, name, until - now)
            watch.release()
        self._set_view()
        if again or self._again:
            heard = [answers[i][0][0] if i in answers else None for i in range(quorum.n)]
            self._heard = self._spell(heard)  # type: ignore[arg-type]
            self.request()  # sent once this one is complete
            return
        self.ready = True
        self._wake()

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def reset(self) -> None:
        """The fan-outs moved to another loop or a forked child: what waited there is gone."""
        self._waiters = []
        self._running = self._again = False
        self._heard = b""
        self.candidates = [None] * self._quorum.n  # their census's notice went with _heard
        self.held.clear()  # old loop's timers; a node kept out answers STALE, a census rejudges

    def close(self) -> None:
        self.closed = True
        self.held.clear(cancel=True)
        self._wake()
