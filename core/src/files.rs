//! File tools (docs/MCP.md, "File tools"; docs/SANDBOXING.md, "File
//! tools"): read, write, edit and list files **inside** a sandbox, as its
//! command user, with its mounts.
//!
//! Each operation is one ordinary command of the sandbox: the supervisor
//! binary's `fs` mode (`/.odek/odek-supervisor fs read|write|list …`, see
//! `supervisor/src/fs.rs`) run through the supervised exec path
//! ([`Client::exec_io`]), so it has exactly a command's uid, capabilities
//! (none), no-new-privs, working directory and mounts. A path and every
//! symlink in it resolve in the sandbox's mount namespace, never on the
//! host; a read-only workspace (`sandbox_readonly`) refuses a write with
//! `EROFS`. Content goes over the command's stdin and stdout, so its size
//! is bounded by [`FILE_WRITE_LIMIT`] and [`FILE_READ_LIMIT`], not by an
//! argument list. Nothing depends on the image's programs.
//!
//! Without the supervisor (`ODEK_SUPERVISOR=` or a supervisor that did not
//! start) or on the host (fallback, `--no-sandbox`), every operation is
//! refused ([`FileErrorKind::NoSupervisor`]) before anything runs: the
//! Docker exec API would run the operation as the container's user (root,
//! with the supervisor's capabilities when it has them), and a fallback to
//! the image's `cat`/`sh` would depend on the image.
//!
//! Each operation is recorded in the sandbox's log ([`crate::audit`]) by
//! its tool's name and path, never its content; the `fs` command under it
//! is not recorded again.
//!
//! [`Client::edit_file`] reads the file, applies the edits here
//! ([`apply_edits`], the one implementation every front end uses) and
//! writes it back; it is not atomic against a process in the sandbox
//! writing the same file between the read and the write.

use std::sync::Mutex;
use std::time::Duration;

use base64::Engine as _;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::client::Client;
use crate::engine::StreamKind;
use crate::error::{check_schema_tag, Error, FileError, FileErrorKind, RequestError, Result};
use crate::exec::{Command, ExecIo, ExecOptions, ExecRequest};
use crate::sandbox::Sandbox;
use odek_supervisor::proto::{FS_LINE_MAX, FS_LIST_MAX_BYTES};

/// The directory a relative path resolves against: the sandbox's
/// workspace, the developer's live checkout.
pub const WORKSPACE: &str = "/workspace";

/// Most bytes one [`Client::read_file`] returns (4 MiB, before base64):
/// a larger file is read in pieces with `offset` and `length`.
pub const FILE_READ_LIMIT: u64 = 4 << 20;

/// Most bytes [`Client::write_file`] writes, and the largest file
/// [`Client::edit_file`] edits (16 MiB, after base64 decoding).
pub const FILE_WRITE_LIMIT: u64 = 16 << 20;

/// Most entries [`Client::list_directory`] returns (the first ones by
/// name; the result says `truncated` and the directory's `total`).
pub const LIST_MAX_ENTRIES: u64 = odek_supervisor::proto::FS_LIST_MAX_ENTRIES as u64;

/// Most bytes of the entries [`Client::list_directory`] returns, as JSON
/// (4 MiB): entries past it are left out as [`LIST_MAX_ENTRIES`] leaves
/// them out.
pub const LIST_MAX_BYTES: u64 = odek_supervisor::proto::FS_LIST_MAX_BYTES as u64;

/// Most bytes of the unified diff [`Client::edit_file`] returns (256
/// KiB); a longer one is cut at a line's end.
pub const EDIT_DIFF_LIMIT: usize = 256 * 1024;

/// How long [`Client::edit_file`]'s diff may search for the smallest
/// change before it settles for a larger one (whole runs of lines removed
/// and added).
const DIFF_TIMEOUT: Duration = Duration::from_secs(2);

/// How long the diff and the edits together may take before the edit is
/// written without a diff (`diff_truncated`).
const DIFF_BUDGET: Duration = Duration::from_secs(20);

/// How long one file operation may take before it is killed.
const FILE_TIMEOUT: Duration = Duration::from_secs(120);

/// Most bytes of an operation's stderr kept (its refusal is one line).
const STDERR_KEEP: usize = 64 * 1024;

/// Schema tag of [`ReadFileResult`].
pub const READ_FILE_RESULT_SCHEMA: &str = "odek.read-file-result/1";
/// Schema tag of [`WriteFileResult`].
pub const WRITE_FILE_RESULT_SCHEMA: &str = "odek.write-file-result/1";
/// Schema tag of [`EditFileResult`].
pub const EDIT_FILE_RESULT_SCHEMA: &str = "odek.edit-file-result/1";
/// Schema tag of [`ListDirectoryResult`].
pub const LIST_DIRECTORY_RESULT_SCHEMA: &str = "odek.list-directory-result/1";

/// How file content travels as a JSON string.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum FileEncoding {
    /// UTF-8 text (the default). Reading bytes that are not UTF-8 as text
    /// is refused.
    #[default]
    #[serde(rename = "utf-8", alias = "utf8")]
    Utf8,
    /// Any bytes, as standard base64 with padding.
    #[serde(rename = "base64")]
    Base64,
}

/// A read of (part of) a file in the sandbox (`"odek.read-file-request/1"`,
/// `odek_read_file`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "odek.read-file-request/1")]
pub struct ReadFileRequest {
    /// Optional schema tag, `"odek.read-file-request/1"`.
    #[serde(default)]
    pub schema: Option<String>,
    /// The file, inside the sandbox; a relative path is under `/workspace`.
    pub path: String,
    /// `"utf-8"` (default) or `"base64"`.
    #[serde(default)]
    pub encoding: FileEncoding,
    /// The first byte to read (default 0).
    #[serde(default)]
    pub offset: Option<u64>,
    /// Most bytes to read (default and maximum: 4 MiB, 4194304).
    #[serde(default)]
    pub length: Option<u64>,
}

/// What [`Client::read_file`] read (`"odek.read-file-result/1"`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "odek.read-file-result/1")]
pub struct ReadFileResult {
    /// Always `"odek.read-file-result/1"`.
    pub schema: String,
    /// The file read (absolute, inside the sandbox).
    pub path: String,
    /// The encoding of `content`: `"utf-8"` or `"base64"`.
    pub encoding: FileEncoding,
    /// The bytes read: text, or base64.
    pub content: String,
    /// The file's whole size in bytes. For a file whose size the kernel
    /// does not say (most of `/proc` and `/sys`, which report 0), the
    /// bytes up to where this piece ends, plus 1 when more follows (then
    /// `truncated` is true).
    pub size: u64,
    /// The first byte read. As text, a piece starts at the first whole
    /// UTF-8 character at or after the `offset` asked for (up to 3 bytes
    /// later when that offset falls inside a character).
    pub offset: u64,
    /// How many bytes `content` holds (before base64). As text, a piece
    /// that would end inside a UTF-8 character ends before it.
    pub length: u64,
    /// True when the file goes on after this piece (`next_offset` reads on).
    pub truncated: bool,
    /// Where the next piece starts when `truncated`, else null.
    pub next_offset: Option<u64>,
    /// Most bytes one read returns (4194304, 4 MiB).
    pub limit: u64,
}

/// A write of a whole file in the sandbox (`"odek.write-file-request/1"`,
/// `odek_write_file`): creates the file and its parent directories, or
/// replaces its content (keeping its permission bits).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "odek.write-file-request/1")]
pub struct WriteFileRequest {
    /// Optional schema tag, `"odek.write-file-request/1"`.
    #[serde(default)]
    pub schema: Option<String>,
    /// The file, inside the sandbox; a relative path is under `/workspace`.
    pub path: String,
    /// The new content, as `encoding` says: at most 16 MiB (16777216
    /// bytes) once decoded.
    pub content: String,
    /// `"utf-8"` (default) or `"base64"`.
    #[serde(default)]
    pub encoding: FileEncoding,
}

/// What [`Client::write_file`] wrote (`"odek.write-file-result/1"`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "odek.write-file-result/1")]
pub struct WriteFileResult {
    /// Always `"odek.write-file-result/1"`.
    pub schema: String,
    /// The file written (absolute, inside the sandbox, symlinks resolved
    /// there).
    pub path: String,
    /// Bytes written.
    pub bytes_written: u64,
    /// True when the file did not exist before.
    pub created: bool,
}

/// One exact-text replacement of an edit.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileEdit {
    /// The text to replace: it must occur exactly once in the file (as the
    /// earlier edits left it), whitespace and line endings included.
    #[serde(rename = "oldText")]
    pub old_text: String,
    /// The text that replaces it.
    #[serde(rename = "newText")]
    pub new_text: String,
}

