#!/usr/bin/env python3
"""Where a supervised exec round trip goes (a profile, not a bench row).

Launches a sandbox through the Python binding with ODEK_SUPERVISOR set,
attaches ``strace -ttt`` to its supervisor (host pid from ``docker top``;
reads and writes on fds 0/1, poll, the command's clone/wait4), runs N
execs of ``true`` recording the wall clock before and after each call, and
splits each round trip into: caller → supervisor (until its read of the
Start frame returns), inside the supervisor (until it writes the Exit
frame), supervisor → caller (until the call returns). strace slows every
traced syscall of the supervisor, so the middle part is an upper bound.

    ODEK_SUPERVISOR=target/static/x86_64-unknown-linux-gnu/release/odek-supervisor \\
    ODEK_LIB=target/release/libodek.so PYTHONPATH=bindings/python \\
    python3 bench/python/trace_supervisor.py --project odekbench [-n 50]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import odek


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--project", required=True)
    p.add_argument("--image", default="odek-test/base:1")
    p.add_argument("-n", type=int, default=50)
    a = p.parse_args()
    if not os.environ.get("ODEK_SUPERVISOR"):
        print("set ODEK_SUPERVISOR to the static supervisor", file=sys.stderr)
        return 2
    settings = {"sandbox": True, "sandbox_image": a.image, "sandbox_compose_project": a.project}
    with tempfile.TemporaryDirectory(prefix="odek-trace-") as wd, odek.Client() as client:
        plan = client.resolve(wd, settings, read_user_config=False, read_project_config=False)
        with client.launch(plan) as sb:
            top = subprocess.run(["docker", "top", sb.container_id, "-o", "pid,args"],
                                 check=True, capture_output=True, text=True).stdout
            # Not docker-init (pid 1), whose arguments name the supervisor too.
            pid = next(l.split()[0] for l in top.splitlines()
                       if l.split()[1:3] == ["/.odek/odek-supervisor", "serve"])
            for _ in range(20):
                sb.exec(["true"])
            # Untraced first: the same loop without strace, for comparison.
            plain = []
            for _ in range(a.n):
                t0 = time.time()
                sb.exec(["true"])
                plain.append(time.time() - t0)
            log = os.path.join(wd, "strace.log")
            tr = subprocess.Popen(["strace", "-ttt", "-o", log, "-p", pid, "-e",
                                   "trace=read,write,poll,ppoll,clone,clone3,fork,vfork,wait4,waitid"],
                                  stderr=subprocess.PIPE, text=True)
            time.sleep(1.0)
            spans = []
            for _ in range(a.n):
                t0 = time.time()
                sb.exec(["true"])
                spans.append((t0, time.time()))
            tr.terminate()
            _, err = tr.communicate()
            if err.strip():
                print(f"strace: {err.strip()}", file=sys.stderr)
            events = []
            with open(log) as f:
                for line in f:
                    ts, _, rest = line.partition(" ")
                    events.append((float(ts), rest.strip()))
    to_sup, inside, from_sup = [], [], []
    # Inside: Start read -> fork; fork -> the exec report's EOF (the child
    # reached its exec); -> the reap (wait4 returning the pid); -> Exit.
    prep, to_exec, run, report = [], [], [], []
    example = None
    for t0, t1 in spans:
        ev = [(t, r) for t, r in events if t0 <= t <= t1]
        start = next((t for t, r in ev if r.startswith("read(0,")), None)
        exit_ = next((t for t, r in reversed(ev) if r.startswith("write(1,")), None)
        if start is None or exit_ is None:
            continue
        to_sup.append(start - t0)
        inside.append(exit_ - start)
        from_sup.append(t1 - exit_)
        fork = next((t for t, r in ev if r.startswith(("clone", "fork", "vfork"))), None)
        execd = next((t for t, r in ev if fork and t > fork and r.startswith("read(") and r.endswith("= 0")), None)
        reap = next((t for t, r in ev if fork and t > fork and r.startswith("wait4(")
                     and not r.endswith("= 0") and not r.endswith("= -1 ECHILD (No child processes)")), None)
        if fork and execd and reap:
            prep.append(fork - start)
            to_exec.append(execd - fork)
            run.append(reap - execd)
            report.append(exit_ - reap)
            if example is None:
                example = [(round((t - t0) * 1e3, 3), r[:90]) for t, r in ev]
    if not inside:
        print("no round trip matched; the first lines of the trace:", events[:8], file=sys.stderr)
    ms = lambda v: f"{statistics.median(v) * 1e3:.3f} ms" if v else "n/a"
    print(f"untraced round trip (median of {a.n}): {ms(plain)}")
    print(f"traced round trip: {ms([b - a for a, b in spans])}, {len(inside)} matched")
    print(f"  caller -> supervisor's read of Start : {ms(to_sup)}")
    print(f"  inside the supervisor (Start..Exit)  : {ms(inside)}")
    print(f"    Start read -> fork                 : {ms(prep)}")
    print(f"    fork -> the child's exec (report EOF): {ms(to_exec)}")
    print(f"    exec -> reaped (true runs, SIGCHLD): {ms(run)}")
    print(f"    reaped -> Exit written             : {ms(report)}")
    print(f"  supervisor's write of Exit -> caller : {ms(from_sup)}")
    if example and os.environ.get("TRACE_EXAMPLE"):
        for e in example:
            print("   ", *e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
