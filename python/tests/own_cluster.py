"""Stand-in for the shared conftest until it lands: a session ``cluster`` fixture that starts a
real ``warren up --port 0`` with its own data dir and config file. Load with ``-p own_cluster``."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Cluster:
    url: str
    token: str
    admin_token: str
    data_dir: str


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    work = tempfile.mkdtemp(prefix="warren-py-")
    config = os.path.join(work, "config.json")
    proc = subprocess.Popen(["node", str(REPO / "bin" / "warren.js"), "up", "--port", "0", "--data-dir", os.path.join(work, "data")],
                            env={**os.environ, "WARREN_CONFIG": config}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    out = b""
    deadline = time.monotonic() + 30
    try:
        assert proc.stdout is not None
        os.set_blocking(proc.stdout.fileno(), False)
        while b"Ctrl-C" not in out:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"warren up did not come up: {out.decode(errors='replace')}")
            part = proc.stdout.read()
            out += part or b""
            time.sleep(0.05)
        text = out.decode()
        url = re.search(r"url:\s+(ws://\S+)", text)
        token = re.search(r"token:\s+(wrn_\S+)", text)
        assert url and token
        yield Cluster(url.group(1), token.group(1), token.group(1), os.path.join(work, "data"))
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)