/// Exact-text edits of a UTF-8 file in the sandbox
/// (`"odek.edit-file-request/1"`, `odek_edit_file`): applied in order,
/// all or none.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "odek.edit-file-request/1")]
pub struct EditFileRequest {
    /// Optional schema tag, `"odek.edit-file-request/1"`.
    #[serde(default)]
    pub schema: Option<String>,
    /// The file, inside the sandbox; a relative path is under `/workspace`.
    pub path: String,
    /// The replacements, applied in order; an `oldText` that is absent or
    /// occurs more than once refuses the whole edit (nothing is written).
    pub edits: Vec<FileEdit>,
}

/// What [`Client::edit_file`] changed (`"odek.edit-file-result/1"`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "odek.edit-file-result/1")]
pub struct EditFileResult {
    /// Always `"odek.edit-file-result/1"`.
    pub schema: String,
    /// The file edited (absolute, inside the sandbox).
    pub path: String,
    /// The change as a unified diff (3 lines of context; empty when the
    /// edits changed nothing, and then nothing was written). At most
    /// [`EDIT_DIFF_LIMIT`] bytes: a longer one is cut at a line's end and
    /// ends with a line saying so (`diff_truncated`).
    pub diff: String,
    /// True when `diff` was cut (or could not be computed in time): read
    /// the file for the rest. The edit itself was applied in full.
    #[serde(default)]
    pub diff_truncated: bool,
    /// How many edits were applied.
    pub edits: u64,
}

/// A listing of one directory in the sandbox
/// (`"odek.list-directory-request/1"`, `odek_list_directory`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "odek.list-directory-request/1")]
pub struct ListDirectoryRequest {
    /// Optional schema tag, `"odek.list-directory-request/1"`.
    #[serde(default)]
    pub schema: Option<String>,
    /// The directory, inside the sandbox; a relative path is under
    /// `/workspace` (`"."` is `/workspace` itself).
    pub path: String,
}

/// The type of a directory entry (a symlink is not followed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EntryType {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (`target` is its text).
    Symlink,
    /// Anything else: a FIFO, a socket, a device.
    Other,
}

/// One entry of a directory listing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DirEntry {
    /// The entry's name.
    pub name: String,
    /// What it is.
    #[serde(rename = "type")]
    pub entry_type: EntryType,
    /// A regular file's size in bytes; null for the rest.
    pub size: Option<u64>,
    /// A symlink's target as written in the link; null for the rest.
    pub target: Option<String>,
}

/// What [`Client::list_directory`] found (`"odek.list-directory-result/1"`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "odek.list-directory-result/1")]
pub struct ListDirectoryResult {
    /// Always `"odek.list-directory-result/1"`.
    pub schema: String,
    /// The directory listed (absolute, inside the sandbox).
    pub path: String,
    /// Its entries, sorted by name: at most [`LIST_MAX_ENTRIES`] (the
    /// first by name) and [`LIST_MAX_BYTES`] of them as JSON.
    pub entries: Vec<DirEntry>,
    /// The entries one a line, `[FILE] name`, `[DIR] name`, `[SYMLINK]
    /// name -> target` or `[OTHER] name`; when `truncated`, a last line
    /// says how many entries were left out.
    pub listing: String,
    /// How many entries the directory holds (more than `entries` when
    /// `truncated`).
    #[serde(default)]
    pub total: u64,
    /// True when `entries` holds only the first of them by name: list a
    /// subdirectory, or run a command that filters (`find`, `ls | grep`).
    #[serde(default)]
    pub truncated: bool,
}

/// The `listing` text of `entries`: one line each, the name and a
/// symlink's target made one safe line by `text::foreign` (a file named
/// `x\n[DIR] .ssh` or holding U+202E cannot forge an entry or reorder the
/// text a model reads; `entries` keeps the exact names).
fn listing_of(entries: &[DirEntry], total: u64) -> String {
    let f = crate::text::foreign;
    let mut lines: Vec<String> = entries
        .iter()
        .map(|e| match (e.entry_type, &e.target) {
            (EntryType::File, _) => format!("[FILE] {}", f(&e.name)),
            (EntryType::Dir, _) => format!("[DIR] {}", f(&e.name)),
            (EntryType::Symlink, Some(t)) => format!("[SYMLINK] {} -> {}", f(&e.name), f(t)),
            (EntryType::Symlink, None) => format!("[SYMLINK] {}", f(&e.name)),
            (EntryType::Other, _) => format!("[OTHER] {}", f(&e.name)),
        })
        .collect();
    let shown = entries.len() as u64;
    if total > shown {
        lines.push(format!(
            "({} more entries not shown: the directory holds {total}, these are the first {shown} by name; list a subdirectory, or use exec with find or ls and a filter)",
            total - shown
        ));
    }
    lines.join("\n")
}

/// `path` as the sandbox sees it: absolute as given, relative under
/// [`WORKSPACE`]. Errors (usage): empty, or holding a NUL byte.
pub fn sandbox_path(path: &str) -> std::result::Result<String, RequestError> {
    if path.is_empty() {
        return Err(RequestError(
            "`path` is empty: name a file inside the sandbox, e.g. \"src/main.rs\" (under /workspace) or \"/tmp/out.txt\"".into(),
        ));
    }
    if path.contains('\0') {
        return Err(RequestError("`path` holds a NUL byte".into()));
    }
    if path.starts_with('/') {
        Ok(path.to_string())
    } else if path == "." {
        Ok(WORKSPACE.to_string())
    } else {
        Ok(format!(
            "{WORKSPACE}/{}",
            path.strip_prefix("./").unwrap_or(path)
        ))
    }
}

/// A refusal of `kind` for `path`.
fn refused(kind: FileErrorKind, path: &str, message: String) -> Error {
    Error::File(FileError {
        kind,
        path: path.to_string(),
        message,
    })
}

/// How many times `needle` occurs in `hay`, overlapping ones counted, up to
/// 2 (all an edit needs to know).
fn occurrences(hay: &str, needle: &str) -> usize {
    let mut n = 0;
    let mut from = 0;
    while let Some(at) = hay[from..].find(needle) {
        n += 1;
        if n == 2 {
            break;
        }
        let start = from + at;
        // The next char boundary after this match's start.
        from = start + hay[start..].chars().next().map_or(1, char::len_utf8);
    }
    n
}

/// Applies `edits` to `text` in order, each to the text the earlier ones
/// left: every `old_text` must occur exactly once. Returns the new text.
///
/// Errors ([`Error::File`], nothing is changed): an empty `edits`
/// (usage), an empty or absent `old_text` ([`FileErrorKind::EditNotFound`]),
/// one found more than once ([`FileErrorKind::EditAmbiguous`]); the
/// message names the edit (1-based) and the fix.
pub fn apply_edits(path: &str, text: &str, edits: &[FileEdit]) -> Result<String> {
    if edits.is_empty() {
        return Err(Error::Usage(
            "`edits` is empty: pass at least one {\"oldText\", \"newText\"}".into(),
        ));
    }
    let total = edits.len();
    let mut text = text.to_string();
    for (i, e) in edits.iter().enumerate() {
        let which = if total == 1 {
            "the edit".to_string()
        } else {
            format!("edit {} of {total}", i + 1)
        };
        if e.old_text.is_empty() {
            return Err(refused(
                FileErrorKind::EditNotFound,
                path,
                format!("{which} has an empty oldText; nothing was written to {path}. Give the exact text to replace (write_file replaces a whole file)"),
            ));
        }
        match occurrences(&text, &e.old_text) {
            0 => {
                return Err(refused(
                    FileErrorKind::EditNotFound,
                    path,
                    format!(
                        "{which}: oldText is not in {path}{}; nothing was written. It must match the file exactly, whitespace and line endings included: read the file and copy the text",
                        if i > 0 { " (after the earlier edits)" } else { "" }
                    ),
                ))
            }
            1 => text = text.replacen(&e.old_text, &e.new_text, 1),
            _ => {
                return Err(refused(
                    FileErrorKind::EditAmbiguous,
                    path,
                    format!(
                        "{which}: oldText occurs more than once in {path}{}; nothing was written. Include enough surrounding lines that it matches exactly one place",
                        if i > 0 { " (after the earlier edits)" } else { "" }
                    ),
                ))
            }
        }
    }
    Ok(text)
}

