"""The restart rule's own schedule, played once per kind of data loss as each seed begins.

The nemesis's data losses rarely meet a grant held on a bare quorum that
another process then wants, so most of the rule's planted bugs went uncaught
(docs/faults.md, "Planted bugs"). Here it is made certain, in the model (one
faulty node at a time; every other node reachable by the process that asks),
before any worker starts: a worker's grant would write the record of the
view on every node, and a census that stops early would find it anyway:

- ``e1`` and ``e0`` each take and release a name: their views of the nodes
  are made before the loss. ``e1``'s paths to nodes ``1 .. quorum-1`` are
  slower than the others, so those nodes - the only ones that keep the lost
  grant's record after the loss - answer its censuses last;
- ``e0``, once it counts nodes ``0 .. quorum-1``, its commands to the nodes
  past them lost (blackholed), is granted ``restart-probe`` there: a bare
  quorum. Its paths heal;
- node 0 loses its data: emptied by ``FLUSHALL`` (the same server: no
  restart for a watch to see) 2.8 s after the grant, past a quarter of the
  view's record a grant must leave; or restarted, at once, from an
  append-only file that lacks the writes since the grant (its epoch kept);
- after the ``FLUSHALL``, a process started then (``fresh0``), with the same slow paths,
  asks for ``restart-probe`` for half a second: its censuses are all it
  knows, and only nodes ``1 .. quorum-1``, which answer them last, hold the
  record that makes node 0 suspect (``restart-census-stops-early``: e1's own
  attempts after the loss leave a record naming node 0's old epoch on the
  fast nodes too);
- ``e1`` asks for ``restart-probe`` for 3 s, past a restart's 2 s hold. Only
  the restart rule keeps node 0's yes from counting with the free nodes':
  a second holder otherwise (``mutual_exclusion``).

What each loss catches: a node that answers whatever view it is sent
(``restart-no-epoch-check``), the FLUSHALL alone; a new ``run_id`` taken
for nothing (``restart-from-disk-trusted``), the append-only file alone
(its epoch is kept, only the restart tells); the rest, either.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from redlock_async._base._keys import lock_key

from ..faults.bounds import restart_out
from .faults import Fault

if TYPE_CHECKING:
    from redlock_async import Lock

    from .deploy import Deployment
    from .node import SimNode
    from .process import SimProcess

__all__ = ["EPISODES_TIME", "KINDS", "LONGEST_TTL", "restart_episodes"]

PROBE_TTL = 7.0
"""``e0``'s grant: valid past ``e1``'s last try after a restart's hold (and
the fresh process's half second before it)."""

KINDS = ("flushall", "restart-aof-prefix")
"""The losses played: a restart empty is the nemesis's most common one already."""

LONGEST_TTL = 10.0
"""The longest ttl of the deployment: the fenced register's locks (a key one
leaks outlives the tail)."""

EPISODE_AT = 1.0
"""After the seed's start (the hoard's grants, beside it, are taken by then)."""

EPISODE_EVERY = 2.8 + 1.25 * LONGEST_TTL + 1.5
"""Between two episodes' starts: node 0, kept out after the last one's loss
while a grant it may have held can be valid, is back (the longest ttl, not
the probe's: the nemesis's model of a loss, which the episode shares)."""

EPISODES_TIME = EPISODE_AT + len(KINDS) * EPISODE_EVERY
"""From the seed's start to the workers' (``deploy.py``): the episodes' part."""


async def restart_episodes(dep: Deployment) -> None:
    """The episodes, one per kind of :data:`KINDS`, from :data:`EPISODE_AT` after the start."""
    loop = dep.sim.loop
    for number, kind in enumerate(KINDS):
        start = dep.sim.start + EPISODE_AT + number * EPISODE_EVERY
        await asyncio.sleep(max(0.0, start - loop.time()))
        await _episode(dep, number, kind)


