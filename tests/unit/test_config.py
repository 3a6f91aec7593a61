"""Bad input gets a ConfigurationError that names it; secrets never leak."""

from __future__ import annotations

import math

import pytest

from redlock_async import ConfigurationError, Redlock
from redlock_async._address import parse_url, redact_url

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
        (["redis://h:1/0?socket_timeout=1"], "socket_timeout"),
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
    assert a.display == "redis://u:***@example.com:7000/3"
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
