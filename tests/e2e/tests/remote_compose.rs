//! The Compose scenario of SPEC §12 on a remote engine (SPEC §6.2): odek
//! reaches a second daemon over verified TLS and over ssh and attaches a
//! sandbox to a Compose project running there (`--sandbox-compose`).
//!
//! One second daemon ([`SecondDaemon`], in a network namespace of its own)
//! serves both transports: `--tlsverify` on its namespace's
//! `127.0.0.1:2376` (certificates made by the test, [`TlsCerts`]) and an
//! `sshd` on its `127.0.0.1:2222` ([`Sshd`]) whose sessions reach the
//! daemon's socket. odek runs in that namespace (`nsenter --net`, as
//! [`Reach`] does), with the host's files. The Compose fixture
//! (tests/fixtures/compose) is brought up on that daemon once, with
//! docker-compose and `DOCKER_HOST` its unix socket, the test images
//! copied in with `docker save`/`load` (nothing is pulled), and one
//! override: postgres starts with `chmod 755 /` first, as in
//! swarm_stack.rs (on this daemon's `vfs` storage a container's root
//! directory is 0700, and postgres runs as its own user).
//!
//! Over each transport: the whole scenario (redis PONG and postgres by
//! name, the pids limit, the init as PID 1, `/tmp` `nosuid,noexec`, the
//! internal network without a route out), then every refusal of SPEC §6.3
//! a Compose project can meet — exit 125, the host marker absent, no
//! container left on either daemon.
//!
//! Runs as root: a second daemon needs root for its namespaces (as
//! remote_tls.rs, remote_ssh.rs, swarm_stack.rs); CI runs the suite as
//! root.

use std::time::Duration;

use odek_e2e::remote::{
    assert_no_route_out, assert_nothing_left, check_scenario, create_network_unchecked,
    scenario_script, Reach,
};
use odek_e2e::second_daemon::{DaemonOptions, SecondDaemon};
use odek_e2e::sshd::Sshd;
use odek_e2e::tls_certs::TlsCerts;
use odek_e2e::{
    random_hex, repo, startup_line, stderr, stdout, wait_until, Project, BASE_IMAGE, IMAGE_PREFIX,
    PROJECT, TEST_NS,
};

/// The daemon's TLS port on its namespace's loopback.
const PORT: u16 = 2376;

/// What the override adds to the fixture (see the module's doc).
const OVERRIDE: &str = r#"version: "2.4"
services:
  postgres:
    command: ["sh", "-c", "chmod 755 / && exec odek-test-postgres"]
"#;

/// Brings the Compose fixture up on `dd` as project [`PROJECT`] and waits
/// (up to 120 s) until both services are healthy.
fn fixture_up(dd: &SecondDaemon, files: &std::path::Path) {
    let over = files.join("override.yml");
    std::fs::write(&over, OVERRIDE).expect("override");
    let out = std::process::Command::new("docker-compose")
        .args(["-p", PROJECT, "-f"])
        .arg(repo().join("tests/fixtures/compose/docker-compose.yml"))
        .arg("-f")
        .arg(&over)
        .args(["up", "-d"])
        .env("DOCKER_HOST", dd.host())
        .env_remove("DOCKER_CONTEXT")
        .env("ODEK_TEST_NS", TEST_NS)
        .env("ODEK_TEST_IMAGES", IMAGE_PREFIX)
        .output()
        .expect("cannot run docker-compose");
    assert!(
        out.status.success(),
        "docker-compose up on the second daemon: {}",
        stderr(&out)
    );
    let healthy = || {
        dd.docker(&[
            "ps",
            "-q",
            "--filter",
            &format!("label=com.docker.compose.project={PROJECT}"),
            "--filter",
            "health=healthy",
        ])
        .lines()
        .count()
            == 2
    };
    assert!(
        wait_until(Duration::from_secs(120), healthy),
        "the fixture did not come up healthy: {}\n{}",
        dd.docker(&["ps", "-a"]),
        dd.log()
    );
}

