//! What differs on Podman's Docker-compatible API service (SPEC §6.2.3),
//! kept in the engine implementation.
//!
//! Podman 4's `POST /containers/create` reads `HostConfig.SecurityOpt`'s
//! `seccomp=` value as a path on the engine's host, never as the profile
//! itself (Docker takes the JSON inline): odek's profile is written to a
//! file of its own, named by the profile's SHA-256, in a directory only the
//! effective user can write ([`seccomp_dir`], mode 0700), and
//! the container is created with `seccomp=<that path>`. Podman's inspect
//! reports the path back; [`profile_from_file`] gives verify (SPEC §6.1) the
//! profile again when the path is one of that directory's and the file's
//! digest is its name — anything else is left as the engine reported it,
//! so verify refuses it. A Podman service on another host is refused at
//! create: the file would be on its host.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::PathBuf;

use sha2::{Digest, Sha256};

/// The directory odek's seccomp profile files lie in, the effective
/// user's own: `$XDG_RUNTIME_DIR/odek-seccomp` when that is an absolute
/// directory of the effective user that nobody else can write (a per-user
/// tmpfs no sandbox is given), else `/tmp/odek-seccomp-<euid>` — never
/// `$TMPDIR`, which may be relative, shared, or inside a working
/// directory a sandbox can write (it could swap the profile while Podman
/// reads it).
pub(crate) fn seccomp_dir() -> PathBuf {
    let euid = rustix::process::geteuid().as_raw();
    let runtime = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|d| d.is_absolute())
        .filter(|d| {
            std::fs::symlink_metadata(d)
                .is_ok_and(|m| m.is_dir() && m.uid() == euid && m.permissions().mode() & 0o077 == 0)
        });
    match runtime {
        Some(d) => d.join("odek-seccomp"),
        None => PathBuf::from("/tmp").join(format!("odek-seccomp-{euid}")),
    }
}

/// Makes [`seccomp_dir`] or checks it: a directory (not a symlink) of the
/// effective user that nobody else can write.
fn ensure_dir() -> Result<PathBuf, String> {
    let dir = seccomp_dir();
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot make {}: {e}", dir.display())),
    }
    let m = std::fs::symlink_metadata(&dir)
        .map_err(|e| format!("cannot inspect {}: {e}", dir.display()))?;
    let euid = rustix::process::geteuid().as_raw();
    if !m.is_dir() || m.uid() != euid || m.permissions().mode() & 0o022 != 0 {
        return Err(format!(
            "{} is not a directory of uid {euid} that only it can write: remove it",
            dir.display()
        ));
    }
    Ok(dir)
}

/// `security_opt` for Podman: each inline `seccomp=<JSON>` replaced by
/// `seccomp=<path of a file holding it>` (see the module). Errors name the
/// file that could not be written.
pub(super) fn profile_to_file(security_opt: &[String]) -> Result<Vec<String>, String> {
    let mut out = Vec::with_capacity(security_opt.len());
    for o in security_opt {
        match o.strip_prefix("seccomp=") {
            Some(json) if json.trim_start().starts_with('{') => {
                let dir = ensure_dir()?;
                let path = dir.join(format!("{}.json", hex::encode(Sha256::digest(json))));
                let mut f = tempfile::NamedTempFile::new_in(&dir)
                    .map_err(|e| format!("cannot write in {}: {e}", dir.display()))?;
                f.write_all(json.as_bytes())
                    .map_err(|e| format!("cannot write in {}: {e}", dir.display()))?;
                std::fs::set_permissions(f.path(), std::fs::Permissions::from_mode(0o644))
                    .map_err(|e| format!("cannot chmod in {}: {e}", dir.display()))?;
                f.persist(&path)
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
                out.push(format!("seccomp={}", path.display()));
            }
            _ => out.push(o.clone()),
        }
    }
    Ok(out)
}

/// `security_opt` as Podman's inspect reports it, with `seccomp=<path>` of
/// one of odek's profile files (in [`seccomp_dir`], its name the SHA-256 of
/// its content) given back as `seccomp=<JSON>`; anything else unchanged.
pub(super) fn profile_from_file(security_opt: Vec<String>) -> Vec<String> {
    let dir = seccomp_dir();
    security_opt
        .into_iter()
        .map(|o| {
            let Some(path) = o.strip_prefix("seccomp=").map(PathBuf::from) else {
                return o;
            };
            let named = path.parent() == Some(dir.as_path())
                && path.extension().is_some_and(|e| e == "json");
            if !named {
                return o;
            }
            match std::fs::read_to_string(&path) {
                Ok(json)
                    if path.file_stem().and_then(|s| s.to_str())
                        == Some(hex::encode(Sha256::digest(&json)).as_str()) =>
                {
                    format!("seccomp={json}")
                }
                _ => o,
            }
        })
        .collect()
}

