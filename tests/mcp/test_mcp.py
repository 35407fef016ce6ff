"""End-to-end tests of `odek mcp` against the real Docker daemon.

The client is the official MCP Python SDK (`mcp` from PyPI) driving
`target/debug/odek mcp` over stdio; a few protocol-abuse and signal cases
write raw JSON-RPC lines instead, because a well-behaved SDK cannot send
them. The Compose fixture (redis on default+backend, postgres on the
internal backend network only) must be up as project $ODEK_MCP_PROJECT
(default `odekmcp<ns>`, <ns> being this checkout's test namespace, see
tests/ns.sh): tests/mcp/run-tests.sh starts and stops it.

Every server runs in a fresh project directory with its own $ODEK_HOME, so
"no container left" is checked by the `dev.odek.workdir` label, and the
tests only ever remove containers they created.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import Client, ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp import types
from mcp.types import ElicitResult

REPO = Path(__file__).resolve().parents[2]
ODEK = Path(os.environ.get("ODEK_BIN", REPO / "target" / "debug" / "odek"))
# This checkout's test namespace (tests/ns.sh, xtask/src/ns.rs): ODEK_TEST_NS,
# else the first 8 hex digits of SHA-256 of the checkout's canonical path.
TEST_NS = os.environ.get("ODEK_TEST_NS") or hashlib.sha256(
    os.path.realpath(REPO).encode()).hexdigest()[:8]
PROJECT = os.environ.get("ODEK_MCP_PROJECT", f"odekmcp{TEST_NS}")
IMAGE = os.environ.get("ODEK_MCP_IMAGE", f"odek-test-{TEST_NS}/base:1")
WRAPPER = re.compile(r'<untrusted_content_([0-9a-f]{16,}) source="docker">(.*?)</untrusted_content_\1>', re.S)


# ---------------------------------------------------------------- helpers


def docker(*args: str) -> str:
    return subprocess.run(["docker", *args], check=True, capture_output=True, text=True).stdout.strip()


def containers_for(workdir: Path) -> list[str]:
    """IDs of odek containers (any state) whose /workspace is `workdir`."""
    out = docker("ps", "-aq", "--filter", "label=dev.odek.sandbox=true", "--filter", f"label=dev.odek.workdir={workdir}")
    return out.split()


def wait_gone(workdir: Path, limit: float = 20.0) -> list[str]:
    deadline = time.monotonic() + limit
    while (left := containers_for(workdir)) and time.monotonic() < deadline:
        time.sleep(0.25)
    return left


class Project:
    """A scratch project directory and $ODEK_HOME for one server."""

    def __init__(self, tmp_path: Path):
        self.dir = (tmp_path / "project").resolve()
        self.dir.mkdir()
        self.home = (tmp_path / "odek-home").resolve()
        self.home.mkdir()

    def env(self, **extra: str) -> dict[str, str]:
        # ODEK_SUPERVISOR stays: `cargo xtask` points it at the static
        # supervisor, so the server runs supervised sandboxes as installed.
        env = {k: v for k, v in os.environ.items() if not k.startswith("ODEK_") or k == "ODEK_SUPERVISOR"}
        env["ODEK_HOME"] = str(self.home)
        env.update(extra)
        return env

    def args(self, *extra: str, compose: bool = True) -> list[str]:
        a = ["mcp", "--sandbox-image", IMAGE]
        if compose:
            a += ["--sandbox-compose", PROJECT]
        return a + list(extra)


@pytest.fixture
def project(tmp_path: Path):
    p = Project(tmp_path)
    yield p
    # Only what this test created: containers mounting its project directory.
    left = containers_for(p.dir)
    if left:
        subprocess.run(["docker", "rm", "-f", *left], capture_output=True)


@asynccontextmanager
async def session(p: Project, *extra: str, compose: bool = True, env: dict[str, str] | None = None,
                  args: list[str] | None = None, errlog=None, **client):
    """A client session with `odek mcp` (`client`: ClientSession keywords,
    e.g. elicitation_callback; `errlog`: where the server's stderr goes,
    default ours)."""
    params = StdioServerParameters(command=str(ODEK), args=args or p.args(*extra, compose=compose), env=env or p.env(), cwd=str(p.dir))
    async with stdio_client(params, errlog=errlog or sys.stderr) as (read, write):
        async with ClientSession(read, write, **client) as s:
            init = await s.initialize()
            yield s, init


def run(coro):
    return asyncio.run(coro)


async def call(s: ClientSession, tool: str, **args):
    return await s.call_tool(tool, args)


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def ok(s: ClientSession, tool: str, **args) -> dict:
    r = await call(s, tool, **args)
    assert not r.is_error, f"{tool} {args} failed: {text_of(r)}"
    return r.structured_content


async def refused(s: ClientSession, tool: str, **args) -> str:
    r = await call(s, tool, **args)
    assert r.is_error, f"{tool} {args} unexpectedly succeeded: {r.structured_content}"
    return text_of(r)


# ------------------------------------------------------------------ cases


def test_tools_and_instructions(project):
    async def go():
        async with session(project) as (s, init):
            tools = {t.name: t for t in (await s.list_tools()).tools}
            assert set(tools) == {"exec", "describe", "sandbox_up", "sandbox_down", "sandbox_list", "sandbox_narrow",
                                  "process_output", "process_kill",
                                  "read_file", "write_file", "edit_file", "list_directory"}
            for name in ("read_file", "list_directory"):
                assert tools[name].annotations.read_only_hint is True, name
            for name in ("write_file", "edit_file"):
                assert tools[name].annotations.destructive_hint is True, name
                assert "/workspace" in tools[name].description and "live checkout" in tools[name].description
            assert tools["process_output"].annotations.read_only_hint is True
            assert tools["process_kill"].annotations.destructive_hint is True
            for name in ("describe", "sandbox_list"):
                assert tools[name].annotations.read_only_hint is True, name
            assert tools["sandbox_down"].annotations.destructive_hint is True
            for t in tools.values():
                assert t.input_schema["type"] == "object"
                # A model has no SPEC: nothing it reads cites one.
                assert "SPEC" not in json.dumps(t.model_dump(mode="json")), t.name
            assert "SPEC" not in init.instructions
            assert set(tools["exec"].input_schema["properties"]) >= {"command", "argv", "env", "timeout_secs", "sandbox_id", "background"}
            assert "timed_out" in tools["exec"].output_schema["properties"]
            ins = init.instructions
            print("\n--- instructions ---\n" + ins)
            assert "attached networks only" in ins
            assert "internet" in ins
            m = WRAPPER.search(ins)
            assert m, ins
            assert "redis" in m.group(2) and "postgres" in m.group(2)
            desc = tools["exec"].description
            m = WRAPPER.search(desc)
            assert m and "redis" in m.group(2) and "postgres" in m.group(2), desc
            # What the agent must know to work there: edits land on the host
            # at once, /tmp is noexec, who it runs as, where the internet is,
            # and the output cap (128 KiB, head and tail).
            for text in (ins, desc):
                assert "live checkout" in text and "noexec" in text, text
                assert "Commands run as" in text, text
                assert "the internet is reachable if the host's is, through the attached networks that are not internal" in text, text
                assert "Output cap" in text and "128 KiB" in text and "64 KiB" in text, text
            assert "lands on the developer's machine at once" in ins, ins
            # The image is checked at start, not promised.
            assert f"The sandbox image {IMAGE} is present on the Docker daemon." in ins, ins
            # Lazy: nothing launched by initialize or list_tools.
            assert containers_for(project.dir) == []
            assert (await ok(s, "sandbox_list"))["sandboxes"] == []
            # The image's tools: probed at the first launch, then in the
            # live block, and in the next server's forecast (cached per image).
            d = await ok(s, "describe")
            assert d["environment"]["tools"] == ["bash", "psql", "redis-cli"], d["environment"]
            assert "the image has: bash, psql, redis-cli; not there: git" in d["prompt"], d["prompt"]
        async with session(project) as (s, init):
            assert "the image has: bash, psql, redis-cli" in init.instructions, init.instructions
            desc = {t.name: t for t in (await s.list_tools()).tools}["exec"].description
            assert "the image has: bash, psql, redis-cli" in desc, desc

    run(go())
    assert wait_gone(project.dir) == []


def test_an_image_that_cannot_be_had_is_said_at_start(project):
    """--sandbox-image naming an image the daemon lacks and no registry
    serves (a registry on a closed loopback port): the instructions and the
    server's stderr say so at start, before any launch; a launch is refused
    and leaves nothing."""
    missing = "localhost:1/odek-test/absent:1"
    err = project.dir.parent / "mcp-image-stderr.txt"

    async def go():
        with err.open("w") as log:
            async with session(project, args=["mcp", "--sandbox-image", missing], errlog=log) as (s, init):
                ins = init.instructions
                print("\n--- instructions ---\n" + ins)
                assert f"The sandbox image {missing} is NOT AVAILABLE" in ins, ins
                assert "cannot be pulled" in ins and "--sandbox-image" in ins, ins
                assert containers_for(project.dir) == []
                e = await refused(s, "exec", command="true")
                assert missing in e, e
        assert f"odek: the sandbox image {missing} is NOT AVAILABLE" in err.read_text()

    run(go())
    assert wait_gone(project.dir) == []


def test_a_registry_the_unapproved_project_names_is_not_asked_at_start(project):
    """A project's odek.json naming an image on a registry of its choice,
    not approved: the start-up image check asks no registry (the daemon
    would connect to whatever host:port the repository names, a beacon)."""
    import socket
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    (project.dir / "odek.json").write_text(json.dumps({"sandbox_image": f"127.0.0.1:{port}/atk/x:1"}))

    async def go():
        async with session(project, args=["mcp"]) as (s, init):
            ins = init.instructions
            assert "NOT APPROVED YET" in ins, ins
            assert "checked once the project's settings are approved" in ins, ins
            await refused(s, "exec", command="true")

    try:
        run(go())
        readable, _, _ = select.select([listener], [], [], 1.0)
        assert readable == [], "the daemon connected to the registry the project named"
    finally:
        listener.close()
    assert wait_gone(project.dir) == []


def test_exec_reaches_services_by_name(project):
    async def go():
        async with session(project) as (s, _):
            r = await ok(s, "exec", command="redis-cli -h redis ping")
            print("\n--- exec redis-cli -h redis ping ---\n" + json.dumps(r))
            assert r["exit_code"] == 0 and r["stdout"].strip() == "PONG"
            r = await ok(s, "exec", argv=["pg_isready", "-h", "postgres", "-t", "5"])
            assert r["exit_code"] == 0, r
            assert "accepting connections" in r["stdout"]
            r = await ok(s, "exec", command='echo "$GREETING"; exit 3', env={"GREETING": "hi"})
            assert (r["exit_code"], r["stdout"]) == (3, "hi\n")
            d = await ok(s, "describe")
            assert d["sandbox_id"] == r["sandbox_id"]
            m = WRAPPER.search(d["prompt"])
            assert m and "redis" in m.group(2) and "postgres" in m.group(2)
            assert d["environment"]["network"] == "attached"
            listed = (await ok(s, "sandbox_list"))["sandboxes"]
            assert [x["default"] for x in listed] == [True]
            assert len(containers_for(project.dir)) == 1

    run(go())
    assert wait_gone(project.dir) == []


def test_timeout_kills_the_command(project):
    async def go():
        async with session(project, compose=False) as (s, _):
            t0 = time.monotonic()
            r = await ok(s, "exec", command="echo started; sleep 60", timeout_secs=2)
            took = time.monotonic() - t0
            assert r["timed_out"] and r["killed"], r
            assert r["exit_code"] == 124
            assert r["stdout"] == "started\n"
            assert took < 30, took
            ps = await ok(s, "exec", command="ps -eo args | grep -c '[s]leep 60' || true")
            assert ps["stdout"].strip() == "0", ps

    run(go())


def test_exec_streams_output_lines_as_progress(project):
    """With a progress token, each output line reaches the client as a
    progress notification while the command runs (shown by ordering: the
    command waits until the client has seen its first line), stderr lines
    marked, progress values increasing; the result is the whole output as
    without a token. Without a token no notification is sent."""
    seen: list[tuple[float, str | None]] = []
    notes: list = []

    async def on_progress(progress, total, message):
        seen.append((progress, message))
        if message == "a":
            (project.dir / "go").touch()

    async def on_message(message):
        if isinstance(message, types.ProgressNotification):
            notes.append(message)

    script = "echo a; echo oops >&2; while [ ! -e go ]; do sleep 0.02; done; printf 'b\\nc'; exit 3"

    async def go():
        async with session(project, compose=False, message_handler=on_message) as (s, _):
            r = await s.call_tool("exec", {"command": script, "timeout_secs": 60}, progress_callback=on_progress)
            assert not r.is_error, text_of(r)
            out = r.structured_content
            print("\n--- progress ---\n" + "\n".join(f"{p:g} {m}" for p, m in seen))
            assert (out["exit_code"], out["timed_out"]) == (3, False), out
            assert (out["stdout"], out["stderr"]) == ("a\nb\nc", "oops\n"), out
            lines = [m for _, m in seen if m in ("a", "b", "c", "stderr | oops")]
            assert lines.index("a") < lines.index("b") < lines.index("c"), seen
            assert "stderr | oops" in lines, seen
            values = [p for p, _ in seen]
            assert values == sorted(set(values)), f"progress must increase: {values}"
            assert notes, "the message handler sees progress notifications (positive control)"
            path = await ok(s, "exec", command="test -e /.odek/odek-supervisor && echo supervisor || echo exec-api")
            # The path follows what odek says of the sandbox: the supervisor
            # named (ODEK_SUPERVISOR) or found beside odek (the nonroot suite).
            sup = (await ok(s, "describe"))["environment"]["supervisor"]
            if os.environ.get("ODEK_SUPERVISOR"):
                assert sup["on"], sup
            assert path["stdout"].strip() == ("supervisor" if sup["on"] else "exec-api"), sup

            # No token: the same result, no notification at all.
            notes.clear()
            (project.dir / "go").unlink()
            (project.dir / "go").touch()
            r = await s.call_tool("exec", {"command": script, "timeout_secs": 60})
            assert not r.is_error, text_of(r)
            assert r.structured_content["stdout"] == "a\nb\nc"
            assert notes == [], notes

    run(go())
    assert wait_gone(project.dir) == []


@pytest.mark.parametrize("supervisor", ["supervised", "exec-api"])
def test_a_missing_program_exits_127_with_odeks_line(project, supervisor):
    """The same status and one line on every exec path; through the exec
    API (ODEK_SUPERVISOR= turns the supervisor off) the runtime's own text
    ("OCI runtime exec failed") is not the result."""
    env = project.env() if supervisor == "supervised" else project.env(ODEK_SUPERVISOR="")

    async def go():
        async with session(project, compose=False, env=env) as (s, _):
            r = await ok(s, "exec", argv=["no-such-tool"])
            print(f"\n--- exec no-such-tool ({supervisor}) ---\n{r}")
            assert r["exit_code"] == 127, r
            assert r["stdout"] == "", r
            assert "OCI runtime" not in r["stderr"], r
            said = [line for line in r["stderr"].splitlines() if "no-such-tool" in line]
            assert len(said) == 1, r
            assert said[0].startswith("odek: cannot run `no-such-tool` in sandbox odek-"), r
            assert said[0].endswith(": command not found; nothing ran"), r
            # Control: the sandbox runs what it has.
            assert (await ok(s, "exec", argv=["true"]))["exit_code"] == 0

    run(go())
    assert wait_gone(project.dir) == []


def test_two_explicit_sandboxes(project):
    async def go():
        async with session(project) as (s, _):
            a, b = await asyncio.gather(ok(s, "sandbox_up"), ok(s, "sandbox_up"))
            assert a["sandbox_id"] != b["sandbox_id"] and a["container"] != b["container"]
            ha = await ok(s, "exec", command="hostname; redis-cli -h redis ping", sandbox_id=a["sandbox_id"])
            hb = await ok(s, "exec", command="hostname; redis-cli -h redis ping", sandbox_id=b["sandbox_id"])
            assert ha["stdout"].endswith("PONG\n") and hb["stdout"].endswith("PONG\n")
            assert ha["stdout"] != hb["stdout"]
            ids = {x["sandbox_id"] for x in (await ok(s, "sandbox_list"))["sandboxes"]}
            assert ids == {a["sandbox_id"], b["sandbox_id"]}
            assert len(containers_for(project.dir)) == 2
            await ok(s, "sandbox_down", sandbox_id=a["sandbox_id"])
            assert len(containers_for(project.dir)) == 1
            err = await refused(s, "exec", command="true", sandbox_id=a["sandbox_id"])
            assert "no sandbox with id" in err
            await ok(s, "exec", command="true", sandbox_id=b["sandbox_id"])

    run(go())
    assert wait_gone(project.dir) == []


def test_a_vanished_default_sandbox_is_relaunched_and_a_named_one_is_an_error(project):
    """`docker rm -f` of the conversation's sandbox: the next call launches
    a new one (resolved and approved as any launch) and its result says so;
    a sandbox named by id that vanished is an error naming sandbox_down and
    sandbox_up, and sandbox_down then forgets it."""
    async def go():
        async with session(project) as (s, _):
            first = await ok(s, "exec", command="hostname; mkdir -p .git/hooks && printf x > .git/hooks/pre-commit")
            old = first["sandbox_id"]
            assert "relaunched" not in first, first
            [container] = containers_for(project.dir)
            docker("rm", "-f", container)
            again = await ok(s, "exec", command="hostname; redis-cli -h redis ping")
            print(f"\n--- exec after docker rm -f ---\n{again}")
            assert again["sandbox_id"] != old, again
            assert again["stdout"].endswith("PONG\n"), again
            note = again.get("relaunched", "")
            assert old in note and again["sandbox_id"] in note and "gone" in note, again
            assert "background processes" in note, again
            # What the vanished sandbox changed of the files host tools run
            # is named now (the relaunch records the checkout afresh).
            assert ".git/hooks/pre-commit (created)" in note, note
            # Said once: the next call runs in the new sandbox without a note.
            after = await ok(s, "exec", command="true")
            assert after["sandbox_id"] == again["sandbox_id"] and "relaunched" not in after
            listed = {x["sandbox_id"] for x in (await ok(s, "sandbox_list"))["sandboxes"]}
            assert listed == {again["sandbox_id"]}, listed
            # A named sandbox that vanished: an error, no silent relaunch.
            up = await ok(s, "sandbox_up")
            docker("rm", "-f", up["container"])
            for tool, args in (("exec", {"command": "true"}), ("read_file", {"path": "x"}), ("describe", {})):
                err = await refused(s, tool, sandbox_id=up["sandbox_id"], **args)
                assert "is gone" in err and "sandbox_down" in err and "sandbox_up" in err, err
            assert len(containers_for(project.dir)) == 1
            await ok(s, "sandbox_down", sandbox_id=up["sandbox_id"])
            listed = {x["sandbox_id"] for x in (await ok(s, "sandbox_list"))["sandboxes"]}
            assert listed == {again["sandbox_id"]}, listed

    run(go())
    assert wait_gone(project.dir) == []


def test_sandbox_down_names_a_git_hook_the_agent_wrote_and_not_src(project, tmp_path):
    """docs/SECURITY.md, "Files host tools run": an agent that writes
    .git/hooks/pre-commit through /workspace is named in sandbox_down's
    result and on the server's stderr; one that edits only src/main.py is
    named by nothing; a sandbox removed at shutdown is named in the log."""
    (project.dir / ".git" / "hooks").mkdir(parents=True)
    (project.dir / "src").mkdir()
    (project.dir / "src" / "main.py").write_text("print(1)\n")
    log = (tmp_path / "server-stderr").open("w+")

    async def go():
        async with session(project, compose=False, errlog=log) as (s, _):
            a = await ok(s, "sandbox_up")
            r = await ok(s, "exec", sandbox_id=a["sandbox_id"],
                         command="printf x > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit")
            assert r["exit_code"] == 0, r
            down = await call(s, "sandbox_down", sandbox_id=a["sandbox_id"])
            assert not down.is_error, text_of(down)
            d = down.structured_content
            assert d["removed"] is True
            assert d["changed_host_files"] == [
                {"path": ".git/hooks/pre-commit", "change": "created, executable", "kinds": ["created"]}
            ], d
            assert d["host_files_unchecked"] is None
            assert "review them before running git or make" in d["note"], d
            assert ".git/hooks/pre-commit" in text_of(down)

            # Control: only src/main.py edited.
            b = await ok(s, "sandbox_up")
            r = await ok(s, "exec", sandbox_id=b["sandbox_id"], command="echo 'print(2)' > src/main.py")
            assert r["exit_code"] == 0, r
            d = await ok(s, "sandbox_down", sandbox_id=b["sandbox_id"])
            assert d["changed_host_files"] == [] and d["note"] is None, d
            assert (project.dir / "src" / "main.py").read_text() == "print(2)\n"

            # The default sandbox changes the Makefile and is removed when
            # the client goes: the shutdown log names it.
            r = await ok(s, "exec", command="printf 'all:\\n' > Makefile")
            assert r["exit_code"] == 0, r

    run(go())
    assert wait_gone(project.dir) == []
    log.seek(0)
    stderr = log.read()
    said = [line for line in stderr.splitlines() if "host tools run" in line]
    assert any(
        re.fullmatch(r"odek: sandbox odek-\S+ \(MCP id \S+\): the sandbox changed files that host tools run: "
                     r"\.git/hooks/pre-commit \(created, executable\) — review them before running git or make", line)
        for line in said
    ), stderr
    assert any(line.startswith("odek: sandbox odek-") and "Makefile (created)" in line for line in said), stderr
    assert not any("src/main.py" in line for line in said), stderr
    assert len(said) == 2, said


def test_narrow_to_one_network(project):
    """The fixture's redis is on default+backend and postgres on backend only,
    so a child narrowed to the default network reaches redis but not
    postgres; the parent reaching postgres is the positive control."""

    async def go():
        async with session(project) as (s, _):
            parent = await ok(s, "exec", command="pg_isready -h postgres -t 5 && redis-cli -h redis ping")
            assert parent["exit_code"] == 0 and "PONG" in parent["stdout"], parent
            child = await ok(s, "sandbox_narrow", sandbox_id=parent["sandbox_id"], networks=[f"{PROJECT}_default"], pids_limit=128)
            assert child["parent_id"] == parent["sandbox_id"]
            assert f"networks={PROJECT}_default" in child["startup_line"]
            cid = child["sandbox_id"]
            r = await ok(s, "exec", command="redis-cli -h redis ping", sandbox_id=cid)
            assert r["stdout"].strip() == "PONG"
            r = await ok(s, "exec", command="getent hosts postgres; pg_isready -h postgres -t 3", sandbox_id=cid)
            assert r["exit_code"] != 0, r
            d = await ok(s, "describe", sandbox_id=cid)
            assert "postgres" not in WRAPPER.search(d["prompt"]).group(2)
            # Wider than the parent: refused, nothing launched.
            err = await refused(s, "sandbox_narrow", sandbox_id=cid, networks=[f"{PROJECT}_backend"])
            assert "not one of the parent's" in err
            err = await refused(s, "sandbox_narrow", sandbox_id=cid, pids_limit=100000)
            assert "only" in err
            assert len(containers_for(project.dir)) == 2

    run(go())
    assert wait_gone(project.dir) == []


def test_a_warm_pool_serves_the_sandbox_and_sub_agents(project, tmp_path):
    """`odek mcp --sandbox-pool 1`: the conversation's sandbox is the one the
    pool had ready; a sub-agent's first narrowed sandbox is launched, after
    which the pool keeps one ready for the narrowed plan too, and the next
    sub-agent of that plan gets it. Each works; nothing is left."""
    log = tmp_path / "stderr.log"

    def ready_lines() -> list[str]:
        return re.findall(r"odek: warm pool: sandbox (\S+) ready", log.read_text())

    async def wait_ready(n: int) -> list[str]:
        for _ in range(1200):
            if len(ready_lines()) >= n:
                return ready_lines()
            await asyncio.sleep(0.1)
        raise AssertionError(f"{n} ready sandboxes expected: {log.read_text()}")

    async def go():
        with open(log, "w") as errlog:
            async with session(project, "--sandbox-pool", "1", errlog=errlog) as (s, _):
                first = (await wait_ready(1))[0]
                parent = await ok(s, "exec", command="redis-cli -h redis ping")
                assert parent["stdout"].strip() == "PONG", parent
                up = {x["sandbox_id"]: x for x in (await ok(s, "sandbox_list"))["sandboxes"]}
                assert up[parent["sandbox_id"]]["container"] == first, "the ready one was handed over"
                narrowed = dict(sandbox_id=parent["sandbox_id"], networks=[f"{PROJECT}_default"], pids_limit=128)
                child = await ok(s, "sandbox_narrow", **narrowed)
                assert child["container"] not in ready_lines(), "no ready one of the narrowed plan yet"
                # The parent's replacement, then the narrowed plan's one.
                ready = await wait_ready(3)
                second = await ok(s, "sandbox_narrow", **narrowed)
                assert second["container"] in ready[1:], (second, ready)
                assert second["container"] != child["container"]
                r = await ok(s, "exec", command="redis-cli -h redis ping", sandbox_id=second["sandbox_id"])
                assert r["stdout"].strip() == "PONG"

    run(go())
    assert wait_gone(project.dir) == []


def test_narrow_none_on_a_compose_parent_is_offline(project):
    """sandbox_narrow {"network_mode": "none"} on the Compose-attached
    default sandbox gives a child with no network at all: it cannot resolve
    redis or postgres (the parent can: the positive control), it has only
    the loopback interface and no route, and describe says so."""

    async def go():
        async with session(project) as (s, _):
            probe = "getent hosts redis; echo redis=$?; getent hosts postgres; echo postgres=$?; ls /sys/class/net; echo routes; tail -n +2 /proc/net/route"
            parent = await ok(s, "exec", command=probe)
            print("\n--- parent ---\n" + parent["stdout"])
            assert "redis=0" in parent["stdout"] and "postgres=0" in parent["stdout"], parent
            child = await ok(s, "sandbox_narrow", network_mode="none")
            assert child["parent_id"] == parent["sandbox_id"]
            assert "network=none " in child["startup_line"] and " networks=- " in child["startup_line"], child
            r = await ok(s, "exec", command=probe, sandbox_id=child["sandbox_id"])
            print("--- child ---\n" + r["stdout"])
            out = r["stdout"]
            assert "redis=2" in out and "postgres=2" in out, out
            interfaces, routes = out.split("routes\n")
            assert interfaces.splitlines()[-1:] == ["lo"] and "eth" not in interfaces, out
            assert routes.strip() == "", f"the child has routes:\n{routes}"
            d = await ok(s, "describe", sandbox_id=child["sandbox_id"])
            env = d["environment"]
            assert (env["network"], env["internet"], env["networks"]) == ("none", False, []), env
            assert not WRAPPER.search(d["prompt"]) or "redis" not in WRAPPER.search(d["prompt"]).group(2)
            inspect = json.loads(docker("inspect", "-f", "{{json .NetworkSettings.Networks}}", child["container"]))
            assert list(inspect) == ["none"], inspect
            assert docker("inspect", "-f", "{{.HostConfig.NetworkMode}}", child["container"]) == "none"
            # Widening back is refused and launches nothing.
            before = set(containers_for(project.dir))
            err = await refused(s, "sandbox_narrow", sandbox_id=child["sandbox_id"], network_mode="bridge")
            assert "never from none to bridge" in err
            err = await refused(s, "sandbox_narrow", sandbox_id=child["sandbox_id"], networks=[f"{PROJECT}_default"])
            assert "not one of the parent's" in err
            assert set(containers_for(project.dir)) == before

    run(go())
    assert wait_gone(project.dir) == []


def test_sandbox_cap_holds_under_concurrent_calls(project):
    """With --max-sandboxes 3, 8 concurrent sandbox_up make exactly 3
    containers; the rest are refused naming the setting, before anything is
    created. The conversation's sandbox counts too, and sandbox_down frees a
    place."""
    marker = project.dir / "ran-somewhere"

    async def go():
        async with session(project, "--max-sandboxes", "3", compose=False) as (s, _):
            results = await asyncio.gather(*(call(s, "sandbox_up") for _ in range(8)))
            good = [r.structured_content for r in results if not r.is_error]
            bad = [text_of(r) for r in results if r.is_error]
            assert len(good) == 3 and len(bad) == 5, (good, bad)
            print("\n--- refusal (cap) ---\n" + bad[0])
            for err in bad:
                assert "--max-sandboxes 3" in err and "ODEK_MCP_MAX_SANDBOXES" in err and "sandbox_down" in err, err
            assert len(containers_for(project.dir)) == 3
            assert len((await ok(s, "sandbox_list"))["sandboxes"]) == 3
            # The default sandbox would be a fourth: refused, nothing runs.
            err = await refused(s, "exec", command=f"touch /workspace/{marker.name}")
            assert "--max-sandboxes 3" in err
            assert not marker.exists(), "a command ran"
            await ok(s, "sandbox_down", sandbox_id=good[0]["sandbox_id"])
            r = await ok(s, "exec", command="echo fits")
            assert r["stdout"] == "fits\n"
            assert len(containers_for(project.dir)) == 3
            assert "--max-sandboxes 3" in await refused(s, "sandbox_narrow", networks=[])
            assert len(containers_for(project.dir)) == 3

    run(go())
    assert wait_gone(project.dir) == []


@pytest.mark.parametrize("when", ["building", "built"])
def test_a_cancelled_sandbox_up_leaves_nothing(project, when):
    """A client that cancels a sandbox_up while its Dockerfile.odek builds
    ("building") or as the build ends and the container is being created
    ("built") gets nothing: no container, nothing listed, and the place under
    the cap (--max-sandboxes 1) is free for the next sandbox_up."""
    df = project.dir / "Dockerfile.odek"
    df.write_bytes(f"FROM {IMAGE}\n# odek mcp cancel test {os.urandom(8).hex()}\nRUN sleep 3\n".encode())
    tag = "odek-sandbox:" + hashlib.sha256(df.read_bytes()).hexdigest()[:24]
    trigger = {"building": "sleep 3", "built": "Successfully tagged"}[when]

    async def go():
        env = project.env(ODEK_APPROVE_PROJECT_SANDBOX="1")
        async with session(project, env=env, args=["mcp", "--max-sandboxes", "1"]) as (s, _):
            seen = asyncio.Event()

            async def on_progress(progress, total, message):
                if message and trigger in message:
                    seen.set()

            task = asyncio.create_task(s.call_tool("sandbox_up", {}, progress_callback=on_progress))
            await asyncio.wait_for(seen.wait(), 120)
            task.cancel()  # the SDK sends notifications/cancelled for it
            with pytest.raises(asyncio.CancelledError):
                await task
            # Whatever the launch had made is gone, and stays gone.
            assert wait_gone(project.dir, limit=20.0) == []
            await asyncio.sleep(3)
            assert containers_for(project.dir) == []
            assert (await ok(s, "sandbox_list"))["sandboxes"] == []
            # The place under the cap came back: the next one launches.
            up = await ok(s, "sandbox_up")
            assert [x["sandbox_id"] for x in (await ok(s, "sandbox_list"))["sandboxes"]] == [up["sandbox_id"]]
            assert len(containers_for(project.dir)) == 1

    try:
        run(go())
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)
    assert wait_gone(project.dir) == []


def test_a_default_sandbox_runs_as_the_servers_user_with_the_default_memory_limit(project):
    # No sandbox_user anywhere: commands run as the server process's own
    # uid:gid (this test's, whose child `odek mcp` is; tests/nonroot/run.sh
    # runs it as a normal user too), and the instructions say so before any
    # launch. No sandbox_memory anywhere: odek's default limit (4 GiB).
    uid, gid = os.getuid(), os.getgid()
    async def go():
        async with session(project, compose=False) as (s, init):
            ins = init.instructions
            if uid == 0:
                assert "Commands run as root inside the container" in ins, ins
            else:
                # The uid:gid, or the account's name with them once known.
                assert f"Commands run as user `{uid}:{gid}`" in ins or f"(uid {uid}, gid {gid})" in ins, ins
            up = await ok(s, "sandbox_up")
            r = await ok(s, "exec", command="id -u; id -g", sandbox_id=up["sandbox_id"])
            assert r["exit_code"] == 0 and r["stdout"].split() == [str(uid), str(gid)], r
            assert docker("inspect", "-f", "{{.HostConfig.Memory}}", up["container"]) == str(4 << 30)
            d = await ok(s, "describe", sandbox_id=up["sandbox_id"])
            assert d["environment"]["memory_bytes"] == 4 << 30
            assert d["environment"]["user"] == f"{uid}:{gid}", d["environment"]
            child = await ok(s, "sandbox_narrow", sandbox_id=up["sandbox_id"], memory="256m")
            assert docker("inspect", "-f", "{{.HostConfig.Memory}}", child["container"]) == str(256 << 20)
            err = await refused(s, "sandbox_narrow", sandbox_id=up["sandbox_id"], memory="8g")
            assert "may only go down" in err
            assert len(containers_for(project.dir)) == 2

    run(go())
    assert wait_gone(project.dir) == []


REFUSALS = {
    "missing network": (["--sandbox-networks", "nosuchnet"], False, {}, "nosuchnet"),
    "compose project not running": (["--sandbox-compose", "odekmcpnotrunning"], False, {}, "not running"),
    "daemon unreachable": ([], True, {"DOCKER_HOST": "unix:///nonexistent.sock"}, "nonexistent.sock"),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_refusals_are_tool_errors(project, case):
    extra, compose, env, needle = REFUSALS[case]
    marker = project.dir / "ran-on-host"

    async def go():
        async with session(project, *extra, compose=compose, env=project.env(**env)) as (s, init):
            assert "cannot be set up" in init.instructions
            err = await refused(s, "exec", command=f"touch {marker}")
            print(f"\n--- refusal ({case}) ---\n{err}")
            assert needle in err
            assert "failure class" in err
            if case == "compose project not running":
                # The model is told no other project on the daemon (the
                # fixture's is running), only where the operator looks.
                assert "running projects" not in err and "did you mean" not in err, err
                assert "docker compose ls" in err, err
            # The server keeps serving: the next calls are answered.
            assert (await ok(s, "sandbox_list"))["sandboxes"] == []
            assert needle in await refused(s, "sandbox_up")
            assert needle in await refused(s, "describe")

    run(go())
    assert not marker.exists(), "a command ran on the host"
    assert containers_for(project.dir) == []


def test_project_settings_need_approval(project):
    (project.dir / "odek.json").write_text(json.dumps({"sandbox_compose_project": PROJECT}))

    async def go():
        async with session(project, compose=False) as (s, init):
            # The agent is told the settings are not approved, not a working sandbox.
            assert "NOT APPROVED YET" in init.instructions, init.instructions
            err = await refused(s, "exec", command="redis-cli -h redis ping")
            print("\n--- refusal (approval) ---\n" + err)
            assert "needs operator approval" in err
            assert "ODEK_APPROVE_PROJECT_SANDBOX=1" in err
            assert f"{PROJECT}_backend" in err  # the card lists the networks
            assert (await ok(s, "sandbox_list"))["sandboxes"] == []
        assert containers_for(project.dir) == []
        # Positive control: the operator's explicit approval lets it run.
        async with session(project, compose=False, env=project.env(ODEK_APPROVE_PROJECT_SANDBOX="1")) as (s, _):
            r = await ok(s, "exec", command="redis-cli -h redis ping")
            assert r["stdout"].strip() == "PONG"
            # The agent rewrites odek.json through exec to widen its next
            # sandbox (a host variable in its env, the default bridge): the
            # env switch approved only what the file asked for at start-up.
            wide = json.dumps({"sandbox_compose_project": PROJECT, "sandbox_network": "bridge",
                               "sandbox_env": {"LEAK": "${HOME}"}})
            r = await ok(s, "exec", command=f"printf '%s' '{wide}' > /workspace/odek.json")
            assert r["exit_code"] == 0, r
            before = set(containers_for(project.dir))
            err = await refused(s, "sandbox_up")
            print("\n--- refusal (rewritten odek.json) ---\n" + err)
            assert "when this MCP server started" in err, err
            assert set(containers_for(project.dir)) == before, "a sandbox was launched from the rewritten file"

    run(go())
    assert wait_gone(project.dir) == []


STORE = "project_sandbox_approvals.json"


class Asker:
    """An elicitation callback giving one answer, recording the questions."""

    def __init__(self, action: str, decision: str | None = None):
        self.action, self.decision = action, decision
        self.asked: list = []

    async def __call__(self, context, params):
        self.asked.append(params)
        content = {"decision": self.decision} if self.decision is not None else None
        return ElicitResult(action=self.action, content=content)


def stored_keys(p: Project) -> str:
    f = p.home / STORE
    return f.read_text() if f.exists() else ""


def check_question(asker: Asker):
    assert len(asker.asked) == 1, asker.asked
    q = asker.asked[0]
    print("\n--- elicitation ---\n" + q.message)
    # The CLI's card: the file, the networks by name and full ID, the project.
    assert "odek.json" in q.message and f"{PROJECT}_backend" in q.message
    assert re.search(r"\b[0-9a-f]{64}\b", q.message), q.message
    schema = q.requested_schema.model_dump(by_alias=True, exclude_none=True) if hasattr(q.requested_schema, "model_dump") else dict(q.requested_schema)
    assert schema["properties"]["decision"]["enum"] == ["once", "trust", "deny"], schema


def test_elicitation_approves_once(project):
    (project.dir / "odek.json").write_text(json.dumps({"sandbox_compose_project": PROJECT}))
    asker = Asker("accept", "once")

    async def go():
        async with session(project, compose=False, elicitation_callback=asker) as (s, _):
            r = await ok(s, "exec", command="redis-cli -h redis ping")
            assert r["stdout"].strip() == "PONG"
            check_question(asker)
            # The default sandbox is up: no second question.
            await ok(s, "exec", command="true")
            assert len(asker.asked) == 1
        # "once" is not stored.
        assert stored_keys(project) == ""
        async with session(project, compose=False) as (s, _):
            assert "needs operator approval" in await refused(s, "exec", command="true")

    run(go())
    assert wait_gone(project.dir) == []


def test_elicitation_trust_is_stored(project):
    (project.dir / "odek.json").write_text(json.dumps({"sandbox_compose_project": PROJECT}))
    asker = Asker("accept", "trust")

    async def go():
        assert stored_keys(project) == ""
        async with session(project, compose=False, elicitation_callback=asker) as (s, _):
            r = await ok(s, "exec", command="redis-cli -h redis ping")
            assert r["stdout"].strip() == "PONG"
            check_question(asker)
        assert stored_keys(project) != "", "trust not stored"
        # A later client that cannot be asked runs on the stored trust.
        async with session(project, compose=False) as (s, init):
            assert "NOT APPROVED YET" not in init.instructions
            r = await ok(s, "exec", command="redis-cli -h redis ping")
            assert r["stdout"].strip() == "PONG"

    run(go())
    assert wait_gone(project.dir) == []


def test_elicitation_may_approve_a_changed_file(project):
    """ODEK_APPROVE_PROJECT_SANDBOX=1 approves only the start-up settings; a
    client that can ask puts the agent's rewritten odek.json to the user."""
    (project.dir / "odek.json").write_text(json.dumps({"sandbox_compose_project": PROJECT}))
    asker = Asker("accept", "once")

    async def go():
        env = project.env(ODEK_APPROVE_PROJECT_SANDBOX="1")
        async with session(project, compose=False, env=env, elicitation_callback=asker) as (s, _):
            r = await ok(s, "exec", command="redis-cli -h redis ping")
            assert r["stdout"].strip() == "PONG"
            assert asker.asked == []  # the start-up settings: approved by the switch
            wide = json.dumps({"sandbox_compose_project": PROJECT, "sandbox_network": "bridge"})
            await ok(s, "exec", command=f"printf '%s' '{wide}' > /workspace/odek.json")
            up = await ok(s, "sandbox_up")
            assert len(asker.asked) == 1
            assert "bridge" in asker.asked[0].message, asker.asked[0].message
            assert len(containers_for(project.dir)) == 2, up
        assert stored_keys(project) == ""

    run(go())
    assert wait_gone(project.dir) == []


