"""The simulated node on its own (no sockets): conversions, sandbox, expiry, scripts, faults.

What the real server does is the differential check's to prove
(``test_diff.py``); these pin the model's rules one by one, so that a
change to one is seen here first, named.
"""

from __future__ import annotations

from typing import cast

import pytest

from redlock_async._core._scripts import ACQUIRE, ALL_SCRIPTS, EXTEND, RELEASE, STATUS
from redlock_async._engine import CENSUS
from tests.sim.clock import Clock
from tests.sim.node import QUIRKS, SimNode
from tests.sim.replies import NOREPLY, Error, NotModelled, Push, Status

T0 = 1_700_000_000_000
WRONGTYPE = Error("WRONGTYPE Operation against a key holding the wrong kind of value")


class Time:
    """A settable clock (ms)."""

    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def time() -> Time:
    return Time()


@pytest.fixture
def node(time: Time) -> SimNode:
    return SimNode(time, seed=1)


def run(node: SimNode, *words: bytes | str | int, conn: int = 0) -> object:
    args = [w if isinstance(w, bytes) else str(w).encode() for w in words]
    return node.execute(args, conn)


def lua(node: SimNode, source: str, *keys: str, args: tuple[str, ...] = ()) -> object:
    return run(node, "EVAL", source, len(keys), *keys, *args)


# Lua -> Redis and Redis -> Lua ---------------------------------------------------


def test_a_scripts_result_converts_as_redis_converts_it(node: SimNode) -> None:
    assert lua(node, "return 3.7") == 3
    assert lua(node, "return -3.7") == -3
    assert lua(node, "return true") == 1
    assert lua(node, "return false") is None
    assert lua(node, "return {1, 2, nil, 3}") == [1, 2]
    assert lua(node, "return {1, 'a', {true, false}, 2.5}") == [1, b"a", [1, None], 2]
    assert lua(node, "return {ok = 'FINE'}") == Status("FINE")
    assert lua(node, "return {err = 'MY bad'}") == Error("MY bad")
    assert lua(node, "return {1, {err = 'E x'}}") == [1, Error("E x")]
    assert lua(node, "return 1/0") == -(2**63)  # x86's conversion of an out-of-range double


def test_a_commands_reply_converts_as_redis_converts_it(node: SimNode) -> None:
    assert lua(node, "return type(redis.call('GET', 'nope'))") == b"boolean"
    assert lua(node, "return redis.call('SET', 'k', 'v')") == Status("OK")
    assert lua(node, "return type(redis.call('SET', 'k', 'v', 'NX'))") == b"boolean"
    assert lua(node, "return redis.call('HSET', 'h', 'f', 'v')") == 1
    assert lua(node, "return redis.pcall('GET', 'h')") == WRONGTYPE
    assert lua(node, "return redis.pcall('GET', 'h').err") == WRONGTYPE.encode()


def test_numbers_go_to_redis_as_redis_prints_them(node: SimNode) -> None:
    lua(
        node,
        "redis.call('SET', 'a', 0.1) redis.call('SET', 'b', 1e15) redis.call('SET', 'c', 1e20)",
    )
    assert [run(node, "GET", key) for key in "abc"] == [
        b"0.10000000000000001",
        b"1000000000000000",
        b"1e+20",
    ]
    error = lua(node, "return redis.call('SET', 'k', true)")
    assert isinstance(error, Error)
    assert error.startswith("ERR Lua redis lib command arguments must be strings or integers")


def test_errors_name_the_script_and_the_line_as_redis_7_0_does(node: SimNode) -> None:
    run(node, "HSET", "h", "f", "v")
    source = "local x = 1\nreturn redis.call('GET', 'h')"
    sha = run(node, "SCRIPT", "LOAD", source)
    assert isinstance(sha, bytes)
    expected = f"{WRONGTYPE} script: {sha.decode()}, on @user_script:2."
    assert run(node, "EVALSHA", sha, 0) == Error(expected)
    raised = lua(node, "\nerror('boom')")
    assert isinstance(raised, Error)
    assert raised.startswith("ERR user_script:2: boom script: ")
    assert raised.endswith(", on @user_script:2.")
    assert lua(node, "return redis.error_reply('x')") == Error("ERR x")
    assert lua(node, "return redis.error_reply('MINE x')") == Error("MINE x")