async def _episode(dep: Deployment, number: int, kind: str) -> None:
    loop = dep.sim.loop
    names = [server.name for server in dep.sim.servers]
    quorum = len(names) // 2 + 1
    name = "restart-probe"
    asker, holder = dep.sim.spawn(), dep.sim.spawn()
    record_holder = dep.recorder.for_process(f"e{2 * number}")
    for slow in names[1:quorum]:
        dep.sim.net.path(asker.name, slow).latency = 0.015
    for process in (asker, holder):  # each makes its view of the nodes first
        warm = process.context.run(process.redlock.lock, f"restart-warm{number}", ttl=2.0)
        if await process.spawn(warm.acquire(timeout=2.0)):
            await process.spawn(_quietly(warm.release()))
    await _counted(dep, holder, range(quorum), within=15.0)
    for path in dep.sim.net.paths_between([holder.name], names[quorum:]):
        path.blackhole = True  # its commands there lost, not held: a bare quorum
    held = holder.context.run(holder.redlock.lock, name, ttl=PROBE_TTL, auto_extend=False)
    ok = await holder.spawn(held.acquire(timeout=2.0))
    dep.sim.net.heal([holder.name], names[quorum:])
    if ok:
        granted = loop.time()
        token = held.token or ""
        record_holder("ok", "acquire", key=name, token=token, valid_until=granted + held.valid_for)
        if kind == "flushall":
            await asyncio.sleep(max(0.0, granted + 2.8 - loop.time()))
        _lose(dep, kind, lock_key("redlock:", name))
        await asyncio.sleep(0.2)
        if kind == "flushall":
            # First a process started after the loss: its first censuses
            # are all it knows of the nodes (no attempt of its own with
            # an old view has left a record on the fast nodes yet). Not
            # after a restart from disk: its census would give node 0 a
            # new epoch, which e1's old view must meet unchanged.
            fresh = dep.sim.spawn()
            for slow in names[1:quorum]:
                dep.sim.net.path(fresh.name, slow).latency = 0.015
            await _ask(dep, fresh, name, f"fresh{number}", within=0.5)
            await fresh.spawn(fresh.redlock.aclose())
        await _ask(dep, asker, name, f"e{2 * number + 1}")
        record_holder("release", "acquire", key=name, token=token)
    await _close(asker, holder, held)


async def _ask(
    dep: Deployment, asker: SimProcess, name: str, called: str, within: float = 3.0
) -> None:
    """``asker`` tries for ``name`` for ``within`` s; granted, holds it half a second."""
    loop = dep.sim.loop
    record = dep.recorder.for_process(called)
    other = asker.context.run(asker.redlock.lock, name, ttl=4.0, auto_extend=False)
    if await asker.spawn(other.acquire(timeout=within)):
        until = loop.time() + other.valid_for
        record("ok", "acquire", key=name, token=other.token or "", valid_until=until)
        await asyncio.sleep(0.5)
        record("release", "acquire", key=name, token=other.token or "")
        await asker.spawn(_quietly(other.release()))


async def _close(asker: SimProcess, holder: SimProcess, held: Lock) -> None:
    await holder.spawn(_quietly(held.release()))
    await asker.spawn(asker.redlock.aclose())
    await holder.spawn(holder.redlock.aclose())


async def _counted(dep: Deployment, process: SimProcess, nodes: range, within: float) -> None:
    """Until ``process`` counts every one of ``nodes`` (``within`` s at most).

    A new process may keep out, for up to 1.25 x the longest ttl, a node that
    every running one counts (issue 40: a record whose view missed a node),
    and the last episode's loss may not have ended yet.
    """
    from .deploy import kept_out  # deploy.py imports this module

    loop = dep.sim.loop
    await _until(dep, lambda: not set(nodes) & set(kept_out(process.redlock, loop.time())),
                 within, every=0.1)  # fmt: skip


async def _until(dep: Deployment, done: Callable[[], bool], within: float, every: float) -> bool:
    """Whether ``done()`` came true within ``within`` s, asked every ``every`` s
    (a state of the simulation nothing signals)."""
    loop = dep.sim.loop
    deadline = loop.time() + within
    while not done():
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(every)
    return True


def _lose(dep: Deployment, kind: str, key: bytes) -> None:
    """Node 0 loses its data the way ``kind`` says; the history and the
    liveness checkers' bookkeeping are told, as for the nemesis's losses."""
    node = dep.nodes[0]
    lost = since_written(node, key)
    fault = Fault(10_000, kind, dep.sim.loop.time(), 0.0, (0,), (), float(lost))
    if kind == "flushall":
        node.flushall()
    else:
        dep.sim.servers[0].restart(down_for=0.0, keep="aof_prefix", lost=lost)
    dep.record_fault("fault", fault)
    end = restart_out(fault.at, fault.at, dep.longest_ttl)
    dep.nemesis.losses[0] = max(dep.nemesis.losses.get(0, 0.0), end)
    dep.record_fault("heal", fault)


def since_written(node: SimNode, key: bytes) -> int:
    """How many of ``node``'s last write units reach back to the last write of
    ``key`` (all it keeps, when none of them wrote it)."""
    units = node.journal.units if node.journal is not None else ()
    for back, unit in enumerate(reversed(units), start=1):
        if any(written == key for _, written in unit):
            return back
    return len(units)


async def _quietly(release: Awaitable[object]) -> None:
    """A release whose failure (the grant already lost) is no finding here."""
    with contextlib.suppress(Exception):  # LockNotOwned, LockLost: the history has the claim
        await release
