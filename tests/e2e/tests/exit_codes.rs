//! Exit status of `odek run` (SPEC §6.3, §10.3): the command's own status
//! passes through; odek's refusals, including usage errors, are 125.

use std::process::Command;

use odek_e2e::{odek_bin, run_timeout, stderr, stdout, Project, BASE_IMAGE, ODEK_TIMEOUT};

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

/// A program the sandbox lacks, or cannot execute, never ran: `odek run`
/// exits with a shell's status (127, 126) and odek's one line on stderr,
/// the same on every exec path; nothing of the runtime's own text (runc's
/// "OCI runtime exec failed" through the exec API) reaches stdout or
/// stderr. A script whose `#!` interpreter is missing is 127 too (runc
/// said `exec ./s.sh: no such file or directory` and exit 1 through the
/// exec API). Control: a program that prints that very text and exits 127
/// keeps its output.
fn a_program_that_cannot_start_exits_as_in_a_shell(p: &Project) {
    let script = p.path().join("s.sh");
    std::fs::write(&script, "#!/no/such/interp\necho hi\n").expect("write the script");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    for (program, code, reason) in [
        ("no-such-tool", 127, "command not found"),
        ("/no/such/program", 127, "command not found"),
        ("/etc/passwd", 126, "not executable"),
        (
            "./s.sh",
            127,
            "its interpreter (the program its #! line names, or its dynamic loader) was not found",
        ),
    ] {
        let out = p.run_odek(&["run", "--sandbox-image", BASE_IMAGE, "--", program]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(code), "{program}: {err}");
        assert_eq!(stdout(&out), "", "{program}: output on stdout");
        assert!(!err.contains("OCI runtime"), "{program}: {err}");
        let said: Vec<&str> = err.lines().filter(|l| l.contains(program)).collect();
        assert_eq!(said.len(), 1, "{program}: one line: {err}");
        assert!(
            said[0].starts_with(&format!("odek: cannot run `{program}` in sandbox odek-"))
                && said[0].contains(&format!(": {reason}"))
                && said[0].ends_with("; nothing ran"),
            "{program}: {err}"
        );
    }
    let look_alike = r#"printf 'OCI runtime exec failed: exec failed: exec: "x": executable file not found in $PATH: unknown
'; exit 127"#;
    let out = p.run_odek(&[
        "run",
        "--sandbox-image",
        BASE_IMAGE,
        "--",
        "sh",
        "-c",
        look_alike,
    ]);
    assert_eq!(out.status.code(), Some(127), "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with("OCI runtime exec failed: exec failed: exec: \"x\""),
        "a command's own output was swallowed: {:?}",
        stdout(&out)
    );
    assert!(!stderr(&out).contains("cannot run"), "{}", stderr(&out));
    assert!(p.leftovers().is_empty());
}

#[test]
fn a_missing_program_exits_127_with_odeks_line() {
    a_program_that_cannot_start_exits_as_in_a_shell(&Project::new());
}

#[test]
fn through_the_exec_api_a_missing_program_exits_127_with_odeks_line() {
    a_program_that_cannot_start_exits_as_in_a_shell(&Project::new().exec_api());
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
