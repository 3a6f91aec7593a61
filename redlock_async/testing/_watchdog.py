"""Throwaway servers die with the process that started them, however it dies.

``RedisServer.stop()`` ends a server, but a test process can end without
calling it: ``os._exit`` (pytest-timeout's thread method, a crashed xdist
worker), SIGKILL, or SIGTERM from a cancelled CI job. The servers are separate
processes, so they would keep their ports, memory and ``redlock-node-*``
directories for good.

The first launch starts one watchdog per process: this file, run as a small
Python process whose stdin is a pipe from its parent. The parent writes a line
per server it launches (``+ <pid> <dir>``) and per server it stops
(``- <dir>``). The kernel closes the pipe when the parent ends, whatever the
way, so the watchdog reads end-of-file then: it kills every server still
registered and removes its directory.

Why not ``PR_SET_PDEATHSIG``: it fires when the *thread* that started the
server ends, not the process (a server started from a worker thread would die
with the thread), and it cannot remove the directory.

A pid can be reused after its server ended; the watchdog kills a pid only if
its working directory (or, before it got there, its command line) is still
the server's own directory, which is unique.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

_SCRIPT = Path(__file__)
_INHERITED: list[subprocess.Popen[bytes]] = []


def _names(pid: int, directory: str) -> bool:
    """Whether process ``pid`` is still the server that uses ``directory``
    (a real path: no symlink in it).

    Its working directory says so once redis-server has changed into
    ``--dir``; until then its command line does (later it rewrites its
    process title). Without /proc (macOS), ``ps`` tells whether the pid is
    still a redis-server: a pid reused by another redis-server within the
    run is the one case this cannot tell apart."""
    proc = Path(f"/proc/{pid}")
    if Path("/proc/self").exists():
        try:
            cwd = os.readlink(proc / "cwd")
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        # " (deleted)": the directory was removed under a server still running.
        return cwd in (directory, directory + " (deleted)") or directory.encode() in cmdline
    try:
        done = subprocess.run(
            ["ps", "-o", "comm=", "-p", str(pid)], capture_output=True, text=True, check=False
        )
    except OSError:
        return False
    return "redis-server" in done.stdout


def _clean(servers: dict[str, set[int]]) -> None:
    for directory, pids in servers.items():
        for pid in pids:
            if _names(pid, directory):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    # The terminal's Ctrl-C and a job runner's SIGTERM reach the whole process
    # group: the watchdog must outlive its parent to clean up after it, so it
    # leaves on end-of-file only.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    servers: dict[str, set[int]] = {}
    for raw in sys.stdin.buffer:
        line = raw.decode(errors="replace").rstrip("\n")
        if line.startswith("+ "):
            pid, _, directory = line[2:].partition(" ")
            servers.setdefault(directory, set()).add(int(pid))
        elif line.startswith("- "):
            servers.pop(line[2:], None)
    _clean(servers)


class Watchdog:
    """The parent's end: one watchdog process, started on first use.

    The pipe is a bare file descriptor written with ``os.write``: no buffer,
    so no lock that a fork could catch held."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._fd = -1
        self._owner = 0
        # A forked child has the parent's pipe but must not write to the
        # parent's watchdog (its servers must die with *it*): start afresh.
        os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        if self._fd >= 0:
            # Close our copy: the parent's watchdog must still see
            # end-of-file when the parent dies.
            with contextlib.suppress(OSError):
                os.close(self._fd)
        if self._proc is not None:
            # Kept: its finalizer would warn of a process that was never ours.
            _INHERITED.append(self._proc)
        self._proc = None
        self._fd = -1
        self._owner = 0
        self._lock = threading.Lock()

    def _start(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
        read, write = os.pipe()  # neither end is inherited by other children
        try:
            # -I: it must not import the project (or anything) from the cwd.
            self._proc = subprocess.Popen(
                [sys.executable, "-I", str(_SCRIPT)],
                stdin=read,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                # Its own session: a signal to our process group does not
                # reach it (it ignores them anyway, this is belt and braces).
                start_new_session=True,
            )
        except BaseException:
            os.close(write)
            raise
        finally:
            os.close(read)
        self._fd = write
        self._owner = os.getpid()

    def _send(self, line: str) -> None:
        with self._lock:
            if self._proc is None or self._owner != os.getpid() or self._proc.poll() is not None:
                self._start()
            data = line.encode() + b"\n"
            with contextlib.suppress(OSError):
                while data:
                    data = data[os.write(self._fd, data) :]

    def watch(self, pid: int, directory: Path) -> None:
        """Kill ``pid`` and remove ``directory`` if this process ends first."""
        self._send(f"+ {pid} {os.path.realpath(directory)}")

    def forget(self, directory: Path) -> None:
        """The server using ``directory`` was stopped normally."""
        if self._proc is not None and self._owner == os.getpid():
            self._send(f"- {os.path.realpath(directory)}")

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None


WATCHDOG = Watchdog()

if __name__ == "__main__":
    main()
