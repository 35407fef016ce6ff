//! gVisor (`runsc`, Debian's build) registered as a runtime of a second
//! `dockerd` ([`SecondDaemon`]), and what odek does with it (SPEC §6.1
//! "runtime", docs/SANDBOXING.md "gVisor (runsc)").
//!
//! The daemon's `daemon.json` registers `runsc` (`/usr/bin/runsc`) and
//! `gv`, a symbolic link to it under another file name (in the test's
//! temporary directory), both with `runtimeArgs` `--network=none` (this
//! runsc's own network setup refuses every network namespace on this kernel:
//! "cannot run with network enabled in root network namespace") and
//! `--oci-seccomp`. The busybox image is copied in with `docker save`/`load`;
//! nothing is pulled. The daemon, its data root and the link go with the
//! test.
//!
//! gVisor runs containers here (the premise: `docker run --runtime runsc …
//! uname -r` reports gVisor's kernel, not the host's), and odek refuses it:
//! by the registered path before anything is created, and, for a gVisor
//! registered under another name, at verify from the host's process of the
//! container (`runsc-sandbox`), the container removed.

use std::process::Output;

use odek_e2e::second_daemon::{DaemonOptions, SecondDaemon};
use odek_e2e::{run_timeout, stderr, stdout, Project, BUSYBOX_IMAGE, ODEK_TIMEOUT};

/// The gVisor binary this machine has (Debian's `runsc` package).
const RUNSC: &str = "/usr/bin/runsc";

/// A second daemon with `runsc` and `gv` (a link to it named `gvisor` in
/// `links`) registered, the busybox image loaded.
fn runsc_daemon(links: &std::path::Path) -> SecondDaemon {
    assert!(
        std::path::Path::new(RUNSC).exists(),
        "{RUNSC} is missing: apt-get install runsc (Debian's gVisor)"
    );
    let gv = links.join("gvisor");
    std::os::unix::fs::symlink(RUNSC, &gv).expect("symlink");
    let args = r#"["--network=none", "--oci-seccomp"]"#;
    let json = format!(
        r#"{{"runtimes": {{"runsc": {{"path": "{RUNSC}", "runtimeArgs": {args}}}, "gv": {{"path": "{}", "runtimeArgs": {args}}}}}}}"#,
        gv.display()
    );
    let dd = SecondDaemon::start(DaemonOptions {
        daemon_json: Some(json),
        ..DaemonOptions::default()
    });
    dd.load_image(BUSYBOX_IMAGE);
    dd
}

/// `odek <args>` of project `p` against `dd` (its Unix socket).
fn odek_on(p: &Project, dd: &SecondDaemon, args: &[&str]) -> Output {
    let mut c = p.odek(args);
    c.env("DOCKER_HOST", dd.host())
        .env_remove("DOCKER_CONTEXT")
        .env_remove("DOCKER_TLS_VERIFY")
        .env_remove("DOCKER_CERT_PATH");
    run_timeout(&mut c, ODEK_TIMEOUT)
}

/// Unix time now, to the nanosecond, as `docker events --since` takes it
/// (`<seconds>.<nanoseconds>`): the premise's own containers, a moment
/// before, stay out of the window.
fn now() -> String {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock");
    format!("{}.{:09}", d.as_secs(), d.subsec_nanos())
}

/// Containers `dd` created from `since` to now (its event log).
fn created_since(dd: &SecondDaemon, since: &str) -> Vec<String> {
    let until = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs()
        + 1;
    dd.docker(&[
        "events",
        "--since",
        since,
        "--until",
        &until.to_string(),
        "--filter",
        "type=container",
        "--filter",
        "event=create",
        "--format",
        "{{.Actor.ID}}",
    ])
    .lines()
    .map(str::to_string)
    .collect()
}

