//! The working directory and the volumes, checked again at use (SPEC §3.4,
//! §6.1).
//!
//! Resolve validates the working directory and each volume, and records the
//! working directory's identity (device and inode, [`FileId`]); Docker then
//! mounts them by path, after the approval prompt and a pull or build that
//! can take minutes. Anyone who can write the parent directory (an agent in
//! another sandbox, the repository's own scripts) can swap the path for a
//! symlink to a directory odek refuses, or for another directory, in
//! between. So the same checks run again when the plan is used
//! ([`check_at_use`]: at the start of a launch — also for plans that crossed
//! the C ABI or were read back from a parent's label — and right before
//! create), each path walked from `/` without following a symlink, and the
//! working directory must still be the directory resolve recorded. What the
//! runtime finally mounted is read back from the kernel after start
//! ([`crate::mounts`]).

use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::{resolve_volume, validate_workdir, ConfigError};
use crate::plan::Plan;
use crate::text::quote;

/// A file's identity: device and inode number (`st_dev`, `st_ino`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FileId {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
}

impl FileId {
    /// The identity in `meta`.
    pub fn of(meta: &std::fs::Metadata) -> FileId {
        FileId {
            dev: meta.dev(),
            ino: meta.ino(),
        }
    }
}

/// Walks `path` from `/` with `lstat`, one component at a time: it must be
/// absolute, without `.` or `..`, no component may be a symbolic link, and
/// it must exist. Returns the metadata of the last component. `Err` is the
/// reason, naming the first offending component (quoted).
pub fn walk_no_symlink(path: &Path) -> Result<std::fs::Metadata, String> {
    if !path.is_absolute() {
        return Err("it is not an absolute path".into());
    }
    let mut current = PathBuf::from("/");
    let mut last =
        std::fs::symlink_metadata(&current).map_err(|e| format!("cannot inspect /: {e}"))?;
    for c in path.components() {
        match c {
            Component::RootDir => continue,
            Component::Normal(n) => current.push(n),
            _ => return Err("it has a '.' or '..' component".into()),
        }
        let shown = quote(&current.display().to_string());
        last = match std::fs::symlink_metadata(&current) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = std::fs::read_link(&current)
                    .map(|t| format!(" (to {})", quote(&t.display().to_string())))
                    .unwrap_or_default();
                return Err(format!("{shown} is a symbolic link{to}"));
            }
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(format!("{shown} does not exist"))
            }
            Err(e) => return Err(format!("cannot inspect {shown}: {e}")),
        };
    }
    Ok(last)
}

/// The identity of the working directory `workdir` (absolute, canonical),
/// walked without following symlinks ([`walk_no_symlink`]).
///
/// # Errors
/// [`ConfigError::Workdir`]: a component is a symlink, missing, or the path
/// is not a directory.
pub fn identify(workdir: &Path) -> Result<FileId, ConfigError> {
    let fail = |reason: String| ConfigError::Workdir {
        path: workdir.to_path_buf(),
        reason: format!("{reason}; pass the project directory itself with -C DIR"),
    };
    let meta = walk_no_symlink(workdir).map_err(fail)?;
    if !meta.is_dir() {
        return Err(fail("is not a directory".into()));
    }
    Ok(FileId::of(&meta))
}

/// Checks that `workdir` still is the directory `want` (after a validation
/// that read it by path).
///
/// # Errors
/// [`ConfigError::Workdir`] saying that it changed while being checked.
pub fn still(workdir: &Path, want: FileId) -> Result<(), ConfigError> {
    match identify(workdir) {
        Ok(id) if id == want => Ok(()),
        Ok(_) => Err(ConfigError::Workdir {
            path: workdir.to_path_buf(),
            reason: "was replaced by another directory while it was being checked; run odek again"
                .into(),
        }),
        Err(e) => Err(e),
    }
}

/// The refusal of a working directory that is not what was resolved.
fn changed(workdir: &Path, what: &str) -> ConfigError {
    ConfigError::Workdir {
        path: workdir.to_path_buf(),
        reason: format!(
            "changed since it was resolved and approved: {what}; nothing was created; run odek again from the real project directory"
        ),
    }
}

