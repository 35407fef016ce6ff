//! Host-path safety of SPEC §3.4: the working directory mounted at
//! `/workspace` ([`validate_workdir`]) and the `sandbox_volumes` entries
//! ([`resolve_volume`]). Both read the file system (lstat, canonical paths,
//! `/proc/self/mountinfo`, `/etc/passwd`, a bounded scan for sockets); no
//! Docker, no environment reads.
//!
//! `origin` is a human description of where the value came from, used
//! verbatim in error messages; user values appear only through
//! [`super::quote`].

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::advice::Fix;

use super::validate::{char_name, is_hidden_or_control};
use super::{quote, ConfigError, VolumeMount};

/// Host directories that are never mounted, nor any ancestor of them.
const SYSTEM_ROOTS: &[&str] = &[
    "/",
    "/etc",
    "/proc",
    "/sys",
    "/dev",
    "/var/run",
    "/run",
    "/root",
    "/home",
    "/Users",
    "/private",
    "/usr",
    "/boot",
    "/var/lib/docker",
];

/// Host directories below which nothing is mounted (kernel interfaces,
/// devices, Docker's own state) — the volume rule of SPEC §3.4.
const NO_MOUNT_BELOW: &[&str] = &["/proc", "/sys", "/dev", "/boot", "/var/lib/docker"];

/// Host directories below which the working directory may not lie either: it
/// is mounted read-write at `/workspace`, and a root container writing into
/// `/etc/cron.d`, `/usr/local/bin` or `/var/spool` would run code on the host.
const NO_WORKDIR_BELOW: &[&str] = &[
    "/proc",
    "/sys",
    "/dev",
    "/boot",
    "/etc",
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/run",
    "/var/run",
    "/var/lib/docker",
    "/var/spool",
    "/var/log",
    "/var/cache",
    "/var/snap",
    // macOS spellings after canonicalisation (untested here).
    "/private/etc",
    "/private/var/run",
    "/private/var/db",
    "/System",
    "/Library",
];

/// Shared directories the working directory may not be, nor an ancestor
/// of: other programs keep their files and sockets there (`/tmp/tmux-0`,
/// ssh agents, `/var/mail`, `/var/backups`), which a root sandbox at
/// `/workspace` could read, replace or connect to. A project below `/tmp`
/// or `/opt` is fine.
const NO_WORKDIR_AT: &[&str] = &[
    "/tmp",
    "/var/tmp",
    "/opt",
    "/srv",
    "/var",
    "/var/mail",
    "/var/local",
    "/var/backups",
    // macOS spellings after canonicalisation (untested here).
    "/private/tmp",
    "/private/var/tmp",
];

/// Where the Docker daemon's socket lives.
const DOCKER_SOCKETS: &[&str] = &["/var/run/docker.sock", "/run/docker.sock"];

/// How far below the working directory [`validate_workdir`] looks for a
/// Unix socket (and below a mounted directory [`resolve_volume`] for a
/// `docker.sock` entry), and how many entries it looks at at most.
const SOCKET_SCAN_DEPTH: usize = 4;
const SOCKET_SCAN_ENTRIES: usize = 50_000;
/// One `sandbox_volumes` entry `host:container[:ro|rw]` (SPEC §3.4): the host
/// path (relative to `workdir` or absolute) must lie inside `workdir` (and
/// not be `workdir` itself, which is already mounted at `/workspace`), with
/// no `..` component, and no symlink at any component between `workdir` and
/// the final path (inclusive); it must exist; it must not be (or contain)
/// the Docker socket — `/var/run/docker.sock`, `/run/docker.sock`, any Unix
/// socket, or a directory with a `docker.sock` entry up to 4 levels down —
/// nor be a system root (`/`, `/etc`, `/proc`, `/sys`, `/dev`, `/var/run`,
/// `/run`, `/root`, `/home`, `/usr`, `/boot`, `/var/lib/docker`), an
/// ancestor of one, or below `/proc`, `/sys`, `/dev`, `/boot` or
/// `/var/lib/docker`, even if `workdir` is one of them. The container path
/// must be absolute, without `..`, and not `/`, `/workspace` itself, `/tmp`,
/// nor `/proc`, `/sys`, `/dev` or below them. Options: only `ro` or `rw`.
/// Control and invisible formatting characters (bidi overrides, zero-width)
/// are refused anywhere in the entry. `workdir` is absolute and canonical
/// (else [`ConfigError::Workdir`]). Returns the canonical host path and the
/// normalised container path; errors are [`ConfigError::InvalidVolume`].
pub fn resolve_volume(
    origin: &str,
    spec: &str,
    workdir: &Path,
) -> Result<VolumeMount, ConfigError> {
    let refuse = |reason: String| ConfigError::InvalidVolume {
        origin: origin.to_string(),
        value: quote(spec),
        reason,
    };
    if let Some(c) = spec.chars().find(|&c| is_hidden_or_control(c)) {
        return Err(refuse(format!(
            "it contains the control or invisible character {}",
            char_name(c)
        )));
    }
    let parts: Vec<&str> = spec.split(':').collect();
    let (host, container, read_only) = match parts.as_slice() {
        [host, container] => (*host, *container, false),
        [host, container, "ro"] => (*host, *container, true),
        [host, container, "rw"] => (*host, *container, false),
        [_, _, option] => {
            return Err(refuse(format!(
                "option {} is not supported; use ro or rw",
                quote(option)
            )))
        }
        _ => {
            return Err(refuse(
                "it must have the form host:container[:ro|rw]".to_string(),
            ))
        }
    };
    if host.is_empty() {
        return Err(refuse("the host path is empty".to_string()));
    }
    if container.is_empty() {
        return Err(refuse("the container path is empty".to_string()));
    }
    let container = container_path(container).map_err(refuse)?;
    check_workdir(workdir)?;
    let host = host_path(host, workdir).map_err(refuse)?;
    // A target inside /workspace is a path in the working directory itself:
    // a missing one the engine would create there, as root (SPEC §6.1).
    if let Some(rel) = container.strip_prefix("/workspace/") {
        target_in_workdir(rel, workdir).map_err(refuse)?;
    }
    Ok(VolumeMount {
        spec: spec.to_string(),
        host,
        container,
        read_only,
    })
}

