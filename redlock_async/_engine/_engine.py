"""The engine's front: what every lock of one Redlock talks to.

Locks see only this narrow API - ``fanout`` (run one command on every node,
get a :class:`Tally` of votes), ``undo``, ``wake.subscribe``, ``drain`` and
``close`` - plus the clock, the token source and the random source they are
given, so that the lock layer can run over a scripted engine in unit tests.
Nothing here knows what a lock is.
"""

from __future__ import annotations

import os
import random
from binascii import hexlify
from collections.abc import Callable, Sequence

from .._base._config import RedlockConfig
from .._base._errors import ConfigurationError, NodeError, RedlockError
from .._base._keys import epoch_key
from .._base._observe import NODE, Telemetry, telemetry, warn
from .._base._world import World, current
from ._admission import LIMIT, Admission
from ._cleanups import Cleanups
from ._drain import drain
from ._epochs import Epochs
from ._node import Command, Node, Unsent
from ._quorum import Quorum
from ._settled import Settled
from ._slots import SlotEpochs
from ._tally import Tally, quorum_of, vote_limit
from ._ttls import TtlLedger
from ._wake import WakeHub

__all__ = ["Engine", "TokenPool"]


_TOKEN_BYTES = 20
_POOL_TOKENS = 128
# Bumped in a forked child: a pool filled before the fork must not be reused
# there, or parent and child would hand out the same tokens.
_forks = [0]
os.register_at_fork(after_in_child=lambda: _forks.__setitem__(0, _forks[0] + 1))


class TokenPool:
    """Grant tokens: 20 random bytes each (the world's ``token_bytes``:
    ``secrets``), hex-encoded for readable keys.

    The bytes are drawn 128 tokens at a time: one ``getrandom`` syscall per
    token cost about 5% of a grant's CPU. One pool per Redlock, used from
    its event loop only (a shared pool would need a lock across threads).
    """

    __slots__ = ("buffer", "fork", "offset", "token_bytes")

    def __init__(self, token_bytes: Callable[[int], bytes] | None = None) -> None:
        self.token_bytes = token_bytes if token_bytes is not None else current().token_bytes
        self.buffer = b""
        self.offset = 0
        self.fork = _forks[0]

    def __call__(self) -> bytes:
        offset = self.offset
        if offset == len(self.buffer) or self.fork != _forks[0]:
            # Hex-encoded once per pool: a token is then one slice.
            self.buffer = hexlify(self.token_bytes(_TOKEN_BYTES * _POOL_TOKENS))
            self.fork = _forks[0]
            offset = 0
        self.offset = offset + 2 * _TOKEN_BYTES
        return self.buffer[offset : offset + 2 * _TOKEN_BYTES]


