"""Throwaway ``redis-server`` processes on free loopback ports."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

__all__ = ["INSTALL_HINT", "RedisServer", "find_redis_server", "free_port", "ping"]

INSTALL_HINT = (
    "redlock_async.testing needs a redis-server binary on PATH "
    "(Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis) "
    "or a running Docker engine"
)


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


class RedisServer:
    """One ``redis-server`` process with no persistence and its own temp dir.

    ``start()`` launches it, ``kill()`` / ``pause()`` / ``resume()`` /
    ``restart()`` inject faults, ``stop()`` ends it and removes its files.
    Processes are only ever signalled by their own pid.
    """

    def __init__(
        self,
        port: int | None = None,
        *,
        extra_args: Sequence[str] = (),
        executable: str | None = None,
    ) -> None:
        self._requested_port = port
        self.port = port or 0
        self.extra_args = list(extra_args)
        self.executable = executable or find_redis_server() or "redis-server"
        self.dir = Path(tempfile.mkdtemp(prefix="redlock-node-"))
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def __repr__(self) -> str:
        return f"RedisServer(port={self.port}, pid={self.pid})"

    def launch(self) -> None:
        """Start the process without waiting for it to answer (see ``wait_ready``)."""
        if not self.port:
            self.port = free_port()
        log = self.dir / "redis.log"
        args = [
            self.executable,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "no",
            "--dir", str(self.dir),
            "--daemonize", "no",
            "--protected-mode", "no",
            "--logfile", str(log),
            *self.extra_args,
        ]  # fmt: skip
        try:
            self._proc = subprocess.Popen(
                args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
            )
        except FileNotFoundError as exc:
            raise RuntimeError(INSTALL_HINT) from exc

    def wait_ready(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ping(self.port):
                return
            if self._proc is not None and self._proc.poll() is not None:
                break
            time.sleep(0.005)
        tail = self.log_tail()
        self.kill()
        raise RuntimeError(f"redis-server on port {self.port} did not start:\n{tail}")

    def start(self, timeout: float = 10.0) -> None:
        """Launch and wait until it answers PING; retries on a port race."""
        for attempt in range(5):
            self.launch()
            try:
                self.wait_ready(timeout)
                return
            except RuntimeError:
                if self._requested_port or attempt == 4:
                    raise
                self.port = 0  # someone took the port between our check and bind

    def log_tail(self, lines: int = 20) -> str:
        log = self.dir / "redis.log"
        if not log.exists():
            return "(no log)"
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])

    def _signal(self, sig: signal.Signals) -> None:
        if self.is_running:
            assert self._proc is not None
            os.kill(self._proc.pid, sig)

    def pause(self) -> None:
        """SIGSTOP: the server keeps its sockets but answers nothing."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
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
        for leftover in self.dir.glob("*.rdb"):
            leftover.unlink()
        deadline = time.monotonic() + timeout
        while True:
            self.launch()
            try:
                self.wait_ready(max(0.5, deadline - time.monotonic()))
                return
            except RuntimeError:
                # The old socket may linger for a moment; try again until the deadline.
                if time.monotonic() > deadline:
                    raise

    def stop(self) -> None:
        """End the process (SIGTERM, then SIGKILL) and remove its files. Idempotent."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)  # a paused server cannot handle SIGTERM
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        shutil.rmtree(self.dir, ignore_errors=True)