@pytest.mark.parametrize("answer", [("decline", None), ("cancel", None), ("accept", "deny")], ids=lambda a: "-".join(filter(None, a)))
def test_elicitation_refused(project, answer):
    (project.dir / "odek.json").write_text(json.dumps({"sandbox_compose_project": PROJECT}))
    asker = Asker(*answer)

    async def go():
        async with session(project, compose=False, elicitation_callback=asker) as (s, _):
            err = await refused(s, "exec", command="true")
            print(f"\n--- refusal (elicitation {answer}) ---\n{err}")
            assert "not approved" in err and f"{PROJECT}_backend" in err
            assert f"`odek approve -C {project.dir}`" in err, err
            check_question(asker)
            assert containers_for(project.dir) == []
            # Asked again on the next call; the server keeps serving.
            assert "not approved" in await refused(s, "sandbox_up")
            assert len(asker.asked) == 2
            assert (await ok(s, "sandbox_list"))["sandboxes"] == []
        assert stored_keys(project) == ""

    run(go())
    assert containers_for(project.dir) == []


MODERN = "2026-07-28"


@asynccontextmanager
async def modern(p: Project, *extra: str, compose: bool = True, env: dict[str, str] | None = None, **client):
    """A `Client` on protocol 2026-07-28 (no initialize; questions come back
    as an `InputRequiredResult`, which `Client.call_tool` answers through
    `elicitation_callback` and retries)."""
    params = StdioServerParameters(command=str(ODEK), args=p.args(*extra, compose=compose), env=env or p.env(), cwd=str(p.dir))
    async with Client(params, mode=MODERN, **client) as c:
        yield c


