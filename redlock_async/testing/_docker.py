"""Fallback when no redis-server binary is installed: Redis in Docker (testcontainers).

Only used when ``redis-server`` is missing from PATH and a Docker engine
answers. Pause, resume and kill map onto the container; restart starts a new
container mapped to the same host port.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from typing import TYPE_CHECKING

from ._server import free_port, ping

if TYPE_CHECKING:
    from testcontainers.core.container import DockerContainer

__all__ = ["DockerRedisServer", "docker_available"]

IMAGE = "redis:7"


def docker_available() -> bool:
    """True when a Docker engine answers (not merely a client on PATH)."""
    docker = shutil.which("docker")
    if docker is None:
        return False
    try:
        return (
            subprocess.run(
                [docker, "info"], capture_output=True, timeout=10, check=False
            ).returncode
            == 0
        )
    except (OSError, subprocess.SubprocessError):
        return False


class DockerRedisServer:
    """One Redis container published on a free 127.0.0.1 port."""

    def __init__(self) -> None:
        self.port = free_port()
        self._container: DockerContainer | None = None
        self._create()

    def _create(self) -> None:
        from testcontainers.core.container import DockerContainer

        container = (
            DockerContainer(IMAGE)
            .with_command("redis-server --save '' --appendonly no")
            .with_bind_ports(6379, self.port)
        )
        container.start()
        self._container = container

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int | None:
        return None  # the process lives inside the container

    @property
    def is_running(self) -> bool:
        return self._container is not None

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not ping(self.port):
            if time.monotonic() > deadline:
                raise RuntimeError(f"Redis container on port {self.port} did not start")
            time.sleep(0.05)

    def _docker(self, *args: str) -> None:
        if self._container is None:
            return
        ident = self._container.get_wrapped_container().id
        subprocess.run(["docker", *args, ident], capture_output=True, check=True, timeout=30)

    def pause(self) -> None:
        self._docker("pause")

    def resume(self) -> None:
        self._docker("unpause")

    def kill(self) -> None:
        """Stop the container at once; its data is gone."""
        self.stop()

    def restart(self) -> None:
        """A fresh, empty container published on the same host port."""
        self.stop()
        self._create()
        self.wait_ready()

    def stop(self) -> None:
        container, self._container = self._container, None
        if container is not None:
            container.stop()
