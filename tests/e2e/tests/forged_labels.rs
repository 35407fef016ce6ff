//! Labels are data anyone can write, and `/proc` is not the same for every
//! process (docs/SECURITY.md "Forged labels", "Shared /proc views"):
//! `odek sandbox gc` removes only what it can prove is an orphan of this
//! user's (a valid `dev.odek.mac`, an owner proven gone in the same PID
//! namespace), `exec`/`describe`/`down` refuse containers this user's odek
//! did not create or whose live settings were loosened, and nothing a label
//! says reaches the terminal raw.

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use odek_e2e::{
    docker, docker_ok, odek_bin, random_hex, run_timeout, stderr, stdout, wait_until, Project,
    BASE_IMAGE,
};

/// A container made with `docker run` (labelled `dev.odek.test=true`),
/// removed when dropped.
struct Forged {
    id: String,
    name: String,
}

impl Forged {
    /// `docker run -d --name odek-forged-<hex> <extra…> BASE_IMAGE sleep 120`.
    fn run(labels: &[(&str, &str)], extra: &[&str]) -> Forged {
        let name = format!("odek-forged-{}", random_hex(12));
        let mut args: Vec<String> = vec![
            "run".into(),
            "-d".into(),
            "--name".into(),
            name.clone(),
            "--label".into(),
            "dev.odek.test=true".into(),
        ];
        for (k, v) in labels {
            args.push("--label".into());
            args.push(format!("{k}={v}"));
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        args.extend([BASE_IMAGE.to_string(), "sleep".into(), "120".into()]);
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let id = docker(&argv);
        assert!(!id.is_empty(), "docker run {argv:?} failed");
        Forged { id, name }
    }

    fn exists(&self) -> bool {
        docker_ok(&["container", "inspect", &self.id])
    }
}

impl Drop for Forged {
    fn drop(&mut self) {
        let _ = docker_ok(&["rm", "-f", &self.id]);
    }
}

fn host_file(path: &str) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .trim()
        .to_string()
}

/// Owner labels claiming a process of this host and boot (and this PID
/// namespace) that does not exist: the old owner check called it gone.
fn dead_owner_labels() -> Vec<(&'static str, String)> {
    vec![
        ("dev.odek.sandbox", "true".into()),
        ("dev.odek.owner-pid", "4194303".into()),
        ("dev.odek.owner-start", "1".into()),
        (
            "dev.odek.owner-host",
            host_file("/proc/sys/kernel/hostname"),
        ),
        (
            "dev.odek.owner-boot",
            host_file("/proc/sys/kernel/random/boot_id"),
        ),
        (
            "dev.odek.owner-pidns",
            std::fs::read_link("/proc/self/ns/pid")
                .expect("pid namespace")
                .display()
                .to_string(),
        ),
        ("dev.odek.created", "1".into()),
    ]
}

fn borrowed<'a>(v: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    v.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// Waits (≤ `limit`) for `child` to exit and returns its output.
fn finish(child: Child, limit: Duration) -> Output {
    odek_e2e::wait_timeout(child, limit, "odek run")
}

/// Waits until exactly one running sandbox of `p` exists; returns its ID.
fn running_sandbox(p: &Project) -> String {
    let mut id = String::new();
    let ok = wait_until(Duration::from_secs(40), || match p.sandboxes().as_slice() {
        [c] => {
            id = c.clone();
            let out = odek_e2e::run(std::process::Command::new("docker").args([
                "inspect",
                "-f",
                "{{.State.Running}}",
                c,
            ]));
            stdout(&out).trim() == "true"
        }
        _ => false,
    });
    assert!(ok, "no running sandbox appeared: {:?}", p.leftovers());
    // Let odek reach the exec of the command.
    std::thread::sleep(Duration::from_millis(700));
    id
}

fn label(id: &str, key: &str) -> String {
    docker(&[
        "inspect",
        "-f",
        &format!("{{{{index .Config.Labels \"{key}\"}}}}"),
        id,
    ])
}

// ---------------------------------------------------------------------------
// gc (docs/SECURITY.md "Shared /proc views")

