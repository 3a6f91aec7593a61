"""The core lock behaviour over real TLS, with the server certificate verified (issue 17).

Every server here listens with TLS only (``--port 0 --tls-port P``), with a
certificate for 127.0.0.1 and localhost from a throwaway CA made by the
``openssl`` command; clients verify it (redis-py's defaults:
``ssl_cert_reqs="required"``, hostname checked) against that CA, given in
the URL (``?ssl_ca_certs=…``) or to a client passed in.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis.asyncio

from redlock_async import NodeConnectionError, NodeError, NodeTimeoutError, Redlock
from redlock_async.testing import Certificates, TlsServer
from redlock_async.testing._tls import find_openssl

from ..conftest import eventually

pytestmark = pytest.mark.skipif(find_openssl() is None, reason="needs the openssl command")


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return Certificates.make(tmp_path_factory.mktemp("ca"))


def start(servers: list[TlsServer]) -> list[TlsServer]:
    for server in servers:
        server.launch()  # in parallel, then wait for each
    for server in servers:
        server.wait_ready()
    return servers


@pytest.fixture
def tls_servers(certificates: Certificates) -> Iterator[list[TlsServer]]:
    servers = [TlsServer(certificates) for _ in range(3)]
    try:
        yield start(servers)
    finally:
        for server in servers:
            server.stop()


def keys(server: TlsServer) -> list[bytes]:
    with server.client() as client:
        return sorted(k for k in client.keys("redlock:*") if b"~epoch" not in k)


@pytest.fixture(params=["url", "client"])
async def tls_redlock(
    request: pytest.FixtureRequest, tls_servers: list[TlsServer], certificates: Certificates
) -> AsyncIterator[Redlock]:
    """A Redlock over ``tls_servers``: URLs with ``ssl_ca_certs``, or clients passed in."""
    if request.param == "url":
        nodes: list[str | redis.asyncio.Redis] = [server.url for server in tls_servers]
    else:
        nodes = [
            redis.asyncio.Redis(
                host="127.0.0.1", port=server.port, ssl=True, ssl_ca_certs=str(certificates.ca)
            )
            for server in tls_servers
        ]
    redlock = Redlock(nodes)
    yield redlock
    await redlock.aclose()
    for node in nodes:
        if not isinstance(node, str):
            await node.aclose()
    await asyncio.sleep(0.05)  # let redis-py's sockets finish closing


async def test_acquire_contend_wake_and_release(
    tls_redlock: Redlock, tls_servers: list[TlsServer]
) -> None:
    first = tls_redlock.lock("job", ttl=5.0, auto_extend=False)
    # Not one attempt: the first TLS handshakes on a busy machine may outlast a node_timeout.
    assert await first.acquire(timeout=30.0)
    assert sum(keys(server) == [b"redlock:{job}"] for server in tls_servers) >= 2
    second = tls_redlock.lock("job", ttl=5.0, auto_extend=False)
    assert not await second.acquire(blocking=False)
    assert dict(second.errors) == {}  # refused by every node, none failed
    # A waiter blocked on the held name gets it after the release (pub/sub over TLS too).
    waiting = asyncio.ensure_future(second.acquire(timeout=30.0))
    await asyncio.sleep(0.2)
    await first.release()
    assert await waiting
    await second.release()
    # Decided on a quorum: the last node's delete may still be landing.
    assert await eventually(lambda: all(keys(server) == [] for server in tls_servers))


async def test_auto_renewal_keeps_the_lock_past_its_ttl(
    tls_redlock: Redlock, tls_servers: list[TlsServer]
) -> None:
    # ttl 1 s, not less: a TLS renewal on a machine loaded past its cores
    # (the full matrix beside other work) once took longer than 0.5 s's validity.
    lock = tls_redlock.lock("job", ttl=1.0)
    assert await lock.acquire()
    await asyncio.sleep(3.0)  # three ttls: held only if renewed over TLS
    assert lock.held
    for server in tls_servers:
        with server.client() as client:
            assert client.pttl("redlock:{job}") > 0
    await lock.release()


async def test_readers_share_and_a_writer_waits_for_them(tls_redlock: Redlock) -> None:
    rw = tls_redlock.rwlock("report")
    readers = [rw.read(ttl=5.0, auto_extend=False) for _ in range(2)]
    for reader in readers:
        assert await reader.acquire(timeout=30.0)
    writer = rw.write(ttl=5.0, auto_extend=False)
    # From another task: this one holds read grants (an upgrade is refused).
    assert not await asyncio.ensure_future(writer.acquire(blocking=False))
    for reader in readers:
        await reader.release()
    assert await asyncio.ensure_future(writer.acquire(timeout=30.0))
    await writer.release()


async def test_a_dead_node_costs_one_vote(
    tls_redlock: Redlock, tls_servers: list[TlsServer]
) -> None:
    tls_servers[2].kill()
    lock = tls_redlock.lock("job", ttl=5.0, auto_extend=False)
    assert await lock.acquire(timeout=30.0)  # two votes of three
    await lock.release()
    tls_servers[1].kill()
    lock = tls_redlock.lock("job", ttl=5.0, auto_extend=False)
    assert not await lock.acquire(blocking=False)
    assert all(name.startswith("rediss://") for name in tls_redlock.nodes)
    dead = set(tls_redlock.nodes[1:])
    assert set(lock.errors) == dead
    for error in lock.errors.values():  # a client passed in may retry until the node_timeout
        assert isinstance(error, NodeConnectionError | NodeTimeoutError), repr(error)


def _urls(servers: list[TlsServer], query: str) -> list[str]:
    return [f"rediss://127.0.0.1:{server.port}/0?{query}" for server in servers]


async def _refused_by_every_node(urls: list[str]) -> dict[str, NodeError]:
    async with Redlock(urls) as redlock:
        lock = redlock.lock("job", ttl=5.0, auto_extend=False)
        assert not await lock.acquire(blocking=False)
        # Decided once two votes failed: the third node's error may not be in.
        assert len(lock.errors) >= 2
        assert set(lock.errors) <= set(redlock.nodes)
        return dict(lock.errors)


async def test_a_server_signed_by_another_ca_is_refused_per_node(
    tls_servers: list[TlsServer], tmp_path: Path
) -> None:
    stranger = Certificates.make(tmp_path / "other-ca")
    errors = await _refused_by_every_node(_urls(tls_servers, stranger.url_query()))
    for name, error in errors.items():
        assert isinstance(error, NodeConnectionError)
        assert str(error).startswith(name)
        assert "certificate verify failed" in str(error)
        assert isinstance(error.__cause__, Exception)  # the driver's own exception
    assert all(keys(server) == [] for server in tls_servers)  # nothing ever reached them


async def test_the_host_name_is_checked(certificates: Certificates, tmp_path: Path) -> None:
    # Signed by the trusted CA, but for another host: refused all the same.
    elsewhere = Certificates.make(tmp_path / "elsewhere", hosts=["db.example.invalid"])
    servers = start([TlsServer(elsewhere) for _ in range(3)])
    try:
        errors = await _refused_by_every_node(_urls(servers, elsewhere.url_query()))
        for error in errors.values():
            assert "mismatch" in str(error), error  # "IP address mismatch, certificate is not…"
        # Checking turned off by the URL: the same servers grant the lock.
        query = elsewhere.url_query() + "&ssl_check_hostname=false"
        async with Redlock(_urls(servers, query)) as redlock:
            lock = redlock.lock("job", ttl=5.0, auto_extend=False)
            assert await lock.acquire(timeout=30.0)
            await lock.release()
    finally:
        for server in servers:
            server.stop()


async def test_mutual_tls_needs_the_client_certificate(certificates: Certificates) -> None:
    servers = start([TlsServer(certificates, client_certs=True) for _ in range(3)])
    try:
        # TLS 1.3 at least (772): any other parameter redis-py takes works the same way.
        urls = [server.url + "&ssl_min_version=772" for server in servers]
        async with Redlock(urls) as redlock:
            assert "ssl_certfile" in servers[0].url
            lock = redlock.lock("job", ttl=5.0, auto_extend=False)
            assert await lock.acquire(timeout=30.0)
            await lock.release()
        without = _urls(servers, certificates.url_query(client_cert=False))
        errors = await _refused_by_every_node(without)
        assert all(isinstance(error, NodeError) for error in errors.values())
    finally:
        for server in servers:
            server.stop()


async def test_the_command_line_reads_tls_urls(tls_servers: list[TlsServer]) -> None:
    async with Redlock([server.url for server in tls_servers]) as redlock:
        lock = redlock.lock("job", ttl=30.0, auto_extend=False)
        assert await lock.acquire(timeout=30.0)
        urls = [arg for server in tls_servers for arg in ("--url", server.url)]
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "redlock_async", "status", "job", "--json", *urls,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=dict(os.environ),
        )  # fmt: skip
        out, err = await process.communicate()
        await lock.release()
    assert "unsupported" not in err.decode()
    report = json.loads(out)
    assert [row.get("error") for row in report["nodes"]] == [None] * 3, report
    assert all(row["exclusive"] for row in report["nodes"]), report
