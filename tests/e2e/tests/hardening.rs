//! What every launch applies (SPEC §6.1), read back from inside the
//! container: pids.max, PID 1 being the init, `/tmp` `nosuid,noexec`.

use odek_e2e::{startup_line, stdout, Project, BASE_IMAGE, PIDS_MAX_CMD};

#[test]
fn default_pids_limit_is_4096() {
    let p = Project::new();
    let out = p.odek_ok(&[
        "run",
        "--sandbox-image",
        BASE_IMAGE,
        "--",
        "sh",
        "-c",
        PIDS_MAX_CMD,
    ]);
    assert_eq!(stdout(&out).trim(), "4096");
    let line = startup_line(&out).expect("startup line");
    assert!(line.contains("pids=4096"), "{line}");
    assert!(p.leftovers().is_empty());
}

/// The container's memory limit in bytes (cgroup v1, else v2).
const MEMORY_MAX_CMD: &str =
    "cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max";

/// Every sandbox has a memory limit, 4 GiB unless the operator sets
/// another; a project's `odek.json` can lower it, never raise it.
#[test]
fn default_memory_limit_is_4_gib_and_a_project_only_lowers_it() {
    let p = Project::new();
    let mem = |p: &Project, extra: &[&str]| {
        let mut args = vec!["run", "--sandbox-image", BASE_IMAGE];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "sh", "-c", MEMORY_MAX_CMD]);
        stdout(&p.odek_ok(&args)).trim().to_string()
    };
    assert_eq!(mem(&p, &[]), "4294967296", "the default");
    std::fs::write(p.path().join("odek.json"), r#"{"sandbox_memory": "8g"}"#).expect("odek.json");
    assert_eq!(mem(&p, &[]), "4294967296", "a project cannot raise it");
    std::fs::write(p.path().join("odek.json"), r#"{"sandbox_memory": "1g"}"#).expect("odek.json");
    assert_eq!(mem(&p, &[]), "1073741824", "a project can lower it");
    std::fs::remove_file(p.path().join("odek.json")).expect("rm odek.json");
    assert_eq!(
        mem(&p, &["--sandbox-memory", "6g"]),
        "6442450944",
        "the operator may raise it"
    );
    assert!(p.leftovers().is_empty());
}

#[test]
fn pids_limit_flag_is_applied() {
    let p = Project::new();
    let out = p.odek_ok(&[
        "run",
        "--sandbox-image",
        BASE_IMAGE,
        "--sandbox-pids-limit",
        "64",
        "--",
        "sh",
        "-c",
        PIDS_MAX_CMD,
    ]);
    assert_eq!(stdout(&out).trim(), "64");
    let line = startup_line(&out).expect("startup line");
    assert!(line.contains("pids=64"), "{line}");
}

/// PID 1 is the init, and the command is not its child; returns the
/// command lines of PID 1's other children.
fn pid_1_children(p: &Project) -> (Vec<String>, String) {
    let out = p.odek_ok(&[
        "run",
        "--sandbox-image",
        BASE_IMAGE,
        "--",
        "sh",
        "-c",
        "cat /proc/1/comm; echo ---; ps -eo pid=,ppid=,comm=,args=",
    ]);
    let o = stdout(&out);
    let (comm, ps) = o.split_once("---").expect("separator");
    let comm = comm.trim();
    assert!(
        comm == "docker-init" || comm == "tini",
        "PID 1 is {comm:?}, not the init:\n{o}"
    );
    let children: Vec<String> = ps
        .lines()
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() >= 3 && f[1] == "1" && f[0] != "1"
        })
        .map(str::to_string)
        .collect();
    // The command is not under the init (it comes from `docker exec`, or
    // from the supervisor).
    assert!(
        !children.iter().any(|l| l.contains("ps -eo")),
        "the command runs as PID 1's child:\n{o}"
    );
    (children, o)
}

#[test]
fn through_the_exec_api_pid_1_is_the_init_and_the_idle_process_is_its_child() {
    let p = Project::new().exec_api();
    let (children, o) = pid_1_children(&p);
    assert!(
        children
            .iter()
            .any(|l| l.split_whitespace().nth(2) == Some("cat")),
        "no idle process `cat` as PID 1's child:\n{o}"
    );
}

#[test]
fn pid_1_is_the_init_and_odeks_supervisor_is_its_only_child() {
    let p = Project::new();
    let (children, o) = pid_1_children(&p);
    assert_eq!(children.len(), 1, "{o}");
    assert!(
        children[0].contains("/.odek/odek-supervisor serve"),
        "PID 1's child is not odek's supervisor:\n{o}"
    );
}

#[test]
fn tmp_is_nosuid_noexec() {
    let p = Project::new();
    let script = "printf '#!/bin/sh\\necho script-ran\\n' > /tmp/s.sh && chmod +x /tmp/s.sh; \
                  grep ' /tmp ' /proc/mounts; echo ---; \
                  /tmp/s.sh; echo \"direct=$?\"; \
                  sh /tmp/s.sh";
    let out = p.odek_ok(&[
        "run",
        "--sandbox-image",
        BASE_IMAGE,
        "--",
        "sh",
        "-c",
        script,
    ]);
    let o = stdout(&out);
    let (mounts, exec) = o.split_once("---").expect("separator");
    let line = mounts
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("/tmp"))
        .unwrap_or_else(|| panic!("/tmp is not a mount point:\n{o}"));
    let opts: Vec<&str> = line
        .split_whitespace()
        .nth(3)
        .expect("mount options")
        .split(',')
        .collect();
    assert!(line.starts_with("tmpfs "), "/tmp is not a tmpfs: {line}");
    assert!(opts.contains(&"nosuid"), "/tmp lacks nosuid: {line}");
    assert!(opts.contains(&"noexec"), "/tmp lacks noexec: {line}");
    // Executing the script from /tmp fails (126: permission denied) ...
    let direct = exec
        .lines()
        .find_map(|l| l.strip_prefix("direct="))
        .expect("direct= line");
    assert_ne!(direct.trim(), "0", "a script in /tmp was executed:\n{o}");
    assert_eq!(
        exec.matches("script-ran").count(),
        1,
        "expected only the `sh /tmp/s.sh` control to print:\n{o}"
    );
    // ... while reading it through sh works (positive control: the file is there).
    assert!(exec.trim_end().ends_with("script-ran"), "{o}");
}