/// A unified diff of `old` → `new` for `path` (3 lines of context), and
/// whether it was cut: at most `limit` bytes, cut at a line's end, with a
/// last line saying so; empty when they are equal. The search for the
/// smallest diff gives up after 2 s (`DIFF_TIMEOUT`) and settles for a larger
/// one (runs of lines removed and added whole), so a pathological pair
/// (millions of short distinct lines, all changed) costs seconds, not
/// hours. CPU-bound: run it off the async runtime
/// ([`tokio::task::spawn_blocking`]), as [`Client::edit_file`] does.
pub fn unified_diff(path: &str, old: &str, new: &str, limit: usize) -> (String, bool) {
    if old == new {
        return (String::new(), false);
    }
    let diff = similar::TextDiff::configure()
        .timeout(DIFF_TIMEOUT)
        .diff_lines(old, new);
    let mut unified = diff.unified_diff();
    unified
        .context_radius(3)
        .header(&format!("a{path}"), &format!("b{path}"));
    let mut out = Capped {
        text: String::new(),
        limit,
        cut: false,
    };
    let _ = std::fmt::Write::write_fmt(&mut out, format_args!("{unified}"));
    if !out.cut {
        return (out.text, false);
    }
    let keep = out.text.rfind('\n').map_or(0, |i| i + 1);
    out.text.truncate(keep);
    out.text.push_str(&format!(
        "(the diff is cut here: it is longer than {limit} bytes; the edit was applied in full, read the file to see the rest)\n"
    ));
    (out.text, true)
}

/// A `fmt::Write` that keeps at most `limit` bytes and then fails, which
/// stops the formatting that writes into it.
struct Capped {
    text: String,
    limit: usize,
    cut: bool,
}

impl std::fmt::Write for Capped {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let room = self.limit.saturating_sub(self.text.len());
        if s.len() <= room {
            self.text.push_str(s);
            return Ok(());
        }
        let mut end = room;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.text.push_str(&s[..end]);
        self.cut = true;
        Err(std::fmt::Error)
    }
}

/// [`apply_edits`] and then [`unified_diff`] (at most
/// [`EDIT_DIFF_LIMIT`] bytes), each on a blocking thread, never on the
/// async runtime, so that other calls are served meanwhile: the new text,
/// the diff and whether it was cut. A diff that is not done within
/// [`DIFF_BUDGET`] is given up (its thread finishes on its own): the
/// text says so and it counts as cut.
///
/// Errors: those of [`apply_edits`].
pub(crate) async fn edit_and_diff(
    path: &str,
    old: String,
    edits: Vec<FileEdit>,
) -> Result<(String, String, bool)> {
    let p = path.to_string();
    let (old, new) =
        tokio::task::spawn_blocking(move || apply_edits(&p, &old, &edits).map(|new| (old, new)))
            .await
            .map_err(|e| Error::Usage(format!("the edit of {path} failed: {e}")))??;
    if old == new {
        return Ok((new, String::new(), false));
    }
    let new = std::sync::Arc::<str>::from(new);
    let (p, n) = (path.to_string(), std::sync::Arc::clone(&new));
    let diffing = tokio::task::spawn_blocking(move || unified_diff(&p, &old, &n, EDIT_DIFF_LIMIT));
    let (diff, cut) = match tokio::time::timeout(DIFF_BUDGET, diffing).await {
        Ok(Ok(d)) => d,
        _ => (
            format!(
                "(no diff: it was not computed within {} s; the edit was applied in full, read the file to see it)\n",
                DIFF_BUDGET.as_secs()
            ),
            true,
        ),
    };
    Ok((new.to_string(), diff, cut))
}

/// The supervisor's refusal line (`fs.rs`).
#[derive(Deserialize)]
struct FsRefusal {
    kind: String,
    #[serde(default)]
    message: String,
}

/// The head line of `fs read`.
#[derive(Deserialize)]
struct ReadHead {
    size: u64,
    offset: u64,
    length: u64,
}

/// The line of `fs write`.
#[derive(Deserialize)]
struct Written {
    path: String,
    bytes: u64,
    created: bool,
}

/// The line of `fs list` (`total` and `truncated` absent from a
/// supervisor older than them).
#[derive(Deserialize)]
struct Listed {
    path: String,
    entries: Vec<DirEntry>,
    #[serde(default)]
    total: Option<u64>,
    #[serde(default)]
    truncated: bool,
}

/// What a write was for, in messages.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Read,
    Write,
    List,
}

impl Client {
    /// Reads (part of) a file inside `sandbox`, as its command user: at
    /// most [`FILE_READ_LIMIT`] bytes from `offset` (the result says the
    /// file's size and whether it goes on).
    ///
    /// Errors ([`Error::File`], by [`FileErrorKind`]): the path absent, a
    /// directory or not a regular file, not readable by the command user;
    /// text asked for and the bytes are not UTF-8 (`NotUtf8`: read it with
    /// [`FileEncoding::Base64`]); no supervisor in the sandbox
    /// (`NoSupervisor`, nothing ran); an empty path or a `length` of 0
    /// ([`Error::Usage`]); those of [`Client::exec_io`] (the sandbox
    /// stopped, the daemon gone, `opts.cancel` fired: [`Error::Cancelled`]).
    pub async fn read_file(
        &self,
        sandbox: &Sandbox,
        req: &ReadFileRequest,
        opts: &ExecOptions,
    ) -> Result<ReadFileResult> {
        let call = crate::audit::Call::start(sandbox, self.surface(), "read_file")
            .path(&sandbox_path(&req.path).unwrap_or_else(|_| req.path.clone()));
        let out = self.read_file_unrecorded(sandbox, req, opts).await;
        call.result(&out, "read");
        out
    }

    /// [`Client::read_file`] without its record.
    async fn read_file_unrecorded(
        &self,
        sandbox: &Sandbox,
        req: &ReadFileRequest,
        opts: &ExecOptions,
    ) -> Result<ReadFileResult> {
        check_schema_tag(req.schema.as_deref(), "odek.read-file-request/")?;
        let path = sandbox_path(&req.path)?;
        let offset = req.offset.unwrap_or(0);
        let length = match req.length {
            Some(0) => {
                return Err(Error::Usage(
                    "`length` is 0: give a positive number of bytes, or leave it out".into(),
                ))
            }
            Some(l) => l.min(FILE_READ_LIMIT),
            None => FILE_READ_LIMIT,
        };
        let (head, bytes) = self
            .read_bytes(sandbox, &path, offset, length, None, opts)
            .await?;
        let (start, bytes) = match req.encoding {
            FileEncoding::Utf8 => text_piece(&path, &head, bytes)?,
            FileEncoding::Base64 => (head.offset, bytes),
        };
        let length = bytes.len() as u64;
        let end = start + length;
        let truncated = end < head.size;
        let content = match req.encoding {
            FileEncoding::Utf8 => String::from_utf8(bytes).unwrap_or_default(),
            FileEncoding::Base64 => base64::engine::general_purpose::STANDARD.encode(&bytes),
        };
        Ok(ReadFileResult {
            schema: READ_FILE_RESULT_SCHEMA.into(),
            path,
            encoding: req.encoding,
            content,
            size: head.size,
            offset: start,
            length,
            truncated,
            next_offset: truncated.then_some(end),
            limit: FILE_READ_LIMIT,
        })
    }

    /// Writes a whole file inside `sandbox`, as its command user: creates
    /// it and its parent directories, or replaces its content through a
    /// temporary file and a rename in its directory (keeping its
    /// permission bits; a symlink is followed inside the sandbox). The
    /// content goes over the command's stdin: at most
    /// [`FILE_WRITE_LIMIT`] bytes.
    ///
    /// Errors ([`Error::File`]): the content over the limit (`TooLarge`,
    /// nothing written); a read-only file system (`ReadOnly`: a
    /// `sandbox_readonly` workspace, the message says so); not writable
    /// by the command user; the path a directory; no supervisor; content
    /// that is not valid base64 ([`Error::Usage`]); those of
    /// [`Client::exec_io`].
    pub async fn write_file(
        &self,
        sandbox: &Sandbox,
        req: &WriteFileRequest,
        opts: &ExecOptions,
    ) -> Result<WriteFileResult> {
        let call = crate::audit::Call::start(sandbox, self.surface(), "write_file")
            .path(&sandbox_path(&req.path).unwrap_or_else(|_| req.path.clone()));
        let out = self.write_file_unrecorded(sandbox, req, opts).await;
        call.result(&out, "written");
        out
    }

