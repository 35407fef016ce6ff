//! odek's supervisor in the sandbox (SANDBOXING.md, "The
//! supervisor"), through the `odek` command line: commands of any user —
//! root included — cannot signal, stop or ptrace any of its processes
//! (keeper and server) or reach their descriptors, nor keep their sandbox
//! past its owner's SIGKILL; a root command that replaces `/bin/sh` and
//! `kill` is still killed at its timeout, and the kill's report is true; a
//! timeout kills a command's whole tree; a background job that keeps the
//! output open does not hold the call; another process reaches a detached
//! sandbox's supervisor through a relay; and with `ODEK_SUPERVISOR=` empty
//! the sandbox runs the idle process as before.
//!
//! `cargo xtask e2e` builds the static supervisor and names it in
//! `ODEK_SUPERVISOR_BIN` and `ODEK_SUPERVISOR` (the whole suite runs with
//! the supervisor on, as users do); these tests pass it to odek as
//! `ODEK_SUPERVISOR` themselves. Run without it, they fail saying so (never
//! skipped). The discovery of an installed supervisor, and the fallback
//! when it is missing or does not start, are shown here too.

use std::io::{BufRead, BufReader};
use std::time::{Duration, Instant};

use odek_e2e::{
    docker, docker_ok, operators, portable, startup_line, stderr, stdout, Project, BASE_IMAGE,
    BUSYBOX_IMAGE,
};

/// The supervisor binary the suite uses; a failure names how to get one.
fn supervisor_bin() -> String {
    match std::env::var("ODEK_SUPERVISOR_BIN") {
        Ok(p) if !p.is_empty() => p,
        _ => panic!(
            "ODEK_SUPERVISOR_BIN is not set: run these tests through `cargo xtask e2e` (it builds the static odek-supervisor), or point ODEK_SUPERVISOR_BIN at one"
        ),
    }
}

/// `odek <args>` in `p` with the supervisor on.
fn sup(p: &Project, args: &[&str]) -> std::process::Output {
    p.run_odek_env(&[("ODEK_SUPERVISOR", &supervisor_bin())], args)
}

/// [`sup`] not yet started, its output piped (for a test that acts on it
/// while it runs).
fn sup_spawn(p: &Project, args: &[&str]) -> std::process::Child {
    use std::process::Stdio;
    let mut c = p.odek(args);
    c.env("ODEK_SUPERVISOR", supervisor_bin())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c.spawn().expect("spawn odek")
}

/// A script run inside the sandbox that tries every attack on every
/// process of uid 65533 — the supervisor's keeper (`odek-supervisor`, the
/// holder of the owner link), its server (`odek-server`, the same command
/// line) and any relay (`odek-supervisor relay`) — and prints what
/// succeeded, with positive controls: the same probes on a process of its
/// own.
///
/// The ptrace probe is perl's `syscall` (the base image has perl-base, no
/// gdb, strace or python) with x86_64's numbers: SYS_ptrace 101,
/// PTRACE_ATTACH 16. odek's seccomp profile is Docker's default with odek's
/// rules added (core/src/hardening/seccomp.rs); that default allows
/// `ptrace` to every process on kernels from 4.8, so the kernel's own
/// ptrace access check decides: the control — attaching to a child of its
/// own, same uid and dumpable — must succeed, and the attach to the
/// supervisor must fail because the command has another uid, no
/// `CAP_SYS_PTRACE`, and the supervisor is not dumpable. Were ptrace denied
/// to everything by seccomp, the control would fail and so would the test:
/// a refusal that proves nothing about the supervisor does not pass.
const ATTACKS: &str = r#"
echo "arch=$(uname -m)"
sleep 30 </dev/null >/dev/null 2>&1 & k=$!
sup=""
for p in /proc/[0-9]*; do
  grep -q '^Uid:[[:space:]]*65533[[:space:]]' "$p/status" 2>/dev/null && sup="$sup ${p#/proc/}"
done
echo "sup=${sup# }"
for s in $sup; do
  echo "proc $s $(cat "/proc/$s/comm" 2>/dev/null) $(tr '\0' ' ' < "/proc/$s/cmdline" 2>/dev/null)"
done
for s in $sup; do
  kill -STOP "$s" 2>/dev/null && echo "ATTACK_STOPPED $s"
  kill -9 "$s" 2>/dev/null && echo "ATTACK_KILLED $s"
done
for s in TSTP ALRM USR1 36; do kill -s "$s" 1 2>/dev/null || kill "-$s" 1 2>/dev/null; done
sleep 0.3
for s in $sup; do
  st=$(cut -d' ' -f3 "/proc/$s/stat" 2>/dev/null)
  { [ "$st" = T ] || [ -z "$st" ]; } && echo "ATTACK_VIA_INIT $s"
  ( exec 9<"/proc/$s/fd/0" ) 2>/dev/null && echo "ATTACK_FD0 $s"
  ( exec 9>"/proc/$s/fd/1" ) 2>/dev/null && echo "ATTACK_FD1 $s"
  cat "/proc/$s/environ" >/dev/null 2>&1 && echo "ATTACK_ENVIRON $s"
  [ "$(uname -m)" = x86_64 ] && perl -e 'my $r = syscall(101, 16, 0 + $ARGV[0], 0, 0); print $r == 0 ? "ATTACK_PTRACE $ARGV[0]\n" : "ptrace $ARGV[0] refused: $!\n"' "$s"
