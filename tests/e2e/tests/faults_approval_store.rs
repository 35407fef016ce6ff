//! Approval store faults at the CLI level (SPEC §7.3): a project
//! `odek.json` asks for `sandbox_compose_project: PROJECT`, so every launch
//! needs the operator's approval, given at a real pseudo-terminal. The store
//! (`$ODEK_HOME/project_sandbox_approvals.json`) is then broken in each way
//! the SPEC names — disk full while trusting, replaced by a symlink,
//! truncated, writable by others, sixteen concurrent writers — and odek must
//! fail closed: an error, never an empty or forged store taken at face
//! value, no launch on an approval that could not be persisted, the old
//! file byte-identical, and never an approval nobody gave.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use expectrl::session::OsSession as Session;
use expectrl::Expect;
use odek_e2e::tty::{card, finish, PROMPT};
use odek_e2e::{run_timeout, stderr, Project, BASE_IMAGE, PROJECT};

const STORE: &str = "project_sandbox_approvals.json";
const META: &str = "project_sandbox_approvals.meta.json";

fn project() -> Project {
    let p = Project::new();
    std::fs::write(
        p.path().join("odek.json"),
        format!(r#"{{"sandbox_compose_project": "{PROJECT}"}}"#),
    )
    .expect("write odek.json");
    p
}

/// `odek run --sandbox-image <base> -- <cmd>` for `p` with `ODEK_HOME=home`.
fn run_cmd(p: &Project, home: &Path, cmd: &[&str]) -> Command {
    let mut args = vec!["run", "--sandbox-image", BASE_IMAGE, "--"];
    args.extend_from_slice(cmd);
    let mut c = p.odek(&args);
    c.env("ODEK_HOME", home);
    c
}

fn spawn_tty(cmd: Command) -> Session {
    odek_e2e::tty::spawn(cmd, Duration::from_secs(120))
}

/// Trusts `p`'s project settings in `home` at the prompt (`t`), running
/// `true`; returns the key odek reported.
fn trust(p: &Project, home: &Path) -> String {
    let mut s = spawn_tty(run_cmd(p, home, &["true"]));
    card(&mut s);
    s.send_line("t").expect("answer t");
    let (out, code) = finish(s);
    assert_eq!(code, 0, "trusting failed:\n{out}");
    reported_key(&out).unwrap_or_else(|| panic!("no `trusted; key` line:\n{out}"))
}

fn reported_key(out: &str) -> Option<String> {
    out.lines()
        .find_map(|l| l.split("trusted; key ").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .map(str::to_string)
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p)
        .expect("stat")
        .permissions()
        .mode()
        & 0o777
}

fn store_keys(path: &Path) -> serde_json::Map<String, serde_json::Value> {
    let bytes = std::fs::read(path).expect("read the store");
    let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
        panic!(
            "the store is not valid JSON ({e}): {:?}",
            String::from_utf8_lossy(&bytes)
        )
    });
    v.as_object().expect("a JSON object").clone()
}

fn temp_leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("ls")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect()
}

/// Asserts a refusal seen on a terminal: exit 125, `needle` in the output,
/// no approval prompt shown, nothing run, no container.
fn assert_refused_on_tty(p: &Project, out: &str, code: i32, needle: &str) {
    assert_eq!(code, 125, "{out}");
    assert!(out.contains(needle), "output lacks {needle:?}:\n{out}");
    assert!(
        !out.contains(PROMPT),
        "odek asked for approval over a broken store (treated it as empty):\n{out}"
    );
    assert!(!p.marker().exists(), "the command ran on the host");
    assert!(
        p.leftovers().is_empty(),
        "container left: {:?}",
        p.leftovers()
    );
}

