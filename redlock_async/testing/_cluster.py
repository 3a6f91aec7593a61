"""A real Redis Cluster of local ``redis-server --cluster-enabled yes`` processes."""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import time
from types import TracebackType

import redis

from ._server import RedisServer

__all__ = ["RedisClusterNodes"]

SLOTS = 16384


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _cluster_port() -> int:
    """A free port whose cluster bus port (port + 10000) is free too.

    Redis refuses cluster ports above 55535, so the OS's ephemeral picks
    (often above 32768 + 10000 limits) are not usable here.
    """
    for _ in range(1000):
        port = random.randint(20_000, 45_000)
        if _bindable(port) and _bindable(port + 10_000):
            return port
    raise RuntimeError("no free port pair for a cluster node")


class RedisClusterNodes:
    """``masters`` local primaries formed into a cluster with ``redis-cli --cluster create``.

    ``start()`` returns once every node reports ``cluster_state:ok`` with all
    slots covered; ``close()`` stops every process. Usable as a context manager.
    A master only reports ``ok`` two seconds after it started (Redis's own
    writable delay), so forming a cluster takes about that long.
    """

    def __init__(self, masters: int = 3, *, node_timeout_ms: int = 2000) -> None:
        self.masters = masters
        self.args = ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]
        self.args += ["--cluster-node-timeout", str(node_timeout_ms)]
        self.servers: list[RedisServer] = []

    def __repr__(self) -> str:
        return f"RedisClusterNodes({self.urls})"

    def __enter__(self) -> RedisClusterNodes:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def startup_nodes(self) -> list[tuple[str, int]]:
        return [("127.0.0.1", server.port) for server in self.servers]

    @property
    def urls(self) -> list[str]:
        return [server.url for server in self.servers]

    @property
    def pids(self) -> list[int]:
        return [server.pid for server in self.servers if server.pid is not None]

    def start(self, timeout: float = 30.0) -> None:
        cli = shutil.which("redis-cli")
        if cli is None:
            raise RuntimeError("forming a cluster needs redis-cli on PATH (package redis-tools)")
        try:
            self._launch_all()
            hosts = [f"127.0.0.1:{server.port}" for server in self.servers]
            create = [cli, "--cluster", "create", *hosts, "--cluster-replicas", "0"]
            done = subprocess.run(
                [*create, "--cluster-yes"], capture_output=True, timeout=timeout, check=False
            )
            if done.returncode != 0:
                output = (done.stdout + done.stderr).decode(errors="replace")[-2000:]
                raise RuntimeError(f"redis-cli --cluster create failed:\n{output}")
            self._wait_ok(time.monotonic() + timeout)
        except BaseException:
            self.close()
            raise

    def _launch_all(self) -> None:
        # All at once, then wait for each: startup costs one wait, not n.
        self.servers = [
            RedisServer(_cluster_port(), extra_args=self.args) for _ in range(self.masters)
        ]
        for server in self.servers:
            server.launch()
        for i, server in enumerate(self.servers):
            for attempt in range(5):
                try:
                    server.wait_ready()
                    break
                except RuntimeError:
                    # Our pick of port (and bus port) may have been taken meanwhile.
                    server.stop()
                    if attempt == 4:
                        raise
                    server = self.servers[i] = RedisServer(_cluster_port(), extra_args=self.args)
                    server.launch()

    def _wait_ok(self, deadline: float) -> None:
        for server in self.servers:
            client = redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=1.0)
            try:
                while True:
                    info = client.cluster("INFO")  # redis-py parses it into a dict
                    if (
                        info.get("cluster_state") == "ok"
                        and int(info.get("cluster_slots_ok", 0)) == SLOTS
                        and int(info.get("cluster_known_nodes", 0)) == self.masters
                    ):
                        break
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"cluster did not become ready: {info}")
                    time.sleep(0.05)
            finally:
                client.close()

    def close(self) -> None:
        """Stop every node (by pid) and remove its files. Idempotent."""
        for server in self.servers:
            server.stop()
