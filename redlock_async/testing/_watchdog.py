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
its working directory is still the server's own, which is unique.
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
    """Whether process ``pid`` is still the server that uses ``directory``.

    Its working directory says so: redis-server changes into ``--dir`` at
    start (its command line does not: it rewrites its process title)."""
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return False
    # " (deleted)": the directory was removed under a server still running.
    return cwd in (directory, directory + " (deleted)")


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
    """The parent's end: one watchdog process, started on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._owner = 0
        # A forked child has the parent's pipe but must not write to the
        # parent's watchdog (its servers must die with *it*): start afresh.
        os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        proc = self._proc
        if proc is not None:
            # Close our copy of the pipe (the parent's watchdog must still see
            # end-of-file when the parent dies); keep the object, whose
            # finalizer would warn of a process that was never ours.
            _INHERITED.append(proc)
            if proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
        self._proc = None
        self._owner = 0
        self._lock = threading.Lock()

    def _send(self, line: str) -> None:
        with self._lock:
            if self._proc is None or self._owner != os.getpid() or self._proc.poll() is not None:
                # -I: it must not import the project (or anything) from the cwd.
                self._proc = subprocess.Popen(
                    [sys.executable, "-I", str(_SCRIPT)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    # Its own session: a signal to our process group does not
                    # reach it (it ignores them anyway, this is belt and braces).
                    start_new_session=True,
                )
                self._owner = os.getpid()
            stdin = self._proc.stdin
            assert stdin is not None
            with contextlib.suppress(OSError):
                stdin.write(line.encode() + b"\n")
                stdin.flush()

    def watch(self, pid: int, directory: Path) -> None:
        """Kill ``pid`` and remove ``directory`` if this process ends first."""
        self._send(f"+ {pid} {directory}")

    def forget(self, directory: Path) -> None:
        """The server using ``directory`` was stopped normally."""
        if self._proc is not None and self._owner == os.getpid():
            self._send(f"- {directory}")

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None


WATCHDOG = Watchdog()

if __name__ == "__main__":
    main()
