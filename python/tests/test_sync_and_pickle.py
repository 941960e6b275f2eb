"""The sync twin, and handles that pickle to (id, url) without the token."""
from __future__ import annotations

import os
import pickle
import subprocess
import sys

import warren
from support import label


def test_the_sync_client_has_the_async_ones_shape(cluster):
    with warren.Client.connect(cluster.url, cluster.token) as c:
        sb = c.create(backend="container", labels=label())
        try:
            assert sb.exec("echo $((6*7))").stdout == "42\n"
            p = sb.spawn(["cat"], open_stdin=True)
            p.write("ping")
            p.close_stdin()
            assert b"".join(ch.data for ch in p) == b"ping"
            assert p.wait().exit_code == 0
            sb.files.write("/f", b"x")
            assert sb.files.read("/f") == b"x"
            with sb.session() as s:
                s.run("cd /tmp")
                assert s.run("pwd").stdout == "/tmp\n"
            assert sb.id in [v.id for v in c.list()]
            assert len(sb.trajectory().steps) >= 2
        finally:
            sb.kill()
        assert sb.state == "gone"


def test_a_pickled_handle_carries_no_token_and_reattaches_in_a_subprocess(cluster):
    with warren.Client.connect(cluster.url, cluster.token) as c:
        sb = c.create(backend="container", labels=label())
        try:
            blob = pickle.dumps(sb)
            assert cluster.token.encode() not in blob
            ref = pickle.loads(blob)
            assert isinstance(ref, warren.SandboxRef) and (ref.id, ref.url) == (sb.id, cluster.url)
            assert ref.attach(c).exec("echo back").stdout == "back\n"
            child = ("import pickle, sys, warren\n"
                     "ref = pickle.loads(sys.stdin.buffer.read())\n"
                     "with warren.Client.connect(ref.url) as c:\n"
                     "    print(c.attach(ref).exec('echo from-worker').stdout, end='')\n")
            env = {**os.environ, "WARREN_TOKEN": cluster.token, "PYTHONPATH": os.pathsep.join(sys.path)}
            out = subprocess.run([sys.executable, "-c", child], input=blob, capture_output=True, env=env, timeout=60)
            assert out.returncode == 0, out.stderr.decode()
            assert out.stdout == b"from-worker\n"
        finally:
            sb.kill()
