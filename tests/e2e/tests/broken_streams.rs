//! Broken standard streams (SPEC §6.1, §6.3): odek's stderr or stdout full
//! (`/dev/full`) or a pipe nobody reads. Writing there must never panic, and
//! every exit path removes what odek created. `odek run` still runs the
//! command and passes its status through (only odek's own lines are lost),
//! except a host fallback, whose loud warning could not be said: that is
//! refused. `odek sandbox up` prints the name on stdout even when stderr is
//! broken; when stdout is broken nobody learns the name, so the sandbox is
//! removed and odek fails.

use std::process::{Command, Output, Stdio};

use odek_e2e::{
    docker, docker_ok, stderr, stdout, wait_timeout, Project, BASE_IMAGE, ODEK_TIMEOUT,
};

/// A broken place for one of odek's streams.
#[derive(Clone, Copy, Debug)]
enum Broken {
    /// `/dev/full`: every write fails with ENOSPC.
    Full,
    /// A pipe whose read end was closed before odek started: EPIPE.
    ClosedPipe,
    /// `/dev/null` (what a closed stream becomes: the Rust runtime reopens
    /// a closed standard stream as `/dev/null`): writes succeed, nobody
    /// reads them.
    Null,
    /// `/dev/zero`: another character device that takes every write and
    /// shows it to no one.
    Zero,
}

impl Broken {
    fn stdio(self) -> Stdio {
        match self {
            Broken::Full => std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .expect("open /dev/full")
                .into(),
            Broken::ClosedPipe => {
                let (reader, writer) = std::io::pipe().expect("pipe");
                drop(reader);
                writer.into()
            }
            Broken::Null => Stdio::null(),
            Broken::Zero => std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/zero")
                .expect("open /dev/zero")
                .into(),
        }
    }
}

/// Runs `cmd` with stdin closed, stderr broken and stdout captured.
fn with_broken_stderr(mut cmd: Command, how: Broken) -> Output {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(how.stdio());
    let desc = format!("{cmd:?} 2>{how:?}");
    wait_timeout(cmd.spawn().expect("spawn odek"), ODEK_TIMEOUT, &desc)
}

/// Runs `cmd` with stdin closed, stdout broken and stderr captured.
fn with_broken_stdout(mut cmd: Command, how: Broken) -> Output {
    cmd.stdin(Stdio::null())
        .stdout(how.stdio())
        .stderr(Stdio::piped());
    let desc = format!("{cmd:?} >{how:?}");
    wait_timeout(cmd.spawn().expect("spawn odek"), ODEK_TIMEOUT, &desc)
}

fn assert_ran_in_sandbox(p: &Project, out: &Output, how: Broken) {
    assert_eq!(
        out.status.code(),
        Some(7),
        "2>{how:?}: expected the command's own status 7 (a panic exits 101); stdout:\n{}",
        stdout(out)
    );
    assert!(
        p.path().join("M").exists(),
        "2>{how:?}: the command did not run (no /workspace/M)"
    );
    assert_eq!(stdout(out), "out\n", "2>{how:?}: the command's stdout");
    assert!(
        p.leftovers().is_empty(),
        "2>{how:?}: container left: {:?}",
        p.leftovers()
    );
}

fn run_touch(p: &Project) -> Command {
    p.odek(&[
        "-v",
        "run",
        "--sandbox-image",
        BASE_IMAGE,
        "--",
        "sh",
        "-c",
        "touch /workspace/M; echo out; echo err >&2; exit 7",
    ])
}

#[test]
fn run_with_stderr_full_runs_the_command_and_removes_the_sandbox() {
    let p = Project::new();
    let out = with_broken_stderr(run_touch(&p), Broken::Full);
    assert_ran_in_sandbox(&p, &out, Broken::Full);
}

#[test]
fn run_with_stderr_into_a_closed_pipe_runs_the_command_and_removes_the_sandbox() {
    let p = Project::new();
    let out = with_broken_stderr(run_touch(&p), Broken::ClosedPipe);
    assert_ran_in_sandbox(&p, &out, Broken::ClosedPipe);
}

