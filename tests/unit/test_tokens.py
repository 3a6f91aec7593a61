"""Grant tokens: pooled CSPRNG bytes, unique, never shared with a forked child."""

from __future__ import annotations

import os
import re

from redlock_async._engine import TokenPool


def test_tokens_are_40_hex_characters_and_unique() -> None:
    pool = TokenPool()
    tokens = [pool() for _ in range(1000)]  # several refills of the pool
    assert all(re.fullmatch(rb"[0-9a-f]{40}", t) for t in tokens)
    assert len(set(tokens)) == len(tokens)


def test_two_pools_do_not_share_bytes() -> None:
    first, second = TokenPool(), TokenPool()
    assert {first() for _ in range(300)}.isdisjoint({second() for _ in range(300)})


def test_a_forked_child_does_not_reuse_the_parents_pool() -> None:
    pool = TokenPool()
    pool()  # filled: 127 unused tokens wait in the buffer
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its next token, then leave at once
        os.close(read)
        os.write(write, pool())
        os._exit(0)
    os.close(write)
    child_token = os.read(read, 100)
    os.close(read)
    os.waitpid(pid, 0)
    assert child_token != pool()