async def input_required(c: Client, tool: str, **args) -> dict:
    """One round of `tool`, which must ask: its `InputRequiredResult` as JSON."""
    r = await c.session.call_tool(tool, args, allow_input_required=True)
    assert isinstance(r, types.InputRequiredResult), f"{tool} did not ask: {r}"
    d = r.model_dump(by_alias=True, exclude_none=True, mode="json")
    assert list(d["inputRequests"]) == ["approval"], d
    assert d["inputRequests"]["approval"]["method"] == "elicitation/create", d
    assert d["requestState"], d
    return d


async def retry(c: Client, tool: str, asked: dict, action: str, decision: str | None = None, **args):
    """`tool` again with an answer to `asked` and its echoed requestState."""
    answer = ElicitResult(action=action, content={"decision": decision} if decision else None)
    return await c.session.call_tool(tool, args, input_responses={"approval": answer},
                                     request_state=asked["requestState"], allow_input_required=True)


def test_input_required_approves_once(project):
    (project.dir / "odek.json").write_text(json.dumps({"sandbox_compose_project": PROJECT}))
    asker = Asker("accept", "once")

    async def go():
        async with modern(project, compose=False, elicitation_callback=asker) as c:
            assert c.protocol_version == MODERN
            # One round by hand: the card is the call's result, not a request to the client.
            asked = await input_required(c, "exec", command="redis-cli -h redis ping")
            q = asked["inputRequests"]["approval"]["params"]
            print("\n--- input request ---\n" + json.dumps(q, indent=1))
            assert "odek.json" in q["message"] and f"{PROJECT}_backend" in q["message"], q
            assert q["requestedSchema"]["properties"]["decision"]["enum"] == ["once", "trust", "deny"], q
            assert asker.asked == [], "the server sent elicitation/create"
            assert containers_for(project.dir) == []
            # The SDK's driver: the callback answers the input request, the call is retried.
            r = await c.call_tool("exec", {"command": "redis-cli -h redis ping"})
            assert not r.is_error, text_of(r)
            assert r.structured_content["stdout"].strip() == "PONG"
            check_question(asker)
            assert len(containers_for(project.dir)) == 1
            # The default sandbox is up: no second question.
            r = await c.call_tool("exec", {"command": "true"})
            assert not r.is_error and len(asker.asked) == 1
        assert stored_keys(project) == ""

    run(go())
    assert wait_gone(project.dir) == []


