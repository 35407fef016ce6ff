//! The record of what odek did in a sandbox (docs/SECURITY.md, "The
//! record of what ran"; docs/MCP.md, "Record"): one log per sandbox,
//! `$ODEK_HOME/sandboxes/<container name>/log.jsonl`, one JSON object
//! ([`Record`]) per line for every command, file operation and background
//! process call made through core ([`crate::Client::exec_io`],
//! [`crate::Client::exec_background`], [`crate::Client::process_kill`], the
//! file tools of [`crate::files`]) — whichever surface asked (the CLI, the
//! C ABI and its bindings, `odek mcp`) — and every other tool call of `odek
//! mcp` that touched a sandbox. `odek sandbox log NAME` prints it.
//!
//! What a record holds: when the call began, the surface, the tool, the
//! command line as run (at most [`MAX_COMMAND_BYTES`] of it) or the path,
//! the names of the env variables given (never their values), the exit
//! code, the duration and a short outcome or error. Never env values,
//! stdin, output or file contents. A command line is kept as it was run,
//! so a secret typed on one is in the log: the files are private (the
//! directories 0700, the log 0600, created without following a symlink,
//! owned by the user or root and writable by nobody else, as the rest of
//! `$ODEK_HOME`: `crate::ownership`) and `odek sandbox log --clear`
//! removes them.
//!
//! A record is appended with `O_APPEND` in one `write`, so several
//! processes writing one log never interleave their lines. Failing to
//! record never fails the call: it is said once per process on stderr
//! (`odek mcp`'s log) and through `tracing`. Commands on the host
//! (fallback, `--no-sandbox`) have no sandbox and are not recorded.
//!
//! A sandbox's directory outlives it by the plan's
//! [`crate::Plan::log_retention_days`] (`sandbox_log_retention`): its end
//! is marked when odek removes it (`sandbox_ended`, or found gone by
//! [`crate::Client::prune_records`]), and [`prune`] removes the
//! directories of sandboxes that ended longer ago (at each launch, and at
//! `odek sandbox log`). The directory is also where other per-sandbox
//! files of odek live (`ensure_sandbox_dir`); pruning removes it whole.

use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

use crate::config::advice::Surface;
use crate::error::Error;
use crate::sandbox::Sandbox;
use crate::text::shown;

/// The directory under `$ODEK_HOME` holding one directory per sandbox.
pub const SANDBOXES_DIR: &str = "sandboxes";

/// The log's file name in a sandbox's directory.
pub const LOG_FILE: &str = "log.jsonl";

/// The marker of a sandbox's end in its directory: its modification time
/// is when odek saw the sandbox end.
const ENDED_FILE: &str = "ended";

/// Most bytes of a command line a record keeps (64 KiB, the arguments
/// together); what is left out is replaced by a marker saying how much.
pub const MAX_COMMAND_BYTES: usize = 64 * 1024;

/// Largest log read by [`read`] (256 MiB).
const MAX_LOG_READ: u64 = 256 << 20;

/// Seconds in a day of retention.
const DAY: u64 = 24 * 60 * 60;

/// One line of a sandbox's log.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// When the call began: RFC 3339 in UTC with milliseconds
    /// (`2025-01-31T09:30:00.123Z`).
    pub time: String,
    /// Who asked: `"cli"`, `"library"` (the C ABI and its bindings) or
    /// `"mcp"`.
    pub surface: String,
    /// What was called: `"exec"` (`odek sandbox exec`, a binding's exec,
    /// MCP `exec`), `"run"` (`odek run`), `"exec_background"`,
    /// `"process_kill"`, `"read_file"`, `"write_file"`, `"edit_file"`,
    /// `"list_directory"`, and MCP's other tools by their names
    /// (`"describe"`, `"sandbox_up"`, `"sandbox_down"`, `"sandbox_list"`,
    /// `"sandbox_narrow"`, `"process_output"`); `odek sandbox up` and
    /// `down` as `"sandbox_up"` and `"sandbox_down"`.
    pub tool: String,
    /// The command's argv as run (a shell string as `["/bin/sh", "-c",
    /// …]`), at most [`MAX_COMMAND_BYTES`] of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// A file tool's path, as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The names of the env variables given to the command (never their
    /// values).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_keys: Vec<String>,
    /// A background process's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_id: Option<String>,
    /// For `sandbox_narrow`: the parent sandbox's container name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// The command's exit code (124 after a timeout, 130 after a
    /// cancellation); null when it has none (not a command, not ended, an
    /// error).
    pub exit_code: Option<i64>,
    /// How long the call took, in milliseconds.
    pub duration_ms: u64,
    /// How it ended, in a few words (`"exited"`, `"timed out"`,
    /// `"cancelled"`, `"interrupted"`, `"started"`, `"removed"`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// Why it failed, in a few words ([`error_text`]): never a message
    /// that could quote a file or an env value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The name a surface has in records.
