"""A socket killed mid-stream: the client reconnects, resumes from the last seq it took, and the
output it hands back is byte-exact; a start lost with its socket runs the command once."""
from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import pytest

import warren
from cluster import Cluster
from dropproxy import DropProxy

LINES = 400_000  # `seq 1 LINES` is ~2.7 MB: several pages, so a cut lands mid-stream
EXPECTED = "".join(f"{i}\n" for i in range(1, LINES + 1))
CUT_BYTES = 300 * 1024


@pytest.fixture
def proxy(cluster: Cluster) -> Iterator[DropProxy]:
    p = DropProxy(cluster.url)
    try:
        yield p
    finally:
        p.close()


@pytest.fixture
def via_proxy(cluster: Cluster, proxy: DropProxy) -> Iterator[Any]:
    """A sync client whose every socket goes through the proxy, and a sandbox of its own."""
    with warren.Client.connect(url=proxy.url, token=cluster.token) as c:
        sb = c.create(backend="container", ttl_ms=120_000, labels={"test": "resume"})
        try:
            yield sb
        finally:
            proxy.arm(0, drops=0)
            sb.kill()


@pytest.mark.deadline(120)
def test_exec_output_is_byte_exact_across_three_killed_sockets(proxy: DropProxy, via_proxy: Any) -> None:
    proxy.arm(CUT_BYTES, drops=3)
    r = via_proxy.exec(["seq", "1", str(LINES)])
    assert proxy.drops == 3, "the sockets were never cut: the test proved nothing"
    assert proxy.connections >= 4
    assert r.exit_code == 0
    assert len(r.stdout) == len(EXPECTED)
    assert r.stdout == EXPECTED


@pytest.mark.deadline(120)
def test_callbacks_see_every_byte_once_across_a_killed_socket(proxy: DropProxy, via_proxy: Any) -> None:
    seen: list[bytes | str] = []
    proxy.arm(CUT_BYTES, drops=1)
    r = via_proxy.exec(["seq", "1", str(LINES)], on_stdout=seen.append)
    assert proxy.drops == 1
    joined = "".join(s.decode() if isinstance(s, bytes) else s for s in seen)
    assert joined == EXPECTED
    assert r.stdout == EXPECTED


@pytest.mark.deadline(120)
def test_spawned_binary_output_is_byte_exact_across_killed_sockets(proxy: DropProxy, via_proxy: Any) -> None:
    assert via_proxy.exec("head -c 3000000 /dev/urandom > /tmp/blob").exit_code == 0
    want = via_proxy.exec("sha256sum /tmp/blob").stdout.split()[0]
    proxy.arm(CUT_BYTES, drops=2)
    proc = via_proxy.spawn(["cat", "/tmp/blob"])
    got = b"".join(chunk.data for chunk in proc if chunk.stream == "stdout")
    assert proc.wait().exit_code == 0
    assert proxy.drops == 2
    assert len(got) == 3_000_000
    assert hashlib.sha256(got).hexdigest() == want


@pytest.mark.deadline(120)
def test_an_exec_whose_answer_was_lost_with_its_socket_runs_once(proxy: DropProxy, via_proxy: Any) -> None:
    # The first bytes back after the exec request are its answer: cut them, the client sends
    # the same execId again, and the cluster answers with the command already running.
    proxy.arm(1, drops=1, after_request=True)
    r = via_proxy.exec("echo ran >> /tmp/runs; seq 1 1000")
    assert proxy.drops == 1
    assert r.stdout == "".join(f"{i}\n" for i in range(1, 1001))
    assert via_proxy.exec("cat /tmp/runs").stdout == "ran\n"


@pytest.mark.deadline(120)
async def test_async_exec_is_byte_exact_across_a_killed_socket(cluster: Cluster, proxy: DropProxy) -> None:
    async with await warren.AsyncClient.connect(url=proxy.url, token=cluster.token) as c:
        sb = await c.create(backend="container", ttl_ms=120_000)
        try:
            proxy.arm(CUT_BYTES, drops=2)
            r = await sb.exec(["seq", "1", str(LINES)])
            assert proxy.drops == 2
            assert r.stdout == EXPECTED
        finally:
            proxy.arm(0, drops=0)
            await sb.kill()
