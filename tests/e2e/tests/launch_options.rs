//! Optional launch settings read back from inside the container (SPEC §6.1,
//! §3.1), the `$ODEK_HOME` mask (§7.3), project approval (§7.2) and the
//! `Dockerfile.odek` image source (§5).

use std::process::Command;

use odek_e2e::{
    assert_refused, docker_ok, random_hex, run, run_timeout, startup_line, stderr, stdout, strs,
    Project, BASE_IMAGE, ODEK_TIMEOUT, PROJECT,
};

#[test]
fn caps_dropped_no_new_privileges_and_limits_applied() {
    let p = Project::new();
    let out = p.odek_ok(&[
        "run",
        "--sandbox-image",
        BASE_IMAGE,
        "--sandbox-readonly",
        "--sandbox-memory",
        "64m",
        "--sandbox-cpus",
        "0.5",
        "--sandbox-user",
        "1000:1000",
        "-e",
        "ODEK_E2E_VAR=hello",
        "--",
        "sh",
        "-c",
        "id -u; id -g; echo \"$ODEK_E2E_VAR\"; pwd; \
         touch /workspace/x 2>/dev/null; echo touch=$?; \
         grep -E '^(CapEff|CapBnd|NoNewPrivs):' /proc/self/status; \
         cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max; \
         cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/cpu/cpu.cfs_period_us 2>/dev/null || cat /sys/fs/cgroup/cpu.max",
    ]);
    let o = stdout(&out);
    let l: Vec<&str> = o.lines().map(str::trim).collect();
    assert_eq!(&l[..4], ["1000", "1000", "hello", "/workspace"], "{o}");
    assert_eq!(
        l[4], "touch=1",
        "/workspace is writable despite --sandbox-readonly:\n{o}"
    );
    assert!(
        o.contains("CapEff:\t0000000000000000"),
        "capabilities not dropped:\n{o}"
    );
    assert!(
        o.contains("CapBnd:\t0000000000000000"),
        "bounding set not empty:\n{o}"
    );
    assert!(
        o.contains("NoNewPrivs:\t1"),
        "no-new-privileges not set:\n{o}"
    );
    assert!(o.contains("67108864"), "memory limit not 64 MiB:\n{o}");
    assert!(
        o.contains("50000\n100000") || o.contains("50000 100000"),
        "cpu quota not 0.5:\n{o}"
    );
    assert!(p.leftovers().is_empty());
}

#[test]
fn workspace_is_the_project_dir_read_write_by_default() {
    let p = Project::new();
    std::fs::write(p.path().join("hello.txt"), "from-host").expect("write");
    let out = p.odek_ok(&[
        "run",
        "--sandbox-image",
        BASE_IMAGE,
        "--",
        "sh",
        "-c",
        "cat /workspace/hello.txt; echo from-sandbox > /workspace/back.txt",
    ]);
    assert_eq!(stdout(&out).trim(), "from-host");
    let back = std::fs::read_to_string(p.path().join("back.txt")).expect("back.txt");
    assert_eq!(back.trim(), "from-sandbox");
}

