"""Real Docker: 16 threads launch, exec and destroy sandboxes at once.

Every thread must succeed (``redis-cli -h redis ping`` answers PONG from
each sandbox) and no container may be left for any of the working directories.
"""

from __future__ import annotations

import threading
import time
from typing import List

import pytest
from conftest import IMAGE, container_exists

import odek

pytestmark = pytest.mark.docker

THREADS = 16
PING = ["redis-cli", "-h", "redis", "ping"]


def run_threads(target, n: int) -> List[BaseException]:
    errors: List[BaseException] = []
    lock = threading.Lock()

    def wrapped(i: int) -> None:
        try:
            target(i)
        except BaseException as e:  # noqa: BLE001
            with lock:
                errors.append(e)

    threads = [threading.Thread(target=wrapped, args=(i,), name=f"agent-{i}") for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
        assert not t.is_alive(), f"{t.name} hangs"
    return errors


def test_sixteen_threads_one_client(docker_client, compose_project, make_workdirs):
    dirs = make_workdirs(THREADS)
    barrier = threading.Barrier(THREADS)
    ids = [None] * THREADS

    def agent(i: int) -> None:
        settings = {"sandbox": True, "sandbox_image": IMAGE,
                    "sandbox_compose_project": compose_project}
        plan = docker_client.resolve(dirs[i], settings)
        barrier.wait(timeout=300)
        with docker_client.launch(plan) as sandbox:
            ids[i] = sandbox.container_id
            r = sandbox.exec(PING, timeout=120)
            assert (r.exit_code, r.stdout.strip()) == (0, "PONG"), (i, r)
            assert sandbox.describe().isolation == "container"

    t0 = time.monotonic()
    errors = run_threads(agent, THREADS)
    assert errors == [], errors
    assert all(ids) and len(set(ids)) == THREADS
    assert not any(container_exists(c) for c in ids)
    print(f"{THREADS} sandboxes launched, exec'd and destroyed in {time.monotonic() - t0:.1f} s")


def test_sixteen_threads_module_launch(docker_engine, compose_project, make_workdirs):
    # each thread with its own temporary client (odek.launch without client=)
    dirs = make_workdirs(THREADS)
    barrier = threading.Barrier(THREADS)

    def agent(i: int) -> None:
        barrier.wait(timeout=300)
        with odek.launch(dirs[i], {"sandbox": True, "sandbox_image": IMAGE,
                                   "sandbox_compose_project": compose_project}) as sandbox:
            r = sandbox.exec(PING, timeout=120)
            assert r.stdout.strip() == "PONG", (i, r)

    errors = run_threads(agent, THREADS)
    assert errors == [], errors