/// `GET /containers/{id}/top` as Docker answers it: Podman 4 answers with
/// one title holding every column (`"UID PID PPID C STIME TTY TIME CMD"`)
/// and each process as one string; those are split on whitespace, the last
/// column (the command, which has spaces) taking the rest of the line.
/// Docker's answer (more than one title) is returned unchanged.
pub(super) fn split_top(
    titles: Vec<String>,
    processes: Vec<Vec<String>>,
) -> (Vec<String>, Vec<Vec<String>>) {
    let [one] = titles.as_slice() else {
        return (titles, processes);
    };
    let cols: Vec<String> = one.split_whitespace().map(String::from).collect();
    if cols.len() < 2 {
        return (titles, processes);
    }
    let rows = processes
        .into_iter()
        .map(|row| {
            let [line] = row.as_slice() else {
                return row;
            };
            let mut fields = Vec::with_capacity(cols.len());
            let mut rest = line.trim_start();
            for _ in 1..cols.len() {
                let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
                fields.push(rest[..end].to_string());
                rest = rest[end..].trim_start();
            }
            fields.push(rest.to_string());
            fields
        })
        .collect();
    (cols, rows)
}

/// Capability names by bit (`capability.h`), as Docker names them.
const CAPS: [&str; 41] = [
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "SETPCAP",
    "LINUX_IMMUTABLE",
    "NET_BIND_SERVICE",
    "NET_BROADCAST",
    "NET_ADMIN",
    "NET_RAW",
    "IPC_LOCK",
    "IPC_OWNER",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_CHROOT",
    "SYS_PTRACE",
    "SYS_PACCT",
    "SYS_ADMIN",
    "SYS_BOOT",
    "SYS_NICE",
    "SYS_RESOURCE",
    "SYS_TIME",
    "SYS_TTY_CONFIG",
    "MKNOD",
    "LEASE",
    "AUDIT_WRITE",
    "AUDIT_CONTROL",
    "SETFCAP",
    "MAC_OVERRIDE",
    "MAC_ADMIN",
    "SYSLOG",
    "WAKE_ALARM",
    "BLOCK_SUSPEND",
    "AUDIT_READ",
    "PERFMON",
    "BPF",
    "CHECKPOINT_RESTORE",
];

/// The capabilities in a `/proc/PID/status` text's bounding set
/// (`CapBnd:`), by name; `None` when the line is missing or malformed, or
/// a bit beyond those odek knows is set.
fn bounding_caps(status: &str) -> Option<Vec<String>> {
    let hex = status
        .lines()
        .find_map(|l| l.strip_prefix("CapBnd:"))?
        .trim();
    let bits = u64::from_str_radix(hex, 16).ok()?;
    if bits >> CAPS.len() != 0 {
        return None;
    }
    Some(
        (0..CAPS.len())
            .filter(|b| bits & (1 << b) != 0)
            .map(|b| CAPS[b].to_string())
            .collect(),
    )
}

/// A container's `HostConfig` as Docker would report it, from Podman's
/// (SPEC §6.2.3): `PidMode`/`UTSMode` `private` (Podman's word for the
/// container's own namespace) is Docker's empty mode; and since Podman
/// reports `CapDrop` as the default capabilities it dropped and `CapAdd`
/// only those beyond its defaults (so neither says whether all were
/// dropped), the capabilities are read from the kernel instead: the
/// bounding set of the container's process `pid` (`/proc/PID/status`,
/// readable when the engine is on this host) — `CapDrop: ["ALL"]` and
/// `CapAdd` what the set holds. When it cannot be read, `CapDrop`/`CapAdd`
/// stay as Podman said, and verify refuses the container.
pub(super) fn docker_host_config(
    host: &mut bollard::models::HostConfig,
    container_id: &str,
    pid: Option<i64>,
) {
    for mode in [&mut host.pid_mode, &mut host.uts_mode] {
        if mode.as_deref() == Some("private") {
            *mode = Some(String::new());
        }
    }
    // Only a process whose cgroup names the container (another PID
    // namespace's number, or a PID reused since, is never read).
    let status = crate::mounts::container_proc(container_id, pid)
        .ok()
        .and_then(|dir| std::fs::read_to_string(dir.join("status")).ok());
    if let Some(caps) = status.as_deref().and_then(process_caps) {
        host.cap_drop = Some(vec!["ALL".to_string()]);
        host.cap_add = Some(caps);
    }
}

