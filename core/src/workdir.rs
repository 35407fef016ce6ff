//! The working directory and the volumes, checked again at use (SPEC §3.4,
//! §6.1).
//!
//! Resolve validates the working directory and each volume, and records the
//! working directory's identity (device and inode, [`crate::config::FileId`]); Docker then
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
//! (`crate::mounts`).

use std::path::{Path, PathBuf};

use crate::config::{
    resolve_volume, still, validate_workdir, walk_no_symlink, ConfigError, FileId,
};
use crate::plan::Plan;
use crate::text::quote;

/// The refusal of a working directory that is not what was resolved.
fn changed(workdir: &Path, what: &str) -> ConfigError {
    ConfigError::Workdir {
        path: workdir.to_path_buf(),
        reason: format!(
            "changed since it was resolved and approved: {what}; nothing was created; run odek again from the real project directory"
        ),
        fix: None,
    }
}

/// Checks a plan's working directory and volumes against the file system
/// now (SPEC §3.4), at the start of a launch: `check_paths`, then every
/// working-directory rule again (`validate_workdir`, with `$HOME` of this
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
pub(crate) fn check_paths(plan: &Plan) -> Result<(), ConfigError> {
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
