"""Durable trajectories through the Python SDK on container sandboxes of a real `warren up`: read
back after kill, a trajectory is what was run (argv, env, cwd, stdin, exit codes, outputs by
sha256, file steps); a large output is read from the blob store in ranges; `steps()` pages on
past one page; the sync twins of the same."""
from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import pytest

import warren
from support import completed, completed_sync, label

SPEC: dict[str, Any] = {"backend": "container", "ttl_ms": 120_000, "limits": {"memory_mib": 128, "cpus": 0.5}}


def sha(b: bytes | str) -> str:
    return hashlib.sha256(b.encode() if isinstance(b, str) else b).hexdigest()


@pytest.mark.deadline(60)
async def test_after_kill_the_trajectory_is_what_was_run(async_client: warren.AsyncClient) -> None:
    mine = label()
    sb = await async_client.create(**SPEC, labels=mine)
    try:
        first = await sb.exec(["sh", "-c", "cat; echo oops >&2; pwd; echo $FOO; exit 3"], env={"FOO": "bar"}, cwd="/tmp",
                              stdin="line one\n")
        second = await sb.exec("echo two")
        big = await sb.exec(["seq", "1", "40000"])  # ~230 KB: more than a step keeps inline
        await sb.files.mkdir("/work")
        await sb.files.write("/work/a.txt", "hello file")
        await sb.files.rename("/work/a.txt", "/work/b.txt")
        await sb.files.remove("/work", recursive=True)
    finally:
        await sb.kill()

    page = await async_client.trajectory(sb.id)
    assert page.header is not None and page.header.sandbox_id == sb.id and page.header.layers == ["busybox"]
    assert page.header.spec["backend"] == "container" and page.header.spec["labels"] == mine
    steps = await completed(async_client, sb.id)
    assert [s.kind for s in steps] == ["exec", "exec", "exec", "mkdir", "write", "rename", "remove"]
    assert [s.seq for s in steps] == list(range(7))
    e0, e1, e2 = steps[0], steps[1], steps[2]
    assert isinstance(e0, warren.ExecStep) and isinstance(e1, warren.ExecStep) and isinstance(e2, warren.ExecStep)
    assert e0.argv == ["sh", "-c", "cat; echo oops >&2; pwd; echo $FOO; exit 3"]
    assert (e0.env, e0.cwd, e0.exit_code) == ({"FOO": "bar"}, "/tmp", 3)
    assert e0.ended and e0.stdin is not None and e0.stdin.data == b"line one\n"
    assert e0.stdout is not None and e0.stdout.sha256 == sha(first.stdout_bytes) and e0.stdout.data == first.stdout_bytes
    assert e0.stderr is not None and e0.stderr.data == b"oops\n"
    assert (e1.argv, e1.exit_code, e1.stdout.sha256 if e1.stdout else None) == (["/bin/sh", "-c", "echo two"], 0,
                                                                               sha(second.stdout_bytes))
    assert e2.stdout is not None and e2.stdout.bytes == len(big.stdout_bytes) and e2.stdout.sha256 == sha(big.stdout_bytes)
    assert e2.stdout.data is None and e2.stdout.blob is not None and e2.stdout.whole
    assert await async_client.recorded(sb.id, e2.stdout) == big.stdout_bytes
    # Without the size the blob is read in ranges to its end; a digest it does not reference is refused.
    assert await async_client.trajectory_blob(sb.id, e2.stdout.blob) == big.stdout_bytes
    with pytest.raises(warren.NotFoundError) as e:
        await async_client.trajectory_blob(sb.id, "sha256:" + "0" * 64)
    assert e.value.field == "digest"
    write = steps[4]
    assert isinstance(write, warren.WriteStep) and write.path == "/work/a.txt" and write.content.data == b"hello file"
    assert write.content.sha256 == sha("hello file")
    rename = steps[5]
    assert isinstance(rename, warren.RenameStep) and (rename.src, rename.dst) == ("/work/a.txt", "/work/b.txt")
    remove = steps[6]
    assert isinstance(remove, warren.RemoveStep) and remove.recursive


@pytest.mark.deadline(60)
async def test_steps_pages_on_past_one_page_in_order_without_gaps(async_client: warren.AsyncClient) -> None:
    n = 230  # more than one page (200 steps)
    sb = await async_client.create(**SPEC, labels=label())
    try:
        gate = asyncio.Semaphore(16)

        async def one(i: int) -> None:
            async with gate:
                assert (await sb.exec(["echo", str(i)])).exit_code == 0

        await asyncio.gather(*(one(i) for i in range(n)))
        first = await sb.trajectory()
        assert len(first.steps) == 200 and first.next_seq == 200, "a page holds at most 200 steps"
    finally:
        await sb.kill()
    steps = await completed(async_client, sb.id)
    assert [s.seq for s in steps] == list(range(n))
    echoed = sorted(int(s.argv[1]) for s in steps if isinstance(s, warren.ExecStep))
    assert echoed == list(range(n))
    assert all(isinstance(s, warren.ExecStep) and s.stdout is not None and s.stdout.data == f"{s.argv[1]}\n".encode()
               for s in steps)


@pytest.mark.deadline(60)
def test_the_sync_client_reads_a_trajectory_its_steps_and_recorded_bytes(client: warren.Client) -> None:
    sb = client.create(**SPEC, labels=label())
    try:
        r = sb.exec("echo sync && exit 5")
        sb.files.write("/f", b"\x00\x01")
        live = sb.trajectory()
        assert live.header is not None and live.header.sandbox_id == sb.id and not live.complete
    finally:
        sb.kill()
    completed_sync(client, sb.id)
    steps = list(client.steps(sb.id))
    assert [s.kind for s in steps] == ["exec", "write"]
    ex, wr = steps
    assert isinstance(ex, warren.ExecStep) and ex.exit_code == 5 and ex.stdout is not None
    assert ex.stdout.sha256 == sha(r.stdout_bytes) and client.recorded(sb.id, ex.stdout) == b"sync\n"
    assert isinstance(wr, warren.WriteStep) and client.recorded(sb.id, wr.content) == b"\x00\x01"
    assert client.trajectory(sb.id, from_seq=1).header is None
