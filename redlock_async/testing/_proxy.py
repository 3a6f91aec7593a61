"""A fault-injecting TCP proxy that runs in its own process.

Why a process: the code under test must not share an event loop (or the GIL)
with the proxy, and tests block event loops on purpose.

The test process drives it through :class:`Proxy`: one JSON object per line
on the proxy's stdin, one JSON answer per line on its stdout. The proxy exits
when its stdin closes (so it never outlives the process that started it) and
on SIGTERM. Commands are synchronous: each method returns once the proxy has
applied the change, so sync and async tests alike can call them.

Faults, per listener (each a port on 127.0.0.1 forwarding to one target):

- ``delay(seconds, jitter, spacing)``: every chunk, each way, arrives that
  much later (plus up to ``jitter``); chunks keep their order, and leave at
  least ``spacing`` apart: a node slow but steady, whose backlog grows while
  it keeps answering.
- ``blackhole()``: connections stay open, nothing is delivered either way;
  data sent meanwhile is held (as TCP would retransmit it) and delivered on
  ``heal()`` unless the connection is closed first.
- ``drop_replies()``: requests reach the server, its replies are discarded.
- ``throttle(interval)``: the server's replies reach their clients one at a
  time, at most one every ``interval`` seconds over all connections: a node
  answering steadily, but working through a backlog slowly. Set it while
  the connections are quiet (replies are told apart from then on); what it
  still holds is delivered at once on ``heal()``.
- ``reset()``: abort every open connection with an RST; new ones are accepted.
- ``refuse()``: stop listening (new connections are refused) and cut open ones.
- ``heal()``: undo all of the above, listening again on the same port.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import TracebackType

__all__ = ["Proxy", "ProxyListener"]

# The proxy process itself (stdlib only). Run by path in isolated mode (-I):
# ``-m`` would first import redlock_async and redis, which costs more than
# the rest of the proxy's startup together.
_DAEMON = Path(__file__).with_name("_proxyd.py")


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

    def delay(self, seconds: float, jitter: float = 0.0, spacing: float = 0.0) -> None:
        """Hold each chunk ``seconds`` (plus up to ``jitter``), each way, in order,
        and at least ``spacing`` after the chunk before it."""
        self._do("delay", seconds=seconds, jitter=jitter, spacing=spacing)

    def blackhole(self) -> None:
        """Keep connections (and accepting new ones) but deliver nothing either way."""
        self._do("blackhole")

    def throttle(self, interval: float) -> None:
        """Deliver the server's replies one at a time, one per ``interval`` s at most."""
        self._do("throttle", interval=interval)

    def drop_replies(self) -> None:
        """Forward requests to the server; discard its replies."""
        self._do("drop_replies")

    def reset(self) -> None:
        """Abort every open connection with an RST; new connections still work."""
        self._do("reset")

    def refuse(self) -> None:
        """Stop listening (connects are refused) and cut open connections."""
        self._do("refuse")

    def heal(self) -> None:
        """Undo every fault above: forward normally, listening on the same port."""
        self._do("heal")


class Proxy:
    """The proxy process, and the way to add listeners to it.

    ``with Proxy() as proxy:`` starts and closes it.
    """

    def __init__(self, timeout: float = 10.0) -> None:
        self.timeout = timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._buffer = b""
        # One command at a time: answers carry no ids, so requests must not interleave.
        self._lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def __enter__(self) -> Proxy:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def start(self) -> None:
        if self._proc is not None:
            raise RuntimeError("the proxy is already started")
        if _DAEMON.exists():
            command = [sys.executable, "-I", str(_DAEMON)]
        else:  # installed somewhere without plain source files (a zip): import it
            command = [sys.executable, "-m", "redlock_async.testing._proxyd"]
        self._buffer = b""
        self._proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def call(self, message: dict[str, object]) -> dict[str, object]:
        """Send one command; return the proxy's answer, or raise RuntimeError."""
        with self._lock:
            proc = self._proc
            if proc is None or proc.stdin is None or proc.stdout is None:
                raise RuntimeError("the proxy is not running")
            try:
                proc.stdin.write(json.dumps(message).encode() + b"\n")
                proc.stdin.flush()
                line = self._read_line(proc.stdout.fileno())
            except (OSError, RuntimeError) as exc:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=0.5)  # if it is dying, say so rather than "running"
                code = proc.poll()
                state = "running" if code is None else f"exited with {code}"
                raise RuntimeError(f"proxy command {message!r} failed ({state}): {exc}") from exc
        answer = json.loads(line)
        if not isinstance(answer, dict) or answer.get("ok") is not True:
            raise RuntimeError(f"proxy command {message!r} failed: {answer!r}")
        return answer

    def _read_line(self, fd: int) -> bytes:
        # Unbuffered reads on the raw fd: select() on a buffered reader can
        # miss data already sitting in its buffer, and a timeout is needed.
        deadline = time.monotonic() + self.timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise RuntimeError(f"no answer within {self.timeout} s")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise RuntimeError("the proxy closed its output")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def add(self, target_port: int) -> ProxyListener:
        """Listen on a free 127.0.0.1 port, forwarding to ``127.0.0.1:target_port``."""
        answer = self.call({"cmd": "add", "target": target_port})
        ident, port = answer.get("id"), answer.get("port")
        if not isinstance(ident, int) or not isinstance(port, int):
            raise RuntimeError(f"unexpected answer from the proxy: {answer!r}")
        return ProxyListener(self, ident, port, target_port)

    def close(self) -> None:
        """End the process: close its stdin, and kill it (by pid) if it lingers. Idempotent."""
        with self._lock:
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
