"""A fault-injecting TCP proxy that runs in its own process.

Why a process: the code under test must not share an event loop (or the GIL)
with the proxy, and tests block event loops on purpose.

The test process drives it through :class:`Proxy`: one JSON object per line
on the proxy's stdin, one JSON answer per line on its stdout. The proxy exits
when its stdin closes, so it never outlives the process that started it.

Faults, per listener (each a port on 127.0.0.1 forwarding to one target):

- ``delay(seconds, jitter)``: every chunk, each way, arrives that much later;
  chunks keep their order.
- ``blackhole()``: connections stay open, nothing is delivered either way;
  data sent meanwhile is held (as TCP would retransmit it) and delivered on
  ``heal()`` unless the connection is closed first.
- ``drop_replies()``: requests reach the server, its replies are discarded.
- ``reset()``: abort every open connection with an RST; new ones are accepted.
- ``refuse()``: stop listening (new connections are refused) and cut open ones.
- ``heal()``: undo all of the above, listening again on the same port.
"""

from __future__ import annotations

import contextlib
import json
import select
import subprocess
import sys
from typing import Any

__all__ = ["Proxy", "ProxyListener"]


class ProxyListener:
    """One proxied port. Methods return once the proxy has applied the fault."""

    def __init__(self, proxy: Proxy, ident: int, port: int, target_port: int) -> None:
        self._proxy = proxy
        self._id = ident
        self.port = port
        self.target_port = target_port

    def __repr__(self) -> str:
        return f"ProxyListener({self.port} -> {self.target_port})"

    def _do(self, cmd: str, **fields: object) -> None:
        self._proxy.call({"cmd": cmd, "id": self._id, **fields})

    def delay(self, seconds: float, jitter: float = 0.0) -> None:
        self._do("delay", seconds=seconds, jitter=jitter)

    def blackhole(self) -> None:
        self._do("blackhole")

    def drop_replies(self) -> None:
        self._do("drop_replies")

    def reset(self) -> None:
        self._do("reset")

    def refuse(self) -> None:
        self._do("refuse")

    def heal(self) -> None:
        self._do("heal")


class Proxy:
    """The proxy process, and the way to add listeners to it."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "redlock_async.testing._proxyd"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )

    def call(self, message: dict[str, object], timeout: float = 10.0) -> dict[str, Any]:
        proc = self._proc
        if proc is None or proc.stdin is None or proc.stdout is None:
            raise RuntimeError("the proxy is not running")
        proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        if not ready:
            raise RuntimeError(f"the proxy did not answer {message['cmd']!r} in {timeout}s")
        answer: dict[str, Any] = json.loads(proc.stdout.readline() or b'{"ok": false}')
        if not answer.get("ok"):
            raise RuntimeError(f"proxy command {message!r} failed: {answer.get('error')}")
        return answer

    def add(self, target_port: int) -> ProxyListener:
        answer = self.call({"cmd": "add", "target": target_port})
        return ProxyListener(self, int(answer["id"]), int(answer["port"]), target_port)

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()
