"""Node URLs: secrets never reach a message; one server never counts twice."""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path
from urllib.parse import quote

import pytest
import redis.asyncio
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from redlock_async import ConfigurationError, Redlock
from redlock_async._base._address import _QUERY_KEYS, redact_url
from redlock_async._base._options import OPTION_NAMES
from redlock_async._cli import main as cli_main

HOST = "10.9.8.7:7000"
OTHERS = ["redis://10.9.8.1:7000/0", "redis://10.9.8.2:7000/0"]

# -- B: secrets -------------------------------------------------------------

PASSWORDS = st.text(
    alphabet=st.one_of(
        st.sampled_from("/?#@%:&=+ ;[]"),
        st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")),
    ),
    min_size=4,
    max_size=20,
)


def _forms(secret: str) -> list[str]:
    """Every way a user might put ``secret`` into a node URL."""
    q = quote(secret, safe="")
    forms = []
    for scheme in ("redis", "rediss"):
        forms += [
            f"{scheme}://user:{secret}@{HOST}/0",  # raw userinfo
            f"{scheme}://:{secret}@{HOST}/0",
            f"{scheme}://user:{q}@{HOST}/0",  # percent-encoded userinfo
            f"{scheme}://{secret}:pw@{HOST}/0",  # as the user name
            f"{scheme}://{q}@{HOST}",
            f"{scheme}://{HOST}/0?password={secret}",
            f"{scheme}://{HOST}/0?password={q}",
            f"{scheme}://{HOST}/0?pass%77ord={q}",  # a percent-encoded key
            f"{scheme}://{HOST}/0?pass%77ord={secret}&db=0",
            f"{scheme}://{HOST}/0?username={q}&password={q}",
            f"{scheme}://{HOST}:bad/0?password={q}",  # an error about the port
            f"{scheme}://{HOST}/0?bogus=1&password={q}",  # an unsupported parameter
            f"{scheme}://{HOST}/0#{secret}",
        ]
    forms += [
        f"unix://:{secret}@/tmp/redis.sock",
        f"unix://:{q}@/tmp/redis.sock?db=1",
        f"unix:///tmp/redis.sock?db=1&password={q}",
        f"unix:///tmp/redis.sock?{q}",
    ]
    return forms


def _shown(url: str) -> list[str]:
    """Everything the library prints about ``url``."""
    texts = [redact_url(url)]
    for nodes in ([url, *OTHERS], [url, url]):
        try:
            redlock = Redlock(nodes)
        except ConfigurationError as exc:
            texts.append(str(exc))
        else:
            texts += [repr(redlock), str(redlock.nodes), *redlock.nodes]
    return texts


def _assert_hidden(secret: str, url: str, placeholder_url: str) -> None:
    shown = "\n".join(_shown(url))
    # A secret that is a substring of what is printed for the same URL with
    # a placeholder password (e.g. "7000" or "redis") is a coincidence.
    baseline = "\n".join(_shown(placeholder_url))
    # So is a secret that spells a URL parameter the library knows: in
    # "?username" it is that parameter's name, which may be shown.
    if secret in _QUERY_KEYS or secret in OPTION_NAMES:
        return
    for form in {secret, quote(secret, safe=""), quote(secret)}:
        assert form not in shown or form in baseline, (url, shown)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(secret=PASSWORDS)
def test_no_password_is_ever_shown(secret: str) -> None:
    # A secret spelled with the mask's own "*" (say "***@") is found in any
    # masked text: the check could not tell it from the mask.
    assume("*" not in secret)
    placeholder = "\u2603" * len(secret)
    for url, baseline in zip(_forms(secret), _forms(placeholder), strict=True):
        _assert_hidden(secret, url, baseline)


@settings(max_examples=25, deadline=None)
@given(secret=PASSWORDS)
def test_cli_errors_never_show_a_password(secret: str) -> None:
    url = f"redis://:{secret}@{HOST}:99999/0"  # a bad port: the CLI stops at the URL
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(["run", "--url", url, "job", "--", "true"])
    assert code == 2
    text = out.getvalue() + err.getvalue()
    assert secret not in text
    assert quote(secret, safe="") not in text


@pytest.mark.parametrize(
    ("url", "secret"),
    [
        ("redis://:hu/nt#er2@10.9.8.7:7000/0", "hu/nt#er2"),  # raw "/" and "#"
        ("redis://:hu?nter2@10.9.8.7:7000/0", "hu?nter2"),  # raw "?"
        ("redis://hu@nt:er@2x@10.9.8.7:7000/0", "hu@nt:er@2x"),  # raw "@", in the user too
        ("redis://10.9.8.7:7000/0?pass%77ord=hunter2", "hunter2"),  # a percent-encoded key
        ("redis://10.9.8.7:7000/0?password=hun@ter2", "hun@ter2"),  # raw "@" in a query value
    ],
)
def test_the_reviewed_urls_hide_their_passwords(url: str, secret: str) -> None:
    shown = "\n".join(_shown(url))
    for start in range(len(secret) - 3):
        assert secret[start : start + 4] not in shown, shown