#[test]
fn gc_from_the_host_keeps_a_sandbox_whose_owner_runs_in_another_pid_namespace() {
    let p = Project::new();
    let inner = p.odek(&[
        "run",
        "--sandbox-image",
        BASE_IMAGE,
        "--",
        "sh",
        "-c",
        "sleep 20; echo slept",
    ]);
    // The same odek command line, inside a new PID namespace with its own /proc.
    let mut cmd = Command::new("unshare");
    cmd.args(["-p", "-f", "--mount-proc"])
        .arg(inner.get_program())
        .args(inner.get_args())
        .current_dir(p.path());
    for (k, v) in inner.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn unshare odek run");
    let id = running_sandbox(&p);
    let host_ns = std::fs::read_link("/proc/self/ns/pid").expect("ns");
    let owner_ns = label(&id, "dev.odek.owner-pidns");
    assert_ne!(
        owner_ns,
        host_ns.display().to_string(),
        "the run is not in another PID namespace"
    );
    // Its PID means another process here (PID 1, or a low one, exists).
    let owner_pid = label(&id, "dev.odek.owner-pid");
    assert!(
        owner_pid.parse::<u32>().is_ok_and(|n| n < 10),
        "{owner_pid}"
    );

    let gc = p.odek_ok(&["sandbox", "gc"]);
    assert!(stdout(&gc).trim().is_empty(), "gc removed: {}", stdout(&gc));
    assert!(
        docker_ok(&["container", "inspect", &id]),
        "gc from the host removed a live sandbox owned in another PID namespace"
    );
    // ls says why: this user's, owner not seen from here.
    let ls = stdout(&p.odek_ok(&["sandbox", "ls", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&ls).expect("JSON");
    let entry = v
        .as_array()
        .expect("array")
        .iter()
        .find(|e| e["id"] == id.as_str() || e["id"].as_str().is_some_and(|i| i.starts_with(&id)))
        .unwrap_or_else(|| panic!("{id} not in ls:\n{ls}"))
        .clone();
    assert_eq!(entry["verified"], true, "{entry}");
    assert_eq!(entry["owner_gone"], serde_json::Value::Null, "{entry}");
    let out = finish(child, Duration::from_secs(60));
    assert_eq!(
        out.status.code(),
        Some(0),
        "the run did not finish normally; stderr:\n{}",
        stderr(&out)
    );
    assert_eq!(stdout(&out).trim(), "slept");
    assert!(p.leftovers().is_empty(), "left: {:?}", p.leftovers());
}

#[test]
fn gc_by_another_user_under_hidepid_keeps_a_live_sandbox() {
    let p = Project::new();
    let child = p
        .odek(&[
            "run",
            "--sandbox-image",
            BASE_IMAGE,
            "--",
            "sh",
            "-c",
            "sleep 15; echo slept",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn odek run");
    let id = running_sandbox(&p);

    // User 65534 (in the docker group), its own $ODEK_HOME, and a /proc
    // mounted hidepid=2 in a mount namespace of its own: it cannot see
    // root's odek at all.
    let home = tempfile::Builder::new()
        .prefix("odek-e2e-nobody-")
        .tempdir()
        .expect("tempdir");
    let st = Command::new("chown")
        .args(["65534:65534", &home.path().display().to_string()])
        .status()
        .expect("chown");
    assert!(st.success());
    let gid = docker_socket_gid();
    let script = format!(
        "mount -t proc -o hidepid=2 proc /proc && exec setpriv --reuid 65534 --regid 65534 --groups {gid} env -i PATH=/usr/bin:/bin HOME=/nonexistent DOCKER_HOST=unix://{} ODEK_HOME={} {} sandbox gc",
        odek_e2e::docker_socket(),
        home.path().display(),
        odek_bin().display()
    );
    // Control: under that /proc, user 65534 sees no process of root's.
    let seen = run_timeout(
        Command::new("unshare").args([
            "-m",
            "sh",
            "-c",
            &format!(
                "mount -t proc -o hidepid=2 proc /proc && setpriv --reuid 65534 --regid 65534 --clear-groups sh -c 'test -e /proc/{}/stat && echo visible || echo hidden'",
                child.id()
            ),
        ]),
        Duration::from_secs(20),
    );
    assert_eq!(stdout(&seen).trim(), "hidden", "{}", stderr(&seen));
    let gc = run_timeout(
        Command::new("unshare")
            .args(["-m", "sh", "-c", &script])
            .current_dir("/"),
        Duration::from_secs(60),
    );
    assert!(
        gc.status.success(),
        "gc as user 65534 failed: {}",
        stderr(&gc)
    );
    assert!(stdout(&gc).trim().is_empty(), "gc removed: {}", stdout(&gc));
    assert!(
        docker_ok(&["container", "inspect", &id]),
        "another user's gc removed a live sandbox it could not see the owner of"
    );
    let out = finish(child, Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(0), "stderr:\n{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "slept");
}

/// The group owning the Docker socket.
fn docker_socket_gid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(odek_e2e::docker_socket())
        .expect("docker socket")
        .gid()
}

#[test]
fn gc_leaves_a_forged_container_whose_claimed_owner_is_dead() {
    let p = Project::new();
    let claims = dead_owner_labels();
    let mut labels = borrowed(&claims);
    let workdir = p.path().display().to_string();
    labels.push(("dev.odek.workdir", &workdir));
    let forged = Forged::run(&labels, &[]);
    // And one that copies a MAC label from nowhere.
    labels.push(("dev.odek.signed", "dev.odek.sandbox"));
    labels.push(("dev.odek.mac", "00"));
    let bad_mac = Forged::run(&labels, &[]);

    for args in [&["sandbox", "gc"][..], &["sandbox", "gc", "--detached"][..]] {
        let gc = p.odek_ok(args);
        assert!(
            !stdout(&gc).contains("odek-forged-"),
            "gc removed: {}",
            stdout(&gc)
        );
    }
    assert!(
        forged.exists(),
        "gc removed a container odek did not create"
    );
    assert!(bad_mac.exists(), "gc removed a container with a bad MAC");
    // ls lists them apart, never as gc-able.
    let ls = stdout(&p.odek_ok(&["sandbox", "ls", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&ls).expect("JSON");
    for f in [&forged, &bad_mac] {
        let e = v
            .as_array()
            .expect("array")
            .iter()
            .find(|e| e["id"] == f.id.as_str())
            .unwrap_or_else(|| panic!("{} not in ls:\n{ls}", f.name));
        assert_eq!(e["verified"], false, "{e}");
        assert_eq!(e["owner_gone"], serde_json::Value::Null, "{e}");
    }
    let table = stdout(&p.odek_ok(&["sandbox", "ls"]));
    let row = table
        .lines()
        .find(|l| l.starts_with(&forged.name))
        .unwrap_or_else(|| panic!("{} not in:\n{table}", forged.name));
    assert!(row.contains("unverified") && !row.contains("gone"), "{row}");
}

// ---------------------------------------------------------------------------
// Terminal injection through labels

#[test]
fn label_values_reach_the_terminal_escaped() {
    let p = Project::new();
    let claims = dead_owner_labels();
    let mut labels = borrowed(&claims);
    let evil = "\u{1b}]0;pwned\u{7}\u{1b}[2J/evil\u{9b}2J";
    labels.push(("dev.odek.workdir", evil));
    labels.push(("dev.odek.parent", evil));
    labels.push(("dev.odek.plan", evil));
    let forged = Forged::run(&labels, &[]);
    let clean = |what: &str, out: &Output| {
        for (stream, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
            assert!(
                !bytes.iter().any(|b| *b == 0x1b || *b == 0x07),
                "{what} {stream} carries ESC or BEL: {:?}",
                String::from_utf8_lossy(bytes)
            );
            assert!(
                !String::from_utf8_lossy(bytes).contains('\u{9b}'),
                "{what} {stream} carries a C1 CSI"
            );
        }
    };
    let ls = p.run_odek(&["sandbox", "ls"]);
    assert!(ls.status.success(), "{}", stderr(&ls));
    assert!(stdout(&ls).contains(&forged.name), "{}", stdout(&ls));
    assert!(stdout(&ls).contains("pwned"), "the value is shown, escaped");
    clean("ls", &ls);
    let json = p.run_odek(&["sandbox", "ls", "--json"]);
    clean("ls --json", &json);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("valid JSON");
    assert!(v
        .as_array()
        .expect("array")
        .iter()
        .any(|e| e["workdir"] == evil));
    clean("gc", &p.run_odek(&["sandbox", "gc", "--detached"]));
    clean("gc --json", &p.run_odek(&["sandbox", "gc", "--json"]));
    for args in [
        &["sandbox", "down", forged.name.as_str()][..],
        &["sandbox", "describe", forged.name.as_str()][..],
        &["sandbox", "exec", forged.name.as_str(), "--", "true"][..],
        &["sandbox", "up", "--parent", forged.name.as_str()][..],
        &["sandbox", "exec", "\u{1b}]0;pwned\u{7}", "--", "true"][..],
    ] {
        let out = p.run_odek(args);
        assert!(!out.status.success(), "{args:?} succeeded");
        clean(&format!("{args:?}"), &out);
    }
    assert!(forged.exists());
}

// ---------------------------------------------------------------------------
// exec / describe (docs/SECURITY.md "Forged labels")

/// `odek sandbox up` in `p`; returns the sandbox's name.
fn up(p: &Project) -> String {
    let out = p.odek_ok(&["sandbox", "up", "--sandbox-image", BASE_IMAGE]);
    stdout(&out).trim().to_string()
}

#[test]
fn exec_refuses_a_forged_container_carrying_a_copied_plan() {
    let p = Project::new();
    let real = up(&p);
    let plan = label(&real, "dev.odek.plan");
    assert!(plan.starts_with('{'), "no plan label: {plan}");
    // Full capabilities, no no-new-privileges, the project mounted: what
    // `docker run` gives by default, dressed as a sandbox.
    let elsewhere = format!("/nonexistent-odek-e2e-{}", random_hex(8));
    let workspace = format!("{}:/workspace", p.path().display());
    let forged = Forged::run(
        &[
            ("dev.odek.sandbox", "true"),
            ("dev.odek.plan", &plan),
            ("dev.odek.workdir", &elsewhere),
            ("dev.odek.detached", "true"),
        ],
        &["-v", &workspace, "-w", "/workspace"],
    );
    let marker = p.path().join("ran-in-forged");
    let out = p.run_odek(&[
        "sandbox",
        "exec",
        &forged.name,
        "--",
        "sh",
        "-c",
        "touch /workspace/ran-in-forged",
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(125), "stderr:\n{err}");
    assert!(
        err.contains("was not created by this user's odek") && err.contains("launch.key"),
        "{err}"
    );
    assert!(!marker.exists(), "the command ran in the forged container");
    let d = p.run_odek(&["sandbox", "describe", &forged.name]);
    assert!(!d.status.success(), "describe accepted it:\n{}", stdout(&d));
    assert!(stderr(&d).contains("not created by this user's odek"));
    let down = p.run_odek(&["sandbox", "down", &forged.name]);
    assert!(!down.status.success());
    assert!(stderr(&down).contains(&format!("docker rm -f {}", forged.name)));
    assert!(
        forged.exists(),
        "down removed a container odek did not create"
    );
    // Control: the real sandbox runs commands.
    p.odek_ok(&["sandbox", "exec", &real, "--", "true"]);
    p.odek_ok(&["sandbox", "down", &real]);
    assert!(!marker.exists());
}

#[test]
fn a_sandbox_loosened_with_docker_update_is_refused_naming_the_pids_limit() {
    let p = Project::new();
    let name = up(&p);
    let before = p.odek_ok(&["sandbox", "describe", &name]);
    assert!(stdout(&before).contains("at most 4096 processes"));
    assert!(docker_ok(&["update", "--pids-limit", "99999", &name]));
    assert_eq!(
        docker(&["inspect", "-f", "{{.HostConfig.PidsLimit}}", &name]),
        "99999"
    );
    let d = p.run_odek(&["sandbox", "describe", &name]);
    assert!(
        !stdout(&d).contains("4096"),
        "describe still reports the planned limit:\n{}",
        stdout(&d)
    );
    assert!(
        stdout(&d).contains("99999") || stderr(&d).contains("PidsLimit is 99999, requested 4096"),
        "stdout:\n{}\nstderr:\n{}",
        stdout(&d),
        stderr(&d)
    );
    let marker = p.path().join("ran-in-loosened");
    let out = p.run_odek(&[
        "sandbox",
        "exec",
        &name,
        "--",
        "touch",
        "/workspace/ran-in-loosened",
    ]);
    assert_eq!(out.status.code(), Some(125), "stderr:\n{}", stderr(&out));
    assert!(stderr(&out).contains("99999"), "{}", stderr(&out));
    assert!(!marker.exists(), "the command ran in the loosened sandbox");
    // Down still removes it: it is this user's.
    let t0 = Instant::now();
    p.odek_ok(&["sandbox", "down", &name]);
    assert!(t0.elapsed() < Duration::from_secs(30));
    assert!(p.leftovers().is_empty(), "left: {:?}", p.leftovers());
}
