"""Shared fixtures: Redlocks over throwaway nodes, through either driver.

The node fixtures (``redis_nodes``, ``redis_nodes_factory``, ``redis_cluster``)
come from the project's own pytest plugin, ``redlock_async.testing``.

Every async test is parametrized over each event loop installed, asyncio's
own and uvloop (test ids ``[asyncio]`` and ``[uvloop]``; ``--loop NAME``
keeps one), and every lock test over both node drivers (``[resp]``,
``[redis-py]``). Which of those combinations run is ``--matrix``'s choice:

- ``--matrix=default`` (plain ``pytest``): each test once, on one
  combination, rotated through a module's tests (asyncio/resp,
  uvloop/redis-py, asyncio/redis-py, uvloop/resp; or asyncio, uvloop): every
  test runs, every module on both loops and both drivers where it has tests
  enough, in about a third of the time.
- ``--matrix=full``: every combination (what CI runs as well).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import warnings
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

import pytest
import redis.asyncio

from redlock_async import Redlock
from redlock_async._base._observe import reset_limits
from redlock_async.testing import ProxyListener, RedisNode, RedisNodes

from ._loops import LOOPS, LoopFactory

MakeRedlock = Callable[..., Redlock]
MakeRouted = Callable[[list[ProxyListener], float], Redlock]
"""``routed``: a Redlock over these proxy routes, with this node_timeout."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--loop",
        action="append",
        choices=sorted(LOOPS),
        help="run the async tests on this event loop only (repeatable; default: every one "
        f"installed: {', '.join(LOOPS)})",
    )
    parser.addoption(
        "--matrix",
        choices=["default", "full"],
        default="default",
        help="default: each test on one event loop and driver, rotated through a module's "
        "tests; full: on every loop and driver (CI)",
    )


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, LoopFactory]:
    """Each async test once per loop: the library must work on asyncio's and uvloop's."""
    chosen: list[str] | None = config.getoption("loop")
    return {name: LOOPS[name] for name in chosen} if chosen else LOOPS


# The order combinations are handed out in, through a module's tests: any two
# neighbours differ in loop and in driver.
ROTATION = [
    ("asyncio", "resp"),
    ("uvloop", "redis-py"),
    ("asyncio", "redis-py"),
    ("uvloop", "resp"),
]
_LOOP_PARAM = "_asyncio_loop_factory"  # pytest-asyncio's parameter for the loop
# One test apart from its loop and driver: module, function, its other parameters.
Variant = tuple[str, str, tuple[tuple[str, str], ...]]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--matrix=default``: keep one loop/driver combination of each test."""
    if config.getoption("matrix") == "full":
        return
    loop_names: dict[object, str] = {factory: name for name, factory in LOOPS.items()}
    variants: dict[Variant, list[tuple[tuple[str, str], pytest.Item]]] = defaultdict(list)
    for item in items:
        params: dict[str, object] = getattr(getattr(item, "callspec", None), "params", {})
        combo = (loop_names.get(params.get(_LOOP_PARAM), ""), str(params.get("driver", "")))
        rest = tuple(
            sorted((k, str(v)) for k, v in params.items() if k not in (_LOOP_PARAM, "driver"))
        )
        key: Variant = (str(item.path), getattr(item, "originalname", item.name), rest)
        variants[key].append((combo, item))
    # The n-th test of a module with several combinations gets the n-th in
    # rotation (sorted, so that the choice does not depend on the run order),
    # counted per module and kind (loops and drivers, or loops alone): each
    # kind cycles through its combinations. A module's only test of a kind
    # keeps two, so that the module still sees both loops (and drivers).
    kinds: dict[str, int] = defaultdict(int)
    for key, found in variants.items():
        kinds[f"{key[0]}:{len(found)}"] += 1
    turn: dict[str, int] = defaultdict(int)
    dropped: set[pytest.Item] = set()
    for key in sorted(variants, key=repr):
        found = variants[key]
        if len(found) < 2:
            continue
        rotation = _rotation_of(found)
        kind = f"{key[0]}:{len(found)}"
        n = turn[kind]
        turn[kind] += 1
        keep = {rotation[n % len(rotation)]}
        if kinds[kind] == 1:
            keep.add(rotation[1])
        dropped.update(item for combo, item in found if combo not in keep)
    if dropped:
        config.hook.pytest_deselected(items=[item for item in items if item in dropped])
        items[:] = [item for item in items if item not in dropped]


def _rotation_of(found: list[tuple[tuple[str, str], pytest.Item]]) -> list[tuple[str, str]]:
    """The combinations present, in ROTATION's order (those it does not name after)."""
    present = sorted({combo for combo, _ in found})
    named = [combo for combo in ROTATION if combo in present]
    if not named:  # a loop alone (asyncio, uvloop) or a driver alone (resp, redis-py)
        return present
    return named + [combo for combo in present if combo not in named]


