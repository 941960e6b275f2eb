"""Snapshots, fork, pause/resume and hibernate through the Python SDK, on container sandboxes of a
real `warren up`: a file written before a fork is in every fork and a change in one is in no
other; a paused sandbox refuses commands naming its state and goes on after resume; a hibernated
one comes back on attach with its files; the sync client's twins of the same."""
from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

import warren
from support import completed, label

SPEC: dict[str, Any] = {"backend": "container", "ttl_ms": 120_000, "limits": {"memory_mib": 128, "cpus": 0.25}}
SNAP_ID = re.compile(r"^snap-[0-9a-z]{16}$")


async def cat(sb: warren.Sandbox, path: str) -> str:
    return (await sb.exec(["cat", path])).stdout


@pytest.mark.deadline(90)
async def test_a_file_written_before_a_fork_is_in_each_of_three_forks_and_a_change_in_one_is_in_no_other(
        async_client: warren.AsyncClient) -> None:
    mine = label()
    sb = await async_client.create(**SPEC, labels=mine)
    try:
        assert (await sb.exec("mkdir -p /work && echo before > /work/f")).exit_code == 0
        r = await sb.fork(3, labels={"fork": "yes"})
        assert [o.ok for o in r.outcomes] == [True] * 3, [o.error for o in r.outcomes]
        forks = r.sandboxes
        assert len({f.id for f in forks} | {sb.id}) == 4
        assert isinstance(r.snapshot, warren.SnapshotView) and SNAP_ID.match(r.snapshot.id)
        assert r.snapshot.sandbox_id == sb.id and r.snapshot.backend == "container"
        assert r.snapshot.layers[0] == "busybox" and r.snapshot.layers[-1].startswith("sha256:")
        for f in forks:
            assert isinstance(f, warren.Sandbox) and f.state == "ready"
            assert f.labels == {**mine, "fork": "yes"}, "the fork's labels are laid over the sandbox's"
            assert await cat(f, "/work/f") == "before\n"
        assert (await forks[0].exec("echo changed > /work/f && echo mine > /work/g")).exit_code == 0
        assert await cat(forks[0], "/work/f") == "changed\n"
        for other in [sb, *forks[1:]]:
            assert await cat(other, "/work/f") == "before\n"
            assert (await other.exec(["test", "-e", "/work/g"])).exit_code == 1
        assert [s.id for s in await async_client.snapshots(sandbox_id=sb.id)] == [r.snapshot.id]
        fork_page = await async_client.trajectory(forks[1].id)
        assert fork_page.header is not None and fork_page.header.snapshot == r.snapshot.id
        assert fork_page.header.layers == r.snapshot.layers
    finally:
        await async_client.kill(labels=mine)
    cut = [s for s in await completed(async_client, sb.id) if isinstance(s, warren.SnapshotStep)]
    assert [(s.snapshot, s.layer) for s in cut] == [(r.snapshot.id, r.snapshot.layers[-1])]


@pytest.mark.deadline(60)
async def test_a_named_snapshot_creates_a_sandbox_with_its_files_and_is_deleted_by_name(
        async_client: warren.AsyncClient) -> None:
    mine = label()
    sb = await async_client.create(**SPEC, labels=mine)
    name = f"py-{mine['test']}:v1"
    try:
        await sb.files.write("/kept", "from the snapshot")
        snap = await sb.snapshot(name=name)
        assert snap.name == name and snap.bytes > 0 and snap.parent is None
        made = await async_client.create(snapshot=name, labels={**mine, "made": "1"})
        assert await cat(made, "/kept") == "from the snapshot"
        assert made.view.backend == "container"
        assert await async_client.delete_snapshot(name) == snap.id
        assert snap.id not in [s.id for s in await async_client.snapshots()]
        with pytest.raises(warren.NotFoundError) as e:
            await async_client.delete_snapshot(name)
        assert e.value.field == "id"
        with pytest.raises(warren.BadSpecError) as bad:
            await async_client.create(snapshot=snap.id)
        assert bad.value.field == "snapshot"
        with pytest.raises(warren.InvalidArgumentError) as count:
            await sb.fork(0)
        assert count.value.field == "count"
    finally:
        await async_client.kill(labels=mine)