def test_the_sandbox_is_redis_s(node: SimNode) -> None:
    written = lua(node, "x = 1")
    assert isinstance(written, Error)
    assert "user_script:1: Attempt to modify a readonly table" in written
    missing = lua(node, "return y")
    assert isinstance(missing, Error)
    assert "Script attempted to access nonexistent global variable 'y'" in missing
    assert lua(node, "return redis.sha1hex('abc')") == b"a9993e364706816aba3e25717850c26c9cd0d89d"
    assert lua(node, "return {type(cjson), type(bit), type(unpack)}") == [
        b"table",
        b"table",
        b"function",
    ]
    with pytest.raises(NotModelled, match=r"math\.random"):
        lua(node, "return math.random(10)")
    with pytest.raises(NotModelled, match=r"cjson\.encode"):
        lua(node, "return cjson.encode({})")


def test_a_compile_error_is_redis_s_and_loads_nothing(node: SimNode) -> None:
    error = Error("ERR Error compiling script (new function): user_script:1: '=' expected near 'n'")
    assert run(node, "SCRIPT", "LOAD", "retur n 1") == error
    assert run(node, "EVAL", "retur n 1", 0) == error
    assert node.scripts == set()


def test_a_script_sees_its_start_for_expiry_and_reads_the_clock_live_for_time(
    node: SimNode,
) -> None:
    ticks = iter(range(T0, T0 + 100))
    node.clock = lambda: next(ticks)  # every read one ms later
    run(node, "SET", "k", "v", "PX", 3)  # read at T0+1: expires after T0+4
    reply = lua(node, "local t = {} for i = 1, 5 do t[i] = redis.call('EXISTS', 'k') end return t")
    assert reply == [1, 1, 1, 1, 1]  # the script began at T0+2: k never expires inside it
    times = lua(node, "return {redis.call('TIME')[2], redis.call('TIME')[2]}")
    assert isinstance(times, list)
    assert times[0] != times[1]  # TIME is gettimeofday, in a script too


# Keys and expiry ---------------------------------------------------------------


def test_expiry_follows_the_node_clock(node: SimNode, time: Time) -> None:
    run(node, "SET", "k", "v", "PX", 100)
    assert run(node, "PTTL", "k") == 100
    time.now += 100
    assert run(node, "GET", "k") == b"v"  # expired only once the clock is past it
    assert run(node, "PTTL", "k") == 0
    time.now += 1
    assert [run(node, c, "k") for c in ("GET", "EXISTS", "PTTL", "TYPE")] == [
        None,
        0,
        -2,
        Status("none"),
    ]
    assert b"k" not in node.snapshot()


def test_set_replaces_or_clears_the_expiry_unless_keepttl(node: SimNode, time: Time) -> None:
    run(node, "SET", "k", "v", "PX", 100)
    run(node, "SET", "k", "w", "PX", 500)
    assert run(node, "PTTL", "k") == 500
    run(node, "SET", "k", "x", "KEEPTTL")
    assert run(node, "PTTL", "k") == 500
    run(node, "SET", "k", "y")
    assert run(node, "PTTL", "k") == -1
    run(node, "HSET", "h", "f", "v")
    assert run(node, "PTTL", "h") == -1
    assert run(node, "PEXPIRE", "h", 0) == 1
    assert run(node, "EXISTS", "h") == 0
    assert run(node, "PEXPIRE", "h", 10) == 0


def test_wrong_types_are_refused(node: SimNode) -> None:
    run(node, "HSET", "h", "f", "v")
    run(node, "ZADD", "z", 1, "m")
    run(node, "SET", "s", "v")
    assert run(node, "GET", "h") == WRONGTYPE
    assert run(node, "INCR", "z") == WRONGTYPE
    assert run(node, "HGET", "s", "f") == WRONGTYPE
    assert run(node, "ZADD", "h", 1, "m") == WRONGTYPE
    assert run(node, "ZRANGEBYSCORE", "s", "-inf", "+inf") == WRONGTYPE
    assert run(node, "SET", "h", "v") == Status("OK")  # SET overwrites any type