@pytest.mark.parametrize("answer", [("accept", "deny"), ("decline", None), ("cancel", None)], ids=lambda a: "-".join(filter(None, a)))
def test_input_required_refused(project, answer):
    (project.dir / "odek.json").write_text(json.dumps({"sandbox_compose_project": PROJECT}))
    asker = Asker(*answer)

    async def go():
        async with modern(project, compose=False, elicitation_callback=asker) as c:
            r = await c.call_tool("exec", {"command": "touch ran"})
            assert r.is_error, r.structured_content
            err = text_of(r)
            print(f"\n--- refusal (input required {answer}) ---\n{err}")
            assert "not approved" in err and f"{PROJECT}_backend" in err, err
            assert f"`odek approve -C {project.dir}`" in err, err
            check_question(asker)
            assert containers_for(project.dir) == []
            # Asked again on the next call.
            r = await c.call_tool("sandbox_up", {})
            assert r.is_error and len(asker.asked) == 2
        assert stored_keys(project) == ""

    run(go())
    assert containers_for(project.dir) == []
    assert not (project.dir / "ran").exists(), "the command ran"


def test_input_required_refuses_a_forged_or_used_request_state(project):
    (project.dir / "odek.json").write_text(json.dumps({"sandbox_compose_project": PROJECT}))

    async def go():
        async with modern(project, compose=False, elicitation_callback=Asker("accept", "once")) as c:
            asked = await input_required(c, "exec", command="touch ran")
            forged = dict(asked, requestState=asked["requestState"][:-4] + "0000")
            r = await retry(c, "exec", forged, "accept", "once", command="touch ran")
            assert isinstance(r, types.CallToolResult) and r.is_error, r
            assert "requestState" in text_of(r), text_of(r)
            assert containers_for(project.dir) == []
            # The genuine one still answers, once.
            r = await retry(c, "sandbox_up", asked, "accept", "once")
            assert isinstance(r, types.CallToolResult) and not r.is_error, r
            assert len(containers_for(project.dir)) == 1
            r = await retry(c, "sandbox_up", asked, "accept", "once")
            assert isinstance(r, types.CallToolResult) and r.is_error, r
            assert "requestState" in text_of(r), text_of(r)
            assert len(containers_for(project.dir)) == 1

    run(go())
    assert wait_gone(project.dir) == []
    assert not (project.dir / "ran").exists(), "the command ran"


