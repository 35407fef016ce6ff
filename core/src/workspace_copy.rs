//! The copied workspace (SPEC §6.1 "workspace", docs/SANDBOXING.md "A
//! copied workspace"): what may travel between the operator's working
//! directory and a sandbox whose engine runs on another machine.
//!
//! This module is the policy and the host side only: [`pack`] makes the tar
//! that launch uploads (`PUT /containers/{id}/archive`), [`unpack`] writes
//! back what a copy-back downloaded (`GET /containers/{id}/archive`). The
//! I/O with the engine is [`crate::engine::DockerApi::upload_archive`] and
//! [`crate::engine::DockerApi::download_archive`].
//!
//! Up ([`pack`]): directories, regular files and symlinks that stay inside
//! the workspace travel; the setuid, setgid and sticky bits are cleared;
//! every entry is owned by the sandbox's command user. Skipped, each named
//! in the result: a symlink that is absolute or leads out of the workspace,
//! a device, a socket, a FIFO, and `$ODEK_HOME` when it lies inside the
//! working directory. A hard link travels as its own regular file.
//!
//! Back ([`unpack`]): only entries below the archive's one top directory
//! are written, each by a path of plain names (no absolute path, no `..`),
//! every directory on the way opened without following a symlink, so a
//! symlink the sandbox made (or an earlier entry of the archive made) is
//! never written through. Regular files are written to a new file beside
//! their place and renamed over it (a symlink there is replaced, never
//! followed), with the operator's uid (odek's own) and the mode's
//! permission bits only, never writable by group or others (no setuid,
//! setgid or sticky bit, no `0o022`: a sandbox cannot hand a Makefile or a
//! hook to every local user). Symlinks come back only when their target is
//! relative with no `..` at all (two links that each look inside, `d/up` →
//! `..` and `esc` → `d/up/..`, would lead out together). Nothing is written
//! at or below `$ODEK_HOME` when it lies inside the working directory: it
//! is odek's own state (its user config turns the sandbox off). Hard
//! links, devices, FIFOs and anything else are skipped and named. Nothing
//! is deleted: a file removed in the sandbox stays on the host.

use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{Mode, OFlags, CWD};
use serde::{Deserialize, Serialize};

/// The largest workspace [`pack`] uploads, and the largest archive a
/// copy-back reads (1 GiB): the archive is held in memory.
pub const MAX_COPY_BYTES: u64 = 1 << 30;

/// What each entry (file, directory, symlink, left-out entry) counts
/// toward [`MAX_COPY_BYTES`] besides a file's content: its tar header.
pub const ENTRY_COST: u64 = 512;

/// The container directory the working directory is copied to.
pub const WORKSPACE_DIR: &str = "/workspace";

/// The name of the archive's top directory: `GET
/// /containers/{id}/archive?path=/workspace` names every entry
/// `workspace/…`.
const TOP: &str = "workspace";

/// Permission bits kept: setuid (04000), setgid (02000) and sticky (01000)
/// never travel.
const PERMISSIONS: u32 = 0o777;

/// An entry that did not travel, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Skipped {
    /// The path relative to the workspace (as the archive or the walk
    /// named it; lossy UTF-8).
    pub path: String,
    /// Why: `a symlink to /etc/passwd, outside the workspace`, `a device`,
    /// `a FIFO`, `a hard link`, ….
    pub reason: String,
}

impl std::fmt::Display for Skipped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {}",
            crate::text::shown(&self.path),
            crate::text::foreign(&self.reason)
        )
    }
}

/// What [`pack`] made.
#[derive(Debug)]
pub struct Packed {
    /// The tar, every entry below `workspace/`, to upload to `/`.
    pub archive: Vec<u8>,
    /// What stayed behind.
    pub skipped: Vec<Skipped>,
    /// Regular files that travelled.
    pub files: usize,
    /// What travelled, by path ([`Manifest`]): the base a copy-back
    /// compares with.
    pub manifest: Manifest,
}

/// What a copied workspace held when it was uploaded, by path relative to
/// the workspace: `f:<sha256 of the content>` for a regular file,
/// `l:<target>` for a symlink. Kept by the launch in the sandbox's
/// directory of `$ODEK_HOME`; [`unpack`] writes back only what the sandbox
/// changed against it, and keeps the host's file where the host changed it
/// too.
pub type Manifest = std::collections::BTreeMap<String, String>;

/// The manifest key of a regular file's content.
fn file_key(bytes: &[u8]) -> String {
    use sha2::Digest;
    format!("f:{}", hex::encode(sha2::Sha256::digest(bytes)))
}

/// The manifest key of a symlink's target.
fn link_key(target: &Path) -> String {
    format!("l:{}", target.to_string_lossy())
}

/// Why a copy could not be made or written back.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CopyError {
    /// The working directory (or a path in it) could not be read.
    #[error("the working directory {path} cannot be copied: {reason}")]
    Unreadable {
        /// The path.
        path: String,
        /// The system's words.
        reason: String,
    },
    /// The working directory holds more than [`MAX_COPY_BYTES`].
    #[error("the working directory {path} holds more than {max} bytes of files (each entry counting {ENTRY_COST} more), more than a copied workspace carries; use an engine on this machine (a bind-mounted workspace) or a smaller working directory", max = MAX_COPY_BYTES)]
    TooLarge {
        /// The working directory.
        path: String,
    },
    /// The archive the engine sent is not a tar odek can read.
    #[error("the archive of /workspace is unreadable: {0}")]
    Archive(String),
}