/// Checks a plan's working directory and volumes against the file system
/// now (SPEC §3.4), at the start of a launch: [`check_paths`], then every
/// working-directory rule again ([`validate_workdir`], with `$HOME` of this
/// process; it reads the directory by path, so its identity is compared once
/// more afterwards).
///
/// # Errors
/// [`ConfigError::Workdir`] ("changed since it was resolved and approved: …"
/// or the rule it breaks now) or [`ConfigError::InvalidVolume`]; class
/// config, raised before anything is created.
pub fn check_at_use(plan: &Plan) -> Result<(), ConfigError> {
    check_paths(plan)?;
    let home = std::env::var_os("HOME").map(PathBuf::from);
    validate_workdir(&plan.workdir, home.as_deref())?;
    if let Some(want) = plan.workdir_id {
        still(&plan.workdir, want)?;
    }
    Ok(())
}

/// The path checks of [`check_at_use`], cheap enough to repeat right before
/// create: the working directory walked from `/` without a symlink and still
/// the directory resolve recorded (`plan.workdir_id`, when the plan has one:
/// plans of earlier releases and hand-written ones do not); each volume
/// resolving (symlink-free, inside the working directory, not sensitive) to
/// the planned host path. The rules about the directory's contents
/// (sockets) are [`check_at_use`]'s: a directory that is still the one
/// checked there is not walked again.
///
/// # Errors
/// As [`check_at_use`].
pub fn check_paths(plan: &Plan) -> Result<(), ConfigError> {
    let workdir = &plan.workdir;
    let meta = walk_no_symlink(workdir).map_err(|r| changed(workdir, &r))?;
    if !meta.is_dir() {
        return Err(changed(workdir, "it is no longer a directory"));
    }
    if let Some(want) = plan.workdir_id {
        let now = FileId::of(&meta);
        if now != want {
            return Err(changed(
                workdir,
                &format!(
                    "the path now holds another directory (device {} inode {}, resolved: device {} inode {})",
                    now.dev, now.ino, want.dev, want.ino
                ),
            ));
        }
    }
    for v in &plan.volumes {
        let again = resolve_volume("plan", &v.spec, workdir)?;
        if again.host != v.host || again.container != v.container || again.read_only != v.read_only
        {
            return Err(ConfigError::InvalidVolume {
                origin: "plan".into(),
                value: quote(&v.spec),
                reason: format!(
                    "it now resolves to {}, not to the planned {}: it changed since it was resolved and approved; run odek again",
                    quote(&again.host.display().to_string()),
                    quote(&v.host.display().to_string())
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_walk_refuses_symlinks_dots_and_missing_parts() {
        let d = tempfile::tempdir().expect("tempdir");
        let root = d.path().canonicalize().expect("canonical");
        let real = root.join("real");
        std::fs::create_dir(&real).expect("mkdir");
        std::os::unix::fs::symlink(&real, root.join("link")).expect("symlink");
        assert!(walk_no_symlink(&real).expect("plain").is_dir());
        let e = walk_no_symlink(&root.join("link/x")).expect_err("symlink");
        assert!(e.contains("is a symbolic link (to "), "{e}");
        assert!(walk_no_symlink(&root.join("real/../real")).is_err());
        assert!(walk_no_symlink(Path::new("relative")).is_err());
        let e = walk_no_symlink(&root.join("gone")).expect_err("missing");
        assert!(e.contains("does not exist"), "{e}");
    }

    #[test]
    fn identity_follows_the_directory_not_the_path() {
        let d = tempfile::tempdir().expect("tempdir");
        let root = d.path().canonicalize().expect("canonical");
        let app = root.join("app");
        std::fs::create_dir(&app).expect("mkdir");
        let id = identify(&app).expect("id");
        still(&app, id).expect("unchanged");
        std::fs::rename(&app, root.join("app.real")).expect("mv");
        std::fs::create_dir(&app).expect("mkdir");
        assert!(still(&app, id).is_err(), "another directory at the path");
        std::fs::remove_dir(&app).expect("rmdir");
        std::os::unix::fs::symlink(root.join("app.real"), &app).expect("symlink");
        assert!(identify(&app).is_err(), "a symlink to the same directory");
    }
}
