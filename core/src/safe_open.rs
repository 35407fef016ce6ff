//! Reading a file odek takes from the project directory (SPEC §3.2, §5):
//! `odek.json`, `Dockerfile.odek`, `.dockerignore` and the files of a
//! build context. The project is the agent's, so any of them can be swapped
//! for a symlink to a host file, a named pipe or a device while odek runs;
//! a check by path followed by an open by path reads whatever is there at
//! the open. So each file is opened once and everything is learnt from that
//! descriptor:
//!
//! - the directory is reached from `/` one component at a time with
//!   `O_NOFOLLOW | O_DIRECTORY` ([`open_dir`]): no component may be a
//!   symlink;
//! - the file is opened relative to it with
//!   `O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC`: a symlink fails
//!   (`ELOOP`) instead of being followed, and a FIFO opens at once instead
//!   of waiting for a writer;
//! - `fstat` on that descriptor must say "regular file", and its size must
//!   be within the caller's cap;
//! - the bytes are read through that descriptor, never more than `fstat`
//!   said: a file that grows while it is read is cut where `fstat` saw its
//!   end, never read on past the cap.
//!
//! Depends on nothing else in the crate but [`crate::text`].

use std::ffi::OsStr;
use std::fmt;
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path};

use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;

/// Largest `Dockerfile.odek` read (4 MiB).
pub(crate) const MAX_DOCKERFILE_BYTES: u64 = 4 << 20;

/// Largest `.dockerignore` read (1 MiB).
pub(crate) const MAX_DOCKERIGNORE_BYTES: u64 = 1 << 20;

/// Flags of every directory on the way to a file: never followed if it is
/// a symlink. `O_PATH` on Linux, so a directory the user may search but not
/// list (mode 0711) is passed as an open by path would pass it.
#[cfg(any(target_os = "linux", target_os = "android"))]
const WALK: OFlags = OFlags::PATH
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);
#[cfg(not(any(target_os = "linux", target_os = "android")))]
const WALK: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// Flags of the file itself (`O_NOCTTY`: a terminal device swapped in never
/// becomes odek's controlling terminal before `fstat` refuses it).
const FILE: OFlags = OFlags::RDONLY
    .union(OFlags::NOFOLLOW)
    .union(OFlags::NONBLOCK)
    .union(OFlags::NOCTTY)
    .union(OFlags::CLOEXEC);

/// Why a project file was not read. Its `Display` is a phrase to follow the
/// file's name ("odek.json is a symbolic link; …").
#[derive(Debug)]
pub(crate) enum Refused {
    /// The file is a symbolic link (`ELOOP` under `O_NOFOLLOW`).
    Symlink,
    /// `fstat` says it is not a regular file; names what it is.
    NotRegular(&'static str),
    /// Larger than the cap (by `fstat`).
    TooLarge {
        /// Size (bytes).
        size: u64,
        /// The cap (bytes).
        cap: u64,
    },
    /// A directory on the way is a symlink or not a directory, or cannot
    /// be opened; the reason.
    Dir(String),
    /// Opening, `fstat` or reading failed otherwise.
    Io(std::io::Error),
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::Symlink => f.write_str("is a symbolic link"),
            Refused::NotRegular(kind) => write!(f, "is {kind}, not a regular file"),
            Refused::TooLarge { size, cap } => {
                write!(f, "is {size} bytes, larger than the {cap}-byte limit")
            }
            Refused::Dir(reason) => f.write_str(reason),
            Refused::Io(e) => write!(f, "cannot be read: {e}"),
        }
    }
}

/// What a file type is called in messages.
pub(crate) fn kind_of(t: FileType) -> &'static str {
    match t {
        FileType::Directory => "a directory",
        FileType::Fifo => "a named pipe (FIFO)",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        FileType::Symlink => "a symbolic link",
        _ => "of an unknown kind",
    }
}