/// True when `target`, a symlink's text found at `at` (a path relative to
/// the workspace, its last component the link itself), names a path inside
/// the workspace: relative, and never climbing above the workspace's top
/// with `..` on the way.
pub fn link_stays_inside(at: &Path, target: &Path) -> bool {
    if target.as_os_str().is_empty() || target.is_absolute() {
        return false;
    }
    let mut depth: usize = at.parent().map_or(0, |p| {
        p.components()
            .filter(|c| matches!(c, Component::Normal(_)))
            .count()
    });
    for c in target.components() {
        match c {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => match depth.checked_sub(1) {
                Some(d) => depth = d,
                None => return false,
            },
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    true
}

/// The tar of `workdir` for the sandbox's `/workspace` (module docs for
/// what travels), every entry owned by `uid:gid`, `exclude` (the operator's
/// `$ODEK_HOME` when it lies inside) left out.
///
/// Errors: [`CopyError::Unreadable`] for a path that cannot be read,
/// [`CopyError::TooLarge`] past [`MAX_COPY_BYTES`].
pub fn pack(
    workdir: &Path,
    exclude: Option<&Path>,
    uid: u32,
    gid: u32,
) -> Result<Packed, CopyError> {
    pack_capped(workdir, exclude, uid, gid, MAX_COPY_BYTES)
}

/// [`pack`] with `cap` in place of [`MAX_COPY_BYTES`] (tests).
fn pack_capped(
    workdir: &Path,
    exclude: Option<&Path>,
    uid: u32,
    gid: u32,
    cap: u64,
) -> Result<Packed, CopyError> {
    let unreadable = |p: &Path, e: std::io::Error| CopyError::Unreadable {
        path: crate::text::shown(p),
        reason: e.to_string(),
    };
    let mut b = tar::Builder::new(Vec::new());
    b.mode(tar::HeaderMode::Deterministic);
    let mut out = Packed {
        archive: Vec::new(),
        skipped: Vec::new(),
        files: 0,
        manifest: Manifest::new(),
    };
    let mut total: u64 = 0;
    // Each entry keeps the host's modification time, so tools that go by
    // it (make) see the tree as it is on the host.
    let header = |kind: tar::EntryType, mode: u32, size: u64, mtime: i64| {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_mode(mode & PERMISSIONS);
        h.set_uid(uid.into());
        h.set_gid(gid.into());
        h.set_size(size);
        h.set_mtime(mtime.max(0) as u64);
        h
    };
    // Every directory is opened from its parent's descriptor without
    // following a symlink, and every entry read relative to it: a
    // directory swapped for a symlink during the walk is never followed
    // out of the working directory.
    let root = open_root(workdir).map_err(|e| unreadable(workdir, e))?;
    let meta = rustix::fs::fstat(&root).map_err(|e| unreadable(workdir, e.into()))?;
    let mut h = header(tar::EntryType::Directory, meta.st_mode, 0, meta.st_mtime);
    b.append_data(&mut h, format!("{TOP}/"), std::io::empty())
        .map_err(|e| unreadable(workdir, e))?;
    // Depth first, by name, so the archive is the same for the same tree.
    let mut stack: Vec<(PathBuf, OwnedFd)> = vec![(PathBuf::new(), root)];
    while let Some((rel, dir_fd)) = stack.pop() {
        let dir = workdir.join(&rel);
        let mut names: Vec<std::ffi::OsString> = Vec::new();
        let mut entries =
            rustix::fs::Dir::read_from(&dir_fd).map_err(|e| unreadable(&dir, e.into()))?;
        for e in entries.by_ref() {
            let e = e.map_err(|e| unreadable(&dir, e.into()))?;
            let n = e.file_name().to_bytes();
            if n != b"." && n != b".." {
                names.push(std::ffi::OsStr::from_bytes(n).to_os_string());
            }
        }
        names.sort();
        let mut subdirs = Vec::new();
        for name in names {
            let rel_path = rel.join(&name);
            let host = workdir.join(&rel_path);
            let in_tar = Path::new(TOP).join(&rel_path);
            let shown = rel_path.to_string_lossy().into_owned();
            if exclude.is_some_and(|x| x == host) {
                out.skipped.push(Skipped {
                    path: shown,
                    reason: "$ODEK_HOME (odek's own state, never given to a sandbox)".into(),
                });
                continue;
            }
            let m = rustix::fs::statat(
                &dir_fd,
                name.as_os_str(),
                rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
            )
            .map_err(|e| unreadable(&host, e.into()))?;
            let ft = rustix::fs::FileType::from_raw_mode(m.st_mode);
            // Every entry costs its tar header (a tree of empty files
            // counts too), a regular file its content besides.
            total = total.saturating_add(ENTRY_COST);
            if ft == rustix::fs::FileType::RegularFile {
                total = total.saturating_add(m.st_size.max(0) as u64);
            }
            if total > cap {
                return Err(CopyError::TooLarge {
                    path: crate::text::shown(workdir),
                });
            }
            if ft == rustix::fs::FileType::Directory {
                let sub = rustix::fs::openat(
                    &dir_fd,
                    name.as_os_str(),
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .map_err(|e| unreadable(&host, e.into()))?;
                let mut h = header(tar::EntryType::Directory, m.st_mode, 0, m.st_mtime);
                b.append_data(&mut h, &in_tar, std::io::empty())
                    .map_err(|e| unreadable(&host, e))?;
                subdirs.push((rel_path, sub));
            } else if ft == rustix::fs::FileType::RegularFile {
                let bytes = read_no_follow_at(&dir_fd, name.as_os_str(), cap)
                    .map_err(|e| unreadable(&host, e))?;
                // A file that grew since it was looked at counts as read.
                total = total
                    .saturating_add((bytes.len() as u64).saturating_sub(m.st_size.max(0) as u64));
                if total > cap {
                    return Err(CopyError::TooLarge {
                        path: crate::text::shown(workdir),
                    });
                }
                out.manifest.insert(shown.clone(), file_key(&bytes));
                let mut h = header(
                    tar::EntryType::Regular,
                    m.st_mode,
                    bytes.len() as u64,
                    m.st_mtime,
                );
                b.append_data(&mut h, &in_tar, bytes.as_slice())
                    .map_err(|e| unreadable(&host, e))?;
                out.files += 1;
            } else if ft == rustix::fs::FileType::Symlink {
                let target = rustix::fs::readlinkat(&dir_fd, name.as_os_str(), Vec::new())
                    .map_err(|e| unreadable(&host, e.into()))?;
                let target = PathBuf::from(std::ffi::OsStr::from_bytes(target.as_bytes()));
                if !link_stays_inside(&rel_path, &target) {
                    out.skipped.push(Skipped {
                        path: shown,
                        reason: format!(
                            "a symlink to {}, outside the workspace",
                            crate::text::shown(&target)
                        ),
                    });
                    continue;
                }
                out.manifest.insert(shown.clone(), link_key(&target));
                let mut h = header(tar::EntryType::Symlink, 0o777, 0, m.st_mtime);
                b.append_link(&mut h, &in_tar, &target)
                    .map_err(|e| unreadable(&host, e))?;
            } else {
                out.skipped.push(Skipped {
                    path: shown,
                    reason: special_kind(ft).into(),
                });
            }
        }
        // Popped in name order.
        stack.extend(subdirs.into_iter().rev());
    }
    out.archive = b.into_inner().map_err(|e| unreadable(workdir, e))?;
    Ok(out)
}

/// What a special file is, in words.
fn special_kind(ft: rustix::fs::FileType) -> &'static str {
    use rustix::fs::FileType as T;
    match ft {
        T::BlockDevice | T::CharacterDevice => "a device",
        T::Fifo => "a FIFO",
        T::Socket => "a socket",
        _ => "neither a file, a directory nor a symlink",
    }
}

/// A regular file's bytes: `name` in the directory `dir`, opened without
/// following a symlink (one swapped in since the walk saw a file is
/// refused, not followed).
fn read_no_follow_at(dir: &OwnedFd, name: &std::ffi::OsStr, cap: u64) -> std::io::Result<Vec<u8>> {
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    )?;
    let mut f = std::fs::File::from(fd);
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file any more"));
    }
    let mut bytes = Vec::new();
    (&mut f)
        .take(cap.saturating_add(1))
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// What [`unpack`] wrote and what it did not.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Unpacked {
    /// Files and symlinks written (new or changed), relative to the
    /// workspace, in archive order.
    pub written: Vec<String>,
    /// Entries not written, each with why. Their paths are relative to
    /// the workspace as `written`'s are, when the archive named them under
    /// `workspace/`; an entry outside it is named as the archive had it.
    pub skipped: Vec<Skipped>,
    /// Each file and symlink now the same on both sides (written, or the
    /// host had it already), by relative path, as a [`Manifest`] key: what
    /// the next copy-back of the same sandbox compares with, so a file this
    /// one wrote is not taken for a change on the host.
    #[serde(skip)]
    #[schemars(skip)]
    pub synced: Manifest,
}