/// A volume target `/workspace/<rel>` must already exist in the working
/// directory, every component walked without following a symlink: the
/// engine creates a missing mount target, as root, and a symlink there would
/// lead the mount elsewhere.
fn target_in_workdir(rel: &str, workdir: &Path) -> Result<(), String> {
    let mut current = workdir.to_path_buf();
    for part in rel.split('/') {
        current.push(part);
        let shown = quote(&current.display().to_string());
        match std::fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(format!(
                    "its target /workspace/{rel} is {shown} in the working directory, a symbolic link; symlinks are refused at every component"
                ))
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(format!(
                    "its target /workspace/{rel} does not exist in the working directory, and the engine would create {shown} there as root; create it first (mkdir -p {})",
                    quote(&workdir.join(rel).display().to_string())
                ))
            }
            Err(e) => return Err(format!("cannot inspect {shown}: {e}")),
        }
    }
    Ok(())
}

/// odek's supervisor directory in every sandbox
/// ([`crate::supervisor::SUPERVISOR_DIR`]; spelled here because config sits
/// below the supervisor module, and a test checks the two agree).
pub(crate) const SUPERVISOR_DIR_TARGET: &str = "/.odek";

/// The sandbox account's home ([`crate::account::ACCOUNT_HOME`], checked
/// by a test as above).
pub(crate) const ACCOUNT_HOME_TARGET: &str = "/home/odek";

/// Why a normalised container path is one odek or the engine mounts
/// itself, so that no volume may cover it: the supervisor's directory and
/// anything below it (a volume over `/.odek/odek-supervisor` would become
/// the sandbox's process, as root with the supervisor's capabilities), the
/// engine's init (`docker-init`, which Docker mounts at `/sbin/docker-init`
/// and the image's symlinks may lead elsewhere, and Podman's
/// `podman-init`: any path of that name), and the account's files and home
/// (SPEC §6.1 "user"). `None` for any other path. Used when a volume is
/// parsed and again by the verify after start (`hardening.rs`), so a plan
/// handed back through the C ABI cannot carry one either.
pub(crate) fn reserved_target(normalized: &str) -> Option<&'static str> {
    let under = |dir: &str| {
        normalized == dir
            || normalized
                .strip_prefix(dir)
                .is_some_and(|rest| rest.starts_with('/'))
    };
    let name = normalized.rsplit('/').next().unwrap_or("");
    if under(SUPERVISOR_DIR_TARGET) {
        Some("/.odek holds odek's supervisor, the sandbox's own process")
    } else if matches!(name, "docker-init" | "podman-init") {
        Some("a file of that name is the engine's init, the sandbox's PID 1")
    } else if normalized == "/etc/passwd" || normalized == "/etc/group" {
        Some("odek mounts the sandbox account's /etc/passwd and /etc/group there")
    } else if under(ACCOUNT_HOME_TARGET) {
        Some("/home/odek is the sandbox account's private home (a tmpfs)")
    } else {
        None
    }
}

/// A container path as the engine reads it, for [`reserved_target`]: empty
/// and `.` components dropped, `..` taken as the parent (`/x/../.odek` is
/// `/.odek`), always absolute.
pub(crate) fn clean_container_path(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            _ => parts.push(part),
        }
    }
    format!("/{}", parts.join("/"))
}

/// Checks a container path and returns it normalised (no `.`, no empty
/// components, no trailing `/`).
fn container_path(path: &str) -> Result<String, String> {
    if !path.starts_with('/') {
        return Err(format!(
            "the container path {} must be absolute",
            quote(path)
        ));
    }
    let mut parts = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                return Err(format!(
                    "the container path {} must not contain a '..' component",
                    quote(path)
                ))
            }
            _ => parts.push(part),
        }
    }
    let normalized = format!("/{}", parts.join("/"));
    let refused = match parts.as_slice() {
        [] => Some("/ is the container's root"),
        ["workspace"] => Some("/workspace is where the working directory is mounted"),
        ["tmp"] => Some("/tmp is the sandbox's noexec tmpfs"),
        ["proc" | "sys" | "dev", ..] => Some("/proc, /sys and /dev belong to the kernel"),
        _ => reserved_target(&normalized),
    };
    match refused {
        Some(why) => Err(format!(
            "the container path {} is not allowed: {why}",
            quote(&normalized)
        )),
        None => Ok(normalized),
    }
}