fn surface_name(s: Surface) -> &'static str {
    match s {
        Surface::Cli => "cli",
        Surface::Library => "library",
        Surface::Mcp => "mcp",
    }
}

/// An error in a few words for a record: the file tool's refusal kind
/// (`"refused: not_found"`), `"cancelled"`, `"the sandbox stopped"`, `"did
/// not start"`, `"status unknown"`, else the class every surface reports
/// (`"usage"`, `"config"`, `"docker-rejected"`, …). Never the message,
/// which may quote what was asked.
pub fn error_text(e: &Error) -> String {
    match e {
        Error::File(f) => {
            let kind = serde_json::to_value(f.kind)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_else(|| "other".into());
            format!("refused: {kind}")
        }
        Error::Cancelled { .. } => "cancelled".into(),
        Error::SandboxStopped { .. } => "the sandbox stopped".into(),
        Error::Exec { started: false, .. } => "did not start".into(),
        Error::Exec { started: true, .. } => "status unknown".into(),
        other => other.reported_class().as_str().into(),
    }
}

/// `argv` as a record keeps it: whole up to [`MAX_COMMAND_BYTES`] bytes
/// (the arguments together), then cut at a character boundary with
/// `…[odek: N more bytes not recorded]`, and the arguments after that
/// replaced by one `…[odek: N more arguments not recorded]`.
pub fn recorded_command(argv: &[String]) -> Vec<String> {
    let mut budget = MAX_COMMAND_BYTES;
    let mut out = Vec::new();
    for (i, a) in argv.iter().enumerate() {
        if budget == 0 {
            out.push(format!(
                "…[odek: {} more arguments not recorded]",
                argv.len() - i
            ));
            break;
        }
        if a.len() <= budget {
            budget -= a.len();
            out.push(a.clone());
        } else {
            let mut cut = budget;
            while !a.is_char_boundary(cut) {
                cut -= 1;
            }
            out.push(format!(
                "{}…[odek: {} more bytes not recorded]",
                &a[..cut],
                a.len() - cut
            ));
            budget = 0;
        }
    }
    out
}

/// `t` as RFC 3339 in UTC with milliseconds (`2025-01-31T09:30:00.123Z`).
pub fn rfc3339(t: SystemTime) -> String {
    let d = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    let secs = d.as_secs();
    let (y, m, day) = civil_from_days((secs / DAY) as i64);
    let s = secs % DAY;
    format!(
        "{y:04}-{m:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        s / 3600,
        s / 60 % 60,
        s % 60,
        d.subsec_millis()
    )
}

/// The date of day `z` since 1970-01-01 (proleptic Gregorian; Howard
/// Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Where a sandbox's files live: `$ODEK_HOME/sandboxes/<name>` (nothing
/// is touched). Errors: `name` is not a sandbox name (`odek-` followed by
/// letters, digits, `_`, `.` or `-`, at most 64 bytes, the rule of
/// [`crate::launch::validate_sandbox_name`]), so it can never climb out of
/// the directory.
pub(crate) fn sandbox_dir(odek_home: &Path, name: &str) -> Result<PathBuf, String> {
    if !crate::labels::is_sandbox_name(name) {
        return Err(format!(
            "{} is not a sandbox's container name (odek- followed by letters, digits, '_', '.' or '-')",
            crate::text::quote(name)
        ));
    }
    Ok(odek_home.join(SANDBOXES_DIR).join(name))
}

/// [`sandbox_dir`], created when missing: `$ODEK_HOME` (0700, as the
/// launch key makes it), `sandboxes/` and `<name>/` (0700 each), every one
/// checked to be a real directory (a symlink is refused, never followed)
/// of the user or root that group and others cannot write; odek's own
/// `sandboxes/` and `<name>/` are made 0700 when they are more open. For
/// every per-sandbox file of odek: [`prune`] removes the directory whole.
///
/// Errors: a reason naming the path (a symlink, not a directory, another
/// user's or group/other-writable, cannot be created).
pub(crate) fn ensure_sandbox_dir(odek_home: &Path, name: &str) -> Result<PathBuf, String> {
    let dir = sandbox_dir(odek_home, name)?;
    private_dir(odek_home, true, false)?;
    private_dir(&odek_home.join(SANDBOXES_DIR), false, true)?;
    private_dir(&dir, false, true)?;
    Ok(dir)
}

