"""`python -m warren`: run, ps, exec, kill, create, snapshot, fork, pause, resume, log for machines without Node, each run as a
real child process against the cluster with the tenant key in WARREN_URL/WARREN_TOKEN."""
from __future__ import annotations

import base64
import json
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


def test_snapshot_fork_pause_resume_and_snapshot_rm_from_the_cli(cluster: Cluster) -> None:
    created = warren(cluster, "create", "--backend", "container", "--ttl", "2m")
    assert created.returncode == 0, created.stderr
    sid = created.stdout.decode().strip()
    made: list[str] = [sid]
    try:
        assert warren(cluster, "exec", sid, "--", "/bin/sh", "-c", "echo cli-snap > /mark").returncode == 0
        snap = warren(cluster, "snapshot", sid, "--name", "cli-snap:v1")
        assert snap.returncode == 0, snap.stderr
        snap_id, snap_name = snap.stdout.decode().split()
        assert snap_name == "cli-snap:v1"
        listed = warren(cluster, "snapshots", "--sandbox", sid)
        assert listed.returncode == 0, listed.stderr
        assert [line.split()[0] for line in listed.stdout.decode().splitlines()[1:]] == [snap_id]

        forked = warren(cluster, "fork", sid, "-n", "2")
        assert forked.returncode == 0, forked.stderr
        forks = forked.stdout.decode().split()
        made += forks
        assert len(forks) == 2
        for f in forks:
            ran = warren(cluster, "exec", f, "--", "cat", "/mark")
            assert (ran.returncode, ran.stdout) == (0, b"cli-snap\n")

        paused = warren(cluster, "pause", sid)
        assert (paused.returncode, paused.stdout.decode().split()) == (0, [sid, "paused"])
        refused = warren(cluster, "exec", sid, "--", "true")
        assert refused.returncode == 1
        assert refused.stderr.decode().startswith("WARREN_ERR_SANDBOX_PAUSED")
        resumed = warren(cluster, "resume", sid)
        assert (resumed.returncode, resumed.stdout.decode().split()) == (0, [sid, "ready"])

        removed = warren(cluster, "snapshot-rm", "cli-snap:v1")
        assert (removed.returncode, removed.stdout.decode().strip()) == (0, snap_id)
        gone = warren(cluster, "snapshot-rm", snap_id)
        assert gone.returncode == 1
        assert gone.stderr.decode().startswith("WARREN_ERR_NOT_FOUND")
    finally:
        warren(cluster, "kill", *made)


def test_log_prints_the_trajectory_readably_and_as_json_lines(cluster: Cluster) -> None:
    created = warren(cluster, "create", "--backend", "container", "--ttl", "2m")
    sid = created.stdout.decode().strip()
    try:
        assert warren(cluster, "exec", sid, "--", "/bin/sh", "-c", "echo logged-$((6*7))").returncode == 0
        text = warren(cluster, "log", sid)
        assert text.returncode == 0, text.stderr
        lines = text.stdout.decode().splitlines()
        assert lines[0].startswith(f"sandbox {sid} (container")
        assert any(line.startswith("#") and 'exec ["/bin/sh", "-c", "echo logged-$((6*7))"] exit 0' in line for line in lines)
        assert "  out| logged-42" in lines

        as_json = warren(cluster, "log", sid, "--json")
        assert as_json.returncode == 0, as_json.stderr
        values = [json.loads(line) for line in as_json.stdout.decode().splitlines()]
        assert values[0]["sandboxId"] == sid
        execs = [v for v in values[1:] if v.get("kind") == "exec"]
        assert execs and execs[-1]["exitCode"] == 0
        assert base64.b64decode(execs[-1]["stdout"]["data"]) == b"logged-42\n"
        stranger = warren(cluster, "log", sid, token=cluster.key("py-cli-log-stranger"))
        assert stranger.returncode == 1
        assert stranger.stderr.decode().startswith("WARREN_ERR_NOT_FOUND")
    finally:
        warren(cluster, "kill", sid)
