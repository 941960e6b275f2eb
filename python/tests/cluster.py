"""A real warren cluster for the Python tests: `warren up` as a child process on a free port,
with its own data directory and config file, ended (and its directory removed) at the end."""
from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from rawlink import mint_key

REPO = Path(__file__).resolve().parents[2]
PYTHON_SRC = REPO / "python" / "src"
CLI = REPO / "bin" / "warren.js"
# The function sandboxes' handlers the TS cluster tests use, so both suites see the same node.
FUNCTIONS_DIR = REPO / "test" / "cluster" / "fixtures" / "functions"
TENANT_SCOPES = ["sandbox:create", "sandbox:exec", "sandbox:read"]
# A container node can take a while to come up on a busy machine (layer service, cgroups).
UP_TIMEOUT_S = 90.0
GUEST_DIR = "/var/tmp/warren-test-guest"
STOP_TIMEOUT_S = 30.0


def node_binary() -> str:
    """The Node that runs the CLI: the test runner passes its own as WARREN_NODE."""
    found = os.environ.get("WARREN_NODE") or shutil.which("node")
    if not found:
        raise RuntimeError("no Node.js to run `warren up` with (set WARREN_NODE)")
    return found


@dataclass
class Cluster:
    """A running `warren up`: its URL, a tenant key (`token`, tenant `py-a`), the admin key."""

    url: str
    token: str
    admin_token: str
    data_dir: Path
    config_path: Path
    proc: subprocess.Popen[bytes] = field(repr=False)
    log_path: Path = field(repr=False)

    def key(self, tenant: str, scopes: list[str] | None = None) -> str:
        """A new API key for `tenant` (by default with every sandbox scope).

        Usable from sync and async tests alike: the request runs on a thread with its own loop
        (an async caller's loop waits the one round trip)."""
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, mint_key(self.url, self.admin_token, tenant, scopes or TENANT_SCOPES)).result(30)

    def env(self, token: str | None = None) -> dict[str, str]:
        """The environment for a Python child process that talks to this cluster as a tenant."""
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(PYTHON_SRC), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        env["WARREN_URL"] = self.url
        env["WARREN_TOKEN"] = token if token is not None else self.token
        # Never the user's ~/.warren/config.json: a child finds nothing there but what we pass.
        env["WARREN_CONFIG"] = str(self.data_dir.parent / "child-config.json")
        return env

    def log(self) -> str:
        """What `warren up` printed so far (for failure messages)."""
        return self.log_path.read_text(errors="replace")


def start_cluster(extra_args: tuple[str, ...] = (), tenant_key: bool = True) -> Cluster:
    """Starts `warren up --port 0` and returns once it printed its URL and admin token.

    ``extra_args`` go to `warren up` (``--tls-cert``…); without ``tenant_key`` no tenant key is
    minted (``token`` is the admin key)."""
    if not (REPO / "dist" / "src").is_dir():
        raise RuntimeError(f"warren is not built: run `npm run build` in {REPO}")
    tmp = Path(tempfile.mkdtemp(prefix="warren-py-"))
    data_dir = tmp / "data"
    config_path = tmp / "config.json"
    log_path = tmp / "up.log"
    env = dict(os.environ, WARREN_CONFIG=str(config_path))
    # The guest kernel of microvm sandboxes, unpacked once and shared with the TS suite's nodes.
    env.setdefault("WARREN_GUEST_DIR", GUEST_DIR)
    # Output goes to a file, not a pipe: nobody has to keep draining it for the cluster to run.
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [node_binary(), str(CLI), "up", "--port", "0", "--data-dir", str(data_dir), "--functions-dir", str(FUNCTIONS_DIR), *extra_args],
            cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + UP_TIMEOUT_S
    while True:
        out = log_path.read_text(errors="replace")
        url = re.search(r"url:\s+(wss?://\S+)", out)
        token = re.search(r"token:\s+(wrn_\S+)", out)
        if url and token and "Ctrl-C" in out:
            break
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_process(proc)
            shutil.rmtree(tmp, ignore_errors=True)
            raise RuntimeError(f"warren up did not come up (exit {proc.returncode}):\n{out}")
        time.sleep(0.05)
    cluster = Cluster(url=url.group(1), token="", admin_token=token.group(1), data_dir=data_dir,
                      config_path=config_path, proc=proc, log_path=log_path)
    if not tenant_key:
        cluster.token = cluster.admin_token
        return cluster
    try:
        cluster.token = cluster.key("py-a")
    except BaseException:
        stop_cluster(cluster)
        raise
    return cluster


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM (warren up stops its node and sandboxes), SIGKILL if it lingers."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def stop_cluster(cluster: Cluster) -> None:
    """Ends the cluster and removes its directory."""
    stop_process(cluster.proc)
    shutil.rmtree(cluster.data_dir.parent, ignore_errors=True)
