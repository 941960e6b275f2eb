"""microvm sandboxes through the Python SDK on a real `warren up`, as a trainer meets them: a VM
runs its own kernel, takes stdin and files, and a memory fork goes on running the source's
processes (same pid) under a name of its own; the sync client's twin boots from the same shape.
Skipped where the node offers no microvm backend (no QEMU or guest kernel)."""
from __future__ import annotations

import os
from typing import Any

import pytest

import warren
from support import label

SPEC: dict[str, Any] = {"backend": "microvm", "ttl_ms": 300_000, "limits": {"memory_mib": 192, "cpus": 1, "disk_mib": 64}}
COUNTER = "(while true; do sleep 0.2; done) >/dev/null 2>&1 </dev/null & echo $!"


async def create_vm(client: warren.AsyncClient, **extra: Any) -> warren.Sandbox:
    try:
        return await client.create(**SPEC, **extra)
    except warren.UnsupportedError as e:
        if e.field == "backend":
            pytest.skip(f"no microvm backend here: {e.message}")
        raise


@pytest.mark.deadline(240)
async def test_a_vm_runs_its_own_kernel_takes_stdin_and_files_and_its_memory_forks_run_its_processes_on(
        async_client: warren.AsyncClient) -> None:
    mine = label()
    sb = await create_vm(async_client, labels=mine)
    try:
        kernel = (await sb.exec(["uname", "-r"])).stdout.strip()
        assert kernel and kernel != os.uname().release, "the guest's kernel, not the host's"
        assert (await sb.exec("wc -c", stdin=b"x" * 100_000)).stdout.strip() == "100000"
        data = os.urandom(3 * 1024 * 1024)
        await sb.files.write("/root/blob", data)
        assert await sb.files.read("/root/blob") == data
        pid = (await sb.exec(COUNTER)).stdout.strip()
        assert pid.isdigit()

        r = await sb.fork(2, labels={"fork": "yes"}, memory=True)
        assert [o.ok for o in r.outcomes] == [True, True], [o.error for o in r.outcomes]
        assert r.snapshot.backend == "microvm"
        for f in r.sandboxes:
            assert f.labels == {**mine, "fork": "yes"}
            assert (await f.exec(["hostname"])).stdout == f"{f.id}\n"
            assert (await f.exec(f"kill -0 {pid} && echo alive")).stdout == "alive\n", "the source's process runs on"
            assert await f.files.read("/root/blob") == data
        # A memory fork's machine is the saved one's: other limits are refused, naming them.
        with pytest.raises(warren.BadSpecError) as bad:
            await sb.fork(1, {"limits": {"memory_mib": 256}}, memory=True)
        assert bad.value.field == "limits"
    finally:
        await async_client.kill(labels=mine)


@pytest.mark.deadline(180)
def test_the_sync_client_runs_a_command_in_a_vm(client: warren.Client) -> None:
    mine = label()
    try:
        sb = client.create(**SPEC, labels=mine)
    except warren.UnsupportedError as e:
        if e.field == "backend":
            pytest.skip(f"no microvm backend here: {e.message}")
        raise
    try:
        r = sb.exec("echo $((6 * 7)); exit 3")
        assert (r.exit_code, r.stdout) == (3, "42\n")
    finally:
        client.kill(labels=mine)