def test_sorted_sets_keep_redis_s_order_and_options(node: SimNode) -> None:
    assert run(node, "ZADD", "z", 2, "b", 1, "c", 1, "a") == 3
    assert run(node, "ZRANGE", "z", 0, -1, "WITHSCORES") == [b"a", b"1", b"c", b"1", b"b", b"2"]
    assert run(node, "ZADD", "z", "NX", 9, "a") == 0
    assert run(node, "ZSCORE", "z", "a") == b"1"
    assert run(node, "ZADD", "z", "XX", 9, "a", 9, "new") == 0
    assert run(node, "ZSCORE", "z", "a") == b"9"
    assert run(node, "ZRANK", "z", "new") is None
    assert run(node, "ZRANGEBYSCORE", "z", "(1", "9") == [b"b", b"a"]
    assert run(node, "ZREMRANGEBYSCORE", "z", "-inf", 2) == 2
    assert run(node, "EXISTS", "z") == 1
    assert run(node, "ZREM", "z", "a") == 1
    assert run(node, "EXISTS", "z") == 0  # an empty set is deleted
    assert run(node, "ZADD", "z", "NX", "XX", 1, "a") == Error(
        "ERR XX and NX options at the same time are not compatible"
    )
    assert run(node, "ZADD", "z", "nan", "a") == Error("ERR value is not a valid float")


def test_what_is_not_modelled_raises(node: SimNode) -> None:
    for words in (("LPUSH", "l", "x"), ("SET", "k", "v", "GET"), ("INFO",), ("CLIENT", "LIST")):
        with pytest.raises(NotModelled):
            run(node, *words)


# Scripts and the library's own ---------------------------------------------------


def test_every_library_script_loads_under_the_sha_the_library_expects(node: SimNode) -> None:
    for script in (*ALL_SCRIPTS, STATUS):
        assert run(node, "SCRIPT", "LOAD", script.source) == script.sha
        if script.cluster is not None:
            assert run(node, "SCRIPT", "LOAD", script.cluster.source) == script.cluster.sha


def test_evalsha_answers_noscript_until_loaded_and_after_a_flush(node: SimNode) -> None:
    noscript = Error("NOSCRIPT No matching script. Please use EVAL.")
    assert run(node, "EVALSHA", RELEASE.sha, 1, "k", "t") == noscript
    assert run(node, "EVAL", RELEASE.source, 1, "k", "t") == 0
    assert run(node, "EVALSHA", RELEASE.sha.upper(), 1, "k", "t") == 0
    assert run(node, "SCRIPT", "EXISTS", RELEASE.sha, ACQUIRE.sha) == [1, 0]
    node.flush_scripts()
    assert run(node, "EVALSHA", RELEASE.sha, 1, "k", "t") == noscript


def test_an_exclusive_grant_on_the_node(node: SimNode, time: Time) -> None:
    record = b"redlock:~epoch:,nope,"
    assert run(node, "EVAL", ACQUIRE.source, 1, "redlock:{a}", "t1", 1000, record) == -9
    epoch = run(node, "HGET", "redlock:~epoch", "id")
    assert isinstance(epoch, bytes)
    assert len(epoch) == 16
    record = b"redlock:~epoch:," + epoch + b","
    fence = "redlock:{a}:fence"
    assert run(node, "EVAL", ACQUIRE.source, 2, "redlock:{a}", fence, "t1", 1000, record) == (
        T0 // 1000 * 1_000_000 + 1  # the fencing counter resumes from the clock
    )
    assert run(node, "EVAL", ACQUIRE.source, 1, "redlock:{a}", "t2", 1000, record) == 0
    assert run(node, "PTTL", record) == 2500  # the view's record: 1.25 x max(ttl, 2 s)
    time.now += 500
    assert run(node, "EVAL", EXTEND.source, 1, "redlock:{a}", "t1", 1000, record) == 1
    assert run(node, "PTTL", "redlock:{a}") == 1000
    assert run(node, "EVAL", RELEASE.source, 1, "redlock:{a}", "t2") == 0
    assert run(node, "EVAL", RELEASE.source, 1, "redlock:{a}", "t1") == 1
    census = run(node, "EVAL", CENSUS.source, 1, "redlock:~epoch")
    # The epoch, the eviction policy ('' for none), no notices, one live record.
    assert census == [epoch, b"", 0, record.split(b"~epoch:")[1], 2000]


# Faults --------------------------------------------------------------------------