/// A tmpfs mounted on a fresh directory (unmounted on drop).
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Tmpfs {
        let dir = tempfile::Builder::new()
            .prefix("odek-e2e-tmpfs-")
            .tempdir()
            .expect("tempdir");
        let st = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(dir.path())
            .status()
            .expect("run mount");
        assert!(
            st.success(),
            "mount -t tmpfs failed: the disk-full case needs root (CAP_SYS_ADMIN)"
        );
        Tmpfs { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(self.dir.path())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("umount")
                .arg("-l")
                .arg(self.dir.path())
                .status();
        }
    }
}

/// Fills the filesystem of `dir` to the last byte (a filler file).
fn fill(dir: &Path) -> PathBuf {
    use std::io::Write;
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).expect("create the filler");
    let page = vec![0u8; 4096];
    while f.write_all(&page).is_ok() {}
    while f.write_all(&[0u8]).is_ok() {}
    let _ = f.sync_all();
    path
}

#[test]
fn disk_full_while_trusting_keeps_the_old_store_and_does_not_launch() {
    let p = project();
    let fs = Tmpfs::mount("16k");
    let home = fs.path();
    // An existing, valid store (another project's trust), as odek writes it.
    let store = home.join(STORE);
    let old = format!("{{\n  \"{}\": true\n}}", "ab".repeat(32));
    std::fs::write(&store, &old).expect("write the old store");
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let before = std::fs::read(&store).expect("read");
    let filler = fill(home);
    assert!(
        std::fs::write(home.join("probe"), b"x").is_err(),
        "the tmpfs is not full"
    );
    let _ = std::fs::remove_file(home.join("probe"));

    let mut s = spawn_tty(run_cmd(&p, home, &["sh", "-c", &p.marker_cmd()]));
    card(&mut s);
    s.send_line("t").expect("answer t");
    let (out, code) = finish(s);
    assert_eq!(
        code, 125,
        "the launch went ahead on an unpersisted trust:\n{out}"
    );
    assert!(
        out.contains("unchanged") && out.to_lowercase().contains("no space"),
        "the error does not say the write failed for lack of space and the store is unchanged:\n{out}"
    );
    assert!(
        !out.contains("odek: sandbox network="),
        "a sandbox started:\n{out}"
    );
    assert!(!p.marker().exists(), "the command ran on the host");
    assert!(
        p.leftovers().is_empty(),
        "container left: {:?}",
        p.leftovers()
    );
    assert_eq!(
        std::fs::read(&store).expect("read"),
        before,
        "the old store is not byte-identical"
    );
    assert_eq!(mode(&store), 0o600);
    assert!(
        temp_leftovers(home).is_empty(),
        "{:?}",
        temp_leftovers(home)
    );

    // Nothing was trusted: with space again, a run without a terminal is
    // still refused for want of approval.
    std::fs::remove_file(filler).expect("rm filler");
    let out = run_timeout(
        &mut run_cmd(&p, home, &["sh", "-c", &p.marker_cmd()]),
        Duration::from_secs(60),
    );
    odek_e2e::assert_refused(&p, &out, "needs operator approval");
    assert_eq!(std::fs::read(&store).expect("read"), before);
}

#[test]
fn a_symlinked_store_is_an_error_even_when_it_trusts_the_project() {
    let p = project();
    // A store that really trusts this project, made by odek itself …
    let scratch = tempfile::tempdir().expect("tempdir");
    trust(&p, scratch.path());
    let elsewhere_dir = tempfile::tempdir().expect("tempdir");
    let elsewhere = elsewhere_dir.path().join("approvals.json");
    std::fs::copy(scratch.path().join(STORE), &elsewhere).expect("copy");
    std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let target_before = std::fs::read(&elsewhere).expect("read");
    // … reached through a symlink in the real $ODEK_HOME.
    let home = tempfile::tempdir().expect("tempdir");
    std::os::unix::fs::symlink(&elsewhere, home.path().join(STORE)).expect("symlink");

    let out = run_timeout(
        &mut run_cmd(&p, home.path(), &["sh", "-c", &p.marker_cmd()]),
        Duration::from_secs(60),
    );
    odek_e2e::assert_refused(&p, &out, "symlink");

    let s = spawn_tty(run_cmd(&p, home.path(), &["sh", "-c", &p.marker_cmd()]));
    let (text, code) = finish(s);
    assert_refused_on_tty(&p, &text, code, "symlink");
    assert!(
        std::fs::symlink_metadata(home.path().join(STORE))
            .expect("stat")
            .file_type()
            .is_symlink(),
        "the symlink was replaced"
    );
    assert_eq!(std::fs::read(&elsewhere).expect("read"), target_before);
}

