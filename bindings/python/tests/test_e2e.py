"""Real Docker: the agent-framework flow against the fixture Compose project.

The fixture project (Redis on the default and an internal backend network,
Postgres on backend only) is brought up by tests/fixtures/compose/up.sh.
These tests fail — never skip — without Docker. Each uses its own working
directory and checks no container is left for it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest
from conftest import BINDING, IMAGE, container_exists, containers_for, docker, write_project_config

import odek

pytestmark = pytest.mark.docker

PING = ["redis-cli", "-h", "redis", "ping"]


def settings(project: str, **extra) -> dict:
    return {"sandbox": True, "sandbox_image": IMAGE, "sandbox_compose_project": project, **extra}


def test_agent_flow(docker_client, docker_workdir, compose_project):
    plan = docker_client.resolve(docker_workdir, settings(compose_project))
    assert plan.mode == "explicit" and plan.isolation == "container"
    assert plan.approval_request is None  # operator settings need no approval
    assert plan.network_summary == "attached"
    nets = {n.name: n for n in plan.networks}
    assert set(nets) == {f"{compose_project}_default", f"{compose_project}_backend"}
    assert nets[f"{compose_project}_backend"].internal
    assert not nets[f"{compose_project}_default"].internal
    assert all(n.compose_project == compose_project for n in plan.networks)

    with docker_client.launch(plan) as sandbox:
        cid = sandbox.container_id
        assert cid and container_exists(cid)
        assert containers_for(docker_workdir) == [cid[:12]]
        assert sandbox.info.startup_line.startswith("odek: sandbox network=attached")

        d = sandbox.describe()
        system_prompt = "You are a coding agent.\n\n" + d.prompt
        assert "Execution environment" in system_prompt
        assert {"redis", "postgres"} <= set(d.service_names)
        backend = [n for n in d.networks if n.name == f"{compose_project}_backend"]
        assert backend and backend[0].internal
        assert "redis" in d.tool
        # odek's supervisor: on when named (the suite names the static one,
        # as an installed libodek finds it beside itself); when off, why.
        sup = d.environment["supervisor"]
        if os.environ.get("ODEK_SUPERVISOR"):
            assert sup == {"on": True, "reason": None, "not_held": []}, sup
            assert sandbox.info.startup_line.endswith(" supervisor=on")
        else:
            assert sup["on"] or (sup["reason"] and sup["not_held"]), sup

        r = sandbox.exec(PING, timeout=30)
        assert (r.exit_code, r.stdout.strip(), r.timed_out) == (0, "PONG", False)
        # Postgres sits on the internal backend network only
        r = sandbox.exec(["pg_isready", "-h", "postgres", "-t", "10"], timeout=30)
        assert r.exit_code == 0, r.stdout + r.stderr
    assert not container_exists(cid)


def test_agent_loop_example(docker_engine, docker_workdir, compose_project):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(BINDING) + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run(
        [sys.executable, str(BINDING / "examples" / "agent_loop.py"),
         "--project", compose_project, "--image", IMAGE, "--workdir", docker_workdir],
        capture_output=True, text=True, env=env, timeout=300, stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "stdout='PONG'" in out
    assert "## Execution environment" in out
    assert "no approval needed" in out
    assert "destroyed" in out


def test_agent_loop_example_with_project_config(docker_engine, docker_workdir, compose_project):
    # the example sets the image and Compose project itself (operator settings);
    # a project env var still needs the operator's approval
    write_project_config(docker_workdir, {"sandbox_env": {"APP_ENV": "test"}})
    env = dict(os.environ)
    env["PYTHONPATH"] = str(BINDING) + os.pathsep + env.get("PYTHONPATH", "")
    base = [sys.executable, str(BINDING / "examples" / "agent_loop.py"),
            "--project", compose_project, "--image", IMAGE, "--workdir", docker_workdir]
    # denied (no TTY, no --approve): nothing is launched
    r = subprocess.run(base, capture_output=True, text=True, env=env, timeout=300,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "asks for sandbox settings that need your approval" in r.stdout
    assert "not launching" in r.stdout
    r = subprocess.run(base + ["--approve", "once"], capture_output=True, text=True, env=env,
                       timeout=300, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "approved (once)" in r.stdout and "stdout='PONG'" in r.stdout


def test_project_config_approval(docker_client, docker_workdir, compose_project):
    write_project_config(docker_workdir, {"sandbox_compose_project": compose_project,
                                          "sandbox_image": IMAGE})
    plan = docker_client.resolve(docker_workdir, {"sandbox": True})
    req = plan.approval_request
    assert req is not None and req.requested_compose_project == compose_project
    assert {n.name for n in req.networks} == {f"{compose_project}_default",
                                              f"{compose_project}_backend"}
    for n in req.networks:
        assert len(n.id) == 64 and n.compose_project == compose_project

    with pytest.raises(odek.ApprovalRequiredError):
        docker_client.launch(plan)
    assert containers_for(docker_workdir) == []

    approval = docker_client.approve(plan, "once")
    with docker_client.launch(plan, approval) as sandbox:
        assert sandbox.exec(PING, timeout=30).stdout.strip() == "PONG"


def test_with_block_removes_the_container_on_exception(docker_client, docker_workdir,
                                                       compose_project):
    with pytest.raises(KeyError):
        with odek.launch(docker_workdir, settings(compose_project), client=docker_client) as sandbox:
            cid = sandbox.container_id
            assert container_exists(cid)
            raise KeyError("the agent crashed")
    assert sandbox.closed and not container_exists(cid)


def test_module_launch_with_default_client(docker_engine, docker_workdir, compose_project):
    with odek.launch(workdir=docker_workdir, settings=settings(compose_project)) as sandbox:
        assert sandbox.exec(PING, timeout=30).stdout.strip() == "PONG"


def test_exec_details(docker_client, docker_workdir):
    with open(os.path.join(docker_workdir, "hello.txt"), "w") as f:
        f.write("from the host\n")
    with odek.launch(docker_workdir, {"sandbox": True, "sandbox_image": IMAGE},
                     client=docker_client) as sandbox:
        # No sandbox_user anywhere: commands run as this (the binding's host)
        # process's own uid:gid (SPEC §6.1 "user"), root only when the suite
        # runs as root — tests/nonroot/run.sh runs it as a normal user too.
        me = f"{os.getuid()}:{os.getgid()}"
        r = sandbox.exec(shell="id -u; id -g")
        assert r.exit_code == 0 and r.stdout.split() == [str(os.getuid()), str(os.getgid())], r
        assert f" user={me} " in sandbox.info.startup_line, sandbox.info.startup_line
        env = sandbox.describe().environment
        assert env["user"] == me, env
        # No sandbox_memory anywhere: odek's default limit (4 GiB,
        # DEFAULT_MEMORY_BYTES in core/src/config/merge.rs), as Docker has it.
        default_memory = 4 << 30
        assert json.loads(sandbox.info.plan.json)["memory_bytes"] == default_memory
        assert env["memory_bytes"] == default_memory, env
        inspected = docker("inspect", "-f", "{{.HostConfig.Memory}}", sandbox.container_id)
        assert inspected.stdout.strip() == str(default_memory)

        r = sandbox.exec(["cat", "hello.txt"])
        assert (r.exit_code, r.stdout) == (0, "from the host\n")  # cwd is /workspace
        r = sandbox.exec(shell="echo out; echo err >&2; exit 7")
        assert (r.exit_code, r.stdout, r.stderr, r.ok) == (7, "out\n", "err\n", False)
        r = sandbox.exec(shell='printf %s "$GREETING"', env={"GREETING": "hi there"})
        assert r.stdout == "hi there"
        r = sandbox.exec(["pwd"], workdir="/tmp")
        assert r.stdout.strip() == "/tmp"
        r = sandbox.exec(["sh", "-c", "printf 'caf\\303\\251 \\377'"])
        assert r.stdout == "café \ufffd"  # UTF-8, invalid bytes replaced
        r = sandbox.exec(["no-such-program"])
        assert r.exit_code != 0

        t0 = time.monotonic()
        r = sandbox.exec(["sleep", "30"], timeout=0.5)
        assert (r.exit_code, r.timed_out, r.killed) == (124, True, True), r.stderr
        assert time.monotonic() - t0 < 20

        # 17 MiB of output: cut at 16 MiB, flagged
        r = sandbox.exec(shell="head -c 17825792 /dev/zero | tr '\\000' a", timeout=120)
        assert r.exit_code == 0 and r.stdout_truncated and r.truncated
        assert len(r.stdout) == odek.EXEC_OUTPUT_LIMIT
        assert not r.stderr_truncated


def test_close_names_a_git_hook_the_sandbox_wrote_and_not_src(docker_client, docker_workdir):
    """docs/SECURITY.md, "Files host tools run": the close result names a
    hook an agent wrote through /workspace; an edit of src/main.py only is
    named by nothing."""
    os.makedirs(os.path.join(docker_workdir, ".git", "hooks"))
    os.makedirs(os.path.join(docker_workdir, "src"))
    s = {"sandbox": True, "sandbox_image": IMAGE}
    sandbox = odek.launch(docker_workdir, s, client=docker_client)
    r = sandbox.exec(shell="printf x > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit")
    assert r.ok, r.stderr
    cid = sandbox.container_id
    with pytest.warns(odek.HostFilesChangedWarning, match="pre-commit"):
        result = sandbox.close()
    assert not container_exists(cid)
    assert [(c.path, c.change, c.kinds) for c in result.changed_host_files] == [
        (".git/hooks/pre-commit", "created, executable", ("created",))
    ]
    assert result.message and result.message.endswith("review them before running git or make")

    with odek.launch(docker_workdir, s, client=docker_client) as sandbox:
        assert sandbox.exec(shell="echo 'print(2)' > src/main.py").ok
    assert sandbox.close_result is not None
    assert sandbox.close_result.changed_host_files == ()
    assert sandbox.close_result.message is None


def test_blocking_calls_release_the_gil(docker_client, docker_workdir):
    with odek.launch(docker_workdir, {"sandbox": True, "sandbox_image": IMAGE},
                     client=docker_client) as sandbox:
        ticks = [0]
        done = threading.Event()

        def spin() -> None:
            while not done.is_set():
                ticks[0] += 1
                time.sleep(0.01)

        t = threading.Thread(target=spin)
        t.start()
        try:
            r = sandbox.exec(["sleep", "1.5"])
        finally:
            done.set()
            t.join()
        assert r.exit_code == 0
        assert ticks[0] >= 50, f"the other thread only ran {ticks[0]} times during a 1.5 s exec"


def test_narrowed_sub_agent(docker_client, docker_workdir, compose_project):
    parent = docker_client.resolve(docker_workdir, settings(compose_project))
    child = odek.narrow(parent, networks=[f"{compose_project}_backend"], pids_limit=256,
                        readonly=True)
    assert [n.name for n in child.networks] == [f"{compose_project}_backend"]
    assert not child.internet and child.readonly and child.pids_limit == 256
    with docker_client.launch(child) as sandbox:
        d = sandbox.describe()
        assert d.internet is False and d.workspace_readonly
        # positive control: Redis is on backend too, so it still answers
        assert sandbox.exec(PING, timeout=30).stdout.strip() == "PONG"
        r = sandbox.exec(["sh", "-c", "touch /workspace/x"])
        assert r.exit_code != 0  # read-only workspace
    with pytest.raises(odek.ConfigError):
        odek.narrow(child, networks=[f"{compose_project}_default"])


def test_config_view_reads_the_local_image(docker_client, docker_workdir, compose_project):
    plan = docker_client.resolve(docker_workdir, settings(compose_project))
    view = docker_client.config_view(plan)
    assert view.image == IMAGE and view.image_id and view.image_id.startswith("sha256:")
    assert view.mode == "explicit" and view.sources["sandbox"] == "api"
    assert {n.name for n in view.networks} == {n.name for n in plan.networks}


def test_a_client_pool_hands_over_a_ready_sandbox_and_close_removes_the_rest(
    docker_engine, docker_workdir, compose_project
):
    with odek.Client(sandbox_pool=1) as client:
        plan = client.resolve(docker_workdir, settings(compose_project))
        first = client.launch(plan)  # launched: the pool then fills
        deadline = time.time() + 120
        while len(containers_for(docker_workdir)) < 2 and time.time() < deadline:
            time.sleep(0.1)
        ids = containers_for(docker_workdir)
        ready = [i for i in ids if not first.container_id.startswith(i)]
        assert len(ready) == 1, ids
        time.sleep(1)  # let the owner finish verifying it
        with client.launch(plan) as second:
            assert second.container_id.startswith(ready[0]), "the ready one"
            r = second.exec(PING, timeout=30)
            assert (r.exit_code, r.stdout.strip()) == (0, "PONG")
        first.close()
        # The replacement is ready or on its way; closing the client removes it.
    deadline = time.time() + 30
    while containers_for(docker_workdir) and time.time() < deadline:
        time.sleep(0.1)
    assert containers_for(docker_workdir) == []
