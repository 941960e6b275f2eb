"""The Python SDK against a control plane served over TLS (`warren up --tls-cert F --tls-key F`):
sync and async clients given the CA create a container sandbox and run a command over wss://;
a client with the wrong CA, or a plain ws:// URL at the TLS port, is refused at once naming TLS.
The certificates are made with openssl in a temporary directory, removed after."""
from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import warren
from cluster import Cluster, start_cluster, stop_cluster


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


@pytest.fixture(scope="module")
def certs() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="warren-py-tls-"))
    try:
        for ca in ("ca", "wrong-ca"):
            _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={ca}",
                     "-keyout", f"{ca}.key", "-out", f"{ca}.pem", "-addext", "basicConstraints=critical,CA:TRUE", cwd=d)
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout", "server.key", "-out", "server.csr", cwd=d)
        (d / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n")
        _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2",
                 "-extfile", "server.ext", "-out", "server.pem", cwd=d)
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def tls_cluster(certs: Path) -> Iterator[Cluster]:
    c = start_cluster(("--tls-cert", str(certs / "server.pem"), "--tls-key", str(certs / "server.key"),
                       "--ca", str(certs / "ca.pem")), tenant_key=False)
    try:
        yield c
    finally:
        stop_cluster(c)


@pytest.mark.deadline(120)
def test_sync_client_over_wss_creates_a_container_and_execs(tls_cluster: Cluster, certs: Path) -> None:
    assert tls_cluster.url.startswith("wss://127.0.0.1:")
    with warren.Client.connect(tls_cluster.url, tls_cluster.token, ca=certs / "ca.pem") as c:
        sb = c.create(backend="container", ttl_ms=60_000)
        try:
            r = sb.exec(["sh", "-c", "echo over tls"])
            assert r.exit_code == 0, r.stderr
            assert r.stdout == b"over tls\n" or r.stdout == "over tls\n"
        finally:
            sb.kill()


@pytest.mark.deadline(120)
async def test_async_client_over_wss_with_the_ca_as_pem_text(tls_cluster: Cluster, certs: Path) -> None:
    pem = (certs / "ca.pem").read_text()
    async with await warren.AsyncClient.connect(tls_cluster.url, tls_cluster.token, ca=pem) as c:
        sb = await c.create(backend="container", ttl_ms=60_000)
        try:
            r = await sb.exec(["echo", "async tls"])
            assert r.exit_code == 0
            assert "async tls" in (r.stdout if isinstance(r.stdout, str) else r.stdout.decode())
        finally:
            await sb.kill()


@pytest.mark.deadline(60)
def test_wrong_ca_and_plain_ws_are_refused_at_once(tls_cluster: Cluster, certs: Path) -> None:
    plain = tls_cluster.url.replace("wss:", "ws:", 1)
    for url, ca, cause in ((tls_cluster.url, certs / "wrong-ca.pem", None), (plain, None, "TLS_REQUIRED")):
        started = time.monotonic()
        with pytest.raises(warren.ConnectionClosedError) as info:
            warren.Client.connect(url, tls_cluster.token, ca=ca, connect_timeout_s=20)
        assert time.monotonic() - started < 10, "retried instead of refused"
        assert info.value.details["reason"] == "tls"
        if cause is not None:
            assert info.value.details["cause"] == cause
        else:
            assert "not trusted" in str(info.value)


def test_an_unreadable_ca_is_refused_naming_the_field(tls_cluster: Cluster, certs: Path) -> None:
    with pytest.raises(warren.InvalidArgumentError) as info:
        warren.Client.connect(tls_cluster.url, tls_cluster.token, ca=certs / "missing.pem")
    assert info.value.details["field"] == "ca"
