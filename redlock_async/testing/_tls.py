"""Throwaway certificate authorities and ``redis-server`` nodes that speak TLS only.

``Certificates.make(directory)`` runs the ``openssl`` command-line tool to
create a CA, a server certificate for ``127.0.0.1`` and ``localhost`` (or the
names given) and a client certificate, all signed by that CA and valid for
two days. ``TlsServer`` is a :class:`RedisServer` that listens with TLS on its
port and nowhere else (``--port 0 --tls-port P``): every byte a test sends it
is encrypted, with the certificate verified.
"""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlencode

import redis

from ._server import AclUser, RedisServer

__all__ = ["Certificates", "TlsServer", "find_openssl"]

_DAYS = "2"


def find_openssl() -> str | None:
    """Path of the ``openssl`` binary, or None."""
    return shutil.which("openssl")


@dataclass(frozen=True)
class Certificates:
    """The files of one throwaway CA: its certificate, a server's and a client's (PEM)."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path

    @classmethod
    def make(
        cls, directory: Path, hosts: Sequence[str] = ("127.0.0.1", "localhost")
    ) -> Certificates:
        """A new CA in ``directory`` (created if missing), with a server
        certificate whose subject alternative names are ``hosts`` (IP addresses
        or DNS names) and a client certificate. Raises RuntimeError without
        ``openssl`` on PATH, CalledProcessError if it fails."""
        openssl = find_openssl()
        if openssl is None:
            raise RuntimeError("redlock_async.testing's TLS nodes need the openssl command")
        directory.mkdir(parents=True, exist_ok=True)

        def run(*args: str) -> None:
            subprocess.run([openssl, *args], check=True, capture_output=True, cwd=directory)

        # P-256 keys: made in milliseconds, where RSA takes a noticeable while.
        new_key = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
        run("req", "-x509", *new_key, "-keyout", "ca.key", "-out", "ca.pem", "-days", _DAYS,
            "-subj", "/CN=redlock_async throwaway test CA",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")  # fmt: skip
        names = ",".join(f"{'IP' if _is_ip(host) else 'DNS'}:{host}" for host in hosts)
        for who, usage, alt in (("server", "serverAuth", names), ("client", "clientAuth", "")):
            extensions = directory / f"{who}.ext"
            extensions.write_text(
                "basicConstraints=critical,CA:FALSE\n"
                "keyUsage=critical,digitalSignature,keyEncipherment\n"
                f"extendedKeyUsage={usage}\n"
                "subjectKeyIdentifier=hash\n"
                "authorityKeyIdentifier=keyid\n" + (f"subjectAltName={alt}\n" if alt else "")
            )
            run("req", *new_key, "-keyout", f"{who}.key", "-out", f"{who}.csr",
                "-subj", f"/CN=redlock_async test {who}")  # fmt: skip
            run("x509", "-req", "-in", f"{who}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", f"{who}.pem", "-days", _DAYS,
                "-extfile", extensions.name)  # fmt: skip
        return cls(
            ca=directory / "ca.pem",
            server_cert=directory / "server.pem",
            server_key=directory / "server.key",
            client_cert=directory / "client.pem",
            client_key=directory / "client.key",
        )

    def context(self) -> ssl.SSLContext:
        """A client-side context trusting this CA only, presenting the client certificate."""
        context = ssl.create_default_context(cafile=str(self.ca))
        context.load_cert_chain(str(self.client_cert), str(self.client_key))
        return context

    def url_query(self, *, client_cert: bool = False) -> str:
        """``ssl_ca_certs=…`` (and the client certificate's parameters) for a ``rediss://`` URL."""
        options = {"ssl_ca_certs": str(self.ca)}
        if client_cert:
            options |= {"ssl_certfile": str(self.client_cert), "ssl_keyfile": str(self.client_key)}
        return urlencode(options, quote_via=quote)


def _is_ip(host: str) -> bool:
    try:
        socket.inet_pton(socket.AF_INET6 if ":" in host else socket.AF_INET, host)
    except OSError:
        return False
    return True


class TlsServer(RedisServer):
    """A ``redis-server`` speaking TLS only, with ``certificates``' server certificate.

    ``client_certs=True`` makes the server require a client certificate
    signed by the same CA (mutual TLS). ``url`` verifies the server against
    the CA (``ssl_ca_certs``, hostname checked) and presents the client
    certificate when the server asks for one. The harness's own connections
    (readiness, shutdown, ``client()``) use TLS too.
    """

    def __init__(
        self,
        certificates: Certificates,
        port: int | None = None,
        *,
        client_certs: bool = False,
        extra_args: Sequence[str] = (),
        acl_users: Sequence[AclUser] = (),
        executable: str = "redis-server",
    ) -> None:
        super().__init__(port, extra_args=extra_args, acl_users=acl_users, executable=executable)
        self.certificates = certificates
        self.client_certs = client_certs

    @property
    def url(self) -> str:
        query = self.certificates.url_query(client_cert=self.client_certs)
        return f"rediss://127.0.0.1:{self.port}/0?{query}"

    def __repr__(self) -> str:
        return f"TlsServer(port={self.port}, pid={self.pid})"

    def client(self) -> redis.Redis:
        """A synchronous redis-py client over TLS, for a test to inspect the server."""
        return redis.Redis.from_url(self.url_for_harness())

    def url_for_harness(self) -> str:
        """The harness's own URL: the CA checked, not the host name (a test may
        give the server a certificate for another host), the client
        certificate always presented."""
        query = self.certificates.url_query(client_cert=True)
        return f"rediss://127.0.0.1:{self.port}/0?{query}&ssl_check_hostname=false"

    def _listen_args(self) -> list[str]:
        files = self.certificates
        return [
            "--port", "0",
            "--tls-port", str(self.port),
            "--tls-cert-file", str(files.server_cert),
            "--tls-key-file", str(files.server_key),
            "--tls-ca-cert-file", str(files.ca),
            "--tls-auth-clients", "yes" if self.client_certs else "no",
        ]  # fmt: skip

    def _open(self, port: int, timeout: float) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        context = self.certificates.context()
        context.check_hostname = False  # as url_for_harness: the CA is still checked
        try:
            return context.wrap_socket(sock, server_hostname="127.0.0.1")
        except BaseException:
            sock.close()
            raise