/// Creates `dir` (0700; with `recursive` its parents too) unless it
/// exists, and checks it as [`ensure_sandbox_dir`] says; `tighten` makes
/// an own directory that group or others can enter 0700.
fn private_dir(dir: &Path, recursive: bool, tighten: bool) -> Result<(), String> {
    match std::fs::DirBuilder::new()
        .recursive(recursive)
        .mode(0o700)
        .create(dir)
    {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("{}: cannot create it: {e}", shown(dir))),
    }
    if tighten {
        // Our own real directory is made private; anything else is left
        // for the check below to refuse, untouched.
        let meta = std::fs::symlink_metadata(dir).map_err(|e| format!("{}: {e}", shown(dir)))?;
        if meta.is_dir() && meta.uid() == crate::ownership::euid() && meta.mode() & 0o077 != 0 {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| format!("{}: cannot make it private (0700): {e}", shown(dir)))?;
        }
    }
    checked_dir(dir)?.ok_or_else(|| format!("{} vanished", shown(dir)))?;
    Ok(())
}

/// `dir` as it is, without following a symlink: `None` when absent.
/// Errors: a symlink, not a directory, not private
/// ([`crate::ownership::check_private_meta`]).
fn checked_dir(dir: &Path) -> Result<Option<std::fs::Metadata>, String> {
    let meta = match std::fs::symlink_metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", shown(dir))),
    };
    if meta.file_type().is_symlink() {
        return Err(format!(
            "{} is a symbolic link, which odek never follows here; remove it",
            shown(dir)
        ));
    }
    if !meta.is_dir() {
        return Err(format!("{} is not a directory; remove it", shown(dir)));
    }
    crate::ownership::check_private_meta(dir, &meta).map_err(|r| format!("{} {r}", shown(dir)))?;
    Ok(Some(meta))
}

/// Checks a file opened without following a symlink: a regular file, the
/// user's or root's, not writable by group or others; made 0600 when
/// group or others may read it.
fn checked_file(path: &Path, file: &std::fs::File) -> Result<(), String> {
    let meta = file
        .metadata()
        .map_err(|e| format!("{}: {e}", shown(path)))?;
    if !meta.is_file() {
        return Err(format!("{} is not a regular file; remove it", shown(path)));
    }
    crate::ownership::check_private_meta(path, &meta)
        .map_err(|r| format!("{} {r}", shown(path)))?;
    if meta.mode() & 0o077 != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(|e| format!("{}: cannot make it private (0600): {e}", shown(path)))?;
    }
    Ok(())
}

/// Why an open without following a symlink failed, for a message.
fn open_error(path: &Path, e: &std::io::Error) -> String {
    if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
        format!(
            "{} is a symbolic link, which odek never follows here; remove it",
            shown(path)
        )
    } else {
        format!("{}: {e}", shown(path))
    }
}

/// Flags of every file odek opens here besides the access mode: never a
/// symlink, never waiting on a FIFO, not inherited.
fn no_follow() -> i32 {
    (rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::CLOEXEC)
        .bits() as i32
}

/// Appends `record` to sandbox `name`'s log under `odek_home` (creating
/// the directories and the 0600 file), in one `write`.
///
/// Errors: why it could not (the reason names the path).
pub fn append(odek_home: &Path, name: &str, record: &Record) -> Result<(), String> {
    let path = sandbox_dir(odek_home, name)?.join(LOG_FILE);
    // Created and checked where it is written: the directories and the
    // file are opened through descriptors, none by a path checked before
    // (`host_files::sandbox_dir`, the one opener of a sandbox's directory).
    // (Made first by path, an own directory others can enter tightened;
    // what is used is only what the descriptors show.)
    ensure_sandbox_dir(odek_home, name)?;
    let dir = crate::host_files::sandbox_dir(odek_home, name, true)?
        .ok_or_else(|| format!("{} vanished", shown(&path)))?;
    let mut line = serde_json::to_vec(record).map_err(|e| e.to_string())?;
    line.push(b'\n');
    let fd = rustix::fs::openat(
        &dir,
        LOG_FILE,
        rustix::fs::OFlags::WRONLY
            | rustix::fs::OFlags::APPEND
            | rustix::fs::OFlags::CREATE
            | rustix::fs::OFlags::NOFOLLOW
            | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::from_raw_mode(0o600),
    )
    .map_err(|e| open_error(&path, &std::io::Error::from(e)))?;
    let mut file = std::fs::File::from(fd);
    checked_file(&path, &file)?;
    file.write_all(&line)
        .map_err(|e| format!("{}: cannot write: {e}", shown(&path)))
}

/// Set once this process said that a record could not be written.
static WARNED: AtomicBool = AtomicBool::new(false);

/// Says that a record for sandbox `name` could not be written: on stderr
/// once per process, through `tracing` every time.
fn warn_unrecorded(name: &str, why: &str) {
    tracing::warn!(sandbox = %name, "the call was not recorded in the sandbox's log: {why}");
    if !WARNED.swap(true, Ordering::Relaxed) {
        crate::stderr::line(&format!(
            "odek: warning: a call in sandbox {name} could not be recorded in its log ({}); it ran all the same. Later failures to record are not repeated",
            crate::text::foreign(why)
        ));
    }
}