def test_raw_special_characters_in_the_userinfo_still_connect_to_the_right_host() -> None:
    from redlock_async._base._address import parse_url

    a = parse_url("redis://u:pa/ss?wo#rd@10.9.8.7:7000/2")
    assert (a.host, a.port, a.db, a.username, a.password) == (
        "10.9.8.7",
        7000,
        2,
        "u",
        "pa/ss?wo#rd",
    )
    assert a.display == "redis://***@10.9.8.7:7000/2"
    b = parse_url("redis://10.9.8.7/0?pass%77ord=x%40y&db=3")
    assert (b.password, b.db) == ("x@y", 3)


# -- A: one server, one vote -------------------------------------------------


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("redis://127.0.0.1:7001", "redis://127.0.0.1:7001/0"),
        ("redis://127.0.0.1:7001/0", "redis://127.0.0.1:7001/"),
        ("redis://127.0.0.1:7001/0", "redis://127.0.0.1:7001?db=0"),
        ("redis://localhost:7001/0", "redis://127.0.0.1:7001/0"),
        ("redis://LOCALHOST:7001/0", "redis://localhost:7001/0"),
        ("redis://127.0.0.1:7001/0", "redis://127.0.0.1:7001/1"),  # two dbs, one server
        ("redis://[::ffff:127.0.0.1]:7001/0", "redis://127.0.0.1:7001/0"),
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1/0"),  # the default port
        ("redis://a:pw@127.0.0.1:7001/0", "rediss://127.0.0.1:7001/3"),
        ("unix:///tmp/../tmp/r.sock", "unix:///tmp/r.sock?db=2"),
        ("redis://no-such-host.invalid:7001/0", "redis://NO-SUCH-HOST.invalid:7001/1"),
    ],
)
def test_one_server_cannot_vote_twice(first: str, second: str) -> None:
    with pytest.raises(ConfigurationError, match="same Redis server twice") as info:
        Redlock([first, second, "redis://10.9.8.1:7001/0"])
    message = str(info.value)
    assert redact_url(first) in message
    assert redact_url(second) in message
    assert "pw" not in message


async def test_clients_are_compared_with_urls_and_each_other(tmp_path: Path) -> None:
    clients = [
        redis.asyncio.Redis(host="localhost", port=7001, db=1),
        redis.asyncio.Redis(host="127.0.0.1", port=7001, db=2),
        redis.asyncio.Redis(unix_socket_path=str(tmp_path / "r.sock")),
    ]
    try:
        with pytest.raises(ConfigurationError, match="twice"):
            Redlock([clients[0], clients[1]])
        with pytest.raises(ConfigurationError, match="twice"):
            Redlock(["redis://127.0.0.1:7001/0", clients[0]])
        with pytest.raises(ConfigurationError, match="twice"):
            Redlock([f"unix://{tmp_path}/./r.sock", clients[2]])
        async with Redlock([clients[0], "redis://127.0.0.1:7002/0", clients[2]]) as redlock:
            assert redlock.quorum == 2
    finally:
        for client in clients:
            await client.aclose()


async def test_a_cluster_client_is_compared_by_its_startup_nodes() -> None:
    cluster = redis.asyncio.RedisCluster(host="127.0.0.1", port=7001)
    try:
        with pytest.raises(ConfigurationError, match="twice"):
            Redlock([cluster, "redis://localhost:7001/3"])
        async with Redlock([cluster, "redis://127.0.0.1:7002/0"]) as redlock:
            assert redlock.quorum == 2
    finally:
        await cluster.aclose()


def test_symlinked_socket_paths_are_one_server(tmp_path: Path) -> None:
    (tmp_path / "r.sock").touch()
    os.symlink(tmp_path / "r.sock", tmp_path / "link.sock")
    with pytest.raises(ConfigurationError, match="twice"):
        Redlock([f"unix://{tmp_path}/r.sock", f"unix://{tmp_path}/link.sock"])


def test_distinct_servers_are_accepted() -> None:
    from redlock_async._base._address import node_identity

    redlock = Redlock(["redis://127.0.0.1:7001/0", "redis://127.0.0.1:7002/0", "unix:///tmp/a"])
    assert redlock.quorum == 2
    assert node_identity("no-such-host.invalid", 1) == {("tcp", "no-such-host.invalid", 1)}
    assert node_identity("127.0.0.1", 1) == node_identity("localhost", 1) & {
        ("tcp", "127.0.0.1", 1)
    }


