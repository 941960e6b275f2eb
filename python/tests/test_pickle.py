"""A sandbox handle crosses process boundaries (Ray, multiprocessing) as its id and cluster URL,
never the key; the worker re-attaches with its own key."""
from __future__ import annotations

import pickle
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

import warren
from cluster import Cluster

# The worker: reads a pickled handle on stdin, attaches with WARREN_URL/WARREN_TOKEN (its own
# key), runs a command in the sandbox and prints what came back, or the error's code.
WORKER = r"""
import pickle, sys
import warren
ref = pickle.loads(sys.stdin.buffer.read())
print("ref", type(ref).__name__, ref.id, ref.url)
try:
    with warren.Client.connect() as client:
        sb = client.attach(ref)
        r = sb.exec(["/bin/sh", "-c", "echo worker-was-here > /tmp/worker; cat /tmp/worker"])
        print("exec", r.exit_code, r.stdout.strip())
except warren.WarrenError as e:
    print("error", e.code)
"""
WORKER_TIMEOUT_S = 60


@pytest.fixture
def sandbox(client: Any) -> Iterator[Any]:
    sb = client.create(backend="container", ttl_ms=120_000, labels={"test": "pickle"})
    try:
        yield sb
    finally:
        sb.kill()


def run_worker(cluster: Cluster, handle_bytes: bytes, token: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", WORKER], input=handle_bytes, env=cluster.env(token),
                          capture_output=True, timeout=WORKER_TIMEOUT_S)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return done.stdout.decode().splitlines()


def test_a_pickled_handle_holds_its_id_and_url_and_no_key(cluster: Cluster, sandbox: Any) -> None:
    data = pickle.dumps(sandbox)
    assert cluster.token.encode() not in data
    assert cluster.admin_token.encode() not in data
    ref = pickle.loads(data)
    assert isinstance(ref, warren.SandboxRef)
    assert (ref.id, ref.url) == (sandbox.id, cluster.url)


def test_a_pickled_handle_is_reattached_in_another_process_with_the_workers_own_key(cluster: Cluster, client: Any, sandbox: Any) -> None:
    worker_key = cluster.key("py-a")  # the same tenant, a key of the worker's own
    assert worker_key != cluster.token
    lines = run_worker(cluster, pickle.dumps(sandbox), worker_key)
    assert lines == [f"ref SandboxRef {sandbox.id} {cluster.url}", "exec 0 worker-was-here"]
    # What the worker did is in the very sandbox this process holds.
    assert sandbox.files.read("/tmp/worker") == b"worker-was-here\n"


def test_another_tenants_worker_cannot_use_a_pickled_handle(cluster: Cluster, sandbox: Any) -> None:
    lines = run_worker(cluster, pickle.dumps(sandbox), cluster.key("py-pickle-stranger"))
    assert lines[1:] == ["error WARREN_ERR_NOT_FOUND"]
    assert sandbox.exec("cat /tmp/worker 2>/dev/null || echo untouched").stdout == "untouched\n"


def test_a_pickled_handle_of_an_ended_sandbox_attaches_and_says_gone(cluster: Cluster, client: Any) -> None:
    sb = client.create(backend="container", ttl_ms=60_000)
    data = pickle.dumps(sb)
    sb.kill()
    again = client.attach(pickle.loads(data))
    assert again.state == "gone"
    with pytest.raises(warren.SandboxGoneError):
        again.exec("true")


async def test_an_async_handle_pickles_the_same_and_reattaches(cluster: Cluster, async_client: Any) -> None:
    sb = await async_client.create(backend="container", ttl_ms=60_000)
    try:
        ref = pickle.loads(pickle.dumps(sb))
        assert ref == warren.SandboxRef(sb.id, cluster.url)
        again = await ref.attach(async_client)
        assert (await again.exec("echo again")).stdout == "again\n"
    finally:
        await sb.kill()
