//! The promises of SPEC §6.1 checked in the kernel, from inside a real
//! sandbox: no new privileges, no capabilities, `/tmp` refusing to execute,
//! the pids limit stopping a fork loop, no Docker socket or `DOCKER_HOST`
//! inside. Every negative check is paired in the same test with a positive
//! control — the same probe succeeding where it should (a plain container
//! without odek's settings, or a place where execution is allowed) — so that
//! "blocked" cannot pass because the probe itself is broken.
//!
//! PID 1 being the init and `pids.max`: `hardening.rs`; no default route on
//! internal networks: `networks.rs`.

use std::process::Command;

use odek_e2e::{stdout, Project, BASE_IMAGE, TEST_LABEL};

/// Runs `script` with `/bin/sh -c` in an odek sandbox (extra odek flags
/// before `--`) and returns its stdout.
fn in_sandbox(p: &Project, flags: &[&str], script: &str) -> String {
    let mut args = vec!["run", "--sandbox-image", BASE_IMAGE];
    args.extend_from_slice(flags);
    args.extend_from_slice(&["--", "sh", "-c", script]);
    let out = p.odek_ok(&args);
    assert!(p.leftovers().is_empty(), "odek left {:?}", p.leftovers());
    stdout(&out)
}

/// Runs `script` in a plain `docker run` container (no odek, none of its
/// settings; no network; labelled as a test object and removed).
fn in_plain_container(docker_flags: &[&str], script: &str) -> String {
    let mut args = vec!["run", "--rm", "--label", TEST_LABEL, "--network", "none"];
    args.extend_from_slice(docker_flags);
    args.extend_from_slice(&[BASE_IMAGE, "sh", "-c", script]);
    let out = Command::new("docker")
        .args(&args)
        .output()
        .expect("docker run");
    assert!(
        out.status.success(),
        "docker run {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `Name:\tvalue` lines of /proc/self/status for the fields we check.
const STATUS_PROBE: &str =
    "grep -E '^(NoNewPrivs|CapInh|CapPrm|CapEff|CapBnd|CapAmb):' /proc/self/status";

fn status_field(text: &str, name: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in:\n{text}"))
        .trim()
        .to_string()
}

#[test]
fn no_new_privileges_and_every_capability_set_is_empty() {
    let p = Project::new();
    let s = in_sandbox(&p, &[], STATUS_PROBE);
    assert_eq!(status_field(&s, "NoNewPrivs"), "1", "{s}");
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(status_field(&s, set), "0000000000000000", "{set}:\n{s}");
    }
    // Positive control: the same probe in a container without odek's
    // settings sees Docker's default capabilities and no NoNewPrivs.
    let plain = in_plain_container(&[], STATUS_PROBE);
    assert_eq!(status_field(&plain, "NoNewPrivs"), "0", "{plain}");
    for set in ["CapPrm", "CapEff", "CapBnd"] {
        assert_ne!(
            status_field(&plain, set),
            "0000000000000000",
            "{set}:\n{plain}"
        );
    }
}

#[test]
fn a_binary_copied_to_tmp_does_not_execute_but_one_in_the_workspace_does() {
    let p = Project::new();
    // `|| echo` keeps the shell going; 126 = found but not executable.
    let script = "cp /bin/true /tmp/t && /tmp/t; echo tmp=$?; \
                  cp /bin/true /workspace/t && /workspace/t; echo workspace=$?";
    let s = in_sandbox(&p, &[], script);
    assert!(s.contains("tmp=126"), "a binary in /tmp ran:\n{s}");
    // Positive control: the same copy-and-run works where exec is allowed.
    assert!(s.contains("workspace=0"), "the probe is broken:\n{s}");
}

/// Forks 200 `sleep`s in a child shell (which dies at the first failed
/// fork) and counts the container's processes with shell builtins only, so
/// the count works even at the limit.
const FORK_LOOP: &str = "sh -c 'for i in $(seq 200); do sleep 30 & done' 2>/tmp/fork.err; \
                         set -- /proc/[0-9]*; echo procs=$#; \
                         read e < /tmp/fork.err; echo \"err=$e\"";

fn procs(s: &str) -> usize {
    s.lines()
        .find_map(|l| l.strip_prefix("procs="))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no count in:\n{s}"))
}

#[test]
fn a_fork_loop_stops_at_the_pids_limit() {
    let p = Project::new();
    let s = in_sandbox(&p, &["--sandbox-pids-limit", "64"], FORK_LOOP);
    assert!(procs(&s) <= 64, "more processes than the limit:\n{s}");
    assert!(s.contains("fork"), "no fork failure reported:\n{s}");
    // Positive control: with the default limit the same loop starts all 200.
    let s = in_sandbox(&p, &[], FORK_LOOP);
    assert!(
        procs(&s) > 200,
        "the loop cannot start 200 processes at all:\n{s}"
    );
    assert!(
        s.contains("err=\n") || s.trim_end().ends_with("err="),
        "{s}"
    );
}

/// Prints `sock:<path>` for each Docker socket found and `env:DOCKER_HOST`
/// when the variable is set.
const DOCKER_PROBE: &str = "find / \\( -path /proc -o -path /sys \\) -prune -o -name 'docker*.sock' -print 2>/dev/null | sed 's/^/sock:/'; \
                            [ -n \"${DOCKER_HOST+x}\" ] && echo env:DOCKER_HOST; echo done";

#[test]
fn no_docker_socket_and_no_docker_host_inside() {
    let p = Project::new();
    // odek itself talks to the daemon through DOCKER_HOST: it must not leak.
    let sock = odek_e2e::docker_socket();
    let mut c = p.odek(&[
        "run",
        "--sandbox-image",
        BASE_IMAGE,
        "--",
        "sh",
        "-c",
        DOCKER_PROBE,
    ]);
    c.env("DOCKER_HOST", format!("unix://{sock}"));
    let out = odek_e2e::run_timeout(&mut c, odek_e2e::ODEK_TIMEOUT);
    assert!(out.status.success(), "{}", odek_e2e::stderr(&out));
    let s = stdout(&out);
    assert!(s.contains("done"), "the probe did not finish:\n{s}");
    assert!(!s.contains("sock:"), "a Docker socket is inside:\n{s}");
    assert!(
        !s.contains("env:DOCKER_HOST"),
        "DOCKER_HOST leaked in:\n{s}"
    );
    assert!(p.leftovers().is_empty());
    // Positive control: the probe finds both when they are there.
    let mount = format!("{sock}:/var/run/docker.sock");
    let plain = in_plain_container(
        &[
            "-v",
            &mount,
            "-e",
            "DOCKER_HOST=unix:///var/run/docker.sock",
        ],
        DOCKER_PROBE,
    );
    // (/var/run is a symlink to /run in the image: find reports /run.)
    assert!(
        plain
            .lines()
            .any(|l| l.starts_with("sock:") && l.ends_with("/docker.sock")),
        "{plain}"
    );
    assert!(plain.contains("env:DOCKER_HOST"), "{plain}");
}