/// A sandbox call being recorded: made when the call begins, written when
/// [`Call::finish`] (or [`Call::result`]) says how it ended — or, if it is
/// dropped before (the caller stopped waiting, odek was interrupted), with
/// the outcome `"interrupted"`. For the host (no container) it records
/// nothing.
#[must_use = "a call is recorded when it is finished or dropped"]
#[derive(Debug)]
pub struct Call {
    /// `$ODEK_HOME` and the container name; `None` on the host.
    target: Option<(PathBuf, String)>,
    record: Record,
    started: Instant,
    done: bool,
}

impl Call {
    /// A call of `tool` in `sandbox` by `surface`, beginning now.
    pub fn start(sandbox: &Sandbox, surface: Surface, tool: &str) -> Call {
        let container = sandbox.container_id.as_ref().map(|_| sandbox.name.as_str());
        Call::start_in(&sandbox.plan.odek_home, container, surface, tool)
    }

    /// [`Call::start`] for the container named `container` whose records
    /// live under `odek_home`; `None` (the host) records nothing.
    pub fn start_in(
        odek_home: &Path,
        container: Option<&str>,
        surface: Surface,
        tool: &str,
    ) -> Call {
        Call {
            target: container.map(|n| (odek_home.to_path_buf(), n.to_string())),
            record: Record {
                time: rfc3339(SystemTime::now()),
                surface: surface_name(surface).into(),
                tool: tool.into(),
                ..Record::default()
            },
            started: Instant::now(),
            done: false,
        }
    }

    /// A call of `tool` by `surface`, beginning now, whose sandbox is not
    /// known yet (one it launches): [`Call::at`] names it; without, it
    /// records nothing.
    pub fn begin(surface: Surface, tool: &str) -> Call {
        Call::start_in(Path::new(""), None, surface, tool)
    }

    /// The sandbox the call is recorded for (a launched one's, for
    /// [`Call::begin`]); the host records nothing.
    pub fn at(mut self, sandbox: &Sandbox) -> Call {
        self.target = sandbox
            .container_id
            .as_ref()
            .map(|_| (sandbox.plan.odek_home.clone(), sandbox.name.clone()));
        self
    }

    /// The command as run ([`recorded_command`]) and the names of the env
    /// variables it is given.
    pub fn command(mut self, argv: &[String], env: &[(String, String)]) -> Call {
        self.record.command = Some(recorded_command(argv));
        self.record.env_keys = env.iter().map(|(k, _)| k.clone()).collect();
        self
    }

    /// The path a file tool was given.
    pub fn path(mut self, path: &str) -> Call {
        self.record.path = Some(path.into());
        self
    }

    /// The background process the call is about.
    pub fn process(mut self, id: &str) -> Call {
        self.record.process_id = Some(id.into());
        self
    }

    /// The parent sandbox (`sandbox_narrow`).
    pub fn parent(mut self, name: &str) -> Call {
        self.record.parent = Some(name.into());
        self
    }

    /// Records the call as ended: its exit code (if any), outcome and
    /// error ([`error_text`]).
    pub fn finish(mut self, exit_code: Option<i64>, outcome: Option<&str>, error: Option<&Error>) {
        self.write(exit_code, outcome.map(String::from), error.map(error_text));
    }

    /// Records the call as ended with `result`: `ok` gives the outcome of a
    /// success, an error its [`error_text`].
    pub fn result<T>(self, result: &Result<T, Error>, ok: &str) {
        match result {
            Ok(_) => self.finish(None, Some(ok), None),
            Err(e) => self.finish(None, None, Some(e)),
        }
    }

    fn write(&mut self, exit_code: Option<i64>, outcome: Option<String>, error: Option<String>) {
        self.done = true;
        let Some((home, name)) = &self.target else {
            return;
        };
        self.record.exit_code = exit_code;
        self.record.outcome = outcome;
        self.record.error = error;
        self.record.duration_ms = self.started.elapsed().as_millis() as u64;
        if let Err(why) = append(home, name, &self.record) {
            warn_unrecorded(name, &why);
        }
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        if !self.done {
            self.write(None, Some("interrupted".into()), None);
        }
    }
}

/// A sandbox's log as read by [`read`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Log {
    /// The file.
    pub path: PathBuf,
    /// Its records, oldest first.
    pub records: Vec<Record>,
    /// Lines that are not a record (cut short by a crash or a full disk),
    /// left out.
    pub skipped: usize,
}

