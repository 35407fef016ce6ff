//! The daemon probe (SPEC §6.2) as a user outside the docker group: the
//! default sockets are tried in order until one accepts a connection, and
//! each one passed over is reported with why. `/var/run/docker.sock` answers
//! uid 65534 with EACCES; a socket in `$XDG_RUNTIME_DIR` (or
//! `~/.docker/run`) that reaches the real daemon through a relay the test
//! runs must then be used — never the host fallback. A stale socket (nothing
//! listening) is passed over the same way. An empty `DOCKER_HOST` counts as
//! unset, and `odek -v` says so.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use odek_e2e::{odek_bin, run_timeout, stderr, Project, BASE_IMAGE, ODEK_TIMEOUT};

const NOBODY: &str = "65534";
const DENIED: &str = "/var/run/docker.sock: permission denied (are you in the docker group?)";

fn chown_nobody(p: &Path) {
    let out = Command::new("chown")
        .args([NOBODY, &p.display().to_string()])
        .output()
        .expect("run chown");
    assert!(out.status.success(), "chown {}: {out:?}", p.display());
}

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// A directory only uid 65534 (and root) can enter.
fn nobody_dir() -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix("odek-e2e-probe-")
        .tempdir()
        .expect("tempdir");
    chown_nobody(d.path());
    d
}

/// A socket at `path` that relays every connection to the real daemon, for
/// uid 65534 (its directory is that user's, mode 0700). The relay thread
/// lives as long as the test process.
fn relay(path: &Path) {
    let listener = UnixListener::bind(path).expect("bind the relay");
    chmod(path, 0o666);
    let daemon = PathBuf::from(odek_e2e::docker_socket());
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { return };
            let Ok(upstream) = UnixStream::connect(&daemon) else {
                continue;
            };
            let pipe = |mut from: UnixStream, mut to: UnixStream| {
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from, &mut to);
                    let _ = to.shutdown(std::net::Shutdown::Write);
                });
            };
            let (c2, u2) = (
                client.try_clone().expect("clone"),
                upstream.try_clone().expect("clone"),
            );
            pipe(client, u2);
            pipe(upstream, c2);
        }
    });
}

/// A socket file nobody listens on (bound, listener dropped), connectable
/// by uid 65534 so that the answer is "refused", not "denied".
fn stale(path: &Path) {
    drop(UnixListener::bind(path).expect("bind"));
    chmod(path, 0o666);
}

/// `odek -v -C <p> <args>` as uid 65534 with `home` as `HOME` and
/// `ODEK_HOME` and `xdg` as `XDG_RUNTIME_DIR`; no `DOCKER_*` variables.
fn odek_as_nobody(p: &Project, home: &Path, xdg: &Path, args: &[&str]) -> Output {
    let mut c = Command::new("setpriv");
    c.args([
        &format!("--reuid={NOBODY}"),
        &format!("--regid={NOBODY}"),
        "--clear-groups",
        "--",
    ])
    .arg(odek_bin())
    .arg("-v")
    .arg("-C")
    .arg(p.path())
    .args(args)
    .env_clear()
    .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
    .env("HOME", home)
    .env("ODEK_HOME", home.join(".odek"))
    .env("XDG_RUNTIME_DIR", xdg)
    .current_dir(p.path());
    run_timeout(&mut c, ODEK_TIMEOUT)
}

/// A project uid 65534 can use.
fn nobody_project() -> Project {
    let p = Project::new();
    chown_nobody(&p.path());
    p
}

fn assert_sandboxed_via(out: &Output, chosen: &Path, passed_over: &[&str]) {
    let e = stderr(out);
    assert_eq!(out.status.code(), Some(0), "{e}");
    assert!(
        !e.contains("NO SANDBOX"),
        "fell back to the host although {} was reachable:\n{e}",
        chosen.display()
    );
    assert!(
        e.lines().any(|l| l.starts_with("odek: sandbox network=")),
        "no sandbox startup line:\n{e}"
    );
    let line = e
        .lines()
        .find(|l| l.starts_with("odek: endpoint "))
        .unwrap_or_else(|| panic!("no endpoint line in verbose output:\n{e}"));
    assert!(
        line.starts_with(&format!(
            "odek: endpoint unix://{} (first reachable default socket) after passing over ",
            chosen.display()
        )),
        "{line}"
    );
    for why in passed_over {
        assert!(line.contains(why), "{line}\ndoes not say {why:?}");
    }
}

