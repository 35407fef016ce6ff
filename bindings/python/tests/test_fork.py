"""Real Docker: libodek in a process forked from its user (SPEC §10.1, §6.1).

A child made by ``os.fork()`` or by ``multiprocessing``'s ``fork`` start
method inherits the parent's libodek without its threads. Every call in the
child that would use it raises :class:`odek.ForkedError` at once — nothing
runs in the sandbox, nothing is created or removed — and the parent keeps
working. The child also does not keep the parent's sandbox alive: it closes
its copy of the parent's owner link right after the fork, so a parent killed
by SIGKILL leaves no sandbox even while its child lives on.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import select
import signal
import subprocess
import sys
import threading
import time
import warnings

import pytest
from conftest import BINDING, IMAGE, container_exists, containers_for

import odek

pytestmark = pytest.mark.docker

#: How long a child may take for all its calls (each is refused at once).
CHILD_DEADLINE = 10.0
#: How long the parent's exec after a child's calls may take.
PARENT_DEADLINE = 30.0
MARKER = "/tmp/forked-child-ran"


def _child_calls(client, plan, sandbox, workdir, report_fd):
    """In the forked child: every call that uses libodek, each outcome
    written to ``report_fd`` as one JSON line as soon as it is known."""

    def settings():
        return {"sandbox": True, "sandbox_image": IMAGE, "sandbox_network": "none"}

    calls = [
        ("exec", lambda: sandbox.exec(["sh", "-c", f"touch {MARKER}"], timeout=10)),
        ("describe", lambda: sandbox.describe()),
        ("resolve", lambda: client.resolve(workdir, settings())),
        ("launch", lambda: client.launch(plan)),
        ("odek.launch", lambda: odek.launch(workdir, settings())),
        ("Client", lambda: odek.Client()),
        ("CancelToken", lambda: odek.CancelToken()),
        ("sandbox.close", lambda: sandbox.close()),
        ("client.close", lambda: client.close()),
    ]
    for name, call in calls:
        t0 = time.monotonic()
        try:
            call()
            out = {"call": name, "ok": True}
        except odek.OdekError as e:
            out = {"call": name, "code": e.code, "class": e.failure_class,
                   "message": e.message, "type": type(e).__name__}
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            out = {"call": name, "other": repr(e)}
        out["secs"] = time.monotonic() - t0
        os.write(report_fd, (json.dumps(out) + "\n").encode())


def _mp_child(client, plan, sandbox, workdir, report_fd):
    try:
        _child_calls(client, plan, sandbox, workdir, report_fd)
    finally:
        os.close(report_fd)


def _read_report(r: int, kill) -> list:
    """The child's JSON lines, read until EOF; a child past the deadline is
    killed and the test fails naming the calls it finished."""
    buf = b""
    deadline = time.monotonic() + CHILD_DEADLINE
    while True:
        left = deadline - time.monotonic()
        ready = select.select([r], [], [], max(left, 0))[0] if left > 0 else []
        if not ready:
            kill()
            done = [json.loads(line) for line in buf.decode().splitlines()]
            pytest.fail(
                f"the forked child did not finish its calls within {CHILD_DEADLINE} s "
                f"(hung after {[d['call'] for d in done]}): {done}"
            )
        chunk = os.read(r, 65536)
        if not chunk:
            break
        buf += chunk
    return [json.loads(line) for line in buf.decode().splitlines()]


def _fork_child(how, client, plan, sandbox, workdir):
    """Runs the calls in a child forked ``how``; returns their outcomes."""
    r, w = os.pipe()
    with warnings.catch_warnings():
        # Python 3.12+ warns about forking a multi-threaded process: that
        # is the very case under test.
        warnings.simplefilter("ignore", DeprecationWarning)
        if how == "os.fork":
            pid = os.fork()
            if pid == 0:  # the child
                code = 0
                try:
                    os.close(r)
                    _child_calls(client, plan, sandbox, workdir, w)
                except BaseException:  # noqa: BLE001
                    code = 1
                finally:
                    os._exit(code)
            proc = None
        else:
            ctx = multiprocessing.get_context("fork")
            proc = ctx.Process(target=_mp_child, args=(client, plan, sandbox, workdir, w))
            proc.start()
            pid = proc.pid
    os.close(w)

    def kill():
        os.kill(pid, signal.SIGKILL)

    try:
        report = _read_report(r, kill)
    finally:
        os.close(r)
        if proc is not None:
            proc.join(10)
            if proc.is_alive():
                proc.kill()
                proc.join()
        else:
            os.waitpid(pid, 0)
    return report


def _exec_within(sandbox, argv, deadline):
    """``sandbox.exec(argv, timeout=10)`` on a thread; fails when it has not
    returned after ``deadline`` seconds."""
    box = {}

    def run():
        try:
            box["result"] = sandbox.exec(argv, timeout=10)
        except BaseException as e:  # noqa: BLE001
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t0 = time.monotonic()
    t.start()
    t.join(deadline)
    if t.is_alive():
        pytest.fail(f"the parent's exec hung for more than {deadline} s after a forked child used libodek")
    if "error" in box:
        raise box["error"]
    return box["result"], time.monotonic() - t0


@pytest.mark.parametrize("how", ["os.fork", "multiprocessing"])
def test_a_forked_child_is_refused_and_the_parent_keeps_working(docker_workdir, how):
    settings = {"sandbox": True, "sandbox_image": IMAGE, "sandbox_network": "none"}
    with odek.Client() as client:
        plan = client.resolve(docker_workdir, settings)
        with client.launch(plan) as sandbox:
            cid = sandbox.container_id
            assert sandbox.exec(["true"], timeout=10).exit_code == 0
            # Several rounds: a child that got at the parent's connections
            # hung the parent's next call in most runs, not all.
            for round_ in range(3):
                report = _fork_child(how, client, plan, sandbox, docker_workdir)
                assert [o["call"] for o in report] == [
                    "exec", "describe", "resolve", "launch", "odek.launch",
                    "Client", "CancelToken", "sandbox.close", "client.close",
                ], report
                for o in report:
                    assert o.get("code") == odek.CODES["FORKED"], (round_, o)
                    assert o["type"] == "ForkedError" and o["class"] == "usage", o
                    assert o["secs"] < 2, o
                    assert str(os.getpid()) in o["message"], o
                    assert "spawn" in o["message"], o
                # Nothing ran: the child's exec did not touch the marker, its
                # launches made no container, its close removed nothing.
                assert container_exists(cid)
                assert containers_for(docker_workdir) == [cid[:12]]
                res, secs = _exec_within(
                    sandbox, ["sh", "-c", f"test ! -e {MARKER} && echo clean"], PARENT_DEADLINE
                )
                assert (res.exit_code, res.stdout, res.timed_out) == (0, "clean\n", False), res
                assert secs < 10, f"the parent's exec took {secs:.1f} s after round {round_}"
    assert not containers_for(docker_workdir)


HOLDER = r"""
import multiprocessing, os, sys, time
import odek
c = odek.Client()
plan = c.resolve(sys.argv[1], {"sandbox": True, "sandbox_image": sys.argv[2]})
sandbox = c.launch(plan)
if sys.argv[3] == "os.fork":
    pid = os.fork()
    if pid == 0:
        time.sleep(600)
        os._exit(0)