/// Every capability a `/proc/PID/status` text's process has in any set
/// (`CapBnd`, `CapEff`, `CapPrm`, `CapInh`, `CapAmb`), by name; `None` when
/// a line is missing or malformed, or a bit beyond those odek knows is set.
fn process_caps(status: &str) -> Option<Vec<String>> {
    let mut all: Vec<String> = Vec::new();
    for key in ["CapBnd:", "CapEff:", "CapPrm:", "CapInh:", "CapAmb:"] {
        let line: String = status
            .lines()
            .find(|l| l.starts_with(key))?
            .replacen(key, "CapBnd:", 1);
        for c in bounding_caps(&line)? {
            if !all.contains(&c) {
                all.push(c);
            }
        }
    }
    Some(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_capability_set_counts_not_only_the_bounding_one() {
        let empty = "CapInh:\t0\nCapPrm:\t0\nCapEff:\t0\nCapBnd:\t0\nCapAmb:\t0\n";
        assert_eq!(process_caps(empty), Some(vec![]));
        let amb = "CapInh:\t0\nCapPrm:\t0\nCapEff:\t0\nCapBnd:\t0\nCapAmb:\t1\n";
        assert_eq!(process_caps(amb), Some(vec!["CHOWN".to_string()]));
        // A set missing: not known to be empty.
        assert_eq!(process_caps("CapBnd:\t0\n"), None);
    }

    #[test]
    fn a_process_of_another_container_or_none_is_never_read() {
        let mut host = bollard::models::HostConfig {
            cap_drop: Some(vec!["KILL".into()]),
            ..Default::default()
        };
        // This test's own process: its cgroup names no such container.
        docker_host_config(&mut host, &"ab".repeat(32), Some(std::process::id() as i64));
        assert_eq!(
            host.cap_drop,
            Some(vec!["KILL".to_string()]),
            "left as Podman said"
        );
    }

    #[test]
    fn the_profile_directory_is_never_tmpdir() {
        let d = seccomp_dir();
        assert!(d.is_absolute(), "{}", d.display());
        assert!(
            d.starts_with("/tmp") || d.ends_with("odek-seccomp"),
            "{}",
            d.display()
        );
    }

    #[test]
    fn the_bounding_set_names_the_capabilities_left() {
        assert_eq!(
            bounding_caps("Name:\tcat\nCapBnd:\t0000000000000000\n"),
            Some(vec![])
        );
        assert_eq!(
            bounding_caps("CapBnd:\t00000000000000c1\n"),
            Some(vec![
                "CHOWN".to_string(),
                "SETGID".to_string(),
                "SETUID".to_string()
            ])
        );
        assert_eq!(bounding_caps("CapEff:\t0\n"), None);
        assert_eq!(bounding_caps("CapBnd:\t8000000000000000\n"), None);
    }

    #[test]
    fn podmans_one_column_top_is_split_the_command_keeping_its_spaces() {
        let (t, p) = split_top(
            vec!["UID PID PPID C STIME TTY TIME CMD".into()],
            vec![vec![
                "root 1 0 0 15:26 ? 00:00:00 /run/podman-init -- cat".into()
            ]],
        );
        assert_eq!(t.len(), 8);
        assert_eq!(t[7], "CMD");
        assert_eq!(p[0][1], "1");
        assert_eq!(p[0][7], "/run/podman-init -- cat");
        // Docker's answer is left alone.
        let docker = (
            vec!["PID".to_string(), "CMD".to_string()],
            vec![vec!["1".to_string(), "cat".to_string()]],
        );
        assert_eq!(split_top(docker.0.clone(), docker.1.clone()), docker);
    }

    #[test]
    fn an_inline_profile_goes_to_a_file_named_by_its_digest_and_comes_back() {
        let json = r#"{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[]}"#;
        let opts = vec![format!("seccomp={json}"), "no-new-privileges".to_string()];
        let sent = profile_to_file(&opts).expect("written");
        let path = sent[0].strip_prefix("seccomp=").expect("seccomp");
        assert!(
            path.starts_with(&seccomp_dir().display().to_string()),
            "{path}"
        );
        assert_eq!(std::fs::read_to_string(path).expect("file"), json);
        assert_eq!(sent[1], "no-new-privileges");
        assert_eq!(profile_from_file(sent.clone()), opts);
        // A path elsewhere, or a file whose content is not its name's, is
        // left as reported (verify then refuses it).
        let other = vec!["seccomp=/etc/passwd".to_string()];
        assert_eq!(profile_from_file(other.clone()), other);
        let forged = seccomp_dir().join(format!("{}.json", "0".repeat(64)));
        std::fs::write(&forged, json).expect("forged");
        let f = vec![format!("seccomp={}", forged.display())];
        assert_eq!(profile_from_file(f.clone()), f);
        let _ = std::fs::remove_file(forged);
    }
}
