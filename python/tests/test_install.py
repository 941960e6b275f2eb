"""`pip install ./python` installs the package: built from its pyproject (setuptools, no network),
importable from anywhere with its type marker, its console script and `python -m warren`."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]
PIP_TIMEOUT_S = 120


def test_pip_install_of_the_package_directory_gives_an_importable_typed_package(tmp_path: Path) -> None:
    # Built from a copy, so the build leaves nothing (build/, *.egg-info) in the checkout.
    source = tmp_path / "src-copy"
    shutil.copytree(PACKAGE, source, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache", "tests"))
    target = tmp_path / "site"
    # No index here: the build backend and the dependencies come from the system's packages.
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-index", "--no-deps",
                           "--target", str(target), str(source)], capture_output=True, timeout=PIP_TIMEOUT_S)
    assert done.returncode == 0, done.stderr.decode()
    assert (target / "warren" / "py.typed").is_file()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(target)
    with tempfile.TemporaryDirectory() as elsewhere:
        probe = subprocess.run([sys.executable, "-c", "import warren; print(warren.__file__); print(warren.AsyncClient.__name__, warren.Client.__name__)"],
                               cwd=elsewhere, env=env, capture_output=True, timeout=30)
        assert probe.returncode == 0, probe.stderr.decode()
        assert probe.stdout.decode().splitlines() == [str(target / "warren" / "__init__.py"), "AsyncClient Client"]
        cli = subprocess.run([sys.executable, "-m", "warren", "--help"], cwd=elsewhere, env=env, capture_output=True, timeout=30)
        assert cli.returncode == 0, cli.stderr.decode()
        assert b"run" in cli.stdout and b"ps" in cli.stdout
    assert (target / "bin" / "warren-py").is_file(), "the console script is installed"