class Engine:
    """The nodes of one Redlock and the fan-outs over them. Not public.

    It lives in ``world`` (default: the current one, ``_world.py``): the
    clock, token source and random source not given come from there.
    """

    def __init__(
        self,
        nodes: Sequence[Node],
        config: RedlockConfig,
        *,
        world: World | None = None,
        clock: Callable[[], float] | None = None,
        token_factory: Callable[[], bytes] | None = None,
        rng: random.Random | None = None,
        ttls: TtlLedger | None = None,
    ) -> None:
        self.world = world = world if world is not None else current()
        self.clock = clock = clock if clock is not None else world.monotonic
        self.nodes = tuple(nodes)
        self.quorum = quorum_of(len(self.nodes))
        self._quorum = Quorum(self.nodes, config.node_timeout)
        self._quorum.clock = clock  # resend deadlines are on it
        self.wake: WakeHub | None = None
        if config.wake_on_release:
            hub = WakeHub([node.wake_source for node in self.nodes], config.node_timeout)
            self.wake = hub if hub.enabled else None
        # The hot path calls this once per acquire and release: no extra frame.
        self.fanout = self._quorum.fanout
        # Releases and undos: at most LIMIT on the wire, the rest queued in order.
        self.cleanups = Cleanups(self._quorum)
        self.cleanup = self.cleanups.send
        self.loop = self._quorum.running_loop
        self.config = config
        # The longest a vote may stay pending (_tally.py): read by every
        # acquire that has a deadline or waits for a census, computed once.
        self.vote_span = vote_limit(config.node_timeout)
        self.new_token = (
            token_factory if token_factory is not None else TokenPool(world.token_bytes)
        )
        self.rng = rng or world.rng
        self.closed = False
        # aclose() has begun: no new attempt starts, while what is in flight
        # settles and is cleaned up (cleanups still go out until closed).
        self.closing = False
        self.ttls = ttls or TtlLedger()  # the longest ttl granted (_ttls.py)
        # Metrics and spans when opentelemetry-api is installed (None: off).
        self._telemetry = telemetry(config.telemetry, config.telemetry_lock_names, clock)
        self._quorum.on_error = self._node_failed
        # The nodes' epochs: who may have lost grants still valid (_epochs.py);
        # per hash slot with a Redis Cluster among the nodes (_slots.py).
        key, drift = epoch_key(config.prefix), config.drift_factor
        self.epochs: Epochs | SlotEpochs
        if not any(getattr(node, "cluster", False) for node in self.nodes):
            self.epochs = Epochs(self._quorum, key, drift)
        else:
            self.epochs = slotted = SlotEpochs(self._quorum, key, drift)
            for node in self.nodes:
                use_slots = getattr(node, "use_slots", None)
                if use_slots is None:  # both drivers' nodes have it; a test's stand-in may not
                    raise ConfigurationError(
                        f"node {node.name!r} cannot serve beside a Redis Cluster node"
                    )
                use_slots(slotted.view_of)
        # Also told of every node failure, granted attempts' included: the
        # CLI's bench counts them by type (failure path only, never the hot one).
        self.error_listeners: list[Callable[[str, NodeError], None]] = []
        # Bounds the acquire attempts on the wire; the rest wait their turn.
        self._limit = min((node.concurrency for node in self.nodes), default=LIMIT)
        self.admission = Admission(self._limit)
        # Told after the fan-outs moved to another loop or into a forked
        # child (the lock layer then drops the grants it held).
        self.on_rehome: list[Callable[[], None]] = []
        self._quorum.on_rehome = self._rehome

    @property
    def telemetry(self) -> Telemetry | None:
        """Where to report metrics and spans; None when off, or while no SDK's
        providers are installed (nothing would record them: ``Telemetry.live``)."""
        reporter = self._telemetry
        if reporter is None or reporter.live():
            return reporter
        return None

    def _node_failed(self, index: int, error: NodeError) -> None:
        """A node failed a command (or its vote timed out): a rate-limited warning
        on ``redlock_async.node`` and, with telemetry, the ``redlock.node.errors`` counter."""
        name = self.nodes[index].name
        message = f"{name} failed a command: {type(error).__name__}: {error}"
        warn(NODE, "failed", name, message, node=name, outcome=type(error).__name__)
        if self.telemetry is not None:
            self.telemetry.node_error(name, error)
        for listener in self.error_listeners:
            listener(name, error)

    def check_open(self) -> None:
        if self.closing:  # set by close() too
            raise RedlockError("this Redlock is closed")

    def close(self) -> None:
        self.closing = True
        self.closed = True
        self.epochs.close()  # a first grant waiting for a census goes on
        self.cleanups.flush()  # still queued: out now, to land as the nodes close
        self._quorum.close()

    async def drain(self, quiet: float) -> None:
        """Let fan-outs in flight settle, for ``aclose()`` (``_drain.py``).

        However long the nodes take to answer what is queued, but no longer
        than ``quiet`` seconds in which nothing settles, nor than the longest
        ttl granted: every key a cleanup removes has expired by then.
        """
        await drain(self._quorum, self.cleanups, quiet, max(quiet, self.ttls.longest))

    def _rehome(self) -> None:
        """The fan-outs moved to another event loop, or this is a forked child.

        Connections and subscriptions of the old loop are forgotten (not
        closed: in a forked child they are the parent's); then the listeners
        (the lock layer) drop what they held there.
        """
        for node in self.nodes:
            node.reset()
        self.admission = Admission(self._limit)  # waiters of the old loop are gone with it
        self.cleanups.reset()
        self.epochs.reset()
        if self.wake is not None:
            self.wake.reset()
        for listener in self.on_rehome:
            listener()

    def undo(self, tally: Tally | Settled, release: Command, until: float = 0.0) -> Tally | None:
        """Run ``release`` wherever ``tally``'s command may have taken effect.

        That is every node that said yes, failed (a broken connection may still
        have run the command) or has not answered yet; the release is ordered
        after the pending command. Nobody awaits it: it must run even when the
        caller was cancelled, and its outcome changes nothing for the caller.
        Returns its tally (None: nothing to undo), for whoever must know when
        it has run.
        """
        targets = [
            index
            for index, reply in enumerate(tally.replies)
            # A plain "no" wrote nothing; a command never written ran nowhere.
            if not (type(reply) is int and reply == 0) and not isinstance(reply, Unsent)
        ]
        if targets and not self.closed:
            cleanup = self.cleanup(release, after=tally, only=targets)
            # Until when a key it left can still be there (never more than
            # the longest ttl granted from now): resend where connections fail.
            cleanup.resend_until = until or self.clock() + self.ttls.longest
            return cleanup
        return None
