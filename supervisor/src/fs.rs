//! `odek-supervisor fs …`: the file operations behind odek's file tools
//! (docs/MCP.md, "File tools"; docs/SANDBOXING.md, "File tools").
//!
//! The core runs this mode as an ordinary command through the supervised
//! exec path, so it runs as the command user, with the command's
//! capabilities (none), no-new-privs, working directory and mounts: a path
//! and every symlink in it resolve inside the sandbox, never on the host,
//! and a read-only mount refuses a write with `EROFS`. Nothing here depends
//! on the image's programs.
//!
//! - `fs read PATH OFFSET LENGTH`: stdout is one JSON line
//!   `{"size":N,"offset":O,"length":L}` and then exactly `L` bytes of the
//!   file from `OFFSET` (`L` = min(LENGTH, size − OFFSET), 0 past the end).
//!   Only a regular file is read (opened `O_NONBLOCK`, so a FIFO cannot
//!   hang it).
//! - `fs write PATH MAX`: the new content is stdin (at most `MAX` bytes;
//!   more is refused before anything is written). Parent directories are
//!   created. An existing file (a symlink is followed, inside the sandbox)
//!   is replaced through a temporary file in its own directory and
//!   `rename`, keeping its permission bits; when that directory is not
//!   writable, the file is rewritten in place. stdout: one JSON line
//!   `{"path":P,"bytes":N,"created":B}` (`P` the file written, symlinks
//!   resolved).
//! - `fs list PATH`: stdout is one JSON line `{"path":P,"entries":[{"name",
//!   "type","size","target"}]}`, sorted by name; `type` is `file`, `dir`,
//!   `symlink` or `other` (a symlink is not followed; `target` is its text).
//!
//! Exit status 0 on success; 1 with one JSON line on stderr,
//! `{"kind":K,"errno":E,"message":M}`, when the operation is refused (`K`:
//! `not_found`, `not_a_directory`, `is_a_directory`, `not_a_file`,
//! `permission_denied`, `read_only`, `too_large`, `other`); 2 for a usage
//! error.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// A refused operation: what the core shows (with the path it asked for).
struct Refused {
    kind: &'static str,
    errno: i32,
    message: String,
}

impl Refused {
    fn new(kind: &'static str, message: impl Into<String>) -> Refused {
        Refused {
            kind,
            errno: 0,
            message: message.into(),
        }
    }

    /// An I/O error of `what` (e.g. "cannot open /workspace/a").
    fn io(what: &str, e: &io::Error) -> Refused {
        let errno = e.raw_os_error().unwrap_or(0);
        let kind = match errno {
            libc::ENOENT => "not_found",
            libc::ENOTDIR => "not_a_directory",
            libc::EISDIR => "is_a_directory",
            libc::EACCES | libc::EPERM => "permission_denied",
            libc::EROFS => "read_only",
            libc::EFBIG | libc::ENOSPC | libc::EDQUOT => "too_large",
            _ => "other",
        };
        Refused {
            kind,
            errno,
            message: format!("{what}: {e}"),
        }
    }
}

/// Runs `fs ARGS…` and returns the process's exit status.
pub fn main(args: &[String]) -> i32 {
    let out = match args {
        [op, path, offset, length] if op == "read" => {
            match (offset.parse::<u64>(), length.parse::<u64>()) {
                (Ok(o), Ok(l)) => read(Path::new(path), o, l),
                _ => return usage(),
            }
        }
        [op, path, max] if op == "write" => match max.parse::<u64>() {
            Ok(max) => write(Path::new(path), max),
            Err(_) => return usage(),
        },
        [op, path] if op == "list" => list(Path::new(path)),
        _ => return usage(),
    };
    match out {
        Ok(()) => 0,
        Err(r) => {
            let line = serde_json::json!({"kind": r.kind, "errno": r.errno, "message": r.message});
            crate::log(&line.to_string());
            1
        }
    }
}

fn usage() -> i32 {
    crate::log(
        "usage: odek-supervisor fs read PATH OFFSET LENGTH | fs write PATH MAX | fs list PATH",
    );
    2
}

