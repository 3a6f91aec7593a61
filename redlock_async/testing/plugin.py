"""pytest plugin: throwaway Redis nodes with fault injection.

Registered through the ``pytest11`` entry point, so installing redlock_async
makes these fixtures available to any test suite:

- ``redis_nodes``: N nodes (``@pytest.mark.redis_nodes(N)``, default 3), each
  a real ``redis-server`` behind its own port of a fault-injecting proxy;
  ``@pytest.mark.redis_nodes(N, acl_user=AclUser(...))`` gives every node that
  ACL user, and node URLs that log in as it;
- ``redis_nodes_factory``: ``make(n, acl_user=None)`` for tests that need
  several groups;
- ``redis_cluster``: a 3-master Redis Cluster of local processes.

Everything is stopped at teardown, by pid, whatever the test's outcome.
The fixtures are sync (process management is), so they suit any test style:
sync or async tests, on any event loop, in pytest-asyncio's strict mode (mark
your async tests ``@pytest.mark.asyncio``, declare your async fixtures with
``@pytest_asyncio.fixture``) and in its auto mode; docs/testing.md shows both.
Without redis-server on PATH, nodes run in Docker (the ``docker`` extra);
with neither, the fixtures fail the test with a message saying what to install.

This module loads into every pytest run wherever the package is installed:
it imports nothing but pytest until a fixture is used (redis-py, the node
and cluster helpers come with the first fixture).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ._cluster import RedisClusterNodes
    from ._nodes import RedisNode, RedisNodes
    from ._server import AclUser

__all__ = [
    "AclUser",
    "RedisNode",
    "RedisNodes",
    "redis_cluster",
    "redis_nodes",
    "redis_nodes_factory",
]

DEFAULT_NODES = 3


def __getattr__(name: str) -> object:
    # The classes __all__ names, loaded on first use (see the module's docstring).
    if name in ("AclUser", "RedisNode", "RedisNodes"):
        from .. import testing

        return getattr(testing, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _start(n: int, acl_user: AclUser | None = None) -> RedisNodes:
    from ._nodes import RedisNodes

    try:
        return RedisNodes().start(n, acl_user=acl_user)
    except RuntimeError as exc:
        message = str(exc)
    # Outside the except: the failure shows the message once, not the chain under it.
    pytest.fail(message, pytrace=False)


@pytest.fixture
def redis_nodes(request: pytest.FixtureRequest) -> Iterator[RedisNodes]:
    """N throwaway nodes (``@pytest.mark.redis_nodes(N, acl_user=None)``, default 3)."""
    from ._server import AclUser

    marker = request.node.get_closest_marker("redis_nodes")
    n = DEFAULT_NODES
    acl_user = None
    if marker is not None:
        n = marker.args[0] if marker.args else marker.kwargs.get("n", DEFAULT_NODES)
        acl_user = marker.kwargs.get("acl_user")
    if not isinstance(n, int) or n < 1:
        pytest.fail(f"@pytest.mark.redis_nodes(n) needs a positive int, got {n!r}", pytrace=False)
    if acl_user is not None and not isinstance(acl_user, AclUser):
        pytest.fail(f"redis_nodes(acl_user=...) needs an AclUser, got {acl_user!r}", pytrace=False)
    nodes = _start(n, acl_user)
    try:
        yield nodes
    finally:
        nodes.close()


@pytest.fixture
def redis_nodes_factory() -> Iterator[Callable[..., RedisNodes]]:
    """``make(n, acl_user=None)``: more groups of throwaway nodes, all stopped at teardown."""
    made: list[RedisNodes] = []

    def make(n: int, acl_user: AclUser | None = None) -> RedisNodes:
        nodes = _start(n, acl_user)
        made.append(nodes)
        return nodes

    try:
        yield make
    finally:
        for nodes in made:
            nodes.close()


@pytest.fixture
def redis_cluster() -> Iterator[RedisClusterNodes]:
    """A 3-master Redis Cluster formed from local redis-server processes."""
    import shutil
    import subprocess

    from ._cluster import RedisClusterNodes
    from ._server import INSTALL_HINT, find_redis_server

    if find_redis_server() is None or shutil.which("redis-cli") is None:
        pytest.fail(INSTALL_HINT + " (a cluster also needs redis-cli)", pytrace=False)
    cluster = RedisClusterNodes(3)
    try:
        cluster.start()
    except (RuntimeError, subprocess.SubprocessError) as exc:
        cluster.close()
        pytest.fail(f"could not form a Redis Cluster: {exc}", pytrace=False)
    try:
        yield cluster
    finally:
        with contextlib.suppress(Exception):
            cluster.close()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "redis_nodes(n, acl_user=None): how many nodes the redis_nodes fixture starts "
        "(default 3), and an optional ACL user their URLs log in as",
    )
