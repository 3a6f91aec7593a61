"""Bad input gets a ConfigurationError that names it; secrets never leak."""

from __future__ import annotations

import contextlib
import io
import logging
import math
import warnings

import pytest
import redis.asyncio

from redlock_async import ConfigurationError, Redlock
from redlock_async._base._address import parse_url, redact_url

URL = "redis://127.0.0.1:1/0"


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"node_timeout": 0}, "node_timeout"),
        ({"node_timeout": -1}, "node_timeout"),
        ({"node_timeout": math.nan}, "node_timeout"),
        ({"node_timeout": "1"}, "node_timeout"),
        ({"retry_delay": -0.1}, "retry_delay"),
        ({"retry_jitter": -0.1}, "retry_jitter"),
        ({"drift_factor": 1.0}, "drift_factor"),
        ({"drift_factor": -0.01}, "drift_factor"),
        ({"drift_factor": True}, "drift_factor"),
        ({"prefix": "a{b}"}, "prefix"),
    ],
)
def test_bad_redlock_keywords(kwargs: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigurationError, match=named):
        Redlock([URL], **kwargs)  # type: ignore[arg-type]


def test_configuration_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="node_timeout"):
        Redlock([URL], node_timeout=-1)


@pytest.mark.parametrize(
    ("nodes", "named"),
    [
        ([], "at least one"),
        ("redis://x", "list"),
        ([42], "int"),
        (["http://x"], "redis://"),
        (["redis://host:notaport"], "port"),
        (["redis://h:1/0", "redis://h:1/0"], "twice"),
        (["redis://h:1/zero"], "database"),
        (["redis://h:1/0?socket_timeout=soon"], "socket_timeout"),  # a value redis-py refuses
        (["unix://"], "socket path"),
    ],
)
def test_bad_nodes(nodes: object, named: str) -> None:
    with pytest.raises(ConfigurationError, match=named):
        Redlock(nodes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"ttl": 0}, "ttl"),
        ({"ttl": -5}, "ttl"),
        ({"ttl": 0.0001}, "ttl"),
        ({"ttl": math.inf}, "ttl"),
        ({"timeout": -1}, "timeout"),
        ({"auto_extend": 1}, "auto_extend"),
        ({"fencing": "yes"}, "fencing"),
        ({"on_lost": 3}, "on_lost"),
    ],
)
def test_bad_lock_keywords(kwargs: dict[str, object], named: str) -> None:
    redlock = Redlock([URL])
    with pytest.raises(ConfigurationError, match=named):
        redlock.lock("x", **kwargs)  # type: ignore[arg-type]


def test_bad_lock_names() -> None:
    redlock = Redlock([URL])
    with pytest.raises(ConfigurationError, match="name"):
        redlock.lock("")
    with pytest.raises(ConfigurationError, match="name"):
        redlock.lock(b"x")  # type: ignore[arg-type]


SECRET = "s3cr%3At-pw"  # percent-encoded colon inside


@pytest.mark.parametrize(
    "url",
    [
        f"redis://:{SECRET}@10.0.0.1:6379/0",
        f"redis://user:{SECRET}@10.0.0.1:6379/0",
        f"rediss://user:{SECRET}@10.0.0.1/2",
        f"unix:///tmp/redis.sock?db=1&password={SECRET}",
    ],
)
def test_passwords_never_appear(url: str) -> None:
    redlock = Redlock([url, "redis://127.0.0.1:1/0", "redis://127.0.0.1:2/0"])
    shown = repr(redlock) + str(redlock.nodes)
    assert "s3cr" not in shown
    assert "***" in shown


def test_passwords_never_appear_in_errors() -> None:
    with pytest.raises(ConfigurationError) as info:
        Redlock([f"redis://:{SECRET}@host:bad/0"])
    assert "s3cr" not in str(info.value)
    with pytest.raises(ConfigurationError) as info:
        Redlock([f"redis://:{SECRET}@host:1/0?bogus=1"])
    assert "s3cr" not in str(info.value)