fn stdout_all(parts: &[&[u8]]) -> Result<(), Refused> {
    let mut out = io::stdout().lock();
    for p in parts {
        out.write_all(p)
            .map_err(|e| Refused::io("cannot write the result", &e))?;
    }
    out.flush()
        .map_err(|e| Refused::io("cannot write the result", &e))
}

fn shown(p: &Path) -> String {
    p.display().to_string()
}

fn read(path: &Path, offset: u64, length: u64) -> Result<(), Refused> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| Refused::io(&format!("cannot open {}", shown(path)), &e))?;
    let meta = file
        .metadata()
        .map_err(|e| Refused::io(&format!("cannot stat {}", shown(path)), &e))?;
    if meta.is_dir() {
        return Err(Refused {
            kind: "is_a_directory",
            errno: libc::EISDIR,
            message: format!("{} is a directory", shown(path)),
        });
    }
    if !meta.is_file() {
        return Err(Refused::new(
            "not_a_file",
            format!("{} is not a regular file", shown(path)),
        ));
    }
    let size = meta.len();
    let want = length.min(size.saturating_sub(offset));
    let mut bytes = Vec::with_capacity(usize::try_from(want).unwrap_or(0));
    if want > 0 {
        use std::os::unix::fs::FileExt;
        let mut at = offset;
        let mut buf = vec![0u8; 64 * 1024];
        while (bytes.len() as u64) < want {
            let left = want - bytes.len() as u64;
            let n = buf.len().min(usize::try_from(left).unwrap_or(buf.len()));
            match file.read_at(&mut buf[..n], at) {
                Ok(0) => break, // the file shrank while read
                Ok(got) => {
                    bytes.extend_from_slice(&buf[..got]);
                    at += got as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Refused::io(&format!("cannot read {}", shown(path)), &e)),
            }
        }
    }
    let head = serde_json::json!({"size": size, "offset": offset, "length": bytes.len()});
    let mut line = head.to_string();
    line.push('\n');
    stdout_all(&[line.as_bytes(), &bytes])
}

/// Reads all of stdin, refusing more than `max` bytes.
fn read_stdin(max: u64) -> Result<Vec<u8>, Refused> {
    let mut bytes = Vec::new();
    io::stdin()
        .lock()
        .take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| Refused::io("cannot read the content from stdin", &e))?;
    if bytes.len() as u64 > max {
        return Err(Refused::new(
            "too_large",
            format!("the content is larger than the limit of {max} bytes; nothing was written"),
        ));
    }
    Ok(bytes)
}