/// Writes the archive of the sandbox's `/workspace` (`GET
/// /containers/{id}/archive?path=/workspace`: entries `workspace/…`) into
/// `workdir` by the rules of the module docs; `odek_home` (the plan's
/// `$ODEK_HOME`) is never written when it lies inside `workdir`.
///
/// With `base`, the [`Manifest`] of the upload, a file or symlink the
/// sandbox left as it was uploaded is not written, and one the sandbox
/// changed is written only when the host's is still as uploaded (or, for a
/// new one, still absent); otherwise the host's is kept and the entry is
/// named (changed on both sides). Without `base` every entry that differs
/// from the host's is written.
///
/// Errors: [`CopyError::Archive`] when the tar cannot be read; an entry
/// that cannot be written is skipped and named, not an error.
pub fn unpack(
    archive: &[u8],
    workdir: &Path,
    base: Option<&Manifest>,
    odek_home: Option<&Path>,
) -> Result<Unpacked, CopyError> {
    unpack_at(archive, workdir, None, base, odek_home)
}

/// [`unpack`] into the directory `workdir` names only when it is still
/// `expect` (the plan's `workdir_id`, taken at resolve): the directory is
/// opened once (the last component not followed) and its own `st_dev` and
/// `st_ino` compared, so a working directory replaced since launch (moved
/// away and another put at its path) is never written into.
///
/// Errors: as [`unpack`]; [`CopyError::Archive`] naming the replacement
/// when the directory is another, before anything is written.
pub fn unpack_at(
    archive: &[u8],
    workdir: &Path,
    expect: Option<crate::config::FileId>,
    base: Option<&Manifest>,
    odek_home: Option<&Path>,
) -> Result<Unpacked, CopyError> {
    let mut out = Unpacked::default();
    let home_rel = odek_home.and_then(|h| home_inside(workdir, h));
    let mut ar = tar::Archive::new(archive);
    let root = open_root(workdir).map_err(|e| {
        CopyError::Archive(format!(
            "the working directory {} cannot be opened: {e}",
            crate::text::shown(workdir)
        ))
    })?;
    if let Some(want) = expect {
        let st = rustix::fs::fstat(&root).map_err(|e| CopyError::Archive(e.to_string()))?;
        if (st.st_dev as u64, st.st_ino as u64) != (want.dev, want.ino) {
            return Err(CopyError::Archive(format!(
                "the working directory {} is another directory than the one the sandbox was launched from (it was replaced since)",
                crate::text::shown(workdir)
            )));
        }
    }
    let entries = ar
        .entries()
        .map_err(|e| CopyError::Archive(e.to_string()))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| CopyError::Archive(e.to_string()))?;
        let raw = entry.path_bytes().into_owned();
        let full = String::from_utf8_lossy(&raw).into_owned();
        // Named as `written` names them: relative to the workspace.
        let shown = full
            .strip_prefix(&format!("{TOP}/"))
            .filter(|r| !r.is_empty())
            .map(str::to_string)
            .unwrap_or(full.clone());
        let skip = |out: &mut Unpacked, reason: String| {
            out.skipped.push(Skipped {
                path: shown.clone(),
                reason,
            })
        };
        let Some(names) = plain_names(&raw) else {
            skip(
                &mut out,
                "an absolute path or one with `..`, outside the workspace".into(),
            );
            continue;
        };
        let Some((first, rest)) = names.split_first() else {
            continue;
        };
        if first.as_slice() != TOP.as_bytes() {
            skip(&mut out, "outside /workspace".into());
            continue;
        }
        let Some((leaf, parents)) = rest.split_last() else {
            // The workspace itself: its mode and owner stay the host's.
            continue;
        };
        let kind = entry.header().entry_type();
        let mode = entry.header().mode().unwrap_or(0o644) & PERMISSIONS & !0o022;
        let rel: PathBuf = rest
            .iter()
            .map(|n| std::ffi::OsStr::from_bytes(n))
            .collect();
        let rel_shown = rel.to_string_lossy().into_owned();
        if home_rel.as_ref().is_some_and(|h| rel.starts_with(h)) {
            skip(
                &mut out,
                "$ODEK_HOME (odek's own state, never written by a sandbox)".into(),
            );
            continue;
        }
        let parent = match open_parents(&root, parents) {
            Ok(fd) => fd,
            Err(why) => {
                skip(&mut out, why);
                continue;
            }
        };
        let leaf = std::ffi::OsStr::from_bytes(leaf);
        let mut bytes = Vec::new();
        let mut target = PathBuf::new();
        let key = match kind {
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                if let Err(e) = entry.read_to_end(&mut bytes) {
                    skip(&mut out, format!("unreadable in the archive: {e}"));
                    continue;
                }
                Some(file_key(&bytes))
            }
            tar::EntryType::Symlink => entry.link_name_bytes().map(|t| {
                target = Path::new(std::ffi::OsStr::from_bytes(&t)).to_path_buf();
                link_key(&target)
            }),
            _ => None,
        };
        let host_now = key.as_ref().map(|_| host_key(&parent, leaf));
        if let (Some(key), Some(Some(host))) = (&key, &host_now) {
            if host == key {
                // Both sides have it already (a file an earlier copy-back
                // wrote, or the same edit on both): nothing to write.
                out.synced.insert(rel_shown.clone(), key.clone());
                continue;
            }
        }
        if let (Some(base), Some(key)) = (base, &key) {
            let uploaded = base.get(&rel_shown);
            if uploaded == Some(key) {
                // Not changed in the sandbox.
                continue;
            }
            if host_now.flatten().as_ref() != uploaded {
                skip(
                    &mut out,
                    "changed on the host too since the sandbox was launched: the host's is kept"
                        .into(),
                );
                continue;
            }
        }
        let done = match kind {
            tar::EntryType::Directory => make_dir(&parent, leaf, mode).map(|_| false),
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                write_file(&parent, leaf, &bytes, mode)
            }
            tar::EntryType::Symlink => match key {
                Some(_)
                    if link_stays_inside(&rel, &target)
                        && !target.components().any(|c| c == Component::ParentDir) =>
                {
                    write_link(&parent, leaf, &target)
                }
                Some(_) if link_stays_inside(&rel, &target) => Err(format!(
                    "a symlink to {}: copy-back writes a symlink only when its target has no `..` (links that each look inside can lead out together); make it on the host",
                    crate::text::shown(&target)
                )),
                Some(_) => Err(format!(
                    "a symlink to {}, outside the workspace",
                    crate::text::shown(&target)
                )),
                None => Err("a symlink without a target".into()),
            },
            tar::EntryType::Link => Err("a hard link (hard links are not copied back)".into()),
            tar::EntryType::Char | tar::EntryType::Block => Err("a device".into()),
            tar::EntryType::Fifo => Err("a FIFO".into()),
            other => Err(format!("an archive entry of type {other:?}")),
        };
        match done {
            Ok(true) => {
                if let Some(key) = key {
                    out.synced.insert(rel_shown.clone(), key);
                }
                out.written.push(rel_shown)
            }
            Ok(false) => {}
            Err(why) => skip(&mut out, why),
        }
    }
    Ok(out)
}