def test_input_required_asks_again_when_the_settings_change_between_rounds(project):
    (project.dir / "odek.json").write_text(json.dumps({"sandbox_compose_project": PROJECT}))

    async def go():
        async with modern(project, compose=False, elicitation_callback=Asker("accept", "once")) as c:
            asked = await input_required(c, "sandbox_up")
            assert "bridge" not in asked["inputRequests"]["approval"]["params"]["message"]
            wide = {"sandbox_compose_project": PROJECT, "sandbox_network": "bridge"}
            (project.dir / "odek.json").write_text(json.dumps(wide))
            again = await retry(c, "sandbox_up", asked, "accept", "once")
            assert isinstance(again, types.InputRequiredResult), f"the old answer approved new settings: {again}"
            again = again.model_dump(by_alias=True, exclude_none=True, mode="json")
            assert "bridge" in again["inputRequests"]["approval"]["params"]["message"], again
            assert again["requestState"] != asked["requestState"]
            assert containers_for(project.dir) == []
            r = await retry(c, "sandbox_up", again, "accept", "once")
            assert isinstance(r, types.CallToolResult) and not r.is_error, r
            assert len(containers_for(project.dir)) == 1

    run(go())
    assert wait_gone(project.dir) == []


def test_input_required_without_elicitation_is_refused_naming_odek_approve(project):
    (project.dir / "odek.json").write_text(json.dumps({"sandbox_compose_project": PROJECT}))

    async def go():
        async with modern(project, compose=False) as c:
            r = await c.session.call_tool("exec", {"command": "touch ran"}, allow_input_required=True)
            assert isinstance(r, types.CallToolResult) and r.is_error, r
            assert "needs operator approval" in text_of(r) and "odek approve" in text_of(r), text_of(r)

    run(go())
    assert containers_for(project.dir) == []
    assert not (project.dir / "ran").exists(), "the command ran"


def approve_at_a_terminal(p: Project, answer: str) -> tuple[int, str]:
    """`odek approve -C <project>` on a pseudo-terminal, answering `answer`
    at its question; its exit status and everything it wrote."""
    master, slave = os.openpty()
    proc = subprocess.Popen([str(ODEK), "approve", "-C", str(p.dir), "--sandbox-image", IMAGE],
                            stdin=slave, stdout=slave, stderr=slave, env=p.env(), cwd=str(p.dir))
    os.close(slave)
    out = b""

    def read(until: bytes | None) -> None:
        nonlocal out
        deadline = time.monotonic() + 60
        while until is None or until not in out:
            assert time.monotonic() < deadline, f"no {until!r} from odek approve:\n{out.decode(errors='replace')}"
            ready, _, _ = select.select([master], [], [], 1)
            if not ready:
                continue
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the terminal's other side closed
                return
            if not chunk:
                return
            out += chunk

    try:
        read(b"Trust these settings?")
        os.write(master, answer.encode() + b"\n")
        read(None)
        return proc.wait(timeout=60), out.decode(errors="replace")
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)


def test_odek_approve_lets_a_client_without_elicitation_launch(project):
    """A client that cannot elicit (Gemini CLI) is told `odek approve -C
    <dir>`; once the operator answers `t` there, the same client launches
    without being asked, and `odek approve` itself created nothing."""
    (project.dir / "odek.json").write_text(json.dumps({"sandbox_compose_project": PROJECT}))
    fix = f"odek approve -C {project.dir}"

    async def refused_first():
        async with session(project, compose=False) as (s, init):
            assert "NOT APPROVED YET" in init.instructions and fix in init.instructions, init.instructions
            err = await refused(s, "exec", command="true")
            print("\n--- refusal (no elicitation) ---\n" + err)
            assert f"`{fix}`" in err, err
            assert "does not support elicitation" in err, err
        assert containers_for(project.dir) == []

    run(refused_first())
    # A denial stores nothing (control for the trust below).
    code, out = approve_at_a_terminal(project, "n")
    assert code == 1, out
    assert stored_keys(project) == "" or "true" not in stored_keys(project), stored_keys(project)
    code, out = approve_at_a_terminal(project, "t")
    print("\n--- odek approve ---\n" + out)
    assert code == 0, out
    assert f"{PROJECT}_backend" in out  # the card
    assert "true" in stored_keys(project), "trust not stored"
    assert containers_for(project.dir) == [], "odek approve created a container"

    async def go():
        async with session(project, compose=False) as (s, init):
            assert "NOT APPROVED YET" not in init.instructions
            r = await ok(s, "exec", command="redis-cli -h redis ping")
            assert r["stdout"].strip() == "PONG"

    run(go())
    assert wait_gone(project.dir) == []


COMPOSE_DIR = REPO / "tests" / "fixtures" / "compose"
# The fixture's images and label of this checkout (tests/ns.sh).
COMPOSE_ENV = {**os.environ, "ODEK_TEST_NS": TEST_NS, "ODEK_TEST_IMAGES": f"odek-test-{TEST_NS}"}


@pytest.fixture
def own_compose():
    """The fixture Compose project under a name of this test's own (it goes
    down and up), taken down with its volumes afterwards."""
    name = f"odekmcpcycle{TEST_NS}x{os.getpid()}x{os.urandom(3).hex()}"
    subprocess.run(["bash", str(COMPOSE_DIR / "up.sh"), name], check=True, capture_output=True, env=COMPOSE_ENV)
    yield name
    subprocess.run(["bash", str(COMPOSE_DIR / "down.sh"), name], capture_output=True, env=COMPOSE_ENV)


def compose_down_up(name: str) -> None:
    """`docker-compose down` as an operator types it, which must exit 0
    with a sandbox open (it holds no endpoint on the project's networks),
    then `up` until healthy."""
    down = subprocess.run(["docker-compose", "-p", name, "-f", str(COMPOSE_DIR / "docker-compose.yml"), "down"],
                          capture_output=True, text=True, env=COMPOSE_ENV)
    assert down.returncode == 0 and "active endpoints" not in down.stderr, down.stderr
    for net in ("default", "backend"):
        assert subprocess.run(["docker", "network", "inspect", f"{name}_{net}"], capture_output=True).returncode != 0
    subprocess.run(["bash", str(COMPOSE_DIR / "up.sh"), name], check=True, capture_output=True, env=COMPOSE_ENV)


REACH = "redis-cli -h redis ping && pg_isready -h postgres"


def test_compose_down_and_up_with_a_session_open(project, own_compose):
    """The session's sandbox reaches redis and postgres; the project goes
    down (exit 0) and up; the next exec reaches the new containers by name."""

    async def go():
        args = ["mcp", "--sandbox-image", IMAGE, "--sandbox-compose", own_compose]
        async with session(project, args=args) as (s, _):
            r = await ok(s, "exec", command=REACH)
            assert r["exit_code"] == 0 and "PONG" in r["stdout"], r
            compose_down_up(own_compose)
            r = await ok(s, "exec", command=REACH)
            assert r["exit_code"] == 0 and "PONG" in r["stdout"], r

    run(go())
    assert wait_gone(project.dir) == []


def test_recreated_project_networks_are_approved_again(project, own_compose):
    """The project's odek.json asks for the Compose project. After a down
    and up, a client without elicitation (its sandbox launched on a stored
    trust of the old IDs) gets a tool error naming `odek approve` and
    nothing runs; a client with elicitation is asked again and, answering
    accept/once, its exec reaches the services."""
    (project.dir / "odek.json").write_text(json.dumps({"sandbox_compose_project": own_compose}))
    marker = project.dir / "ran"
    touch = f"touch /workspace/ran && {REACH}"
    args = ["mcp", "--sandbox-image", IMAGE]
    code, out = approve_at_a_terminal(project, "t")
    assert code == 0, out

    async def without_elicitation():
        async with session(project, args=args) as (s, _):
            r = await ok(s, "exec", command=REACH)
            assert "PONG" in r["stdout"], r
            compose_down_up(own_compose)
            err = await refused(s, "exec", command=touch)
            print("\n--- refusal (recreated, no elicitation) ---\n" + err)
            assert f"odek approve -C {project.dir}" in err, err
            assert not marker.exists(), "the refused command ran"

    run(without_elicitation())
    assert wait_gone(project.dir) == []

    asker = Asker("accept", "once")

    async def with_elicitation():
        async with session(project, args=args, elicitation_callback=asker) as (s, _):
            # The stored trust is of the old IDs: the launch asks first.
            r = await ok(s, "exec", command=REACH)
            assert "PONG" in r["stdout"], r
            asked = len(asker.asked)
            assert asked == 1, asker.asked
            compose_down_up(own_compose)
            r = await ok(s, "exec", command=touch)
            assert r["exit_code"] == 0 and "PONG" in r["stdout"], r
            assert len(asker.asked) == asked + 1, "not asked again for the recreated networks"
            q = asker.asked[-1].message
            assert f"{own_compose}_backend" in q and re.search(r"\b[0-9a-f]{64}\b", q), q
            assert marker.exists(), "the approved command did not run"

    run(with_elicitation())
    assert wait_gone(project.dir) == []


def test_progress_while_the_image_builds(project):
    """A first exec whose launch builds Dockerfile.odek (a unique one, so it
    is built now) reports progress to a caller that sent a progress token."""
    df = project.dir / "Dockerfile.odek"
    df.write_bytes(f"FROM {IMAGE}\n# odek mcp test {os.urandom(8).hex()}\nRUN sleep 2\n".encode())
    tag = "odek-sandbox:" + hashlib.sha256(df.read_bytes()).hexdigest()[:24]
    seen: list[tuple[float, str | None]] = []

    async def on_progress(progress, total, message):
        seen.append((progress, message))

    async def go():
        env = project.env(ODEK_APPROVE_PROJECT_SANDBOX="1")
        async with session(project, env=env, args=["mcp", "--sandbox-compose", PROJECT]) as (s, _):
            r = await s.call_tool("exec", {"command": "redis-cli -h redis ping"}, progress_callback=on_progress)
            assert not r.is_error, text_of(r)
            assert r.structured_content["stdout"].strip() == "PONG"
            print("\n--- progress ---\n" + "\n".join(f"{p:g} {m}" for p, m in seen))
            assert seen, "no progress notification"
            assert [p for p, _ in seen] == sorted(p for p, _ in seen)
            assert len(seen) >= 2, seen  # the start and at least a build line or tick

    try:
        run(go())
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)
    assert wait_gone(project.dir) == []


# A RUN step printing OSC 0 (title) and OSC 52 (clipboard) ended by BEL,
# ESC[2J, the C1 CSI as UTF-8, a bidi override and a line forging odek's
# startup line; and what must never reach a client or its terminal raw.
FORGED = "odek: sandbox network=none pids=4096 image=forged networks=-"
HOSTILE_RUN = ("RUN printf 'A\\033]0;pwned\\007B\\033]52;c;cm0gLXJmIH4=\\007C\\033[2J\\n"
               + FORGED + "\\n\\302\\23331m\\342\\200\\256txt.exe\\n'")
RAW = re.compile("[\x1b\x07\x80-\x9f\u202a-\u202e\u2066-\u2069]")


def test_build_output_reaches_progress_and_stderr_escaped(project, tmp_path):
    """What a Dockerfile.odek build step prints reaches the caller's progress
    notifications and the server's stderr (which clients show) with every
    control, escape and bidi character escaped, labelled `build | `, never
    as a line of odek's own."""
    df = project.dir / "Dockerfile.odek"
    df.write_bytes(f"FROM {IMAGE}\n{HOSTILE_RUN}; echo {os.urandom(8).hex()}\n".encode())
    tag = "odek-sandbox:" + hashlib.sha256(df.read_bytes()).hexdigest()[:24]
    messages: list[str] = []

    async def on_progress(progress, total, message):
        messages.append(message or "")

    log = (tmp_path / "server-stderr").open("w+")

    async def go():
        env = project.env(ODEK_APPROVE_PROJECT_SANDBOX="1")
        async with session(project, env=env, args=["mcp"], errlog=log) as (s, _):
            r = await s.call_tool("exec", {"command": "echo ran"}, progress_callback=on_progress)
            assert not r.is_error, text_of(r)
            assert r.structured_content["stdout"].strip() == "ran"

    try:
        run(go())
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)
    log.seek(0)
    stderr = log.read()
    for what, text in [("progress", "\n".join(messages)), ("stderr", stderr)]:
        assert not RAW.search(text), f"{what} carries {RAW.search(text).group()!r} raw: {text!r}"
        assert not any(line.startswith(FORGED) for line in text.splitlines()), f"{what} forges a line: {text}"
    built = [m for m in messages if m.startswith("build | ")]
    assert any("A\\x1b]0;pwned\\x07B" in m for m in built), messages
    assert f"odek: build | {FORGED}" in stderr, stderr
    assert wait_gone(project.dir) == []


