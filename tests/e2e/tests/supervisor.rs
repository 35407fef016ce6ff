//! odek's supervisor in the sandbox (SANDBOXING.md, "The
//! supervisor"), through the `odek` command line: commands of any user —
//! root included — cannot signal it, stop it or reach its descriptors; a
//! timeout kills a command's whole tree; a background job that keeps the
//! output open does not hold the call; another process reaches a detached
//! sandbox's supervisor through a relay; and with `ODEK_SUPERVISOR=` empty
//! the sandbox runs the idle process as before.
//!
//! `cargo xtask e2e` builds the static supervisor and names it in
//! `ODEK_SUPERVISOR_BIN`; these tests pass it to odek as `ODEK_SUPERVISOR`
//! (the opt-in). Run without it, they fail saying so (never skipped).

use std::time::{Duration, Instant};

use odek_e2e::{docker, operators, stderr, stdout, Project, BASE_IMAGE};

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

/// A script run inside the sandbox that tries every attack on the
/// supervisor (found from /proc as the process of uid 65533) and prints
/// what succeeded, with a positive control: the same signal on a process
/// of its own.
const ATTACKS: &str = r#"
sup=""
for p in /proc/[0-9]*; do
  n=${p#/proc/}
  if grep -q '^Uid:[[:space:]]*65533' "$p/status" 2>/dev/null && tr '\0' ' ' < "$p/cmdline" 2>/dev/null | grep -q 'odek-supervisor serve'; then sup=$n; fi
done
echo "sup=$sup"
kill -STOP "$sup" 2>/dev/null && echo ATTACK_STOPPED
kill -9 "$sup" 2>/dev/null && echo ATTACK_KILLED
for s in TSTP ALRM USR1 36; do kill -s "$s" 1 2>/dev/null || kill "-$s" 1 2>/dev/null; done
sleep 0.3
st=$(cut -d' ' -f3 "/proc/$sup/stat" 2>/dev/null)
{ [ "$st" = T ] || [ -z "$st" ]; } && echo ATTACK_VIA_INIT
( exec 9<"/proc/$sup/fd/0" ) 2>/dev/null && echo ATTACK_FD0
( exec 9>"/proc/$sup/fd/1" ) 2>/dev/null && echo ATTACK_FD1
cat "/proc/$sup/environ" >/dev/null 2>&1 && echo ATTACK_ENVIRON
mv /.odek /.odek-moved 2>/dev/null && echo ATTACK_RENAME
( : > /.odek/odek-supervisor ) 2>/dev/null && echo ATTACK_REPLACE
grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status
sleep 30 & k=$!
kill -9 "$k" && echo CONTROL_KILLED
echo "uid=$(id -u)"
"#;

fn assert_attacks_failed(out: &std::process::Output, want_uid: u32) {
    let text = stdout(out);
    let ctx = format!("stdout:\n{text}\nstderr:\n{}", stderr(out));
    assert!(out.status.success(), "{ctx}");
    let sup = text
        .lines()
        .find_map(|l| l.strip_prefix("sup="))
        .unwrap_or_default();
    assert!(
        !sup.is_empty(),
        "no supervisor process in the sandbox: {ctx}"
    );
    assert!(text.contains("CONTROL_KILLED"), "positive control: {ctx}");
    for attack in [
        "ATTACK_STOPPED",
        "ATTACK_KILLED",
        "ATTACK_VIA_INIT",
        "ATTACK_FD0",
        "ATTACK_FD1",
        "ATTACK_ENVIRON",
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
    let tag = odek_e2e::unique("odek-test/healthcheck");
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