done
mv /.odek /.odek-moved 2>/dev/null && echo ATTACK_RENAME
( : > /.odek/odek-supervisor ) 2>/dev/null && echo ATTACK_REPLACE
grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status
( exec 9<"/proc/$k/fd/0" ) && echo CONTROL_FD0
( exec 9>"/proc/$k/fd/1" ) && echo CONTROL_FD1
cat "/proc/$k/environ" >/dev/null && echo CONTROL_ENVIRON
[ "$(uname -m)" = x86_64 ] && perl -e 'my $c = fork; if (!$c) { sleep 30; exit 0 } my $r = syscall(101, 16, $c, 0, 0); print $r == 0 ? "CONTROL_PTRACED\n" : "control ptrace refused: $!\n"; kill 9, $c; waitpid $c, 0'
kill -9 "$k" && echo CONTROL_KILLED
echo "uid=$(id -u)"
"#;

/// Asserts that `text`, the output of [`ATTACKS`], shows every attack on
/// every uid-65533 process failed — keeper and server both found — every
/// positive control succeeded, the command's five capability sets empty
/// and its uid `want_uid`; `ctx` goes into each failure.
fn assert_attack_text(text: &str, ctx: &str, want_uid: u32) {
    let arch = text
        .lines()
        .find_map(|l| l.strip_prefix("arch="))
        .unwrap_or_default();
    assert_eq!(
        arch, "x86_64",
        "the ptrace probe uses x86_64's syscall numbers (SYS_ptrace 101, PTRACE_ATTACH 16); on {arch:?} it does not run — port it before trusting this test: {ctx}"
    );
    let sup: Vec<&str> = text
        .lines()
        .find_map(|l| l.strip_prefix("sup="))
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert!(
        sup.len() >= 2,
        "want the keeper and the server among the uid-65533 processes, found {sup:?}: {ctx}"
    );
    let procs: Vec<&str> = text.lines().filter(|l| l.starts_with("proc ")).collect();
    let keepers = procs
        .iter()
        .filter(|l| l.contains(" odek-supervisor ") && l.contains("odek-supervisor serve "))
        .count();
    let servers = procs.iter().filter(|l| l.contains(" odek-server ")).count();
    assert_eq!((keepers, servers), (1, 1), "one keeper, one server: {ctx}");
    for pid in &sup {
        assert!(
            text.contains(&format!("ptrace {pid} refused: ")),
            "the ptrace probe of {pid} did not run: {ctx}"
        );
    }
    for control in [
        "CONTROL_KILLED",
        "CONTROL_FD0",
        "CONTROL_FD1",
        "CONTROL_ENVIRON",
        "CONTROL_PTRACED",
    ] {
        assert!(text.contains(control), "positive control {control}: {ctx}");
    }
    for attack in [
        "ATTACK_STOPPED",
        "ATTACK_KILLED",
        "ATTACK_VIA_INIT",
        "ATTACK_FD0",
        "ATTACK_FD1",
        "ATTACK_ENVIRON",
        "ATTACK_PTRACE",
        "ATTACK_RENAME",
        "ATTACK_REPLACE",
    ] {
        assert!(!text.contains(attack), "{attack} succeeded: {ctx}");
    }
    let caps: Vec<&str> = text.lines().filter(|l| l.starts_with("Cap")).collect();
    assert_eq!(caps.len(), 5, "{ctx}");
    for c in caps {
        assert!(c.ends_with("0000000000000000"), "{c}: {ctx}");
    }
    assert!(text.contains(&format!("uid={want_uid}\n")), "{ctx}");
}

fn assert_attacks_failed(out: &std::process::Output, want_uid: u32) {
    let text = stdout(out);
    let ctx = format!("stdout:\n{text}\nstderr:\n{}", stderr(out));
    assert!(out.status.success(), "{ctx}");
    assert_attack_text(&text, &ctx, want_uid);
}

#[test]
fn no_command_of_any_user_can_signal_stop_or_read_the_supervisor() {
    supervisor_bin();
    for op in operators() {
        let p = Project::as_operator(op);
        let want = match op {
            odek_e2e::Operator::Root => 0,
            odek_e2e::Operator::User => odek_e2e::operator::user_account().uid,
        };
        // The owner's session (odek run), and root asked for explicitly.
        let out = sup(
            &p,
            &[
                "run",
                "--sandbox-image",
                BASE_IMAGE,
                "--",
                "sh",
                "-c",
                ATTACKS,
            ],
        );
        assert_attacks_failed(&out, want);
        let out = sup(
            &p,
            &[
                "run",
                "--sandbox-image",
                BASE_IMAGE,
                "--sandbox-user",
                "root",
                "--",
                "sh",
                "-c",
                ATTACKS,
            ],
        );
        assert_attacks_failed(&out, 0);
        assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
    }
}

/// Appended to [`ATTACKS`] (whose `$sup` it uses) by the owner's-death
/// test: what a command would leave running to outlast its owner — a
/// process holding each uid-65533 process's `fd/0` and `fd/1` (the owner
/// link), had the kernel let it open them, and a sleeper in a session of
/// its own — then the marker the test waits for.
const HOLD: &str = r#"
for s in $sup; do
  ( exec 9<"/proc/$s/fd/0"; echo "ATTACK_FD0 $s held"; exec sleep 60 ) 2>/dev/null &
  ( exec 9>"/proc/$s/fd/1"; echo "ATTACK_FD1 $s held"; exec sleep 60 ) 2>/dev/null &
done
setsid sleep 60 </dev/null >/dev/null 2>&1 &
echo ATTACKS_DONE
sleep 60
"#;

/// How long the engine may take to remove a dead owner's sandbox (as in
/// owner_lifetime.rs).
const GONE_WITHIN: Duration = Duration::from_secs(10);

