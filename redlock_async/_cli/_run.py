"""``redlock-async run NAME -- CMD``: hold a lock while a command runs (a distributed flock).

A small process supervisor: it waits for the lock, starts CMD with the lock's
name (and fencing token) in its environment, passes signals on to it, and
stops it when the lock is lost. CMD is looked up before anything is
locked. Exit codes: CMD's own, else those in :mod:`._exit` (75, or
``--conflict-exit-code``: held elsewhere for the whole ``--timeout``; 69:
too few nodes answered to decide; 76 lost; 126/127 CMD not executable / not
found). ``--verbose`` says on stderr when it waits, has the lock and gives it
back; ``--quiet`` says nothing there unless something failed; stdout is
CMD's alone.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence

from .._base._errors import (
    LockBusy,
    LockLost,
    LockNotAcquired,
    LockNotOwned,
    RedlockError,
    describe_errors,
)
from .._base._keys import check_name
from .._core._lock import Lock
from .._core._refusal import not_acquired
from ._exit import EX_CANNOT_EXECUTE, EX_LOST, EX_NOT_FOUND, EX_UNAVAILABLE, UsageError
from ._nodes import announce, node_urls, redlock
from ._output import error, note

__all__ = ["FORWARDED", "run_command"]

# Signals `run` passes to CMD while it runs. Others keep their default action.
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT,
             signal.SIGUSR1, signal.SIGUSR2)  # fmt: skip

# Signals a terminal sends to its whole foreground process group.
_TERMINAL_SIGNALS = (signal.SIGINT, signal.SIGQUIT)


def run_command(args: argparse.Namespace) -> int:
    """Check the arguments, then run CMD under the lock; the exit code."""
    cmd = list(args.cmd)
    if not cmd:
        raise UsageError(
            "run: no command given (usage: redlock-async run [OPTIONS] NAME [--] CMD [ARG...])"
        )
    check_name(args.name)
    if args.ttl <= 0:
        raise UsageError("run: --ttl must be > 0")
    node_urls(args)  # no nodes, or a bad URL: exit 2 before anything else
    # Before the lock, as a shell would refuse it: a typo in a crontab must
    # not take the lock from the hosts that could run the job.
    missing = _unrunnable(cmd[0])
    if missing is not None:
        error(f"command {'not found' if missing == EX_NOT_FOUND else 'not executable'}: "
              f"{cmd[0]} (nothing was locked)")  # fmt: skip
        return missing
    announce(args)
    return int(asyncio.run(_run(args, cmd)))


def _unrunnable(program: str) -> int | None:
    """None when ``program`` can be executed as CMD; else a shell's exit code for it.

    127: not found (on PATH, or at the path given); 126: found, but not an
    executable file. Looked up as ``exec`` does (``os.get_exec_path``), so
    that CMD is what will run. A CMD that vanishes before it starts, or an
    interpreter a script names that is missing, is still caught at the start.
    """
    if os.sep in program or (os.altsep and os.altsep in program):
        candidates = [program]
    else:
        candidates = [os.path.join(folder or os.curdir, program) for folder in os.get_exec_path()]
    found = False
    for candidate in candidates:
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return None
        found = found or os.path.exists(candidate)
    return EX_CANNOT_EXECUTE if found else EX_NOT_FOUND


def _refusal(lock: Lock, timeout: float | None) -> LockNotAcquired:
    """Why the last acquire() of ``lock`` gave up: LockBusy or QuorumUnavailable.

    The rule ``async with`` applies (one rule for both); ``_refused`` holds the
    failed attempts of the last acquire() until the next one.
    """
    return not_acquired(lock.name, lock._refused, lock.errors, timeout)


async def _acquire(lock: Lock, timeout: float | None, verbose: bool) -> bool:
    """Take ``lock`` within ``timeout``; with ``verbose``, say so when it has to wait."""
    started = time.monotonic()
    # One attempt first, then the wait: the same attempts a single acquire()
    # would make, with a moment in between to say that we wait, and why.
    if await lock.acquire(blocking=False):
        acquired = True
    elif timeout == 0:
        acquired = False
    else:
        if verbose:
            failing = describe_errors(lock.errors)
            why = f"failing: {failing}" if failing else "held elsewhere"
            limit = "" if timeout is None else f" for up to {timeout:g}s"
            note(f"waiting for lock {lock.name!r}{limit}… ({why})")
        remaining = None if timeout is None else max(0.0, timeout - (time.monotonic() - started))
        acquired = await lock.acquire(timeout=remaining)
    if acquired and verbose:
        fencing = "" if lock.fencing_token is None else f", fencing token {lock.fencing_token}"
        note(f"acquired lock {lock.name!r} after {time.monotonic() - started:.1f}s{fencing}")
    return acquired


async def _run(args: argparse.Namespace, cmd: list[str]) -> int:
    loop = asyncio.get_running_loop()
    async with redlock(args) as nodes:
        lock = nodes.lock(
            args.name, ttl=args.ttl, timeout=args.timeout, fencing=args.fencing,
            cancel_on_lost=False,
        )  # fmt: skip
        # One handler per signal for the whole run: swapping handlers between
        # the wait and CMD's start would drop a signal that arrives in
        # between (or leave it to the default action: death, keys left on
        # the nodes). Until CMD has started, a signal gives up cleanly
        # (nothing left on the nodes) and exits like the signal would have;
        # from then on it is passed on to CMD.
        acquiring = asyncio.ensure_future(_acquire(lock, args.timeout, args.verbose))
        received: list[int] = []  # signals that came before CMD started
        cmd_process: list[asyncio.subprocess.Process] = []  # CMD, once started
        # Not on a terminal, CMD gets its own process group: every signal
        # reaches it once (from us), and stopping it reaches its children
        # too. On a terminal it stays in the foreground group, so it can read
        # the terminal, and Ctrl-C / Ctrl-\\ reach it from the terminal itself.
        interactive = sys.stdin.isatty()

        def on_signal(signum: int) -> None:
            if not cmd_process:
                received.append(signum)
                acquiring.cancel()  # a no-op once the wait is over
            elif not (interactive and signum in _TERMINAL_SIGNALS):
                _signal(cmd_process[0], signum, group=not interactive)
            # else the terminal delivered it to CMD as well: CMD decides

        with _handling(loop, FORWARDED, on_signal):
            try:
                acquired = await acquiring
            except asyncio.CancelledError:
                if not received:
                    raise
                acquired = False
            if received:
                if acquired:  # the grant came with the signal: give it back
                    await _release(lock, args.verbose)
                error(f"{signal.Signals(received[0]).name} while waiting for {args.name!r}")
                return 128 + received[0]
            if not acquired:
                # Busy is not down: a job held elsewhere is a routine outcome
                # (--conflict-exit-code), nodes that cannot decide are not.
                refusal = _refusal(lock, args.timeout)
                busy = isinstance(refusal, LockBusy)
                refused = int(args.conflict_exit_code) if busy else EX_UNAVAILABLE
                if refused or not args.quiet:  # --conflict-exit-code 0: busy is success
                    once = " (one attempt)" if args.timeout == 0 else ""
                    error(f"not acquired{once}: {refusal}")
                return refused

            env = dict(os.environ)
            env["REDLOCK_LOCK_NAME"] = args.name
            if lock.fencing_token is not None:
                env["REDLOCK_FENCING_TOKEN"] = str(lock.fencing_token)
            try:
                process = await _spawn(cmd, env, own_group=not interactive)
            except FileNotFoundError:
                await lock.release()
                error(f"command not found: {cmd[0]}")
                return EX_NOT_FOUND
            except PermissionError:
                await lock.release()
                error(f"command not executable: {cmd[0]}")
                return EX_CANNOT_EXECUTE
            cmd_process.append(process)
            for signum in received:  # came while CMD was starting: CMD's now
                on_signal(signum)

            exited = asyncio.ensure_future(process.wait())
            lost = asyncio.ensure_future(lock.lost_event.wait())
            await asyncio.wait({exited, lost}, return_when=asyncio.FIRST_COMPLETED)
            if not exited.done():
                error(f"{await _lost_reason(lock)}; stopping CMD")
                await _stop(process, exited, args.grace, group=not interactive)
                lost.cancel()
                return EX_LOST
            lost.cancel()
        code = process.returncode
        assert code is not None
        if args.verbose:
            note(f"CMD exited with code {code}" if code >= 0 else f"CMD ended by signal {-code}")
        await _release(lock, args.verbose)
        return code if code >= 0 else 128 - code  # killed by signal N: 128+N, like a shell


async def _lost_reason(lock: Lock) -> str:
    """Why ``lock`` was lost, as its LockLost says (it names the nodes' errors)."""
    # A lost lock holds no grant: release() sends nothing and raises the
    # LockLost that ended it - the public way to read the reason.
    try:
        await lock.release()
    except LockLost as exc:
        return str(exc)
    except RedlockError:
        pass
    return f"lock {lock.name!r} was lost"


async def _release(lock: Lock, verbose: bool) -> None:
    try:
        await lock.release()
        if verbose:
            note(f"released lock {lock.name!r}")
    except LockNotOwned as exc:  # expired or lost at the very end: CMD has finished
        error(f"release: {exc}")
    except Exception as exc:  # the lock expires by itself; CMD's code still counts
        error(f"release: {exc}")


async def _spawn(
    cmd: list[str], env: dict[str, str], *, own_group: bool
) -> asyncio.subprocess.Process:
    """Start CMD; with ``own_group``, as the leader of a new process group."""
    if not own_group:
        return await asyncio.create_subprocess_exec(*cmd, env=env)
    try:
        return await asyncio.create_subprocess_exec(*cmd, env=env, process_group=0)
    except ValueError as exc:
        # uvloop's loops refuse process_group (asyncio's take it since 3.11),
        # before starting anything: do the same setpgid(0, 0) in the child.
        if "process_group" not in str(exc):
            raise
        return await asyncio.create_subprocess_exec(*cmd, env=env, preexec_fn=os.setpgrp)


def _signal(process: asyncio.subprocess.Process, signum: int, *, group: bool) -> None:
    with contextlib.suppress(ProcessLookupError):
        if group:
            os.killpg(process.pid, signum)
        else:
            process.send_signal(signum)


async def _stop(
    process: asyncio.subprocess.Process, exited: asyncio.Future[int], grace: float, *, group: bool
) -> None:
    _signal(process, signal.SIGTERM, group=group)
    try:
        await asyncio.wait_for(asyncio.shield(exited), grace)
    except TimeoutError:
        error(f"CMD still running {grace}s after SIGTERM; sending SIGKILL")
        _signal(process, signal.SIGKILL, group=group)
        await exited


@contextlib.contextmanager
def _handling(
    loop: asyncio.AbstractEventLoop, signals: Sequence[int], handler: Callable[[int], None]
) -> Iterator[None]:
    for signum in signals:
        loop.add_signal_handler(signum, handler, signum)
    try:
        yield
    finally:
        for signum in signals:
            loop.remove_signal_handler(signum)