@pytest.mark.deadline(60)
async def test_a_paused_sandbox_refuses_exec_and_files_naming_its_state_and_goes_on_after_resume(
        async_client: warren.AsyncClient) -> None:
    sb = await async_client.create(**SPEC, labels=label())
    try:
        await sb.files.write("/f", "x")
        view = await sb.pause()
        assert view.state == "paused" and sb.state == "paused"
        with pytest.raises(warren.SandboxPausedError) as e:
            await sb.exec("true")
        assert e.value.state == "paused" and e.value.details.get("id") == sb.id
        assert e.value.code == "WARREN_ERR_SANDBOX_PAUSED"
        with pytest.raises(warren.SandboxPausedError):
            await sb.files.read("/f")
        assert (await sb.info()).state == "paused"
        assert (await sb.pause()).state == "paused", "pausing a paused sandbox is not an error"
        assert (await sb.resume()).state == "ready" and sb.state == "ready"
        assert (await sb.exec("cat /f")).stdout == "x"
    finally:
        await sb.kill()
    steps = await completed(async_client, sb.id)
    assert [s.kind for s in steps] == ["write", "pause", "resume", "exec"], "refused commands are not steps"
    assert isinstance(steps[1], warren.PauseStep) and isinstance(steps[2], warren.ResumeStep)


@pytest.mark.deadline(60)
async def test_deterministic_and_paused_ttl_reach_the_sandbox_in_snake_case(async_client: warren.AsyncClient) -> None:
    sb = await async_client.create(**SPEC, labels=label(), paused_ttl=False,
                                   deterministic={"tz": "Europe/Paris", "source_date_epoch": 7, "seed": 42})
    try:
        r = await sb.exec('echo "$(hostname) $TZ $SOURCE_DATE_EPOCH $WARREN_SEED $PYTHONHASHSEED $LANG"')
        assert r.stdout == "sandbox Europe/Paris 7 42 42 C.UTF-8\n"
        before = (await sb.pause()).expires_at
        await asyncio.sleep(0.3)
        after = (await sb.resume()).expires_at
        assert after - before >= 250, "paused time does not count against the TTL"
    finally:
        await sb.kill()


@pytest.mark.deadline(90)
async def test_hibernate_then_attach_resumes_it_with_the_same_id_and_its_files(async_client: warren.AsyncClient,
                                                                                 cluster: Any) -> None:
    sb = await async_client.create(**SPEC, labels=label())
    try:
        await sb.exec("echo kept > /state")
        view = await sb.hibernate()
        assert view.state == "hibernated" and view.snapshot is not None and SNAP_ID.match(view.snapshot)
        assert sb.state == "hibernated"
        with pytest.raises(warren.SandboxPausedError) as e:
            await sb.exec("true")
        assert e.value.state == "hibernated"
        assert [v.id for v in await async_client.list(state="hibernated")] == [sb.id]
        async with await warren.AsyncClient.connect(cluster.url, cluster.token) as other:
            back = await other.attach(sb.id)
            assert back.id == sb.id and back.state == "ready" and back.view.snapshot is None
            assert await cat(back, "/state") == "kept\n"
        assert (await sb.info()).state == "ready"
        assert await cat(sb, "/state") == "kept\n", "the first handle works again too"
    finally:
        await sb.kill()


@pytest.mark.deadline(90)
def test_the_sync_client_snapshots_forks_pauses_and_hibernates(client: warren.Client) -> None:
    mine = label()
    sb = client.create(**SPEC, labels=mine)
    try:
        sb.exec("echo one > /f")
        r = client.attach(sb.id).fork(2, spec={"labels": {"twin": "sync"}})
        assert len(r.sandboxes) == 2 and all(isinstance(f, warren.SyncSandbox) for f in r.sandboxes)
        assert [f.exec("cat /f").stdout for f in r.sandboxes] == ["one\n", "one\n"]
        assert r.sandboxes[0].labels["twin"] == "sync"
        snap = sb.snapshot()
        assert [s.id for s in client.snapshots(sandbox_id=sb.id)] == [snap.id, r.snapshot.id]
        assert sb.pause().state == "paused"
        with pytest.raises(warren.SandboxPausedError):
            sb.exec("true")
        assert sb.resume().state == "ready"
        assert sb.hibernate().state == "hibernated"
        back = client.attach(sb.id)
        assert back.state == "ready" and back.exec("cat /f").stdout == "one\n"
        assert client.delete_snapshot(snap.id) == snap.id
    finally:
        client.kill(labels=mine)