#[test]
fn a_denied_default_socket_is_passed_over_for_a_reachable_one() {
    let p = nobody_project();
    let home = nobody_dir();
    let xdg = nobody_dir();
    let live = xdg.path().join("docker.sock");
    relay(&live);
    let out = odek_as_nobody(
        &p,
        home.path(),
        xdg.path(),
        &["run", "--sandbox-image", BASE_IMAGE, "--", "true"],
    );
    assert_sandboxed_via(&out, &live, &[DENIED]);
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
}

#[test]
fn a_stale_socket_is_passed_over_for_a_reachable_one() {
    let p = nobody_project();
    let home = nobody_dir();
    let xdg = nobody_dir();
    let dead = xdg.path().join("docker.sock");
    stale(&dead);
    let run_dir = home.path().join(".docker/run");
    std::fs::create_dir_all(&run_dir).expect("mkdir");
    chown_nobody(&home.path().join(".docker"));
    chown_nobody(&run_dir);
    let live = run_dir.join("docker.sock");
    relay(&live);
    let out = odek_as_nobody(
        &p,
        home.path(),
        xdg.path(),
        &["run", "--sandbox-image", BASE_IMAGE, "--", "true"],
    );
    let stale_why = format!("{}: nothing listens (stale socket)", dead.display());
    assert_sandboxed_via(&out, &live, &[DENIED, &stale_why]);
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
}

#[test]
fn no_reachable_socket_is_daemon_unreachable_with_every_reason() {
    let p = nobody_project();
    let home = nobody_dir();
    let xdg = nobody_dir();
    let dead = xdg.path().join("docker.sock");
    stale(&dead);
    let marker = p.path().join("host-marker");
    let touch = format!("touch {}", marker.display());
    let out = odek_as_nobody(
        &p,
        home.path(),
        xdg.path(),
        &[
            "run",
            "--sandbox",
            "--sandbox-image",
            BASE_IMAGE,
            "--",
            "sh",
            "-c",
            &touch,
        ],
    );
    let e = stderr(&out);
    assert_eq!(out.status.code(), Some(125), "{e}");
    assert!(!marker.exists(), "the command ran on the host");
    for needle in [
        "daemon-unreachable".to_string(),
        "no reachable Docker socket".to_string(),
        DENIED.to_string(),
        format!("{}: nothing listens (stale socket)", dead.display()),
        format!("{}/.docker/run/docker.sock: absent", home.path().display()),
    ] {
        assert!(e.contains(&needle), "{needle:?} missing:\n{e}");
    }
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
}

#[test]
fn an_empty_docker_host_is_said_to_count_as_unset() {
    let p = Project::new();
    let args = ["-v", "run", "--sandbox-image", BASE_IMAGE, "--", "true"];
    const NOTE: &str =
        "odek: DOCKER_HOST is set but empty: treated as unset (as the Docker CLI does)";
    let mut empty = p.odek(&args);
    empty.env("DOCKER_HOST", "");
    let out = run_timeout(&mut empty, ODEK_TIMEOUT);
    let e = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{e}");
    assert!(e.lines().any(|l| l == NOTE), "no note:\n{e}");
    assert!(
        e.lines().any(|l| l.starts_with("odek: endpoint unix://")),
        "{e}"
    );
    // Control: a set DOCKER_HOST (or none) gets no such note.
    let mut set = p.odek(&args);
    set.env(
        "DOCKER_HOST",
        format!("unix://{}", odek_e2e::docker_socket()),
    );
    let out = run_timeout(&mut set, ODEK_TIMEOUT);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("set but empty"), "{}", stderr(&out));
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
}
