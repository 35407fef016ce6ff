//! The approval store (SPEC §7.3): `$ODEK_HOME/project_sandbox_approvals.json`,
//! a JSON object `{ "<key>": true }` (the format of earlier releases).
//!
//! Directory 0700, file 0600; written atomically (temp file + fsync + rename)
//! under an exclusive lock on a sibling lock file, so concurrent processes lose
//! no entry. A failed write leaves the old file byte-identical. A corrupt
//! store, or one that is a symlink or not a regular file, is an error — never
//! treated as empty.
//!
//! Details (project directory, time) go to a sidecar
//! `project_sandbox_approvals.meta.json`, informational only: the store alone
//! decides trust.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::ApprovalError;

/// The store's file name under `$ODEK_HOME`.
pub(crate) const STORE_FILE: &str = "project_sandbox_approvals.json";
/// The sidecar with details per key.
pub const META_FILE: &str = "project_sandbox_approvals.meta.json";
const LOCK_FILE: &str = "project_sandbox_approvals.lock";
/// Largest store read (16 MiB).
const MAX_STORE_BYTES: u64 = 16 << 20;

/// Details kept for `odek approvals list`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    /// Absolute project directory.
    pub project_dir: String,
    /// Unix seconds when trusted.
    pub granted_at: u64,
    /// The knobs approved, e.g. `sandbox_compose_project, sandbox_env`.
    pub knobs: String,
    /// The engine the trust is bound to, as its key binds it (SPEC §7.3):
    /// `engine:<ID>` or `endpoint:<endpoint>`; empty for a trust recorded
    /// before odek kept it.
    #[serde(default)]
    pub engine: String,
}

/// The store under one `$ODEK_HOME`.
#[derive(Clone, Debug)]
pub struct Store {
    home: PathBuf,
}

fn err(path: &Path, reason: impl std::fmt::Display) -> ApprovalError {
    ApprovalError::Store {
        path: path.display().to_string(),
        reason: reason.to_string(),
    }
}

impl Store {
    /// The store in `home` (`$ODEK_HOME`). Nothing is touched yet.
    pub fn new(home: impl Into<PathBuf>) -> Store {
        Store { home: home.into() }
    }

    /// The store file.
    pub fn path(&self) -> PathBuf {
        self.home.join(STORE_FILE)
    }

    /// Reads the trusted keys. A missing store is empty; a corrupt one, a
    /// symlink or a non-regular file is an error.
    pub fn read(&self) -> Result<BTreeMap<String, bool>, ApprovalError> {
        read_store(&self.path())
    }

    /// True when `key` is trusted.
    pub fn contains(&self, key: &str) -> Result<bool, ApprovalError> {
        Ok(self.read()?.get(key) == Some(&true))
    }

    /// True when `key` is trusted and, when `binding` is given (project env
    /// values that read host variables), the trust was granted for exactly
    /// those templates: an entry `<key>:env:<binding>` sits beside the key.
    pub(crate) fn trusts(&self, key: &str, binding: Option<&str>) -> Result<bool, ApprovalError> {
        let all = self.read()?;
        let has = |k: &str| all.get(k) == Some(&true);
        Ok(has(key) && binding.is_none_or(|b| has(&binding_entry(key, b))))
    }

    /// The sidecar details, best effort for the approval card: as
    /// [`Store::checked_meta`], errors read as empty.
    pub fn meta(&self) -> BTreeMap<String, Meta> {
        self.checked_meta().unwrap_or_default()
    }

    /// The sidecar details (absent, unreadable or corrupt → empty: they are
    /// informational). Errors: the sidecar or `$ODEK_HOME` belongs to another
    /// non-root user or group or others can write it (SPEC §7.3): what it
    /// says could be another user's.
    pub fn checked_meta(&self) -> Result<BTreeMap<String, Meta>, ApprovalError> {
        let path = self.home.join(META_FILE);
        crate::ownership::check_private(&self.home)
            .map_err(|reason| in_dir(&path, &self.home, reason))?;
        crate::ownership::check_private(&path).map_err(|reason| err(&path, reason))?;
        Ok(std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default())
    }

