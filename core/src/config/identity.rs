//! A directory's identity (SPEC §3.4): device and inode ([`FileId`]), read
//! by a walk from `/` that follows no symbolic link ([`walk_no_symlink`]).
//! Resolve records the working directory's identity ([`identify`]) and
//! checks it again after reading the directory by path ([`still`]), so a
//! path swapped for another directory in between is refused.

use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{quote, ConfigError};

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
    pub(crate) fn of(meta: &std::fs::Metadata) -> FileId {
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
pub(crate) fn walk_no_symlink(path: &Path) -> Result<std::fs::Metadata, String> {
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
pub(crate) fn identify(workdir: &Path) -> Result<FileId, ConfigError> {
    let fail = |reason: String| ConfigError::Workdir {
        path: workdir.to_path_buf(),
        reason: format!("{reason}; "),
        fix: Some(crate::config::advice::Fix::PassWorkdir {
            dir: "the project directory itself".into(),
        }),
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
            fix: None,
        }),
        Err(e) => Err(e),
    }
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