else:
    p = multiprocessing.get_context("fork").Process(target=time.sleep, args=(600,))
    p.start()
    pid = p.pid
print(sandbox.container_id, pid, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its new parent) counts as gone.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("how", ["os.fork", "multiprocessing"])
def test_a_forked_child_does_not_keep_a_killed_parents_sandbox(docker_workdir, tmp_path, how):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(BINDING) + os.pathsep + env.get("PYTHONPATH", "")
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    env["ODEK_HOME"] = str(home)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, docker_workdir, IMAGE, how],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
        text=True, env=env,
    )
    child = None
    try:
        line = holder.stdout.readline().split()
        assert len(line) == 2, f"the holder printed {line!r} (exit {holder.poll()})"
        cid, child = line[0], int(line[1])
        assert containers_for(docker_workdir) == [cid[:12]]
        holder.kill()
        holder.wait(timeout=30)
        deadline = time.monotonic() + 10
        while containers_for(docker_workdir) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = containers_for(docker_workdir)
        assert _alive(child), "the forked child died with its parent: the test proves nothing"
        assert not left, (
            f"10 s after SIGKILL of its owner, sandbox {left} is still there while the "
            f"owner's forked child (pid {child}) lives: the child kept the owner link open"
        )
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        holder.stdout.close()
        if child is not None and _alive(child):
            os.kill(child, signal.SIGKILL)