#[test]
fn after_every_attack_a_sigkilled_owner_still_takes_its_sandbox_within_10_s() {
    supervisor_bin();
    let script = format!("{ATTACKS}{HOLD}");
    for op in operators() {
        for user in [None, Some("root")] {
            let p = Project::as_operator(op);
            let want = match user {
                Some(_) => 0,
                None => op.uid(),
            };
            let mut args = vec!["run", "--sandbox-image", BASE_IMAGE];
            if let Some(u) = user {
                args.extend(["--sandbox-user", u]);
            }
            args.extend(["--", "sh", "-c", &script]);
            let mut child = sup_spawn(&p, &args);
            let out = child.stdout.take().expect("stdout");
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let mut seen = String::new();
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    seen.push_str(&line);
                    seen.push('\n');
                    if line == "ATTACKS_DONE" {
                        let _ = tx.send(seen.clone());
                    }
                }
                let _ = tx.send(seen);
            });
            let text = rx.recv_timeout(Duration::from_secs(90));
            let ids = p.leftovers();
            // The owner, SIGKILLed once the attacks are done (std's kill
            // is SIGKILL), or on a timeout.
            child.kill().expect("SIGKILL odek run");
            let killed = Instant::now();
            let rest = child.wait_with_output().expect("reap odek run");
            let gone = odek_e2e::wait_until(GONE_WITHIN, || p.leftovers().is_empty());
            let took = killed.elapsed();
            let text = text.unwrap_or_default();
            let ctx = format!(
                "{op:?}, sandbox user {user:?}\nstdout:\n{text}\nstderr:\n{}",
                stderr(&rest)
            );
            assert!(
                text.contains("ATTACKS_DONE\n"),
                "the attacks never ended: {ctx}"
            );
            assert_eq!(ids.len(), 1, "one sandbox ran the attacks: {ids:?}: {ctx}");
            assert!(
                gone,
                "{} s after SIGKILL of its owner, the attacked sandbox {:?} is still there: {ctx}",
                GONE_WITHIN.as_secs(),
                p.leftovers()
            );
            assert!(
                !docker_ok(&["container", "inspect", &ids[0]]),
                "{} still exists: {ctx}",
                ids[0]
            );
            eprintln!("{op:?}, {user:?}: gone {took:?} after the SIGKILL");
            assert_attack_text(&text, &ctx, want);
        }
    }
}

/// What a root command does to make a timeout's kill lie, were it made or
/// confirmed by the image's programs, two ways: `/bin/sh` becomes a copy of
/// `/bin/true`, or a forger printing `0 0 0` — the counts the exec API's
/// kill check reads from the image's shell (core/src/exec/kill.rs): through
/// the exec API it makes odek say "was killed" while the command runs on
/// and writes its next file (tried on Docker 20.10; SECURITY.md's known
/// gaps). Each is renamed over `/bin/sh` (the running shell's binary is
/// busy for a plain `cp`) and checked by running it.
const REPLACED_SH: [&str; 2] = [
    r#"cp /bin/true /bin/sh.odek-new && mv -f /bin/sh.odek-new /bin/sh && echo "replaced /bin/sh"
[ -z "$(/bin/sh -c 'echo alive')" ] && echo SH_REPLACED
"#,
    r#"printf '#!/usr/bin/perl\nprint "0 0 0\\n";\n' > /bin/sh.odek-new && chmod 755 /bin/sh.odek-new && mv -f /bin/sh.odek-new /bin/sh && echo "replaced /bin/sh"
[ "$(/bin/sh -c 'echo alive')" = "0 0 0" ] && echo SH_REPLACED
"#,
];

/// After [`REPLACED_SH`]: `kill` becomes `/bin/true` too, then a step that
/// must never run.
const REPLACED_KILL_THEN_LATE: &str = r#"
for f in /bin/kill /usr/bin/kill; do
  [ -e "$f" ] && cp /bin/true "$f.odek-new" && mv -f "$f.odek-new" "$f" && echo "replaced $f"
done
[ -z "$(/bin/kill -l 2>&1)" ] && echo KILL_IS_TRUE
sleep 6; touch /late
"#;

