"""Upgrades and crashes lose nothing (Python SDK): `warren up` killed with SIGKILL mid-command and
started again on its data dir and port; the exec's output stream waits out the restart
(WARREN_ERR_BACKEND_UNAVAILABLE with retryAfterMs) and completes with every line once, in order."""
from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

import warren
from cluster import CLI, REPO, UP_TIMEOUT_S, node_binary

LINES = 1500  # a numbered line every 10 ms: about 15 s


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def up(tmp: Path, port: int) -> tuple[subprocess.Popen[bytes], str, str]:
    """`warren up` on `port` with its data dir in `tmp`: the process, its URL and admin token."""
    log_path = tmp / f"up-{time.monotonic_ns()}.log"
    env = dict(os.environ, WARREN_CONFIG=str(tmp / "config.json"))
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([node_binary(), str(CLI), "up", "--port", str(port), "--data-dir", str(tmp / "data")],
                                cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + UP_TIMEOUT_S
    while True:
        out = log_path.read_text(errors="replace")
        url = re.search(r"url:\s+(ws://\S+)", out)
        token = re.search(r"token:\s+(wrn_\S+)", out)
        if url and token and "Ctrl-C" in out:
            return proc, url.group(1), token.group(1)
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"warren up did not come up (exit {proc.returncode}):\n{out}")
        time.sleep(0.05)


@pytest.mark.deadline(240)
def test_exec_stream_outlives_a_kill_9_of_warren_up() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="warren-pyrs-"))
    port = free_port()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        first, url, token = up(tmp, port)
        procs.append(first)
        seen: list[str] = []
        under_way = threading.Event()

        def on_stdout(s: bytes | str) -> None:
            seen.append(s.decode() if isinstance(s, bytes) else s)
            if "line 200\n" in "".join(seen[-3:]):
                under_way.set()

        with warren.Client.connect(url=url, token=token) as c:
            sb = c.create(backend="container", ttl_ms=300_000)
            result: dict[str, object] = {}

            def run() -> None:
                try:
                    script = f'i=0; while [ $i -lt {LINES} ]; do echo "line $i"; i=$((i+1)); sleep 0.01; done'
                    result["r"] = sb.exec(["sh", "-c", script], on_stdout=on_stdout)
                except BaseException as err:  # noqa: BLE001 - reported below
                    result["err"] = err

            t = threading.Thread(target=run)
            t.start()
            assert under_way.wait(60), "the command never got under way"
            first.kill()
            first.wait()
            cut = "".join(seen).count("\n")
            assert cut < LINES // 2, f"killed at line {cut} of {LINES}: mid-command"
            second, _, _ = up(tmp, port)
            procs.append(second)
            t.join(200)
            assert "err" not in result, repr(result.get("err"))
            r = result["r"]
            expected = "".join(f"line {i}\n" for i in range(LINES))
            assert r.stdout == expected  # type: ignore[attr-defined]
            assert "".join(seen) == expected
            assert r.exit_code == 0  # type: ignore[attr-defined]
            # The trajectory took the command up again instead of closing it as lost.
            deadline = time.monotonic() + 30
            step = None
            while time.monotonic() < deadline:
                step = next((st for st in sb.trajectory().steps if isinstance(st, warren.ExecStep) and st.ended), None)
                if step is not None:
                    break
                time.sleep(0.2)
            assert step is not None, "the command's step never ended"
            assert step.exit_code == 0 and step.reason is None, repr(step)
            assert isinstance(step.resumed_at, int) and step.resumed_at >= step.at, repr(step.resumed_at)
            sb.kill()
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
        shutil.rmtree(tmp, ignore_errors=True)