/// The working directory is mounted at `/workspace` read-write, and the
/// sandbox runs as root by default: it must not be a system directory (or an
/// ancestor of one), a shared directory such as `/tmp`, `/var/tmp`, `/opt`,
/// `/srv` or `/var` (or an ancestor of one, `NO_WORKDIR_AT`), lie below
/// one the host runs code or state from (`NO_WORKDIR_BELOW`, `/var/lib`
/// except a service user's home there), be a login user's home directory or
/// an ancestor of one, or lie in a hidden directory of one (`~/.ssh`). It
/// must have nothing mounted anywhere below it (`/proc/self/mountinfo`:
/// Docker mounts it recursively, so a bind mount of `/var/run` deep inside
/// would hand the sandbox the Docker socket), and hold no Unix socket (and
/// no entry named `docker.sock`) within 4 levels (`SOCKET_SCAN_DEPTH`) and the
/// first 50 000 entries (`SOCKET_SCAN_ENTRIES`; lstat, no symlink followed): as
/// root, the sandbox could connect to a root-owned tmux or agent socket and
/// run commands on the host. Login homes are `$HOME` and those of root and
/// of users with uid 1000–65533 in `/etc/passwd`. `workdir` is canonical.
/// SPEC §3.4 applied to the mount every sandbox gets.
///
/// # Errors
/// [`ConfigError::Workdir`] naming the rule (and the socket or mount point,
/// quoted) and the fix.
pub(crate) fn validate_workdir(
    workdir: &Path,
    home: Option<&Path>,
) -> Result<RootOwned, ConfigError> {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let mut homes = login_homes(&passwd);
    homes.extend(home.and_then(|h| h.canonicalize().ok()));
    homes.push(PathBuf::from("/root"));
    homes.retain(|h| h.parent().is_some());
    let service_homes: Vec<PathBuf> = passwd_entries(&passwd)
        .map(|(_, h)| PathBuf::from(h))
        .collect();
    check_workdir_paths(workdir, &homes, &service_homes)?;
    check_workdir_sockets(workdir)
}

/// `(uid, home)` of each well-formed `/etc/passwd` line.
fn passwd_entries(passwd: &str) -> impl Iterator<Item = (u32, &str)> {
    passwd.lines().filter_map(|line| {
        let f: Vec<&str> = line.split(':').collect();
        let uid = f.get(2)?.parse().ok()?;
        let home = *f.get(5)?;
        home.starts_with('/').then_some((uid, home))
    })
}

/// Homes of root and of login users (uid 1000–65533), canonical, existing.
fn login_homes(passwd: &str) -> Vec<PathBuf> {
    passwd_entries(passwd)
        .filter(|(uid, _)| *uid == 0 || (1000..65534).contains(uid))
        .filter_map(|(_, h)| Path::new(h).canonicalize().ok())
        .collect()
}

/// The path rules of [`validate_workdir`] (no file system access).
fn check_workdir_paths(
    workdir: &Path,
    homes: &[PathBuf],
    service_homes: &[PathBuf],
) -> Result<(), ConfigError> {
    let fail = |reason: String| ConfigError::Workdir {
        path: workdir.to_path_buf(),
        reason: format!("{reason}; "),
        fix: Some(Fix::RunFrom {
            dir: "a project directory".into(),
        }),
    };
    if SYSTEM_ROOTS
        .iter()
        .any(|root| Path::new(root).starts_with(workdir))
    {
        return Err(fail(
            "is (or contains) a system directory and would be mounted at /workspace".into(),
        ));
    }
    if let Some(shared) = NO_WORKDIR_AT
        .iter()
        .find(|dir| Path::new(dir).starts_with(workdir))
    {
        return Err(fail(format!(
            "is (or contains) the shared directory {shared}, where other programs keep files and sockets (tmux, ssh agents) that a sandbox must not reach; a project directory below it is fine"
        )));
    }
    if let Some(root) = NO_WORKDIR_BELOW
        .iter()
        .find(|root| workdir.starts_with(root))
    {
        return Err(fail(format!(
            "lies in the system directory {root}, which a sandbox must not write to"
        )));
    }
    // /var/lib holds the host's package, container and service state; a
    // service user's home there (e.g. /var/lib/jenkins) is a workspace.
    let var_lib = Path::new("/var/lib");
    if workdir.starts_with(var_lib)
        && !service_homes
            .iter()
            .any(|h| h != var_lib && h.starts_with(var_lib) && workdir.starts_with(h))
    {
        return Err(fail(
            "lies in the system directory /var/lib, which a sandbox must not write to".into(),
        ));
    }
    for home in homes {
        let shown = quote(&home.display().to_string());
        if home == workdir {
            return Err(fail(format!(
                "is the home directory {shown} (credentials live there) and would be mounted at /workspace"
            )));
        }
        if home.starts_with(workdir) {
            return Err(fail(format!(
                "contains the home directory {shown} (credentials live there) and would be mounted at /workspace"
            )));
        }
        // `~/.ssh`, `~/.aws`, `~/.config/…`: credentials and configuration
        // the host runs with.
        let hidden = workdir
            .strip_prefix(home)
            .ok()
            .and_then(|rest| rest.components().next())
            .is_some_and(|c| c.as_os_str().to_string_lossy().starts_with('.'));
        if hidden {
            return Err(fail(format!(
                "lies in a hidden directory of the home directory {shown} (credentials and tool configuration live there)"
            )));
        }
    }
    Ok(())
}

/// What in the working directory belongs to root and is writable by
/// nobody else (the working directory itself, and entries within the
/// socket scan's depth and count): files an earlier sandbox that ran as
/// root may have left, which a sandbox running as the operator's user
/// cannot change (SPEC §6.1 "user").
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RootOwned {
    /// How many such entries were seen.
    pub count: usize,
    /// The first one seen.
    pub example: Option<PathBuf>,
}

impl RootOwned {
    fn note(&mut self, path: &Path, meta: &std::fs::Metadata) {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        if meta.uid() == 0
            && meta.permissions().mode() & 0o002 == 0
            && !meta.file_type().is_symlink()
        {
            self.count += 1;
            if self.example.is_none() {
                self.example = Some(path.to_path_buf());
            }
        }
    }
}