/// `odek_home` relative to `workdir` when it lies inside it (compared as
/// real paths where they exist, else as written); `None` otherwise.
fn home_inside(workdir: &Path, odek_home: &Path) -> Option<PathBuf> {
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let rel = real(odek_home)
        .strip_prefix(real(workdir))
        .ok()?
        .to_path_buf();
    (!rel.as_os_str().is_empty()).then_some(rel)
}

/// What the host has at `name` in `dir`, as a [`Manifest`] key (`None`:
/// nothing there; a directory or anything else: `d:`/`o:`), read without
/// following a symlink.
fn host_key(dir: &OwnedFd, name: &std::ffi::OsStr) -> Option<String> {
    let st = rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW).ok()?;
    match rustix::fs::FileType::from_raw_mode(st.st_mode) {
        rustix::fs::FileType::RegularFile => {
            let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
            let fd = rustix::fs::openat(dir, name, flags, Mode::empty()).ok()?;
            let mut bytes = Vec::new();
            std::fs::File::from(fd).read_to_end(&mut bytes).ok()?;
            Some(file_key(&bytes))
        }
        rustix::fs::FileType::Symlink => {
            let t = rustix::fs::readlinkat(dir, name, Vec::new()).ok()?;
            Some(link_key(Path::new(std::ffi::OsStr::from_bytes(
                t.as_bytes(),
            ))))
        }
        rustix::fs::FileType::Directory => Some("d:".into()),
        _ => Some("o:".into()),
    }
}