    /// Adds `key` (trust) and, when given, its env-template binding,
    /// atomically and under the lock.
    pub(crate) fn trust(
        &self,
        key: &str,
        binding: Option<&str>,
        meta: Meta,
    ) -> Result<(), ApprovalError> {
        self.update(|store, metas| {
            store.insert(key.to_string(), true);
            if let Some(b) = binding {
                store.insert(binding_entry(key, b), true);
            }
            metas.insert(key.to_string(), meta);
        })
    }

    /// Removes keys (revoke) with their bindings; returns the keys that
    /// were present.
    pub fn revoke(&self, keys: &[String]) -> Result<Vec<String>, ApprovalError> {
        let mut removed = Vec::new();
        self.update(|store, metas| {
            for k in keys {
                if store.remove(k).is_some() {
                    removed.push(k.clone());
                }
                let prefix = format!("{k}:env:");
                store.retain(|e, _| !e.starts_with(&prefix));
                metas.remove(k);
            }
        })?;
        Ok(removed)
    }

    fn update(
        &self,
        change: impl FnOnce(&mut BTreeMap<String, bool>, &mut BTreeMap<String, Meta>),
    ) -> Result<(), ApprovalError> {
        self.update_with(change, &|f: &mut File, bytes: &[u8]| f.write_all(bytes))
    }

    /// As [`Store::update`] with the byte writer given (tests inject a full
    /// disk here).
    #[doc(hidden)]
    pub(crate) fn update_with(
        &self,
        change: impl FnOnce(&mut BTreeMap<String, bool>, &mut BTreeMap<String, Meta>),
        write: &dyn Fn(&mut File, &[u8]) -> io::Result<()>,
    ) -> Result<(), ApprovalError> {
        ensure_private_dir(&self.home)?;
        let lock_path = self.home.join(LOCK_FILE);
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&lock_path)
            .map_err(|e| err(&lock_path, format!("cannot open the lock file: {e}")))?;
        lock.lock()
            .map_err(|e| err(&lock_path, format!("cannot lock: {e}")))?;
        let path = self.path();
        let mut store = read_store(&path)?;
        let mut metas = self.checked_meta()?;
        change(&mut store, &mut metas);
        let bytes = serde_json::to_vec_pretty(&store).map_err(|e| err(&path, e))?;
        write_atomic(&self.home, &path, &bytes, write)?;
        // The sidecar is informational; failing to write it loses nothing.
        if let Ok(m) = serde_json::to_vec_pretty(&metas) {
            let _ = write_atomic(&self.home, &self.home.join(META_FILE), &m, &|f, b| {
                f.write_all(b)
            });
        }
        drop(lock);
        Ok(())
    }
}

/// The store entry binding a trust to env templates. Same `{ "...": true }`
/// format, so earlier releases read the file unchanged (they ignore it).
pub(crate) fn binding_entry(key: &str, binding: &str) -> String {
    format!("{key}:env:{binding}")
}

fn ensure_private_dir(dir: &Path) -> Result<(), ApprovalError> {
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.file_type().is_symlink() => {
            return Err(err(
                dir,
                "is a symlink; $ODEK_HOME must be a real directory",
            ))
        }
        Ok(m) if !m.is_dir() => return Err(err(dir, "is not a directory")),
        Ok(m) => {
            // Our own directory is made private; another user's is refused
            // below, untouched: a trust is never written into it.
            let ours = m.uid() == rustix::process::geteuid().as_raw() || m.uid() == 0;
            if ours && m.permissions().mode() & 0o077 != 0 {
                std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                    .map_err(|e| err(dir, format!("cannot make it private (0700): {e}")))?;
            }
            crate::ownership::check_private(dir)
                .map_err(|reason| in_dir(&dir.join(STORE_FILE), dir, reason))?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| err(dir, format!("cannot create it: {e}")))?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| err(dir, format!("cannot make it private (0700): {e}")))?;
        }
        Err(e) => return Err(err(dir, e)),
    }
    Ok(())
}

/// `path` refused because its directory failed
/// [`crate::ownership::check_private`] for `reason`.
fn in_dir(path: &Path, dir: &Path, reason: String) -> ApprovalError {
    err(
        path,
        format!("its directory {} {reason}", crate::text::shown(dir)),
    )
}

