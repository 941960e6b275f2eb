"""The examples in examples/python run as written against the cluster (so they stay true)."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest

from cluster import REPO, Cluster


def example(cluster: Cluster, name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(REPO / "examples" / "python" / name), *args], env=cluster.env(),
                          capture_output=True, text=True, timeout=150)


@pytest.mark.deadline(180)
def test_the_rollout_example_scores_a_batch_and_kills_it(cluster: Cluster, client: object) -> None:
    done = example(cluster, "rollout.py", "8", "4")
    assert done.returncode == 0, done.stderr
    m = re.search(r"batch (\w+): 8 rollouts, mean reward ([\d.]+), (\d+) trajectory steps", done.stdout)
    assert m is not None, done.stdout
    assert int(m.group(3)) >= 8 * 4  # three agent commands and the test run each
    assert "rollouts 8/8" in done.stderr
    assert client.list(labels={"batch": m.group(1)}) == []  # type: ignore[attr-defined]


@pytest.mark.deadline(120)
def test_the_gym_example_reaches_its_goal_and_ends_its_sandbox(cluster: Cluster) -> None:
    done = example(cluster, "gym_env.py")
    assert done.returncode == 0, done.stderr
    assert "reward=1.0 terminated=True" in done.stdout


@pytest.mark.deadline(120)
def test_the_fork_example_scores_its_forks_and_prints_the_winners_trajectory(cluster: Cluster, client: object) -> None:
    done = example(cluster, "fork.py", "4")
    assert done.returncode == 0, done.stderr
    assert re.search(r"snapshot snap-\w{16}: 2 layers, \d+ bytes; 4 forks", done.stdout), done.stdout
    m = re.search(r"run (\w+): (\d)/4 forks passed", done.stdout)
    assert m is not None and int(m.group(2)) >= 1, done.stdout
    assert re.search(r"\n\s+0 write\n\s+1 exec '/bin/sh -c /task/test.sh' -> exit 0, stdout sha256 [0-9a-f]{12}\n", done.stdout), done.stdout
    assert client.list(labels={"run": m.group(1)}) == []  # type: ignore[attr-defined]