#[test]
fn a_host_fallback_whose_warning_cannot_be_written_is_refused() {
    let p = Project::new();
    let argv = [
        "run",
        "--sandbox-image",
        BASE_IMAGE,
        "--",
        "sh",
        "-c",
        &p.marker_cmd(),
    ];
    let no_daemon = |c: &mut Command| {
        c.env("DOCKER_HOST", "unix:///nonexistent.sock");
    };
    // Control: with a stderr to say it on, implicit mode runs on the host.
    let mut ok = p.odek(&argv);
    no_daemon(&mut ok);
    let ok = odek_e2e::run_timeout(&mut ok, ODEK_TIMEOUT);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    assert!(stderr(&ok).contains("NO SANDBOX"), "{}", stderr(&ok));
    assert!(p.marker().exists(), "control: the host run did not happen");
    std::fs::remove_file(p.marker()).expect("rm marker");

    for how in [Broken::Full, Broken::ClosedPipe, Broken::Null, Broken::Zero] {
        let mut c = p.odek(&argv);
        no_daemon(&mut c);
        let out = with_broken_stderr(c, how);
        assert_eq!(
            out.status.code(),
            Some(125),
            "2>{how:?}: a host run without its loud warning must be refused"
        );
        assert!(
            !p.marker().exists(),
            "2>{how:?}: the command ran on the host unannounced"
        );
    }
    // stderr closed outright (`2>&-`), through a shell.
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg("exec \"$@\" 2>&-")
        .arg("sh")
        .arg(odek_e2e::odek_bin())
        .arg("-C")
        .arg(p.path())
        .args(argv)
        .env("ODEK_HOME", p.home.path())
        .env("DOCKER_HOST", "unix:///nonexistent.sock")
        .stdin(Stdio::null());
    for (k, _) in std::env::vars() {
        if k.starts_with("ODEK_") && k != "ODEK_HOME" && k != "ODEK_BIN" {
            c.env_remove(&k);
        }
    }
    let out = odek_e2e::run_timeout(&mut c, ODEK_TIMEOUT);
    assert_eq!(
        out.status.code(),
        Some(125),
        "2>&-: a host run without its loud warning must be refused"
    );
    assert!(
        !p.marker().exists(),
        "2>&-: the command ran on the host unannounced"
    );
}

#[test]
fn sandbox_up_with_stderr_full_prints_the_name_and_stays_up() {
    let p = Project::new();
    for how in [Broken::Full, Broken::ClosedPipe] {
        let out = with_broken_stderr(
            p.odek(&["sandbox", "up", "--sandbox-image", BASE_IMAGE]),
            how,
        );
        let name = stdout(&out).trim().to_string();
        assert_eq!(
            out.status.code(),
            Some(0),
            "2>{how:?}: sandbox up failed; stdout: {name:?}"
        );
        assert!(
            name.starts_with("odek-"),
            "2>{how:?}: no name on stdout: {name:?}"
        );
        assert_eq!(
            docker(&["inspect", "-f", "{{.State.Running}}", &name]),
            "true",
            "2>{how:?}: {name} is not running"
        );
        assert_eq!(p.leftovers().len(), 1, "2>{how:?}: {:?}", p.leftovers());
        let down = p.odek_ok(&["sandbox", "down", &name]);
        assert_eq!(stdout(&down).trim(), name);
        assert!(!docker_ok(&["inspect", &name]), "{name} still exists");
    }
}

#[test]
fn sandbox_up_with_stdout_full_removes_the_sandbox_and_fails() {
    let p = Project::new();
    for (how, json) in [
        (Broken::Full, false),
        (Broken::ClosedPipe, false),
        (Broken::Full, true),
    ] {
        let mut args = vec!["sandbox", "up", "--sandbox-image", BASE_IMAGE];
        if json {
            args.push("--json");
        }
        let out = with_broken_stdout(p.odek(&args), how);
        let err = stderr(&out);
        assert_eq!(
            out.status.code(),
            Some(1),
            ">{how:?} (json {json}): nobody learned the name, odek must fail:\n{err}"
        );
        assert!(
            err.contains("cannot print the sandbox's name on stdout")
                && err.contains("it was removed"),
            ">{how:?} (json {json}): {err}"
        );
        assert!(
            p.leftovers().is_empty(),
            ">{how:?} (json {json}): sandbox left: {:?}",
            p.leftovers()
        );
    }
}

/// An approval card that cannot be written (stderr full) is never
/// answered: whatever is typed at the terminal, nobody saw what it approves,
/// so the run is refused as without a terminal (125), nothing runs.
#[test]
fn an_approval_card_that_cannot_be_shown_is_not_answered() {
    use expectrl::session::OsSession as Session;
    use expectrl::{Eof, Expect};
    let p = Project::new();
    std::fs::write(
        p.path().join("odek.json"),
        format!(r#"{{"sandbox_compose_project": "{}"}}"#, odek_e2e::PROJECT),
    )
    .expect("write odek.json");
    // The terminal is stdin and stdout; stderr, where the card goes, is full.
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg("exec \"$@\" 2>/dev/full")
        .arg("sh")
        .arg(odek_e2e::odek_bin())
        .arg("-C")
        .arg(p.path())
        .args(["run", "--sandbox-image", BASE_IMAGE, "--"])
        .args(["touch", "/workspace/host-marker"])
        .env("ODEK_HOME", p.home.path())
        .env_remove("ODEK_APPROVE_PROJECT_SANDBOX")
        .current_dir(p.path());
    let mut s = Session::spawn(c).expect("spawn odek in a pty");
    s.set_expect_timeout(Some(std::time::Duration::from_secs(120)));
    s.send_line("y").expect("type y");
    s.expect(Eof).expect("odek exits");
    let code = match s.get_process().wait().expect("wait") {
        expectrl::process::unix::WaitStatus::Exited(_, c) => c,
        other => panic!("odek did not exit normally: {other:?}"),
    };
    assert_eq!(code, 125, "an unseen card was answered");
    assert!(!p.marker().exists(), "the command ran");
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
}