/// The socket and mount rules of [`validate_workdir`]; returns what it saw
/// that belongs to root ([`RootOwned`]).
fn check_workdir_sockets(workdir: &Path) -> Result<RootOwned, ConfigError> {
    let fail = |reason: String, dir: &str| ConfigError::Workdir {
        path: workdir.to_path_buf(),
        reason,
        fix: Some(Fix::RunFrom { dir: dir.into() }),
    };
    // Anything mounted below the workdir, at any depth: Docker binds the
    // working directory recursively, and the scan below neither reaches
    // deep mounts nor sees what a mount hides. A socket bind-mounted over a
    // regular file gets the more specific message.
    let mounts = mount_points_below(workdir);
    if let Some(socket) = mounts
        .iter()
        .find(|m| std::fs::symlink_metadata(m).is_ok_and(|m| is_socket(&m)))
    {
        let shown = quote(&socket.display().to_string());
        return Err(fail(
            format!(
                "has a Unix socket mounted at {shown} that the sandbox would reach under /workspace; unmount it (umount {shown}) or "
            ),
            "a directory without mounts below it",
        ));
    }
    if let Some(mount) = mounts.first() {
        let shown = quote(&mount.display().to_string());
        return Err(fail(
            format!(
                "has a file system mounted at {shown}; Docker mounts the working directory with everything mounted below it, so the sandbox would reach it under /workspace (a bind mount of /var/run would hand it the Docker socket); unmount it (umount {shown}) or "
            ),
            "a directory without mounts below it",
        ));
    }
    let mut root_owned = RootOwned::default();
    if let Ok(meta) = std::fs::symlink_metadata(workdir) {
        root_owned.note(workdir, &meta);
    }
    match find_socket(workdir, true, Some(&mut root_owned)) {
        Some(Socket::Docker(socket)) => Err(fail(
            format!(
                "holds the Docker socket ({}) that the sandbox would reach under /workspace; remove or move it, or ",
                quote(&socket.display().to_string())
            ),
            "a project directory without it",
        )),
        Some(Socket::Other(socket)) => Err(fail(
            format!(
                "holds a Unix socket ({}) that the sandbox would reach under /workspace, and a root sandbox could use it against the host (a root-owned tmux socket runs commands there); remove or move the socket, or ",
                quote(&socket.display().to_string())
            ),
            "a directory without one (git's fsmonitor daemon, ssh ControlMaster and gpg-agent create sockets)",
        )),
        None => Ok(root_owned),
    }
}

/// Mount points strictly below `dir`, from `/proc/self/mountinfo` (empty
/// where that file does not exist), parsed as verify parses the
/// container's ([`crate::mounts::parse_mountinfo`]).
fn mount_points_below(dir: &Path) -> Vec<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    crate::mounts::parse_mountinfo(&info)
        .into_iter()
        .map(|m| m.mount_point)
        .filter(|p| p != dir && p.starts_with(dir))
        .collect()
}

fn check_workdir(workdir: &Path) -> Result<(), ConfigError> {
    let fail = |reason: String| ConfigError::Workdir {
        path: workdir.to_path_buf(),
        reason,
        fix: None,
    };
    if !workdir.is_absolute() {
        return Err(fail("is not an absolute path".to_string()));
    }
    match std::fs::canonicalize(workdir) {
        Ok(canonical) if canonical == workdir => Ok(()),
        Ok(canonical) => Err(fail(format!(
            "is not canonical (it resolves to {})",
            quote(&canonical.display().to_string())
        ))),
        Err(e) => Err(fail(format!("cannot be resolved: {e}"))),
    }
}

/// Resolves and checks the host side; `Err` is the reason.
fn host_path(host: &str, workdir: &Path) -> Result<PathBuf, String> {
    let raw = Path::new(host);
    if raw.components().any(|c| c == Component::ParentDir) {
        return Err("the host path must not contain a '..' component".to_string());
    }
    let joined = if raw.is_absolute() {
        raw.to_path_buf()
    } else {
        workdir.join(raw)
    };
    let normalized: PathBuf = joined
        .components()
        .filter(|c| *c != Component::CurDir)
        .collect();
    let outside = || {
        format!(
            "the host path must be inside the working directory {}",
            quote(&workdir.display().to_string())
        )
    };
    let relative = normalized.strip_prefix(workdir).map_err(|_| outside())?;
    if relative.as_os_str().is_empty() {
        return Err(
            "the host path is the working directory itself, which is already mounted at \
             /workspace"
                .to_string(),
        );
    }

    // Walk down from workdir with lstat: no component may be a symlink.
    let mut current = workdir.to_path_buf();
    let mut last = None;
    for component in relative.components() {
        current.push(component);
        let shown = quote(&current.display().to_string());
        match std::fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(format!(
                    "{shown} is a symbolic link; symlinks are refused at every component"
                ))
            }
            Ok(meta) => last = Some(meta),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(format!(
                    "{shown} does not exist (host paths are relative to the working directory; \
                     named volumes are not supported)"
                ))
            }
            Err(e) => return Err(format!("cannot inspect {shown}: {e}")),
        }
    }
    let meta = last.ok_or_else(outside)?;

    let canonical = std::fs::canonicalize(&normalized)
        .map_err(|e| format!("cannot resolve the host path: {e}"))?;
    if canonical != normalized || !canonical.starts_with(workdir) {
        return Err(format!(
            "the host path resolves to {}, not to itself (it changed while being checked)",
            quote(&canonical.display().to_string())
        ));
    }

    check_not_sensitive(&canonical, &meta)?;
    Ok(canonical)
}