#[test]
fn a_root_command_that_replaces_sh_and_kill_is_still_killed_and_the_kill_is_reported_truly() {
    supervisor_bin();
    for op in operators() {
        for sh in REPLACED_SH {
            let p = Project::as_operator(op);
            let up = sup(
                &p,
                &[
                    "sandbox",
                    "up",
                    "--sandbox-image",
                    BASE_IMAGE,
                    "--sandbox-user",
                    "root",
                ],
            );
            assert!(up.status.success(), "{op:?}: {}", stderr(&up));
            let name = stdout(&up).trim().to_string();
            let entrypoint = docker(&["inspect", "-f", "{{json .Config.Entrypoint}}", &name]);
            assert!(
                entrypoint.contains("/.odek/odek-supervisor"),
                "{entrypoint}"
            );
            // Seen from the host, never through a program of the image: the
            // engine's process list and its record of the root filesystem.
            let sleeping = || -> Vec<String> {
                docker(&["top", &name])
                    .lines()
                    .filter(|l| l.contains("sleep 6"))
                    .map(str::to_string)
                    .collect()
            };
            let added = |path: &str| {
                docker(&["diff", &name])
                    .lines()
                    .any(|l| l == format!("A {path}"))
            };
            // Positive control: a root command writes the root filesystem,
            // and `docker diff` shows it.
            let control = sup(
                &p,
                &[
                    "sandbox",
                    "exec",
                    &name,
                    "--",
                    "sh",
                    "-c",
                    "touch /late-control",
                ],
            );
            assert!(control.status.success(), "{op:?}: {}", stderr(&control));
            assert!(
                added("/late-control"),
                "{op:?}: docker diff misses the control's file"
            );
            let script = format!("{sh}{REPLACED_KILL_THEN_LATE}");
            let started = Instant::now();
            let child = sup_spawn(
                &p,
                &[
                    "sandbox",
                    "exec",
                    &name,
                    "--timeout",
                    "2",
                    "--",
                    "sh",
                    "-c",
                    &script,
                ],
            );
            // Positive control: the process list shows the command's sleep.
            let seen = odek_e2e::wait_until(Duration::from_secs(5), || !sleeping().is_empty());
            let out = odek_e2e::wait_timeout(
                child,
                Duration::from_secs(30),
                "odek sandbox exec --timeout 2",
            );
            let left = sleeping();
            // Past the moment the shell's next step would run (6 s).
            std::thread::sleep(Duration::from_secs(8).saturating_sub(started.elapsed()));
            let late = added("/late");
            let left_later = sleeping();
            let down = p.run_odek(&["sandbox", "down", &name]);
            let (text, err) = (stdout(&out), stderr(&out));
            let ctx = format!("{op:?}\nscript:{script}\nstdout:\n{text}\nstderr:\n{err}");
            assert!(seen, "the process list never showed the command: {ctx}");
            assert_eq!(out.status.code(), Some(124), "{ctx}");
            for step in [
                "replaced /bin/sh",
                "SH_REPLACED",
                "replaced /bin/kill",
                "KILL_IS_TRUE",
            ] {
                assert!(
                    text.contains(step),
                    "the command did not do {step:?}: {ctx}"
                );
            }
            assert!(
                err.contains("did not finish within the timeout and was killed")
                    && err.contains("odek's supervisor saw none left"),
                "{ctx}"
            );
            assert!(
                left.is_empty() && left_later.is_empty(),
                "reported killed while the engine lists {left:?}, later {left_later:?}: {ctx}"
            );
            assert!(
                !late,
                "the shell's next step ran after the reported kill: {ctx}"
            );
            assert!(down.status.success(), "{}", stderr(&down));
            assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
        }
    }
}