/// Over verified TLS and over ssh, on one second daemon running the
/// Compose fixture: the scenario with `--sandbox-compose` (services by
/// name, pids limit, init, `/tmp` flags, one route out through the
/// project's non-internal network), its internal network alone without a
/// route out, and every SPEC §6.3 refusal a Compose project can meet, each
/// with exit 125, nothing run on the host and no container left on either
/// daemon.
#[test]
fn the_compose_scenario_over_tls_and_ssh_and_every_refusal_leaves_nothing() {
    let certs = TlsCerts::make();
    let dd = SecondDaemon::start(DaemonOptions {
        extra_args: certs.daemon_args(PORT),
        ..DaemonOptions::default()
    });
    for name in ["base", "redis", "postgres"] {
        dd.load_image(&format!("{IMAGE_PREFIX}/{name}:1"));
    }
    let sshd = Sshd::start(&dd);
    let files = tempfile::tempdir().expect("tempdir");
    fixture_up(&dd, files.path());
    // The premise: the project's two networks on this daemon, `backend`
    // internal, `default` not.
    let (default, backend) = (format!("{PROJECT}_default"), format!("{PROJECT}_backend"));
    for (net, internal) in [(&default, "false"), (&backend, "true")] {
        assert_eq!(
            dd.docker(&["network", "inspect", "-f", "{{.Internal}}", net]),
            internal,
            "{net}"
        );
    }
    let backend_id = dd.docker(&["network", "inspect", "-f", "{{.Id}}", &backend]);
    // Two networks of one name labelled as one project's (the docker CLI
    // would refuse the second; the API makes it).
    let dup = format!("odekdupc{}", random_hex(6));
    let dup_ids: Vec<String> = (0..2)
        .map(|_| {
            create_network_unchecked(
                &dd,
                &format!("{dup}_net"),
                &[("com.docker.compose.project", dup.as_str())],
            )
        })
        .collect();
    // Seven local networks: with the project's two, more than 8.
    let many: Vec<String> = (0..7).map(|i| format!("odek-e2e-many{i}")).collect();
    for n in &many {
        dd.docker(&["network", "create", "--label", "dev.odek.test=true", n]);
    }

    let p = Project::for_second_daemon();
    let client = sshd.client("root", &sshd.known_host_line(), 0, 0);
    let transports = [
        (
            "tls",
            Reach::tls(PORT, &certs.client_dir("good", "ca.pem")),
            format!(" endpoint=tcp://127.0.0.1:{PORT} (tls, verified) "),
            // Nothing listens there.
            ("DOCKER_HOST", format!("tcp://127.0.0.1:{}", PORT + 1)),
        ),
        (
            "ssh",
            Reach::ssh(&client),
            format!(
                " endpoint=ssh://root@127.0.0.1:{} (ssh, host key checked) ",
                odek_e2e::sshd::SSH_PORT
            ),
            // Port 1 on the namespace's loopback is closed.
            ("DOCKER_HOST", "ssh://root@127.0.0.1:1".to_string()),
        ),
    ];
    for (what, reach, endpoint, (unreachable_key, unreachable)) in &transports {
        // The scenario.
        let script = scenario_script();
        let out = reach.odek_ok(
            &dd,
            &p,
            &[
                "run",
                "--sandbox-compose",
                PROJECT,
                "--sandbox-pids-limit",
                "77",
                "--sandbox-image",
                BASE_IMAGE,
                "--",
                "sh",
                "-c",
                &script,
            ],
        );
        check_scenario(&out, "77", what);
        let line = startup_line(&out).expect("startup line");
        assert!(line.contains(endpoint), "{what}: {line}");
        assert!(
            line.contains(&format!("networks={backend},{default}")),
            "{what}: {line}"
        );
        assert_nothing_left(&dd, &p, &format!("{what}: after the scenario"));

        // The internal network alone: services by name, no route out.
        let out = reach.odek_ok(
            &dd,
            &p,
            &[
                "run",
                "--sandbox-networks",
                &backend,
                "--sandbox-image",
                BASE_IMAGE,
                "--",
                "sh",
                "-c",
                "redis-cli -h redis ping; pg_isready -h postgres; echo ---; ip route",
            ],
        );
        let o = stdout(&out);
        let (answers, routes) = o.split_once("---\n").expect("separator");
        assert_no_route_out(routes, what);
        assert!(answers.contains("PONG"), "{what}: {o}");
        assert!(
            answers.contains("postgres:5432 - accepting connections"),
            "{what}: {o}"
        );
        assert_nothing_left(&dd, &p, &format!("{what}: internal"));

        // SPEC §6.3 refusals with a Compose project.
        let img = ["--sandbox-image", BASE_IMAGE];
        let with = |extra: &[&str]| -> Vec<String> {
            extra
                .iter()
                .chain(img.iter())
                .map(|s| s.to_string())
                .collect()
        };
        let refused = |args: Vec<String>, needle: &str| -> String {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            reach.refused(&dd, &p, &args, needle)
        };
        // config: a project not running, a typo of the running one, an
        // invalid name, a conflict with --no-sandbox.
        let nosuch = format!("nosuch{}", random_hex(6));
        let err = refused(with(&["--sandbox-compose", &nosuch]), "is not running");
        assert!(
            err.contains(&format!(
                "docker compose -p {nosuch} -f <compose file> up -d"
            )),
            "{what}: {err}"
        );
        let typo = format!("{PROJECT}x");
        let err = refused(with(&["--sandbox-compose", &typo]), "is not running");
        assert!(
            err.contains(&format!("did you mean \"{PROJECT}\"?")),
            "{what}: {err}"
        );
        let err = refused(with(&["--sandbox-compose", "Shop!"]), "not valid");
        assert!(err.contains("\"shop\""), "{what}: {err}");
        refused(
            with(&["--sandbox-compose", PROJECT, "--no-sandbox"]),
            "sandbox_compose_project from flag --sandbox-compose",
        );
        // config: two of the project's networks of one name, refused at
        // resolve (before anything is created).
        let err = refused(with(&["--sandbox-compose", &dup]), "ambiguous");
        assert!(
            err.contains("error (config)")
                && err.contains(&dup_ids[0][..12])
                && err.contains(&dup_ids[1][..12]),
            "{what}: {err}"
        );
        // config: an ID prefix of the project's network is not a name.
        refused(
            with(&["--sandbox-networks", &backend_id[..12]]),
            "ID-prefix",
        );
        // config: more than 8 (the project's two and seven local ones).
        let list = many.join(",");
        refused(
            with(&["--sandbox-compose", PROJECT, "--sandbox-networks", &list]),
            "at most 8",
        );
        // config: bad limits with a project.
        refused(
            with(&["--sandbox-compose", PROJECT, "--sandbox-pids-limit", "0"]),
            "pids",
        );
        refused(
            with(&["--sandbox-compose", PROJECT, "--sandbox-memory", "lots"]),
            "sandbox_memory",
        );
        // image-unavailable is fatal with a network, explicit or not.
        refused(
            vec![
                "--sandbox-compose".into(),
                PROJECT.into(),
                "--sandbox-image".into(),
                "odek-e2e-absent/none:1".into(),
            ],
            "odek-e2e-absent/none:1",
        );
        // docker-rejected: the container cannot start (pids limit 1).
        let err = refused(
            with(&["--sandbox-compose", PROJECT, "--sandbox-pids-limit", "1"]),
            "the container is not running",
        );
        assert!(err.contains("idle process `cat`"), "{what}: {err}");
        // daemon-unreachable with a project configured: fatal, never the
        // host.
        let down = reach.clone().with(unreachable_key, unreachable);
        down.refused(
            &dd,
            &p,
            &["--sandbox-compose", PROJECT, "--sandbox-image", BASE_IMAGE],
            "unreachable",
        );
    }
    drop(sshd);
}