async def output_until(s: ClientSession, pid: str, pred, **args) -> dict:
    """process_output from cursor 0 until `pred(result)` (20 s at most)."""
    deadline = time.monotonic() + 20
    while True:
        r = await ok(s, "process_output", process_id=pid, cursor=0, **args)
        if pred(r):
            return r
        assert time.monotonic() < deadline, r
        await asyncio.sleep(0.1)


def test_background_server_answers_a_later_exec_and_process_kill_ends_it(project):
    """A server started with `background` answers a later exec; its output
    comes by cursor; process_kill ends it (process_output then says ended);
    sandbox_down ends everything. A background job that keeps stdout open
    (`sleep 30 &`) holds neither its call nor the next."""
    async def go():
        async with session(project, compose=False) as (s, _):
            if not (await ok(s, "describe"))["environment"]["supervisor"]["on"]:
                # Without odek's supervisor (ODEK_SUPERVISOR unset, none
                # beside odek): refused, naming the fix, and nothing ran.
                assert not os.environ.get("ODEK_SUPERVISOR")
                err = await refused(s, "exec", background=True, command="touch /workspace/ran")
                assert "supervisor" in err and "nothing ran" in err, err
                assert not (project.dir / "ran").exists()
                return
            r = await ok(s, "exec", background=True,
                         command="echo starting; exec redis-server --port 7002 --save '' --appendonly no")
            assert set(r) == {"sandbox_id", "process_id"}, r
            pid = r["process_id"]
            first = await output_until(s, pid, lambda o: "Ready to accept connections" in o["stdout"])
            assert first["stdout"].startswith("starting\n"), first
            assert (first["cursor"], first["dropped_bytes"], first["running"], first["exit_code"]) == (0, 0, True, None)
            assert first["next_cursor"] == len(first["stdout"].encode()) + len(first["stderr"].encode())
            # A later exec reaches it.
            ping = await ok(s, "exec", command="redis-cli -p 7002 ping")
            assert (ping["exit_code"], ping["stdout"]) == (0, "PONG\n"), ping
            # From the cursor on: only what came since.
            since = await ok(s, "process_output", process_id=pid, cursor=first["next_cursor"])
            assert since["cursor"] == first["next_cursor"] and since["running"], since
            assert "starting" not in since["stdout"]
            # The foreground case: a background job holding stdout does not
            # hold the call (its timeout never fires) or the next.
            held = await ok(s, "exec", command="sleep 30 & echo started", timeout_secs=20)
            assert (held["exit_code"], held["stdout"], held["timed_out"]) == (0, "started\n", False), held
            nxt = await ok(s, "exec", command="pgrep -x sleep >/dev/null && echo still", timeout_secs=20)
            assert (nxt["stdout"], nxt["timed_out"]) == ("still\n", False), nxt
            # process_kill ends it, and process_output then says it ended.
            # The foreground job's `sleep 30`, orphaned while redis ran, may
            # be redis's as far as odek can tell: named, never a kill
            # claimed over it.
            held_pids = sandbox_pids(containers_for(project.dir)[0], "sleep 30")
            assert held_pids, "positive control: the job of the foreground exec runs"
            k = await ok(s, "process_kill", process_id=pid)
            assert (k["running"], k["killed"], k["exit_code"]) == (False, False, 137), k
            assert set(k["left_running"]) == held_pids, (k, held_pids)
            after = await ok(s, "process_output", process_id=pid, cursor=first["next_cursor"])
            assert (after["running"], after["killed"], after["left_running"]) == (False, False, k["left_running"]), after
            gone = await ok(s, "exec", command="redis-cli -p 7002 ping; pgrep -x redis-server || echo gone")
            assert "gone" in gone["stdout"] and "PONG" not in gone["stdout"], gone
            err = await refused(s, "process_output", process_id="1-999")
            assert "no background process" in err, err
            # Another one, ended by sandbox_down with its sandbox.
            sb = r["sandbox_id"]
            r2 = await ok(s, "exec", background=True, command="sleep 300", sandbox_id=sb)
            await output_until(s, r2["process_id"], lambda o: o["running"], sandbox_id=sb)
            names = containers_for(project.dir)
            assert len(names) == 1
            await ok(s, "sandbox_down", sandbox_id=sb)
            assert wait_gone(project.dir) == []
            err = await refused(s, "process_output", process_id=r2["process_id"], sandbox_id=sb)
            assert "no sandbox with id" in err, err

    run(go())
    assert wait_gone(project.dir) == []


def sandbox_pids(container: str, name: str) -> set[int]:
    """Pids (in the sandbox's PID namespace) of its live processes whose
    command line is `name`, from /proc by `docker exec` (ps may be absent)."""
    out = docker("exec", container, "sh", "-c",
                 f"for d in /proc/[0-9]*; do c=$(tr '\\0' ' ' < $d/cmdline 2>/dev/null); "
                 f"s=$(cut -d' ' -f3 $d/stat 2>/dev/null); "
                 f"[ \"$c\" = \"{name} \" ] && [ \"$s\" != Z ] && echo ${{d#/proc/}}; done; true")
    return {int(x) for x in out.split()}


def test_a_background_kill_is_claimed_only_when_nothing_survives(project):
    """A background process whose timeout strikes while another command
    runs, and which left `setsid` orphans (its own session: odek cannot tell
    them from the other command's): process_output and process_kill say
    `killed: false` and name every survivor in `left_running` (as a
    foreground exec's note does), never `killed: true` while they run."""
    async def go():
        async with session(project, compose=False) as (s, _):
            if not (await ok(s, "describe"))["environment"]["supervisor"]["on"]:
                pytest.skip("needs odek's supervisor (ODEK_SUPERVISOR)")
            other = await ok(s, "exec", background=True, command="sleep 600")
            sb = other["sandbox_id"]
            r = await ok(s, "exec", background=True, timeout_secs=3, sandbox_id=sb,
                         command='setsid sh -c "sleep 1001 &"; setsid sleep 1002 & setsid sleep 1002 & sleep 500')
            pid = r["process_id"]
            ended = await output_until(s, pid, lambda o: not o["running"], sandbox_id=sb)
            container = containers_for(project.dir)[0]
            alive = sandbox_pids(container, "sleep 1001") | sandbox_pids(container, "sleep 1002")
            assert (ended["exit_code"], ended["timed_out"]) == (137, True), ended
            # Never a kill claimed while its processes run: each is named.
            assert alive, "positive control: the setsid orphans survive a kill while another command runs"
            assert ended["killed"] is False, (ended, alive)
            assert alive <= set(ended["left_running"]), (ended, alive)
            assert "could not kill the whole command" in ended["kill_note"], ended
            k = await ok(s, "process_kill", process_id=pid, sandbox_id=sb)
            alive = sandbox_pids(container, "sleep 1001") | sandbox_pids(container, "sleep 1002")
            if alive:
                assert k["killed"] is False and alive <= set(k["left_running"]), (k, alive)
            # The foreground path says the same in the same words.
            fg_other = await ok(s, "exec", background=True, command="sleep 600", sandbox_id=sb)
            fg = await ok(s, "exec", timeout_secs=3, sandbox_id=sb,
                          command='setsid sh -c "sleep 1001 &"; sleep 500')
            assert (fg["timed_out"], fg["killed"]) == (True, False), fg
            assert "could not kill the whole command" in fg["stderr"], fg
            await ok(s, "process_kill", process_id=fg_other["process_id"], sandbox_id=sb)
            await ok(s, "sandbox_down", sandbox_id=sb)

    run(go())
    assert wait_gone(project.dir) == []


def test_process_kill_of_an_ended_process_kills_what_is_left_and_says_so(project):
    """A background process whose main process ended at once, leaving a job
    in its session (`sleep 1003 &`) and one in a session of its own
    (`setsid sleep 1004 &`), while nothing else ran: process_kill kills
    both and says `killed: true` only once they are gone."""
    async def go():
        async with session(project, compose=False) as (s, _):
            if not (await ok(s, "describe"))["environment"]["supervisor"]["on"]:
                pytest.skip("needs odek's supervisor (ODEK_SUPERVISOR)")
            r = await ok(s, "exec", background=True, command="sleep 1003 & setsid sleep 1004 & true")
            sb, pid = r["sandbox_id"], r["process_id"]
            ended = await output_until(s, pid, lambda o: not o["running"], sandbox_id=sb)
            assert (ended["exit_code"], ended["killed"], ended["left_running"]) == (0, False, []), ended
            container = containers_for(project.dir)[0]
            left = sandbox_pids(container, "sleep 1003") | sandbox_pids(container, "sleep 1004")
            assert len(left) == 2, f"positive control: both jobs run: {left}"
            k = await ok(s, "process_kill", process_id=pid, sandbox_id=sb)
            alive = sandbox_pids(container, "sleep 1003") | sandbox_pids(container, "sleep 1004")
            assert alive == set(), (k, alive)
            assert (k["killed"], k["left_running"], k["exit_code"]) == (True, [], 0), k
            await ok(s, "sandbox_down", sandbox_id=sb)

    run(go())
    assert wait_gone(project.dir) == []


def test_process_kill_of_a_process_with_nothing_left_kills_nothing_and_says_so(project):
    """A background process that ended by itself and left nothing running:
    process_kill has nothing to kill, so `killed` is false and `kill_note`
    says so; its own exit status stands."""
    async def go():
        async with session(project, compose=False) as (s, _):
            if not (await ok(s, "describe"))["environment"]["supervisor"]["on"]:
                pytest.skip("needs odek's supervisor (ODEK_SUPERVISOR)")
            r = await ok(s, "exec", background=True, command="echo done")
            sb, pid = r["sandbox_id"], r["process_id"]
            ended = await output_until(s, pid, lambda o: not o["running"], sandbox_id=sb)
            assert (ended["exit_code"], ended["stdout"]) == (0, "done\n"), ended
            k = await ok(s, "process_kill", process_id=pid, sandbox_id=sb)
            assert (k["killed"], k["left_running"], k["exit_code"]) == (False, [], 0), k
            assert k["kill_note"].startswith("nothing to kill"), k
            await ok(s, "sandbox_down", sandbox_id=sb)

    run(go())
    assert wait_gone(project.dir) == []


def test_unknown_and_foreign_ids(project, tmp_path):
    (tmp_path / "other").mkdir()
    other = Project(tmp_path / "other")

    async def go():
        async with session(project) as (a, _):
            up = await ok(a, "sandbox_up")
            async with session(other) as (b, _):
                for bad in (up["sandbox_id"], up["container"], "sbx-0000000000000000", "../etc"):
                    for tool in ("exec", "describe", "sandbox_down", "sandbox_narrow"):
                        args = {"command": "true"} if tool == "exec" else {}
                        err = await refused(b, tool, sandbox_id=bad, **args)
                        assert "no sandbox with id" in err
                assert containers_for(other.dir) == []
            # The first server's sandbox is untouched and still works.
            r = await ok(a, "exec", command="echo alive", sandbox_id=up["sandbox_id"])
            assert r["stdout"] == "alive\n"
            err = await refused(a, "exec", command="true", sandbox_id=up["container"])
            assert "no sandbox with id" in err

    run(go())
    assert wait_gone(project.dir) == []


