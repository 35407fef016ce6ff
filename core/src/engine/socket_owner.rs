//! Whose Docker socket is it (SPEC §6.2)? Whoever listens on a Unix socket
//! receives the sandbox's settings — its `sandbox_env` values expanded from
//! this process's environment, its mounts — and runs it. So a socket odek
//! finds by probing must pass the rule that guards `$ODEK_HOME` (SPEC §7.3,
//! [`crate::ownership`]): it belongs to the effective uid or root, and so does
//! every directory its path is resolved through, none of which group or
//! others may write (a sticky directory excepted, except the socket's own,
//! see [`check_socket`]). An endpoint the operator names (`DOCKER_HOST`, a
//! Docker context, the embedding program) is used whatever it is, with a
//! warning saying whose socket it is.

use std::ffi::OsString;
use std::fmt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::ownership::{euid, is_trusted_owner, user_name};

/// A user, as the owner of a socket or directory: uid, and the login name
/// from `/etc/passwd` when it has one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SocketOwner {
    /// Numeric user ID.
    pub uid: u32,
    /// Login name, if `/etc/passwd` has one (escaped for display).
    pub name: Option<String>,
}

impl SocketOwner {
    /// The owner with this uid, its name looked up in `/etc/passwd`.
    pub(crate) fn of(uid: u32) -> SocketOwner {
        SocketOwner {
            uid,
            name: user_name(uid),
        }
    }

    /// True when the owner is this process's effective uid or root.
    pub fn is_trusted(&self) -> bool {
        is_trusted_owner(self.uid)
    }
}

impl fmt::Display for SocketOwner {
    /// `uid 1000 (alice)`, or `uid 1000` without a name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.name {
            Some(n) => write!(f, "uid {} ({n})", self.uid),
            None => write!(f, "uid {}", self.uid),
        }
    }
}

