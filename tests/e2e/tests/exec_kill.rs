//! A command that outlives `--timeout`, or whose `odek sandbox exec` gets a
//! signal, is killed in the sandbox with its descendants (SANDBOXING.md,
//! "Timeouts and signals"); the sandbox itself keeps running. Each check that
//! a process is gone has a positive control: the same probe seeing it while
//! it runs.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use odek_e2e::{docker, stderr, stdout, wait_timeout, wait_until, Project, BASE_IMAGE};

/// A detached sandbox on the base image, removed on drop.
struct Detached {
    p: Project,
    name: String,
}

impl Detached {
    fn up() -> Detached {
        Detached::up_on(BASE_IMAGE)
    }

    fn up_on(image: &str) -> Detached {
        Detached::up_in(Project::new(), image)
    }

    /// A sandbox without odek's supervisor (`ODEK_SUPERVISOR=`): its
    /// commands run through the exec API, killed by their `ODEK_EXEC_ID`
    /// tag — the fallback's own kill, which these tests pin.
    fn up_exec_api() -> Detached {
        Detached::up_in(Project::new().exec_api(), BASE_IMAGE)
    }

    fn up_in(p: Project, image: &str) -> Detached {
        let out = p.odek_ok(&["sandbox", "up", "--sandbox-image", image]);
        let name = stdout(&out).trim().to_string();
        Detached { p, name }
    }

    /// The argv of every process in the sandbox whose command line holds
    /// `needle` (read with `docker exec`, not through odek).
    fn processes(&self, needle: &str) -> Vec<String> {
        let script = "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done";
        docker(&["exec", &self.name, "sh", "-c", script])
            .lines()
            .filter(|l| l.contains(needle))
            .map(str::to_string)
            .collect()
    }

    /// Starts `odek sandbox exec NAME <flags> -- sh -c <sleepers(secs)>` in
    /// the background and waits (≤ `limit`) until the probe sees both
    /// sleeps — the positive control for every "gone" check after it.
    fn spawn_sleepers(&self, flags: &[&str], secs: &str, limit: Duration) -> std::process::Child {
        let script = sleepers(secs);
        let mut args = vec!["sandbox", "exec", self.name.as_str()];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["--", "sh", "-c", &script]);
        let child = self
            .p
            .odek(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn odek sandbox exec");
        let needle = format!("sleep {secs}");
        let seen = wait_until(limit, || self.processes(&needle).len() >= 2);
        assert!(
            seen,
            "the probe never saw the command's processes: {:?}",
            self.processes("sleep")
        );
        child
    }

    /// `odek sandbox exec NAME --timeout <secs> -- sh -c <script>`, waited for.
    fn exec_timed(&self, secs: &str, script: &str) -> std::process::Output {
        self.p.run_odek(&[
            "sandbox",
            "exec",
            &self.name,
            "--timeout",
            secs,
            "--",
            "sh",
            "-c",
            script,
        ])
    }

    fn running(&self) -> bool {
        docker(&["inspect", "-f", "{{.State.Running}}", &self.name]) == "true"
    }

    /// Asserts that no process matching `needle` is left within 3 s, and
    /// that the sandbox itself still runs.
    fn assert_gone(&self, needle: &str, after: &str) {
        let gone = wait_until(Duration::from_secs(3), || self.processes(needle).is_empty());
        assert!(
            gone,
            "still running after {after}: {:?}",
            self.processes("sleep")
        );
        assert!(self.running(), "the sandbox itself must keep running");
    }
}

impl Drop for Detached {
    fn drop(&mut self) {
        let _ = self.p.run_odek(&["sandbox", "down", &self.name]);
    }
}

/// A command whose processes are recognisable: a background and a
/// foreground `sleep` with a marker duration.
fn sleepers(secs: &str) -> String {
    format!("sleep {secs} & sleep {secs}")
}

#[test]
fn a_timed_out_command_and_its_children_are_killed_in_the_sandbox() {
    let sb = Detached::up();
    let secs = "301";
    let t0 = Instant::now();
    let child = sb.spawn_sleepers(&["--timeout", "4"], secs, Duration::from_secs(3));
    let out = wait_timeout(
        child,
        Duration::from_secs(30),
        "odek sandbox exec --timeout 4",
    );
    let took = t0.elapsed();
    assert_eq!(out.status.code(), Some(124), "stderr:\n{}", stderr(&out));
    assert!(took < Duration::from_secs(15), "took {took:?}");
    assert!(
        stderr(&out).contains("did not finish within the timeout and was killed"),
        "{}",
        stderr(&out)
    );
    sb.assert_gone(&format!("sleep {secs}"), "the timeout");
}