#[test]
fn a_truncated_store_is_an_error_not_empty() {
    let p = project();
    let home = tempfile::tempdir().expect("tempdir");
    trust(&p, home.path());
    let store = home.path().join(STORE);
    let full = std::fs::read(&store).expect("read");
    let cut = &full[..full.len() / 2];
    std::fs::write(&store, cut).expect("truncate");

    let out = run_timeout(
        &mut run_cmd(&p, home.path(), &["sh", "-c", &p.marker_cmd()]),
        Duration::from_secs(60),
    );
    odek_e2e::assert_refused(&p, &out, "corrupt");
    assert!(stderr(&out).contains(STORE), "{}", stderr(&out));

    let s = spawn_tty(run_cmd(&p, home.path(), &["sh", "-c", &p.marker_cmd()]));
    let (text, code) = finish(s);
    assert_refused_on_tty(&p, &text, code, "corrupt");
    assert_eq!(
        std::fs::read(&store).expect("read"),
        cut,
        "the store was rewritten"
    );
}

#[test]
fn a_store_others_can_write_is_refused_but_0644_is_read() {
    let p = project();
    let home = tempfile::tempdir().expect("tempdir");
    trust(&p, home.path());
    let store = home.path().join(STORE);
    assert_eq!(mode(&store), 0o600);
    let bytes = std::fs::read(&store).expect("read");

    // 0644: readable by others, writable only by the owner — still trusted.
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let ok = run_timeout(
        run_cmd(&p, home.path(), &["redis-cli", "-h", "redis", "ping"]).stdin(Stdio::null()),
        Duration::from_secs(60),
    );
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    assert!(odek_e2e::stdout(&ok).contains("PONG"));
    assert!(p.leftovers().is_empty());

    // 0666: anyone could have forged the trust — refused, with and without
    // a terminal, and no prompt over it either.
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    let out = run_timeout(
        &mut run_cmd(&p, home.path(), &["sh", "-c", &p.marker_cmd()]),
        Duration::from_secs(60),
    );
    odek_e2e::assert_refused(&p, &out, "mode 0666");
    let s = spawn_tty(run_cmd(&p, home.path(), &["sh", "-c", &p.marker_cmd()]));
    let (text, code) = finish(s);
    assert_refused_on_tty(&p, &text, code, "mode 0666");
    assert_eq!(std::fs::read(&store).expect("read"), bytes);
    assert_eq!(mode(&store), 0o666, "odek silently changed the mode");
}