/// Opens the directory `dir` (absolute, no `.` or `..`) from `/`, one
/// component at a time with `O_NOFOLLOW | O_DIRECTORY`, the last one
/// `O_RDONLY` when `list` (to read its entries). Errors are reasons naming
/// `dir` (quoted): a component is a symlink or not a directory, or cannot
/// be opened.
pub(crate) fn open_dir(dir: &Path, list: bool) -> Result<OwnedFd, String> {
    let shown = || crate::text::quote(&dir.display().to_string());
    let names: Vec<&OsStr> = dir
        .components()
        .filter_map(|c| match c {
            Component::RootDir => None,
            Component::Normal(n) => Some(Ok(n)),
            _ => Some(Err(())),
        })
        .collect::<Result<_, _>>()
        .map_err(|()| format!("{} is not an absolute, normalised path", shown()))?;
    if !dir.is_absolute() {
        return Err(format!("{} is not an absolute, normalised path", shown()));
    }
    let last_flags = if list {
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
    } else {
        WALK
    };
    let root_flags = if names.is_empty() { last_flags } else { WALK };
    let mut fd = rustix::fs::openat(rustix::fs::CWD, "/", root_flags, Mode::empty())
        .map_err(|e| format!("cannot open /: {e}"))?;
    for (i, name) in names.iter().enumerate() {
        let flags = if i + 1 == names.len() {
            last_flags
        } else {
            WALK
        };
        fd = rustix::fs::openat(&fd, *name, flags, Mode::empty()).map_err(|e| match e {
            Errno::LOOP | Errno::NOTDIR => format!(
                "{} has a component that is a symbolic link or not a directory",
                shown()
            ),
            e => format!("cannot open {}: {e}", shown()),
        })?;
    }
    Ok(fd)
}

/// Reads the regular file `name` in the directory `dir` (see the module
/// doc), at most `cap` bytes. `Ok(None)` when there is no such entry.
/// Returns the bytes and the `fstat` of the descriptor they were read from.
pub(crate) fn read_at(
    dir: impl AsFd,
    name: &OsStr,
    cap: u64,
) -> Result<Option<(Vec<u8>, rustix::fs::Stat)>, Refused> {
    match rustix::fs::openat(dir, name, FILE, Mode::empty()) {
        Ok(fd) => read_fd(fd, cap).map(Some),
        Err(Errno::NOENT) => Ok(None),
        Err(Errno::LOOP) => Err(Refused::Symlink),
        Err(e) => Err(open_failed(e)),
    }
}

/// An open that failed otherwise than "no such file" or "a symlink".
fn open_failed(e: Errno) -> Refused {
    match e {
        // What opening a socket (or a device without a driver) answers.
        Errno::NXIO => Refused::NotRegular("a socket or a device"),
        e => Refused::Io(e.into()),
    }
}

/// [`read_at`] for the file `name` in the directory `dir` (absolute, no
/// symlink on the way: [`open_dir`]). `Ok(None)` when there is no such
/// file.
pub(crate) fn read_in(dir: &Path, name: &str, cap: u64) -> Result<Option<Vec<u8>>, Refused> {
    let fd = open_dir(dir, false).map_err(Refused::Dir)?;
    Ok(read_at(&fd, OsStr::new(name), cap)?.map(|(bytes, _)| bytes))
}

/// Reads the file at `path` following symlinks — for a file of the
/// operator's own, such as the user config, which may be a link into a
/// dotfiles checkout — with the other rules of the module doc: opened
/// `O_NONBLOCK`, `fstat` says regular, at most `cap` bytes, read through
/// that descriptor. `Ok(None)` when it does not exist; a dangling symlink
/// is [`Refused::Io`] saying so.
pub(crate) fn read_following(path: &Path, cap: u64) -> Result<Option<Vec<u8>>, Refused> {
    let flags = FILE.difference(OFlags::NOFOLLOW);
    match rustix::fs::open(path, flags, Mode::empty()) {
        Ok(fd) => read_fd(fd, cap).map(|(bytes, _)| Some(bytes)),
        Err(Errno::NOENT) if std::fs::symlink_metadata(path).is_ok() => {
            Err(Refused::Io(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "it is a symbolic link to a file that does not exist",
            )))
        }
        Err(Errno::NOENT) => Ok(None),
        Err(e) => Err(open_failed(e)),
    }
}

