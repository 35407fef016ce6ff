"""Per-tool wall times of one realistic agent session with `odek mcp`.

Plays what a coding agent does in a conversation, through the official MCP
Python SDK against the real daemon and the Compose fixture (redis on
default+backend, postgres on the internal backend network): initialize and
tools/list; a first `exec` (which launches the conversation's sandbox);
`describe`; several `exec`s, among them redis and postgres reached by
service name; write_file/read_file/edit_file/list_directory on a small
project; a background process read with `process_output` and ended with
`process_kill`; `sandbox_list`. Then it prints, per tool, the number of
calls and the median and max wall time in ms (from the SDK's call to its
result), and the time from spawning `odek mcp` to the first exec's answer.

It measures; it asserts no time. A tool call that fails (a tool error, or
a result other than the one the session needs to go on) stops it with
exit status 1, since its timings would not be those of a working session.
Not part of any test suite. Run it with the venv tests/mcp/run-tests.sh
creates, the fixture up as $ODEK_MCP_PROJECT, or all at once with

    cargo xtask session-timings [--sessions N] [--json FILE]

(tests/mcp/session-timings.sh: release build, images, fixture, this script).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from mcp import ClientSession, StdioServerParameters, stdio_client

REPO = Path(__file__).resolve().parents[2]
TARGET = Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target")
ODEK = Path(os.environ.get("ODEK_BIN") or TARGET / "release" / "odek")
PROJECT = os.environ.get("ODEK_MCP_PROJECT", "odekmcp")
IMAGE = os.environ.get("ODEK_MCP_IMAGE", "odek-test/base:1")

# A small project an agent would find in its checkout.
APP_PY = '''"""A tiny service client."""

import os

REDIS_HOST = os.environ.get("REDIS_HOST", "localhost")


def greeting(name):
    return "hello, " + name


if __name__ == "__main__":
    print(greeting("world"))
'''


class Failed(Exception):
    pass


class Session:
    """One `odek mcp` conversation whose calls are timed."""

    def __init__(self, s: ClientSession, times: dict[str, list[float]]):
        self.s = s
        self.times = times

    async def call(self, tool: str, **args) -> dict:
        t0 = time.perf_counter()
        r = await self.s.call_tool(tool, args)
        dt = time.perf_counter() - t0
        if r.is_error:
            text = "\n".join(c.text for c in r.content if getattr(c, "type", "") == "text")
            raise Failed(f"{tool} {json.dumps(args)[:200]} was refused: {text}")
        self.times.setdefault(tool, []).append(dt)
        return r.structured_content

    async def exec(self, command: str, want_exit: int = 0, **args) -> dict:
        r = await self.call("exec", command=command, **args)
        if r["exit_code"] != want_exit:
            raise Failed(f"exec {command!r} exited {r['exit_code']} (wanted {want_exit}): {r['stderr'][-500:]}")
        return r


async def play(workdir: Path, env: dict[str, str], times: dict[str, list[float]]) -> dict[str, float]:
    """One session; returns its milestones in seconds since the spawn."""
    marks: dict[str, float] = {}
    params = StdioServerParameters(
        command=str(ODEK),
        args=["mcp", "--sandbox-compose", PROJECT, "--sandbox-image", IMAGE],
        env=env,
        cwd=str(workdir),
    )
    spawn = time.perf_counter()
    async with stdio_client(params, errlog=sys.stderr) as (read, write):
        async with ClientSession(read, write) as cs:
            t0 = time.perf_counter()
            await cs.initialize()
            marks["initialize"] = time.perf_counter() - spawn
            times.setdefault("(initialize)", []).append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            tools = {t.name for t in (await cs.list_tools()).tools}
            times.setdefault("(tools/list)", []).append(time.perf_counter() - t0)
            missing = {"exec", "describe", "read_file", "write_file", "edit_file", "list_directory",
                       "process_output", "process_kill", "sandbox_list"} - tools
            if missing:
                raise Failed(f"odek mcp does not offer {sorted(missing)}")
            s = Session(cs, times)

            # The first exec launches the conversation's sandbox: timed on
            # its own, so that `exec` below is the steady state.
            first: dict[str, list[float]] = {}
            r = await Session(cs, first).exec("pwd && ls -A")
            marks["first exec answered"] = time.perf_counter() - spawn
            times.setdefault("exec #1 (launches the sandbox)", []).extend(first["exec"])
            if r["stdout"].splitlines()[0] != "/workspace":
                raise Failed(f"the first exec ran in {r['stdout']!r}, not /workspace")

            d = await s.call("describe")
            if "redis" not in d["prompt"] or "postgres" not in d["prompt"]:
                raise Failed("describe does not name redis and postgres")

            # Look around, then reach the services by name.
            await s.exec("cat /etc/os-release | head -3; id; uname -r")
            await s.exec("command -v bash psql redis-cli git python3 || true")
            r = await s.exec("redis-cli -h redis ping")
            if r["stdout"].strip() != "PONG":
                raise Failed(f"redis-cli ping answered {r['stdout']!r}")
            await s.exec("redis-cli -h redis set odek:timings:k hello >/dev/null && redis-cli -h redis get odek:timings:k")
            await s.exec("pg_isready -h postgres -t 5")
            await s.exec(
                "psql -h postgres -U postgres -v ON_ERROR_STOP=1 -q -c "
                "'create temp table t(i int); insert into t select generate_series(1,1000); select count(*) from t'"
            )
            await s.exec("redis-cli -h redis del odek:timings:k >/dev/null", env={"TERM": "dumb"})

            # The file tools on a small project.
            await s.call("write_file", path="app/main.py", content=APP_PY)
            await s.call("write_file", path="app/__init__.py", content="")
            await s.call("write_file", path="README.txt", content="timings scratch project\n")
            await s.call("list_directory", path=".")
            await s.call("list_directory", path="app")
            got = await s.call("read_file", path="app/main.py")
            if got["content"] != APP_PY:
                raise Failed("read_file did not return what write_file wrote")
            e = await s.call("edit_file", path="app/main.py",
                             edits=[{"oldText": 'return "hello, " + name', "newText": 'return f"hello, {name}!"'}])
            if not e["diff"]:
                raise Failed("edit_file changed nothing")
            await s.call("edit_file", path="app/main.py",
                         edits=[{"oldText": '"""A tiny service client."""', "newText": '"""A tiny service client (edited)."""'}])
            await s.call("read_file", path="app/main.py")
            await s.call("read_file", path="/etc/hostname")
            await s.exec("grep -n hello app/main.py && wc -l app/main.py")
            await s.exec("sh -c 'exit 3'", want_exit=3)

            # A background process: started, read by cursor, killed.
            bg = await s.call(
                "exec", background=True,
                command="i=0; while :; do echo tick $i; i=$((i+1)); sleep 0.1; done",
            )
            pid = bg["process_id"]
            cursor = None
            for _ in range(4):
                await asyncio.sleep(0.3)
                o = await s.call("process_output", process_id=pid, **({} if cursor is None else {"cursor": cursor}))
                if not o["running"]:
                    raise Failed(f"the background process ended: {o}")
                cursor = o["next_cursor"]
            k = await s.call("process_kill", process_id=pid)
            if k["running"]:
                raise Failed(f"process_kill left it running: {k}")
            await s.call("process_output", process_id=pid, cursor=cursor)

            lst = await s.call("sandbox_list")
            if len(lst["sandboxes"]) != 1:
                raise Failed(f"sandbox_list shows {len(lst['sandboxes'])} sandboxes")
            await s.exec("git --version || echo no git", want_exit=0)
            t_end = time.perf_counter()
        # Leaving the contexts closes stdin: the server removes its sandbox
        # and exits.
    marks["session end (server exited)"] = time.perf_counter() - spawn
    times.setdefault("(close: sandbox removed, exit)", []).append(time.perf_counter() - t_end)
    return marks


def ms(v: float) -> str:
    return f"{v * 1000:.1f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=1, help="sessions played one after another (default 1)")
    ap.add_argument("--json", metavar="FILE", help="also write every timing (ms) as JSON to FILE")
    a = ap.parse_args()
    if not ODEK.is_file():
        print(f"session_timings: {ODEK} is missing (cargo build --release -p odek-cli, or set ODEK_BIN)", file=sys.stderr)
        return 2

    times: dict[str, list[float]] = {}
    milestones: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="odek-session-timings-") as tmp:
        # One $ODEK_HOME for the run (the image probe is cached there after
        # the first launch, as in a developer's home); a fresh checkout per
        # session. ODEK_SUPERVISOR stays: the harness points it at the
        # static supervisor.
        home = Path(tmp, "odek-home")
        home.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith("ODEK_") or k == "ODEK_SUPERVISOR"}
        env["ODEK_HOME"] = str(home)
        for n in range(a.sessions):
            work = Path(tmp, f"project-{n}")
            work.mkdir()
            try:
                milestones.append(asyncio.run(play(work, env, times)))
            except Failed as e:
                print(f"session_timings: session {n + 1}: {e}", file=sys.stderr)
                return 1

    print(f"odek mcp session timings: {ODEK}, image {IMAGE}, Compose project {PROJECT}, "
          f"{a.sessions} session(s), supervisor {'on' if os.environ.get('ODEK_SUPERVISOR') else 'as found beside odek'}")
    print()
    print(f"{'tool':<34} {'count':>5} {'median ms':>10} {'max ms':>9}")
    order = ["(initialize)", "(tools/list)", "exec #1 (launches the sandbox)"]
    rest = sorted(k for k in times if k not in order and not k.startswith("(close"))
    for k in order + rest + [k for k in times if k.startswith("(close")]:
        v = times.get(k)
        if v:
            print(f"{k:<34} {len(v):>5} {ms(statistics.median(v)):>10} {ms(max(v)):>9}")
    print()
    for n, m in enumerate(milestones, 1):
        print(f"session {n}: spawn -> initialize answered {ms(m['initialize'])} ms, "
              f"-> first exec answered {ms(m['first exec answered'])} ms, "
              f"-> server exited {ms(m['session end (server exited)'])} ms")
    if a.json:
        Path(a.json).write_text(json.dumps({
            "odek": str(ODEK), "image": IMAGE, "project": PROJECT,
            "calls_ms": {k: [round(x * 1000, 3) for x in v] for k, v in times.items()},
            "sessions_ms": [{k: round(x * 1000, 3) for k, x in m.items()} for m in milestones],
        }, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