#[test]
fn a_relay_serves_a_detached_sandbox_and_root_commands_through_it_are_confined() {
    supervisor_bin();
    let p = Project::new();
    let out = sup(
        &p,
        &[
            "sandbox",
            "up",
            "--sandbox-image",
            BASE_IMAGE,
            "--sandbox-user",
            "root",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let name = stdout(&out).trim().to_string();
    let entrypoint = docker(&["inspect", "-f", "{{json .Config.Entrypoint}}", &name]);
    // Another process (no ODEK_SUPERVISOR of its own): through the relay.
    let exec = p.run_odek(&["sandbox", "exec", &name, "--", "sh", "-c", ATTACKS]);
    let down = p.run_odek(&["sandbox", "down", &name]);
    assert!(
        entrypoint.contains("/.odek/odek-supervisor"),
        "{entrypoint}"
    );
    assert_attacks_failed(&exec, 0);
    assert!(down.status.success(), "{}", stderr(&down));
}

#[test]
fn a_timeout_kills_the_whole_tree_and_a_background_job_does_not_hold_the_call() {
    supervisor_bin();
    let p = Project::new();
    let late = p.path().join("late");
    let started = Instant::now();
    let out = sup(
        &p,
        &[
            "run",
            "--sandbox-image",
            BASE_IMAGE,
            "--timeout",
            "1",
            "--",
            "sh",
            "-c",
            "setsid sh -c 'sleep 3; touch /workspace/late' & sleep 60",
        ],
    );
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    std::thread::sleep(Duration::from_secs(4).saturating_sub(started.elapsed()));
    assert!(!late.exists(), "a process of the timed-out tree ran on");
    // Positive control: the same tree without a timeout writes the file.
    let out = sup(
        &p,
        &[
            "run",
            "--sandbox-image",
            BASE_IMAGE,
            "--",
            "sh",
            "-c",
            "setsid sh -c 'sleep 1; touch /workspace/late' & sleep 2",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(late.exists(), "the control did not write its file");

    // A background job holding stdout: the call ends when its shell does
    // (the exec API waits for the stream's end, 5 s here).
    let p = Project::new();
    let out = sup(&p, &["sandbox", "up", "--sandbox-image", BASE_IMAGE]);
    let name = stdout(&out).trim().to_string();
    let t = Instant::now();
    let first = sup(
        &p,
        &[
            "sandbox",
            "exec",
            &name,
            "--",
            "sh",
            "-c",
            "sleep 5 & echo started",
        ],
    );
    let took = t.elapsed();
    let second = sup(
        &p,
        &["sandbox", "exec", &name, "--", "sh", "-c", "pgrep -x sleep"],
    );
    let down = p.run_odek(&["sandbox", "down", &name]);
    assert!(stdout(&first).contains("started"), "{}", stderr(&first));
    assert!(took < Duration::from_secs(4), "the call took {took:?}");
    assert!(
        !stdout(&second).trim().is_empty(),
        "the background job did not survive its call: {}",
        stderr(&second)
    );
    assert!(down.status.success(), "{}", stderr(&down));
}

/// A detached sandbox of `image` in `p`, supervised; its name.
fn up(p: &Project, image: &str) -> String {
    let out = sup(p, &["sandbox", "up", "--sandbox-image", image]);
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out).trim().to_string()
}

/// `odek sandbox exec NAME <flags> -- sh -c <script>`, supervised.
fn exec_sh(p: &Project, name: &str, flags: &[&str], script: &str) -> std::process::Output {
    let mut args = vec!["sandbox", "exec", name];
    args.extend_from_slice(flags);
    args.extend_from_slice(&["--", "sh", "-c", script]);
    sup(p, &args)
}

/// The host path of `/workspace/<rel>`.
fn on_host(p: &Project, in_sandbox: &str) -> std::path::PathBuf {
    p.path().join(
        in_sandbox
            .strip_prefix("/workspace/")
            .unwrap_or_else(|| panic!("{in_sandbox} is not under /workspace")),
    )
}

#[test]
fn a_timeout_kills_a_shells_whole_tree_in_debian_and_busybox_sandboxes() {
    // The read-only root is the supervisor's own test
    // (supervisor/tests/docker.rs, same trees): odek has no such setting.
    supervisor_bin();
    // What ran on, per image: both are tried before the verdict.
    let mut ran_on = vec![];
    for image in [BASE_IMAGE, BUSYBOX_IMAGE] {
        let p = Project::new();
        let name = up(&p, image);
        for dir in ["control", "killed"] {
            std::fs::create_dir(p.path().join(dir)).expect("mkdir");
        }
        // Positive control: without a timeout, every tree writes its files.
        let control = portable::timeout_trees("/workspace/control", 1, "sleep 2");
        for t in &control {
            let out = exec_sh(&p, &name, &[], &t.script);
            assert!(
                out.status.success(),
                "{image}, control {}: {}",
                t.name,
                stderr(&out)
            );
            for f in &t.late {
                assert!(
                    on_host(&p, f).exists(),
                    "{image}, control {}: no {f}",
                    t.name
                );
            }
        }
        let trees = portable::timeout_trees("/workspace/killed", 3, "sleep 60");
        for t in &trees {
            let out = exec_sh(&p, &name, &["--timeout", "1"], &t.script);
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(124), "{image}, {}: {err}", t.name);
            assert!(
                err.contains("did not finish within the timeout and was killed"),
                "{image}, {}: {err}",
                t.name
            );
        }
        // Every `sleep 3` started before its tree's kill: had any part of a
        // tree run on, its file would be there 3 s after the last kill.
        std::thread::sleep(Duration::from_secs(3));
        let ps = docker(&["exec", &name, "sh", "-c", portable::LIST_PROCESSES]);
        // `setsid` as the whole command is no timeout's: the command is a
        // session leader, so setsid forks and exits 0 at once, and what it
        // started runs on as a job started on purpose (SANDBOXING.md).
        let top = exec_sh(
            &p,
            &name,
            &["--timeout", "1"],
            "exec setsid sh -c 'sleep 1; touch /workspace/late-top'",
        );
        let top_ran = odek_e2e::wait_until(Duration::from_secs(5), || {
            p.path().join("late-top").exists()
        });
        let down = p.run_odek(&["sandbox", "down", &name]);
        assert!(down.status.success(), "{}", stderr(&down));
        assert_eq!(top.status.code(), Some(0), "{image}: {}", stderr(&top));
        assert!(top_ran, "{image}: the job setsid started did not run on");
        let written: Vec<&String> = trees
            .iter()
            .flat_map(|t| &t.late)
            .filter(|f| on_host(&p, f).exists())
            .collect();
        let left = portable::matching(&ps, "sleep");
        if !written.is_empty() || !left.is_empty() {
            ran_on.push(format!("{image}: written {written:?}, running {left:?}"));
        }
    }
    assert!(
        ran_on.is_empty(),
        "a killed tree ran on:\n{}",
        ran_on.join("\n")
    );
}

#[test]
fn a_background_server_started_in_one_call_answers_in_a_later_call_in_debian_and_busybox_sandboxes()
{
    supervisor_bin();
    for (image, server) in [
        (BASE_IMAGE, portable::redis(7003)),
        (BUSYBOX_IMAGE, portable::busybox_httpd("/tmp", 8080)),
    ] {
        let p = Project::new();
        let name = up(&p, image);
        // Positive control: nothing answers before it is started.
        let before = exec_sh(&p, &name, &[], &server.ask);
        let started = exec_sh(&p, &name, &[], &server.start);
        // Later calls (other `odek` processes) reach it, once it listens.
        let mut asked = vec![];
        let answered = odek_e2e::wait_until(Duration::from_secs(20), || {
            let out = exec_sh(&p, &name, &[], &server.ask);
            let ok = stdout(&out) == server.answer;
            asked.push(out);
            ok
        });
        let down = p.run_odek(&["sandbox", "down", &name]);
        assert!(
            !before.status.success(),
            "{image}: {} answered before it started: {}",
            server.name,
            stdout(&before)
        );
        assert!(started.status.success(), "{image}: {}", stderr(&started));
        let last = asked.last().expect("asked at least once");
        assert!(
            answered,
            "{image}: {} never answered: {}{}",
            server.name,
            stdout(last),
            stderr(last)
        );
        assert!(down.status.success(), "{}", stderr(&down));
    }
}

/// How long `odek sandbox exec NAME -- sh -c <script>` takes, and its output.
fn timed(p: &Project, name: &str, script: &str) -> (Duration, std::process::Output) {
    let t = Instant::now();
    let out = exec_sh(p, name, &[], script);
    (t.elapsed(), out)
}

#[test]
fn a_background_job_holding_stdout_delays_neither_its_call_nor_the_next() {
    supervisor_bin();
    let p = Project::new();
    let name = up(&p, BASE_IMAGE);
    // What a call costs here, for the failure message.
    let (base, _) = timed(&p, &name, "true");
    // The job inherits the shell's stdout and keeps it open (its log).
    let (first, started) = timed(&p, &name, "redis-server --port 7002 &");
    let (next, ping) = timed(&p, &name, "redis-cli -p 7002 ping");
    let (after, _) = timed(&p, &name, "true");
    // The job ran on: the next call reached it (or, had it come before
    // redis listened, a later one does).
    let job_ran = stdout(&ping) == "PONG\n"
        || odek_e2e::wait_until(Duration::from_secs(10), || {
            stdout(&exec_sh(&p, &name, &[], "redis-cli -p 7002 ping")) == "PONG\n"
        });
    let down = p.run_odek(&["sandbox", "down", &name]);
    eprintln!(
        "a plain call {base:?}; `redis-server --port 7002 &` {first:?}; the next call {next:?}; then {after:?}"
    );
    assert!(started.status.success(), "{}", stderr(&started));
    assert!(job_ran, "redis-server did not run on: {}", stderr(&ping));
    assert!(down.status.success(), "{}", stderr(&down));
    // Through the exec API (ODEK_SUPERVISOR=) each of the two calls waits
    // about 2 s for the output stream the job holds (measured: 2.08 s and
    // 2.00 s, a plain call 0.07 s, the call after them 0.11 s). Through the
    // supervisor a call ends when its shell does (about 0.09 s each). 1.5 s
    // leaves a plain call a wide margin on a loaded machine and stays under
    // the exec API's wait alone.
    let bound = Duration::from_millis(1500);
    for (what, took) in [
        ("the call starting the job", first),
        ("the next call", next),
        ("a later call", after),
    ] {
        assert!(
            took < bound,
            "{what} took {took:?} (a plain call before it: {base:?})"
        );
    }
}

#[test]
fn a_command_flooding_its_output_is_killed_and_reported_killed_within_3_s() {
    supervisor_bin();
    let p = Project::new();
    let name = up(&p, BASE_IMAGE);
    // The output is read as it comes (counted, not kept), as an agent's
    // reader would.
    let mut c = p.odek(&["sandbox", "exec", &name, "--timeout", "2", "--", "yes"]);
    c.env("ODEK_SUPERVISOR", supervisor_bin());
    c.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let t = Instant::now();
    let mut child = c.spawn().expect("spawn odek sandbox exec");
    let mut out = child.stdout.take().expect("stdout");
    let counted = std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    let done = odek_e2e::wait_timeout(child, Duration::from_secs(60), "odek sandbox exec -- yes");
    let took = t.elapsed();
    let bytes = counted.join().expect("the reader").unwrap_or(0);
    let left = docker(&["exec", &name, "sh", "-c", portable::LIST_PROCESSES]);
    let down = p.run_odek(&["sandbox", "down", &name]);
    let err = stderr(&done);
    eprintln!("yes: {bytes} bytes, the call took {took:?}");
    assert_eq!(done.status.code(), Some(124), "{err}");
    assert!(
        err.contains("did not finish within the timeout and was killed"),
        "{err}"
    );
    assert!(bytes > 1000, "yes did not run: {bytes} bytes");
    // The timeout starts with the command (a plain call is ~0.1 s): killed
    // and reported within 3 s of it is under 4 s in all (measured: 2.1 s).
    // Through the exec API (ODEK_SUPERVISOR=) the report came after 7.1 s
    // and said it could not kill the command.
    assert!(took < Duration::from_secs(4), "reported after {took:?}");
    assert!(portable::matching(&left, "yes").is_empty(), "{left}");
    assert!(down.status.success(), "{}", stderr(&down));
}

#[test]
fn without_a_supervisor_the_sandbox_runs_the_idle_process() {
    let p = Project::new();
    // Empty is off, as unset is (the suite may run with it set).
    let out = p.run_odek_env(
        &[("ODEK_SUPERVISOR", "")],
        &["sandbox", "up", "--sandbox-image", BASE_IMAGE],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let name = stdout(&out).trim().to_string();
    let entrypoint = docker(&["inspect", "-f", "{{json .Config.Entrypoint}}", &name]);
    let caps = docker(&["inspect", "-f", "{{json .HostConfig.CapAdd}}", &name]);
    let exec = p.run_odek_env(
        &[("ODEK_SUPERVISOR", "")],
        &["sandbox", "exec", &name, "--", "id", "-u"],
    );
    let down = p.run_odek(&["sandbox", "down", &name]);
    assert!(!entrypoint.contains("odek-supervisor"), "{entrypoint}");
    assert!(caps.trim() == "null" || caps.trim() == "[]", "{caps}");
    assert!(exec.status.success(), "{}", stderr(&exec));
    assert!(down.status.success(), "{}", stderr(&down));
}

#[test]
fn an_images_healthcheck_never_runs_in_a_supervised_sandbox() {
    supervisor_bin();
    let p = Project::new();
    // The image's HEALTHCHECK would run as the container's user (root) with
    // the supervisor's capabilities: it is switched off.
    let tag = odek_e2e::unique(&format!("{}/healthcheck", odek_e2e::IMAGE_PREFIX));
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("Dockerfile"),
        format!(
            "FROM {BASE_IMAGE}\nLABEL dev.odek.test=supervisor\nHEALTHCHECK --interval=1s --start-period=1s CMD touch /tmp/healthcheck-ran\n"
        ),
    )
    .expect("write Dockerfile");
    let built = docker(&[
        "build",
        "-q",
        "-t",
        &format!("{tag}:1"),
        &dir.path().display().to_string(),
    ]);
    assert!(!built.trim().is_empty(), "docker build failed");
    let image = format!("{tag}:1");
    // Positive control: under plain Docker the healthcheck runs.
    let id = docker(&[
        "run",
        "-d",
        "--rm",
        "--label",
        "dev.odek.test=supervisor",
        &image,
        "sleep",
        "20",
    ]);
    let id = id.trim().to_string();
    let ran = odek_e2e::wait_until(Duration::from_secs(10), || {
        odek_e2e::docker_ok(&["exec", &id, "test", "-e", "/tmp/healthcheck-ran"])
    });
    docker(&["rm", "-f", &id]);
    assert!(ran, "the control's healthcheck never ran");
    let out = sup(
        &p,
        &[
            "run",
            "--sandbox-image",
            &image,
            "--",
            "sh",
            "-c",
            "sleep 4; ls /tmp/healthcheck-ran 2>/dev/null && echo HEALTHCHECK_RAN; echo done",
        ],
    );
    docker(&["rmi", "-f", &image]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("done"), "{}", stdout(&out));
    assert!(
        !stdout(&out).contains("HEALTHCHECK_RAN"),
        "the image's healthcheck ran in the sandbox"
    );
}

/// A static x86-64 ELF executable that exits 0 at once (`exit(0)` by
/// syscall, one PT_LOAD, no interpreter): what odek accepts as a supervisor
/// binary, which then never says Ready.
fn exits_at_once() -> Vec<u8> {
    let code: [u8; 12] = [
        0xb8, 0x3c, 0, 0, 0, // mov eax, 60 (exit)
        0x31, 0xff, // xor edi, edi
        0x0f, 0x05, // syscall
        0x90, 0x90, 0x90,
    ];
    let base: u64 = 0x40_0000;
    let total = (64 + 56 + code.len()) as u64;
    let mut e = Vec::new();
    e.extend_from_slice(b"\x7fELF\x02\x01\x01\x00");
    e.extend_from_slice(&[0; 8]);
    e.extend_from_slice(&2u16.to_le_bytes()); // ET_EXEC
    e.extend_from_slice(&0x3eu16.to_le_bytes()); // x86-64
    e.extend_from_slice(&1u32.to_le_bytes());
    e.extend_from_slice(&(base + 120).to_le_bytes()); // entry
    e.extend_from_slice(&64u64.to_le_bytes()); // phoff
    e.extend_from_slice(&0u64.to_le_bytes()); // shoff
    e.extend_from_slice(&0u32.to_le_bytes());
    for v in [64u16, 56, 1, 0, 0, 0] {
        e.extend_from_slice(&v.to_le_bytes());
    }
    e.extend_from_slice(&1u32.to_le_bytes()); // PT_LOAD
    e.extend_from_slice(&5u32.to_le_bytes()); // R+X
    for v in [0u64, base, base, total, total, 0x1000] {
        e.extend_from_slice(&v.to_le_bytes());
    }
    e.extend_from_slice(&code);
    e
}

#[test]
fn a_supervisor_that_does_not_start_is_replaced_by_the_exec_api_and_nothing_is_left() {
    let p = Project::new();
    let fake = p.home.path().join("fake-supervisor");
    std::fs::write(&fake, exits_at_once()).expect("write the fake");
    let fake = fake.display().to_string();
    // Positive control: the fake runs, and exits 0, on this machine.
    let ran = std::process::Command::new("sh")
        .args(["-c", &format!("chmod 755 '{fake}' && '{fake}'")])
        .status()
        .expect("run the fake");
    assert!(ran.success(), "the fake supervisor does not run here");
    // An owned sandbox (`odek run`), then a detached one (`sandbox up`).
    let out = p.run_odek_env(
        &[("ODEK_SUPERVISOR", &fake)],
        &[
            "run",
            "--sandbox-image",
            BASE_IMAGE,
            "--",
            "sh",
            "-c",
            "echo ran",
        ],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(stdout(&out).trim(), "ran", "{err}");
    let line = startup_line(&out).unwrap_or_else(|| panic!("no startup line:\n{err}"));
    assert!(
        line.contains("supervisor=off (it did not start in the sandbox"),
        "{line}"
    );
    assert_eq!(
        err.matches("odek's supervisor is off").count(),
        1,
        "said once:\n{err}"
    );
    assert!(p.leftovers().is_empty(), "left: {:?}", p.leftovers());
    let up = p.run_odek_env(
        &[("ODEK_SUPERVISOR", &fake)],
        &["sandbox", "up", "--sandbox-image", BASE_IMAGE],
    );
    assert!(up.status.success(), "{}", stderr(&up));
    let name = stdout(&up).trim().to_string();
    let left = p.leftovers();
    let entrypoint = docker(&["inspect", "-f", "{{json .Config.Entrypoint}}", &name]);
    let exec = p.run_odek(&[
        "sandbox",
        "exec",
        &name,
        "--",
        "echo",
        "through the exec API",
    ]);
    let down = p.run_odek(&["sandbox", "down", &name]);
    assert_eq!(left.len(), 1, "one sandbox, the first removed: {left:?}");
    assert!(!entrypoint.contains("odek-supervisor"), "{entrypoint}");
    assert_eq!(
        stdout(&exec).trim(),
        "through the exec API",
        "{}",
        stderr(&exec)
    );
    assert!(down.status.success(), "{}", stderr(&down));
    assert!(p.leftovers().is_empty(), "left: {:?}", p.leftovers());
}

#[test]
fn an_installed_supervisor_is_found_beside_odek_and_a_missing_one_is_reported() {
    let bin = supervisor_bin();
    // The layout `cargo xtask dist --prefix P` installs: P/bin/odek and
    // P/libexec/odek/odek-supervisor.
    let prefix = tempfile::tempdir().expect("tempdir");
    let odek = prefix.path().join("bin/odek");
    std::fs::create_dir_all(odek.parent().expect("bin")).expect("mkdir bin");
    std::fs::copy(odek_e2e::odek_bin(), &odek).expect("copy odek");
    let run = |p: &Project| {
        let mut c = p.odek(&["run", "--sandbox-image", BASE_IMAGE, "--", "true"]);
        c.env_remove("ODEK_SUPERVISOR");
        let mut c2 = std::process::Command::new(&odek);
        c2.args(c.get_args());
        c2.current_dir(p.path());
        for (k, v) in c.get_envs() {
            match v {
                Some(v) => c2.env(k, v),
                None => c2.env_remove(k),
            };
        }
        c2.output().expect("run the installed odek")
    };
    // Nothing installed: off, said with where odek looked; the run works.
    let p = Project::new();
    let out = run(&p);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let line = startup_line(&out).unwrap_or_else(|| panic!("no startup line:\n{err}"));
    assert!(
        line.contains("supervisor=off (no odek-supervisor installed"),
        "{line}"
    );
    assert!(err.contains("owner link held from inside"), "{err}");
    // Installed: on.
    let libexec = prefix.path().join("libexec/odek");
    std::fs::create_dir_all(&libexec).expect("mkdir libexec");
    std::fs::copy(&bin, libexec.join("odek-supervisor")).expect("install the supervisor");
    let p = Project::new();
    let out = run(&p);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let line = startup_line(&out).unwrap_or_else(|| panic!("no startup line:\n{err}"));
    assert!(line.ends_with("supervisor=on"), "{line}");
    assert!(!err.contains("supervisor is off"), "{err}");
    // A dynamic executable beside odek comes first, and is refused.
    std::fs::copy("/bin/true", prefix.path().join("bin/odek-supervisor")).expect("copy true");
    let p = Project::new();
    let out = run(&p);
    let line = startup_line(&out).unwrap_or_else(|| panic!("no startup line:\n{}", stderr(&out)));
    assert!(line.contains("is not a static executable)"), "{line}");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// The pid of the supervisor's server in sandbox `name`, found from outside
/// (`docker exec` as root; its `/proc/<pid>/comm` is `odek-server`).
fn server_pid(name: &str) -> String {
    docker(&[
        "exec",
        "-u",
        "0",
        name,
        "sh",
        "-c",
        r#"for p in /proc/[0-9]*; do [ "$(cat "$p/comm" 2>/dev/null)" = odek-server ] && echo "${p#/proc/}"; done; true"#,
    ])
}

#[test]
fn a_killed_supervisor_server_leaves_the_command_unknown_and_the_next_runs() {
    supervisor_bin();
    let p = Project::new();
    let out = sup(&p, &["sandbox", "up", "--sandbox-image", BASE_IMAGE]);
    assert!(out.status.success(), "{}", stderr(&out));
    let name = stdout(&out).trim().to_string();
    let before = server_pid(&name);
    assert!(!before.is_empty() && !before.contains('\n'), "{before:?}");
    let (running, after) = std::thread::scope(|s| {
        let running = s.spawn(|| {
            sup(
                &p,
                &[
                    "sandbox",
                    "exec",
                    &name,
                    "--",
                    "sh",
                    "-c",
                    "sleep 30; echo finished",
                ],
            )
        });
        // Once the command runs, the server is killed from outside (no
        // command can: see the attacks above).
        let t = Instant::now();
        while docker(&["exec", &name, "sh", "-c", "pgrep -x sleep || true"]).is_empty() {
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "the command never ran"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        docker(&[
            "exec",
            "-u",
            "0",
            &name,
            "sh",
            "-c",
            &format!("kill -9 {before}"),
        ]);
        let running = running.join().expect("the exec thread");
        (running, server_pid(&name))
    });
    let next = sup(
        &p,
        &[
            "sandbox",
            "exec",
            &name,
            "--",
            "sh",
            "-c",
            "echo ok; pgrep -x sleep || echo gone",
        ],
    );
    let down = p.run_odek(&["sandbox", "down", &name]);
    // Unknown, never a success: the CLI's 255 and a message saying so.
    assert_eq!(running.status.code(), Some(255), "{}", stderr(&running));
    assert!(
        stderr(&running).contains("status is unknown"),
        "{}",
        stderr(&running)
    );
    assert!(!stdout(&running).contains("finished"));
    assert!(
        !after.is_empty() && after != before,
        "{before} then {after:?}"
    );
    // The next command runs, on the new server; the old one's tree is gone.
    assert!(next.status.success(), "{}", stderr(&next));
    assert_eq!(stdout(&next), "ok\ngone\n", "{}", stderr(&next));
    assert!(down.status.success(), "{}", stderr(&down));
}

/// A project volume over odek's supervisor or the engine's init would make
/// the repository's file the sandbox's process, run as root with the
/// supervisor's capabilities (an adversarial review ran one that stopped the
/// supervisor and kept the sandbox past its owner's SIGKILL). Approved or
/// not, it is refused before anything runs, naming why; nothing is left.
#[test]
fn a_project_volume_over_the_supervisor_or_the_init_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    for target in ["/.odek/odek-supervisor", "/.odek", "/usr/sbin/docker-init"] {
        let p = Project::new();
        let fake = p.path().join("fake");
        std::fs::write(&fake, "#!/bin/sh\nexec \"$@\"\n").expect("write fake");
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        std::fs::write(
            p.path().join("odek.json"),
            format!(
                r#"{{"sandbox_image": "{BASE_IMAGE}", "sandbox_volumes": ["./fake:{target}:ro"]}}"#
            ),
        )
        .expect("write odek.json");
        let mut args: Vec<String> = vec!["run".into(), "--".into()];
        args.extend(p.marker_argv());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = p.run_odek_env(&[("ODEK_APPROVE_PROJECT_SANDBOX", "1")], &args);
        odek_e2e::assert_refused(&p, &out, "is not allowed");
    }
}
