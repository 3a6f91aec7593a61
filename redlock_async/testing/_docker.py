"""Fallback when no redis-server binary is installed: Redis in Docker (testcontainers).

Used only when ``redis-server`` is missing from PATH and a Docker engine
answers; it needs the ``docker`` extra (``pip install 'redlock-async[docker]'``,
testcontainers >= 4.15). Each server is a ``testcontainers`` ``RedisContainer``,
ready once its wait strategy got a PONG; pause, resume and kill map onto the
container (Docker's pause, unpause and SIGKILL), restart replaces it with a new,
empty container published on the same host port.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, Protocol

from ._server import INSTALL_HINT, find_redis_server, free_port

if TYPE_CHECKING:
    from testcontainers.community.redis import RedisContainer

__all__ = [
    "DOCKER_EXTRA",
    "Container",
    "DockerRedisServer",
    "docker_available",
    "make_container",
    "pick_backend",
    "redis_container_class",
]

IMAGE = "redis:7"
DOCKER_EXTRA = (
    "the docker extra: pip install 'redlock-async[docker]' "
    "(from a checkout: pip install -e '.[docker]')"
)
# No persistence, as the local servers: a killed or restarted node comes back empty.
COMMAND = ["redis-server", "--save", "", "--appendonly", "no"]


class Engine(Protocol):
    """What we use of the docker SDK's container (``get_wrapped_container()``)."""

    def pause(self) -> None: ...
    def unpause(self) -> None: ...
    def kill(self) -> None: ...


class Container(Protocol):
    """What we use of testcontainers' ``RedisContainer``."""

    def start(self) -> object: ...
    def stop(self) -> None: ...
    def get_wrapped_container(self) -> Engine: ...


def docker_available() -> bool:
    """True when a Docker engine answers ``docker info`` (not merely a client on PATH)."""
    docker = shutil.which("docker")
    if docker is None:
        return False
    try:
        done = subprocess.run([docker, "info"], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def redis_container_class() -> type[RedisContainer]:
    """testcontainers' ``RedisContainer``, imported on first use.

    Raises:
        RuntimeError: testcontainers (>= 4.15, where it moved to
            ``testcontainers.community``) is not installed; the message names
            the ``docker`` extra.
    """
    try:
        # Not testcontainers.redis: since 4.15 that import warns (deprecated),
        # which a suite with warnings as errors turns into a failure.
        from testcontainers.community.redis import RedisContainer
    except ImportError as exc:
        raise RuntimeError(
            "the Docker fallback of redlock_async.testing needs testcontainers >= 4.15, "
            f"{DOCKER_EXTRA}; or install redis-server"
        ) from exc
    return RedisContainer


def make_container(port: int) -> Container:
    """A Redis container (not started) whose port 6379 is published on ``port``."""
    container = redis_container_class()(IMAGE)
    # A fixed host port, so a restarted container is found where clients expect it.
    return container.with_command(COMMAND).with_bind_ports(6379, port)


def pick_backend(*, acl: bool = False) -> Literal["redis-server", "docker"]:
    """Where throwaway nodes run: local ``redis-server`` processes if the binary
    is on PATH, else Docker containers.

    Raises:
        RuntimeError: neither can be used; the message says what to install
            (ACL users need a local redis-server; Docker needs the docker extra).
    """
    if find_redis_server() is not None:
        return "redis-server"
    if acl:
        raise RuntimeError(f"{INSTALL_HINT}: ACL users need a local redis-server")
    if not docker_available():
        raise RuntimeError(f"{INSTALL_HINT} (the Docker fallback also needs {DOCKER_EXTRA})")
    redis_container_class()  # a missing extra fails here, before any container starts
    return "docker"


class DockerRedisServer:
    """One Redis container published on a free 127.0.0.1 port, started (and ready) at once.

    ``make`` builds the (unstarted) container for a host port; the default,
    None, is :func:`make_container`.

    Raises:
        RuntimeError: testcontainers is not installed (see ``redis_container_class``);
            the container's own errors (no engine, image pull, wait timeout) as raised.
    """

    def __init__(self, make: Callable[[int], Container] | None = None) -> None:
        self.port = free_port()
        # Looked up per call, not bound as a default: tests replace the module's factory.
        self._make = make if make is not None else make_container
        self._container: Container | None = None
        self._state: Literal["running", "paused", "dead"] = "dead"
        self._create()

    def _create(self) -> None:
        container = self._make(self.port)
        try:
            container.start()  # returns once the wait strategy got a PONG
        except BaseException:
            container.stop()  # what did start (a container that never answered) goes too
            raise
        self._container = container
        self._state = "running"

    def __repr__(self) -> str:
        return f"DockerRedisServer(port={self.port}, state={self._state})"

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int | None:
        return None  # the process lives inside the container

    @property
    def is_running(self) -> bool:
        return self._state != "dead"

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Nothing left to wait for: ``start()`` ran the container's wait strategy."""

    def _engine(self) -> Engine:
        assert self._container is not None  # not dead
        return self._container.get_wrapped_container()

    def pause(self) -> None:
        """Docker pause (the cgroup freezer): connects succeed, nothing answers."""
        if self._state == "running":
            self._engine().pause()
            self._state = "paused"

    def resume(self) -> None:
        """Docker unpause: the server carries on, with its data."""
        if self._state == "paused":
            self._engine().unpause()
            self._state = "running"

    def kill(self) -> None:
        """SIGKILL the container, as a crash; its data is gone."""
        # Unpaused first: some Docker engines refuse to kill a paused container.
        self.resume()
        if self._state == "running":
            self._engine().kill()
            self._state = "dead"

    def restart(self) -> None:
        """A fresh, empty container published on the same host port."""
        self.stop()
        self._create()

    def stop(self) -> None:
        """Remove the container (running, paused or killed). Idempotent."""
        self.resume()
        container, self._container = self._container, None
        self._state = "dead"
        if container is not None:
            container.stop()  # testcontainers: a forced remove, with its volumes