    /// [`Client::write_file`] without its record.
    async fn write_file_unrecorded(
        &self,
        sandbox: &Sandbox,
        req: &WriteFileRequest,
        opts: &ExecOptions,
    ) -> Result<WriteFileResult> {
        check_schema_tag(req.schema.as_deref(), "odek.write-file-request/")?;
        let path = sandbox_path(&req.path)?;
        let bytes = match req.encoding {
            FileEncoding::Utf8 => req.content.as_bytes().to_vec(),
            FileEncoding::Base64 => base64::engine::general_purpose::STANDARD
                .decode(req.content.as_bytes())
                .map_err(|e| {
                    Error::Usage(format!(
                        "`content` is not valid base64 ({e}); nothing was written"
                    ))
                })?,
        };
        self.write_bytes(sandbox, &path, bytes, opts).await
    }

    /// Applies exact-text edits to a UTF-8 file inside `sandbox`
    /// ([`apply_edits`]) and writes it back as [`Client::write_file`]
    /// does; returns the unified diff. Not atomic against a process in the
    /// sandbox that writes the file between this read and write.
    ///
    /// Errors: an edit that does not apply (`EditNotFound`,
    /// `EditAmbiguous`: nothing written); the file over
    /// [`FILE_WRITE_LIMIT`] or not UTF-8; those of [`Client::read_file`]
    /// and [`Client::write_file`].
    pub async fn edit_file(
        &self,
        sandbox: &Sandbox,
        req: &EditFileRequest,
        opts: &ExecOptions,
    ) -> Result<EditFileResult> {
        let call = crate::audit::Call::start(sandbox, self.surface(), "edit_file")
            .path(&sandbox_path(&req.path).unwrap_or_else(|_| req.path.clone()));
        let out = self.edit_file_unrecorded(sandbox, req, opts).await;
        call.result(&out, "edited");
        out
    }

    /// [`Client::edit_file`] without its record.
    async fn edit_file_unrecorded(
        &self,
        sandbox: &Sandbox,
        req: &EditFileRequest,
        opts: &ExecOptions,
    ) -> Result<EditFileResult> {
        check_schema_tag(req.schema.as_deref(), "odek.edit-file-request/")?;
        let path = sandbox_path(&req.path)?;
        if req.edits.is_empty() {
            return Err(Error::Usage(
                "`edits` is empty: pass at least one {\"oldText\", \"newText\"}".into(),
            ));
        }
        // The size is checked on the head line, before the bytes come.
        let (head, bytes) = self
            .read_bytes(
                sandbox,
                &path,
                0,
                FILE_WRITE_LIMIT + 1,
                Some(FILE_WRITE_LIMIT),
                opts,
            )
            .await?;
        if head.size > FILE_WRITE_LIMIT {
            return Err(edit_too_large(&path, head.size));
        }
        let old = String::from_utf8(bytes).map_err(|e| {
            refused(
                FileErrorKind::NotUtf8,
                &path,
                format!(
                    "{path} is not UTF-8 text (an invalid byte at offset {}), so it cannot be edited as text; nothing was written. Use write_file with encoding \"base64\"",
                    e.utf8_error().valid_up_to()
                ),
            )
        })?;
        let (new, diff, diff_truncated) = edit_and_diff(&path, old, req.edits.clone()).await?;
        if !diff.is_empty() {
            self.write_bytes(sandbox, &path, new.into_bytes(), opts)
                .await?;
        }
        Ok(EditFileResult {
            schema: EDIT_FILE_RESULT_SCHEMA.into(),
            path,
            diff,
            diff_truncated,
            edits: req.edits.len() as u64,
        })
    }

    /// Lists a directory inside `sandbox`, as its command user: each
    /// entry's name, type (a symlink is not followed), a file's size and a
    /// symlink's target, sorted by name.
    ///
    /// Errors ([`Error::File`]): the path absent, not a directory, not
    /// readable by the command user; no supervisor; those of
    /// [`Client::exec_io`].
    pub async fn list_directory(
        &self,
        sandbox: &Sandbox,
        req: &ListDirectoryRequest,
        opts: &ExecOptions,
    ) -> Result<ListDirectoryResult> {
        let call = crate::audit::Call::start(sandbox, self.surface(), "list_directory")
            .path(&sandbox_path(&req.path).unwrap_or_else(|_| req.path.clone()));
        let out = self.list_directory_unrecorded(sandbox, req, opts).await;
        call.result(&out, "listed");
        out
    }

    /// [`Client::list_directory`] without its record.
    async fn list_directory_unrecorded(
        &self,
        sandbox: &Sandbox,
        req: &ListDirectoryRequest,
        opts: &ExecOptions,
    ) -> Result<ListDirectoryResult> {
        check_schema_tag(req.schema.as_deref(), "odek.list-directory-request/")?;
        let path = sandbox_path(&req.path)?;
        let out = self
            .run_fs(
                sandbox,
                &path,
                Op::List,
                vec!["list".into(), path.clone()],
                None,
                Expect::Line(FS_LIST_MAX_BYTES + FS_LINE_MAX),
                opts,
            )
            .await?;
        let listed: Listed = serde_json::from_slice(&out).map_err(|e| bad_answer(sandbox, &e))?;
        if listed.entries.len() as u64 > LIST_MAX_ENTRIES {
            return Err(bad_answer(
                sandbox,
                &format!(
                    "{} entries, more than the {LIST_MAX_ENTRIES} it may send",
                    listed.entries.len()
                ),
            ));
        }
        let shown = listed.entries.len() as u64;
        let total = listed.total.unwrap_or(shown).max(shown);
        let listing = listing_of(&listed.entries, total);
        Ok(ListDirectoryResult {
            schema: LIST_DIRECTORY_RESULT_SCHEMA.into(),
            path: listed.path,
            entries: listed.entries,
            listing,
            total,
            truncated: listed.truncated || total > shown,
        })
    }

    /// `fs read`: the head line and the bytes (at most `length`; a file
    /// that ended before the length its head announced — shorter than its
    /// size said, as a `/sys` file, or shrunk while read — has the size
    /// where its bytes ended). With `max_size`, a file larger than it is
    /// refused ([`edit_too_large`]) on its head line, before its bytes
    /// come.
    async fn read_bytes(
        &self,
        sandbox: &Sandbox,
        path: &str,
        offset: u64,
        length: u64,
        max_size: Option<u64>,
        opts: &ExecOptions,
    ) -> Result<(ReadHead, Vec<u8>)> {
        let args = vec![
            "read".into(),
            path.to_string(),
            offset.to_string(),
            length.to_string(),
        ];
        let expect = Expect::Read {
            max_length: length,
            max_size,
        };
        let mut out = self
            .run_fs(sandbox, path, Op::Read, args, None, expect, opts)
            .await?;
        let nl = out
            .iter()
            .position(|b| *b == b'\n')
            .ok_or_else(|| bad_answer(sandbox, &"no head line"))?;
        let mut head: ReadHead =
            serde_json::from_slice(&out[..nl]).map_err(|e| bad_answer(sandbox, &e))?;
        let bytes = out.split_off(nl + 1);
        if bytes.len() as u64 > head.length {
            return Err(bad_answer(
                sandbox,
                &format!("{} bytes, the head said {}", bytes.len(), head.length),
            ));
        }
        if (bytes.len() as u64) < head.length {
            head.length = bytes.len() as u64;
            head.size = head.offset + head.length;
        }
        Ok((head, bytes))
    }

    /// `fs write` of `bytes` (checked against [`FILE_WRITE_LIMIT`] first).
    async fn write_bytes(
        &self,
        sandbox: &Sandbox,
        path: &str,
        bytes: Vec<u8>,
        opts: &ExecOptions,
    ) -> Result<WriteFileResult> {
        if bytes.len() as u64 > FILE_WRITE_LIMIT {
            return Err(refused(
                FileErrorKind::TooLarge,
                path,
                format!(
                    "the content is {} bytes, more than write_file's limit of {FILE_WRITE_LIMIT} bytes (16 MiB); nothing was written",
                    bytes.len()
                ),
            ));
        }
        let args = vec![
            "write".into(),
            path.to_string(),
            FILE_WRITE_LIMIT.to_string(),
        ];
        let out = self
            .run_fs(
                sandbox,
                path,
                Op::Write,
                args,
                Some(bytes),
                Expect::Line(FS_LINE_MAX),
                opts,
            )
            .await?;
        let w: Written = serde_json::from_slice(&out).map_err(|e| bad_answer(sandbox, &e))?;
        Ok(WriteFileResult {
            schema: WRITE_FILE_RESULT_SCHEMA.into(),
            path: w.path,
            bytes_written: w.bytes,
            created: w.created,
        })
    }

