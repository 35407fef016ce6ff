//! The per-user launch key: a random 256-bit key in `$ODEK_HOME/launch.key`
//! (file 0600 in a 0700 directory, owned by the current user) that odek uses
//! to mark what it creates — sandbox containers (the [`crate::labels::MAC`]
//! label) and images built from `Dockerfile.odek` — with an HMAC-SHA256 over
//! what they claim.
//!
//! Labels are data anyone who can create a container can write: a Compose
//! file can give its services `dev.odek.*` labels. A mark made with a key only
//! this user's odek can read tells odek's own sandboxes from forged ones, so
//! `gc` never removes, and `exec`/`describe` never trust, a container this
//! user's odek did not create (SPEC §6.1 labels; docs/SECURITY.md "Forged
//! labels").

use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use hmac::{Hmac, Mac};
use rand::Rng;
use sha2::Sha256;

/// File name of the key inside `$ODEK_HOME`.
pub(crate) const KEY_FILE: &str = "launch.key";

/// Bytes of the key.
const KEY_BYTES: usize = 32;

/// Why the key cannot be used. Class config: the fix is on the operator's side.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[error("launch key {}: {reason}", crate::text::shown(.path))]
pub struct SecretError {
    /// The file (or directory).
    pub path: String,
    /// What is wrong, with the fix.
    pub reason: String,
}

fn fail(path: &Path, reason: impl std::fmt::Display) -> SecretError {
    SecretError {
        path: path.display().to_string(),
        reason: reason.to_string(),
    }
}

/// The launch key of one `$ODEK_HOME`.
#[derive(Clone)]
pub struct Secret {
    key: [u8; KEY_BYTES],
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Secret {
    /// The key of `odek_home`, created (0600, in a 0700 directory) when
    /// absent. Errors: the directory or file is a symlink, not owned by the
    /// current user or root, writable by group or others, malformed, or
    /// cannot be created.
    pub fn load_or_create(odek_home: &Path) -> Result<Secret, SecretError> {
        if let Some(s) = Secret::load(odek_home)? {
            return Ok(s);
        }
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(odek_home)
            .map_err(|e| fail(odek_home, format!("cannot create the directory: {e}")))?;
        check_dir(odek_home)?;
        let path = odek_home.join(KEY_FILE);
        let key: [u8; KEY_BYTES] = rand::rng().random();
        // Written under a temporary name and linked into place: a racing
        // odek either wins (and both use its key) or loses and reads it.
        let mut tmp = tempfile::Builder::new()
            .prefix(".launch-key-")
            .permissions(std::fs::Permissions::from_mode(0o600))
            .tempfile_in(odek_home)
            .map_err(|e| fail(&path, format!("cannot create a temp file: {e}")))?;
        tmp.write_all(hex::encode(key).as_bytes())
            .and_then(|_| tmp.as_file().sync_all())
            .map_err(|e| fail(&path, format!("cannot write: {e}")))?;
        match tmp.persist_noclobber(&path) {
            Ok(_) => Ok(Secret { key }),
            Err(e) if e.error.kind() == io::ErrorKind::AlreadyExists => Secret::load(odek_home)?
                .ok_or_else(|| fail(&path, "vanished right after another odek created it")),
            Err(e) => Err(fail(&path, format!("cannot create: {}", e.error))),
        }
    }

    /// The key of `odek_home`, or `None` when there is none yet (then nothing
    /// was marked with it). Errors as [`Secret::load_or_create`].
    pub fn load(odek_home: &Path) -> Result<Option<Secret>, SecretError> {
        let path = odek_home.join(KEY_FILE);
        match std::fs::symlink_metadata(odek_home) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(fail(odek_home, e)),
            Ok(_) => check_dir(odek_home)?,
        }
        let mut file = match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(fail(
                    &path,
                    format!("cannot open (a symlink is refused): {e}"),
                ))
            }
        };
        let meta = file.metadata().map_err(|e| fail(&path, e))?;
        if !meta.is_file() {
            return Err(fail(&path, "is not a regular file; remove it"));
        }
        crate::ownership::check_private_meta(&path, &meta).map_err(|r| fail(&path, r))?;
        if meta.permissions().mode() & 0o077 != 0 {
            return Err(fail(
                &path,
                "can be read by group or others; `chmod 600` it (or remove it: a new key is made, and sandboxes marked with the old one are no longer recognised)",
            ));
        }
        let mut text = String::new();
        Read::by_ref(&mut file)
            .take(1024)
            .read_to_string(&mut text)
            .map_err(|e| fail(&path, e))?;
        let bytes = hex::decode(text.trim())
            .ok()
            .filter(|b| b.len() == KEY_BYTES)
            .ok_or_else(|| {
                fail(
                    &path,
                    "is malformed (expected 64 hex digits); remove it to make a new key",
                )
            })?;
        let mut key = [0u8; KEY_BYTES];
        key.copy_from_slice(&bytes);
        Ok(Some(Secret { key }))
    }

    /// HMAC-SHA256 (lowercase hex) of `parts` under `domain`. Each part is
    /// length-prefixed, so no two different part lists give the same input.
    pub fn mac(&self, domain: &str, parts: &[&[u8]]) -> String {
        hex::encode(self.hmac(domain, parts).finalize().into_bytes())
    }

    /// True when `mac_hex` is the MAC of `parts` under `domain` (compared in
    /// constant time).
    pub fn verify(&self, domain: &str, parts: &[&[u8]], mac_hex: &str) -> bool {
        match hex::decode(mac_hex) {
            Ok(tag) => self.hmac(domain, parts).verify_slice(&tag).is_ok(),
            Err(_) => false,
        }
    }

    fn hmac(&self, domain: &str, parts: &[&[u8]]) -> Hmac<Sha256> {
        let mut m = <Hmac<Sha256> as Mac>::new_from_slice(&self.key)
            .expect("HMAC takes keys of any length");
        m.update(&(domain.len() as u64).to_be_bytes());
        m.update(domain.as_bytes());
        for p in parts {
            m.update(&(p.len() as u64).to_be_bytes());
            m.update(p);
        }
        m
    }
}

