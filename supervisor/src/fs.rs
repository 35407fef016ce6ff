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
//!   `{"size":N,"offset":O,"length":L}` and then at most `L` bytes of the
//!   file from `OFFSET` (`L` = min(LENGTH, size − OFFSET), 0 past the end).
//!   The line comes before the file is read (the core checks the size
//!   against its limits and may stop the read), and the bytes stream
//!   through a small buffer; fewer than `L` bytes follow when the file is
//!   shorter than its size said (a `/sys` file) or shrank while read. A
//!   file whose size is 0 (most of `/proc` and `/sys`, whose size the
//!   kernel does not know) is read until its end, up to `LENGTH` bytes:
//!   its line, written after the read, says `L` exactly and as `N` where
//!   those bytes end, plus 1 when more follows. Only a regular file is
//!   read (opened `O_NONBLOCK`, so a FIFO cannot hang it).
//! - `fs write PATH MAX`: the new content is stdin (at most `MAX` bytes;
//!   more is refused before anything is written). Parent directories are
//!   created. An existing file (a symlink is followed, inside the sandbox)
//!   is replaced through a temporary file in its own directory and
//!   `rename`, keeping its permission bits; when that directory is not
//!   writable, the file is rewritten in place. stdout: one JSON line
//!   `{"path":P,"bytes":N,"created":B}` (`P` the file written, symlinks
//!   resolved).
//! - `fs list PATH`: stdout is one JSON line `{"path":P,"entries":[{"name",
//!   "type","size","target"}],"total":T,"truncated":B}`, sorted by name;
//!   `type` is `file`, `dir`, `symlink` or `other` (a symlink is not
//!   followed; `target` is its text). At most
//!   [`FS_LIST_MAX_ENTRIES`](odek_supervisor::proto::FS_LIST_MAX_ENTRIES)
//!   entries (the first by name) and
//!   [`FS_LIST_MAX_BYTES`](odek_supervisor::proto::FS_LIST_MAX_BYTES) of
//!   them as JSON: `truncated` says when entries were cut, `total` counts
//!   the directory's entries.
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

use odek_supervisor::proto;

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
                (Ok(o), Ok(l)) => read(Path::new(path), o, l, &mut io::stdout().lock()),
                _ => return usage(),
            }
        }
        [op, path, max] if op == "write" => match max.parse::<u64>() {
            Ok(max) => write(Path::new(path), max),
            Err(_) => return usage(),
        },
        [op, path] if op == "list" => list(
            Path::new(path),
            proto::FS_LIST_MAX_ENTRIES,
            proto::FS_LIST_MAX_BYTES,
        )
        .and_then(|line| stdout_all(&[line.to_string().as_bytes(), b"\n"])),
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

/// `fs read`, its stdout `out`.
fn read(path: &Path, offset: u64, length: u64, out: &mut dyn Write) -> Result<(), Refused> {
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
    if size == 0 {
        return read_unsized(path, &file, offset, length, out);
    }
    // The head first, so that the core checks the size against its limits
    // before the bytes come, and the bytes stream through a small buffer.
    let want = length.min(size.saturating_sub(offset));
    let head = serde_json::json!({"size": size, "offset": offset, "length": want});
    let result = |e: io::Error| Refused::io("cannot write the result", &e);
    out.write_all(format!("{head}\n").as_bytes())
        .map_err(result)?;
    let mut at = offset;
    let end = offset.saturating_add(want);
    let mut buf = vec![0u8; 64 * 1024];
    while at < end {
        let n = buf
            .len()
            .min(usize::try_from(end - at).unwrap_or(buf.len()));
        match read_at(&file, &mut buf[..n], at) {
            Ok(0) => break, // shorter than its size said (a /sys file), or it shrank
            Ok(got) => {
                out.write_all(&buf[..got]).map_err(result)?;
                at += got as u64;
            }
            Err(e) => return Err(Refused::io(&format!("cannot read {}", shown(path)), &e)),
        }
    }
    out.flush().map_err(result)
}

/// `read_at`, retried on `EINTR`.
fn read_at(file: &File, buf: &mut [u8], at: u64) -> io::Result<usize> {
    use std::os::unix::fs::FileExt;
    loop {
        match file.read_at(buf, at) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            other => return other,
        }
    }
}

