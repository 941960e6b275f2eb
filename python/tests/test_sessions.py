"""Persistent shell sessions: state carries between runs; timeouts interrupt only the run."""
from __future__ import annotations

import pytest

import warren
from test_client_exec import with_sandbox


def test_a_session_keeps_cwd_and_variables_between_runs(cluster):
    async def fn(c, sb):
        s = await sb.session(env={"START": "s"})
        try:
            r = await s.run("cd /tmp && X=42 && echo set")
            assert (r.exit_code, r.stdout) == (0, "set\n")
            r = await s.run('echo "$PWD $X $START"; echo oops >&2; false')
            assert (r.exit_code, r.stdout, r.stderr) == (1, "/tmp 42 s\n", "oops\n")
            r = await s.run("sleep 20", timeout_ms=300)
            assert (r.exit_code, r.reason) == (124, "timeout")
            assert (await s.run("echo $X")).stdout == "42\n"  # the shell lived through the interrupt
            with pytest.raises(warren.InvalidArgumentError) as e:
                await s.run("a\0b")
            assert e.value.field == "command"
        finally:
            await s.close()
        assert s.closed
        with pytest.raises(warren.InvalidArgumentError) as e:
            await s.run("true")
        assert e.value.field == "session"
    with_sandbox(cluster, fn)


def test_output_cannot_fake_a_runs_end(cluster):
    async def fn(c, sb):
        async with await sb.session() as s:
            r = await s.run("printf '\\n__WARREN_deadbeef_0__\\n'; echo after")
            assert r.stdout == "\n__WARREN_deadbeef_0__\nafter\n"
    with_sandbox(cluster, fn)
