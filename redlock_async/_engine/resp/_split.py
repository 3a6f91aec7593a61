"""A command over several hash slots, run a slot at a time on a lean node.

Beside a Redis Cluster node, every node keeps the restart rule per hash slot
(``_engine/_slots.py``): a multilock's names go one at a time, each part with
its own slot's view, as the cluster runs them (``SplitCommand``). The lean
driver answers through callbacks, so the parts run in a task, each sent on
the node's one connection and awaited; the command's vote is the split's
result. The node still runs commands in the order sent (``Node.ordered``:
a cleanup goes out at once, trusting that): a command sent while a split
runs waits in a task of its own until every split before it has ended.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from ..._base._errors import NodeConnectionError, NodeError, NodeTimeoutError
from .._node import Arg, Command, Reply, Script, Sink, SplitCommand, Unsent, unsent

__all__ = ["Turns"]

Send = Callable[[Command, Sink], None]


class _Part:
    """The sink of one part: its reply, for the task that awaits it."""

    __slots__ = ("command", "future")

    def __init__(self, command: Command, future: asyncio.Future[Reply]) -> None:
        self.command: Command | None = command  # NOSCRIPT resends it as EVAL
        self.future = future

    def settle(self, index: int, reply: Reply) -> None:
        if not self.future.done():
            self.future.set_result(reply)


class Turns:
    """One lean node's split commands, and the commands waiting behind them."""

    def __init__(
        self,
        send: Send,
        index: int,
        name: str,
        stall: float,
        view_of: Callable[[Sequence[bytes]], bytes],
    ) -> None:
        self._send = send  # the node's own send, never behind a turn
        self._index = index
        self._name = name
        self._stall = stall
        self._view_of = view_of
        # In the order started (a dict, not a set: closing cancels them in
        # this order, the same run after run, whatever their addresses).
        self.tasks: dict[asyncio.Task[None], None] = {}
        # The latest task: the next one waits for it alone, a chain (each
        # waiting for every task before it cost O(n^2): 4,000 commands queued
        # behind a split took 21 s to drain).
        self._last: asyncio.Task[None] | None = None

    def take(self, command: Command, sink: Sink) -> bool:
        """Run ``command`` in its turn if it is a split one or splits are
        running (True), else leave it to the node (False): after every
        task before it has ended, a split command a slot at a time."""
        if not self.tasks and not isinstance(command, SplitCommand):
            return False
        last = self._last
        before = None if last is None or last.done() else last
        task = asyncio.get_running_loop().create_task(self._turn(before, command, sink))
        tasks = self.tasks
        tasks[task] = None
        self._last = task
        task.add_done_callback(lambda done: tasks.pop(done, None))
        return True

    async def _turn(self, before: asyncio.Task[None] | None, command: Command, sink: Sink) -> None:
        if before is not None:
            try:
                await asyncio.wait((before,))
            except asyncio.CancelledError:  # closing: never written, its vote fails
                error = NodeConnectionError(f"{self._name}: the Redlock is closed")
                sink.settle(self._index, unsent(error))
                raise
        if not isinstance(command, SplitCommand):
            self._send(command, sink)
            return
        index, name = self._index, self._name
        try:
            async with asyncio.timeout(self._stall):
                reply: object = await command.split(command.telling(self._call, index))
        except NodeError as error:
            if isinstance(error, Unsent) and command.ran(index):
                # A later part was never written, but the ones before it ran
                # (a key taken): not "never sent", or the undo skips this node.
                error = _written(error)
            sink.settle(index, error)
            return
        except TimeoutError:
            sink.settle(index, NodeTimeoutError(f"{name}: no reply to a split command"))
            return
        except asyncio.CancelledError:
            sink.settle(index, NodeConnectionError(f"{name}: command cancelled"))
            raise
        if reply is None or isinstance(reply, int | bytes | list):
            sink.settle(index, reply)
        else:
            sink.settle(index, NodeConnectionError(f"{name}: unexpected reply {reply!r}"))

    async def _call(self, script: Script, keys: Sequence[bytes], args: Sequence[Arg]) -> object:
        """One part: sent on the node's connection at once, its reply awaited."""
        if script.views:
            args = (*args, self._view_of(keys))  # this part's slot's view
        future: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        part = Command(script, keys, args)
        self._send(part, _Part(part, future))
        reply = await future
        if isinstance(reply, NodeError):
            raise reply  # the whole command's vote fails, as on redis-py
        return reply

    def reset(self) -> None:
        """Another event loop, or a forked child: the old loop's tasks are dropped."""
        self.tasks = {}
        self._last = None

    async def aclose(self, stall: float) -> None:
        """Closing: what is queued still goes out (a release behind a split
        too: cancelled, it would leave its key for a whole ttl) while the node
        answers, up to ``stall`` s; then every vote still waiting fails."""
        tasks = tuple(self.tasks)
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=stall)
        for task in tasks:  # in order: asyncio.wait's sets are in address order
            if task in pending:
                task.cancel()
        if pending:
            await asyncio.wait(pending)


def _written(error: NodeError) -> NodeError:
    """``error`` without its :class:`Unsent` mark (of the type users know)."""
    cls: type[NodeError] = NodeError
    for base in type(error).__mro__:
        if issubclass(base, NodeError) and not issubclass(base, Unsent):
            cls = base  # unsent() marks a subclass of the original type
            break
    plain = cls(*error.args)
    plain.__cause__ = error.__cause__
    return plain