def test_bad_requests_get_error_responses(project):
    async def go():
        async with session(project, compose=False) as (s, _):
            with pytest.raises(MCPError):
                await s.call_tool("no_such_tool", {})
            # Wrong argument types: a tool error the model can correct
            # (the SDK's choice, as the 2025-11-25 revision recommends).
            assert "invalid type" in await refused(s, "exec", command=5)
            assert "invalid type" in await refused(s, "exec", command="true", timeout_secs="soon")
            assert "missing field" in await refused(s, "sandbox_down")
            assert "unknown field" in await refused(s, "exec", command="true", cwd="/")
            # A hostile key is quoted back escaped, never raw (SPEC §9.3).
            for tool in ("exec", "sandbox_narrow"):
                args = {"command": "true"} if tool == "exec" else {}
                err = await refused(s, tool, **args, **{"k\x1b]0;pwned\x07\u009b\u202e": 1})
                assert "unknown field" in err, err
                assert not RAW.search(err), f"{tool}: raw control in {err!r}"
                assert "\\x1b]0;pwned\\x07" in err, err
            err = await refused(s, "exec", command="x" * (10 * 1024 * 1024))
            assert "at most" in err
            err = await refused(s, "exec", command="true", argv=["true"])
            assert "not both" in err
            assert containers_for(project.dir) == []
            # Still serving.
            r = await ok(s, "exec", command="echo fine")
            assert r["stdout"] == "fine\n"

    run(go())
    assert wait_gone(project.dir) == []


# ------------------------------------------------- raw JSON-RPC over stdio


