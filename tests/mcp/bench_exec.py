"""Time from `tools/call exec` to its result for `true` (median of 20) in
`odek mcp`, next to `odek sandbox exec NAME -- true` (median of 20) for the
same kind of sandbox (same image, same Compose networks). One warm-up call
each (the MCP one launches the lazy sandbox). Needs the fixture up as
$ODEK_MCP_PROJECT (default odekmcp<ns>, as tests/mcp/run-tests.sh); run with the venv of run-tests.sh:

    target/mcp-venv/bin/python tests/mcp/bench_exec.py
"""

import asyncio
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mcp import ClientSession, StdioServerParameters, stdio_client

REPO = Path(__file__).resolve().parents[2]
ODEK = str(REPO / "target" / "debug" / "odek")
# This checkout's names (tests/ns.sh): ODEK_TEST_NS, else the checkout's hash.
TEST_NS = os.environ.get("ODEK_TEST_NS") or hashlib.sha256(
    os.path.realpath(REPO).encode()).hexdigest()[:8]
PROJECT = os.environ.get("ODEK_MCP_PROJECT", f"odekmcp{TEST_NS}")
IMAGE = os.environ.get("ODEK_MCP_IMAGE", f"odek-test-{TEST_NS}/base:1")
FLAGS = ["--sandbox-compose", PROJECT, "--sandbox-image", IMAGE]
N = 20


async def mcp_times(workdir: str) -> list[float]:
    params = StdioServerParameters(command=ODEK, args=["mcp", *FLAGS], env=dict(os.environ), cwd=workdir)
    async with stdio_client(params, errlog=sys.stderr) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            await s.call_tool("exec", {"command": "true"})  # launches the sandbox
            out = []
            for _ in range(N):
                t0 = time.perf_counter()
                res = await s.call_tool("exec", {"argv": ["true"]})
                out.append(time.perf_counter() - t0)
                assert not res.is_error and res.structured_content["exit_code"] == 0
            return out


def cli_times(workdir: str) -> list[float]:
    name = subprocess.run([ODEK, "sandbox", "up", *FLAGS], cwd=workdir, check=True, capture_output=True, text=True).stdout.strip()
    try:
        subprocess.run([ODEK, "sandbox", "exec", name, "--", "true"], check=True)
        out = []
        for _ in range(N):
            t0 = time.perf_counter()
            subprocess.run([ODEK, "sandbox", "exec", name, "--", "true"], check=True)
            out.append(time.perf_counter() - t0)
        return out
    finally:
        subprocess.run([ODEK, "sandbox", "down", name], check=True, capture_output=True)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="odek-mcp-bench-") as d:
        m = asyncio.run(mcp_times(d))
        c = cli_times(d)
    ms = lambda v: f"{statistics.median(v) * 1000:.1f} ms (min {min(v) * 1000:.1f}, max {max(v) * 1000:.1f})"
    print(f"odek mcp  tools/call exec `true`, median of {N}: {ms(m)}")
    print(f"odek sandbox exec NAME -- true,  median of {N}: {ms(c)}")


if __name__ == "__main__":
    main()
