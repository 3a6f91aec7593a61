"""Throwaway ``redis-server`` processes on free loopback ports."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from urllib.parse import quote

from ._watchdog import WATCHDOG

__all__ = ["INSTALL_HINT", "AclUser", "RedisServer", "find_redis_server", "free_port", "ping"]

INSTALL_HINT = (
    "redlock_async.testing needs a redis-server binary on PATH "
    "(Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis) "
    "or a running Docker engine"
)

_PORT_TAKEN = "Address already in use"


def find_redis_server() -> str | None:
    """Path of the ``redis-server`` binary, or None."""
    return shutil.which("redis-server")


def free_port() -> int:
    """A port no one listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ping(port: int, timeout: float = 0.2) -> bool:
    """True when something on ``port`` answers PING with PONG."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def _plain(port: int, timeout: float = 0.2) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=timeout)


def _served_by(
    port: int, timeout: float = 0.2, opener: Callable[[int, float], socket.socket] = _plain
) -> int | None:
    """The pid of the Redis answering on ``port`` (from INFO), 0 if it will not
    say (an error such as NOAUTH), None if nothing answers.

    A PONG alone is not enough: if another process won the race for the port,
    it would answer for a server of ours that failed to bind and exited.
    ``opener`` opens the connection (a TLS server's wraps it).
    """
    try:
        with opener(port, timeout) as sock:
            sock.sendall(b"INFO server\r\n")
            data = b""
            while (found := re.search(rb"process_id:(\d+)\r\n", data)) is None:
                if data.startswith(b"-") and data.endswith(b"\r\n"):
                    return 0
                chunk = sock.recv(4096)
                if not chunk or len(data) > 65536:
                    return None
                data += chunk
            return int(found.group(1))
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class AclUser:
    """A Redis ACL user a test server starts with, besides the open ``default`` user.

    ``rules`` are ACL rules as ``ACL SETUSER`` takes them after the password
    (e.g. ``"~redlock:* &redlock:* +@all -@dangerous"``); the user is created
    ``on`` with ``password`` and nothing else. The ``default`` user keeps every
    permission and no password, so the harness (``RedisNode.client()``,
    readiness checks, shutdown) never depends on the rules under test.
    """

    name: str
    password: str = field(repr=False)
    rules: str = ""

    def args(self) -> list[str]:
        """The ``redis-server`` command-line arguments that create this user."""
        return ["--user", self.name, "reset", "on", f">{self.password}", *self.rules.split()]

    def url(self, port: int) -> str:
        """``redis://name:password@127.0.0.1:port/0``: a URL that logs in as this user."""
        name, password = quote(self.name, safe=""), quote(self.password, safe="")
        return f"redis://{name}:{password}@127.0.0.1:{port}/0"


class RedisServer:
    """One ``redis-server`` process with no persistence and its own temp dir.

    ``start()`` launches it, ``kill()`` / ``pause()`` / ``resume()`` /
    ``restart()`` inject faults, ``stop()`` ends it and removes its files.
    Processes are only ever signalled by their own pid. Usable as a context
    manager (``with RedisServer() as server:``).

    ``acl_users`` are created at every start (restarts included); ``url``
    stays the open ``default`` user's, ``acl_users[i].url(server.port)`` logs
    in as one of them.
    """

    def __init__(
        self,
        port: int | None = None,
        *,
        extra_args: Sequence[str] = (),
        acl_users: Sequence[AclUser] = (),
        executable: str = "redis-server",
    ) -> None:
        self._requested_port = port
        self.port = port or 0
        self.extra_args = list(extra_args)
        self.acl_users = tuple(acl_users)
        self.executable = executable
        # Its data and log; made on launch, not here: a server never started leaves nothing.
        self.dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int | None:
        """The pid of the current (or last) process; None before the first start."""
        return self._proc.pid if self._proc is not None else None

    @property
    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def __repr__(self) -> str:
        return f"RedisServer(port={self.port}, pid={self.pid})"

    def __enter__(self) -> RedisServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def launch(self) -> None:
        """Start the process without waiting for it to answer (see ``wait_ready``).

        Launching several servers, then waiting for each, starts them in parallel.
        """
        binary = shutil.which(self.executable)
        if binary is None:
            raise RuntimeError(f"{INSTALL_HINT} ({self.executable!r} not found)")
        if self.dir is None:
            # Resolved: the server's cwd (how the watchdog knows it) is the
            # real path, and a symlinked TMPDIR must not make the two differ.
            self.dir = Path(tempfile.mkdtemp(prefix="redlock-node-")).resolve()
        if not self.port:
            self.port = free_port()
        args = [
            binary,
            *self._listen_args(),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "no",
            "--dir", str(self.dir),
            "--daemonize", "no",
            "--protected-mode", "no",
            "--logfile", str(self.dir / "redis.log"),
            *self.extra_args,
            *(arg for user in self.acl_users for arg in user.args()),
        ]  # fmt: skip
        self._proc = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
        )
        # If this process ends without stop() (os._exit, SIGKILL, SIGTERM),
        # the watchdog kills the server and removes its directory.
        WATCHDOG.watch(self._proc.pid, self.dir)

    def _listen_args(self) -> list[str]:
        """Where it listens: ``--port``. A TLS server (``testing._tls``) listens elsewhere."""
        return ["--port", str(self.port)]

    def _open(self, port: int, timeout: float) -> socket.socket:
        """The harness's own connection (readiness, shutdown): plain TCP here."""
        return _plain(port, timeout)

    def wait_ready(self, timeout: float = 10.0, *, keep_port: bool = False) -> None:
        """Wait until this server (not some other process) answers on its port.

        If the port we picked was taken between choosing it and the server's
        bind, launch again on another one - unless the caller gave the port,
        or ``keep_port`` (a restart must come back where clients expect it).
        """
        deadline = time.monotonic() + timeout
        retries = 0 if self._requested_port or keep_port else 5
        while time.monotonic() < deadline:
            proc = self._proc
            if proc is None:
                raise RuntimeError("wait_ready() before launch()")
            served_by = _served_by(self.port, opener=self._open)
            # 0: a password-protected Redis answered; trust it while ours is alive.
            if served_by == proc.pid or (served_by == 0 and proc.poll() is None):
                return
            if proc.poll() is not None:
                if retries == 0 or _PORT_TAKEN not in self.log_tail():
                    break
                retries -= 1
                self.port = 0
                self.launch()
                continue
            time.sleep(0.005)
        tail = self.log_tail()
        self.kill()
        raise RuntimeError(f"redis-server on port {self.port} did not start:\n{tail}")

    def start(self, timeout: float = 10.0) -> None:
        """Launch and wait until it answers (within ``timeout`` seconds)."""
        self.launch()
        self.wait_ready(timeout)

    def log_tail(self, lines: int = 20) -> str:
        log = self.dir / "redis.log" if self.dir is not None else None
        if log is None or not log.exists():
            return "(no log)"
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])

    def _signal(self, sig: signal.Signals) -> None:
        if self._proc is not None and self._proc.poll() is None:
            os.kill(self._proc.pid, sig)

    def pause(self) -> None:
        """SIGSTOP: the server keeps its sockets (connects still succeed) but answers nothing."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT: a paused server carries on, with its data."""
        self._signal(signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL, as a crash; the data is gone (no persistence)."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)

    def restart(self, timeout: float = 10.0) -> None:
        """Kill, then start again on the same port with no data."""
        self.kill()
        for leftover in self.dir.glob("*.rdb") if self.dir is not None else ():
            leftover.unlink()  # in case extra_args turned persistence on
        self.launch()
        self.wait_ready(timeout, keep_port=True)

    def stop(self, grace: float = 5.0) -> None:
        """End the process and remove its files. Idempotent.

        Redis only notices SIGTERM on its next cron tick (up to 100 ms), which
        adds up over many nodes; SHUTDOWN NOSAVE acts at once. SIGTERM, then
        SIGKILL after ``grace`` seconds, remain for a server that will not answer.
        """
        proc = self._proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)  # a paused server can neither answer nor exit
            # Not if it will not say who it is (a password).
            if _served_by(self.port, opener=self._open) == proc.pid:
                self._send(b"SHUTDOWN NOSAVE\r\n")
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=1.0)
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            WATCHDOG.forget(self.dir)
            self.dir = None

    def _send(self, command: bytes) -> None:
        """Send one command and wait for the connection to end (or the reply)."""
        with (
            contextlib.suppress(OSError),
            self._open(self.port, 0.5) as sock,
        ):
            sock.sendall(command)
            sock.recv(64)