/// Sandbox `name`'s log under `odek_home`; `None` when there is none. The
/// directories and the file are checked as they are written (no symlink
/// followed, private to the user); at most 256 MiB is read.
///
/// Errors: `name` is not a sandbox name, a check fails, the file cannot
/// be read.
pub fn read(odek_home: &Path, name: &str) -> Result<Option<Log>, String> {
    let path = sandbox_dir(odek_home, name)?.join(LOG_FILE);
    // Through descriptors, no symlink followed (`host_files::sandbox_dir`).
    let Some(dir) = crate::host_files::sandbox_dir(odek_home, name, false)? else {
        return Ok(None);
    };
    let file = match rustix::fs::openat(
        &dir,
        LOG_FILE,
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    ) {
        Ok(fd) => std::fs::File::from(fd),
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(e) => return Err(open_error(&path, &std::io::Error::from(e))),
    };
    checked_file(&path, &file)?;
    let mut bytes = Vec::new();
    file.take(MAX_LOG_READ)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{}: cannot read: {e}", shown(&path)))?;
    let mut records = Vec::new();
    let mut skipped = 0;
    for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        match serde_json::from_slice::<Record>(line) {
            Ok(r) => records.push(r),
            Err(_) => skipped += 1,
        }
    }
    Ok(Some(Log {
        path,
        records,
        skipped,
    }))
}

/// The sandboxes with a directory under `odek_home` (sorted; entries that
/// are not a sandbox's real directory are left out).
pub fn sandboxes(odek_home: &Path) -> Vec<String> {
    let root = odek_home.join(SANDBOXES_DIR);
    if !matches!(checked_dir(&root), Ok(Some(_))) {
        return Vec::new();
    }
    let mut names: Vec<String> = std::fs::read_dir(&root)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| {
                    crate::labels::is_sandbox_name(n)
                        && matches!(checked_dir(&root.join(n)), Ok(Some(_)))
                })
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Removes the log of sandbox `name` (with `None`, of every sandbox) under
/// `odek_home`, and the sandbox's directory when nothing else is left in
/// it. Returns the names whose log was removed.
///
/// Errors: `name` is not a sandbox name; a directory on the way fails its
/// checks (a symlink is never followed); a log cannot be removed.
pub fn clear(odek_home: &Path, name: Option<&str>) -> Result<Vec<String>, String> {
    let names = match name {
        Some(n) => {
            sandbox_dir(odek_home, n)?;
            vec![n.to_string()]
        }
        None => sandboxes(odek_home),
    };
    if checked_dir(&odek_home.join(SANDBOXES_DIR))?.is_none() {
        return Ok(Vec::new());
    }
    let mut removed = Vec::new();
    for n in names {
        let dir = sandbox_dir(odek_home, &n)?;
        if checked_dir(&dir)?.is_none() {
            continue;
        }
        match std::fs::remove_file(dir.join(LOG_FILE)) {
            Ok(()) => removed.push(n),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("{}: cannot remove: {e}", shown(dir.join(LOG_FILE)))),
        }
        let _ = std::fs::remove_file(dir.join(ENDED_FILE));
        // Only when empty: another file of odek's may be kept there.
        let _ = std::fs::remove_dir(&dir);
    }
    Ok(removed)
}

/// Marks sandbox `name` as ended now (odek removed it), when it has a
/// directory: with `retention_days` 0 the directory is removed at once.
/// Never fails: what cannot be done is left for [`prune`].
pub(crate) fn sandbox_ended(odek_home: &Path, name: &str, retention_days: u32) {
    let Some(dir) = existing_dir(odek_home, name) else {
        return;
    };
    if retention_days == 0 {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        mark_ended(&dir, SystemTime::now());
    }
}

/// Marks sandbox `name` as ended now when it has a directory, whatever
/// the retention (`odek sandbox gc`, which knows no plan: [`prune`]
/// applies the operator's retention later). Never fails.
pub(crate) fn sandbox_gone(odek_home: &Path, name: &str) {
    if let Some(dir) = existing_dir(odek_home, name) {
        mark_ended(&dir, SystemTime::now());
    }
}

/// Sandbox `name`'s directory when it exists and passes its checks.
fn existing_dir(odek_home: &Path, name: &str) -> Option<PathBuf> {
    let dir = sandbox_dir(odek_home, name).ok()?;
    matches!(checked_dir(&dir), Ok(Some(_))).then_some(dir)
}

/// Writes the end marker of the sandbox directory `dir`, dated `at`.
fn mark_ended(dir: &Path, at: SystemTime) {
    let path = dir.join(ENDED_FILE);
    if let Ok(f) = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(no_follow())
        .open(&path)
    {
        if checked_file(&path, &f).is_ok() {
            let _ = f.set_modified(at);
        }
    }
}

/// The containers on the engine when [`prune`] looked: their names, and
/// when the listing was made (a directory written after it may belong to
/// a sandbox launched since, and is not taken as gone).
#[derive(Clone, Debug)]
pub struct Listed {
    /// Names of the odek containers on the engine, in any state.
    pub names: Vec<String>,
    /// When they were listed.
    pub at: SystemTime,
}