/// `$ODEK_HOME` itself: a real directory of the current user or root that
/// group and others cannot write.
fn check_dir(dir: &Path) -> Result<(), SecretError> {
    let meta = std::fs::symlink_metadata(dir).map_err(|e| fail(dir, e))?;
    if meta.file_type().is_symlink() {
        return Err(fail(
            dir,
            "is a symlink; $ODEK_HOME must be a real directory",
        ));
    }
    if !meta.is_dir() {
        return Err(fail(dir, "is not a directory"));
    }
    crate::ownership::check_private_meta(dir, &meta).map_err(|r| fail(dir, r))
}

/// The key file's path for `odek_home`.
pub fn key_path(odek_home: &Path) -> PathBuf {
    odek_home.join(KEY_FILE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_once_private_and_stable() {
        let d = tempfile::tempdir().expect("tempdir");
        let home = d.path().join("home");
        assert!(Secret::load(&home).expect("absent is fine").is_none());
        let a = Secret::load_or_create(&home).expect("create");
        let b = Secret::load_or_create(&home).expect("load");
        let mode = |p: &Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode(&home), 0o700);
        assert_eq!(mode(&key_path(&home)), 0o600);
        let m = a.mac("odek.test/1", &[b"x", b"y"]);
        assert_eq!(m, b.mac("odek.test/1", &[b"x", b"y"]));
        assert!(b.verify("odek.test/1", &[b"x", b"y"], &m));
        assert!(!b.verify("odek.test/1", &[b"xy"], &m), "parts are framed");
        assert!(
            !b.verify("odek.test/2", &[b"x", b"y"], &m),
            "domains differ"
        );
        assert!(!b.verify("odek.test/1", &[b"x", b"y"], "zz"));
        let other = tempfile::tempdir().expect("tempdir");
        let c = Secret::load_or_create(other.path()).expect("create");
        assert!(
            !c.verify("odek.test/1", &[b"x", b"y"], &m),
            "another home's key"
        );
    }

    #[test]
    fn unsafe_key_files_are_refused() {
        let d = tempfile::tempdir().expect("tempdir");
        let home = d.path();
        std::fs::set_permissions(home, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        Secret::load_or_create(home).expect("create");
        let key = key_path(home);
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let e = Secret::load(home).expect_err("world-readable key");
        assert!(e.reason.contains("chmod 600"), "{e}");
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        std::fs::set_permissions(home, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let e = Secret::load(home).expect_err("world-writable home");
        assert!(e.reason.contains("chmod go-w"), "{e}");
        std::fs::set_permissions(home, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        std::fs::remove_file(&key).expect("rm");
        std::os::unix::fs::symlink("/etc/hostname", &key).expect("symlink");
        assert!(Secret::load(home).is_err(), "a symlinked key is refused");
        std::fs::remove_file(&key).expect("rm");
        std::fs::write(&key, "not hex").expect("write");
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        assert!(Secret::load(home)
            .expect_err("malformed")
            .reason
            .contains("malformed"));
        if rustix::process::geteuid().is_root() {
            std::fs::remove_file(&key).expect("rm");
            Secret::load_or_create(home).expect("create");
            rustix::fs::chown(&key, Some(rustix::fs::Uid::from_raw(65534)), None).expect("chown");
            let e = Secret::load(home).expect_err("another user's key");
            assert!(e.reason.contains("uid 65534"), "{e}");
        }
    }
}