/// `odek run --sandbox-runtime <runtime> -- <marker>` on `dd`: refused
/// (125), the marker not made on the host, no container left; its stderr.
fn refused_run(p: &Project, dd: &SecondDaemon, runtime: &str) -> String {
    let mut argv = vec![
        "run",
        "--sandbox-runtime",
        runtime,
        "--sandbox-image",
        BUSYBOX_IMAGE,
        "--",
    ];
    let marker = p.marker_argv();
    argv.extend(marker.iter().map(String::as_str));
    let out = odek_on(p, dd, &argv);
    let err = stderr(&out);
    assert_eq!(
        out.status.code(),
        Some(125),
        "refused: {err}\n{}",
        stdout(&out)
    );
    assert!(!p.marker().exists(), "the command ran on the host: {err}");
    assert!(
        !err.contains("NO SANDBOX"),
        "no fallback to the host: {err}"
    );
    assert_eq!(dd.docker(&["ps", "-aq"]), "", "no container left: {err}");
    err
}

/// On a daemon that has gVisor, an unknown runtime is still refused before
/// create: the message names the runtimes it has (runsc among them), the
/// daemon's event log has no create, nothing ran on the host.
#[test]
fn an_unknown_runtime_on_a_runsc_daemon_is_refused_before_create() {
    let links = tempfile::tempdir().expect("tempdir");
    let dd = runsc_daemon(links.path());
    let p = Project::new();
    let since = now();
    let err = refused_run(&p, &dd, "odek-no-such-runtime");
    assert!(
        err.contains("\"odek-no-such-runtime\" is not a runtime the engine")
            && err.contains("gv, io.containerd.runc.v2")
            && err.contains("runc (default), runsc"),
        "{err}"
    );
    assert_eq!(created_since(&dd, &since), Vec::<String>::new(), "{err}");
}

/// gVisor runs a container on this daemon (its kernel release is not the
/// host's), and odek refuses it, saying why check by check: `runsc` before
/// anything is created (class config; `config view` says the same), and
/// gVisor registered as `gv` (another file name) at verify, from the host's
/// process of the container (`runsc-sandbox`), the container removed.
#[test]
fn gvisor_runs_here_and_odek_refuses_it_before_create_or_at_verify() {
    let links = tempfile::tempdir().expect("tempdir");
    let dd = runsc_daemon(links.path());

    // The premise: both names run containers under gVisor here.
    let host = std::process::Command::new("uname")
        .arg("-r")
        .output()
        .expect("uname");
    let host = String::from_utf8_lossy(&host.stdout).trim().to_string();
    for runtime in ["runsc", "gv"] {
        let kernel = dd.docker(&[
            "run",
            "--rm",
            "--runtime",
            runtime,
            "--network",
            "none",
            BUSYBOX_IMAGE,
            "uname",
            "-r",
        ]);
        assert!(
            !kernel.is_empty() && kernel != host,
            "{runtime}: kernel {kernel:?} is the host's {host:?}: not gVisor"
        );
    }

    let p = Project::new();
    let since = now();
    let err = refused_run(&p, &dd, "runsc");
    for needle in [
        "odek: error (config): flag --sandbox-runtime: sandbox_runtime \"runsc\" is gVisor (registered with a path to runsc)",
        "so nothing was created",
        "its seccomp mode 2 is gVisor's own filter, not odek's profile",
        "its mounts are not the container's /workspace",
        "the engine's process list (docker top) names host processes",
        "use runc (--sandbox-runtime runc)",
        "docs/SANDBOXING.md, \"gVisor (runsc)\"",
    ] {
        assert!(err.contains(needle), "{needle:?} not in:\n{err}");
    }
    assert_eq!(created_since(&dd, &since), Vec::<String>::new(), "{err}");

    let view = odek_on(
        &p,
        &dd,
        &[
            "config",
            "view",
            "--sandbox-runtime",
            "runsc",
            "--sandbox-image",
            BUSYBOX_IMAGE,
        ],
    );
    assert!(
        stderr(&view).contains("sandbox_runtime \"runsc\" is gVisor"),
        "config view: {}\n{}",
        stdout(&view),
        stderr(&view)
    );

    // Under another file name: created, seen at verify, removed.
    let since = now();
    let err = refused_run(&p, &dd, "gv");
    assert!(
        err.contains("Docker refused the sandbox at verify: the container runs under gVisor (its process on the host is runsc-sandbox)")
            && err.contains("the container was removed"),
        "{err}"
    );
    assert!(
        !created_since(&dd, &since).is_empty(),
        "gv is refused after create, at verify: {err}"
    );
}