/// Removes the directories under `odek_home` of sandboxes that ended more
/// than `retention_days` days before `now`, and returns their names. A
/// sandbox has ended when odek marked it (`sandbox_ended`) and nothing
/// was recorded since; with `listed` also when no container of its name
/// was on the engine and nothing was recorded since the listing (it is
/// marked as ended now). Without `listed`, only marked sandboxes are
/// pruned. Symlinks are never followed; entries that are not a sandbox's
/// directory are left alone.
pub fn prune(
    odek_home: &Path,
    retention_days: u32,
    listed: Option<&Listed>,
    now: SystemTime,
) -> Vec<String> {
    let keep = Duration::from_secs(u64::from(retention_days) * DAY);
    let mut pruned = Vec::new();
    for name in sandboxes(odek_home) {
        let Ok(dir) = sandbox_dir(odek_home, &name) else {
            continue;
        };
        let Some(activity) = last_activity(&dir) else {
            continue;
        };
        let marked = modified(&dir.join(ENDED_FILE)).filter(|m| *m >= activity);
        let ended = match (marked, listed) {
            (Some(at), _) => at,
            (None, Some(l)) if !l.names.contains(&name) && activity < l.at => {
                let at = now.max(activity);
                mark_ended(&dir, at);
                at
            }
            _ => continue,
        };
        if ended + keep <= now && std::fs::remove_dir_all(&dir).is_ok() {
            pruned.push(name);
        }
    }
    pruned
}

/// The newest modification time of the regular files in `dir` but the
/// end marker (the last record written); the directory's own when it has
/// none. `None` when it cannot be read.
fn last_activity(dir: &Path) -> Option<SystemTime> {
    let mut newest = None;
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        if e.file_name() == ENDED_FILE {
            continue;
        }
        if let Ok(m) = e.metadata() {
            if m.is_file() {
                if let Ok(t) = m.modified() {
                    newest = newest.max(Some(t));
                }
            }
        }
    }
    newest.or_else(|| modified(dir))
}

