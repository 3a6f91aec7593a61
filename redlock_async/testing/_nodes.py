"""Groups of throwaway nodes, each behind its own port of a fault-injecting proxy."""

from __future__ import annotations

from collections.abc import Sequence

import redis

from .._base._address import redact_url
from ._docker import DockerRedisServer, pick_backend
from ._proxy import Proxy, ProxyListener
from ._server import AclUser, RedisServer

__all__ = ["RedisNode", "RedisNodes"]

Server = RedisServer | DockerRedisServer


class RedisNode:
    """A Redis server and the proxy port in front of it.

    Use ``url`` (through the proxy) in code under test, so network faults
    apply to it; ``client()`` talks to the server directly, for inspection.
    With an ``acl_user``, ``url`` and ``direct_url`` log in as that user;
    ``client()`` stays the server's open ``default`` user.
    """

    def __init__(
        self, server: Server, listener: ProxyListener, acl_user: AclUser | None = None
    ) -> None:
        self.server = server
        self.proxy = listener
        self.acl_user = acl_user
        self._clients: list[redis.Redis] = []

    def __repr__(self) -> str:
        return f"RedisNode(url={redact_url(self.url)!r}, direct={redact_url(self.direct_url)!r})"

    @property
    def port(self) -> int:
        return self.proxy.port

    @property
    def direct_port(self) -> int:
        return self.server.port

    @property
    def url(self) -> str:
        if self.acl_user is not None:
            return self.acl_user.url(self.proxy.port)
        return f"redis://127.0.0.1:{self.proxy.port}/0"

    @property
    def direct_url(self) -> str:
        if self.acl_user is not None:
            return self.acl_user.url(self.server.port)
        return self.server.url

    # process faults
    def kill(self) -> None:
        self.server.kill()

    def pause(self) -> None:
        self.server.pause()

    def resume(self) -> None:
        self.server.resume()

    def restart(self) -> None:
        self.server.restart()

    def stop(self) -> None:
        self.server.stop()

    # network faults
    def delay(self, seconds: float, jitter: float = 0.0, spacing: float = 0.0) -> None:
        self.proxy.delay(seconds, jitter, spacing)

    def blackhole(self) -> None:
        self.proxy.blackhole()

    def drop_replies(self) -> None:
        self.proxy.drop_replies()

    def throttle(self, interval: float) -> None:
        self.proxy.throttle(interval)

    def reset_connections(self) -> None:
        self.proxy.reset()

    def refuse(self) -> None:
        self.proxy.refuse()

    def heal(self) -> None:
        self.proxy.heal()

    def client(self) -> redis.Redis:
        """A sync client straight to the server (not through the proxy)."""
        client = redis.Redis(port=self.direct_port, socket_timeout=5.0)
        self._clients.append(client)
        return client

    def close_clients(self) -> None:
        for client in self._clients:
            client.close()
        self._clients.clear()


class RedisNodes(list[RedisNode]):
    """A group of nodes sharing one proxy process."""

    def __init__(self) -> None:
        super().__init__()
        self._proxy: Proxy | None = None

    @property
    def urls(self) -> list[str]:
        return [node.url for node in self]

    @property
    def direct_urls(self) -> list[str]:
        return [node.direct_url for node in self]

    def start(
        self, n: int, extra_args: Sequence[str] = (), *, acl_user: AclUser | None = None
    ) -> RedisNodes:
        """Start ``n`` nodes; ``extra_args`` go to each local ``redis-server``
        (e.g. ``("--appendonly", "yes", "--appendfsync", "always")``; the Docker
        fallback ignores them).

        With ``acl_user``, every server also has that ACL user, and each
        node's ``url`` / ``direct_url`` log in as it (see ``RedisNode``).

        Raises:
            RuntimeError: no ``redis-server`` on PATH and no usable Docker
                fallback (the message says what to install), or a node did not start.
        """
        servers: list[Server] = []
        users = () if acl_user is None else (acl_user,)
        backend = pick_backend(acl=acl_user is not None)
        try:
            if backend == "redis-server":
                local = [RedisServer(extra_args=extra_args, acl_users=users) for _ in range(n)]
                servers += local
                for one in local:
                    one.launch()  # all at once: startup costs one wait, not n
            else:
                for _ in range(n):
                    servers.append(DockerRedisServer())
            proxy = self._proxy = Proxy()
            proxy.start()
            for server in servers:
                server.wait_ready()
                self.append(RedisNode(server, proxy.add(server.port), acl_user))
        except BaseException:
            for server in servers:
                server.stop()
            self.close()
            raise
        return self

    def route(self) -> list[ProxyListener]:
        """New proxy ports, one per node, for one group of clients.

        Faults set on these listeners (delay, blackhole, refuse...) hit only
        the clients that use their URLs (``redis://127.0.0.1:<port>/0``): that
        is how a partition cuts some clients off some nodes.
        """
        if self._proxy is None:
            raise RuntimeError("RedisNodes.route(): the nodes are not started")
        return [self._proxy.add(node.server.port) for node in self]

    def close(self) -> None:
        for node in self:
            node.close_clients()
            node.stop()
        if self._proxy is not None:
            self._proxy.close()
            self._proxy = None