/// Refuses the Docker socket, sockets in general, system roots and what
/// lies below kernel/device/Docker-state directories.
fn check_not_sensitive(path: &Path, meta: &std::fs::Metadata) -> Result<(), String> {
    let shown = quote(&path.display().to_string());
    if DOCKER_SOCKETS.iter().any(|s| path == Path::new(s)) {
        return Err(format!("{shown} is the Docker socket"));
    }
    if SYSTEM_ROOTS
        .iter()
        .any(|root| Path::new(root).starts_with(path))
    {
        return Err(format!("{shown} is (or contains) a system directory"));
    }
    if NO_MOUNT_BELOW.iter().any(|root| path.starts_with(root)) {
        return Err(format!(
            "{shown} lies in a system directory (/proc, /sys, /dev, /boot, /var/lib/docker)"
        ));
    }
    if path.file_name().is_some_and(|n| n == "docker.sock") {
        return Err(format!("{shown} is named like the Docker socket"));
    }
    if is_socket(meta) {
        return Err(format!(
            "{shown} is a Unix socket; sockets are never mounted (the Docker socket would give \
             the sandbox control of the host)"
        ));
    }
    if meta.is_dir() {
        if let Some(found) = find_docker_socket(path) {
            return Err(format!(
                "it contains the Docker socket or an entry named docker.sock ({})",
                quote(&found.display().to_string())
            ));
        }
    }
    Ok(())
}

fn is_socket(meta: &std::fs::Metadata) -> bool {
    is_socket_type(meta.file_type())
}

#[cfg(unix)]
fn is_socket_type(file_type: std::fs::FileType) -> bool {
    use std::os::unix::fs::FileTypeExt;
    file_type.is_socket()
}

#[cfg(not(unix))]
fn is_socket_type(_file_type: std::fs::FileType) -> bool {
    false
}

/// (device, inode) of the real Docker sockets, to spot hard links to them.
#[cfg(unix)]
fn docker_socket_ids() -> Vec<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    DOCKER_SOCKETS
        .iter()
        .filter_map(|s| std::fs::metadata(s).ok())
        .map(|m| (m.dev(), m.ino()))
        .collect()
}

#[cfg(unix)]
fn is_docker_socket_inode(meta: &std::fs::Metadata, ids: &[(u64, u64)]) -> bool {
    use std::os::unix::fs::MetadataExt;
    ids.contains(&(meta.dev(), meta.ino()))
}

#[cfg(not(unix))]
fn docker_socket_ids() -> Vec<(u64, u64)> {
    Vec::new()
}

#[cfg(not(unix))]
fn is_docker_socket_inode(_meta: &std::fs::Metadata, _ids: &[(u64, u64)]) -> bool {
    false
}

/// A socket [`find_socket`] found.
#[derive(Debug, PartialEq, Eq)]
enum Socket {
    /// An entry named `docker.sock` (of any type) or a hard link to the
    /// Docker socket.
    Docker(PathBuf),
    /// Any other Unix socket.
    Other(PathBuf),
}

/// Looks up to [`SOCKET_SCAN_DEPTH`] levels below `dir`, breadth first
/// (without following symlinks, at most [`SOCKET_SCAN_ENTRIES`] entries,
/// skipping unreadable directories) for an entry named `docker.sock`, a
/// hard link to the Docker socket, or (when `any`) any Unix socket; the
/// first found.
fn find_socket(dir: &Path, any: bool, mut root_owned: Option<&mut RootOwned>) -> Option<Socket> {
    let ids = docker_socket_ids();
    let mut seen = 0usize;
    let mut queue = std::collections::VecDeque::from([(dir.to_path_buf(), 1usize)]);
    while let Some((current, depth)) = queue.pop_front() {
        let Ok(entries) = std::fs::read_dir(&current) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > SOCKET_SCAN_ENTRIES {
                return None;
            }
            let path = entry.path();
            if entry.file_name() == "docker.sock" {
                return Some(Socket::Docker(path));
            }
            // lstat, not the listing's d_type: a socket bind-mounted over a
            // regular file is listed as a regular file.
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if let Some(r) = root_owned.as_deref_mut() {
                r.note(&path, &meta);
            }
            if meta.is_dir() {
                if depth < SOCKET_SCAN_DEPTH {
                    queue.push_back((path, depth + 1));
                }
            } else if is_socket(&meta) {
                if is_docker_socket_inode(&meta, &ids) {
                    return Some(Socket::Docker(path));
                }
                if any {
                    return Some(Socket::Other(path));
                }
            }
        }
    }
    None
}

