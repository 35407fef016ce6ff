//! Who runs odek in a test: root, or a normal user in the `docker` group.
//!
//! Most operators are not root, and a suite that only ever runs as root hides
//! what fails for them (a `/workspace` the sandbox cannot write, a socket or
//! a file it may not use). Tests that touch files, users and sockets run once
//! per [`operators`]: as root, and as [`TEST_USER`], a system user the
//! harness creates (with `useradd`, when the suite runs as root) in the
//! `docker` group. A suite run by a normal user runs the non-root cases as
//! that user and says that the root cases did not run.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The non-root operator the harness creates (when the suite runs as root).
pub const TEST_USER: &str = "odek-e2e";

/// Who runs odek.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operator {
    /// uid 0 (the suite's own identity when it runs as root).
    Root,
    /// A normal user in the `docker` group: [`TEST_USER`] when the suite runs
    /// as root, else the suite's own user.
    User,
}

/// A local account: name, ids and home directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Account {
    /// Login name.
    pub name: String,
    /// uid.
    pub uid: u32,
    /// Primary gid.
    pub gid: u32,
    /// Home directory.
    pub home: PathBuf,
}

/// The suite's effective uid.
pub fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// The operators a test runs as: both when the suite runs as root; only
/// [`Operator::User`] otherwise (a note on stderr says the root cases did
/// not run: they cannot, and must not pass silently as if they had).
pub fn operators() -> Vec<Operator> {
    if euid() == 0 {
        vec![Operator::Root, Operator::User]
    } else {
        static SAID: OnceLock<()> = OnceLock::new();
        SAID.get_or_init(|| {
            eprintln!(
                "note: the suite runs as uid {}: the root-operator cases are not run (CI runs them as root)",
                euid()
            )
        });
        vec![Operator::User]
    }
}

/// `getent passwd NAME` → the account, if it exists.
fn lookup(name: &str) -> Option<Account> {
    let out = Command::new("getent")
        .args(["passwd", name])
        .output()
        .ok()?;
    let line = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let f: Vec<&str> = line.split(':').collect();
    if !out.status.success() || f.len() < 7 {
        return None;
    }
    Some(Account {
        name: f[0].to_string(),
        uid: f[2].parse().ok()?,
        gid: f[3].parse().ok()?,
        home: PathBuf::from(f[5]),
    })
}

/// The non-root account: [`TEST_USER`] (created in the `docker` group when
/// missing; the suite runs as root) or, for a non-root suite, its own user.
///
/// # Panics
/// When the account cannot be created, or is not in the `docker` group
/// (the fix is named).
pub fn user_account() -> &'static Account {
    static ACCOUNT: OnceLock<Account> = OnceLock::new();
    ACCOUNT.get_or_init(|| {
        if euid() != 0 {
            let me = euid();
            let name = crate::stdout(&crate::run(Command::new("id").arg("-un")))
                .trim()
                .to_string();
            let mut a = lookup(&name).unwrap_or_else(|| panic!("no passwd entry for uid {me}"));
            a.uid = me;
            return a;
        }
        if lookup(TEST_USER).is_none() {
            let out = crate::run(Command::new("useradd").args([
                "--system",
                "--create-home",
                "--shell",
                "/bin/sh",
                "--groups",
                "docker",
                TEST_USER,
            ]));
            // A concurrent test process may have created it meanwhile.
            assert!(
                out.status.success() || lookup(TEST_USER).is_some(),
                "useradd {TEST_USER} failed: {}",
                crate::stderr(&out)
            );
        }
        let a = lookup(TEST_USER).expect("the test user exists");
        let groups = crate::stdout(&crate::run(Command::new("id").args(["-nG", TEST_USER])));
        assert!(
            groups.split_whitespace().any(|g| g == "docker"),
            "{TEST_USER} is not in the docker group ({groups}); fix: usermod -aG docker {TEST_USER}"
        );
        a
    })
}

impl Operator {
    /// The operator's uid.
    pub fn uid(self) -> u32 {
        match self {
            Operator::Root => 0,
            Operator::User => user_account().uid,
        }
    }

    /// The operator's primary gid.
    pub fn gid(self) -> u32 {
        match self {
            Operator::Root => 0,
            Operator::User => user_account().gid,
        }
    }

    /// True when commands for this operator must change identity (the suite
    /// runs as root, the operator is the test user).
    fn switches(self) -> bool {
        self == Operator::User && euid() == 0
    }

    /// Makes `path` (a directory the test created) the operator's own.
    pub fn own(self, path: &Path) {
        if self.switches() {
            std::os::unix::fs::chown(path, Some(self.uid()), Some(self.gid()))
                .unwrap_or_else(|e| panic!("chown {}: {e}", path.display()));
        }
    }

    /// `cmd` as this operator would run it: unchanged for the suite's own
    /// identity; otherwise under `setpriv` with the user's uid, gid and
    /// groups (so the `docker` group), `HOME`, `USER` and `LOGNAME`, and the
    /// same program, arguments, environment changes and directory.
    pub fn command(self, cmd: Command) -> Command {
        if !self.switches() {
            return cmd;
        }
        let a = user_account();
        let mut c = Command::new("setpriv");
        c.arg(format!("--reuid={}", a.uid))
            .arg(format!("--regid={}", a.gid))
            .arg("--init-groups")
            .arg("--")
            .arg(reachable(Path::new(cmd.get_program())))
            .args(cmd.get_args());
        c.env("HOME", &a.home)
            .env("USER", &a.name)
            .env("LOGNAME", &a.name)
            .env_remove("XDG_RUNTIME_DIR");
        for (k, v) in cmd.get_envs() {
            match v {
                // odek reads the supervisor binary as the operator.
                Some(v) if k == "ODEK_SUPERVISOR" && !v.is_empty() => {
                    c.env(k, reachable(Path::new(v)))
                }
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        if let Some(sup) = crate::supervisor_env().filter(|s| !s.is_empty()) {
            if !cmd.get_envs().any(|(k, _)| k == "ODEK_SUPERVISOR") {
                c.env("ODEK_SUPERVISOR", reachable(Path::new(&sup)));
            }
        }
        if let Some(d) = cmd.get_current_dir() {
            c.current_dir(d);
        }
        c
    }
}

/// `program` if the test user can execute it where it is; else a copy in a
/// directory the user can reach (a checkout under `/root` is not).
fn reachable(program: &Path) -> PathBuf {
    if !program.is_absolute() {
        return program.to_path_buf();
    }
    let a = user_account();
    let ok = Command::new("setpriv")
        .arg(format!("--reuid={}", a.uid))
        .arg(format!("--regid={}", a.gid))
        .arg("--init-groups")
        .args(["--", "test", "-x"])
        .arg(program)
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        return program.to_path_buf();
    }
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let d = tempfile::Builder::new()
            .prefix("odek-e2e-bin-")
            .tempdir()
            .expect("tempdir for binaries");
        std::fs::set_permissions(
            d.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .expect("chmod");
        d
    });
    let name = program.file_name().expect("a program file name");
    let copy = dir.path().join(name);
    if !copy.exists() {
        std::fs::copy(program, &copy)
            .unwrap_or_else(|e| panic!("copy {} for {TEST_USER}: {e}", program.display()));
    }
    copy
}
