//! Loud fallback (SPEC §6.3): in implicit mode an unpullable image or an
//! unreachable daemon runs the command on the host with a loud warning;
//! `--sandbox`, `ODEK_REQUIRE_SANDBOX=1` or any configured network make the
//! same failure fatal.

use odek_e2e::{assert_refused, stderr, stdout, strs, Project, PROJECT};

/// Nothing listens on loopback port 1: the pull fails with "connection refused".
const MISSING_IMAGE: &str = "127.0.0.1:1/odek-missing:1";
const NO_DAEMON: &str = "unix:///nonexistent.sock";

fn argv(p: &Project, flags: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = vec!["run".into()];
    v.extend(flags.iter().map(|s| s.to_string()));
    v.push("--".into());
    v.extend(p.marker_argv());
    v
}

/// Asserts the command ran on the host (exit 0, marker) with the warning.
fn assert_host_fallback(p: &Project, out: &std::process::Output, class: &str) {
    let e = stderr(out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "expected the host fallback to run the command; stderr:\n{e}\nstdout:\n{}",
        stdout(out)
    );
    assert!(
        p.marker().exists(),
        "the command did not run on the host:\n{e}"
    );
    assert!(e.contains("NO SANDBOX"), "no loud warning:\n{e}");
    assert!(e.contains("ON THE HOST"), "warning does not say host:\n{e}");
    assert!(
        e.contains(class),
        "warning does not name the cause {class}:\n{e}"
    );
    assert!(
        e.lines().filter(|l| l.starts_with("odek:")).count() >= 3,
        "the warning is not multi-line:\n{e}"
    );
    assert!(
        !e.lines().any(|l| l.starts_with("odek: sandbox ")),
        "a sandbox startup line was printed for a host run:\n{e}"
    );
    assert!(
        p.leftovers().is_empty(),
        "container left: {:?}",
        p.leftovers()
    );
}

#[test]
fn unpullable_image_implicit_runs_on_host_loudly() {
    let p = Project::new();
    let out = p.run_odek(&strs(&argv(&p, &["--sandbox-image", MISSING_IMAGE])));
    assert_host_fallback(&p, &out, "image-unavailable");
}

#[test]
fn unpullable_image_explicit_is_refused() {
    let p = Project::new();
    let out = p.run_odek(&strs(&argv(
        &p,
        &["--sandbox", "--sandbox-image", MISSING_IMAGE],
    )));
    assert_refused(&p, &out, "cannot be pulled");
    assert!(
        stderr(&out).contains("image-unavailable"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("NO SANDBOX"), "{}", stderr(&out));
}

#[test]
fn unpullable_image_explicit_from_env_is_refused() {
    let p = Project::new();
    let out = p.run_odek_env(
        &[("ODEK_SANDBOX", "true")],
        &strs(&argv(&p, &["--sandbox-image", MISSING_IMAGE])),
    );
    assert_refused(&p, &out, "cannot be pulled");
}

#[test]
fn unpullable_image_with_require_sandbox_is_refused() {
    let p = Project::new();
    let out = p.run_odek_env(
        &[("ODEK_REQUIRE_SANDBOX", "1")],
        &strs(&argv(&p, &["--sandbox-image", MISSING_IMAGE])),
    );
    assert_refused(&p, &out, "cannot be pulled");
}

#[test]
fn unpullable_image_with_compose_is_refused() {
    let p = Project::new();
    let out = p.run_odek(&strs(&argv(
        &p,
        &[
            "--sandbox-compose",
            PROJECT,
            "--sandbox-image",
            MISSING_IMAGE,
        ],
    )));
    assert_refused(&p, &out, "cannot be pulled");
}

#[test]
fn daemon_unreachable_implicit_runs_on_host_loudly() {
    let p = Project::new();
    let out = p.run_odek_env(
        &[("DOCKER_HOST", NO_DAEMON)],
        &strs(&argv(&p, &["--sandbox-image", "odek-test/base:1"])),
    );
    assert_host_fallback(&p, &out, "daemon-unreachable");
    assert!(
        stderr(&out).contains("/nonexistent.sock"),
        "endpoint not named:\n{}",
        stderr(&out)
    );
}

#[test]
fn daemon_unreachable_explicit_is_refused() {
    let p = Project::new();
    let out = p.run_odek_env(
        &[("DOCKER_HOST", NO_DAEMON)],
        &strs(&argv(
            &p,
            &["--sandbox", "--sandbox-image", "odek-test/base:1"],
        )),
    );
    assert_refused(&p, &out, "unreachable");
    assert!(
        stderr(&out).contains("/nonexistent.sock"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn daemon_unreachable_with_require_sandbox_is_refused() {
    let p = Project::new();
    let out = p.run_odek_env(
        &[("DOCKER_HOST", NO_DAEMON), ("ODEK_REQUIRE_SANDBOX", "1")],
        &strs(&argv(&p, &["--sandbox-image", "odek-test/base:1"])),
    );
    assert_refused(&p, &out, "unreachable");
}

#[test]
fn no_sandbox_runs_on_host_and_networks_with_it_are_refused() {
    // positive: --no-sandbox runs on the host without the fallback warning
    let p = Project::new();
    let out = p.run_odek(&strs(&argv(&p, &["--no-sandbox"])));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(p.marker().exists(), "--no-sandbox did not run on the host");
    // networks cannot be honoured on the host: config error
    let p = Project::new();
    let out = p.run_odek(&strs(&argv(
        &p,
        &["--no-sandbox", "--sandbox-compose", PROJECT],
    )));
    assert_refused(&p, &out, "cannot be honoured on the host");
}

#[test]
fn daemon_unreachable_with_networks_from_config_files_is_refused() {
    // user config
    let p = Project::new();
    std::fs::write(
        p.home.path().join("config.json"),
        format!(r#"{{"sandbox_networks": ["{PROJECT}_backend"]}}"#),
    )
    .expect("write user config");
    let out = p.run_odek_env(
        &[("DOCKER_HOST", NO_DAEMON)],
        &strs(&argv(&p, &["--sandbox-image", "odek-test/base:1"])),
    );
    assert_refused(&p, &out, "unreachable");
    // project config (approved for the run)
    let p = Project::new();
    std::fs::write(
        p.path().join("odek.json"),
        format!(r#"{{"sandbox_compose_project": "{PROJECT}"}}"#),
    )
    .expect("write odek.json");
    let out = p.run_odek_env(
        &[
            ("DOCKER_HOST", NO_DAEMON),
            ("ODEK_APPROVE_PROJECT_SANDBOX", "1"),
        ],
        &strs(&argv(&p, &["--sandbox-image", "odek-test/base:1"])),
    );
    assert_refused(&p, &out, "unreachable");
}