    /// Runs `odek-supervisor fs ARGS` in `sandbox` as a command (stdin:
    /// `stdin`, else empty) and returns its stdout; a refusal it reports
    /// becomes [`Error::File`]. Of its stdout, no more than `expect` allows
    /// is read: past it the operation is killed and refused, so that no
    /// process in the sandbox (the operation tampered with, or a
    /// supervisor replaced) can make odek hold more.
    #[allow(clippy::too_many_arguments)]
    async fn run_fs(
        &self,
        sandbox: &Sandbox,
        path: &str,
        op: Op,
        args: Vec<String>,
        stdin: Option<Vec<u8>>,
        expect: Expect,
        opts: &ExecOptions,
    ) -> Result<Vec<u8>> {
        needs_supervisor(sandbox, path)?;
        let mut argv = vec![
            crate::supervisor::SUPERVISOR_PATH.to_string(),
            "fs".to_string(),
        ];
        argv.extend(args);
        let req = ExecRequest {
            command: Command::Argv(argv),
            env: vec![],
            timeout: Some(FILE_TIMEOUT),
            workdir: Some("/".into()),
        };
        // Always a stdin (empty for a read or a list): an `ExecIo` that is
        // not plain goes through the supervisor or is refused, never the
        // Docker exec API (which would run it as the container's user).
        let chunks: Vec<Vec<u8>> = stdin.into_iter().collect();
        let io = ExecIo {
            stdin: Some(Box::pin(futures_util::stream::iter(chunks))),
            tty: None,
            resize: None,
        };
        // Stops the operation once its stdout passes `expect`; the
        // caller's cancel stops it too.
        let stop = opts
            .cancel
            .as_ref()
            .map_or_else(crate::cancel::CancellationToken::new, |t| t.child_token());
        let mut opts = opts.clone();
        opts.cancel = Some(stop.clone());
        let out = Mutex::new(Capture::new(expect));
        let err = Mutex::new(Vec::new());
        let sink = |k: StreamKind, b: &[u8]| match k {
            StreamKind::Stdout => {
                let more = out.lock().map(|mut o| o.push(b)).unwrap_or(false);
                if !more {
                    stop.cancel();
                }
            }
            StreamKind::Stderr => {
                if let Ok(mut e) = err.lock() {
                    let room = STDERR_KEEP.saturating_sub(e.len());
                    e.extend_from_slice(&b[..b.len().min(room)]);
                }
            }
        };
        let ran = self
            .exec_io_unrecorded(sandbox, &req, &opts, io, &sink)
            .await;
        let captured = out.into_inner().unwrap_or_else(|p| p.into_inner());
        match captured.cut {
            Some(Cut::TooLarge(size)) => return Err(edit_too_large(path, size)),
            Some(Cut::Overflow(why)) => {
                return Err(Error::Exec {
                    message: format!(
                        "the file operation on {path} in sandbox {} was stopped: its output {why} (odek reads no more of it). Is its odek-supervisor of another odek version, or was the operation tampered with by a process in the sandbox?",
                        sandbox.name
                    ),
                    fix: None,
                    class: crate::failure::FailureClass::DockerRejected,
                    started: true,
                })
            }
            None => {}
        }
        let outcome = ran
            .map_err(|e| match e {
                // The exec path's own refusal of stdin without a supervisor
                // (a sandbox this process does not own and whose relay found
                // none; `needs_supervisor` caught the ones known to be off).
                Error::Exec { started: false, .. }
                    if sandbox.owner.session().is_none()
                        && !sandbox.supervisor.as_ref().is_some_and(|s| s.on) =>
                {
                    no_supervisor(
                        sandbox,
                        path,
                        "its commands run through the Docker exec API",
                    )
                }
                other => other,
            })?
            .cancelled_as_error(sandbox)?;
        let stdout = captured.out;
        let stderr = err.into_inner().unwrap_or_default();
        if outcome.timed_out {
            return Err(Error::Exec {
                message: format!(
                    "the file operation on {path} in sandbox {} did not finish within {} s and was killed",
                    sandbox.name,
                    FILE_TIMEOUT.as_secs()
                ),
                fix: None,
                class: crate::failure::FailureClass::DockerRejected,
                started: true,
            });
        }
        match outcome.exit_code {
            0 => Ok(stdout),
            1 => {
                let line = stderr.split(|b| *b == b'\n').next().unwrap_or_default();
                match serde_json::from_slice::<FsRefusal>(line) {
                    Ok(r) => Err(file_refusal(sandbox, path, op, &r)),
                    Err(_) => Err(could_not_run(sandbox, path, 1, &stderr)),
                }
            }
            code => Err(could_not_run(sandbox, path, code, &stderr)),
        }
    }
}

/// The refusal of a sandbox without the supervisor (or on the host).
fn no_supervisor(sandbox: &Sandbox, path: &str, why: &str) -> Error {
    refused(
        FileErrorKind::NoSupervisor,
        path,
        format!(
            "file tools need odek's supervisor in the sandbox (they run as the sandbox's command user, with its mounts), and sandbox {} has none ({why}); nothing was done. {}, or use exec with the image's own programs",
            sandbox.name,
            crate::supervisor::how_to_get_one(why)
        ),
    )
}

/// Refuses, before anything runs, a sandbox whose commands do not go
/// through its supervisor.
fn needs_supervisor(sandbox: &Sandbox, path: &str) -> Result<()> {
    if sandbox.container_id.is_none() {
        return Err(refused(
            FileErrorKind::NoSupervisor,
            path,
            format!(
                "file tools act inside a sandbox container, and {} runs its commands on the host (fallback or sandbox off); nothing was done. Launch a container sandbox",
                sandbox.name
            ),
        ));
    }
    match &sandbox.supervisor {
        Some(state) if !state.on => Err(no_supervisor(
            sandbox,
            path,
            state.reason.as_deref().unwrap_or("it is off"),
        )),
        _ => Ok(()),
    }
}

/// The supervisor's refusal, in odek's words.
fn file_refusal(sandbox: &Sandbox, path: &str, op: Op, r: &FsRefusal) -> Error {
    let (kind, message) = match r.kind.as_str() {
        "not_found" => (
            FileErrorKind::NotFound,
            format!("{path} does not exist in the sandbox ({})", r.message),
        ),
        "not_a_directory" => (
            FileErrorKind::NotADirectory,
            format!("a part of {path} is not a directory ({})", r.message),
        ),
        "is_a_directory" => (
            FileErrorKind::IsADirectory,
            format!(
                "{path} is a directory{}",
                if op == Op::List {
                    String::new()
                } else {
                    ": use list_directory".to_string()
                }
            ),
        ),
        "not_a_file" => (FileErrorKind::NotAFile, r.message.clone()),
        "permission_denied" => (
            FileErrorKind::PermissionDenied,
            format!(
                "{} (the sandbox's command user{} may not){}",
                r.message,
                crate::supervisor::command_ids(&sandbox.plan)
                    .map(|(u, _)| format!(", uid {u},"))
                    .unwrap_or_default(),
                if op == Op::Write {
                    "; nothing was written"
                } else {
                    ""
                }
            ),
        ),
        "read_only" => {
            let workspace = path == WORKSPACE || path.starts_with("/workspace/");
            let why = if workspace && sandbox.plan.readonly {
                "the workspace is mounted read-only in this sandbox (`sandbox_readonly` is on: a read-only or narrowed sandbox)"
            } else {
                "the file system there is mounted read-only in the sandbox"
            };
            (
                FileErrorKind::ReadOnly,
                format!(
                    "cannot write {path}: {why} (EROFS, read-only file system); nothing was written. Write under /tmp instead, or ask for a sandbox whose workspace is writable"
                ),
            )
        }
        "too_large" => (
            FileErrorKind::TooLarge,
            format!("cannot write {path}: {}", r.message),
        ),
        _ => (FileErrorKind::Other, r.message.clone()),
    };
    refused(kind, path, message)
}

/// An operation that exited other than with a refusal (the supervisor
/// binary missing from the sandbox: 127).
fn could_not_run(sandbox: &Sandbox, path: &str, code: i64, stderr: &[u8]) -> Error {
    // 2: the supervisor did not know the `fs` mode (one from before file
    // tools, in a sandbox an older odek launched).
    let hint = if code == 2 {
        "; its odek-supervisor may predate file tools: launch a new sandbox"
    } else {
        ""
    };
    Error::Exec {
        message: format!(
            "the file operation on {path} could not run in sandbox {} (exit {code}): {}{hint}",
            sandbox.name,
            crate::text::foreign(String::from_utf8_lossy(stderr).trim())
        ),
        fix: None,
        class: crate::failure::FailureClass::DockerRejected,
        started: false,
    }
}

