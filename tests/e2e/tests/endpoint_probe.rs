//! The daemon probe (SPEC §6.2) as a user outside the docker group: the
//! default sockets are tried in order until one accepts a connection, and
//! each one passed over is reported with why. `/var/run/docker.sock` answers
//! uid 65534 with EACCES; a socket in `$XDG_RUNTIME_DIR` (or
//! `~/.docker/run`) that reaches the real daemon through a relay the test
//! runs must then be used — never the host fallback. A stale socket (nothing
//! listening) is passed over the same way. An empty `DOCKER_HOST` counts as
//! unset, and `odek -v` says so.
//!
//! Whose socket (SPEC §6.2): root whose `/var/run/docker.sock` is unusable
//! (here: a stale socket bind-mounted over it in a private mount namespace
//! the test makes with `unshare`) and whose `XDG_RUNTIME_DIR` is another
//! user's, as after `su`, must not hand the sandbox to that user's daemon: a
//! default socket another user owns is passed over, naming the owner. Named
//! in `DOCKER_HOST`, it is used, and odek says whose it is.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use odek_e2e::{
    odek_bin, run_timeout, startup_line, stderr, stdout, Project, BASE_IMAGE, ODEK_TIMEOUT,
};

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
/// lives as long as the test process. Returns the count of connections it
/// accepted.
fn relay(path: &Path) -> Arc<AtomicUsize> {
    let listener = UnixListener::bind(path).expect("bind the relay");
    chmod(path, 0o666);
    let daemon = PathBuf::from(odek_e2e::docker_socket());
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { return };
            count.fetch_add(1, Ordering::SeqCst);
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
    accepted
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

/// `odek -v -C <p> <args>` as root in a private mount namespace whose
/// `/var/run/docker.sock` is a stale socket (bind-mounted over it: a
/// restarting dockerd), with `xdg` as `XDG_RUNTIME_DIR`, a `HOME` without a
/// `.docker` directory, and `docker_host` as `DOCKER_HOST` if given.
fn odek_without_the_default_socket(
    p: &Project,
    xdg: &Path,
    docker_host: Option<&str>,
    args: &[&str],
) -> Output {
    let scratch = tempfile::Builder::new()
        .prefix("odek-e2e-nsock-")
        .tempdir()
        .expect("tempdir");
    let dead = scratch.path().join("dead.sock");
    drop(UnixListener::bind(&dead).expect("bind"));
    let home = scratch.path().join("home");
    std::fs::create_dir(&home).expect("mkdir home");
    let mut c = Command::new("unshare");
    c.args(["--mount", "--propagation", "private", "--", "sh", "-c"])
        .arg(r#"mount --bind "$1" /var/run/docker.sock && shift && exec "$@""#)
        .arg("sh")
        .arg(&dead)
        .arg(odek_bin())
        .arg("-v")
        .arg("-C")
        .arg(p.path())
        .args(args)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .env("HOME", &home)
        .env("ODEK_HOME", p.home.path())
        .env("XDG_RUNTIME_DIR", xdg)
        .current_dir(p.path());
    if let Some(sup) = odek_e2e::supervisor_env() {
        c.env("ODEK_SUPERVISOR", sup);
    }
    if let Some(h) = docker_host {
        c.env("DOCKER_HOST", h);
    }
    run_timeout(&mut c, ODEK_TIMEOUT)
}

/// `XDG_RUNTIME_DIR` of another user (uid 65534, mode 0700) whose
/// `docker.sock` is theirs and reaches the real daemon through a relay (their
/// rootless dockerd, as far as odek can tell). Returns the directory, the
/// socket and the relay's connection count.
fn another_users_runtime_dir() -> (tempfile::TempDir, PathBuf, Arc<AtomicUsize>) {
    let xdg = nobody_dir();
    let sock = xdg.path().join("docker.sock");
    let accepted = relay(&sock);
    chown_nobody(&sock);
    (xdg, sock, accepted)
}

#[test]
fn a_default_socket_another_user_owns_is_not_used() {
    let p = Project::new();
    let (xdg, theirs, accepted) = another_users_runtime_dir();
    let marker = p.marker();
    let touch = p.marker_cmd();
    let out = odek_without_the_default_socket(
        &p,
        xdg.path(),
        None,
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
    for needle in [
        "daemon-unreachable".to_string(),
        "no reachable Docker socket".to_string(),
        "/var/run/docker.sock: nothing listens (stale socket)".to_string(),
        format!(
            "{}: belongs to uid 65534 (nobody), not to you (uid 0) or root",
            theirs.display()
        ),
        format!(
            "set DOCKER_HOST=unix://{} to use it knowingly",
            theirs.display()
        ),
    ] {
        assert!(e.contains(&needle), "{needle:?} missing:\n{e}");
    }
    assert!(!marker.exists(), "the command ran on the host");
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        0,
        "the other user's daemon was connected to"
    );
    // Without --sandbox the same is the loud host fallback, never their
    // daemon.
    let out = odek_without_the_default_socket(
        &p,
        xdg.path(),
        None,
        &["run", "--sandbox-image", BASE_IMAGE, "--", "true"],
    );
    let e = stderr(&out);
    assert!(e.contains("NO SANDBOX"), "{e}");
    assert_eq!(accepted.load(Ordering::SeqCst), 0, "{e}");
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());

    // Control: the same directory and socket given to root (the user
    // running odek) are used, and the startup line names the socket.
    for path in [xdg.path(), theirs.as_path()] {
        chown_root(path);
    }
    let out = odek_without_the_default_socket(
        &p,
        xdg.path(),
        None,
        &[
            "run",
            "--sandbox",
            "--sandbox-image",
            BASE_IMAGE,
            "--",
            "true",
        ],
    );
    let e = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{e}");
    let line = startup_line(&out).unwrap_or_else(|| panic!("no startup line:\n{e}"));
    assert!(
        line.contains(&format!(" endpoint=unix://{} runtime=", theirs.display())),
        "{line}"
    );
    assert!(accepted.load(Ordering::SeqCst) > 0, "{e}");
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
}

fn chown_root(p: &Path) {
    let out = Command::new("chown")
        .args(["0", &p.display().to_string()])
        .output()
        .expect("run chown");
    assert!(out.status.success(), "chown {}: {out:?}", p.display());
}

#[test]
fn a_docker_host_to_another_users_socket_is_used_naming_its_owner() {
    let p = Project::new();
    let (xdg, theirs, accepted) = another_users_runtime_dir();
    let host = format!("unix://{}", theirs.display());
    let out = odek_without_the_default_socket(
        &p,
        xdg.path(),
        Some(&host),
        &[
            "run",
            "--sandbox",
            "--sandbox-image",
            BASE_IMAGE,
            "--",
            "true",
        ],
    );
    let e = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{e}");
    let warning = format!(
        "odek: warning: the Docker socket {host} (from DOCKER_HOST) belongs to uid 65534 (nobody), not you: that user's daemon receives this sandbox and its environment"
    );
    assert!(e.lines().any(|l| l == warning), "no {warning:?} in:\n{e}");
    let line = startup_line(&out).unwrap_or_else(|| panic!("no startup line:\n{e}"));
    assert!(
        line.contains(&format!(" endpoint={host} runtime=")),
        "{line}"
    );
    assert!(accepted.load(Ordering::SeqCst) > 0, "{e}");
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
    // The config view names the owner too.
    let out = odek_without_the_default_socket(
        &p,
        xdg.path(),
        Some(&host),
        &["config", "view", "--json", "--sandbox-image", BASE_IMAGE],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let view: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!(view["endpoint_owner"], "uid 65534 (nobody)", "{view}");
    assert!(
        view["warnings"]
            .as_array()
            .is_some_and(|w| w.iter().any(|w| w["kind"] == "docker_socket_not_yours")),
        "{view}"
    );
    // Control: DOCKER_HOST naming root's own socket says nothing of owners.
    let mut own = p.odek(&["run", "--sandbox-image", BASE_IMAGE, "--", "true"]);
    own.env(
        "DOCKER_HOST",
        format!("unix://{}", odek_e2e::docker_socket()),
    );
    let out = run_timeout(&mut own, ODEK_TIMEOUT);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("not you"), "{}", stderr(&out));
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
}
