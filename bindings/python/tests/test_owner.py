"""Real Docker: owner lifetime (SPEC §6.1).

A Python process that holds a sandbox and dies by SIGKILL runs no
``with`` block, ``close()`` or finalizer; the engine removes the sandbox by
itself once the process's connection to the container's stdin is gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import BINDING, IMAGE, containers_for

pytestmark = pytest.mark.docker

HOLDER = r"""
import sys, time
import odek
with odek.Client() as c:
    plan = c.resolve(sys.argv[1], {"sandbox": True, "sandbox_image": sys.argv[2]})
    sandbox = c.launch(plan)
    print(sandbox.container_id, flush=True)
    time.sleep(600)
"""


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_killed_owner_leaves_no_sandbox(docker_engine, docker_workdir, tmp_path, sig):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(BINDING) + os.pathsep + env.get("PYTHONPATH", "")
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    env["ODEK_HOME"] = str(home)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, docker_workdir, IMAGE],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
        text=True, env=env,
    )
    try:
        cid = holder.stdout.readline().strip()
        assert cid, holder.stderr.read() if holder.poll() is not None else "no container ID"
        assert containers_for(docker_workdir) == [cid[:12]]
        holder.send_signal(sig)
        holder.wait(timeout=30)
        deadline = time.monotonic() + 10
        while containers_for(docker_workdir) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = containers_for(docker_workdir)
        assert not left, f"10 s after {sig.name} of its owner, sandbox {left} is still there (no gc ran)"
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