# -- C: redis-py's URL parameters ---------------------------------------------

# A valid value for each parameter redis-py's URL parser casts by itself.
_CAST_VALUES = {
    "db": "2",
    "socket_timeout": "1.5",
    "socket_connect_timeout": "0.5",
    "socket_read_size": "65536",
    "socket_keepalive": "yes",
    "retry_on_timeout": "no",
    "max_connections": "7",
    "health_check_interval": "3",
    "ssl_check_hostname": "false",
    "ssl_include_verify_flags": "VERIFY_X509_STRICT",
    "ssl_exclude_verify_flags": "VERIFY_X509_PARTIAL_CHAIN",
    "ssl_min_version": "771",
    "protocol": "3",
    "legacy_responses": "true",
}


def _node(url: str) -> object:
    from redlock_async._base._config import RedlockConfig
    from redlock_async._engine import TtlLedger
    from redlock_async._engine._build import make_node

    return make_node(url, RedlockConfig(), TtlLedger())[0]


def test_every_parameter_redis_py_casts_is_accepted_and_cast_the_same_way() -> None:
    from redis.asyncio.connection import URL_QUERY_ARGUMENT_PARSERS
    from redis.asyncio.connection import parse_url as redis_parse_url

    from redlock_async._base._address import parse_url

    # A new one is tested here too; "timeout" is for blocking pools: Redis.from_url refuses it.
    assert set(_CAST_VALUES) == set(URL_QUERY_ARGUMENT_PARSERS) - {"timeout"}
    for key, value in _CAST_VALUES.items():
        url = f"rediss://u:pw@10.9.8.7:7000/0?{key}={value}"
        address = parse_url(url)
        expected = redis_parse_url(url)
        if key == "db":
            assert address.db == expected["db"]
        else:
            assert dict(address.options) == {key: expected[key]}  # type: ignore[literal-required]
        assert address.display.startswith("rediss://***@10.9.8.7:7000/0")


def test_tls_files_and_client_certificates_reach_the_redis_py_client() -> None:
    from redlock_async._engine.redispy import RedisPyNode

    url = (
        "rediss://redlock:pw@10.9.8.7:7000/1?ssl_ca_certs=/etc/ca.pem&ssl_cert_reqs=required"
        "&ssl_certfile=/etc/client.pem&ssl_keyfile=/etc/client.key&ssl_password=keypw"
    )
    node = _node(url)
    assert isinstance(node, RedisPyNode)
    assert isinstance(node._client, redis.asyncio.Redis)
    kwargs = node._client.connection_pool.connection_kwargs
    assert kwargs["ssl_ca_certs"] == "/etc/ca.pem"
    assert kwargs["ssl_certfile"] == "/etc/client.pem"
    assert kwargs["ssl_keyfile"] == "/etc/client.key"
    assert (kwargs["password"], kwargs["ssl_password"], kwargs["db"]) == ("pw", "keypw", 1)
    assert node.name == "rediss://***@10.9.8.7:7000/1"
    assert "keypw" not in repr(node) + repr(Redlock([url, *OTHERS]))