/// The whole UTF-8 characters of a piece read as text: `bytes` read from
/// `head.offset`, without the bytes (at most 3) of a character that
/// began before it, and without a character cut at its end when the file
/// goes on. Returns where the piece then starts and its bytes.
///
/// Errors ([`FileErrorKind::NotUtf8`]): bytes that are not UTF-8, or a
/// piece that holds no whole character; the message names the fix.
fn text_piece(path: &str, head: &ReadHead, mut bytes: Vec<u8>) -> Result<(u64, Vec<u8>)> {
    let mut start = head.offset;
    // An offset inside a character: the piece starts at the next
    // whole one (a character is at most 4 bytes).
    if start > 0 {
        let inside = bytes
            .iter()
            .take(3)
            .take_while(|b| **b & 0xC0 == 0x80)
            .count();
        bytes.drain(..inside);
        start += inside as u64;
    }
    if let Err(e) = std::str::from_utf8(&bytes) {
        let ends_inside = e.error_len().is_none();
        let more = head.offset + head.length < head.size;
        if ends_inside && more && e.valid_up_to() > 0 {
            // The piece ends inside a character: end it before.
            bytes.truncate(e.valid_up_to());
        } else if ends_inside && more {
            return Err(refused(
                    FileErrorKind::NotUtf8,
                    path,
                    format!(
                        "the {} bytes of {path} from offset {start} hold no whole UTF-8 character: ask for a longer `length` (a character is up to 4 bytes), or read it with encoding \"base64\"",
                        bytes.len()
                    ),
                ));
        } else {
            let at = start + e.valid_up_to() as u64;
            return Err(refused(
                    FileErrorKind::NotUtf8,
                    path,
                    format!(
                        "{path} is not UTF-8 text (an invalid byte at offset {at}): read it with encoding \"base64\""
                    ),
                ));
        }
    }
    Ok((start, bytes))
}

/// The refusal of an edit of a file over [`FILE_WRITE_LIMIT`].
fn edit_too_large(path: &str, size: u64) -> Error {
    refused(
        FileErrorKind::TooLarge,
        path,
        format!(
            "{path} is {size} bytes, more than edit_file's limit of {FILE_WRITE_LIMIT} bytes (16 MiB); nothing was written"
        ),
    )
}

/// What [`Client::run_fs`] reads of an operation's stdout: no more than
/// an honest `odek-supervisor fs` writes.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// One line of at most this many bytes.
    Line(usize),
    /// `fs read`'s head line (at most [`FS_LINE_MAX`] bytes), then at most
    /// the length it names, itself at most `max_length`; a head whose size
    /// passes `max_size` stops the read before its bytes come.
    Read {
        max_length: u64,
        max_size: Option<u64>,
    },
}

/// Why [`Capture`] stopped reading.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Cut {
    /// The output passed what [`Expect`] allows (the words say how).
    Overflow(String),
    /// The head's size passed `max_size`.
    TooLarge(u64),
}

/// An operation's stdout as it comes, within its [`Expect`].
#[derive(Debug)]
struct Capture {
    expect: Expect,
    out: Vec<u8>,
    /// Most bytes `out` may hold so far.
    allowed: usize,
    /// A read's head line was seen.
    head: bool,
    cut: Option<Cut>,
}

impl Capture {
    fn new(expect: Expect) -> Capture {
        let allowed = match expect {
            Expect::Line(n) => n,
            Expect::Read { .. } => FS_LINE_MAX,
        };
        Capture {
            expect,
            out: Vec::new(),
            allowed,
            head: false,
            cut: None,
        }
    }

    /// Adds `bytes`; false once the operation must be stopped (`cut` says
    /// why; nothing more is kept).
    fn push(&mut self, bytes: &[u8]) -> bool {
        if self.cut.is_some() {
            return false;
        }
        let Expect::Read {
            max_length,
            max_size,
        } = self.expect
        else {
            return self.take(bytes);
        };
        if self.head {
            return self.take(bytes);
        }
        let Some(nl) = bytes.iter().position(|b| *b == b'\n') else {
            return self.take(bytes);
        };
        if !self.take(&bytes[..=nl]) {
            return false;
        }
        self.head = true;
        let line = &self.out[..self.out.len() - 1];
        let head: ReadHead = match serde_json::from_slice(line) {
            Ok(h) => h,
            Err(e) => {
                self.cut = Some(Cut::Overflow(format!(
                    "began with a line that is not a read's head ({e})"
                )));
                return false;
            }
        };
        if head.length > max_length {
            self.cut = Some(Cut::Overflow(format!(
                "announced {} bytes, more than the {max_length} asked for",
                head.length
            )));
            return false;
        }
        if max_size.is_some_and(|m| head.size > m) {
            self.cut = Some(Cut::TooLarge(head.size));
            return false;
        }
        self.allowed = self
            .out
            .len()
            .saturating_add(usize::try_from(head.length).unwrap_or(usize::MAX));
        self.take(&bytes[nl + 1..])
    }

    fn take(&mut self, bytes: &[u8]) -> bool {
        if self.out.len().saturating_add(bytes.len()) > self.allowed {
            self.cut = Some(Cut::Overflow(format!(
                "passed {} bytes, more than an honest one sends",
                self.allowed
            )));
            return false;
        }
        self.out.extend_from_slice(bytes);
        true
    }
}