/// Why a socket path fails the ownership rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Untrusted {
    /// The socket belongs to another user: that user's daemon listens.
    Socket {
        /// Its owner.
        owner: SocketOwner,
    },
    /// A directory the path is resolved through belongs to another user,
    /// who can replace the socket (or a symlink leading to it).
    DirectoryOwner {
        /// The directory (real path).
        dir: PathBuf,
        /// Its owner.
        owner: SocketOwner,
    },
    /// A directory the path is resolved through can be written by group or
    /// others (and is not sticky, or is the socket's own directory).
    DirectoryWritable {
        /// The directory (real path).
        dir: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The path could not be walked (it vanished, a loop, not a socket at
    /// the end): the system's words.
    Unchecked(String),
}

impl Untrusted {
    /// The reason as a phrase after the socket's path, for a probed socket
    /// passed over; `uri` is how the operator would name it in
    /// `DOCKER_HOST` to use it knowingly.
    pub(crate) fn passed_over(&self, uri: &str) -> String {
        let me = euid();
        let knowingly = format!("set DOCKER_HOST={uri} to use it knowingly");
        match self {
            Untrusted::Socket { owner } => format!(
                "belongs to {owner}, not to you (uid {me}) or root, whose daemon would receive the sandbox and its environment ({knowingly})"
            ),
            Untrusted::DirectoryOwner { dir, owner } => format!(
                "lies in {}, which belongs to {owner}, not to you (uid {me}) or root, who could replace the socket ({knowingly})",
                shown(dir)
            ),
            Untrusted::DirectoryWritable { dir, mode } => format!(
                "lies in {} (mode {mode:04o}), where group or others could replace the socket (`chmod go-w` it, or {knowingly})",
                shown(dir)
            ),
            Untrusted::Unchecked(why) => format!("cannot be checked for its owner ({why})"),
        }
    }

    /// The warning for an endpoint the operator named (`what`, e.g. `the
    /// Docker socket unix:///… (from DOCKER_HOST)`), or `None` when the path
    /// could not be checked (the connection then fails on its own).
    pub(crate) fn named_warning(&self, what: &str) -> Option<String> {
        let consequence = "receives this sandbox and its environment";
        Some(match self {
            Untrusted::Socket { owner } => {
                format!("{what} belongs to {owner}, not you: that user's daemon {consequence}")
            }
            Untrusted::DirectoryOwner { dir, owner } => format!(
                "{what} lies in {}, which belongs to {owner}, not you: that user can replace the socket, and their daemon then {consequence}",
                shown(dir)
            ),
            Untrusted::DirectoryWritable { dir, mode } => format!(
                "{what} lies in {} (mode {mode:04o}): group or others can replace the socket, and their daemon then {consequence}",
                shown(dir)
            ),
            Untrusted::Unchecked(_) => return None,
        })
    }
}

fn shown(p: &Path) -> String {
    crate::text::shown(p)
}

/// Most symlinks followed while walking a socket path (as the kernel's 40).
const MAX_LINKS: usize = 40;

/// Walks the absolute `path` from `/`, one component at a time with
/// `lstat`, following symlinks as the kernel would, and checks everything
/// that decides which socket the path reaches:
///
/// - every directory entered belongs to the effective uid or root and is
///   not writable by group or others unless it is sticky (in a sticky
///   directory nobody else can rename or remove what is ours or root's);
/// - the directory that holds the socket is not writable by group or
///   others at all: while the daemon restarts its socket is absent, and a
///   sticky directory would let anyone bind one of theirs under that name;
/// - the socket belongs to the effective uid or root (a root-owned
///   `root:docker 0660` socket passes: its mode only says who may connect).
///
/// A symlink is followed only from a directory that passed, so it too is
/// the work of the effective uid or root. When all of this holds, nobody
/// else can change what the path reaches, so the path stays safe for every
/// later connection by it (the engine reconnects by path), not only at this
/// moment: that is why the rule is on the directories and not on a
/// descriptor of the socket.
///
/// Returns the socket's owner. Errors: [`Untrusted`]; a socket of another
/// user is reported as such even when a directory on its path fails too.
pub(crate) fn check_socket(path: &Path) -> Result<SocketOwner, Untrusted> {
    if !path.is_absolute() {
        return Err(Untrusted::Unchecked("the path is not absolute".into()));
    }
    // Whose daemon it is matters most: say so first, whatever else is wrong
    // on the way (the walk below decides all the same).
    if let Some(owner) = owner_of(path).filter(|o| !o.is_trusted()) {
        return Err(Untrusted::Socket { owner });
    }
    let mut pending: Vec<OsString> = Vec::new();
    push_components(&mut pending, path);
    let mut cur = PathBuf::from("/");
    check_dir(&cur, &lstat(&cur)?, false)?;
    let mut links = 0;
    while let Some(c) = pending.pop() {
        match c.to_str() {
            Some(".") => continue,
            Some("..") => {
                cur.pop();
                continue;
            }
            _ => {}
        }
        let next = cur.join(&c);
        let meta = lstat(&next)?;
        if meta.file_type().is_symlink() {
            links += 1;
            if links > MAX_LINKS {
                return Err(Untrusted::Unchecked("too many symlinks".into()));
            }
            let target = std::fs::read_link(&next)
                .map_err(|e| Untrusted::Unchecked(format!("{}: {e}", shown(&next))))?;
            if target.is_absolute() {
                cur = PathBuf::from("/");
            }
            push_components(&mut pending, &target);
            continue;
        }
        if pending.is_empty() {
            if !meta.file_type().is_socket() {
                return Err(Untrusted::Unchecked(format!(
                    "{} is not a socket",
                    shown(&next)
                )));
            }
            check_dir(&cur, &lstat(&cur)?, true)?;
            let owner = SocketOwner::of(meta.uid());
            return if owner.is_trusted() {
                Ok(owner)
            } else {
                Err(Untrusted::Socket { owner })
            };
        }
        if !meta.is_dir() {
            return Err(Untrusted::Unchecked(format!(
                "{} is not a directory",
                shown(&next)
            )));
        }
        check_dir(&next, &meta, false)?;
        cur = next;
    }
    Err(Untrusted::Unchecked("the path names a directory".into()))
}

/// The owner of the socket `path` reaches (following symlinks), without
/// the rule: what an operator-named endpoint is. `None` when it cannot be
/// read.
pub(crate) fn owner_of(path: &Path) -> Option<SocketOwner> {
    std::fs::metadata(path)
        .ok()
        .filter(|m| m.file_type().is_socket())
        .map(|m| SocketOwner::of(m.uid()))
}

/// Pushes `p`'s components onto the stack so that the first pops first.
fn push_components(stack: &mut Vec<OsString>, p: &Path) {
    let parts: Vec<OsString> = p
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_os_string()),
            Component::ParentDir => Some("..".into()),
            Component::CurDir => Some(".".into()),
            Component::RootDir | Component::Prefix(_) => None,
        })
        .collect();
    stack.extend(parts.into_iter().rev());
}

fn lstat(p: &Path) -> Result<std::fs::Metadata, Untrusted> {
    std::fs::symlink_metadata(p).map_err(|e| Untrusted::Unchecked(format!("{}: {e}", shown(p))))
}

