//! Exit status of `odek run` (SPEC §6.3, §10.3): the command's own status
//! passes through; odek's refusals, including usage errors, are 125.

use std::process::Command;

use odek_e2e::{odek_bin, run_timeout, stderr, Project, BASE_IMAGE, ODEK_TIMEOUT};

#[test]
fn command_status_passes_through() {
    let p = Project::new();
    for code in [0, 3, 42] {
        let out = p.run_odek(&[
            "run",
            "--sandbox-image",
            BASE_IMAGE,
            "--",
            "sh",
            "-c",
            &format!("exit {code}"),
        ]);
        assert_eq!(out.status.code(), Some(code), "{}", stderr(&out));
    }
    assert!(p.leftovers().is_empty());
}

/// `odek run` with no global flag before it.
fn bare_run(p: &Project, args: &[&str]) -> std::process::Output {
    let mut c = Command::new(odek_bin());
    c.current_dir(p.path())
        .arg("run")
        .args(args)
        .env("ODEK_HOME", p.home.path());
    for (k, _) in std::env::vars() {
        if k.starts_with("ODEK_") && k != "ODEK_HOME" {
            c.env_remove(&k);
        }
    }
    run_timeout(&mut c, ODEK_TIMEOUT)
}

#[test]
fn usage_error_without_command_is_125() {
    let p = Project::new();
    let out = bare_run(&p, &["--sandbox-image", BASE_IMAGE]);
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    let out = bare_run(&p, &["--sandbox-image", BASE_IMAGE, "sh"]);
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    let out = bare_run(&p, &["--no-such-flag", "--", "true"]);
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(p.leftovers().is_empty());
}

#[test]
fn bad_timeouts_empty_commands_and_the_reserved_env_key_are_refused_before_any_docker_call() {
    let p = Project::new();
    let marker = p.marker_cmd();
    let cases: Vec<Vec<&str>> = vec![
        vec!["--timeout", "1e20", "--", "sh", "-c", &marker],
        vec![
            "--timeout",
            "18446744073709551615",
            "--",
            "sh",
            "-c",
            &marker,
        ],
        vec!["--timeout", "-1", "--", "sh", "-c", &marker],
        vec!["--timeout", "0", "--", "sh", "-c", &marker],
        vec!["--timeout", "NaN", "--", "sh", "-c", &marker],
        vec!["-e", "ODEK_EXEC_ID=x", "--", "sh", "-c", &marker],
        vec!["--", ""],
    ];
    for case in cases {
        // No image flag: a resolution would try the pinned default and warn.
        let mut args = vec!["run"];
        args.extend_from_slice(&case);
        let out = p.run_odek(&args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(125), "{case:?}: {err}");
        assert!(!err.contains("panicked"), "{case:?}: {err}");
        assert!(
            !err.contains("NO SANDBOX") && !err.contains("pull"),
            "{case:?}: refused only after resolving:\n{err}"
        );
        assert!(!p.marker().exists(), "{case:?}: ran on the host");
    }
    assert!(p.leftovers().is_empty());
}

#[test]
fn usage_error_after_global_flag_is_125() {
    let p = Project::new();
    // p.odek() builds `odek -C <dir> run …`, the form scripts use.
    let out = p.run_odek(&["run", "--sandbox-image", BASE_IMAGE]);
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    let mut v = Command::new(odek_bin());
    v.current_dir(p.path())
        .args(["-v", "run"])
        .env("ODEK_HOME", p.home.path());
    let out = run_timeout(&mut v, ODEK_TIMEOUT);
    assert_eq!(
        out.status.code(),
        Some(125),
        "odek -v run: {}",
        stderr(&out)
    );
}

#[test]
fn timeout_exits_124_and_removes_the_sandbox() {
    let p = Project::new();
    let out = p.run_odek(&[
        "run",
        "--sandbox-image",
        BASE_IMAGE,
        "--timeout",
        "1",
        "--",
        "sleep",
        "30",
    ]);
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    assert!(p.leftovers().is_empty(), "left: {:?}", p.leftovers());
}

/// A command given without `--` is a usage error (125) that says where the
/// command goes; nothing runs and no container is made.
#[test]
fn a_command_without_the_double_dash_says_to_put_it_after_it() {
    let p = Project::new();
    let out = bare_run(
        &p,
        &["--sandbox-image", BASE_IMAGE, "touch", "/workspace/marker"],
    );
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("put the command after `--`"),
        "{}",
        stderr(&out)
    );
    assert!(!p.path().join("marker").exists(), "the command ran");
    assert!(p.leftovers().is_empty());
}