class Raw:
    """`odek mcp` driven by hand-written JSON-RPC lines."""

    def __init__(self, p: Project, *extra: str, compose: bool = False, args: list[str] | None = None,
                 env: dict[str, str] | None = None, stderr=None):
        self.proc = subprocess.Popen(
            [str(ODEK), *(args or p.args(*extra, compose=compose))],
            cwd=p.dir,
            env=env or p.env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr or sys.stderr,
        )
        self.next_id = 100

    def send(self, obj_or_line) -> None:
        line = obj_or_line if isinstance(obj_or_line, (bytes, str)) else json.dumps(obj_or_line)
        if isinstance(line, str):
            line = line.encode()
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def recv(self) -> dict:
        line = self.proc.stdout.readline()
        assert line, "the server closed stdout"
        return json.loads(line)

    def request(self, method: str, params: dict | None = None) -> dict:
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        while True:
            r = self.recv()
            if r.get("id") == self.next_id:
                return r

    def initialize(self) -> dict:
        r = self.request(
            "initialize",
            {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return r


def test_malformed_json_rpc(project):
    raw = Raw(project)
    try:
        assert "result" in raw.initialize()
        # Not JSON at all: ignored by the SDK (no id to answer; see docs/MCP.md),
        # and the next request is answered.
        raw.send(b"{this is not json")
        assert "result" in raw.request("ping")
        # JSON, but not a JSON-RPC message: an Invalid Request error response.
        raw.send({"jsonrpc": "2.0", "id": 7, "method": 5})
        r = raw.recv()
        assert r["error"]["code"] == -32600, r
        # Unknown method.
        assert "error" in raw.request("no/such/method", {})
        # 10 MiB of arguments to an unknown tool: an error response.
        r = raw.request("tools/call", {"name": "nope", "arguments": {"blob": "y" * (10 * 1024 * 1024)}})
        assert "error" in r
        assert "result" in raw.request("ping")
        assert raw.proc.poll() is None
    finally:
        raw.proc.stdin.close()
        assert raw.proc.wait(timeout=30) == 0
    assert containers_for(project.dir) == []


def test_a_message_over_the_limit_is_answered_with_an_error(project, tmp_path):
    """A request longer than the server reads in one message (97 MiB) is
    not dropped in silence: the client gets an error response for its id
    naming the limit, stderr says so, and the next request is served. (A
    response is never awaited past 120 s, so a server that drops the line
    fails here instead of hanging the suite.)"""
    limit = 6 * 16 * 1024 * 1024 + 1024 * 1024
    err = (tmp_path / "stderr").open("w+b")
    raw = Raw(project, stderr=err)
    try:
        assert "result" in raw.initialize()
        head = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"x","content":"'
        raw.send(head + b"A" * (limit + 1) + b'"}}}')
        raw.send({"jsonrpc": "2.0", "id": 8, "method": "ping"})
        got = {}

        def too_long(*_):
            raise AssertionError(f"no answer to the long request within 120 s (got {got})")

        # An alarm, not select(): both answers may sit in the reader's buffer.
        previous = signal.signal(signal.SIGALRM, too_long)
        signal.alarm(120)
        try:
            while 7 not in got or 8 not in got:
                r = raw.recv()
                got[r.get("id")] = r
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
        e = got[7]["error"]
        assert e["code"] == -32600, e
        assert "tools/call was not read" in e["message"] and str(limit) in e["message"], e
        assert e["data"] == {"bytes": len(head) + limit + 1 + len(b'"}}}'), "limit": limit}, e
        assert "result" in got[8]
        assert "result" in raw.request("ping")
    finally:
        raw.proc.stdin.close()
        assert raw.proc.wait(timeout=30) == 0
    err.seek(0)
    said = err.read().decode()
    assert f"longer than the {limit} bytes odek mcp reads in one message" in said, said
    assert containers_for(project.dir) == []


def test_a_client_without_initialize(project):
    """The stateless revision: a client that sends no initialize but puts the
    protocol version and its capabilities in each request's _meta is served
    (tools/list, and an exec that launches the sandbox); one that sends
    neither gets an error response, not a crash."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    raw = Raw(project)
    try:
        r = raw.request("tools/list", {"_meta": meta})
        names = {t["name"] for t in r["result"]["tools"]}
        assert {"exec", "describe", "sandbox_up", "sandbox_down", "sandbox_list", "sandbox_narrow"} <= names, r
        r = raw.request("tools/call", {"_meta": meta, "name": "exec", "arguments": {"command": "echo stateless"}})
        assert r["result"]["structuredContent"]["stdout"] == "stateless\n", r
    finally:
        raw.proc.stdin.close()
        raw.proc.wait(timeout=30)
    assert wait_gone(project.dir) == []
    raw = Raw(project)
    try:
        r = raw.request("tools/list", {})
        assert "error" in r, r
    finally:
        raw.proc.stdin.close()
        raw.proc.wait(timeout=30)


def launch_two(raw: Raw) -> list[str]:
    raw.initialize()
    a = raw.request("tools/call", {"name": "exec", "arguments": {"command": "true"}})
    b = raw.request("tools/call", {"name": "sandbox_up", "arguments": {}})
    assert not a["result"]["isError"] and not b["result"]["isError"], (a, b)
    return [a["result"]["structuredContent"]["sandbox_id"], b["result"]["structuredContent"]["sandbox_id"]]


def test_client_disconnect_removes_sandboxes(project):
    raw = Raw(project)
    launch_two(raw)
    assert len(containers_for(project.dir)) == 2
    raw.proc.stdin.close()
    assert raw.proc.wait(timeout=30) == 0
    assert containers_for(project.dir) == []


@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129), (signal.SIGQUIT, 131)])
def test_signal_removes_sandboxes(project, sig, code):
    raw = Raw(project)
    launch_two(raw)
    assert len(containers_for(project.dir)) == 2
    raw.proc.send_signal(sig)
    assert raw.proc.wait(timeout=30) == code
    assert containers_for(project.dir) == []


@pytest.mark.parametrize("trigger", ["sleep 3", "Successfully tagged"], ids=["building", "built"])
def test_sigterm_during_a_launch_leaves_nothing(project, trigger):
    """SIGTERM while a sandbox_up builds its Dockerfile.odek, or as the build
    ends and the container is being created: the server cancels the launch
    in flight, waits for it to remove what it made, and exits 143."""
    df = project.dir / "Dockerfile.odek"
    df.write_bytes(f"FROM {IMAGE}\n# odek mcp sigterm test {os.urandom(8).hex()}\nRUN sleep 3\n".encode())
    tag = "odek-sandbox:" + hashlib.sha256(df.read_bytes()).hexdigest()[:24]
    raw = Raw(project, args=["mcp"], env=project.env(ODEK_APPROVE_PROJECT_SANDBOX="1"))
    try:
        raw.initialize()
        raw.send({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                  "params": {"name": "sandbox_up", "arguments": {}, "_meta": {"progressToken": "t"}}})
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            m = raw.recv()
            assert m.get("id") != 9, f"the launch ended before the trigger: {m}"
            if m.get("method") == "notifications/progress" and trigger in (m["params"].get("message") or ""):
                break
        raw.proc.send_signal(signal.SIGTERM)
        assert raw.proc.wait(timeout=60) == 143
        assert containers_for(project.dir) == []
        time.sleep(3)
        assert containers_for(project.dir) == [], "a container appeared after the server stopped"
    finally:
        if raw.proc.poll() is None:
            raw.proc.kill()
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)


def test_sigkill_leaves_no_sandbox_without_gc(project):
    """After SIGKILL nothing can clean up in-process: the engine removes the
    sandboxes by itself (SPEC §6.1 owner lifetime) once the dead server's
    connections to their stdin are gone, within 10 s and with no gc run.
    They are ephemeral, labelled with the server as their owner (sandbox_up
    makes no detached sandbox)."""
    raw = Raw(project)
    launch_two(raw)
    pid = raw.proc.pid
    left = containers_for(project.dir)
    assert len(left) == 2
    for c in left:
        labels = json.loads(docker("inspect", "-f", "{{json .Config.Labels}}", c))
        assert labels["dev.odek.owner-pid"] == str(pid)
        assert "dev.odek.detached" not in labels or labels["dev.odek.detached"] != "true"
    raw.proc.kill()
    raw.proc.wait(timeout=30)
    assert wait_gone(project.dir, limit=10.0) == [], "sandboxes outlived the SIGKILLed server"


# ------------------------------------------------------------- file tools

# The command user of the file-tool sandboxes: not the suite's own uid (root
# in CI), so a file's owner on the host shows whose write it was.
FILE_USER = 1000


def file_project(project: Project) -> list[str]:
    """The server's arguments for file-tool tests: sandboxes as FILE_USER
    (the project directory writable by it)."""
    project.dir.chmod(0o777)
    return project.args("--sandbox-user", f"{FILE_USER}:{FILE_USER}", compose=False)


async def supervised(s: ClientSession, project: Project) -> bool:
    """True when the sandbox runs odek's supervisor; without it (ODEK_SUPERVISOR
    unset or empty) the file tools are refused naming the fix, nothing
    written — checked here, and the caller returns."""
    if (await ok(s, "describe"))["environment"]["supervisor"]["on"]:
        return True
    assert not os.environ.get("ODEK_SUPERVISOR"), "ODEK_SUPERVISOR names a supervisor, yet it is off"
    err = await refused(s, "write_file", path="made.txt", content="x")
    assert "supervisor" in err and "ODEK_SUPERVISOR=" in err and "nothing was done" in err, err
    assert not (project.dir / "made.txt").exists()
    return False


def test_file_tools_round_trip_large_and_binary_content(project):
    """300 KiB of text (far over what a shell argument carries) through
    write_file and back through read_file, in pieces too; binary content in
    base64 and refused as text; the host file is the command user's; a
    listing with types."""
    text = "".join(f"{i:08} the quick brown fox jumps over the lazy dog, café\n" for i in range(6000))
    assert len(text.encode()) > 300 * 1024
    blob = bytes(range(256)) * 300

    async def go():
        async with session(project, args=file_project(project)) as (s, _):
            if not await supervised(s, project):
                return
            w = await ok(s, "write_file", path="src/deep/big.txt", content=text)
            assert (w["path"], w["bytes_written"], w["created"]) == ("/workspace/src/deep/big.txt", len(text.encode()), True), w
            host = project.dir / "src" / "deep" / "big.txt"
            assert host.read_text() == text
            st = host.stat()
            assert (st.st_uid, st.st_gid) == (FILE_USER, FILE_USER), "not the command user's"
            r = await ok(s, "read_file", path="src/deep/big.txt")
            assert r["content"] == text
            assert (r["size"], r["offset"], r["truncated"], r["next_offset"], r["limit"]) == (len(text.encode()), 0, False, None, 4194304), {k: v for k, v in r.items() if k != "content"}
            piece = await ok(s, "read_file", path="/workspace/src/deep/big.txt", offset=9, length=20)
            assert piece["content"] == text[9:29] and piece["truncated"] and piece["next_offset"] == 29
            # Binary, in base64.
            b64 = __import__("base64").b64encode(blob).decode()
            await ok(s, "write_file", path="bin/blob", content=b64, encoding="base64")
            assert (project.dir / "bin" / "blob").read_bytes() == blob
            r = await ok(s, "read_file", path="bin/blob", encoding="base64")
            assert r["content"] == b64 and r["encoding"] == "base64"
            err = await refused(s, "read_file", path="bin/blob")
            assert "not UTF-8" in err and "base64" in err, err
            # A listing.
            (project.dir / "link").symlink_to("src")
            l = await ok(s, "list_directory", path=".")
            assert l["listing"] == "[DIR] bin\n[SYMLINK] link -> src\n[DIR] src", l["listing"]
            assert [(e["name"], e["type"]) for e in l["entries"]] == [("bin", "dir"), ("link", "symlink"), ("src", "dir")]
            err = await refused(s, "read_file", path="nope.txt")
            assert "does not exist in the sandbox" in err, err

    run(go())
    assert wait_gone(project.dir) == []


def test_write_file_of_16_mib_in_base64_round_trips(project):
    """write_file's documented limit, 16 MiB, in base64: a request line of
    22 MiB (over rmcp's own 16 MiB line limit, which used to drop it and
    leave the client waiting) reaches the sandbox whole, and reads back the
    same by size and sha256 (through exec and through read_file's pieces).
    The write is not awaited past 600 s: a dropped request fails the test."""
    blob = os.urandom(16 * 1024 * 1024)
    digest = hashlib.sha256(blob).hexdigest()
    b64 = __import__("base64").b64encode(blob).decode()

    async def go():
        async with session(project, args=file_project(project)) as (s, _):
            if not await supervised(s, project):
                return
            w = await asyncio.wait_for(ok(s, "write_file", path="big.bin", content=b64, encoding="base64"), 600)
            assert w["bytes_written"] == len(blob), w
            r = await ok(s, "exec", command="wc -c < big.bin; sha256sum big.bin")
            assert r["stdout"].split()[:2] == [str(len(blob)), digest], r["stdout"]
            got, offset = b"", 0
            while True:
                piece = await ok(s, "read_file", path="big.bin", encoding="base64", offset=offset)
                got += __import__("base64").b64decode(piece["content"])
                if not piece["truncated"]:
                    break
                offset = piece["next_offset"]
            assert (len(got), hashlib.sha256(got).hexdigest()) == (len(blob), digest)

    run(go())
    assert wait_gone(project.dir) == []


def test_list_directory_of_a_huge_directory_is_capped(project):
    """20000 entries: the first 10000 by name, `truncated`, `total`, and a
    last line of `listing` saying how many were left out; a /proc file is
    read to its end."""
    many = project.dir / "many"
    many.mkdir()
    for i in range(20000):
        (many / f"f{i:05}-{'x' * 100}").touch()

    async def go():
        async with session(project, args=file_project(project)) as (s, _):
            if not await supervised(s, project):
                return
            l = await ok(s, "list_directory", path="many")
            assert (len(l["entries"]), l["total"], l["truncated"]) == (10000, 20000, True), l["total"]
            assert l["entries"][-1]["name"] == f"f09999-{'x' * 100}"
            lines = l["listing"].split("\n")
            assert len(lines) == 10001 and lines[-1].startswith("(10000 more entries not shown"), lines[-1]
            r = await ok(s, "read_file", path="/proc/version")
            assert r["content"].startswith("Linux version") and r["size"] == len(r["content"].encode()), r

    run(go())
    assert wait_gone(project.dir) == []


def test_edit_file_refuses_ambiguous_and_absent_text_leaving_the_file(project):
    async def go():
        async with session(project, args=file_project(project)) as (s, _):
            if not await supervised(s, project):
                return
            f = project.dir / "a.py"
            before = "x = 1\ny = 2\nx = 1\n"
            f.write_text(before)
            st = f.stat()
            err = await refused(s, "edit_file", path="a.py", edits=[{"oldText": "y = 2", "newText": "y = 3"},
                                                                    {"oldText": "x = 1", "newText": "x = 9"}])
            assert "more than once" in err and "edit 2 of 2" in err and "nothing was written" in err, err
            err = await refused(s, "edit_file", path="a.py", edits=[{"oldText": "z = 0", "newText": "z = 1"}])
            assert "not in /workspace/a.py" in err and "nothing was written" in err, err
            after = f.stat()
            assert f.read_text() == before
            assert (after.st_ino, after.st_mtime_ns) == (st.st_ino, st.st_mtime_ns), "the file was rewritten"
            r = await ok(s, "edit_file", path="a.py", edits=[{"oldText": "y = 2", "newText": "y = 3"}])
            assert r["diff"] == "--- a/workspace/a.py\n+++ b/workspace/a.py\n@@ -1,3 +1,3 @@\n x = 1\n-y = 2\n+y = 3\n x = 1\n", r
            assert f.read_text() == "x = 1\ny = 3\nx = 1\n"

    run(go())
    assert wait_gone(project.dir) == []


def test_write_file_to_a_read_only_workspace_is_refused_naming_why(project):
    async def go():
        async with session(project, args=file_project(project)) as (s, _):
            if not await supervised(s, project):
                return
            child = await ok(s, "sandbox_narrow", readonly=True)
            err = await refused(s, "write_file", sandbox_id=child["sandbox_id"], path="new.txt", content="x")
            assert "read-only" in err and "sandbox_readonly" in err and "EROFS" in err and "nothing was written" in err, err
            assert not (project.dir / "new.txt").exists()
            # The parent's workspace stays writable; the child can read.
            await ok(s, "write_file", path="new.txt", content="from the parent")
            r = await ok(s, "read_file", sandbox_id=child["sandbox_id"], path="new.txt")
            assert r["content"] == "from the parent"

    run(go())
    assert wait_gone(project.dir) == []


def test_a_planted_symlink_is_followed_inside_the_sandbox_only(project, tmp_path):
    """A symlink in /workspace naming a host path outside the workdir (a host
    file in the host's /tmp) and one naming /etc/hostname resolve in the
    sandbox's own file system: the host file is neither read nor written
    (its content, inode and times unchanged), /etc/hostname is the
    container's."""
    import tempfile
    fd, name = tempfile.mkstemp(prefix="odek-mcp-canary-", dir="/tmp")
    os.write(fd, b"HOST SECRET\n")
    os.close(fd)
    canary = Path(name)
    canary.chmod(0o666)
    before = canary.stat()

    async def go():
        async with session(project, args=file_project(project)) as (s, _):
            if not await supervised(s, project):
                return
            (project.dir / "to-host").symlink_to(canary)
            (project.dir / "hostname").symlink_to("/etc/hostname")
            err = await refused(s, "read_file", path="to-host")
            assert "does not exist in the sandbox" in err and "HOST SECRET" not in err, err
            r = await ok(s, "read_file", path="hostname")
            cid = containers_for(project.dir)[0]
            assert cid.startswith(r["content"].strip()), (r["content"], cid)
            assert r["content"] != Path("/etc/hostname").read_text()
            w = await ok(s, "write_file", path="to-host", content="through the link\n")
            assert w["path"] == str(canary), w
            r = await ok(s, "read_file", path=str(canary))
            assert r["content"] == "through the link\n"
            assert (project.dir / "to-host").is_symlink()

    try:
        run(go())
        after = canary.stat()
        assert (after.st_ino, after.st_size, after.st_mtime_ns, after.st_atime_ns) == \
            (before.st_ino, before.st_size, before.st_mtime_ns, before.st_atime_ns), "the host file was touched"
        assert canary.read_bytes() == b"HOST SECRET\n"
    finally:
        canary.unlink()
    assert wait_gone(project.dir) == []


def test_sandbox_log_lists_the_sessions_commands_without_env_values(project):
    """The record (docs/MCP.md, "Record"): after the session, `odek sandbox
    log <container>` lists the commands `exec` ran in the conversation's
    sandbox, the file tool's path and `sandbox_list`, with the names of
    `exec`'s env variables and never their values (the value did reach the
    command: the control); the log file is private (0600)."""
    secret = "tok-mcp-" + os.urandom(6).hex()
    content = "file-content-" + os.urandom(6).hex()

    async def go() -> str:
        async with session(project, compose=False) as (s, _):
            r = await ok(s, "exec", argv=["printenv", "AUDIT_TOKEN"], env={"AUDIT_TOKEN": secret})
            assert r["stdout"].strip() == secret, r
            r = await ok(s, "exec", command="echo recorded-shell-line; exit 4")
            assert r["exit_code"] == 4, r
            # Written or refused (no supervisor): recorded either way, by path.
            await call(s, "write_file", path="notes.txt", content=content)
            listed = await ok(s, "sandbox_list")
            assert len(listed["sandboxes"]) == 1, listed
            return listed["sandboxes"][0]["container"]

    container = run(go())
    assert wait_gone(project.dir) == []

    def odek(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(ODEK), "sandbox", "log", *args], env=project.env(), cwd=project.dir,
                              capture_output=True, text=True, timeout=60)

    out = odek(container, "--json")
    assert out.returncode == 0, out.stderr
    print("\n--- odek sandbox log --json ---\n" + out.stdout)
    assert secret not in out.stdout and content not in out.stdout, out.stdout
    records = json.loads(out.stdout)
    assert all(r["surface"] == "mcp" for r in records), records
    execs = [r for r in records if r["tool"] == "exec"]
    assert [r["command"] for r in execs] == [["printenv", "AUDIT_TOKEN"],
                                             ["/bin/sh", "-c", "echo recorded-shell-line; exit 4"]], execs
    assert execs[0]["env_keys"] == ["AUDIT_TOKEN"] and execs[0]["exit_code"] == 0, execs[0]
    assert "env_keys" not in execs[1] and execs[1]["exit_code"] == 4, execs[1]
    assert any(r["tool"] == "write_file" and r["path"] == "/workspace/notes.txt" for r in records), records
    assert any(r["tool"] == "sandbox_list" for r in records), records
    # The text form, and the file itself.
    text = odek(container)
    assert text.returncode == 0, text.stderr
    assert "printenv AUDIT_TOKEN" in text.stdout and "(env AUDIT_TOKEN)" in text.stdout, text.stdout
    assert secret not in text.stdout
    log = project.home / "sandboxes" / container / "log.jsonl"
    assert (log.stat().st_mode & 0o777) == 0o600
    raw = log.read_text()
    assert secret not in raw and content not in raw and "printenv" in raw
    # The conversation's sandbox is listed by name; --clear removes it.
    names = odek("--json")
    listed = json.loads(names.stdout)
    assert [entry["name"] for entry in listed] == [container], names.stdout
    assert listed[0]["calls"] == len(records) and listed[0]["last"] == records[-1]["time"], listed
    cleared = odek("--clear", container)
    assert cleared.returncode == 0 and cleared.stdout.strip() == container, cleared.stderr
    assert not log.exists()