/// The path's components when each is a plain name (`.` dropped); `None`
/// for an absolute path or one with `..`.
fn plain_names(raw: &[u8]) -> Option<Vec<Vec<u8>>> {
    if raw.starts_with(b"/") {
        return None;
    }
    let mut names = Vec::new();
    for part in raw.split(|b| *b == b'/') {
        match part {
            b"" | b"." => {}
            b".." => return None,
            name => names.push(name.to_vec()),
        }
    }
    Some(names)
}

/// The working directory, opened as a directory (a symlink is refused).
fn open_root(workdir: &Path) -> std::io::Result<OwnedFd> {
    Ok(rustix::fs::openat(
        CWD,
        workdir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// The directory `names` below `root`, each opened without following a
/// symlink; a missing one is made (mode 0755, the operator's).
fn open_parents(root: &OwnedFd, names: &[Vec<u8>]) -> Result<OwnedFd, String> {
    let mut fd = rustix::io::fcntl_dupfd_cloexec(root, 0).map_err(|e| e.to_string())?;
    for n in names {
        let name = std::ffi::OsStr::from_bytes(n);
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        fd = match rustix::fs::openat(&fd, name, flags, Mode::empty()) {
            Ok(next) => next,
            Err(rustix::io::Errno::NOENT) => {
                rustix::fs::mkdirat(&fd, name, Mode::from_raw_mode(0o755))
                    .map_err(|e| format!("its directory cannot be made: {e}"))?;
                rustix::fs::openat(&fd, name, flags, Mode::empty())
                    .map_err(|e| format!("its directory cannot be opened: {e}"))?
            }
            Err(rustix::io::Errno::NOTDIR) | Err(rustix::io::Errno::LOOP) => {
                return Err(format!(
                    "below {}, which is not a directory (a symlink is never written through)",
                    crate::text::shown(name)
                ))
            }
            Err(e) => return Err(format!("its directory cannot be opened: {e}")),
        };
    }
    Ok(fd)
}

/// Makes directory `name` in `dir` with `mode` (and the owner's rwx, so the
/// operator can write into it); an existing directory is kept as it is.
fn make_dir(dir: &OwnedFd, name: &std::ffi::OsStr, mode: u32) -> Result<(), String> {
    match rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(mode | 0o700)) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::EXIST) => {
            let st = rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
                .map_err(|e| e.to_string())?;
            if rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory {
                Ok(())
            } else {
                Err("a directory in the sandbox, not one on the host".into())
            }
        }
        Err(e) => Err(format!("cannot be made: {e}")),
    }
}

/// A temporary name beside `name` in its directory.
fn temp_name(name: &std::ffi::OsStr, n: u32) -> std::ffi::OsString {
    let mut t = std::ffi::OsString::from(".odek-copy-");
    t.push(std::process::id().to_string());
    t.push(format!("-{n}-"));
    t.push(name);
    t
}

/// Writes `bytes` as `name` in `dir` with `mode` through a new file renamed
/// over it; `Ok(false)` when a regular file there holds the same bytes and
/// mode already (left untouched).
fn write_file(
    dir: &OwnedFd,
    name: &std::ffi::OsStr,
    bytes: &[u8],
    mode: u32,
) -> Result<bool, String> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
    if let Ok(fd) = rustix::fs::openat(dir, name, flags, Mode::empty()) {
        let mut f = std::fs::File::from(fd);
        if let Ok(m) = f.metadata() {
            if m.is_dir() {
                return Err("a file in the sandbox, a directory on the host".into());
            }
            if m.is_file() && m.len() == bytes.len() as u64 && m.mode() & PERMISSIONS == mode {
                let mut old = Vec::new();
                if f.read_to_end(&mut old).is_ok() && old == bytes {
                    return Ok(false);
                }
            }
        }
    }
    let (tmp, fd) = create_temp(dir, name, mode)?;
    let mut f = std::fs::File::from(fd);
    let written = f
        .write_all(bytes)
        .and_then(|()| rustix::fs::fchmod(f.as_fd(), Mode::from_raw_mode(mode)).map_err(Into::into))
        .map_err(|e| e.to_string());
    drop(f);
    written
        .and_then(|()| rustix::fs::renameat(dir, &tmp, dir, name).map_err(|e| e.to_string()))
        .map_err(|e| {
            let _ = rustix::fs::unlinkat(dir, &tmp, rustix::fs::AtFlags::empty());
            format!("cannot be written: {e}")
        })?;
    Ok(true)
}