def test_url_parsing() -> None:
    a = parse_url("redis://u:p%40ss@example.com:7000/3")
    assert (a.host, a.port, a.db, a.username, a.password) == ("example.com", 7000, 3, "u", "p@ss")
    assert a.display == "redis://***@example.com:7000/3"  # the user name is hidden too
    assert "p@ss" not in repr(a)
    b = parse_url("unix:///var/run/redis.sock?db=2")
    assert (b.path, b.db) == ("/var/run/redis.sock", 2)
    assert parse_url("redis://h").port == 6379
    assert redact_url("redis://h:1/0") == "redis://h:1/0"


def test_cached_options_never_skip_validation() -> None:
    redlock = Redlock([URL])
    redlock.lock("x", ttl=1)
    with pytest.raises(ConfigurationError, match="ttl"):
        redlock.lock("x", ttl=True)
    redlock.lock("x")
    with pytest.raises(ConfigurationError, match="auto_extend"):
        redlock.lock("x", auto_extend=1)  # type: ignore[arg-type]


def test_fencing_is_for_exclusive_and_write_locks() -> None:
    redlock = Redlock([URL])
    redlock.lock("x", fencing=True)
    redlock.rwlock("x").write(fencing=True)
    with pytest.raises(ConfigurationError, match="fencing"):
        redlock.rwlock("x").read(fencing=True)


# -- ttl bounds (issue 14, C) -----------------------------------------------


@pytest.mark.parametrize("ttl", [1e17, 366 * 24 * 3600.0 + 1, 0.005])
def test_ttl_outside_the_bounds_is_refused_by_every_factory(ttl: float) -> None:
    redlock = Redlock([URL])
    with pytest.raises(ConfigurationError, match="ttl"):
        redlock.lock("x", ttl=ttl)
    with pytest.raises(ConfigurationError, match="ttl"):
        redlock.rwlock("x").write(ttl=ttl)
    with pytest.raises(ConfigurationError, match="ttl"):
        redlock.rwlock("x", ttl=ttl)
    with pytest.raises(ConfigurationError, match="ttl"):
        redlock.synchronized("x", ttl=ttl)


def test_a_ttl_within_its_drift_allowance_is_refused() -> None:
    # validity = ttl * (1 - drift_factor) - 0.002: 0.015 * 0.1 - 0.002 < 0.
    redlock = Redlock([URL], drift_factor=0.9)
    for _ in range(2):  # and again: a refused ttl must not be cached
        with pytest.raises(ConfigurationError, match="ttl"):
            redlock.lock("x", ttl=0.015)
    with pytest.raises(ConfigurationError, match="ttl"):
        redlock.rwlock("x").read(ttl=0.015)
    with pytest.raises(ConfigurationError, match="drift_factor"):
        redlock.synchronized("x", ttl=0.015)
    redlock.lock("x", ttl=0.05)  # 0.005 s of validity: accepted
    # The same ttl is fine where the drift allowance is the default one.
    Redlock([URL]).lock("x", ttl=0.015)


def test_check_ttl_bounds() -> None:
    from redlock_async._base._config import MAX_TTL, MIN_TTL, check_ttl

    assert check_ttl("ttl", MIN_TTL, 0.01) == MIN_TTL
    assert check_ttl("ttl", MAX_TTL, 0.01) == MAX_TTL
    assert MAX_TTL * 1000 < 2**62  # far from Redis's PX overflow
    for bad in (MIN_TTL / 2, MAX_TTL * 2, 0, -1, math.nan, True):
        with pytest.raises(ConfigurationError, match="extend_ttl"):
            check_ttl("extend_ttl", bad, 0.01)


def test_valid_options_are_still_cached() -> None:
    redlock = Redlock([URL], drift_factor=0.5)
    first = redlock.lock("a", ttl=2.0)
    second = redlock.lock("b", ttl=2.0)
    assert first._options is second._options


# -- node_timeout per driver (issue 14, E) ----------------------------------