/// The rules after the open (module doc) on the descriptor `fd`: `fstat`
/// says regular, its size is within `cap`, and at most that size is read,
/// so a file growing while it is read is cut where `fstat` saw its end.
fn read_fd(fd: OwnedFd, cap: u64) -> Result<(Vec<u8>, rustix::fs::Stat), Refused> {
    let st = rustix::fs::fstat(&fd).map_err(|e| Refused::Io(e.into()))?;
    let kind = FileType::from_raw_mode(st.st_mode);
    if kind != FileType::RegularFile {
        return Err(Refused::NotRegular(kind_of(kind)));
    }
    let size = u64::try_from(st.st_size).unwrap_or(0);
    if size > cap {
        return Err(Refused::TooLarge { size, cap });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    std::fs::File::from(fd)
        .take(size)
        .read_to_end(&mut bytes)
        .map_err(Refused::Io)?;
    Ok((bytes, st))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn dir() -> (tempfile::TempDir, std::path::PathBuf) {
        let d = tempfile::tempdir().expect("tempdir");
        let root = d.path().canonicalize().expect("canonical");
        (d, root)
    }

    #[cfg(target_os = "linux")]
    fn mkfifo(path: &Path) {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            path,
            FileType::Fifo,
            Mode::from_raw_mode(0o644),
            0,
        )
        .expect("mkfifo");
    }

    #[test]
    fn a_regular_file_is_read_and_a_missing_one_is_none() {
        let (_d, root) = dir();
        std::fs::write(root.join("odek.json"), b"{}").expect("write");
        assert_eq!(
            read_in(&root, "odek.json", 10).expect("read"),
            Some(b"{}".to_vec())
        );
        assert!(read_in(&root, "absent", 10).expect("absent").is_none());
    }

    #[test]
    fn a_symlink_is_refused_not_followed() {
        let (_d, root) = dir();
        std::fs::write(root.join("host"), b"host secret").expect("write");
        std::os::unix::fs::symlink(root.join("host"), root.join("odek.json")).expect("ln");
        let e = read_in(&root, "odek.json", 1 << 20).expect_err("symlink");
        assert!(matches!(e, Refused::Symlink), "{e:?}");
        assert_eq!(e.to_string(), "is a symbolic link");
        // Also one to nothing.
        std::os::unix::fs::symlink(root.join("gone"), root.join("dangling")).expect("ln");
        assert!(matches!(
            read_in(&root, "dangling", 10),
            Err(Refused::Symlink)
        ));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_fifo_is_refused_at_once_without_waiting_for_a_writer() {
        let (_d, root) = dir();
        mkfifo(&root.join("odek.json"));
        let start = Instant::now();
        let e = read_in(&root, "odek.json", 1 << 20).expect_err("fifo");
        assert!(start.elapsed() < Duration::from_secs(2), "it waited");
        assert_eq!(e.to_string(), "is a named pipe (FIFO), not a regular file");
        // Following symlinks (the user config) does not wait either.
        let e = read_following(&root.join("odek.json"), 10).expect_err("fifo");
        assert!(matches!(e, Refused::NotRegular(_)), "{e:?}");
        assert!(start.elapsed() < Duration::from_secs(2), "it waited");
    }

    #[test]
    fn a_directory_or_device_is_not_a_regular_file() {
        let (_d, root) = dir();
        std::fs::create_dir(root.join("odek.json")).expect("mkdir");
        let e = read_in(&root, "odek.json", 10).expect_err("dir");
        assert_eq!(e.to_string(), "is a directory, not a regular file");
        let e = read_following(Path::new("/dev/null"), 10).expect_err("device");
        assert_eq!(e.to_string(), "is a character device, not a regular file");
    }

    #[test]
    fn a_file_over_the_cap_is_refused_naming_the_cap() {
        let (_d, root) = dir();
        std::fs::write(root.join("big"), vec![b' '; 11]).expect("write");
        let e = read_in(&root, "big", 10).expect_err("too large");
        assert_eq!(e.to_string(), "is 11 bytes, larger than the 10-byte limit");
        assert_eq!(
            read_in(&root, "big", 11)
                .expect("at the cap")
                .map(|b| b.len()),
            Some(11)
        );
    }

    #[test]
    fn a_symlinked_directory_on_the_way_is_refused() {
        let (_d, root) = dir();
        std::fs::create_dir(root.join("real")).expect("mkdir");
        std::fs::write(root.join("real/odek.json"), b"{}").expect("write");
        std::os::unix::fs::symlink(root.join("real"), root.join("link")).expect("ln");
        let e = read_in(&root.join("link"), "odek.json", 10).expect_err("link");
        assert!(matches!(e, Refused::Dir(_)), "{e:?}");
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert!(read_in(Path::new("relative"), "x", 1).is_err());
        assert!(read_in(&root.join("real/../real"), "odek.json", 10).is_err());
    }
}