def test_a_parameter_the_lean_driver_cannot_honour_routes_the_node_through_redis_py() -> None:
    from redlock_async._engine.redispy import RedisPyNode
    from redlock_async._engine.resp import RespNode

    assert isinstance(_node("redis://10.9.8.7:7000/0?db=1&password=x"), RespNode)
    assert isinstance(_node("unix:///tmp/r.sock?db=1"), RespNode)
    node = _node("redis://10.9.8.7:7000/0?socket_keepalive=true&client_name=worker")
    assert isinstance(node, RedisPyNode)
    assert isinstance(node._client, redis.asyncio.Redis)
    kwargs = node._client.connection_pool.connection_kwargs
    assert (kwargs["socket_keepalive"], kwargs["client_name"]) == (True, "worker")
    assert isinstance(_node("unix:///tmp/r.sock?client_name=worker"), RedisPyNode)
    # And the default node_timeout is redis-py's, as for rediss://.
    plain = Redlock(["redis://10.9.8.1:7000/0", "redis://10.9.8.2:7000/0"])
    mixed = Redlock(["redis://10.9.8.1:7000/0?socket_keepalive=1", "redis://10.9.8.2:7000/0"])
    assert plain.config.node_timeout < mixed.config.node_timeout


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis://:hunter2@10.9.8.7/0?ssl_ca_certs=/ca.pem", "TLS parameter(s) without TLS"),
        ("rediss://:hunter2@10.9.8.7/0?ssl_cert_reqs=hunter2", "Certificate Requirements"),
        ("rediss://:hunter2@10.9.8.7/0?socket_timeout=soon", "'socket_timeout'"),
        ("rediss://:hunter2@10.9.8.7/0?retry=3", "unsupported parameter(s): 'retry'"),
        ("rediss://:hunter2@10.9.8.7/0?timeout=3", "'timeout' (did you mean 'socket_timeout'?)"),
        ("rediss://:hunter2@10.9.8.7/0?hunter2=1", "unsupported parameter(s): '***'"),
        ("redis://:hunter2@10.9.8.7/0?socket_timeout=1&bogus=2", "parameter(s): 'bogus'"),
        ("redis://10.9.8.7/0?pasword=hunter2", "'pasword' (did you mean 'password'?)"),
        ("redis://10.9.8.7/0?password=hun&ter2", "1 right after 'password' (not shown"),
        ("redis://10.9.8.7/0?hunter2", "1 without '=' (not shown"),
    ],
)
def test_a_bad_parameter_is_a_clear_error_without_the_password(url: str, says: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        Redlock([url, *OTHERS])
    message = str(info.value)
    assert says in message
    assert "10.9.8.7" in message
    assert "hunter2" not in message + repr(info.value)
    assert "ter2" not in message  # nor a part of it


def _refusal_of(url: str) -> str:
    with pytest.raises(ConfigurationError) as info:
        Redlock([url, *OTHERS])
    return f"{info.value}\n{info.value!r}"


def test_every_unsupported_parameter_is_named_never_its_value() -> None:
    # Issue 38: "unsupported parameter(s): 1 not shown" hid the one name to fix.
    said = _refusal_of(
        "redis://:s3cr3t@10.9.8.7/0?pasword=hunter2&socket_timout=0.5&sockettimeout=1"
        "&client_nam=worker&bogus=xyzzy&db=0"
    )
    for name in ("'pasword'", "'socket_timout'", "'sockettimeout'", "'client_nam'", "'bogus'"):
        assert name in said
    for value in ("hunter2", "s3cr3t", "0.5", "worker", "xyzzy"):
        assert value not in said
    assert "not shown" not in said
    # Names are quoted: a control character cannot forge a line of a log.
    assert "'a\\nb'" in _refusal_of("redis://10.9.8.7/0?a%0Ab=1")
    # Where a URL's secret is in the name, only the secret is hidden.
    said = _refusal_of("redis://u:hunter2@10.9.8.7/0?x_hunter2=1")
    assert "'x_***'" in said
    assert "hunter2" not in said
    said = _refusal_of("redis://10.9.8.7/0?password=hunter2&hunter2_x=1")
    assert "hunter2" not in said  # right after the password: maybe the rest of it


def test_a_name_that_may_be_a_value_is_counted_and_says_why() -> None:
    # A raw "&" in a password: is "w0rd9" a parameter, or the rest of the password?
    said = _refusal_of("redis://10.9.8.7/0?password=pa55&w0rd9&bogus=1")
    assert "w0rd9" not in said
    assert "2 right after 'password' (not shown: it may be the rest of that value" in said
    assert "%26" in said  # how to write it
    # A name redis-py knows ends the password's value: what follows is named.
    said = _refusal_of("redis://10.9.8.7/0?password=pa55&w0rd9&socket_timeout=1&bogus=1")
    assert "'bogus', and 1 right after 'password'" in said
    # No "=": a value without a name as much as a name without a value.
    said = _refusal_of("unix:///tmp/r.sock?hunter2&bogus=1")
    assert "hunter2" not in said
    assert "'bogus', and 1 without '=' (not shown: it may be a value" in said
    # TLS parameters without TLS are named as such, beside the unknown ones.
    said = _refusal_of("redis://10.9.8.7/0?ssl_ca_certs=/ca.pem&bogus=1")
    assert "parameter(s): 'bogus'; and TLS parameter(s) without TLS: ssl_ca_certs" in said


NAMES = st.from_regex(r"[a-z][a-z0-9_]{2,24}", fullmatch=True).filter(
    lambda name: name not in _QUERY_KEYS and name not in OPTION_NAMES
)


@settings(max_examples=40, deadline=None)
@given(name=NAMES, secret=PASSWORDS)
def test_any_unknown_name_is_shown_and_its_value_never(name: str, secret: str) -> None:
    assume("*" not in secret)
    url = f"redis://10.9.8.7:7000/0?{name}={quote(secret, safe='')}"
    placeholder = f"redis://10.9.8.7:7000/0?{name}={quote(chr(0x2603) * len(secret), safe='')}"
    said, baseline = _refusal_of(url), _refusal_of(placeholder)
    assert repr(name) in said
    for form in {secret, quote(secret, safe=""), quote(secret)}:
        assert form not in said or form in baseline, said