fn read_store(path: &Path) -> Result<BTreeMap<String, bool>, ApprovalError> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(err(path, e)),
    };
    if meta.file_type().is_symlink() {
        return Err(err(
            path,
            "is a symlink; refusing to trust it (remove it and approve again)",
        ));
    }
    if !meta.is_file() {
        return Err(err(path, "is not a regular file"));
    }
    // Another user's, or writable by group or others: anyone of them could
    // have forged a trust in it (or replaced it, through the directory).
    crate::ownership::check_private_meta(path, &meta).map_err(|reason| err(path, reason))?;
    if let Some(dir) = path.parent() {
        crate::ownership::check_private(dir).map_err(|reason| in_dir(path, dir, reason))?;
    }
    if meta.len() > MAX_STORE_BYTES {
        return Err(err(path, "is larger than 16 MiB"));
    }
    let bytes = std::fs::read(path).map_err(|e| err(path, e))?;
    let v: BTreeMap<String, serde_json::Value> = serde_json::from_slice(&bytes).map_err(|e| {
        err(
            path,
            format!("is corrupt ({e}); fix or remove it — it is never treated as empty"),
        )
    })?;
    let mut out = BTreeMap::new();
    for (k, v) in v {
        match v {
            serde_json::Value::Bool(b) => {
                out.insert(k, b);
            }
            other => {
                return Err(err(
                    path,
                    format!("is corrupt: the value of {k:?} is {other}, expected true"),
                ))
            }
        }
    }
    Ok(out)
}

