#!/usr/bin/env python3
"""An agent-framework loop in miniature, over odek's Python binding.

resolve (with a Compose project) → show the approval request, if any →
launch → build the agent's system prompt from the environment block →
run the agent's first tool call (``redis-cli -h redis ping``) → destroy.

    docker compose -p myapp up -d          # a project with a `redis` service
    python examples/agent_loop.py --project myapp

The sandbox is removed when the ``with`` block ends, whatever happens in it.
Exit status: 0 when Redis answered PONG, 1 otherwise, 2 on an odek error.
"""

from __future__ import annotations

import argparse
import os
import sys

import odek

BASE_PROMPT = "You are a coding agent. Use the shell tool to inspect and change the project."


def say(msg: str) -> None:
    print(f"[agent] {msg}", flush=True)


def decide(request: odek.ApprovalRequest, policy: str) -> str | None:
    """Turns an approval request into "once", "trust" or None (deny)."""
    print(request.card(), flush=True)
    if request.standing:
        say("already approved (stored trust or ODEK_APPROVE_PROJECT_SANDBOX=1)")
        return "once"
    if policy in ("once", "trust"):
        say(f"approving by --approve {policy}")
        return policy
    if policy == "ask" and sys.stdin.isatty():
        answer = input("Approve? [y]es once / [t]rust / anything else denies: ").strip().lower()
        return {"y": "once", "yes": "once", "t": "trust", "trust": "trust"}.get(answer)
    return None


def run(args: argparse.Namespace) -> int:
    settings = {
        "sandbox": True,  # explicit: never fall back to running on the host
        "sandbox_image": args.image,
        "sandbox_compose_project": args.project,
    }
    with odek.Client() as client:
        say(f"resolving {args.workdir} with Compose project {args.project!r}")
        plan = client.resolve(args.workdir, settings)
        nets = ", ".join(
            f"{n.name}{' (internal)' if n.internal else ''}" for n in plan.networks
        ) or "-"
        say(
            f"plan: isolation={plan.isolation} network={plan.network_summary} "
            f"internet={'yes' if plan.internet else 'no'} networks={nets}"
        )
        for w in plan.warnings:
            say(f"warning: {w.message}")

        approval = None
        request = plan.approval_request
        if request is None:
            say("no approval needed (every setting comes from the operator)")
        else:
            decision = decide(request, args.approve)
            if decision is None:
                say("approval denied: not launching")
                return 1
            approval = client.approve(plan, decision)
            say(f"approved ({approval.via})")

        say("launching the sandbox")
        with client.launch(plan, approval) as sandbox:
            say(sandbox.info.startup_line)
            description = sandbox.describe()
            system_prompt = BASE_PROMPT + "\n\n" + description.prompt
            tool_description = description.tool
            say("system prompt for the model:")
            print(system_prompt, flush=True)
            say(f"shell tool description: {tool_description.splitlines()[0]}")
            say(f"services the agent can reach by name: {', '.join(description.service_names) or '-'}")

            argv = ["redis-cli", "-h", "redis", "ping"]
            say(f"tool call: {' '.join(argv)}")
            result = sandbox.exec(argv, timeout=args.timeout)
            say(
                f"exit={result.exit_code} stdout={result.stdout.strip()!r} "
                f"stderr={result.stderr.strip()!r}"
            )
            pong = result.ok and result.stdout.strip() == "PONG"
            say("destroying the sandbox")
        say(f"sandbox {sandbox.name} destroyed")
    return 0 if pong else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--project", default="odeke2e", help="Compose project to attach (default: odeke2e)")
    p.add_argument("--workdir", default=os.getcwd(), help="project directory, mounted at /workspace (default: cwd)")
    p.add_argument("--image", default="odek-test/base:1", help="sandbox image (default: odek-test/base:1)")
    p.add_argument(
        "--approve",
        choices=["ask", "once", "trust", "deny"],
        default="ask",
        help="what to answer when ./odek.json needs approval (default: ask on a TTY, else deny)",
    )
    p.add_argument("--timeout", type=float, default=30.0, help="seconds the tool call may take (default: 30)")
    args = p.parse_args(argv)
    try:
        return run(args)
    except odek.OdekError as e:
        say(f"odek refused ({type(e).__name__}, class {e.failure_class}, code {e.code}): {e.message}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
