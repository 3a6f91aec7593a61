"""The lean driver's turns beside a Redis Cluster (``resp/_split.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from redlock_async._engine._node import Call, Command, Reply, Script, Sink, SplitCommand
from redlock_async._engine.resp._split import Turns

_SCRIPT = Script("noop", b"return 1", b"0" * 40)


class _Settled:
    command: Command | None = None

    def __init__(self) -> None:
        self.replies: list[Reply] = []

    def settle(self, index: int, reply: Reply) -> None:
        self.replies.append(reply)


def _view(keys: Sequence[bytes]) -> bytes:
    return b","


async def test_commands_queued_behind_a_split_drain_in_linear_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every command sent while a split runs waits its turn. Each waited for
    # every task before it (asyncio.wait over all of them): 4,000 commands
    # behind one split took 21 s of the loop's time, the node's votes failing
    # meanwhile. A chain (each behind the one before) keeps the order. Counted,
    # not timed: the tasks waited for, summed over every turn, grow linearly.
    waited = [0]
    wait = asyncio.wait

    async def counting_wait(tasks: Any, **kwargs: Any) -> Any:
        waited[0] += len(tasks)
        return await wait(tasks, **kwargs)

    monkeypatch.setattr(asyncio, "wait", counting_wait)
    loop = asyncio.get_running_loop()
    gate: asyncio.Future[None] = loop.create_future()
    sent: list[Command] = []

    def send(command: Command, sink: Sink) -> None:
        sent.append(command)

    turns = Turns(send, 0, "node", 60.0, _view)

    async def split(call: Call) -> object:
        await gate
        return 1

    first = _Settled()
    assert turns.take(SplitCommand(_SCRIPT, (b"a", b"b"), (), split), first)
    queued = [Command(_SCRIPT, (b"k%d" % i,), ()) for i in range(4000)]
    for command in queued:
        assert turns.take(command, _Settled())
    gate.set_result(None)
    await wait(tuple(turns.tasks))  # not counted
    assert waited[0] <= len(queued)  # one predecessor each (was about n² / 2)
    assert first.replies == [1]
    assert sent == queued  # in the order sent