/// Writes `bytes` to `target` via a 0600 temp file in `dir`, fsync, rename,
/// then fsyncs `dir`. On any failure `target` is untouched.
fn write_atomic(
    dir: &Path,
    target: &Path,
    bytes: &[u8],
    write: &dyn Fn(&mut File, &[u8]) -> io::Result<()>,
) -> Result<(), ApprovalError> {
    let mut tmp = tempfile::Builder::new()
        .prefix(".approvals-")
        .suffix(".tmp")
        .permissions(std::fs::Permissions::from_mode(0o600))
        .tempfile_in(dir)
        .map_err(|e| err(target, format!("cannot create a temp file: {e}")))?;
    write(tmp.as_file_mut(), bytes)
        .and_then(|_| tmp.as_file_mut().sync_all())
        .map_err(|e| {
            err(
                target,
                format!("cannot write (the old store is unchanged): {e}"),
            )
        })?;
    tmp.persist(target).map_err(|e| {
        err(
            target,
            format!(
                "cannot replace it (the old store is unchanged): {}",
                e.error
            ),
        )
    })?;
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> Meta {
        Meta {
            project_dir: "/p".into(),
            granted_at: 1,
            engine: "engine:TEST".into(),
            knobs: "sandbox_env".into(),
        }
    }

    #[test]
    fn trust_creates_private_dir_and_file_in_legacy_format() {
        let d = tempfile::tempdir().expect("tempdir");
        let home = d.path().join("home");
        let s = Store::new(&home);
        assert!(!s.contains("k1").expect("empty"));
        s.trust("k1", None, meta()).expect("trust");
        assert!(s.contains("k1").expect("read"));
        let mode = |p: &Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode(&home), 0o700);
        assert_eq!(mode(&s.path()), 0o600);
        let v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(s.path()).expect("read")).expect("json");
        assert_eq!(v, serde_json::json!({"k1": true}));
        assert_eq!(
            s.revoke(&["k1".into(), "nope".into()]).expect("revoke"),
            vec!["k1"]
        );
        assert!(!s.contains("k1").expect("read"));
    }

    #[test]
    fn a_store_others_could_write_is_refused() {
        let d = tempfile::tempdir().expect("tempdir");
        let p = d.path().join(STORE_FILE);
        std::fs::write(&p, r#"{"k": true}"#).expect("w");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).expect("chmod");
        let s = Store::new(d.path());
        let e = s.contains("k").expect_err("0666");
        assert!(e.to_string().contains("mode 0666"), "{e}");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        assert!(s.contains("k").expect("0644 is readable, not forgeable"));
        s.trust("j", None, meta()).expect("trust");
        let mode = std::fs::metadata(&p).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "a write makes it private again");
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o777)).expect("chmod");
        assert!(s
            .contains("k")
            .expect_err("dir 0777")
            .to_string()
            .contains("chmod go-w"));
    }

    #[test]
    fn existing_legacy_store_is_read() {
        let d = tempfile::tempdir().expect("tempdir");
        std::fs::write(d.path().join(STORE_FILE), r#"{"abc": true, "old": false}"#).expect("w");
        let s = Store::new(d.path());
        assert!(s.contains("abc").expect("read"));
        assert!(!s.contains("old").expect("read"));
    }

    #[test]
    fn corrupt_or_symlinked_store_is_an_error_not_empty() {
        for bad in [
            "",
            "{",
            "[]",
            r#"{"k": 1}"#,
            r#"{"k": "true"}"#,
            "null",
            "{\"k\":true}x",
        ] {
            let d = tempfile::tempdir().expect("tempdir");
            std::fs::write(d.path().join(STORE_FILE), bad).expect("w");
            let s = Store::new(d.path());
            let e = s.contains("k").expect_err(bad);
            assert!(e.to_string().contains("corrupt"), "{bad:?}: {e}");
            assert!(
                s.trust("k", None, meta()).is_err(),
                "{bad:?}: trust over a corrupt store"
            );
            assert_eq!(
                std::fs::read(d.path().join(STORE_FILE)).expect("r"),
                bad.as_bytes()
            );
        }
        let d = tempfile::tempdir().expect("tempdir");
        let real = d.path().join("elsewhere.json");
        std::fs::write(&real, r#"{"k": true}"#).expect("w");
        std::os::unix::fs::symlink(&real, d.path().join(STORE_FILE)).expect("symlink");
        let s = Store::new(d.path());
        assert!(s
            .contains("k")
            .expect_err("symlink")
            .to_string()
            .contains("symlink"));
        assert!(s.trust("j", None, meta()).is_err());
        assert_eq!(std::fs::read(&real).expect("r"), br#"{"k": true}"#);
    }

    #[test]
    fn failed_write_leaves_old_store_byte_identical() {
        let d = tempfile::tempdir().expect("tempdir");
        let s = Store::new(d.path());
        s.trust("old", None, meta()).expect("trust");
        let before = std::fs::read(s.path()).expect("read");
        let full = |f: &mut File, b: &[u8]| {
            f.write_all(&b[..b.len() / 2])?;
            Err(io::Error::from_raw_os_error(28)) // ENOSPC
        };
        let e = s
            .update_with(
                |st, _| {
                    st.insert("new".into(), true);
                },
                &full,
            )
            .expect_err("disk full");
        assert!(e.to_string().contains("unchanged"), "{e}");
        assert_eq!(std::fs::read(s.path()).expect("read"), before);
        assert!(!s.contains("new").expect("read"));
        let leftovers: Vec<_> = std::fs::read_dir(d.path())
            .expect("ls")
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "temp file left: {leftovers:?}");
    }

    /// Child half of `sixteen_processes_trust_concurrently`.
    #[test]
    fn concurrent_child() {
        let (Ok(home), Ok(key)) = (
            std::env::var("ODEK_STORE_CHILD_HOME"),
            std::env::var("ODEK_STORE_CHILD_KEY"),
        ) else {
            return; // only meaningful when spawned by the parent test
        };
        Store::new(home)
            .trust(&key, None, meta())
            .expect("child trust");
    }

    #[test]
    // A test spawning copies of its own test binary, not odek code.
    #[allow(clippy::disallowed_types, clippy::disallowed_methods)]
    fn sixteen_processes_trust_concurrently() {
        let d = tempfile::tempdir().expect("tempdir");
        let exe = std::env::current_exe().expect("exe");
        let children: Vec<_> = (0..16)
            .map(|i| {
                std::process::Command::new(&exe)
                    .args([
                        "--exact",
                        "approval::store::tests::concurrent_child",
                        "--test-threads",
                        "1",
                    ])
                    .env("ODEK_STORE_CHILD_HOME", d.path())
                    .env("ODEK_STORE_CHILD_KEY", format!("key{i:02}"))
                    .stdout(std::process::Stdio::null())
                    .spawn()
                    .expect("spawn")
            })
            .collect();
        for mut c in children {
            assert!(c.wait().expect("wait").success());
        }
        let s = Store::new(d.path());
        let all = s.read().expect("valid JSON");
        assert_eq!(all.len(), 16, "{all:?}");
        for i in 0..16 {
            assert_eq!(all.get(&format!("key{i:02}")), Some(&true));
        }
        let mode = std::fs::metadata(s.path())
            .expect("stat")
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600);
    }
}
