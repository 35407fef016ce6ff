#!/usr/bin/env python3
"""Exec round-trip worker for odek-bench, through `odek mcp`.

Starts ``odek mcp`` (the release CLI given by ``--odek``; the Compose
project and image as its sandbox flags; its environment as given, so
ODEK_SUPERVISOR reaches it) with the official MCP Python SDK as the client,
launches the conversation's sandbox with one ``exec``, prints ``ready
<container-name> -``, then for every ``exec`` line on stdin times
``tools/call exec {"argv": ["true"]}`` in this process with
``time.perf_counter_ns`` and prints the nanoseconds. ``quit`` or end of
input ends the server (its sandbox goes with it) and prints ``bye``.

Run by odek-bench with the Python of target/mcp-venv (``pip install mcp``);
not meant to be run by hand.
"""

import argparse
import asyncio
import os
import sys
import time

from mcp import ClientSession, StdioServerParameters, stdio_client


async def serve(a: argparse.Namespace) -> None:
    params = StdioServerParameters(
        command=a.odek,
        args=["mcp", "--sandbox-compose", a.project, "--sandbox-image", a.image],
        env=dict(os.environ),
        cwd=a.workdir,
    )
    loop = asyncio.get_running_loop()
    async with stdio_client(params, errlog=sys.stderr) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            first = await s.call_tool("exec", {"argv": ["true"]})
            if first.is_error:
                raise SystemExit(f"mcp_bench: the first exec failed: {first.content}")
            listed = await s.call_tool("sandbox_list", {})
            boxes = (listed.structured_content or {}).get("sandboxes", [])
            name = next((b["container"] for b in boxes if b.get("default")), "-")
            print(f"ready {name} -", flush=True)
            while True:
                line = await loop.run_in_executor(None, sys.stdin.readline)
                cmd = line.strip()
                if cmd in ("quit", ""):
                    break
                if cmd != "exec":
                    print(f"error unknown command {cmd!r}", flush=True)
                    continue
                t0 = time.perf_counter_ns()
                res = await s.call_tool("exec", {"argv": ["true"]})
                t1 = time.perf_counter_ns()
                code = (res.structured_content or {}).get("exit_code")
                if res.is_error or code != 0:
                    print(f"error exit {code}", flush=True)
                    continue
                print(t1 - t0, flush=True)
    print("bye", flush=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--odek", required=True)
    p.add_argument("--workdir", required=True)
    p.add_argument("--project", required=True)
    p.add_argument("--image", required=True)
    asyncio.run(serve(p.parse_args()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
