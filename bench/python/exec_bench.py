#!/usr/bin/env python3
"""Exec round-trip worker for odek-bench, Python binding.

Launches one sandbox through the ``odek`` package (Compose project + image
given on the command line), prints ``ready <sandbox-name> <container-id>``,
then for every ``exec`` line on stdin times ``sandbox.exec(["true"])``
in-process with ``time.perf_counter_ns`` and prints the nanoseconds; a
``loop N IDLE_MS`` line times N calls, each after IDLE_MS milliseconds of
sleep (0: back to back), and prints their nanoseconds on one line. ``quit``
or end of input destroys the sandbox (the ``with`` block) and prints ``bye``.
``--engine fake`` uses libodek's in-memory engine (no Docker): what remains
is the binding's and the core's own cost per call.

Run by odek-bench with ODEK_LIB pointing at the release libodek.so and
PYTHONPATH at bindings/python; not meant to be run by hand.
"""

import argparse
import sys
import time

import odek


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workdir", required=True)
    p.add_argument("--project", required=True)
    p.add_argument("--image", required=True)
    p.add_argument("--engine", default="docker", choices=["docker", "fake"])
    a = p.parse_args()
    settings = {
        "sandbox": True,
        "sandbox_image": a.image,
        "sandbox_compose_project": a.project,
    }
    with odek.Client(engine=a.engine) as client:
        plan = client.resolve(
            a.workdir, settings, read_user_config=False, read_project_config=False
        )
        with client.launch(plan) as sandbox:
            print(f"ready {sandbox.name} {sandbox.container_id}", flush=True)
            for line in sys.stdin:
                cmd = line.strip()
                if cmd == "quit":
                    break
                if cmd.startswith("loop "):
                    _, n, idle = cmd.split()
                    times = []
                    for _ in range(int(n)):
                        if int(idle):
                            time.sleep(int(idle) / 1000)
                        t0 = time.perf_counter_ns()
                        r = sandbox.exec(["true"])
                        times.append(time.perf_counter_ns() - t0)
                        if r.exit_code != 0:
                            break
                    if r.exit_code != 0:
                        print(f"error exit {r.exit_code}", flush=True)
                    else:
                        print(" ".join(map(str, times)), flush=True)
                    continue
                if cmd != "exec":
                    print(f"error unknown command {cmd!r}", flush=True)
                    continue
                t0 = time.perf_counter_ns()
                r = sandbox.exec(["true"])
                t1 = time.perf_counter_ns()
                if r.exit_code != 0:
                    print(f"error exit {r.exit_code}", flush=True)
                    continue
                print(t1 - t0, flush=True)
    print("bye", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
