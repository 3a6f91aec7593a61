"""A throwaway Redis Sentinel watching a test master.

Debian and Ubuntu ship no separate ``redis-sentinel`` binary in every
package: ``redis-server sentinel.conf --sentinel`` is the same program, so
that is what runs here.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._server import RedisServer

__all__ = ["SentinelServer"]


class SentinelServer(RedisServer):
    """A Sentinel (``redis-server sentinel.conf --sentinel``) monitoring ``masters``.

    ``masters`` maps each service name to the :class:`RedisServer` it starts
    as, on 127.0.0.1. ``quorum`` Sentinels must agree a master is down (1:
    this one alone); a master is judged down after ``down_after`` seconds
    without an answer. ``address`` is what ``redis.asyncio.sentinel.Sentinel``
    takes. The Sentinel rewrites its configuration file as it learns; it
    lives in the server's temporary directory.
    """

    def __init__(
        self,
        masters: dict[str, RedisServer],
        port: int | None = None,
        *,
        quorum: int = 1,
        down_after: float = 1.0,
        extra_args: Sequence[str] = (),
        executable: str = "redis-server",
    ) -> None:
        super().__init__(port, extra_args=extra_args, executable=executable)
        self.masters = dict(masters)
        self.quorum = quorum
        self.down_after = down_after

    @property
    def address(self) -> tuple[str, int]:
        """``("127.0.0.1", port)``: one entry of ``Sentinel([...])``'s list."""
        return ("127.0.0.1", self.port)

    def __repr__(self) -> str:
        return f"SentinelServer(port={self.port}, pid={self.pid}, masters={list(self.masters)})"

    def _listen_args(self) -> list[str]:
        # Called by launch() once the directory exists: the configuration
        # file must be the first argument, and writable (Sentinel saves its
        # state into it).
        assert self.dir is not None
        conf = self.dir / "sentinel.conf"
        lines = []
        for service, master in self.masters.items():
            lines += [
                f"sentinel monitor {service} 127.0.0.1 {master.port} {self.quorum}",
                f"sentinel down-after-milliseconds {service} {int(self.down_after * 1000)}",
                f"sentinel failover-timeout {service} 10000",
            ]
        conf.write_text("\n".join(lines) + "\n")
        return [str(conf), "--sentinel", "--port", str(self.port)]
