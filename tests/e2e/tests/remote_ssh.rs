//! A Docker daemon reached over ssh (SPEC §6.2.2), as the Docker CLI
//! reaches it: `DOCKER_HOST=ssh://root@127.0.0.1:2222`, each connection
//! the system's `ssh` running `docker system dial-stdio` on the server.
//!
//! The daemon is a second `dockerd` ([`SecondDaemon`]) in a network
//! namespace of its own; an `sshd` the test starts listens on that
//! namespace's `127.0.0.1:2222` ([`Sshd`]), with a host key and a client
//! key made by the test, and sets `DOCKER_HOST` to the daemon's socket in
//! its sessions. odek runs in that namespace (`nsenter --net`), as root and
//! as the non-root operator, with `PATH` starting at a wrapper that points
//! `ssh` at the test's own `known_hosts`, key and config (never the
//! operator's `~/.ssh`); that config is lax on purpose (`accept-new`), and
//! odek's own `-o StrictHostKeyChecking=yes` must win. Nothing is pulled
//! and no traffic leaves the namespace.

use std::process::Output;

use odek_e2e::operator::{operators, Operator};
use odek_e2e::second_daemon::{DaemonOptions, SecondDaemon};
use odek_e2e::sshd::{SshClient, Sshd, SSH_PORT};
use odek_e2e::{run_timeout, startup_line, stderr, stdout, Project, BUSYBOX_IMAGE, ODEK_TIMEOUT};

/// `odek <args>` of project `p` in `dd`'s network namespace, with `env`.
fn odek_in(p: &Project, dd: &SecondDaemon, env: &[(&str, String)], args: &[&str]) -> Output {
    let mut c = p.odek(args);
    c.env_remove("DOCKER_CONTEXT")
        .env_remove("DOCKER_TLS_VERIFY")
        .env_remove("DOCKER_TLS")
        .env_remove("DOCKER_CONFIG");
    for (k, v) in env {
        c.env(k, v);
    }
    run_timeout(&mut dd.in_netns(&c), ODEK_TIMEOUT)
}

fn ssh_env(client: &SshClient) -> Vec<(&'static str, String)> {
    vec![
        ("DOCKER_HOST", format!("ssh://root@127.0.0.1:{SSH_PORT}")),
        ("PATH", client.path_env()),
    ]
}

/// The daemon's containers (all states).
fn containers(dd: &SecondDaemon) -> String {
    dd.docker(&["ps", "-aq"])
}

/// No `ssh` process of this test's client is left running.
fn ssh_children_left(client_marker: &str) -> Vec<String> {
    let out = std::process::Command::new("pgrep")
        .args(["-af", client_marker])
        .output()
        .expect("pgrep");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("/usr/bin/ssh") && l.contains("dial-stdio"))
        .map(str::to_string)
        .collect()
}

/// Over ssh with the host key known, a sandbox comes up, runs a command and
/// goes; the startup line and `config view` name the endpoint and `ssh,
/// host key checked`; a Docker context with an `ssh://` host is used the
/// same way; no `ssh` child outlives odek. With the host key unknown (and a
/// lax `accept-new` in ssh's config), or a different key recorded for the
/// host, odek refuses naming the fix, runs nothing on the host, leaves no
/// container and records no key. Without `ssh` on PATH it is a config
/// error naming the fix. As root only, as `remote_tls`: on the harness's
/// second daemon a sandbox of a non-root uid does not start (runc:
/// `stat /sbin/docker-init: permission denied`), whatever the transport.
#[test]
fn a_daemon_over_ssh_is_used_and_an_unknown_or_changed_host_key_refused() {
    let dd = SecondDaemon::start(DaemonOptions::default());
    dd.load_image(BUSYBOX_IMAGE);
    let sshd = Sshd::start(&dd);
    assert!(
        operators().contains(&Operator::Root),
        "the second daemon's tests run as root (CI runs the suite as root)"
    );
    one_operator(&dd, &sshd, Operator::Root);
}