#[test]
fn sixteen_processes_trusting_at_once_lose_no_entry() {
    const N: usize = 16;
    let home = Arc::new(tempfile::tempdir().expect("tempdir"));
    let projects: Vec<Arc<Project>> = (0..N).map(|_| Arc::new(project())).collect();
    let barrier = Arc::new(Barrier::new(N));
    let t0 = Instant::now();
    let handles: Vec<_> = projects
        .iter()
        .map(|p| {
            let p = p.clone();
            let home = home.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let mut s = spawn_tty(run_cmd(&p, home.path(), &["true"]));
                let c = card(&mut s);
                // Everyone answers `t` at the same moment.
                barrier.wait();
                s.send_line("t").expect("answer t");
                let (out, code) = finish(s);
                (p.path().display().to_string(), c, out, code)
            })
        })
        .collect();
    let results: Vec<_> = handles
        .into_iter()
        .map(|h| h.join().expect("session thread"))
        .collect();
    eprintln!("16 concurrent trusted launches took {:?}", t0.elapsed());
    let mut reported = std::collections::BTreeMap::new();
    for (dir, c, out, code) in &results {
        assert!(
            c.contains("sandbox_compose_project") || c.contains(PROJECT),
            "{c}"
        );
        assert_eq!(code, &0, "{dir}:\n{out}");
        let key = reported_key(out).unwrap_or_else(|| panic!("{dir}: no key reported:\n{out}"));
        reported.insert(key, dir.clone());
    }
    assert_eq!(reported.len(), N, "keys are not distinct: {reported:?}");

    let store = home.path().join(STORE);
    let keys = store_keys(&store);
    assert_eq!(keys.len(), N, "entries lost: {keys:?}");
    for k in reported.keys() {
        assert_eq!(
            keys.get(k),
            Some(&serde_json::Value::Bool(true)),
            "{k} missing"
        );
    }
    assert_eq!(mode(&store), 0o600);
    assert_eq!(mode(home.path()), 0o700);
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(home.path().join(META)).expect("meta"))
            .expect("meta JSON");
    for (k, dir) in &reported {
        assert_eq!(
            meta[k]["project_dir"],
            serde_json::Value::String(dir.clone()),
            "{meta}"
        );
    }
    assert!(temp_leftovers(home.path()).is_empty());
    for p in &projects {
        assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
    }
}

fn chown(spec: &str, p: &Path, recursive: bool) {
    let mut c = Command::new("chown");
    if recursive {
        c.arg("-R");
    }
    let out = c.arg(spec).arg(p).output().expect("run chown");
    assert!(
        out.status.success(),
        "chown {spec} {}: {out:?}",
        p.display()
    );
}

/// Like ssh's StrictModes (SPEC §7.3): a trust in an `$ODEK_HOME` and store
/// another user owns — 0755 and 0644, as the defect was found — is never
/// honoured, with or without a terminal; nor in a store file alone that
/// another user owns.
#[test]
fn a_trust_in_a_home_and_store_another_user_owns_is_refused() {
    let p = project();
    let home = tempfile::tempdir().expect("tempdir");
    trust(&p, home.path());
    let store = home.path().join(STORE);
    let in_sandbox = ["touch", "/workspace/host-marker"];
    // Control: while the home is ours the trust runs the command, without a
    // terminal.
    let ok = run_timeout(
        run_cmd(&p, home.path(), &in_sandbox).stdin(Stdio::null()),
        Duration::from_secs(60),
    );
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    assert!(
        p.marker().exists(),
        "control: the trusted command did not run"
    );
    std::fs::remove_file(p.marker()).expect("rm marker");

    std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    chown("65534:65534", home.path(), true);
    let out = run_timeout(
        &mut run_cmd(&p, home.path(), &in_sandbox),
        Duration::from_secs(60),
    );
    odek_e2e::assert_refused(&p, &out, "belongs to uid 65534");
    assert!(
        stderr(&out).contains(&home.path().display().to_string()),
        "the message does not name the directory:\n{}",
        stderr(&out)
    );
    let s = spawn_tty(run_cmd(&p, home.path(), &in_sandbox));
    let (text, code) = finish(s);
    assert_refused_on_tty(&p, &text, code, "belongs to uid 65534");

    // The home ours again, the store file still another user's.
    chown("0:0", home.path(), false);
    std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let out = run_timeout(
        &mut run_cmd(&p, home.path(), &in_sandbox),
        Duration::from_secs(60),
    );
    odek_e2e::assert_refused(&p, &out, "belongs to uid 65534");
    assert!(
        stderr(&out).contains(&store.display().to_string()),
        "the message does not name the store:\n{}",
        stderr(&out)
    );
}