@pytest.fixture(autouse=True)
def _fresh_warning_limits() -> None:
    """The library rate-limits its warnings per process (docs/observability.md): each
    test starts as a fresh process would, whatever the tests before it logged."""
    reset_limits()  # the nodes flagged once per process (eviction, another order) too


@pytest.fixture(params=["resp", "redis-py"])
def driver(request: pytest.FixtureRequest) -> str:
    """Every lock test runs through both node drivers."""
    return str(request.param)


@pytest.fixture
async def make_redlock(driver: str, redis_nodes: RedisNodes) -> AsyncIterator[MakeRedlock]:
    """Build a Redlock over ``redis_nodes`` (or given nodes) with the chosen driver."""
    made: list[Redlock] = []
    clients: list[redis.asyncio.Redis] = []

    def make(nodes: Sequence[RedisNode] | None = None, **kwargs: Any) -> Redlock:
        group = redis_nodes if nodes is None else nodes
        if driver != "resp":
            # redis-py opens a pooled connection per concurrent command (each
            # with a handshake of its own), through the fault proxy, on two
            # busy cores: give it more than the 50 ms default per command.
            kwargs.setdefault("node_timeout", 0.25)
        redlock = _build(driver, [node.url for node in group], clients, **kwargs)
        made.append(redlock)
        return redlock

    yield make
    for redlock in made:
        await redlock.aclose()
    for client in clients:
        await client.aclose()
    # redis-py closes some sockets without waiting for them: let the loop
    # finish closing them before pytest-asyncio closes the loop.
    await asyncio.sleep(0.05)


def _build(
    driver: str, urls: list[str], clients: list[redis.asyncio.Redis], **kwargs: Any
) -> Redlock:
    """A Redlock over ``urls`` through ``driver``: the URLs themselves (the
    lean driver), or redis-py clients made from them, added to ``clients``."""
    if driver == "resp":
        return Redlock(urls, **kwargs)
    # No socket_timeout on purpose: the library must bound commands itself.
    new = [redis.asyncio.Redis.from_url(url) for url in urls]
    clients.extend(new)
    return Redlock(new, **kwargs)


@pytest.fixture
async def routed(driver: str) -> AsyncIterator[MakeRouted]:
    """Redlocks over fault-proxy routes of their own (``RedisNodes.route()``),
    one per process of a schedule, through ``driver``, with ``node_timeout``."""
    made: list[Redlock] = []
    clients: list[redis.asyncio.Redis] = []

    def make(routes: list[ProxyListener], node_timeout: float) -> Redlock:
        urls = [f"redis://127.0.0.1:{route.port}/0" for route in routes]
        redlock = _build(driver, urls, clients, node_timeout=node_timeout)
        made.append(redlock)
        return redlock

    yield make
    # A test may have used them on event loops it ran and closed itself.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        for redlock in made:
            await redlock.aclose()
        for client in clients:
            with contextlib.suppress(RuntimeError):  # used last on a loop now closed
                await client.aclose()
        await asyncio.sleep(0.05)
        gc.collect()


@pytest.fixture
async def redlock(make_redlock: MakeRedlock) -> Redlock:
    return make_redlock()


def lock_keys(nodes: Sequence[RedisNode], pattern: str = "redlock:*") -> list[list[bytes]]:
    """Every node's keys matching ``pattern`` (read straight from the server),
    but the prefix's epoch hash and view records (``<prefix>~epoch``, one per
    prefix, kept for good as the node's identity; ``<prefix>~epoch:<view>``,
    expiring by themselves; docs/keys.md)."""
    return [
        sorted(key for key in map(_as_bytes, node.client().keys(pattern)) if b"~epoch" not in key)
        for node in nodes
    ]


def _as_bytes(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else value


async def settle(seconds: float = 0.3) -> None:
    """Let in-flight commands (late replies, cleanup) land before inspecting nodes."""
    await asyncio.sleep(seconds)


async def eventually(check: Callable[[], bool], within: float = 15.0) -> bool:
    """True once ``check()`` holds: decisions do not wait for the slowest node,
    so its commands may still be landing. Polls up to ``within`` seconds - a
    liveness bound, not a speed requirement."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not check():
        if loop.time() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def no_keys_left(nodes: Sequence[RedisNode], within: float = 15.0) -> bool:
    """True once no node holds a ``redlock:*`` key (in-flight cleanup may still land)."""
    return await eventually(lambda: all(not keys for keys in lock_keys(nodes)), within)
