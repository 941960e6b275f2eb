"""Commands: exec, spawn with stdin, output past the SDK's buffer, timeouts, kills, bad input."""
from __future__ import annotations

import asyncio
import hashlib

import pytest

import warren
from support import connect, label, run


def with_sandbox(cluster, fn, timeout_s=60.0):
    async def body():
        async with await connect(cluster) as c:
            sb = await c.create(backend="container", labels=label())
            try:
                await fn(c, sb)
            finally:
                await sb.kill()
    run(body, timeout_s)


def test_exec_returns_exit_code_stdout_stderr_and_streams_to_callbacks(cluster):
    async def fn(c, sb):
        seen = []
        r = await sb.exec("echo out; echo err >&2; exit 3", on_stdout=seen.append, on_stderr=seen.append)
        assert (r.exit_code, r.stdout, r.stderr, r.truncated, r.reason) == (3, "out\n", "err\n", False, None)
        assert b"".join(seen) in (b"out\nerr\n", b"err\nout\n")
        r = await sb.exec(["sh", "-c", 'printf "%s|%s" "$PWD" "$X"; cat'], cwd="/tmp", env={"X": "y"}, stdin="piped")
        assert r.stdout == "/tmp|ypiped"
        assert (await sb.exec(["id", "-u"], user="65534")).stdout.strip() == "65534"
    with_sandbox(cluster, fn)


def test_exec_timeout_and_output_cap_say_why(cluster):
    async def fn(c, sb):
        r = await sb.exec("sleep 10", timeout_ms=300)
        assert (r.exit_code, r.reason) == (124, "timeout")
        r = await sb.exec("head -c 100000 /dev/zero", max_output_bytes=1000)
        assert r.truncated and len(r.stdout_bytes) <= 1000
    with_sandbox(cluster, fn)


def test_spawn_iterates_output_and_takes_stdin_writes(cluster):
    async def fn(c, sb):
        p = sb.spawn(["sh", "-c", "cat; echo done >&2"], open_stdin=True)
        for i in range(3):
            await p.write(f"line {i}\n")
        await p.write(b"x" * 600_000)  # more than one stdin piece
        await p.close_stdin()
        out = bytearray()
        streams = set()
        async for chunk in p:
            streams.add(chunk.stream)
            if chunk.stream == "stdout":
                out += chunk.data
        assert bytes(out) == b"line 0\nline 1\nline 2\n" + b"x" * 600_000
        assert streams == {"stdout", "stderr"}
        assert (await p.wait()).exit_code == 0
        with pytest.raises(warren.InvalidArgumentError) as e:
            await sb.spawn("true").write("no")
        assert e.value.field == "open_stdin"
    with_sandbox(cluster, fn)


def test_output_past_the_sdk_buffer_arrives_whole_and_wait_answers_unread(cluster):
    async def fn(c, sb):
        # 6 MiB: more than the SDK buffers unasked (4 MiB), less than that plus what the node holds.
        size = 6 * 1024 * 1024
        p = sb.spawn(f"head -c {size} /dev/urandom | tee /tmp/out; sha256sum /tmp/out >/tmp/sum")
        # wait() answers although nobody has read the output yet: status reads learn the end.
        r = await asyncio.wait_for(p.wait(), 30)
        assert r.exit_code == 0
        digest = hashlib.sha256()
        n = 0
        async for chunk in p:
            if chunk.stream == "stdout":
                digest.update(chunk.data)
                n += len(chunk.data)
        assert n == size
        expected = (await sb.files.read_text("/tmp/sum")).split()[0]
        assert digest.hexdigest() == expected
    with_sandbox(cluster, fn, 90)


def test_kill_ends_a_running_command(cluster):
    async def fn(c, sb):
        p = sb.spawn("sleep 30")
        await p.kill()
        r = await asyncio.wait_for(p.wait(), 10)
        assert (r.exit_code, r.reason) == (137, "killed")
    with_sandbox(cluster, fn)


def test_output_resumes_byte_exact_across_a_dropped_socket(cluster):
    async def fn(c, sb):
        p = sb.spawn("i=0; while [ $i -lt 3000 ]; do echo line-$i; i=$((i+1)); done; sleep 1; echo tail")
        got = bytearray()
        dropped = False
        async for chunk in p:
            got += chunk.data
            if not dropped and len(got) > 1000:
                c.link.drop_socket()
                dropped = True
        want = "".join(f"line-{i}\n" for i in range(3000)) + "tail\n"
        assert dropped and got.decode() == want
        assert c.link.generation >= 2
    with_sandbox(cluster, fn)


def test_bad_command_input_is_refused_naming_the_field(cluster):
    async def fn(c, sb):
        with pytest.raises(warren.InvalidArgumentError) as e:
            await sb.exec([])
        assert e.value.field == "argv"
        with pytest.raises(warren.NotFoundError) as e:
            await sb.exec("true", cwd="/no/such/dir")
        assert e.value.field == "cwd"
        with pytest.raises(warren.NotFoundError) as e:
            await sb.exec("true", user="nobody-here")
        assert e.value.field == "user"
        with pytest.raises(warren.InvalidArgumentError) as e:
            await sb.exec("true", timeout_ms=-1)
        assert e.value.field is not None and "timeoutMs" in e.value.field
        with pytest.raises(warren.FrameTooLargeError):
            await sb.exec("cat", stdin=b"x" * (2 * 1024 * 1024))
    with_sandbox(cluster, fn)


def test_a_pty_spawn_runs_on_a_terminal_of_the_asked_size_and_follows_resize(cluster):
    async def fn(c, sb):
        p = sb.spawn("tty; stty size; read go; stty size", pty=(100, 30), open_stdin=True)
        seen = b""

        async def until(text: bytes) -> None:
            nonlocal seen
            async for chunk in p:
                seen += chunk.data
                if text in seen:
                    return
            raise AssertionError(f"ended before {text!r}: {seen!r}")

        await until(b"30 100")
        assert b"/dev/pts/" in seen
        await p.resize(120, 40)
        await p.write("go\n")
        await until(b"40 120")
        assert (await p.wait()).exit_code == 0
        plain = sb.spawn("sleep 30")
        with pytest.raises(warren.InvalidArgumentError) as e:
            await plain.resize(80, 24)
        assert e.value.field == "pty"
        await plain.kill()
    with_sandbox(cluster, fn)


def test_list_filters_by_state(cluster):
    async def fn(c, sb):
        lab = label()
        other = await c.create(backend="container", labels=lab)
        await other.kill()
        assert [v.id for v in await c.list(labels=lab)] == []
        assert [v.id for v in await c.list(labels=lab, state="gone")] == [other.id]
        assert other.id not in [v.id for v in await c.list(labels=lab, state="ready")]
        with pytest.raises(warren.InvalidArgumentError) as e:
            await c.list(state="bogus")
        assert e.value.field == "state"
    with_sandbox(cluster, fn)