/// `path`'s modification time, without following a symlink.
fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::symlink_metadata(path).ok()?.modified().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn home() -> tempfile::TempDir {
        let d = tempfile::tempdir().expect("tempdir");
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o700)).expect("chmod");
        d
    }

    fn rec(tool: &str) -> Record {
        Record {
            time: rfc3339(SystemTime::now()),
            surface: "cli".into(),
            tool: tool.into(),
            command: Some(vec!["echo".into(), "hi".into()]),
            exit_code: Some(0),
            ..Record::default()
        }
    }

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).expect("stat").mode() & 0o777
    }

    #[test]
    fn times_are_rfc3339_utc() {
        let at = |s: u64, ms: u64| {
            rfc3339(SystemTime::UNIX_EPOCH + Duration::from_millis(s * 1000 + ms))
        };
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(at(1_700_000_000, 123), "2023-11-14T22:13:20.123Z");
        assert_eq!(at(4_107_542_399, 999), "2100-02-28T23:59:59.999Z");
    }

    #[test]
    fn a_record_is_one_private_line_of_json() {
        let h = home();
        append(h.path(), "odek-abc", &rec("exec")).expect("append");
        append(h.path(), "odek-abc", &rec("run")).expect("append");
        let dir = h.path().join(SANDBOXES_DIR).join("odek-abc");
        assert_eq!(mode(&h.path().join(SANDBOXES_DIR)), 0o700);
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join(LOG_FILE)), 0o600);
        let text = std::fs::read_to_string(dir.join(LOG_FILE)).expect("read");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        let v: serde_json::Value = serde_json::from_str(lines[0]).expect("json");
        assert_eq!(v["tool"], "exec");
        assert_eq!(v["surface"], "cli");
        assert_eq!(v["command"], serde_json::json!(["echo", "hi"]));
        assert_eq!(v["exit_code"], 0);
        assert!(
            v.get("duration_ms").is_some() && v.get("path").is_none(),
            "{v}"
        );
        let log = read(h.path(), "odek-abc").expect("read").expect("a log");
        assert_eq!(log.records.len(), 2);
        assert_eq!(log.records[1].tool, "run");
        assert_eq!(read(h.path(), "odek-none").expect("read"), None);
        // A log another program made readable by others is made private.
        std::fs::set_permissions(dir.join(LOG_FILE), std::fs::Permissions::from_mode(0o644))
            .expect("chmod");
        append(h.path(), "odek-abc", &rec("exec")).expect("append");
        assert_eq!(mode(&dir.join(LOG_FILE)), 0o600);
    }

    #[test]
    fn names_that_are_no_sandbox_name_are_refused() {
        let h = home();
        for bad in ["../x", "odek-a/b", "other", "odek-", ".", ""] {
            assert!(append(h.path(), bad, &rec("exec")).is_err(), "{bad}");
            assert!(read(h.path(), bad).is_err(), "{bad}");
        }
        assert!(!h.path().join(SANDBOXES_DIR).join("..").join("x").exists());
    }

    #[test]
    fn env_values_are_never_recorded() {
        let h = home();
        Call::start_in(h.path(), Some("odek-envtest"), Surface::Mcp, "exec")
            .command(
                &["printenv".into(), "TOKEN".into()],
                &[("TOKEN".into(), "s3cr3t-value".into())],
            )
            .finish(Some(0), Some("exited"), None);
        let path = h
            .path()
            .join(SANDBOXES_DIR)
            .join("odek-envtest")
            .join(LOG_FILE);
        let text = std::fs::read_to_string(path).expect("read");
        assert!(!text.contains("s3cr3t-value"), "{text}");
        let log = read(h.path(), "odek-envtest").expect("read").expect("log");
        assert_eq!(log.records[0].env_keys, ["TOKEN"]);
        assert_eq!(log.records[0].surface, "mcp");
        assert_eq!(
            log.records[0].command.as_deref(),
            Some(&["printenv".to_string(), "TOKEN".to_string()][..])
        );
    }

    #[test]
    fn the_host_is_not_recorded_and_a_dropped_call_is_interrupted() {
        let h = home();
        Call::start_in(h.path(), None, Surface::Cli, "run").finish(Some(0), Some("exited"), None);
        assert!(!h.path().join(SANDBOXES_DIR).exists());
        drop(
            Call::start_in(h.path(), Some("odek-drop"), Surface::Cli, "run")
                .command(&["sleep".into(), "9".into()], &[]),
        );
        let log = read(h.path(), "odek-drop").expect("read").expect("log");
        assert_eq!(log.records[0].outcome.as_deref(), Some("interrupted"));
        assert_eq!(log.records[0].exit_code, None);
    }

    #[test]
    fn a_symlink_at_the_log_or_a_directory_is_refused() {
        let h = home();
        let target = h.path().join("elsewhere");
        std::fs::write(&target, b"keep\n").expect("write");
        let dir = h.path().join(SANDBOXES_DIR).join("odek-link");
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::os::unix::fs::symlink(&target, dir.join(LOG_FILE)).expect("symlink");
        let e = append(h.path(), "odek-link", &rec("exec")).expect_err("a symlinked log");
        assert!(e.contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read(&target).expect("read"), b"keep\n");
        assert!(read(h.path(), "odek-link").is_err());
        // The sandbox's directory itself a symlink.
        let real = h.path().join("real");
        std::fs::create_dir(&real).expect("mkdir");
        std::os::unix::fs::symlink(&real, h.path().join(SANDBOXES_DIR).join("odek-dirlink"))
            .expect("symlink");
        let e = append(h.path(), "odek-dirlink", &rec("exec")).expect_err("a symlinked dir");
        assert!(e.contains("symbolic link"), "{e}");
        assert!(std::fs::read_dir(&real).expect("ls").next().is_none());
        assert!(clear(h.path(), Some("odek-dirlink")).is_err());
        // Clearing removes the planted link itself, never what it names,
        // and never goes through a symlinked directory.
        assert_eq!(clear(h.path(), None).expect("clear"), ["odek-link"]);
        assert_eq!(std::fs::read(&target).expect("read"), b"keep\n");
        assert!(h.path().join(SANDBOXES_DIR).join("odek-dirlink").exists());
    }

    #[test]
    fn a_directory_others_can_write_is_refused() {
        let h = home();
        append(h.path(), "odek-open", &rec("exec")).expect("append");
        let dir = h.path().join(SANDBOXES_DIR).join("odek-open");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        // Ours: made private again (not refused).
        append(h.path(), "odek-open", &rec("exec")).expect("append");
        assert_eq!(mode(&dir), 0o700);
        std::fs::set_permissions(h.path(), std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let e = append(h.path(), "odek-open", &rec("exec")).expect_err("open $ODEK_HOME");
        assert!(e.contains("chmod go-w"), "{e}");
        std::fs::set_permissions(h.path(), std::fs::Permissions::from_mode(0o700)).expect("chmod");
    }

    #[test]
    fn concurrent_appends_never_interleave() {
        let h = home();
        let home = h.path().to_path_buf();
        let writers: Vec<_> = (0..8)
            .map(|w| {
                let home = home.clone();
                std::thread::spawn(move || {
                    for i in 0..200 {
                        let mut r = rec("exec");
                        // Lines of several KiB: more than one page each.
                        r.command = Some(vec![format!("{w}-{i}-{}", "x".repeat(5000 + w * 300))]);
                        append(&home, "odek-many", &r).expect("append");
                    }
                })
            })
            .collect();
        for t in writers {
            t.join().expect("writer");
        }
        let log = read(&home, "odek-many").expect("read").expect("log");
        assert_eq!(log.skipped, 0);
        assert_eq!(log.records.len(), 8 * 200);
        for r in &log.records {
            let arg = &r.command.as_ref().expect("command")[0];
            let w: usize = arg.split('-').next().expect("w").parse().expect("number");
            assert_eq!(arg.matches('x').count(), 5000 + w * 300, "a torn line");
        }
    }

    #[test]
    fn long_commands_are_cut_with_a_marker() {
        let small = vec!["sh".to_string(), "-c".to_string(), "echo hi".to_string()];
        assert_eq!(recorded_command(&small), small);
        let big = vec![
            "a".repeat(MAX_COMMAND_BYTES - 2),
            "é".repeat(10),
            "z".into(),
        ];
        let cut = recorded_command(&big);
        assert_eq!(cut.len(), 3, "{:?}", &cut[1..]);
        assert!(cut[1].starts_with('é') && cut[1].contains("…[odek: 18 more bytes not recorded]"));
        assert_eq!(cut[2], "…[odek: 1 more arguments not recorded]");
    }

    #[test]
    fn errors_are_recorded_in_a_few_words() {
        let e = Error::File(crate::error::FileError {
            kind: crate::error::FileErrorKind::NotFound,
            path: "/workspace/secret.txt".into(),
            message: "the content".into(),
        });
        assert_eq!(error_text(&e), "refused: not_found");
        assert_eq!(error_text(&Error::Usage("TOKEN=abc".into())), "usage");
    }

    #[test]
    fn records_of_ended_sandboxes_are_pruned_after_their_retention() {
        let h = home();
        let day = Duration::from_secs(DAY);
        for n in ["odek-live", "odek-gone", "odek-ended", "odek-old"] {
            append(h.path(), n, &rec("exec")).expect("append");
        }
        let now = SystemTime::now();
        // Marked ended: kept within the retention, pruned after it.
        sandbox_ended(h.path(), "odek-ended", 7);
        assert!(prune(h.path(), 7, None, now + 6 * day).is_empty());
        // Without a listing, nothing unmarked is touched.
        assert_eq!(prune(h.path(), 7, None, now + 8 * day), ["odek-ended"]);
        // With one: a sandbox not listed is marked ended as of now, one
        // listed is alive whatever its age.
        let listed = Listed {
            names: vec!["odek-live".into()],
            at: now + Duration::from_secs(1),
        };
        assert!(prune(h.path(), 7, Some(&listed), now).is_empty());
        assert!(h
            .path()
            .join(SANDBOXES_DIR)
            .join("odek-gone")
            .join(ENDED_FILE)
            .exists());
        assert!(!h
            .path()
            .join(SANDBOXES_DIR)
            .join("odek-live")
            .join(ENDED_FILE)
            .exists());
        let mut left = prune(h.path(), 7, Some(&listed), now + 8 * day);
        left.sort();
        assert_eq!(left, ["odek-gone", "odek-old"]);
        assert_eq!(sandboxes(h.path()), ["odek-live"]);
        // A record written after the end mark: alive again (a name used
        // again), not pruned on the old mark.
        sandbox_ended(h.path(), "odek-live", 7);
        let marker = h
            .path()
            .join(SANDBOXES_DIR)
            .join("odek-live")
            .join(ENDED_FILE);
        std::fs::File::options()
            .write(true)
            .open(&marker)
            .and_then(|f| f.set_modified(now - day))
            .expect("date the marker");
        append(h.path(), "odek-live", &rec("exec")).expect("append");
        assert!(prune(h.path(), 7, None, now + 30 * day).is_empty());
        // Retention 0: removed when odek ends the sandbox.
        sandbox_ended(h.path(), "odek-live", 0);
        assert!(sandboxes(h.path()).is_empty());
    }

    #[test]
    fn a_directory_made_after_the_listing_is_not_taken_as_gone() {
        let h = home();
        let listed = Listed {
            names: vec![],
            at: SystemTime::now() - Duration::from_secs(60),
        };
        append(h.path(), "odek-new", &rec("exec")).expect("append");
        assert!(prune(h.path(), 0, Some(&listed), SystemTime::now()).is_empty());
        assert_eq!(sandboxes(h.path()), ["odek-new"]);
    }

    #[test]
    fn clear_removes_logs_and_keeps_other_files() {
        let h = home();
        append(h.path(), "odek-a", &rec("exec")).expect("append");
        append(h.path(), "odek-b", &rec("exec")).expect("append");
        let other = ensure_sandbox_dir(h.path(), "odek-b")
            .expect("dir")
            .join("host-files.json");
        std::fs::write(&other, b"{}").expect("write");
        assert_eq!(clear(h.path(), Some("odek-a")).expect("clear"), ["odek-a"]);
        assert!(!h.path().join(SANDBOXES_DIR).join("odek-a").exists());
        assert_eq!(clear(h.path(), None).expect("clear"), ["odek-b"]);
        assert!(other.exists());
        assert_eq!(read(h.path(), "odek-b").expect("read"), None);
        assert_eq!(clear(h.path(), None).expect("clear"), Vec::<String>::new());
    }
}