#[test]
fn a_command_within_its_timeout_is_left_alone() {
    let sb = Detached::up();
    let out = sb.exec_timed("30", "sleep 302 & echo started");
    assert_eq!(out.status.code(), Some(0), "stderr:\n{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "started");
    // The background child outlives its shell: no timeout, no kill.
    assert_eq!(
        sb.processes("sleep 302").len(),
        1,
        "{:?}",
        sb.processes("sleep")
    );
}

fn interrupted_exec_kills_the_command(sig: &str, code: i32) {
    let sb = Detached::up();
    let secs = if sig == "INT" { "303" } else { "304" };
    let child = sb.spawn_sleepers(&[], secs, Duration::from_secs(20));
    let st = Command::new("kill")
        .args([&format!("-{sig}"), &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(st.success());
    let out = wait_timeout(
        child,
        Duration::from_secs(15),
        "odek sandbox exec after a signal",
    );
    assert_eq!(out.status.code(), Some(code), "stderr:\n{}", stderr(&out));
    assert!(
        stderr(&out).contains("the command was killed"),
        "{}",
        stderr(&out)
    );
    sb.assert_gone(&format!("sleep {secs}"), &format!("SIG{sig}"));
}

#[test]
fn sigint_to_sandbox_exec_kills_the_command_and_exits_130() {
    interrupted_exec_kills_the_command("INT", 130);
}

#[test]
fn sigterm_to_sandbox_exec_kills_the_command_and_exits_143() {
    interrupted_exec_kills_the_command("TERM", 143);
}

#[test]
fn through_the_exec_api_a_kill_that_cannot_run_is_reported_not_claimed() {
    // The command removes `cat`, which the kill needs: odek must say it could
    // not kill, not that it did (and the process really is still there).
    let sb = Detached::up_exec_api();
    let out = sb.exec_timed("3", "mv /usr/bin/cat /usr/bin/cat.moved && sleep 306");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(124), "{err}");
    assert!(
        err.contains("could not kill the command") && err.contains("cat"),
        "{err}"
    );
    assert!(!err.contains("and was killed"), "claimed a kill:\n{err}");
    assert!(err.contains("could not be killed"), "{err}");
    assert!(
        !sb.processes("sleep 306").is_empty(),
        "the report is true: the command still runs"
    );
}

#[test]
fn a_command_that_exits_before_its_timeout_keeps_its_status_even_if_a_child_holds_its_output() {
    // Docker keeps the output stream open ~2 s after the command exits while
    // a background child holds it; a 1 s timeout must not turn that into
    // "timed out" nor kill the child.
    let sb = Detached::up();
    let out = sb.exec_timed("1", "sleep 307 & echo hi; exit 5");
    assert_eq!(out.status.code(), Some(5), "stderr:\n{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "hi");
    assert!(
        !stderr(&out).contains("timeout"),
        "reported a timeout:\n{}",
        stderr(&out)
    );
    assert_eq!(
        sb.processes("sleep 307").len(),
        1,
        "the background child was left alone: {:?}",
        sb.processes("sleep")
    );
}

/// `sh` waits on `sleep`: a kill that ended `sleep` before `sh` would let
/// the shell run its next step (found by a review: /proc/10 sorts before
/// /proc/9, so a one-by-one kill in /proc order woke the shell).
const NEXT_STEP: &str = "sleep 30; touch /workspace/late";

#[test]
fn a_timed_out_command_runs_no_further_step_in_sandbox_exec() {
    // A fresh sandbox each time: the PIDs, hence the /proc order, repeat.
    for round in 0..3 {
        let d = Detached::up();
        let out = d.exec_timed("1", NEXT_STEP);
        assert_eq!(
            out.status.code(),
            Some(124),
            "round {round}: {}",
            stderr(&out)
        );
        assert!(
            stderr(&out).contains("was killed"),
            "round {round}: {}",
            stderr(&out)
        );
        std::thread::sleep(Duration::from_millis(1500));
        assert!(
            !d.p.path().join("late").exists(),
            "round {round}: the shell ran its next step after the kill"
        );
    }
}

#[test]
fn a_timed_out_command_runs_no_further_step_in_odek_run() {
    for round in 0..3 {
        let p = Project::new();
        let out = p.run_odek(&[
            "run",
            "--sandbox-image",
            BASE_IMAGE,
            "--timeout",
            "1",
            "--",
            "sh",
            "-c",
            NEXT_STEP,
        ]);
        assert_eq!(
            out.status.code(),
            Some(124),
            "round {round}: {}",
            stderr(&out)
        );
        assert!(
            !p.path().join("late").exists(),
            "round {round}: the shell ran its next step after the kill"
        );
        assert!(p.leftovers().is_empty());
    }
}

#[test]
fn a_child_that_rewrites_its_environment_is_killed_with_its_parent() {
    // perl's `$0=` overwrites the memory /proc/<pid>/environ shows, so the
    // tag is gone; the child is still found as a child of the tagged shell.
    let d = Detached::up();
    let out = d.exec_timed(
        "1",
        "perl -e '$0=q(odek-renamed); sleep 4; open F, q(>/workspace/late-child)'; touch /workspace/late-shell",
    );
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    assert!(stderr(&out).contains("was killed"), "{}", stderr(&out));
    std::thread::sleep(Duration::from_secs(5));
    assert!(
        !d.p.path().join("late-child").exists(),
        "the renamed child ran on"
    );
    assert!(!d.p.path().join("late-shell").exists(), "the shell ran on");
}

#[test]
fn through_the_exec_api_a_command_that_rewrites_its_own_environment_is_not_claimed_killed() {
    // The command's own process renamed: odek cannot tell it from another
    // program's exec, so it says it could not confirm the kill (and does
    // not wait for a status past the timeout).
    let d = Detached::up_exec_api();
    let t0 = Instant::now();
    let out = d.exec_timed("1", "exec perl -e '$0=q(odek-renamed); sleep 30'");
    let took = t0.elapsed();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(124), "{err}");
    assert!(!err.contains("was killed"), "claims a kill: {err}");
    assert!(err.contains("carry no ODEK_EXEC_ID tag"), "{err}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    // Positive control: it really still runs.
    assert!(!d.processes("odek-renamed").is_empty(), "{err}");
}

#[test]
fn the_kill_works_under_busybox_ash() {
    // The pinned default image is alpine: /bin/sh and cat are BusyBox's.
    let d = Detached::up_on(odek_e2e::BUSYBOX_IMAGE);
    for (script, late) in [
        ("sleep 30; touch /workspace/late-a", "late-a"),
        ("env -i /bin/sleep 30; touch /workspace/late-b", "late-b"),
        (
            "sleep 31 & sleep 31 & wait; touch /workspace/late-c",
            "late-c",
        ),
    ] {
        let out = d.exec_timed("1", script);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(124), "{script}: {err}");
        assert!(err.contains("was killed"), "{script}: {err}");
        std::thread::sleep(Duration::from_millis(1500));
        assert!(!d.p.path().join(late).exists(), "{script}: ran on");
    }
    let left = docker(&["exec", &d.name, "ps"]);
    assert!(!left.contains("sleep 3"), "{left}");
}

#[test]
fn through_the_exec_api_an_untagged_orphan_or_a_forged_tag_makes_the_kill_unconfirmed() {
    // A process that dropped the tag and left its parent (now docker-init's
    // child), and one whose tag odek never made: odek cannot tell them from
    // another program's, so it must not claim the kill (a review found
    // "was killed" while both wrote their files afterwards).
    let d = Detached::up_exec_api();
    for script in [
        "(env -i sh -c 'sleep 6; touch /workspace/late' >/dev/null 2>&1 &); sleep 100",
        "exec env ODEK_EXEC_ID=x sh -c 'sleep 6; touch /workspace/late'",
    ] {
        let out = d.exec_timed("1", script);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(124), "{script}: {err}");
        assert!(
            !err.contains("was killed"),
            "{script}: claims a kill: {err}"
        );
        assert!(err.contains("cannot be confirmed"), "{script}: {err}");
    }
}

#[test]
fn through_the_exec_api_an_orphan_named_like_the_idle_process_makes_the_kill_unconfirmed() {
    // A shell copied under the idle process's name `cat`, orphaned (docker-
    // init's child) and untagged, in a fresh sandbox so that no earlier
    // stranger decides the outcome: only docker-init's first child is the
    // idle process, so this one is a stranger (a review found it spared and
    // "was killed" claimed while its child ran on).
    let d = Detached::up_exec_api();
    let script = "mkdir -p /workspace/.x && cp /bin/sh /workspace/.x/cat && \
         echo 'PATH=/usr/bin:/bin; sleep 7; touch /workspace/late' > /workspace/.x/s && \
         (cd /workspace/.x && env -i PATH=/workspace/.x cat < s >/dev/null 2>&1 &); sleep 100";
    let out = d.exec_timed("1", script);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(124), "{err}");
    assert!(!err.contains("was killed"), "claims a kill: {err}");
    assert!(err.contains("cannot be confirmed"), "{err}");
    // positive control: the copied shell runs as `cat` beside the idle one
    assert!(
        d.processes("sleep 7").len() == 1,
        "the orphan's child is not running: {:?}",
        d.processes("")
    );
}

#[test]
fn through_the_supervisor_an_orphan_of_the_command_is_killed_with_it() {
    // The exec API cannot tell an untagged orphan from another program's
    // (above); the supervisor adopts it (a subreaper) and kills it with the
    // command that started it.
    let d = Detached::up();
    let out = d.exec_timed(
        "1",
        "(env -i sh -c 'sleep 4; touch /workspace/late' >/dev/null 2>&1 &); sleep 100",
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(124), "{err}");
    assert!(err.contains("was killed"), "{err}");
    std::thread::sleep(Duration::from_secs(5));
    assert!(
        !d.p.path().join("late").exists(),
        "the orphan ran on: {err}"
    );
}
