//! The claim records of warm pools (docs/SANDBOXING.md, "The warm pool"):
//! one file per pooled sandbox that was taken, under
//! `$ODEK_HOME/pool/claimed/`, named by its container ID. A pooled sandbox
//! keeps its `dev.odek.pool` label once handed over (labels cannot change);
//! the record is what tells a claimed one from a ready one to `odek sandbox
//! ls` and `odek pool down`, from any process of the same user.
//!
//! The record is also the lock between a claim and `odek pool down`, which
//! may run in another process: each takes a sandbox by creating its record,
//! atomically and only if there is none ([`take`]: `O_EXCL`; [`take_down`]:
//! a hard link, which carries its content [`DOWN`] from the first instant).
//! A claim takes it before its re-check and hands it over only when it won;
//! pool down removes only those it won. So a sandbox is removed by pool
//! down or handed to one claim, never both. A leaf: it knows only paths.

use std::path::{Path, PathBuf};

/// `$ODEK_HOME/pool/claimed`.
fn dir(odek_home: &Path) -> PathBuf {
    odek_home.join("pool").join("claimed")
}

/// True for a full container ID's shape (hex digits only), the one name a
/// record may have.
fn is_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 128 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The content of a record written by `odek pool down` ([`take_down`]): the
/// sandbox is being removed, not claimed. A claim's record is empty.
const DOWN: &[u8] = b"down";

/// Who holds a pooled sandbox's record when [`take`] or [`take_down`] found
/// one there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Taken {
    /// This call created the record: the sandbox is the caller's.
    Won,
    /// A record was there already (a claim, or `odek pool down`).
    Lost,
    /// No record could be written (the error was logged): nothing is
    /// known about the others.
    Unrecorded,
}

/// Takes the pooled sandbox `name` (container `id`) for a claim: creates
/// its (empty) record unless one exists. [`Taken::Lost`]: `odek pool down`
/// took it first (it is being removed; the claim must not hand it over).
/// [`Taken::Unrecorded`] (logged): the claim may go on, but `odek pool
/// down` cannot take the record either ([`take_down`]), so it leaves the
/// sandbox alone.
pub(crate) fn take(odek_home: &Path, id: &str, name: &str) -> Taken {
    if !is_id(id) {
        return Taken::Unrecorded;
    }
    let d = dir(odek_home);
    let created = std::fs::create_dir_all(&d).and_then(|()| {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(d.join(id))
    });
    match created {
        Ok(_) => Taken::Won,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Taken::Lost,
        Err(e) => {
            tracing::warn!(sandbox = %name, "the claim of a pooled sandbox could not be recorded: {e}");
            Taken::Unrecorded
        }
    }
}

/// Takes the ready pooled sandbox with container ID `id` for `odek pool
/// down`: creates its record with content [`DOWN`] unless one exists (a
/// file written aside, then hard-linked in: the link fails if a record is
/// there, and a reader never sees it half written). Only [`Taken::Won`]
/// allows the removal; [`Taken::Lost`]: a claim took it (or another pool
/// down); [`Taken::Unrecorded`]: none could be written, so a claim may
/// hold it unrecorded.
pub(crate) fn take_down(odek_home: &Path, id: &str) -> Taken {
    if !is_id(id) {
        return Taken::Unrecorded;
    }
    let d = dir(odek_home);
    let aside = d.join(format!(".down-{id}-{}", std::process::id()));
    let linked = std::fs::create_dir_all(&d)
        .and_then(|()| std::fs::write(&aside, DOWN))
        .and_then(|()| std::fs::hard_link(&aside, d.join(id)));
    let _ = std::fs::remove_file(&aside);
    match linked {
        Ok(()) => Taken::Won,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Taken::Lost,
        Err(e) => {
            tracing::warn!(container = %id, "odek pool down could not record its removal of a pooled sandbox (left alone): {e}");
            Taken::Unrecorded
        }
    }
}

/// Removes the record of container `id`, once it is gone (`odek pool
/// down` after its removal).
pub(crate) fn forget(odek_home: &Path, id: &str) {
    if is_id(id) {
        let _ = std::fs::remove_file(dir(odek_home).join(id));
    }
}

/// True when the pooled sandbox with container ID `id` was handed over by
/// its owner's pool, or is being taken by a claim (a record under
/// `odek_home` that is not `odek pool down`'s).
pub fn claimed(odek_home: &Path, id: &str) -> bool {
    if !is_id(id) {
        return false;
    }
    match std::fs::read(dir(odek_home).join(id)) {
        Ok(content) => content != DOWN,
        Err(e) => e.kind() != std::io::ErrorKind::NotFound,
    }
}

/// Removes the records of `odek_home` whose container is not among `live`
/// (container IDs), listed at `listed`: gc and `odek pool down` call it
/// after they listed. A record written after `listed` stays (a sandbox
/// launched and claimed since the listing).
pub(crate) fn prune(odek_home: &Path, live: &[&str], listed: std::time::SystemTime) {
    let Ok(entries) = std::fs::read_dir(dir(odek_home)) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        // Another pool down's file written aside: it removes its own.
        if name.to_string_lossy().starts_with('.') {
            continue;
        }
        let newer = e
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| t >= listed);
        if !newer && !live.iter().any(|id| name == *id) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "0123abcd";

    #[test]
    fn a_claim_and_pool_down_never_both_take_a_sandbox() {
        // The claim first: pool down loses, the sandbox reads as claimed.
        let home = tempfile::tempdir().expect("tempdir");
        assert_eq!(take(home.path(), ID, "sb"), Taken::Won);
        assert!(claimed(home.path(), ID));
        assert_eq!(take_down(home.path(), ID), Taken::Lost);
        assert_eq!(take(home.path(), ID, "sb"), Taken::Lost, "taken once");
        assert!(claimed(home.path(), ID));
        // Pool down first: the claim loses, the sandbox never reads as
        // claimed, and nothing is left aside.
        let home = tempfile::tempdir().expect("tempdir");
        assert_eq!(take_down(home.path(), ID), Taken::Won);
        assert!(!claimed(home.path(), ID));
        assert_eq!(take(home.path(), ID, "sb"), Taken::Lost);
        assert_eq!(take_down(home.path(), ID), Taken::Lost);
        let names: Vec<_> = std::fs::read_dir(dir(home.path()))
            .expect("dir")
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names, [ID]);
        prune(
            home.path(),
            &[],
            std::time::SystemTime::now() + std::time::Duration::from_secs(60),
        );
        assert_eq!(take(home.path(), ID, "sb"), Taken::Won, "pruned");
    }

    #[test]
    fn no_record_is_taken_for_a_name_that_is_no_id() {
        let home = tempfile::tempdir().expect("tempdir");
        assert_eq!(take(home.path(), "../x", "sb"), Taken::Unrecorded);
        assert_eq!(take_down(home.path(), "../x"), Taken::Unrecorded);
    }
}
