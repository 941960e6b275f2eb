"""Replay and restore through the Python SDK on container sandboxes of a real `warren up`: a
deterministic trajectory replays without divergence in a new sandbox that keeps its files; a
command whose output is random diverges there (by output, not by exit code); `up_to` stops early;
restore brings an ended sandbox back under its id from its snapshot; the sync twins."""
from __future__ import annotations

from typing import Any

import pytest

import warren
from support import completed, completed_sync, label

SPEC: dict[str, Any] = {"backend": "container", "ttl_ms": 120_000, "limits": {"memory_mib": 128, "cpus": 0.5},
                        "deterministic": True}


async def ran(c: warren.AsyncClient, mine: dict[str, str], *commands: str) -> str:
    """A sandbox that wrote a file and ran ``commands``, killed once its trajectory is complete: its id."""
    sb = await c.create(**SPEC, labels=mine)
    try:
        await sb.files.write("/work.txt", "written\n")
        for command in commands:
            await sb.exec(command)
    finally:
        await sb.kill()
    await completed(c, sb.id)
    return sb.id


@pytest.mark.deadline(60)
async def test_a_deterministic_trajectory_replays_without_divergence_in_a_new_sandbox(
        async_client: warren.AsyncClient) -> None:
    mine = label()
    try:
        sid = await ran(async_client, mine, "cat /work.txt", "echo $(hostname) $WARREN_SEED > /seed", "sh -c 'exit 2'")
        r = await async_client.replay(sid, spec={"labels": {**mine, "replay": "1"}})
        assert r.diverged_at is None and r.expected is None and r.actual is None, (r.expected, r.actual)
        assert r.steps == 4 and r.skipped == []
        assert isinstance(r.sandbox, warren.Sandbox) and r.sandbox.id != sid and r.sandbox.state == "ready"
        assert r.sandbox.labels.get("replay") == "1"
        assert (await r.sandbox.exec("cat /work.txt /seed")).stdout.startswith("written\nsandbox ")
        short = await async_client.replay(sid, up_to=1, spec={"labels": mine})
        assert short.steps == 2 and short.diverged_at is None
        assert (await short.sandbox.exec(["test", "-e", "/seed"])).exit_code == 1, "seq 2 was not applied"
        with pytest.raises(warren.InvalidArgumentError) as e:
            await async_client.replay(sid, compare="bytes")
        assert e.value.field == "compare"
    finally:
        await async_client.kill(labels=mine)


@pytest.mark.deadline(60)
async def test_a_random_output_diverges_by_output_and_not_by_exit_code(async_client: warren.AsyncClient) -> None:
    mine = label()
    try:
        sid = await ran(async_client, mine, "echo same", "cat /proc/sys/kernel/random/uuid", "echo after")
        r = await async_client.replay(sid, spec={"labels": mine})
        assert r.diverged_at == 2 and r.steps == 3, "the write, the echo, then the uuid differs"
        assert r.reason == "output" and r.skipped == []
        assert r.expected is not None and r.actual is not None
        assert r.expected.exit_code == r.actual.exit_code == 0
        assert r.expected.stdout is not None and r.actual.stdout is not None
        assert r.expected.stdout.sha256 != r.actual.stdout.sha256 and r.expected.stdout.bytes == 37
        assert len(r.actual.stdout.head) == 37
        by_exit = await async_client.replay(sid, compare="exit", spec={"labels": mine})
        assert by_exit.diverged_at is None and by_exit.steps == 4
    finally:
        await async_client.kill(labels=mine)


@pytest.mark.deadline(60)
async def test_restore_brings_an_ended_sandbox_back_under_its_id_from_its_snapshot(async_client: warren.AsyncClient) -> None:
    mine = label()
    sb = await async_client.create(**SPEC, labels=mine)
    try:
        await sb.files.write("/before", "1")
        snap = await sb.snapshot()
        await sb.exec("echo 2 > /after")
    finally:
        await sb.kill()
    try:
        await completed(async_client, sb.id)
        r = await async_client.restore(sb.id)
        assert r.sandbox.id == sb.id and r.sandbox.state == "ready" and r.snapshot == snap.id
        assert r.replayed == 1 and r.matched and r.diverged_at is None
        assert (await r.sandbox.exec("cat /before /after")).stdout == "12\n"
    finally:
        await async_client.kill(labels=mine)


@pytest.mark.deadline(60)
def test_the_sync_client_replays_and_restores(client: warren.Client) -> None:
    mine = label()
    sb = client.create(**SPEC, labels=mine)
    try:
        sb.exec("echo sync > /f")
    finally:
        sb.kill()
    try:
        completed_sync(client, sb.id)
        r = client.replay(sb.id, spec={"labels": mine})
        assert r.diverged_at is None and isinstance(r.sandbox, warren.SyncSandbox)
        assert r.sandbox.exec("cat /f").stdout == "sync\n"
        back = client.restore(sb.id)
        assert back.sandbox.id == sb.id and back.snapshot is None and back.replayed == 1 and back.matched
    finally:
        client.kill(labels=mine)
