"""A real Redis Cluster of local ``redis-server --cluster-enabled yes`` processes."""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import time

import redis

from ._server import RedisServer

__all__ = ["RedisClusterNodes"]


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
    """``masters`` local primaries formed into a cluster with ``redis-cli --cluster create``."""

    def __init__(self, masters: int = 3) -> None:
        args = ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]
        args += ["--cluster-node-timeout", "2000"]
        self.servers = [RedisServer(_cluster_port(), extra_args=args) for _ in range(masters)]

    @property
    def startup_nodes(self) -> list[tuple[str, int]]:
        return [("127.0.0.1", server.port) for server in self.servers]

    @property
    def urls(self) -> list[str]:
        return [server.url for server in self.servers]

    def start(self, timeout: float = 30.0) -> None:
        cli = shutil.which("redis-cli")
        if cli is None:
            raise RuntimeError("forming a cluster needs redis-cli on PATH (package redis-tools)")
        for server in self.servers:
            server.launch()
        for server in self.servers:
            server.wait_ready()
        hosts = [f"127.0.0.1:{s.port}" for s in self.servers]
        create = [cli, "--cluster", "create", *hosts, "--cluster-replicas", "0", "--cluster-yes"]
        subprocess.run(create, check=True, capture_output=True, timeout=timeout)
        deadline = time.monotonic() + timeout
        for server in self.servers:
            client = redis.Redis(port=server.port, socket_timeout=1.0)
            try:
                while True:
                    info = client.cluster("INFO")  # redis-py parses it into a dict
                    if info.get("cluster_state") == "ok" and int(info["cluster_slots_ok"]) == 16384:
                        break
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"cluster did not become ready: {info}")
                    time.sleep(0.05)
            finally:
                client.close()

    def close(self) -> None:
        for server in self.servers:
            server.stop()