/// [`find_socket`] for the Docker socket only (by name or inode).
fn find_docker_socket(dir: &Path) -> Option<PathBuf> {
    match find_socket(dir, false, None) {
        Some(Socket::Docker(p)) => Some(p),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::validate::tests::assert_display_safe;

    const ORIGIN: &str = "/home/dev/app/odek.json";

    #[test]
    fn odeks_own_and_the_engines_mount_targets_are_refused() {
        assert_eq!(SUPERVISOR_DIR_TARGET, crate::supervisor::SUPERVISOR_DIR);
        assert_eq!(ACCOUNT_HOME_TARGET, crate::account::ACCOUNT_HOME);
        for path in [
            "/.odek",
            "/.odek/odek-supervisor",
            "//.odek/./odek-supervisor/",
            "/.odek/x/y",
            "/sbin/docker-init",
            "/usr/sbin/docker-init",
            "/usr/local/bin/docker-init",
            "/run/podman-init",
            "/etc/passwd",
            "/etc//group",
            "/home/odek",
            "/home/odek/.bashrc",
        ] {
            let e = container_path(path).expect_err(path);
            assert!(e.contains("is not allowed"), "{path}: {e}");
        }
        // Controls: neighbours that are nobody's.
        for path in [
            "/.odekx",
            "/opt/.odek-cache",
            "/usr/sbin/docker-init.d",
            "/etc/passwd-",
            "/etc/groups",
            "/home/odekuser",
            "/home/other",
            "/cache",
        ] {
            assert!(container_path(path).is_ok(), "{path}");
        }
    }

    // --- sandbox_network -------------------------------------------------

    // --- volumes ---------------------------------------------------------------------

    #[cfg(unix)]
    struct Fixture {
        _dir: tempfile::TempDir,
        wd: PathBuf,
        _listeners: Vec<std::os::unix::net::UnixListener>,
    }

    /// A working directory with: cache/, sub/dir/, file.txt, link → cache,
    /// linkdir → sub, sockdir/docker.sock, other.sock, deep/a/b/docker.sock,
    /// toodeep/a/b/c/d/docker.sock, plain-docker/docker.sock (a file).
    #[cfg(unix)]
    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().expect("tempdir");
        let wd = std::fs::canonicalize(dir.path()).expect("canonical tempdir");
        for d in [
            "cache",
            "sub/dir",
            "sockdir",
            "deep/a/b",
            "toodeep/a/b/c/d",
            "plain-docker",
        ] {
            std::fs::create_dir_all(wd.join(d)).expect("mkdir");
        }
        std::fs::write(wd.join("file.txt"), "x").expect("write");
        std::fs::write(wd.join("plain-docker/docker.sock"), "").expect("write");
        std::os::unix::fs::symlink(wd.join("cache"), wd.join("link")).expect("symlink");
        std::os::unix::fs::symlink("sub", wd.join("linkdir")).expect("symlink");
        std::os::unix::fs::symlink("/etc", wd.join("etclink")).expect("symlink");
        let listeners = [
            "sockdir/docker.sock",
            "other.sock",
            "deep/a/b/docker.sock",
            "toodeep/a/b/c/d/docker.sock",
        ]
        .iter()
        .map(|s| std::os::unix::net::UnixListener::bind(wd.join(s)).expect("bind"))
        .collect();
        Fixture {
            _dir: dir,
            wd,
            _listeners: listeners,
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_volume_target_in_the_workspace_must_already_exist_and_not_be_a_symlink() {
        // The engine creates a missing mount target, as root: in the
        // project, for a target below /workspace (a review left root-owned
        // directories the operator could not remove).
        let f = fixture();
        let err = resolve_volume(ORIGIN, "cache:/workspace/sub/newdir", &f.wd)
            .expect_err("missing target");
        let msg = err.to_string();
        assert!(
            msg.contains("does not exist in the working directory") && msg.contains("mkdir -p"),
            "{msg}"
        );
        assert!(!f.wd.join("sub/newdir").exists(), "nothing was created");
        let err = resolve_volume(ORIGIN, "cache:/workspace/linkdir/dir", &f.wd)
            .expect_err("a symlink on the way");
        assert!(err.to_string().contains("symbolic link"), "{err}");
        // Control: an existing target.
        resolve_volume(ORIGIN, "cache:/workspace/sub/dir", &f.wd).expect("existing");
    }

    #[cfg(unix)]
    #[test]
    fn volumes_accepted() {
        let f = fixture();
        let wd = &f.wd;
        let abs = format!("{}/cache:/c", wd.display());
        let abs_dot = format!("{}/./cache/.:/c", wd.display());
        let cases: Vec<(&str, PathBuf, &str, bool)> = vec![
            (
                "./cache:/root/.cache",
                wd.join("cache"),
                "/root/.cache",
                false,
            ),
            (
                "cache:/root/.cache",
                wd.join("cache"),
                "/root/.cache",
                false,
            ),
            ("cache:/c:ro", wd.join("cache"), "/c", true),
            ("cache:/c:rw", wd.join("cache"), "/c", false),
            ("cache/:/c/", wd.join("cache"), "/c", false),
            ("./cache/.:/c", wd.join("cache"), "/c", false),
            (&abs, wd.join("cache"), "/c", false),
            (&abs_dot, wd.join("cache"), "/c", false),
            (
                "sub/dir:/data//x/./y",
                wd.join("sub/dir"),
                "/data/x/y",
                false,
            ),
            ("sub:/data", wd.join("sub"), "/data", false),
            (
                "file.txt:/etc/app.conf:ro",
                wd.join("file.txt"),
                "/etc/app.conf",
                true,
            ),
            (
                "cache:/workspace/cache",
                wd.join("cache"),
                "/workspace/cache",
                false,
            ),
            ("cache:/tmp/cache", wd.join("cache"), "/tmp/cache", false),
            ("cache:/procfs", wd.join("cache"), "/procfs", false),
            (
                "cache:/home/node/.npm",
                wd.join("cache"),
                "/home/node/.npm",
                false,
            ),
            // only docker.sock up to 4 levels down is looked for
            ("toodeep:/t", wd.join("toodeep"), "/t", false),
        ];
        for (spec, host, container, read_only) in cases {
            let mount = resolve_volume(ORIGIN, spec, wd).unwrap_or_else(|e| panic!("{spec}: {e}"));
            assert_eq!(
                mount,
                VolumeMount {
                    spec: spec.to_string(),
                    host,
                    container: container.to_string(),
                    read_only,
                },
                "{spec}"
            );
        }
    }

    #[cfg(unix)]
    #[test]
    fn volumes_refused() {
        let f = fixture();
        let wd = &f.wd;
        let abs_outside = format!("{}/../x:/c", wd.display());
        let workdir_abs = format!("{}:/c", wd.display());
        let huge = format!("{}:/c", "a".repeat(1 << 20));
        let cases: Vec<(&str, &str)> = vec![
            ("../x:/c", "'..'"),
            ("cache/../cache:/c", "'..'"),
            (&abs_outside, "'..'"),
            ("/etc:/c", "inside the working directory"),
            ("/:/c", "inside the working directory"),
            ("/tmp:/c", "inside the working directory"),
            (
                "/var/run/docker.sock:/var/run/docker.sock",
                "inside the working directory",
            ),
            (".:/c", "working directory itself"),
            ("./:/c", "working directory itself"),
            (&workdir_abs, "working directory itself"),
            ("link:/c", "symbolic link"),
            ("link/:/c", "symbolic link"),
            ("linkdir/dir:/c", "symbolic link"),
            ("etclink:/c", "symbolic link"),
            ("etclink/passwd:/c", "symbolic link"),
            ("missing:/c", "does not exist"),
            ("myvolume:/data", "named volumes are not supported"),
            ("cache/missing:/c", "does not exist"),
            ("cache", "host:container"),
            ("cache:/c:ro:x", "host:container"),
            ("a:b:c:d", "host:container"),
            ("cache:/c:z", "ro or rw"),
            ("cache:/c:RO", "ro or rw"),
            ("cache:/c:ro,z", "ro or rw"),
            ("cache:/c:", "ro or rw"),
            (":/c", "host path is empty"),
            ("cache:", "container path is empty"),
            ("cache:rel", "must be absolute"),
            ("cache:./c", "must be absolute"),
            ("cache:/", "container's root"),
            ("cache://", "container's root"),
            ("cache:/.", "container's root"),
            ("cache:/workspace", "/workspace"),
            ("cache:/workspace/", "/workspace"),
            ("cache://workspace/.", "/workspace"),
            ("cache:/tmp", "tmpfs"),
            ("cache:/tmp/", "tmpfs"),
            ("cache:/proc", "kernel"),
            ("cache:/proc/sys", "kernel"),
            ("cache:/sys/fs/cgroup", "kernel"),
            ("cache:/dev", "kernel"),
            ("cache:/dev/shm", "kernel"),
            ("cache:/a/../b", "'..'"),
            ("cache:/..", "'..'"),
            ("sockdir:/s", "docker.sock"),
            ("sockdir/docker.sock:/s", "Docker socket"),
            ("plain-docker/docker.sock:/s", "Docker socket"),
            ("plain-docker:/s", "docker.sock"),
            ("deep:/d", "docker.sock"),
            ("deep/a:/d", "docker.sock"),
            ("other.sock:/s", "Unix socket"),
            ("ca\u{202e}che:/c", "U+202E"),
            ("ca\u{200b}che:/c", "U+200B"),
            ("\u{feff}cache:/c", "U+FEFF"),
            ("cache\n:/c", "U+000A"),
            ("cache:/c\0", "U+0000"),
            ("cache:/c\r", "U+000D"),
            (&huge, "cannot inspect"),
        ];
        for (spec, fragment) in cases {
            match resolve_volume(ORIGIN, spec, wd) {
                Err(err @ ConfigError::InvalidVolume { .. }) => {
                    assert_display_safe(&err);
                    let shown = err.to_string();
                    assert!(shown.starts_with(ORIGIN), "{shown}");
                    let ConfigError::InvalidVolume { value, reason, .. } = err else {
                        unreachable!()
                    };
                    assert_eq!(value, quote(spec));
                    assert!(reason.contains(fragment), "{:?}: {reason}", quote(spec));
                }
                other => panic!("{:?}: expected InvalidVolume, got {other:?}", quote(spec)),
            }
        }
    }

    #[cfg(unix)]
    /// System roots are refused even when the working directory is one.
    #[test]
    fn system_roots_refused_even_as_workdir() {
        let root = Path::new("/");
        for spec in [
            "/etc:/c",
            "etc:/c",
            "./etc:/c",
            "/usr:/c",
            "usr:/c:ro",
            "/home:/c",
            "/root:/c",
            "/var:/c",
            "/var/lib:/c",
            "/proc:/c",
            "/proc/1:/c",
            "/proc/self:/c",
            "/sys:/c",
            "/sys/fs:/c",
            "/dev:/c",
            "/dev/null:/c",
            "/run:/c",
            "/var/run:/c",
            "/var/run/docker.sock:/c",
            "/run/docker.sock:/c",
            "/boot:/c",
            "/:/c",
            ".:/c",
        ] {
            match resolve_volume(ORIGIN, spec, root) {
                Err(ConfigError::InvalidVolume { .. }) => {}
                other => panic!("{spec}: expected InvalidVolume, got {other:?}"),
            }
        }
        let err = resolve_volume(ORIGIN, "/etc:/c", root).expect_err("system root");
        assert!(err.to_string().contains("system directory"), "{err}");
        // workdir /etc: /etc itself is refused however it is written
        if std::fs::canonicalize("/etc").is_ok_and(|etc| etc == Path::new("/etc")) {
            for spec in [".:/c", "/etc:/c", "/etc/.:/c"] {
                let err = resolve_volume(ORIGIN, spec, Path::new("/etc")).expect_err(spec);
                assert!(matches!(err, ConfigError::InvalidVolume { .. }), "{spec}");
            }
        }
    }

    #[cfg(unix)]
    #[test]
    fn workdir_must_be_canonical() {
        let f = fixture();
        for wd in [
            f.wd.join("linkdir"),
            f.wd.join("cache/.."),
            PathBuf::from("relative"),
        ] {
            match resolve_volume(ORIGIN, "dir:/c", &wd) {
                Err(ConfigError::Workdir { path, .. }) => assert_eq!(path, wd),
                other => panic!("{wd:?}: expected Workdir, got {other:?}"),
            }
        }
    }

    #[test]
    fn workdirs_a_root_sandbox_could_use_against_the_host_are_refused() {
        let p = PathBuf::from;
        let homes = [p("/home/alice"), p("/srv/bob"), p("/root")];
        let services = [p("/var/lib/jenkins"), p("/nonexistent"), p("/var/lib")];
        for (wd, needle) in [
            ("/", "system directory"),
            ("/etc", "system directory"),
            ("/etc/cron.d", "/etc"),
            ("/etc/systemd/system", "/etc"),
            ("/usr/local/bin", "/usr"),
            ("/var/spool/cron", "/var/spool"),
            ("/var/log/app", "/var/log"),
            ("/run/user", "/run"),
            ("/var/lib/docker/volumes", "/var/lib/docker"),
            ("/var/lib/dpkg", "/var/lib"),
            ("/var/lib/containerd/x", "/var/lib"),
            ("/var/lib", "/var/lib"),
            ("/proc/1", "/proc"),
            ("/home", "system directory"),
            ("/var", "system directory"),
            ("/private/etc", "system directory"),
            ("/home/alice", "is the home directory"),
            ("/srv/bob", "is the home directory"),
            ("/srv", "shared directory /srv"),
            ("/tmp", "shared directory /tmp"),
            ("/var/tmp", "shared directory /var/tmp"),
            ("/opt", "shared directory /opt"),
            ("/var/mail", "shared directory /var/mail"),
            ("/var/local", "shared directory /var/local"),
            ("/var/backups", "shared directory /var/backups"),
            ("/root/.cargo", "hidden directory"),
            ("/home/alice/.ssh", "hidden directory"),
            ("/srv/bob/.config/odek", "hidden directory"),
        ] {
            let err = check_workdir_paths(Path::new(wd), &homes, &services).expect_err(wd);
            assert!(matches!(err, ConfigError::Workdir { .. }), "{wd}: {err:?}");
            let msg = err.to_string();
            assert!(
                msg.contains(needle) && msg.contains("project directory"),
                "{wd}: {msg}"
            );
        }
        // Projects below a home, a hidden directory inside a project, a
        // service user's workspace below /var/lib, /tmp: fine.
        for wd in [
            "/home/alice/project",
            "/home/alice/project/.git",
            "/srv/bob/src/app",
            "/var/lib/jenkins/workspace/app",
            "/tmp/x",
            "/tmp/odek-e2e-1/app",
            "/var/tmp/build",
            "/opt/app",
            "/work/main",
        ] {
            check_workdir_paths(Path::new(wd), &homes, &services)
                .unwrap_or_else(|e| panic!("{wd}: {e}"));
        }
    }

    #[test]
    fn passwd_and_mountinfo_are_parsed() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\n\
                      daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n\
                      broken line\n\
                      alice:x:1000:1000::/home/alice:/bin/sh\n\
                      nobody:x:65534:65534::/nonexistent:/usr/sbin/nologin\n";
        let e: Vec<(u32, &str)> = passwd_entries(passwd).collect();
        assert_eq!(
            e,
            [
                (0, "/root"),
                (1, "/usr/sbin"),
                (1000, "/home/alice"),
                (65534, "/nonexistent")
            ]
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_socket_is_found_by_lstat_not_by_the_listing() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let wd = tmp.path().canonicalize().expect("canonical");
        std::fs::create_dir_all(wd.join("a/b")).expect("mkdir");
        let _l = std::os::unix::net::UnixListener::bind(wd.join("a/b/docker.sock")).expect("bind");
        let err = check_workdir_sockets(&wd).expect_err("docker.sock below");
        assert!(err.to_string().contains("a/b/docker.sock"), "{err}");
        let top = tempfile::tempdir().expect("tempdir");
        let top = top.path().canonicalize().expect("canonical");
        let _t = std::os::unix::net::UnixListener::bind(top.join("agent.sock")).expect("bind");
        let err = check_workdir_sockets(&top).expect_err("socket at the top");
        assert!(err.to_string().contains("agent.sock"), "{err}");
        let clean = tempfile::tempdir().expect("tempdir");
        check_workdir_sockets(&clean.path().canonicalize().expect("c")).expect("no socket");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn any_socket_within_the_scan_bounds_is_refused() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let wd = tmp.path().canonicalize().expect("canonical");
        // A root-owned tmux socket would run commands on the host.
        std::fs::create_dir_all(wd.join(".tmux/x")).expect("mkdir");
        std::fs::write(wd.join("README"), "").expect("file");
        let _l = std::os::unix::net::UnixListener::bind(wd.join(".tmux/x/default")).expect("bind");
        let err = check_workdir_sockets(&wd).expect_err("socket two levels down");
        let msg = err.to_string();
        assert!(msg.contains(".tmux/x/default\""), "{msg}");
        assert!(msg.contains("holds a Unix socket"), "{msg}");
        assert!(msg.contains("remove or move the socket"), "{msg}");
        assert!(msg.contains("fsmonitor"), "{msg}");
        // As deep as the scan goes (the directory at level 3, the socket at 4).
        let tmp = tempfile::tempdir().expect("tempdir");
        let wd = tmp.path().canonicalize().expect("canonical");
        std::fs::create_dir_all(wd.join("a/b/c")).expect("mkdir");
        let _d = std::os::unix::net::UnixListener::bind(wd.join("a/b/c/s")).expect("bind");
        check_workdir_sockets(&wd).expect_err("socket at the scan's depth");
        // A symlink to a socket is not followed (nor is a socket behind a
        // symlinked directory).
        let tmp = tempfile::tempdir().expect("tempdir");
        let wd = tmp.path().canonicalize().expect("canonical");
        let other = tempfile::tempdir().expect("tempdir");
        let _o = std::os::unix::net::UnixListener::bind(other.path().join("s")).expect("bind");
        std::os::unix::fs::symlink(other.path(), wd.join("dir")).expect("symlink");
        std::os::unix::fs::symlink(other.path().join("s"), wd.join("s")).expect("symlink");
        check_workdir_sockets(&wd).expect("symlinks are not followed");
    }
}