def test_a_restart_comes_back_as_a_new_server(node: SimNode, time: Time) -> None:
    run(node, "SET", "k", "v")
    run(node, "SCRIPT", "LOAD", RELEASE.source)
    run_id = node.run_id
    time.now += 5000
    node.restart()
    assert node.run_id != run_id
    assert node.snapshot() == {}
    assert node.scripts == set()
    info = run(node, "INFO", "server")
    assert isinstance(info, bytes)
    assert b"uptime_in_seconds:0\r\n" in info
    assert f"run_id:{node.run_id}".encode() in info
    run(node, "SET", "k", "v")
    node.restart(keep="all")
    assert run(node, "GET", "k") == b"v"


def test_a_restart_from_an_append_only_file_missing_its_last_writes(time: Time) -> None:
    node = SimNode(time, journal=10)
    run(node, "SET", "a", "1")
    lua(node, "redis.call('SET', 'b', '2') redis.call('DEL', 'a')")  # one unit
    run(node, "SET", "b", "3", "PX", 50)
    assert node.restart(keep="aof_prefix", lost=1) == 1
    assert node.snapshot() == {b"b": ("string", b"2", None)}
    run(node, "SET", "c", "1")
    assert node.restart(keep="aof_prefix", lost=5) == 1  # the journal starts again at a restart
    assert sorted(node.snapshot()) == [b"b"]


def test_eviction_and_flushall(node: SimNode) -> None:
    run(node, "SET", "later", "v", "PX", 500)
    run(node, "SET", "soon", "v", "PX", 100)
    run(node, "SET", "kept", "v")
    assert b"maxmemory_policy:noeviction" in cast(bytes, run(node, "INFO", "memory"))
    assert node.evict("volatile-ttl") == [(b"soon", b"v")]
    assert b"maxmemory_policy:volatile-ttl" in cast(bytes, run(node, "INFO", "memory"))
    assert node.evict("volatile-random", count=5) == [(b"later", b"v")]
    assert node.evict("volatile-lru") == []
    assert sorted(node.snapshot()) == [b"kept"]
    node.flushall()
    assert node.snapshot() == {}


def test_pub_sub_delivers_to_the_connections_subscribed(node: SimNode) -> None:
    assert run(node, "SSUBSCRIBE", "ch", conn=1) is NOREPLY
    assert node.take(1) == [Push([b"ssubscribe", b"ch", 1])]
    run(node, "SET", "k", "t")
    assert run(node, "EVAL", RELEASE.source, 2, "k", "ch", "t") == 1
    assert node.take(1) == [Push([b"smessage", b"ch", b"t"])]
    assert run(node, "GET", "k", conn=1) == Error(
        "ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / "
        "RESET are allowed in this context"
    )
    assert run(node, "PING", conn=1) == [b"pong", b""]
    node.disconnect(1)
    assert run(node, "SPUBLISH", "ch", "x") == 0


def test_the_drivers_handshakes(time: Time) -> None:
    node = SimNode(time)
    assert run(node, "PING") == Status("PONG")
    assert run(node, "CLIENT", "SETINFO", "LIB-NAME", "redis-py") == Error(
        "ERR unknown subcommand 'SETINFO'. Try CLIENT HELP."
    )
    hello = run(node, "HELLO", 3)
    assert isinstance(hello, dict)
    assert hello[b"proto"] == 3
    assert hello[b"version"] == b"7.0.15"
    locked = SimNode(time, password="pw")
    assert run(locked, "PING") == Error("NOAUTH Authentication required.")
    assert run(locked, "AUTH", "nope") == Error(
        "WRONGPASS invalid username-password pair or user is disabled."
    )
    assert run(locked, "AUTH", "pw") == Status("OK")
    assert run(locked, "SELECT", 3) == Status("OK")
    assert run(locked, "SET", "k", "v") == Status("OK")
    assert run(locked, "EXISTS", "k", conn=7) == Error("NOAUTH Authentication required.")


def test_quirks_are_named_ones() -> None:
    assert "zadd_nx_updates" in QUIRKS
    with pytest.raises(ValueError, match="unknown quirks"):
        SimNode(Time(), quirks=frozenset({"typo"}))


def test_a_node_clock_drifts_at_its_rate_without_jumps() -> None:
    true = Time(0)
    clock = Clock(true, rate=1.01, offset=5)
    true.now = 1000
    assert clock() == 1015
    clock.set_rate(0.99)
    assert clock() == 1015
    true.now = 2000
    assert clock() == 2005
    clock.step(-5)
    assert clock() == 2000