fn write(path: &Path, max: u64) -> Result<(), Refused> {
    let bytes = read_stdin(max)?;
    let name = path
        .file_name()
        .ok_or_else(|| Refused::new("other", format!("{} names no file", shown(path))))?;
    let parent = path.parent().unwrap_or(Path::new("/"));
    fs::create_dir_all(parent)
        .map_err(|e| Refused::io(&format!("cannot create directory {}", shown(parent)), &e))?;
    // Where the bytes go: the file a symlink names (followed here, inside
    // the sandbox), or a new file in the parent directory.
    let (target, existing) = match fs::metadata(path) {
        Ok(meta) if meta.is_dir() => {
            return Err(Refused {
                kind: "is_a_directory",
                errno: libc::EISDIR,
                message: format!("{} is a directory", shown(path)),
            })
        }
        Ok(meta) if !meta.is_file() => {
            return Err(Refused::new(
                "not_a_file",
                format!("{} is not a regular file", shown(path)),
            ))
        }
        Ok(meta) => (
            fs::canonicalize(path)
                .map_err(|e| Refused::io(&format!("cannot resolve {}", shown(path)), &e))?,
            Some(meta),
        ),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if fs::symlink_metadata(path).is_ok() {
                // A dangling symlink: create what it names, through it.
                return in_place(path, path, &bytes, true);
            }
            let dir = fs::canonicalize(parent)
                .map_err(|e| Refused::io(&format!("cannot resolve {}", shown(parent)), &e))?;
            (dir.join(name), None)
        }
        Err(e) => return Err(Refused::io(&format!("cannot stat {}", shown(path)), &e)),
    };
    let dir = target.parent().unwrap_or(Path::new("/")).to_path_buf();
    let tmp = dir.join(format!(
        ".{}.odek-{}.tmp",
        target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        std::process::id()
    ));
    let mode = existing
        .as_ref()
        .map(|m| m.permissions().mode() & 0o777)
        .unwrap_or(0o666);
    let created = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp);
    let mut file = match created {
        Ok(f) => f,
        // The directory is not writable but the file may be: rewrite it
        // in place (not atomic).
        Err(e) if e.raw_os_error() == Some(libc::EACCES) && existing.is_some() => {
            return in_place(path, &target, &bytes, false);
        }
        Err(e) => {
            return Err(Refused::io(
                &format!("cannot create a file in {}", shown(&dir)),
                &e,
            ))
        }
    };
    let done = file
        .write_all(&bytes)
        .and_then(|()| {
            // The umask may have narrowed the mode of a file that existed.
            if existing.is_some() {
                file.set_permissions(fs::Permissions::from_mode(mode))
            } else {
                Ok(())
            }
        })
        .and_then(|()| file.sync_all())
        .and_then(|()| fs::rename(&tmp, &target));
    if let Err(e) = done {
        let _ = fs::remove_file(&tmp);
        return Err(Refused::io(&format!("cannot write {}", shown(&target)), &e));
    }
    written(&target, bytes.len(), existing.is_none())
}

/// Truncates and rewrites `open_path` (the file itself, through any
/// symlink), reporting `target`.
fn in_place(open_path: &Path, target: &Path, bytes: &[u8], create: bool) -> Result<(), Refused> {
    let mut f: File = OpenOptions::new()
        .write(true)
        .truncate(true)
        .create(create)
        .custom_flags(libc::O_NONBLOCK)
        .open(open_path)
        .map_err(|e| Refused::io(&format!("cannot open {}", shown(open_path)), &e))?;
    f.write_all(bytes)
        .map_err(|e| Refused::io(&format!("cannot write {}", shown(target)), &e))?;
    let shown_target = if create {
        fs::canonicalize(open_path).unwrap_or_else(|_| target.to_path_buf())
    } else {
        target.to_path_buf()
    };
    written(&shown_target, bytes.len(), create)
}

fn written(target: &Path, bytes: usize, created: bool) -> Result<(), Refused> {
    let line = serde_json::json!({
        "path": target.to_string_lossy(),
        "bytes": bytes,
        "created": created,
    });
    stdout_all(&[line.to_string().as_bytes(), b"\n"])
}

fn list(path: &Path) -> Result<(), Refused> {
    let entries =
        fs::read_dir(path).map_err(|e| Refused::io(&format!("cannot list {}", shown(path)), &e))?;
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Refused::io(&format!("cannot list {}", shown(path)), &e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let meta = entry.metadata().ok(); // does not follow a symlink
        let ft = meta.as_ref().map(|m| m.file_type());
        let kind = match ft {
            Some(t) if t.is_symlink() => "symlink",
            Some(t) if t.is_dir() => "dir",
            Some(t) if t.is_file() => "file",
            Some(t)
                if t.is_fifo() || t.is_socket() || t.is_block_device() || t.is_char_device() =>
            {
                "other"
            }
            _ => "other",
        };
        let size = meta.as_ref().filter(|m| m.is_file()).map(|m| m.size());
        let target = (kind == "symlink")
            .then(|| fs::read_link(entry.path()).ok())
            .flatten()
            .map(|t: PathBuf| t.to_string_lossy().into_owned());
        out.push(serde_json::json!({"name": name, "type": kind, "size": size, "target": target}));
    }
    out.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    let resolved = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let line = serde_json::json!({"path": resolved.to_string_lossy(), "entries": out});
    stdout_all(&[line.to_string().as_bytes(), b"\n"])
}