fn one_operator(dd: &SecondDaemon, sshd: &Sshd, op: Operator) {
    let p = Project::as_operator(op).exec_api();
    let good = sshd.client(
        &format!("good-{op:?}"),
        &sshd.known_host_line(),
        op.uid(),
        op.gid(),
    );
    let env = ssh_env(&good);

    // Positive: a sandbox over ssh.
    let up = odek_in(
        &p,
        dd,
        &env,
        &["sandbox", "up", "--sandbox-image", BUSYBOX_IMAGE],
    );
    assert!(
        up.status.success(),
        "{op:?}: up over ssh failed:\n{}\nsshd log:\n{}",
        stderr(&up),
        sshd.log()
    );
    let name = stdout(&up).trim().to_string();
    let line = startup_line(&up).expect("startup line");
    assert!(
        line.contains(&format!(
            " endpoint=ssh://root@127.0.0.1:{SSH_PORT} (ssh, host key checked) runtime="
        )),
        "{op:?}: {line}"
    );
    assert!(
        !stderr(&up).contains("REMOTE ENGINE"),
        "{op:?}: loopback is this machine: {}",
        stderr(&up)
    );
    let id = dd.docker(&["ps", "-q", "--filter", &format!("name={name}")]);
    assert!(!id.is_empty(), "{op:?}: the sandbox runs on the ssh daemon");
    let out = odek_in(
        &p,
        dd,
        &env,
        &[
            "sandbox",
            "exec",
            &name,
            "--",
            "sh",
            "-c",
            "echo over-ssh; echo err >&2",
        ],
    );
    assert!(
        out.status.success() && stdout(&out).trim() == "over-ssh",
        "{op:?}: exec over ssh: {}\n{}",
        stdout(&out),
        stderr(&out)
    );
    let view = odek_in(&p, dd, &env, &["config", "view"]);
    assert!(
        stdout(&view).contains(&format!(
            "ssh://root@127.0.0.1:{SSH_PORT} (ssh, host key checked; from DOCKER_HOST)"
        )),
        "{op:?}: config view:\n{}\n{}",
        stdout(&view),
        stderr(&view)
    );
    let down = odek_in(&p, dd, &env, &["sandbox", "down", &name]);
    assert!(down.status.success(), "{op:?}: down: {}", stderr(&down));
    assert_eq!(containers(dd), "", "{op:?}: down removed the sandbox");
    let client_dir = format!("client-good-{op:?}");
    assert_eq!(
        ssh_children_left(&client_dir),
        Vec::<String>::new(),
        "{op:?}: no ssh child outlives odek"
    );

    // A Docker context whose host is ssh://, as `docker context create
    // --docker host=ssh://…` writes it.
    let cfg = p.path().join(".docker-cfg");
    let ctx = "odek-ssh";
    let meta = cfg.join("contexts/meta").join(sha256_hex(ctx));
    std::fs::create_dir_all(&meta).expect("mkdir");
    std::fs::write(
        meta.join("meta.json"),
        format!(
            r#"{{"Name":"{ctx}","Metadata":{{}},"Endpoints":{{"docker":{{"Host":"ssh://root@127.0.0.1:{SSH_PORT}","SkipTLSVerify":false}}}}}}"#
        ),
    )
    .expect("meta.json");
    own_tree(op, &cfg);
    let ctx_env = vec![
        ("PATH", good.path_env()),
        ("DOCKER_CONFIG", cfg.display().to_string()),
        ("DOCKER_CONTEXT", ctx.to_string()),
    ];
    let mut c = p.odek(&[
        "run",
        "--sandbox-image",
        BUSYBOX_IMAGE,
        "--",
        "echo",
        "via-context",
    ]);
    c.env_remove("DOCKER_HOST");
    for (k, v) in &ctx_env {
        c.env(k, v);
    }
    let out = run_timeout(&mut dd.in_netns(&c), ODEK_TIMEOUT);
    assert!(
        out.status.success() && stdout(&out).trim() == "via-context",
        "{op:?}: run over an ssh context: {}\n{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(
        startup_line(&out).is_some_and(|l| l.contains("(ssh, host key checked)")),
        "{op:?}: {}",
        stderr(&out)
    );
    assert_eq!(containers(dd), "", "{op:?}: run left no container");

    // An unknown host key: refused naming the fix, though ssh's own
    // config says accept-new; the key is not recorded.
    let unknown = sshd.client(&format!("unknown-{op:?}"), "", op.uid(), op.gid());
    let err = refused_run(&p, dd, &ssh_env(&unknown), op, "an unknown host key");
    assert!(
        err.contains("odek never accepts an unknown host key")
            && err.contains(&format!("ssh-keyscan -p {SSH_PORT} 127.0.0.1"))
            && err.contains(">> ~/.ssh/known_hosts")
            && err.contains("ssh said: "),
        "{op:?}: {err}"
    );
    assert_eq!(
        unknown.known_hosts(),
        "",
        "{op:?}: no host key was accepted"
    );

    // A changed host key (another key recorded for [127.0.0.1]:2222).
    let changed = sshd.client(
        &format!("changed-{op:?}"),
        &sshd.wrong_host_line(),
        op.uid(),
        op.gid(),
    );
    let err = refused_run(&p, dd, &ssh_env(&changed), op, "a changed host key");
    assert!(
        err.contains("someone in the middle")
            && err.contains(&format!("ssh-keygen -R '[127.0.0.1]:{SSH_PORT}'")),
        "{op:?}: {err}"
    );

    // No ssh program at all: a config error before anything runs. PATH
    // holds only what the harness runs odek with (nsenter, setpriv).
    let empty = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(
        empty.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    for tool in ["nsenter", "setpriv"] {
        std::os::unix::fs::symlink(format!("/usr/bin/{tool}"), empty.path().join(tool))
            .expect("symlink");
    }
    let err = refused_run(
        &p,
        dd,
        &[
            ("DOCKER_HOST", format!("ssh://root@127.0.0.1:{SSH_PORT}")),
            ("PATH", empty.path().display().to_string()),
        ],
        op,
        "no ssh",
    );
    assert!(
        err.contains("no `ssh` program on PATH") && err.contains("apt-get install openssh-client"),
        "{op:?}: {err}"
    );
}

/// `odek run` of the project's host marker over `env`, which must be
/// refused (`what` names the case): no fallback to the host, nothing ran
/// on the host, no container left on the daemon. Returns stderr.
fn refused_run(
    p: &Project,
    dd: &SecondDaemon,
    env: &[(&str, String)],
    op: Operator,
    what: &str,
) -> String {
    let out = odek_in(
        p,
        dd,
        env,
        &[
            "run",
            "--sandbox-image",
            BUSYBOX_IMAGE,
            "--",
            "sh",
            "-c",
            &p.marker_cmd(),
        ],
    );
    let err = stderr(&out);
    assert!(!out.status.success(), "{op:?}: {what} must refuse: {err}");
    assert!(
        !err.contains("NO SANDBOX"),
        "{op:?}: no fallback to the host: {err}"
    );
    assert!(!p.marker().exists(), "{op:?}: nothing ran on the host");
    assert_eq!(containers(dd), "", "{op:?}: no container left");
    err
}

fn sha256_hex(s: &str) -> String {
    let out = std::process::Command::new("sh")
        .args(["-c", "printf %s \"$1\" | sha256sum", "sh", s])
        .output()
        .expect("sha256sum");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .expect("digest")
        .to_string()
}

/// Gives `dir` and what is in it to the operator.
fn own_tree(op: Operator, dir: &std::path::Path) {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        op.own(&d);
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.path().is_dir() {
                stack.push(e.path());
            } else {
                op.own(&e.path());
            }
        }
    }
}
