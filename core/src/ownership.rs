//! Who may have written odek's own files (SPEC §7.3): `$ODEK_HOME`, the
//! approval store and its sidecar, and the user config decide what a launch
//! may do, so, like ssh's `StrictModes`, each must belong to the current user
//! (effective uid) or root, and neither group nor others may write it.
//! Anything else could hold a trust or a setting another user planted.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

/// The operator's effective uid and gid: the process that calls odek (the
/// CLI, a binding's host process, `odek mcp`), whose user a sandbox runs as
/// by default (SPEC §6.1 "user").
pub(crate) fn operator_ids() -> (u32, u32) {
    (
        rustix::process::geteuid().as_raw(),
        rustix::process::getegid().as_raw(),
    )
}

/// Checks `path` (following symlinks; an absent path passes, as callers
/// treat it as empty) against the rules above.
///
/// Errors: what is wrong and the fix, as a phrase to follow the path in the
/// caller's message (`<what> <path> belongs to uid 1001, not to you (uid 0)
/// or root: …; … chown 0 <path>`): the path belongs to another non-root
/// user, group or others can write it, or its metadata cannot be read.
pub(crate) fn check_private(path: &Path) -> Result<(), String> {
    match std::fs::metadata(path) {
        Ok(meta) => check_private_meta(path, &meta),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!(
            "cannot be checked for its owner ({e}); make it readable by you"
        )),
    }
}

/// As [`check_private`] for metadata already read (e.g. from an open file,
/// so that what is checked is what is read).
pub(crate) fn check_private_meta(path: &Path, meta: &std::fs::Metadata) -> Result<(), String> {
    let me = euid();
    let owner = meta.uid();
    if !is_trusted_owner(owner) {
        return Err(format!(
            "belongs to uid {owner}, not to you (uid {me}) or root: another user could have written it, so it is not trusted; set ODEK_HOME to a directory of your own, or, if it is yours, check its contents and `chown {me} {p}`",
            p = shown(path)
        ));
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(format!(
            "has mode {mode:04o}: group or others can write it, so it is not trusted; check its contents, then `chmod go-w {p}`",
            p = shown(path)
        ));
    }
    Ok(())
}

/// The effective uid of this process.
pub(crate) fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// The ownership rule itself: `uid` is this process's effective uid or root.
pub(crate) fn is_trusted_owner(uid: u32) -> bool {
    uid == euid() || uid == 0
}

/// The login name of `uid` in `/etc/passwd`, if it has one there (users
/// known only to NSS, e.g. LDAP, have none here: callers show the uid).
pub(crate) fn user_name(uid: u32) -> Option<String> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let mut f = line.split(':');
        let name = f.next()?;
        let id: u32 = f.nth(1)?.parse().ok()?;
        (id == uid && !name.is_empty()).then(|| crate::text::shown(name))
    })
}

fn shown(path: &Path) -> String {
    crate::text::shown(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn chmod(p: &Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    #[test]
    fn own_files_pass_and_absent_ones_too() {
        let d = tempfile::tempdir().expect("tempdir");
        chmod(d.path(), 0o755);
        let f = d.path().join("f.json");
        std::fs::write(&f, b"{}").expect("write");
        chmod(&f, 0o644);
        check_private(d.path()).expect("own directory 0755");
        check_private(&f).expect("own file 0644");
        check_private(&d.path().join("absent")).expect("absent");
    }

    #[test]
    fn group_or_other_writable_is_refused() {
        let d = tempfile::tempdir().expect("tempdir");
        let f = d.path().join("f.json");
        std::fs::write(&f, b"{}").expect("write");
        for mode in [0o664, 0o646, 0o666] {
            chmod(&f, mode);
            let e = check_private(&f).expect_err("writable by others");
            assert!(
                e.contains(&format!("has mode {mode:04o}")) && e.contains("chmod go-w"),
                "{e}"
            );
        }
        chmod(d.path(), 0o777);
        let e = check_private(d.path()).expect_err("world-writable dir");
        assert!(e.starts_with("has mode 0777"), "{e}");
    }

    #[test]
    fn user_names_come_from_etc_passwd() {
        assert_eq!(user_name(0).as_deref(), Some("root"));
        assert_eq!(user_name(4_000_000_000), None);
        assert!(is_trusted_owner(0) && is_trusted_owner(euid()));
        assert!(!is_trusted_owner(4_000_000_000));
    }

    #[test]
    fn another_users_files_are_refused_roots_accepted() {
        let me = rustix::process::geteuid();
        if !me.is_root() {
            // Only root can give a file away; the e2e suite runs as root.
            return;
        }
        let d = tempfile::tempdir().expect("tempdir");
        let f = d.path().join("f.json");
        std::fs::write(&f, b"{}").expect("write");
        chmod(&f, 0o644);
        check_private(&f).expect("root-owned");
        let nobody = rustix::fs::Uid::from_raw(65534);
        rustix::fs::chown(&f, Some(nobody), None).expect("chown");
        let e = check_private(&f).expect_err("owned by uid 65534");
        assert!(
            e.starts_with("belongs to uid 65534")
                && e.contains(&format!("chown 0 {}", f.display())),
            "{e}"
        );
        rustix::fs::chown(d.path(), Some(nobody), None).expect("chown");
        let e = check_private(d.path()).expect_err("dir owned by 65534");
        assert!(e.starts_with("belongs to uid 65534"), "{e}");
        // Through a symlink the target is what counts.
        let link = tempfile::tempdir().expect("tempdir");
        let l = link.path().join("home");
        std::os::unix::fs::symlink(d.path(), &l).expect("symlink");
        check_private(&l).expect_err("target owned by 65534");
    }
}