/// One directory of the walk: owned by the effective uid or root; not
/// writable by group or others unless sticky and not `holds_socket`.
fn check_dir(dir: &Path, meta: &std::fs::Metadata, holds_socket: bool) -> Result<(), Untrusted> {
    if !is_trusted_owner(meta.uid()) {
        return Err(Untrusted::DirectoryOwner {
            dir: dir.to_path_buf(),
            owner: SocketOwner::of(meta.uid()),
        });
    }
    let mode = meta.permissions().mode() & 0o7777;
    let sticky = mode & 0o1000 != 0;
    if mode & 0o022 != 0 && (holds_socket || !sticky) {
        return Err(Untrusted::DirectoryWritable {
            dir: dir.to_path_buf(),
            mode,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    fn chmod(p: &Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    #[test]
    fn an_own_socket_in_an_own_directory_passes_through_symlinks() {
        let d = tempfile::tempdir().expect("tempdir");
        chmod(d.path(), 0o755);
        let sock = d.path().join("s.sock");
        let _l = UnixListener::bind(&sock).expect("bind");
        assert_eq!(check_socket(&sock).map(|o| o.uid), Ok(euid()));
        // An absolute and a relative symlink, and `..` in the path.
        let abs = d.path().join("abs.sock");
        std::os::unix::fs::symlink(&sock, &abs).expect("symlink");
        assert_eq!(check_socket(&abs).map(|o| o.uid), Ok(euid()));
        std::fs::create_dir(d.path().join("sub")).expect("mkdir");
        chmod(&d.path().join("sub"), 0o755);
        let rel = d.path().join("sub/rel.sock");
        std::os::unix::fs::symlink("../s.sock", &rel).expect("symlink");
        assert_eq!(check_socket(&rel).map(|o| o.uid), Ok(euid()));
        assert_eq!(
            check_socket(&d.path().join("sub/../s.sock")).map(|o| o.uid),
            Ok(euid())
        );
    }

    #[test]
    fn a_socket_in_a_writable_directory_fails_even_when_sticky() {
        let d = tempfile::tempdir().expect("tempdir");
        let sock = d.path().join("s.sock");
        let _l = UnixListener::bind(&sock).expect("bind");
        for mode in [0o777, 0o775, 0o1777] {
            chmod(d.path(), mode);
            assert_eq!(
                check_socket(&sock),
                Err(Untrusted::DirectoryWritable {
                    dir: d.path().to_path_buf(),
                    mode
                }),
                "{mode:o}"
            );
        }
        // A sticky directory above the socket's own one is fine (/tmp).
        chmod(d.path(), 0o1777);
        let inner = d.path().join("inner");
        std::fs::create_dir(&inner).expect("mkdir");
        chmod(&inner, 0o700);
        let sock2 = inner.join("s.sock");
        let _l2 = UnixListener::bind(&sock2).expect("bind");
        assert!(check_socket(&sock2).is_ok());
        // Not sticky: anyone could rename `inner` away.
        chmod(d.path(), 0o777);
        assert!(matches!(
            check_socket(&sock2),
            Err(Untrusted::DirectoryWritable { .. })
        ));
    }

    #[test]
    fn a_symlink_is_judged_by_where_it_leads() {
        if !rustix::process::geteuid().is_root() {
            return; // Only root can give a directory away.
        }
        let d = tempfile::tempdir().expect("tempdir");
        let theirs = d.path().join("theirs");
        std::fs::create_dir(&theirs).expect("mkdir");
        let sock = theirs.join("s.sock");
        let _l = UnixListener::bind(&sock).expect("bind");
        rustix::fs::chown(&theirs, Some(rustix::fs::Uid::from_raw(65534)), None).expect("chown");
        let link = d.path().join("link.sock");
        std::os::unix::fs::symlink(&sock, &link).expect("symlink");
        let err = check_socket(&link).expect_err("leads into uid 65534's directory");
        assert!(
            matches!(&err, Untrusted::DirectoryOwner { dir, owner } if *dir == theirs && owner.uid == 65534),
            "{err:?}"
        );
        // Their socket in their directory: whose daemon it is comes first.
        rustix::fs::chown(&sock, Some(rustix::fs::Uid::from_raw(65534)), None).expect("chown");
        let err = check_socket(&link).expect_err("their socket");
        assert!(
            matches!(&err, Untrusted::Socket { owner } if owner.uid == 65534),
            "{err:?}"
        );
    }

    #[test]
    fn owners_are_shown_with_their_names() {
        assert_eq!(SocketOwner::of(0).to_string(), "uid 0 (root)");
        assert_eq!(SocketOwner::of(4_000_000_000).to_string(), "uid 4000000000");
        assert!(SocketOwner::of(0).is_trusted());
    }

    #[test]
    fn what_is_not_a_socket_or_absent_is_unchecked() {
        let d = tempfile::tempdir().expect("tempdir");
        let f = d.path().join("f");
        std::fs::write(&f, b"").expect("write");
        assert!(matches!(check_socket(&f), Err(Untrusted::Unchecked(_))));
        assert!(matches!(
            check_socket(&d.path().join("absent")),
            Err(Untrusted::Unchecked(_))
        ));
        assert!(matches!(
            check_socket(Path::new("relative.sock")),
            Err(Untrusted::Unchecked(_))
        ));
        let l = d.path().join("loop");
        std::os::unix::fs::symlink(&l, &l).expect("symlink");
        assert!(matches!(check_socket(&l), Err(Untrusted::Unchecked(_))));
    }
}