#[test]
fn odek_home_inside_the_workdir_is_masked() {
    let p = Project::new();
    let home = p.path().join(".odek-home");
    std::fs::create_dir_all(&home).expect("mkdir");
    std::fs::write(home.join("config.json"), r#"{"sandbox_pids_limit": 2000}"#).expect("write");
    std::fs::write(home.join("project_sandbox_approvals.json"), "{}").expect("write");
    let mut c = p.odek(&[
        "run",
        "--sandbox-image",
        BASE_IMAGE,
        "--",
        "sh",
        "-c",
        "ls -A /workspace/.odek-home | wc -l; \
         echo '{\"x\":true}' > /workspace/.odek-home/project_sandbox_approvals.json; echo write=$?; \
         cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max",
    ]);
    c.env("ODEK_HOME", &home);
    let out = run_timeout(&mut c, ODEK_TIMEOUT);
    let o = stdout(&out);
    assert!(out.status.success(), "{o}\n{}", stderr(&out));
    let l: Vec<&str> = o.lines().map(str::trim).collect();
    assert_eq!(
        l.first(),
        Some(&"0"),
        "the sandbox sees $ODEK_HOME's files:\n{o}"
    );
    assert_ne!(
        l.get(1),
        Some(&"write=0"),
        "the sandbox wrote into $ODEK_HOME:\n{o}"
    );
    // positive control: the user config was still read on the host side
    assert_eq!(l.get(2), Some(&"2000"), "{o}");
    assert_eq!(
        std::fs::read_to_string(home.join("project_sandbox_approvals.json")).expect("read"),
        "{}",
        "the approval store changed"
    );
}

#[test]
fn project_networks_need_approval() {
    let p = Project::new();
    std::fs::write(
        p.path().join("odek.json"),
        format!(r#"{{"sandbox_compose_project": "{PROJECT}"}}"#),
    )
    .expect("write odek.json");
    let mut argv: Vec<String> = ["run", "--sandbox-image", BASE_IMAGE, "--"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    argv.extend(p.marker_argv());
    // non-interactive, no trust stored: refused, naming both ways out
    let out = p.run_odek(&strs(&argv));
    assert_refused(&p, &out, "ODEK_APPROVE_PROJECT_SANDBOX=1");
    // approved for this run: the project's networks are attached
    let out = p.run_odek_env(
        &[("ODEK_APPROVE_PROJECT_SANDBOX", "1")],
        &[
            "run",
            "--sandbox-image",
            BASE_IMAGE,
            "--",
            "redis-cli",
            "-h",
            "redis",
            "ping",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "PONG");
    // a one-off approval is not persisted
    let out = p.run_odek(&strs(&argv));
    assert_refused(&p, &out, "approval");
}

/// Removes an image tag on drop.
struct ImageGuard(String);

impl Drop for ImageGuard {
    fn drop(&mut self) {
        let _ = docker_ok(&["rmi", &self.0]);
    }
}

/// `odek-sandbox:<first 12 bytes of sha256(file) in hex>`.
fn dockerfile_tag(path: &std::path::Path) -> String {
    let out = run(Command::new("sha256sum").arg(path));
    assert!(out.status.success());
    format!("odek-sandbox:{}", &stdout(&out)[..24])
}

#[test]
fn dockerfile_odek_is_built_and_used() {
    let p = Project::new();
    let file = p.path().join("Dockerfile.odek");
    // A unique comment makes a unique file hash, hence a unique tag.
    std::fs::write(
        &file,
        format!(
            "FROM {BASE_IMAGE}\n# odek e2e {}\nRUN echo built-by-odek > /built\n",
            random_hex(16)
        ),
    )
    .expect("write Dockerfile.odek");
    let tag = dockerfile_tag(&file);
    let _guard = ImageGuard(tag.clone());
    // A repository's Dockerfile.odek is project input: without approval it
    // is neither built nor run.
    let mut argv: Vec<String> = vec!["run".into(), "--".into()];
    argv.extend(p.marker_argv());
    let refused = p.run_odek(&strs(&argv));
    assert_refused(&p, &refused, "Dockerfile.odek");
    assert!(
        !docker_ok(&["image", "inspect", &tag]),
        "built before approval"
    );
    let approved = [("ODEK_APPROVE_PROJECT_SANDBOX", "1")];
    let out = p.run_odek_env(&approved, &["run", "--", "cat", "/built"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "built-by-odek");
    let line = startup_line(&out).expect("startup line");
    assert!(
        line.contains(&format!("image={tag}")),
        "expected {tag}: {line}"
    );
    assert!(docker_ok(&["image", "inspect", &tag]), "{tag} not tagged");
    // built once: the second run does not build again
    let again = p.run_odek_env(&approved, &["run", "--", "true"]);
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(
        !stderr(&again).contains("Step 1/"),
        "rebuilt:\n{}",
        stderr(&again)
    );
    assert!(p.leftovers().is_empty());
}

#[test]
fn failed_dockerfile_odek_build_is_fatal_even_implicitly() {
    let p = Project::new();
    let file = p.path().join("Dockerfile.odek");
    std::fs::write(
        &file,
        format!(
            "FROM {BASE_IMAGE}\n# odek e2e {}\nRUN exit 3\n",
            random_hex(16)
        ),
    )
    .expect("write Dockerfile.odek");
    let _guard = ImageGuard(dockerfile_tag(&file));
    let mut argv: Vec<String> = vec!["run".into(), "--".into()];
    argv.extend(p.marker_argv());
    let out = p.run_odek_env(&[("ODEK_APPROVE_PROJECT_SANDBOX", "1")], &strs(&argv));
    assert_refused(&p, &out, "Dockerfile.odek");
    assert!(
        stderr(&out).contains("building"),
        "the build was tried:\n{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("NO SANDBOX"), "{}", stderr(&out));
}