/// An answer of the supervisor odek cannot read (a supervisor of another
/// version).
fn bad_answer(sandbox: &Sandbox, why: &dyn std::fmt::Display) -> Error {
    Error::Exec {
        message: format!(
            "the file operation in sandbox {} gave an answer odek cannot read ({why}): is its odek-supervisor of another odek version?",
            sandbox.name
        ),
        fix: None,
        class: crate::failure::FailureClass::DockerRejected,
        started: true,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_file_name_cannot_forge_a_line_of_the_listing() {
        let e = |name: &str, entry_type| super::DirEntry {
            name: name.into(),
            entry_type,
            size: None,
            target: None,
        };
        let listing = super::listing_of(
            &[
                e("x\n[FILE] fake_entry\n[DIR] .ssh", super::EntryType::File),
                e("a\u{202e}txt.exe", super::EntryType::File),
                e("src", super::EntryType::Dir),
            ],
            3,
        );
        assert_eq!(listing.lines().count(), 3, "{listing}");
        assert!(!listing.contains('\u{202e}'), "{listing}");
        assert!(listing.ends_with("[DIR] src"), "{listing}");
    }

    use super::*;

    fn edit(old: &str, new: &str) -> FileEdit {
        FileEdit {
            old_text: old.into(),
            new_text: new.into(),
        }
    }

    fn kind(e: Error) -> (FileErrorKind, String) {
        match e {
            Error::File(f) => (f.kind, f.message),
            other => panic!("not a file error: {other:?}"),
        }
    }

    #[test]
    fn edits_apply_in_order_each_to_what_the_last_left() {
        let text = "fn a() {}\nfn b() {}\n";
        let out = apply_edits(
            "/w/x",
            text,
            &[
                edit("fn a()", "fn alpha()"),
                edit("alpha() {}\nfn b", "alpha() {}\nfn beta"),
            ],
        )
        .expect("applies");
        assert_eq!(out, "fn alpha() {}\nfn beta() {}\n");
    }

    #[test]
    fn an_absent_or_empty_old_text_is_refused() {
        let (k, m) = kind(apply_edits("/w/x", "abc", &[edit("zzz", "y")]).expect_err("absent"));
        assert_eq!(k, FileErrorKind::EditNotFound);
        assert!(m.contains("the edit: oldText is not in /w/x"), "{m}");
        assert!(m.contains("nothing was written"), "{m}");
        let (k, m) =
            kind(apply_edits("/w/x", "abc", &[edit("a", "b"), edit("", "y")]).expect_err("empty"));
        assert_eq!(k, FileErrorKind::EditNotFound);
        assert!(m.starts_with("edit 2 of 2 has an empty oldText"), "{m}");
        // Exact: no whitespace or line-ending leniency.
        let (k, _) =
            kind(apply_edits("/w/x", "a\r\nb\n", &[edit("a\nb", "c")]).expect_err("CRLF differs"));
        assert_eq!(k, FileErrorKind::EditNotFound);
        let (k, m) = kind(
            apply_edits("/w/x", "ab", &[edit("a", "x"), edit("a", "y")])
                .expect_err("gone after the first"),
        );
        assert_eq!(k, FileErrorKind::EditNotFound);
        assert!(m.contains("after the earlier edits"), "{m}");
        assert!(matches!(
            apply_edits("/w/x", "abc", &[]).expect_err("none"),
            Error::Usage(_)
        ));
    }

    #[test]
    fn an_old_text_found_twice_is_refused_overlaps_too() {
        let (k, m) = kind(
            apply_edits("/w/x", "x = 1\nx = 1\n", &[edit("x = 1", "x = 2")]).expect_err("twice"),
        );
        assert_eq!(k, FileErrorKind::EditAmbiguous);
        assert!(m.contains("occurs more than once in /w/x"), "{m}");
        // "aa" is twice in "aaa" (overlapping), though `matches` counts one.
        let (k, _) = kind(apply_edits("/w/x", "aaa", &[edit("aa", "b")]).expect_err("overlap"));
        assert_eq!(k, FileErrorKind::EditAmbiguous);
        assert_eq!(occurrences("héllo héllo", "é"), 2);
        assert_eq!(occurrences("héllo", "llo"), 1);
        assert_eq!(occurrences("héllo", "x"), 0);
    }

    #[test]
    fn the_diff_is_unified_and_empty_without_a_change() {
        let d = unified_diff(
            "/workspace/a.txt",
            "one\ntwo\nthree\n",
            "one\n2\nthree\n",
            EDIT_DIFF_LIMIT,
        );
        assert_eq!(
            d,
            (
                "--- a/workspace/a.txt\n+++ b/workspace/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n".to_string(),
                false
            )
        );
        assert_eq!(
            unified_diff("/w", "same", "same", 10),
            (String::new(), false)
        );
    }

    fn capture_all(expect: Expect, chunks: &[&[u8]]) -> Capture {
        let mut c = Capture::new(expect);
        for chunk in chunks {
            if !c.push(chunk) {
                break;
            }
        }
        c
    }

    fn head(size: u64, offset: u64, length: u64) -> Vec<u8> {
        format!("{{\"size\":{size},\"offset\":{offset},\"length\":{length}}}\n").into_bytes()
    }

    #[test]
    fn a_read_is_held_to_the_length_its_head_names_and_asked_for() {
        let read = Expect::Read {
            max_length: 8,
            max_size: None,
        };
        // Honest, the head and the bytes in any pieces.
        let h = head(100, 0, 8);
        let c = capture_all(read, &[&h[..5], &h[5..], b"0123", b"4567"]);
        assert_eq!(c.cut, None);
        assert_eq!(&c.out[h.len()..], b"01234567");
        // Fewer bytes than announced (a /sys file) are not a violation.
        let c = capture_all(read, &[&head(4096, 0, 8), b"ab"]);
        assert_eq!(c.cut, None);
        // One byte past the announced length stops it.
        let c = capture_all(read, &[&head(100, 0, 8), b"012345678"]);
        assert!(matches!(c.cut, Some(Cut::Overflow(_))), "{:?}", c.cut);
        assert!(c.out.len() <= h.len() + 8);
        // A head announcing more than was asked for.
        let c = capture_all(read, &[&head(100, 0, 9)]);
        assert!(
            matches!(&c.cut, Some(Cut::Overflow(w)) if w.contains("9 bytes")),
            "{:?}",
            c.cut
        );
        // No head line within FS_LINE_MAX: stopped there, not held.
        let flood = vec![b'x'; 4096];
        let mut c = Capture::new(read);
        let mut pushed = 0;
        while c.push(&flood) {
            pushed += flood.len();
            assert!(pushed <= FS_LINE_MAX, "read past the head's limit");
        }
        assert!(c.out.len() <= FS_LINE_MAX);
        // A head that is not JSON.
        let c = capture_all(read, &[b"not a head\n"]);
        assert!(matches!(c.cut, Some(Cut::Overflow(_))), "{:?}", c.cut);
    }

    #[test]
    fn an_edit_stops_on_a_head_over_its_limit_before_the_bytes() {
        let edit = Expect::Read {
            max_length: FILE_WRITE_LIMIT + 1,
            max_size: Some(FILE_WRITE_LIMIT),
        };
        let big = head(1 << 30, 0, FILE_WRITE_LIMIT + 1);
        let c = capture_all(edit, &[&big, b"more"]);
        assert_eq!(c.cut, Some(Cut::TooLarge(1 << 30)));
        assert_eq!(c.out.len(), big.len(), "no byte of the file kept");
        let c = capture_all(edit, &[&head(FILE_WRITE_LIMIT, 0, FILE_WRITE_LIMIT), b"a"]);
        assert_eq!(c.cut, None);
    }

    #[test]
    fn a_line_past_its_limit_is_cut() {
        let c = capture_all(Expect::Line(10), &[b"0123456789"]);
        assert_eq!(c.cut, None);
        let c = capture_all(Expect::Line(10), &[b"01234", b"567890"]);
        assert!(matches!(c.cut, Some(Cut::Overflow(_))), "{:?}", c.cut);
        assert_eq!(c.out, b"01234");
    }

    fn piece(offset: u64, bytes: &[u8], size: u64) -> Result<(u64, String)> {
        let head = ReadHead {
            size,
            offset,
            length: bytes.len() as u64,
        };
        text_piece("/w/t", &head, bytes.to_vec())
            .map(|(at, b)| (at, String::from_utf8(b).expect("text")))
    }

    #[test]
    fn a_text_piece_holds_the_whole_characters_of_its_range() {
        let text = "h\u{e9}llo \u{1f600}!"; // é: 2 bytes at 1; 😀: 4 bytes at 7
        let b = text.as_bytes();
        let size = b.len() as u64;
        // From inside é: starts after it.
        assert_eq!(piece(2, &b[2..6], size).expect("ok"), (3, "llo".into()));
        // Ends inside 😀 with more to come: ends before it.
        assert_eq!(
            piece(0, &b[..9], size).expect("ok"),
            (0, "h\u{e9}llo ".into())
        );
        // From inside 😀 to the end.
        assert_eq!(piece(9, &b[9..], size).expect("ok"), (11, "!".into()));
        // Holding no whole character.
        // Only the inside of 😀: nothing, from after it.
        assert_eq!(piece(8, &b[8..10], size).expect("ok"), (10, String::new()));
        let (k, m) = kind(piece(7, &b[7..9], size).expect_err("none whole"));
        assert_eq!(k, FileErrorKind::NotUtf8);
        assert!(
            m.contains("no whole UTF-8 character") && m.contains("base64"),
            "{m}"
        );
        // Bytes that are not UTF-8 at all.
        let (k, m) = kind(piece(0, b"ab\xffcd", 5).expect_err("binary"));
        assert_eq!(k, FileErrorKind::NotUtf8);
        assert!(m.contains("offset 2") && m.contains("base64"), "{m}");
        // At offset 0 a leading continuation byte is not skipped: refused.
        assert!(piece(0, b"\x80abc", 4).is_err());
    }

    /// Millions of short distinct lines, every one changed: the diff runs
    /// on a blocking thread (another task of a one-thread runtime runs
    /// while it does), settles within its deadline, and is cut at its
    /// limit saying so; the edit itself is whole.
    #[tokio::test]
    async fn a_huge_diff_is_bounded_and_does_not_stall_the_runtime() {
        let old: String = (0..400_000).map(|i| format!("{i}\n")).collect();
        let new_text: String = (0..400_000).map(|i| format!("{}\n", i * 7 + 1)).collect();
        let served = std::sync::atomic::AtomicBool::new(false);
        let editing = async {
            let out = edit_and_diff("/w/big", old.clone(), vec![edit(&old, &new_text)]).await;
            (out, served.load(std::sync::atomic::Ordering::SeqCst))
        };
        let other = async {
            tokio::task::yield_now().await;
            served.store(true, std::sync::atomic::Ordering::SeqCst);
        };
        let ((out, served_meanwhile), ()) = tokio::join!(editing, other);
        let (new, diff, cut) = out.expect("edited");
        assert!(served_meanwhile, "the edit blocked the runtime");
        assert_eq!(new, new_text);
        assert!(cut);
        assert!(diff.len() <= EDIT_DIFF_LIMIT + 200, "{}", diff.len());
        assert!(
            diff.starts_with("--- a/w/big\n+++ b/w/big\n@@ "),
            "{}",
            &diff[..80]
        );
        assert!(
            diff.ends_with("read the file to see the rest)\n"),
            "{}",
            &diff[diff.len() - 200..]
        );
        // A small one whole.
        let (new, diff, cut) = edit_and_diff("/w/a", "a\nb\n".into(), vec![edit("b", "c")])
            .await
            .expect("edited");
        assert_eq!((new.as_str(), cut), ("a\nc\n", false));
        assert_eq!(diff, "--- a/w/a\n+++ b/w/a\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n");
        // No change: no diff, nothing to write.
        let (_, diff, _) = edit_and_diff("/w/a", "a".into(), vec![edit("a", "a")])
            .await
            .expect("edited");
        assert_eq!(diff, "");
    }

    /// A sandbox whose owner session is `link`, its supervisor bound to
    /// 1000:1000 (no container behind it), its records under `home`.
    async fn sandbox_on(link: crate::engine::Link, home: &std::path::Path) -> Sandbox {
        let session = crate::supervisor::Session::open(link, Duration::from_secs(5))
            .await
            .expect("ready");
        let plan = crate::plan::Plan {
            schema: crate::plan::PLAN_SCHEMA.into(),
            mode: crate::config::SandboxMode::Implicit,
            isolation: crate::plan::Isolation::Container,
            workdir: "/w".into(),
            workdir_id: None,
            odek_home: home.to_path_buf(),
            endpoint: None,
            endpoint_owner: None,
            engine: None,
            image: crate::image::ImagePlan {
                reference: crate::image::pinned_default(),
                source: crate::image::ImageSource::PinnedDefault,
            },
            network_mode: crate::config::NetworkMode::Bridge,
            bridge_network_id: None,
            network_summary: crate::network::NetworkSummary::BridgeAttached,
            internet: true,
            dns_forwarding: None,
            egress: None,
            networks: Vec::new(),
            pids_limit: 1000,
            readonly: false,
            workspace: crate::config::WorkspaceMode::Bind,
            memory_bytes: None,
            cpus: None,
            user: Some("1000:1000".into()),
            user_choice: None,
            account: None,
            runtime: None,
            engine_default_runtime: None,
            env: Vec::new(),
            volumes: Vec::new(),
            masks: Vec::new(),
            require_sandbox: false,
            sources: Default::default(),
            warnings: Vec::new(),
            approval: None,
            log_retention_days: 7,
        };
        let mut sandbox = Sandbox::host(&plan, crate::plan::Isolation::Container, Vec::new());
        sandbox.name = "odek-test".into();
        sandbox.container_id = Some("c".repeat(64));
        sandbox.supervisor = Some(crate::supervisor::SupervisorState::on());
        sandbox.owner = crate::sandbox::OwnerLink(Some(std::sync::Arc::new(
            crate::sandbox::Owned::Session(session),
        )));
        sandbox
    }

    /// odek's end of a fake supervisor's stream: the frames odek sent.
    struct Peer {
        stream: tokio::io::DuplexStream,
        decoder: odek_supervisor::proto::Decoder,
        frames: std::collections::VecDeque<odek_supervisor::proto::Frame>,
    }

    impl Peer {
        /// The next frame odek sent (cancel-safe); `None` at the end.
        async fn next(&mut self) -> Option<odek_supervisor::proto::Frame> {
            let mut buf = [0u8; 4096];
            loop {
                if let Some(f) = self.frames.pop_front() {
                    return Some(f);
                }
                while let Some(f) = self.decoder.next_frame().expect("valid frames") {
                    self.frames.push_back(f);
                }
                if !self.frames.is_empty() {
                    continue;
                }
                let n = tokio::io::AsyncReadExt::read(&mut self.stream, &mut buf)
                    .await
                    .ok()?;
                if n == 0 {
                    return None;
                }
                self.decoder.push(&buf[..n]);
            }
        }
    }

    /// A supervisor (or something in its place) that answers the first
    /// command with `flood` bytes of stdout in 1 MiB frames, as fast as
    /// odek reads them, unless odek asks for its kill first: then it
    /// reports the command killed. Returns whether the kill came and the
    /// bytes sent.
    fn flooding_supervisor(
        flood: usize,
    ) -> (crate::engine::Link, tokio::task::JoinHandle<(bool, usize)>) {
        use odek_supervisor::proto::{self, Decoder, Frame, Kind};
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<Vec<u8>>>(2);
        let output = futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        });
        let link = crate::engine::Link {
            output: Box::pin(output),
            input: Box::new(ours),
            keep: None,
        };
        let fake = tokio::spawn(async move {
            let ready = proto::Ready {
                version: proto::VERSION,
                pid: 7,
                uid: crate::supervisor::SUPERVISOR_UID,
                gid: crate::supervisor::SUPERVISOR_UID,
                cap_eff: "0".into(),
                relay: "r".into(),
                commands: Some([1000, 1000]),
                background: None,
            };
            tx.send(Ok(Frame::json(Kind::Ready, 0, &ready).encode()))
                .await
                .expect("odek listens");
            let mut peer = Peer {
                stream: theirs,
                decoder: Decoder::new(),
                frames: std::collections::VecDeque::new(),
            };
            let id = loop {
                let f = peer.next().await.expect("a Start");
                if f.kind == Kind::Start {
                    break f.id;
                }
            };
            let chunk = vec![b'x'; proto::MAX_PAYLOAD];
            let mut sent = 0;
            let mut killed = false;
            while sent < flood && !killed {
                let frame = Frame {
                    kind: Kind::Stdout,
                    id,
                    payload: chunk.clone(),
                }
                .encode();
                tokio::select! {
                    f = peer.next() => killed = f.is_some_and(|f| f.kind == Kind::Kill),
                    r = tx.send(Ok(frame)) => {
                        r.expect("odek listens");
                        sent += chunk.len();
                    }
                }
            }
            let exit = proto::Exit {
                code: (!killed).then_some(0),
                signal: killed.then_some(9),
                cancelled: killed,
                killed,
                ..Default::default()
            };
            let _ = tx
                .send(Ok(Frame::json(Kind::Exit, id, &exit).encode()))
                .await;
            (killed, sent)
        });
        (link, fake)
    }

    /// Whatever answers in the supervisor's place (a replaced binary, a
    /// tampered operation), odek reads no more of a file operation's
    /// output than an honest one sends: past it the operation is killed
    /// and refused, saying why, instead of odek holding all it is sent.
    #[tokio::test]
    async fn a_flooding_file_operation_is_killed_not_held() {
        const FLOOD: usize = 64 << 20;
        let (link, fake) = flooding_supervisor(FLOOD);
        let home = tempfile::tempdir().expect("a home");
        let sandbox = sandbox_on(link, home.path()).await;
        let client = Client::from_env();
        let req = ListDirectoryRequest {
            schema: None,
            path: ".".into(),
        };
        let err = client
            .list_directory(&sandbox, &req, &ExecOptions::default())
            .await
            .expect_err("refused");
        let (killed, sent) = fake.await.expect("the fake ran");
        assert!(
            killed,
            "odek read all {sent} bytes without stopping the operation: {err}"
        );
        assert!(sent < FLOOD, "{sent}");
        let text = err.to_string();
        assert!(
            text.contains("was stopped") && text.contains("odek reads no more"),
            "{text}"
        );
    }

    #[test]
    fn relative_paths_are_under_the_workspace() {
        assert_eq!(sandbox_path("a/b.txt").expect("ok"), "/workspace/a/b.txt");
        assert_eq!(sandbox_path("./a").expect("ok"), "/workspace/a");
        assert_eq!(sandbox_path(".").expect("ok"), "/workspace");
        assert_eq!(sandbox_path("/etc/hostname").expect("ok"), "/etc/hostname");
        assert!(sandbox_path("").is_err());
        assert!(sandbox_path("a\0b").is_err());
    }

    #[test]
    fn requests_parse_as_documented() {
        let r: ReadFileRequest = serde_json::from_value(serde_json::json!({
            "path": "a", "encoding": "base64", "offset": 3, "length": 4
        }))
        .expect("read");
        assert_eq!(r.encoding, FileEncoding::Base64);
        let w: WriteFileRequest =
            serde_json::from_value(serde_json::json!({"path": "a", "content": "x"}))
                .expect("write");
        assert_eq!(w.encoding, FileEncoding::Utf8);
        let e: EditFileRequest = serde_json::from_value(serde_json::json!({
            "path": "a", "edits": [{"oldText": "x", "newText": "y"}]
        }))
        .expect("edit");
        assert_eq!(e.edits, vec![edit("x", "y")]);
        assert!(serde_json::from_value::<ReadFileRequest>(
            serde_json::json!({"path": "a", "encoding": "latin-1"})
        )
        .is_err());
    }
}
