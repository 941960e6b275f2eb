"""`python -m warren`: run, ps, exec, kill (and create) for machines without Node, each run as a
real child process against the cluster with the tenant key in WARREN_URL/WARREN_TOKEN."""
from __future__ import annotations

import subprocess
import sys
import uuid

from cluster import Cluster

CLI_TIMEOUT_S = 60


def warren(cluster: Cluster, *args: str, input: bytes = b"", token: str | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "warren", *args], input=input, env=cluster.env(token),
                          capture_output=True, timeout=CLI_TIMEOUT_S)


def ps_ids(cluster: Cluster, *args: str) -> list[str]:
    done = warren(cluster, "ps", *args)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.decode().splitlines()
    assert lines[0].split()[:2] == ["ID", "STATE"]
    return [line.split()[0] for line in lines[1:]]


def test_run_passes_output_and_exit_code_through_and_kills_its_sandbox(cluster: Cluster) -> None:
    label = f"cli-run={uuid.uuid4().hex[:8]}"
    done = warren(cluster, "run", "--backend", "container", "--label", label, "--",
                  "/bin/sh", "-c", "echo out; echo err >&2; exit 3")
    assert (done.returncode, done.stdout, done.stderr) == (3, b"out\n", b"err\n")
    assert ps_ids(cluster, "--label", label) == []
    assert len(ps_ids(cluster, "--label", label, "--all")) == 1


def test_run_streams_its_stdin_to_the_command(cluster: Cluster) -> None:
    data = bytes(range(256)) * 1000
    done = warren(cluster, "run", "--backend", "container", "--", "cat", input=data)
    assert done.returncode == 0, done.stderr
    assert done.stdout == data


def test_create_ps_exec_kill_one_sandbox(cluster: Cluster) -> None:
    label = f"cli-life={uuid.uuid4().hex[:8]}"
    created = warren(cluster, "create", "--backend", "container", "--ttl", "2m", "--label", label)
    assert created.returncode == 0, created.stderr
    sid = created.stdout.decode().strip()
    assert len(sid) == 16
    assert ps_ids(cluster, "--label", label) == [sid]
    ran = warren(cluster, "exec", sid, "--", "/bin/sh", "-c", "echo in-$((6*7))")
    assert (ran.returncode, ran.stdout) == (0, b"in-42\n")
    killed = warren(cluster, "kill", sid)
    assert (killed.returncode, killed.stdout.decode().strip()) == (0, f"{sid} killed")
    assert ps_ids(cluster, "--label", label) == []
    again = warren(cluster, "kill", sid)
    assert again.returncode == 0
    assert again.stdout.decode().startswith(f"{sid} already")


def test_a_refused_key_is_unauthenticated_and_exit_1(cluster: Cluster) -> None:
    done = warren(cluster, "ps", token="wrn_not-a-key")
    assert done.returncode == 1
    assert done.stderr.decode().startswith("WARREN_ERR_UNAUTHENTICATED")


def test_exec_in_another_tenants_sandbox_is_not_found(cluster: Cluster) -> None:
    created = warren(cluster, "create", "--backend", "container", "--ttl", "1m")
    sid = created.stdout.decode().strip()
    try:
        done = warren(cluster, "exec", sid, "--", "true", token=cluster.key("py-cli-stranger"))
        assert done.returncode == 1
        assert done.stderr.decode().startswith("WARREN_ERR_NOT_FOUND")
    finally:
        assert warren(cluster, "kill", sid).returncode == 0


def test_a_bad_ttl_is_invalid_argument_before_anything_is_created(cluster: Cluster) -> None:
    label = f"cli-ttl={uuid.uuid4().hex[:8]}"
    done = warren(cluster, "create", "--ttl", "soon", "--label", label)
    assert done.returncode == 1
    assert done.stderr.decode().startswith("WARREN_ERR_INVALID_ARGUMENT")
    assert ps_ids(cluster, "--label", label, "--all") == []