async def test_node_timeout_default_depends_on_the_driver() -> None:
    client = redis.asyncio.Redis(host="127.0.0.1", port=2)
    try:
        assert Redlock([URL, "unix:///tmp/x.sock"]).config.node_timeout == 0.05
        assert Redlock([URL, client]).config.node_timeout == 0.25
        assert Redlock([client], node_timeout=0.05).config.node_timeout == 0.05
        assert Redlock([URL], node_timeout=1).config.node_timeout == 1.0
        async with Redlock(["rediss://127.0.0.1:3/0"]) as redlock:
            assert redlock.config.node_timeout == 0.25
            assert isinstance(redlock.config.node_timeout, float)
    finally:
        await client.aclose()


async def test_clients_created_from_rediss_urls_do_not_retry() -> None:
    # redis-py retries connection errors with backoff by default: a dead
    # node would then show up as a timeout, not a connection error.
    async with Redlock(["rediss://u:pw@127.0.0.1:3/2"]) as redlock:
        client = redlock._core.nodes[0]._client  # type: ignore[attr-defined]
        assert client.get_retry().get_retries() == 0
        kwargs = client.connection_pool.connection_kwargs
        assert (kwargs["host"], kwargs["port"], kwargs["db"], kwargs["password"]) == (
            "127.0.0.1",
            3,
            2,
            "pw",
        )
        assert kwargs["socket_connect_timeout"] == redlock.config.node_timeout


# -- two nodes: accepted, with one warning per Redlock (issue 38) -------------

TWO = ["redis://:hunter2@10.9.8.1:7000/0", "redis://10.9.8.2:7000/0"]


def two_node_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        record
        for record in caplog.records
        if record.name == "redlock_async" and "every grant needs both" in record.getMessage()
    ]


def test_two_nodes_are_accepted_with_a_warning_that_says_what_they_cost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="redlock_async"), warnings.catch_warnings():
        warnings.simplefilter("error")  # a log record: never a Python warning
        redlock = Redlock(TWO)
    assert redlock.quorum == 2
    (record,) = two_node_warnings(caplog)
    assert record.levelno == logging.WARNING
    message = record.getMessage()
    for says in (
        "2 nodes (redis://***@10.9.8.1:7000/0, redis://10.9.8.2:7000/0)",
        "every grant needs both, so none may fail",
        "an outage of either one blocks every lock",
        "Use 3 nodes (any one may fail) or 1",
    ):
        assert says in message, message
    assert "hunter2" not in message
    assert getattr(record, "redlock_outcome", None) == "two_nodes"  # for a JSON log to filter on


@pytest.mark.parametrize("n", [1, 3, 4, 5])
def test_other_node_counts_are_not_warned_about(n: int, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="redlock_async"):
        Redlock([f"redis://10.9.8.{i}:7000/0" for i in range(1, n + 1)])
    assert not [record for record in caplog.records if record.levelno >= logging.WARNING]


def test_each_redlock_warns_once_the_sync_one_too(caplog: pytest.LogCaptureFixture) -> None:
    from redlock_async.sync import Redlock as SyncRedlock

    with caplog.at_level(logging.WARNING, logger="redlock_async"):
        first = Redlock(TWO)
        first.lock("a")
        first.lock("b")  # locks say nothing more
        assert len(two_node_warnings(caplog)) == 1
        Redlock(TWO)
        assert len(two_node_warnings(caplog)) == 2
        caplog.clear()
        # The sync Redlock builds one async Redlock: one warning, not two.
        with SyncRedlock(TWO) as redlock:
            redlock.lock("a")
        assert len(two_node_warnings(caplog)) == 1
        caplog.clear()
        # Refused configuration: an error, no warning before it.
        with pytest.raises(ConfigurationError):
            Redlock(TWO, node_timeout=-1)
        assert not two_node_warnings(caplog)


def test_the_cli_says_it_once_and_not_with_quiet() -> None:
    from redlock_async._cli._output import library_warnings

    for quiet, lines in ((False, 1), (True, 0)):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), library_warnings(quiet=quiet):
            for _ in range(3):  # demo --nodes 2: a Redlock per worker
                Redlock(TWO)
        said = err.getvalue().splitlines()
        assert len(said) == lines, said
        assert all(line.startswith("redlock-async: 2 nodes (") for line in said)
