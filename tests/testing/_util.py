"""Helpers for the tests of the testing helpers."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry


def client(port: int, timeout: float = 1.0) -> redis.Redis:
    """A sync client that reports faults at once: no retries, short timeouts."""
    return redis.Redis(
        host="127.0.0.1",
        port=port,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
    )


def single(port: int, timeout: float = 1.0) -> redis.Redis:
    """A client on one connection, made now: unlike a pool, it never reconnects
    behind the caller's back, so "the next command on this connection" means it."""
    return redis.Redis(
        host="127.0.0.1",
        port=port,
        socket_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
        single_connection_client=True,
    )


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie does not count)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def all_gone(pids: Iterable[int], within: float = 5.0) -> bool:
    """True once none of ``pids`` runs; orphans are reaped by init, not at once."""
    deadline = time.monotonic() + within
    while any(alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def kill_leftovers(pids: Iterable[int]) -> None:
    """After a failed check: end what the code under test left running (by pid)."""
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
