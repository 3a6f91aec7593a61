"""The renewal timetable: entries by due time, one timer, lazy removal (virtual time)."""

from __future__ import annotations

import asyncio
from typing import Any

from redlock_async._base._timetable import Timetable

from ._scripted import VirtualClock, run


class Item:
    def __init__(self, name: str) -> None:
        self.name = name
        self.slot: list[Any] | None = None

    def __repr__(self) -> str:
        return self.name


class Log:
    """Takes whatever fell due (up to ``limit`` at a time) and notes when."""

    def __init__(self, clock: VirtualClock, limit: int = 100) -> None:
        self.clock = clock
        self.limit = limit
        self.table: Timetable[Item] = Timetable(self.fired)
        self.taken: list[tuple[float, list[str]]] = []
        self.fires = 0

    def fired(self) -> None:
        self.fires += 1
        while self.table.due:
            names = [item.name for _, items in self.table.take(self.limit) for item in items]
            self.taken.append((self.clock() - 1000.0, names))


def test_entries_are_handed_out_when_due_earliest_first() -> None:
    clock = VirtualClock()
    log = Log(clock)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for name, due in (("a", 5.0), ("b", 3.0), ("c", 5.0), ("d", 4.0)):
            log.table.add(Item(name), loop.time() + due, loop)
        await asyncio.sleep(10.0)

    run(main(), clock)
    assert log.taken == [(3.0, ["b"]), (4.0, ["d"]), (5.0, ["a", "c"])]
    assert log.table.entries == 0


def test_an_entry_taken_out_early_is_skipped_and_once_even_if_added_back_to_its_bucket() -> None:
    clock = VirtualClock()
    log = Log(clock)
    early, back, kept = Item("early"), Item("back"), Item("kept")

    async def main() -> None:
        loop = asyncio.get_running_loop()
        due = loop.time() + 1.0
        for item in (early, back, kept):
            log.table.add(item, due, loop)
        log.table.discard(early)
        log.table.discard(back)
        log.table.add(back, due, loop)  # the same bucket, again
        await asyncio.sleep(2.0)

    run(main(), clock)
    [(when, names)] = log.taken
    assert when == 1.0
    assert sorted(names) == ["back", "kept"]  # "back" once, though twice in the bucket
    assert log.table.entries == 0
    assert log.table.stale == 0


def test_take_hands_out_at_most_the_limit_and_keeps_the_rest_due() -> None:
    clock = VirtualClock()
    log = Log(clock, limit=3)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        for i in range(4):
            log.table.add(Item(f"x{i}"), now + 1.0, loop)
        for i in range(3):
            log.table.add(Item(f"y{i}"), now + 1.5, loop)
        await asyncio.sleep(1.2)
        await asyncio.sleep(1.0)

    run(main(), clock)
    # Each take stops at 3; a slice may span buckets.
    assert [len(names) for _, names in log.taken] == [3, 1, 3]
    assert sorted(n for _, names in log.taken for n in names) == sorted(
        [f"x{i}" for i in range(4)] + [f"y{i}" for i in range(3)]
    )


def test_entries_taken_out_early_are_swept_once_they_are_most_of_the_table() -> None:
    clock = VirtualClock()
    log = Log(clock)
    items = [Item(f"i{i}") for i in range(3000)]

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for i, item in enumerate(items):
            log.table.add(item, loop.time() + 10.0 + i % 7, loop)
        for item in items[:2000]:
            log.table.discard(item)
        assert log.table.entries < 3000 - 2000 + 1100
        await asyncio.sleep(20.0)

    run(main(), clock)
    assert sorted(n for _, names in log.taken for n in names) == sorted(
        item.name for item in items[2000:]
    )


def test_close_cancels_the_timer_and_forgets_everything() -> None:
    clock = VirtualClock()
    log = Log(clock)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        log.table.add(Item("a"), loop.time() + 1.0, loop)
        log.table.close()
        await asyncio.sleep(2.0)

    run(main(), clock)
    assert log.taken == []
    assert log.fires == 0  # no timer left behind
    assert log.table.entries == 0