/// A read of a file whose size the kernel does not say (`st_size` 0: most
/// of `/proc` and `/sys`): up to `length` bytes from `offset` until its
/// end, one more to learn whether it goes on. The head's `size` is then
/// where the bytes read end, plus 1 when more follows (a lower bound).
fn read_unsized(
    path: &Path,
    file: &File,
    offset: u64,
    length: u64,
    out: &mut dyn Write,
) -> Result<(), Refused> {
    let cap = usize::try_from(length.saturating_add(1)).unwrap_or(usize::MAX);
    let mut bytes = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut at = offset;
    while bytes.len() < cap {
        let n = buf.len().min(cap - bytes.len());
        match read_at(file, &mut buf[..n], at) {
            Ok(0) => break,
            Ok(got) => {
                bytes.extend_from_slice(&buf[..got]);
                at += got as u64;
            }
            Err(e) => return Err(Refused::io(&format!("cannot read {}", shown(path)), &e)),
        }
    }
    let more = bytes.len() as u64 > length;
    bytes.truncate(usize::try_from(length).unwrap_or(usize::MAX));
    let size = offset + bytes.len() as u64 + u64::from(more);
    let head = serde_json::json!({"size": size, "offset": offset, "length": bytes.len()});
    let result = |e: io::Error| Refused::io("cannot write the result", &e);
    out.write_all(format!("{head}\n").as_bytes())
        .and_then(|()| out.write_all(&bytes))
        .and_then(|()| out.flush())
        .map_err(result)
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

/// `fs list`'s line: at most `max_entries` entries, the first by name, and
/// `max_bytes` of them as JSON.
fn list(path: &Path, max_entries: usize, max_bytes: usize) -> Result<serde_json::Value, Refused> {
    let entries =
        fs::read_dir(path).map_err(|e| Refused::io(&format!("cannot list {}", shown(path)), &e))?;
    // The first `max_entries` names, kept in a heap as they come: a
    // directory of millions of entries costs no more memory here than one
    // of `max_entries`, and only the entries kept are looked at.
    let mut kept: std::collections::BinaryHeap<(String, std::ffi::OsString)> =
        std::collections::BinaryHeap::new();
    let mut total: u64 = 0;
    for entry in entries {
        let entry = entry.map_err(|e| Refused::io(&format!("cannot list {}", shown(path)), &e))?;
        total += 1;
        let raw = entry.file_name();
        let name = raw.to_string_lossy().into_owned();
        if kept.len() < max_entries {
            kept.push((name, raw));
        } else if kept.peek().is_some_and(|(last, _)| name < *last) {
            kept.pop();
            kept.push((name, raw));
        }
    }
    let mut out = Vec::new();
    let mut bytes = 0usize;
    let mut truncated = kept.len() as u64 != total;
    for (name, raw) in kept.into_sorted_vec() {
        let full = path.join(&raw);
        let meta = fs::symlink_metadata(&full).ok(); // does not follow a symlink
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
            .then(|| fs::read_link(&full).ok())
            .flatten()
            .map(|t: PathBuf| t.to_string_lossy().into_owned());
        let e = serde_json::json!({"name": name, "type": kind, "size": size, "target": target});
        bytes += e.to_string().len() + 1;
        if bytes > max_bytes {
            truncated = true;
            break;
        }
        out.push(e);
    }
    let resolved = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    Ok(serde_json::json!({
        "path": resolved.to_string_lossy(),
        "entries": out,
        "total": total,
        "truncated": truncated,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory under the system's temporary one, removed on drop.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(tag: &str) -> Scratch {
            let dir = std::env::temp_dir().join(format!(
                "odek-fs-{tag}-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).expect("mkdir");
            Scratch(dir)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn names(line: &serde_json::Value) -> Vec<String> {
        line["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .map(|e| e["name"].as_str().expect("a name").to_string())
            .collect()
    }

    #[test]
    fn a_listing_keeps_the_first_entries_by_name_and_counts_them_all() {
        let d = Scratch::new("list");
        for i in (0..50).rev() {
            fs::write(d.0.join(format!("f{i:03}")), b"x").expect("write");
        }
        let line = list(&d.0, 10, 1 << 20)
            .map_err(|r| r.message)
            .expect("list");
        let want: Vec<String> = (0..10).map(|i| format!("f{i:03}")).collect();
        assert_eq!(names(&line), want);
        assert_eq!(
            (line["total"].as_u64(), line["truncated"].as_bool()),
            (Some(50), Some(true))
        );
        assert_eq!(line["entries"][0]["size"], 1);
        // Within the limits: everything, not truncated.
        let line = list(&d.0, 50, 1 << 20)
            .map_err(|r| r.message)
            .expect("list");
        assert_eq!(names(&line).len(), 50);
        assert_eq!(line["truncated"], false);
        // The byte limit cuts too.
        let line = list(&d.0, 50, 200).map_err(|r| r.message).expect("list");
        let kept = names(&line).len();
        assert!(kept > 0 && kept < 5, "{kept}");
        assert_eq!(
            (line["total"].as_u64(), line["truncated"].as_bool()),
            (Some(50), Some(true))
        );
    }

    fn read_out(path: &Path, offset: u64, length: u64) -> (serde_json::Value, Vec<u8>) {
        let mut out = Vec::new();
        read(path, offset, length, &mut out)
            .map_err(|r| r.message)
            .expect("read");
        let nl = out.iter().position(|b| *b == b'\n').expect("a head line");
        let head = serde_json::from_slice(&out[..nl]).expect("a JSON head");
        (head, out[nl + 1..].to_vec())
    }

    #[test]
    fn a_read_says_the_size_first_and_sends_at_most_the_length() {
        let d = Scratch::new("read");
        let f = d.0.join("a");
        fs::write(&f, b"0123456789").expect("write");
        let (head, bytes) = read_out(&f, 2, 5);
        assert_eq!(
            head,
            serde_json::json!({"size": 10, "offset": 2, "length": 5})
        );
        assert_eq!(bytes, b"23456");
        let (head, bytes) = read_out(&f, 8, 5);
        assert_eq!(head["length"], 2);
        assert_eq!(bytes, b"89");
    }

    #[test]
    fn a_proc_file_whose_size_is_zero_is_read_to_its_end() {
        let f = Path::new("/proc/self/status");
        assert_eq!(fs::metadata(f).map(|m| m.len()).ok(), Some(0));
        let (head, bytes) = read_out(f, 0, 1 << 20);
        assert!(
            bytes.starts_with(b"Name:"),
            "{}",
            String::from_utf8_lossy(&bytes)
        );
        assert_eq!(head["length"].as_u64(), Some(bytes.len() as u64));
        assert_eq!(head["size"].as_u64(), Some(bytes.len() as u64), "{head}");
        // A piece: its size says that more follows.
        let (head, bytes) = read_out(f, 0, 4);
        assert_eq!(bytes, b"Name");
        assert_eq!(
            (head["length"].as_u64(), head["size"].as_u64()),
            (Some(4), Some(5))
        );
    }
}