/// A new temporary file beside `name` (never an existing path).
fn create_temp(
    dir: &OwnedFd,
    name: &std::ffi::OsStr,
    mode: u32,
) -> Result<(std::ffi::OsString, OwnedFd), String> {
    for n in 0..16 {
        let tmp = temp_name(name, n);
        match rustix::fs::openat(
            dir,
            &tmp,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode & 0o700),
        ) {
            Ok(fd) => return Ok((tmp, fd)),
            Err(rustix::io::Errno::EXIST) => continue,
            Err(e) => return Err(format!("cannot be written: {e}")),
        }
    }
    Err("cannot be written: no free temporary name".into())
}

/// Makes symlink `name` → `target` in `dir`, replacing a file or symlink
/// there; `Ok(false)` when the same symlink is there already.
fn write_link(dir: &OwnedFd, name: &std::ffi::OsStr, target: &Path) -> Result<bool, String> {
    if let Ok(old) = rustix::fs::readlinkat(dir, name, Vec::new()) {
        if old.as_bytes() == target.as_os_str().as_bytes() {
            return Ok(false);
        }
    }
    if let Ok(st) = rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW) {
        if rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory {
            return Err("a symlink in the sandbox, a directory on the host".into());
        }
    }
    for n in 0..16 {
        let tmp = temp_name(name, n);
        match rustix::fs::symlinkat(target, dir, &tmp) {
            Ok(()) => {
                return rustix::fs::renameat(dir, &tmp, dir, name)
                    .map(|()| true)
                    .map_err(|e| {
                        let _ = rustix::fs::unlinkat(dir, &tmp, rustix::fs::AtFlags::empty());
                        format!("cannot be written: {e}")
                    })
            }
            Err(rustix::io::Errno::EXIST) => continue,
            Err(e) => return Err(format!("cannot be written: {e}")),
        }
    }
    Err("cannot be written: no free temporary name".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// An archive entry written as the bytes say, path unchecked (the tar
    /// crate's own builder refuses `..` and absolute paths; a hostile
    /// engine does not).
    fn raw(
        b: &mut tar::Builder<Vec<u8>>,
        kind: tar::EntryType,
        path: &str,
        link: &str,
        mode: u32,
        data: &[u8],
    ) {
        let mut h = tar::Header::new_old();
        h.as_old_mut().name[..path.len()].copy_from_slice(path.as_bytes());
        h.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
        h.set_entry_type(kind);
        h.set_mode(mode);
        h.set_size(data.len() as u64);
        h.set_cksum();
        b.append(&h, data).expect("append");
    }

    fn names(archive: &[u8]) -> Vec<(String, tar::EntryType, u32, u64, u64)> {
        let mut ar = tar::Archive::new(archive);
        ar.entries()
            .expect("entries")
            .map(|e| {
                let e = e.expect("entry");
                let h = e.header();
                (
                    String::from_utf8_lossy(&e.path_bytes()).into_owned(),
                    h.entry_type(),
                    h.mode().expect("mode"),
                    h.uid().expect("uid"),
                    h.gid().expect("gid"),
                )
            })
            .collect()
    }

    #[test]
    fn a_packed_file_keeps_the_hosts_modification_time() {
        let d = tempfile::tempdir().expect("tempdir");
        let f = std::fs::File::create(d.path().join("Makefile")).expect("create");
        let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
        f.set_modified(when).expect("set mtime");
        drop(f);
        let p = pack(d.path(), None, 0, 0).expect("pack");
        let mut ar = tar::Archive::new(p.archive.as_slice());
        let mtime = ar
            .entries()
            .expect("tar")
            .map(|e| e.expect("entry"))
            .find(|e| e.path().expect("path").ends_with("Makefile"))
            .map(|e| e.header().mtime().expect("mtime"))
            .expect("the file is in the archive");
        assert_eq!(mtime, 1_000_000_000);
    }

    #[test]
    fn every_entry_counts_toward_the_cap_not_only_file_content() {
        let d = tempfile::tempdir().expect("tempdir");
        for i in 0..10 {
            std::fs::write(d.path().join(format!("empty{i}")), b"").expect("write");
        }
        // Ten empty files: no content, 10 × 512 bytes of headers.
        let err = pack_capped(d.path(), None, 0, 0, 9 * ENTRY_COST).expect_err("over the cap");
        assert!(matches!(err, CopyError::TooLarge { .. }), "{err}");
        let p = pack_capped(d.path(), None, 0, 0, 10 * ENTRY_COST).expect("at the cap");
        assert_eq!(p.files, 10);
    }

    #[test]
    fn symlinks_stay_inside_or_do_not_travel() {
        assert!(link_stays_inside(Path::new("a"), Path::new("b")));
        assert!(link_stays_inside(Path::new("d/a"), Path::new("../b")));
        assert!(link_stays_inside(Path::new("d/a"), Path::new("./x/../y")));
        assert!(!link_stays_inside(Path::new("a"), Path::new("../b")));
        assert!(!link_stays_inside(Path::new("d/a"), Path::new("../../b")));
        assert!(!link_stays_inside(
            Path::new("d/a"),
            Path::new("x/../../../b")
        ));
        assert!(!link_stays_inside(Path::new("a"), Path::new("/etc/passwd")));
        assert!(!link_stays_inside(Path::new("a"), Path::new("")));
    }

    /// Up: files, directories and inside symlinks travel owned by the
    /// command user without setuid bits; outside symlinks, FIFOs, sockets
    /// and `$ODEK_HOME` do not, each named.
    #[test]
    fn pack_takes_what_may_travel_and_names_the_rest() {
        let d = tempfile::tempdir().expect("tempdir");
        let w = d.path();
        std::fs::write(w.join("hello.txt"), b"hi").expect("write");
        std::fs::create_dir(w.join("sub")).expect("mkdir");
        std::fs::write(w.join("sub/tool"), b"#!/bin/sh").expect("write");
        std::fs::set_permissions(w.join("sub/tool"), std::fs::Permissions::from_mode(0o6755))
            .expect("chmod");
        std::os::unix::fs::symlink("sub/tool", w.join("inside")).expect("symlink");
        std::os::unix::fs::symlink("/etc/passwd", w.join("abs")).expect("symlink");
        std::os::unix::fs::symlink("../../etc", w.join("sub/up")).expect("symlink");
        rustix::fs::mknodat(
            CWD,
            w.join("fifo"),
            rustix::fs::FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .expect("mkfifo");
        let _sock = std::os::unix::net::UnixListener::bind(w.join("sock")).expect("bind");
        std::fs::create_dir(w.join(".odek-home")).expect("mkdir");
        std::fs::write(w.join(".odek-home/secret"), b"key").expect("write");
        let p = pack(w, Some(&w.join(".odek-home")), 1234, 5678).expect("pack");
        let got = names(&p.archive);
        let paths: Vec<&str> = got.iter().map(|g| g.0.as_str()).collect();
        assert_eq!(
            paths,
            [
                "workspace/",
                "workspace/hello.txt",
                "workspace/inside",
                "workspace/sub",
                "workspace/sub/tool"
            ]
        );
        assert!(got.iter().all(|g| g.3 == 1234 && g.4 == 5678), "{got:?}");
        let tool = got
            .iter()
            .find(|g| g.0 == "workspace/sub/tool")
            .expect("tool");
        assert_eq!(tool.2, 0o755, "setuid and setgid cleared");
        assert_eq!(p.files, 2);
        let mut skipped: Vec<String> = p.skipped.iter().map(|s| s.to_string()).collect();
        skipped.sort();
        assert_eq!(
            skipped,
            [
                ".odek-home: $ODEK_HOME (odek's own state, never given to a sandbox)",
                "abs: a symlink to /etc/passwd, outside the workspace",
                "fifo: a FIFO",
                "sock: a socket",
                "sub/up: a symlink to ../../etc, outside the workspace",
            ]
        );
    }

    /// Back: every hostile entry of a tar an engine could send is skipped
    /// and named, and nothing is written outside the working directory.
    #[test]
    fn unpack_refuses_every_hostile_entry() {
        let d = tempfile::tempdir().expect("tempdir");
        let w = d.path().join("w");
        let outside = d.path().join("outside");
        std::fs::create_dir(&w).expect("mkdir");
        std::fs::create_dir(&outside).expect("mkdir");
        // A symlink the host already has, to outside: never written through.
        std::os::unix::fs::symlink(&outside, w.join("hostlink")).expect("symlink");
        let mut b = tar::Builder::new(Vec::new());
        use tar::EntryType as T;
        raw(&mut b, T::Directory, "workspace/", "", 0o755, b"");
        raw(&mut b, T::Regular, "workspace/ok.txt", "", 0o644, b"fine");
        raw(&mut b, T::Regular, "/etc/odek-abs", "", 0o644, b"x");
        raw(&mut b, T::Regular, "workspace/../escape", "", 0o644, b"x");
        raw(&mut b, T::Regular, "other/x", "", 0o644, b"x");
        raw(&mut b, T::Symlink, "workspace/abs", "/etc", 0o777, b"");
        raw(&mut b, T::Symlink, "workspace/up", "../outside", 0o777, b"");
        // A symlink inside, then an entry written through it.
        raw(&mut b, T::Directory, "workspace/sub", "", 0o755, b"");
        raw(&mut b, T::Symlink, "workspace/via", "sub", 0o777, b"");
        raw(&mut b, T::Regular, "workspace/via/through", "", 0o644, b"x");
        raw(
            &mut b,
            T::Regular,
            "workspace/hostlink/pwned",
            "",
            0o644,
            b"x",
        );
        raw(
            &mut b,
            T::Regular,
            "workspace/suid",
            "",
            0o4755,
            b"#!/bin/sh",
        );
        raw(
            &mut b,
            T::Regular,
            "workspace/sgid-sticky",
            "",
            0o3775,
            b"x",
        );
        raw(&mut b, T::Char, "workspace/null", "", 0o666, b"");
        raw(&mut b, T::Block, "workspace/sda", "", 0o660, b"");
        raw(&mut b, T::Fifo, "workspace/fifo", "", 0o644, b"");
        raw(&mut b, T::Link, "workspace/hard", "/etc/shadow", 0o644, b"");
        raw(
            &mut b,
            T::Link,
            "workspace/hard2",
            "workspace/ok.txt",
            0o644,
            b"",
        );
        let archive = b.into_inner().expect("tar");
        let got = unpack(&archive, &w, None, None).expect("unpack");
        assert_eq!(got.written, ["ok.txt", "via", "suid", "sgid-sticky"]);
        let skipped: Vec<String> = got.skipped.iter().map(|s| s.to_string()).collect();
        assert_eq!(
            skipped,
            [
                "/etc/odek-abs: an absolute path or one with `..`, outside the workspace",
                "../escape: an absolute path or one with `..`, outside the workspace",
                "other/x: outside /workspace",
                "abs: a symlink to /etc, outside the workspace",
                "up: a symlink to ../outside, outside the workspace",
                "via/through: below via, which is not a directory (a symlink is never written through)",
                "hostlink/pwned: below hostlink, which is not a directory (a symlink is never written through)",
                "null: a device",
                "sda: a device",
                "fifo: a FIFO",
                "hard: a hard link (hard links are not copied back)",
                "hard2: a hard link (hard links are not copied back)",
            ]
        );
        assert_eq!(std::fs::read(w.join("ok.txt")).expect("read"), b"fine");
        let mode = |p: &str| {
            std::fs::metadata(w.join(p))
                .expect("meta")
                .permissions()
                .mode()
                & 0o7777
        };
        assert_eq!(mode("suid"), 0o755);
        // No group or other write either (0o3775 → 0o755).
        assert_eq!(mode("sgid-sticky"), 0o755);
        assert!(
            std::fs::read_dir(&outside).expect("ls").next().is_none(),
            "nothing outside"
        );
        assert!(!w.join("sub/through").exists());
        assert!(!d.path().join("escape").exists());
        // Written as the operator (odek's own uid).
        assert_eq!(
            std::fs::metadata(w.join("ok.txt")).expect("meta").uid(),
            rustix::process::geteuid().as_raw()
        );
    }

    /// A copy-back replaces a symlink the host has at a file's place with
    /// the file (never writing through it), and leaves unchanged files
    /// untouched.
    #[test]
    fn unpack_replaces_a_symlink_and_keeps_unchanged_files() {
        let d = tempfile::tempdir().expect("tempdir");
        let w = d.path().join("w");
        std::fs::create_dir(&w).expect("mkdir");
        std::fs::write(d.path().join("target"), b"outside").expect("write");
        std::os::unix::fs::symlink(d.path().join("target"), w.join("f")).expect("symlink");
        std::fs::write(w.join("same"), b"same").expect("write");
        std::fs::set_permissions(w.join("same"), std::fs::Permissions::from_mode(0o644))
            .expect("chmod");
        let mut b = tar::Builder::new(Vec::new());
        raw(
            &mut b,
            tar::EntryType::Regular,
            "workspace/f",
            "",
            0o644,
            b"new",
        );
        raw(
            &mut b,
            tar::EntryType::Regular,
            "workspace/same",
            "",
            0o644,
            b"same",
        );
        let got = unpack(&b.into_inner().expect("tar"), &w, None, None).expect("unpack");
        assert_eq!(got.written, ["f"]);
        assert_eq!(
            std::fs::read(d.path().join("target")).expect("read"),
            b"outside"
        );
        assert!(std::fs::symlink_metadata(w.join("f"))
            .expect("meta")
            .is_file());
        assert_eq!(std::fs::read(w.join("f")).expect("read"), b"new");
    }

    /// What [`pack`] makes, [`unpack`] writes back the same.
    #[test]
    fn a_packed_tree_unpacks_to_the_same_tree() {
        let d = tempfile::tempdir().expect("tempdir");
        let (a, z) = (d.path().join("a"), d.path().join("z"));
        std::fs::create_dir_all(a.join("x/y")).expect("mkdir");
        std::fs::create_dir(&z).expect("mkdir");
        std::fs::write(a.join("x/y/f"), b"deep").expect("write");
        std::os::unix::fs::symlink("y/f", a.join("x/l")).expect("symlink");
        let p = pack(&a, None, 0, 0).expect("pack");
        let got = unpack(&p.archive, &z, None, None).expect("unpack");
        assert_eq!(got.written, ["x/l", "x/y/f"]);
        assert!(got.skipped.is_empty(), "{:?}", got.skipped);
        assert_eq!(std::fs::read(z.join("x/l")).expect("read"), b"deep");
    }

    /// With the upload's manifest, only what the sandbox changed comes
    /// back, and a file the host changed too keeps the host's content.
    #[test]
    fn only_what_the_sandbox_changed_comes_back_and_the_host_wins_a_conflict() {
        let d = tempfile::tempdir().expect("tempdir");
        let w = d.path();
        for (n, c) in [
            ("same", "1"),
            ("sandbox", "1"),
            ("both", "1"),
            ("host", "1"),
        ] {
            std::fs::write(w.join(n), c).expect("write");
        }
        let p = pack(w, None, 0, 0).expect("pack");
        // After launch, on the host.
        std::fs::write(w.join("both"), "host").expect("write");
        std::fs::write(w.join("host"), "host").expect("write");
        std::fs::write(w.join("new-on-host"), "host").expect("write");
        // What the sandbox holds at copy-back.
        let mut b = tar::Builder::new(Vec::new());
        let e = tar::EntryType::Regular;
        raw(&mut b, e, "workspace/same", "", 0o644, b"1");
        raw(&mut b, e, "workspace/sandbox", "", 0o644, b"sandbox");
        raw(&mut b, e, "workspace/both", "", 0o644, b"sandbox");
        raw(&mut b, e, "workspace/host", "", 0o644, b"1");
        raw(&mut b, e, "workspace/new-on-host", "", 0o644, b"sandbox");
        raw(&mut b, e, "workspace/new", "", 0o644, b"sandbox");
        let got =
            unpack(&b.into_inner().expect("tar"), w, Some(&p.manifest), None).expect("unpack");
        assert_eq!(got.written, ["sandbox", "new"]);
        let skipped: Vec<&str> = got.skipped.iter().map(|s| s.path.as_str()).collect();
        assert_eq!(skipped, ["both", "new-on-host"]);
        let read = |n: &str| std::fs::read_to_string(w.join(n)).expect("read");
        assert_eq!(
            [
                read("same"),
                read("sandbox"),
                read("both"),
                read("host"),
                read("new-on-host"),
                read("new")
            ],
            ["1", "sandbox", "host", "host", "host", "sandbox"]
        );
    }
}
