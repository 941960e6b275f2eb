"""sandbox.files against a real container sandbox: round trips, directory ops, trees, refusals."""
from __future__ import annotations

import asyncio
import gc
import hashlib
import os
import tempfile

import pytest

import warren
from test_client_exec import with_sandbox


def test_write_and_read_a_file_larger_than_a_chunk_byte_exact(cluster):
    async def fn(c, sb):
        data = os.urandom(3 * 1024 * 1024 + 17)
        info = await sb.files.write("/srv/dir/blob.bin", data, mode=0o640)
        assert (info.size, info.sha256) == (len(data), hashlib.sha256(data).hexdigest())
        assert await sb.files.read("/srv/dir/blob.bin") == data
        st = await sb.files.stat("/srv/dir/blob.bin")
        assert (st.type, st.size, st.mode & 0o777) == ("file", len(data), 0o640)
        await sb.files.write("/srv/t.txt", "héllo")
        assert await sb.files.read_text("/srv/t.txt") == "héllo"
        await sb.files.write("/srv/empty", b"")
        assert await sb.files.read("/srv/empty") == b""
    with_sandbox(cluster, fn)


def test_directory_operations(cluster):
    async def fn(c, sb):
        await sb.files.mkdir("/w/a/b", parents=True)
        await sb.files.write("/w/a/b/f", b"1")
        assert [e.path for e in await sb.files.list("/w/a/b")] == ["/w/a/b/f"]
        await sb.files.rename("/w/a/b/f", "/w/a/g")
        assert await sb.files.exists("/w/a/g") and not await sb.files.exists("/w/a/b/f")
        with pytest.raises(warren.WarrenError):
            await sb.files.remove("/w/a")  # not empty
        await sb.files.remove("/w/a", recursive=True)
        assert not await sb.files.exists("/w/a")
        with pytest.raises(warren.NotFoundError):
            await sb.files.stat("/nope")
        with pytest.raises(warren.InvalidArgumentError) as e:
            await sb.files.read("/w")
        assert e.value.field == "path"
        with pytest.raises(warren.InvalidArgumentError) as e:
            await sb.files.stat("a\0b")
        assert e.value.field == "path"
    with_sandbox(cluster, fn)


def test_upload_and_download_a_tree_keep_modes_and_symlinks(cluster):
    async def fn(c, sb):
        with tempfile.TemporaryDirectory() as src, tempfile.TemporaryDirectory() as dst:
            os.makedirs(os.path.join(src, "pkg", "sub"))
            with open(os.path.join(src, "pkg", "run.sh"), "w") as f:
                f.write("#!/bin/sh\necho ran\n")
            os.chmod(os.path.join(src, "pkg", "run.sh"), 0o755)
            with open(os.path.join(src, "pkg", "sub", "data"), "wb") as f:
                f.write(os.urandom(100_000))
            os.symlink("run.sh", os.path.join(src, "pkg", "link"))
            await sb.files.upload(src, "/srv/tree")
            assert (await sb.exec("/srv/tree/pkg/link")).stdout == "ran\n"
            assert (await sb.files.stat("/srv/tree/pkg/link")).type == "symlink"
            out = os.path.join(dst, "copy")
            await sb.files.download("/srv/tree", out)
            assert os.readlink(os.path.join(out, "pkg", "link")) == "run.sh"
            assert os.stat(os.path.join(out, "pkg", "run.sh")).st_mode & 0o777 == 0o755
            with open(os.path.join(src, "pkg", "sub", "data"), "rb") as a, open(os.path.join(out, "pkg", "sub", "data"), "rb") as b:
                assert a.read() == b.read()
    with_sandbox(cluster, fn)


def test_an_upload_past_the_sandboxs_disk_raises_quota_naming_it_and_leaves_no_task_unretrieved(cluster):
    async def fn(c, sb):
        small = await c.create(backend="container", limits={"disk_mib": 16}, labels=sb.labels)
        unretrieved: list[object] = []
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _loop, ctx: unretrieved.append(ctx.get("message")))
        try:
            with tempfile.TemporaryDirectory() as src:
                with open(os.path.join(src, "big.bin"), "wb") as f:
                    f.write(b"\7" * (40 * 1024 * 1024))
                with pytest.raises(warren.QuotaError) as e:
                    await small.files.upload(src, "/repo")
                assert e.value.field == "limits.diskMiB"
                with pytest.raises(warren.QuotaError):
                    await small.files.write("/one.bin", b"\7" * (40 * 1024 * 1024))
            # Chunks that failed together were all retrieved: nothing is left for the loop to report.
            await asyncio.sleep(0)
            gc.collect()
            await asyncio.sleep(0)
            assert unretrieved == []
            assert (await small.exec("echo alive")).stdout == "alive\n"
        finally:
            loop.set_exception_handler(None)
            await small.kill()
    with_sandbox(cluster, fn)


def test_names_that_are_not_utf8_keep_their_bytes_in_every_call_and_both_ways_as_trees(cluster):
    # Before, one such name failed a whole download, and such a file could not be read at all.
    async def fn(c, sb):
        made = await sb.exec("mkdir -p /t && printf x > \"/t/caf$(printf '\\351')\" && ln -s \"caf$(printf '\\351')\" /t/link")
        assert made.exit_code == 0, made.stderr
        names = sorted(e.name for e in await sb.files.list("/t"))
        assert names == ["caf\udce9", "link"]  # as os.fsdecode(b"caf\xe9") gives it
        assert (await sb.files.stat("/t/link")).target == "caf\udce9"
        assert await sb.files.read("/t/caf\udce9") == b"x"
        await sb.files.write(b"/t/new\xfe", b"z")  # bytes work as a path too
        await sb.files.rename("/t/new\udcfe", "/t/re\udcfd")
        assert (await sb.exec("cat \"/t/re$(printf '\\375')\"")).stdout == "z"
        with tempfile.TemporaryDirectory() as src, tempfile.TemporaryDirectory() as dst:
            out = os.path.join(dst, "down")
            await sb.files.download("/t", out)
            assert sorted(os.listdir(os.fsencode(out))) == [b"caf\xe9", b"link", b"re\xfd"]
            assert os.readlink(os.path.join(os.fsencode(out), b"link")) == b"caf\xe9"
            with open(os.path.join(os.fsencode(out), b"caf\xe9"), "rb") as f:
                assert f.read() == b"x"
            os.makedirs(os.path.join(os.fsencode(src), b"sub\x80"))
            with open(os.path.join(os.fsencode(src), b"sub\x80", b"na\xefve"), "wb") as f:
                f.write(b"naive")
            os.symlink(b"sub\x80", os.path.join(os.fsencode(src), b"ln"))
            await sb.files.upload(src, "/u")
            seen = await sb.exec("cat \"/u/sub$(printf '\\200')/na$(printf '\\357')ve\"; readlink /u/ln | od -An -tx1 | tr -d ' \\n'")
            assert seen.stdout == "naive737562800a", seen.stderr  # the link's target: b"sub\x80\n"
    with_sandbox(cluster, fn)
