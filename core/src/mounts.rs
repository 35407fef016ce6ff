//! What the kernel mounted, read back after start (SPEC §6.1 verify).
//!
//! Docker takes bind sources by path, and a path can be swapped for a symlink
//! (or another directory) after odek last looked at it and before the runtime
//! mounts it. The kernel records what was really mounted: each line of
//! `/proc/<pid>/mountinfo` of the container's init process names the mounted
//! directory by device (`major:minor`, field 3) and by its path from the root
//! of its file system (field 4, the real path after every symlink), at its
//! mount point in the container (field 5). odek computes the same pair for
//! each planned host path from its own `/proc/self/mountinfo` (the mount
//! whose mount point is the longest prefix of the path; its root joined with
//! the rest) and compares.
//!
//! The check needs the container's process in odek's view of `/proc`: a
//! remote daemon, a daemon in a VM (Docker Desktop) or in another PID
//! namespace, or `/proc` mounted `hidepid`, make it impossible
//! (`MountCheck::Unverifiable`, never a refusal). A process is taken for
//! the container's only when its `/proc/<pid>/cgroup` names the container's
//! full ID, so a PID from another namespace is never compared.
//!
//! The parsing and comparing functions are pure (tested on synthetic text);
//! `check_container` does the reading.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Component, Path, PathBuf};

use crate::text::quote;

/// Where the working directory is mounted in the container.
const WORKSPACE: &str = "/workspace";

/// One line of a `mountinfo` file (only the fields odek compares).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MountEntry {
    /// Mount ID (field 1).
    pub id: u64,
    /// Parent mount ID (field 2).
    pub parent: u64,
    /// `major:minor` of the file system (field 3).
    pub dev: String,
    /// The mounted directory (or file), from its file system's root (field 4).
    pub root: PathBuf,
    /// Where it is mounted, in the reading process's view (field 5).
    pub mount_point: PathBuf,
}

/// Parses `mountinfo` text; malformed lines are skipped. Octal escapes
/// (`\040` for a space, `\012` for a newline, `\134` for a backslash) are
/// undone, byte for byte (paths need not be UTF-8).
pub(crate) fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split(' ').collect();
            let (id, parent, dev, root, mount_point) =
                (f.first()?, f.get(1)?, f.get(2)?, f.get(3)?, f.get(4)?);
            dev.split_once(':')
                .filter(|(a, b)| {
                    !a.is_empty()
                        && !b.is_empty()
                        && a.bytes().chain(b.bytes()).all(|c| c.is_ascii_digit())
                })
                .map(|_| MountEntry {
                    id: id.parse().unwrap_or(0),
                    parent: parent.parse().unwrap_or(0),
                    dev: dev.to_string(),
                    root: unescape(root),
                    mount_point: unescape(mount_point),
                })
        })
        .collect()
}

/// Undoes mountinfo's octal escapes (`\` followed by three octal digits).
pub(crate) fn unescape(s: &str) -> PathBuf {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], octal) {
            (b'\\', Some(d)) => {
                let v = u32::from(d[0] - b'0') * 64
                    + u32::from(d[1] - b'0') * 8
                    + u32::from(d[2] - b'0');
                out.push(u8::try_from(v).unwrap_or(b'?'));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    PathBuf::from(OsString::from_vec(out))
}

/// The mount that shows at `point`: of the entries mounted exactly there,
/// the one nothing else is mounted on (the top of a stack of mounts), else
/// the last listed.
pub(crate) fn mounted_at<'a>(mounts: &'a [MountEntry], point: &Path) -> Option<&'a MountEntry> {
    let here: Vec<&MountEntry> = mounts.iter().filter(|m| m.mount_point == point).collect();
    here.iter()
        .rev()
        .find(|m| !here.iter().any(|o| o.parent == m.id && o.id != m.id))
        .or(here.last())
        .copied()
}

/// Where `path` (absolute, canonical) lives according to `mounts` (the
/// host's view): the device and the path from its file system's root, as a
/// container's mountinfo would show it if `path` were bind-mounted. `None`
/// when no mount covers it (no `/` entry).
pub(crate) fn source_of(mounts: &[MountEntry], path: &Path) -> Option<(String, PathBuf)> {
    let longest = mounts
        .iter()
        .filter(|m| path.starts_with(&m.mount_point))
        .map(|m| m.mount_point.components().count())
        .max()?;
    let point = mounts
        .iter()
        .find(|m| {
            path.starts_with(&m.mount_point) && m.mount_point.components().count() == longest
        })?
        .mount_point
        .clone();
    let m = mounted_at(mounts, &point)?;
    let rest = path.strip_prefix(&m.mount_point).ok()?;
    let mut root = m.root.clone();
    for c in rest.components() {
        if let Component::Normal(n) = c {
            root.push(n);
        }
    }
    Some((m.dev.clone(), root))
}

/// A bind mount to check: the planned host path and where it is mounted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Wanted {
    /// The plan's host path (absolute, canonical).
    pub host: PathBuf,
    /// The container path, e.g. `/workspace`.
    pub target: PathBuf,
}

/// Compares the container's mounts with the host's view of each wanted host
/// path. Returns one problem per mount that differs (device or path) or is
/// missing; empty when all match. Paths in problems are quoted
/// ([`crate::text::quote`]).
pub(crate) fn compare(
    host: &[MountEntry],
    container: &[MountEntry],
    wanted: &[Wanted],
) -> Vec<String> {
    let shown = |p: &Path| quote(&p.display().to_string());
    let mut problems = Vec::new();
    for w in wanted {
        let Some((dev, root)) = source_of(host, &w.host) else {
            problems.push(format!(
                "{} is on no mount odek can see, so what {} shows cannot be matched",
                shown(&w.host),
                shown(&w.target)
            ));
            continue;
        };
        match mounted_at(container, &w.target) {
            None => problems.push(format!(
                "the kernel shows nothing mounted at {} (planned: {})",
                shown(&w.target),
                shown(&w.host)
            )),
            Some(m) if m.dev != dev || m.root != root => problems.push(format!(
                "the kernel mounted {} (device {}) at {}, not the planned {} (device {}, {}): the path was swapped (for a symlink?) after it was checked",
                shown(&m.root),
                m.dev,
                shown(&w.target),
                shown(&w.host),
                dev,
                shown(&root)
            )),
            Some(_) => {}
        }
    }
    problems
}

/// Mounts the container shows strictly below `workspace` (`/workspace`)
/// whose mount point is none of `planned` (the volume targets and the
/// masks, container paths): something mounted below the working directory
/// on the host after it was last checked — Docker binds it recursively — or
/// a mount the plan never asked for. One problem per mount, paths quoted
/// ([`crate::text::quote`]); empty when there is none.
pub(crate) fn unplanned_below(
    container: &[MountEntry],
    workspace: &Path,
    planned: &[PathBuf],
) -> Vec<String> {
    let shown = |p: &Path| quote(&p.display().to_string());
    container
        .iter()
        .filter(|m| m.mount_point != workspace && m.mount_point.starts_with(workspace))
        .filter(|m| !planned.contains(&m.mount_point))
        .map(|m| {
            format!(
                "the kernel shows {} (device {}) mounted at {}, which the plan does not mount: something was mounted below the working directory after it was checked; unmount it",
                shown(&m.root),
                m.dev,
                shown(&m.mount_point)
            )
        })
        .collect()
}

/// True when `/proc/<pid>/cgroup` text places the process in a cgroup
/// named with the container's full ID (`/docker/<id>`,
/// `…/docker-<id>.scope`, …): the process belongs to that container.
pub(crate) fn cgroup_names(cgroup: &str, container_id: &str) -> bool {
    container_id.len() == 64
        && cgroup
            .lines()
            .filter_map(|l| l.splitn(3, ':').nth(2))
            .any(|path| path.contains(container_id))
}

/// The outcome of [`check_container`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum MountCheck {
    /// Every wanted mount shows the planned directory.
    Verified,
    /// The kernel's record could not be read; why.
    Unverifiable(String),
    /// What differs.
    Mismatch(Vec<String>),
}

/// `/proc/<pid>` of container `container_id`'s process `pid` (`State.Pid`
/// from inspect; `None` or ≤ 0 when the engine gave none), once its
/// `/proc/<pid>/cgroup` names the container ([`cgroup_names`]); else why
/// the kernel's record of it cannot be read here (a remote daemon, one in a
/// VM or another PID namespace, `/proc` mounted `hidepid`).
pub(crate) fn container_proc(container_id: &str, pid: Option<i64>) -> Result<PathBuf, String> {
    let Some(pid) = pid.filter(|p| *p > 0) else {
        return Err("the engine reported no process ID".into());
    };
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    let cgroup = std::fs::read_to_string(proc_dir.join("cgroup")).map_err(|e| {
        format!(
            "process {pid} is not visible here ({e}): a remote daemon or one in a VM, another PID namespace, or /proc mounted hidepid"
        )
    })?;
    if !cgroup_names(&cgroup, container_id) {
        return Err(format!(
            "process {pid} here is not the container's (its cgroup does not name the container): the daemon runs in a VM or another PID namespace"
        ));
    }
    Ok(proc_dir)
}

/// Reads the mounts of container `container_id`'s process `pid` and of this
/// process, compares `wanted` ([`compare`]) and looks for mounts below
/// `/workspace` at no wanted target and no mask in `masks` (container paths,
/// [`unplanned_below`]). `pid` is `State.Pid` from inspect (`None` or ≤ 0
/// when the engine gave none).
pub(crate) fn check_container(
    container_id: &str,
    pid: Option<i64>,
    wanted: &[Wanted],
    masks: &[PathBuf],
) -> MountCheck {
    let proc_dir = match container_proc(container_id, pid) {
        Ok(d) => d,
        Err(why) => return MountCheck::Unverifiable(why),
    };
    let container = match std::fs::read_to_string(proc_dir.join("mountinfo")) {
        Ok(t) => parse_mountinfo(&t),
        Err(e) => {
            return MountCheck::Unverifiable(format!(
                "{} cannot be read: {e}",
                proc_dir.join("mountinfo").display()
            ))
        }
    };
    let host = match std::fs::read_to_string("/proc/self/mountinfo") {
        Ok(t) => parse_mountinfo(&t),
        Err(e) => {
            return MountCheck::Unverifiable(format!("/proc/self/mountinfo cannot be read: {e}"))
        }
    };
    let mut problems = compare(&host, &container, wanted);
    let planned: Vec<PathBuf> = wanted
        .iter()
        .map(|w| w.target.clone())
        .chain(masks.iter().cloned())
        .collect();
    problems.extend(unplanned_below(&container, Path::new(WORKSPACE), &planned));
    if problems.is_empty() {
        MountCheck::Verified
    } else {
        MountCheck::Mismatch(problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOST: &str = "\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw
41 27 0:38 / /tmp rw,relatime - tmpfs tmpfs rw
50 27 8:17 /data/home /home rw,relatime - ext4 /dev/sdb1 rw
51 41 0:44 / /tmp/over rw - tmpfs tmpfs rw
52 51 0:45 / /tmp/over rw - tmpfs tmpfs rw
";

    fn container(workspace: &str, vols: &[&str]) -> Vec<MountEntry> {
        let mut t = String::from(
            "72 48 0:40 / / rw - overlay overlay rw\n73 72 0:42 / /proc rw - proc proc rw\n",
        );
        t.push_str(&format!(
            "90 72 {workspace} /workspace rw,relatime - ext4 /dev/vda rw\n"
        ));
        for (i, v) in vols.iter().enumerate() {
            t.push_str(&format!("{} 72 {v} rw - ext4 /dev/x rw\n", 91 + i));
        }
        t.push_str("95 72 0:50 / /tmp rw,nosuid,noexec - tmpfs tmpfs rw\n");
        parse_mountinfo(&t)
    }

    fn want(host: &str, target: &str) -> Wanted {
        Wanted {
            host: host.into(),
            target: target.into(),
        }
    }

    #[test]
    fn fields_are_parsed_and_escapes_undone() {
        let m = parse_mountinfo(
            "90 72 254:0 /srv/my\\040project/a\\134b /work\\011space rw - ext4 /dev/vda rw\nbroken line\n1 2 x:y / / rw\n",
        );
        assert_eq!(m.len(), 1, "malformed lines are skipped: {m:?}");
        assert_eq!(m[0].id, 90);
        assert_eq!(m[0].parent, 72);
        assert_eq!(m[0].dev, "254:0");
        assert_eq!(m[0].root, Path::new("/srv/my project/a\\b"));
        assert_eq!(m[0].mount_point, Path::new("/work\tspace"));
        assert_eq!(unescape("/plain\\04"), Path::new("/plain\\04"));
        assert_eq!(
            unescape("/\\303\\251t\\303\\251"),
            Path::new("/été"),
            "escaped bytes form UTF-8 again"
        );
    }

    #[test]
    fn the_host_source_is_the_longest_mount_prefix_plus_the_rest() {
        let host = parse_mountinfo(HOST);
        assert_eq!(
            source_of(&host, Path::new("/srv/app")),
            Some(("254:0".into(), "/srv/app".into()))
        );
        assert_eq!(
            source_of(&host, Path::new("/tmp/x/app")),
            Some(("0:38".into(), "/x/app".into())),
            "root of the tmpfs, not of /"
        );
        assert_eq!(
            source_of(&host, Path::new("/home/u/p")),
            Some(("8:17".into(), "/data/home/u/p".into())),
            "a mount whose root is a subdirectory"
        );
        assert_eq!(
            source_of(&host, Path::new("/tmpfoo/a")),
            Some(("254:0".into(), "/tmpfoo/a".into())),
            "prefixes are whole components"
        );
        assert_eq!(
            source_of(&host, Path::new("/tmp/over/a")),
            Some(("0:45".into(), "/a".into())),
            "the top of a stack of mounts at the same point"
        );
        assert_eq!(source_of(&[], Path::new("/a")), None);
    }

    #[test]
    fn matching_mounts_pass() {
        let host = parse_mountinfo(HOST);
        let c = container("254:0 /srv/app", &["0:38 /x/cache /data"]);
        let w = [
            want("/srv/app", "/workspace"),
            want("/tmp/x/cache", "/data"),
        ];
        assert!(
            compare(&host, &c, &w).is_empty(),
            "{:?}",
            compare(&host, &c, &w)
        );
    }

    #[test]
    fn a_different_root_is_a_mismatch_naming_both() {
        let host = parse_mountinfo(HOST);
        // W/outer/app swapped for a symlink to W/sockdir.
        let c = container("254:0 /srv/W/sockdir", &[]);
        let p = compare(&host, &c, &[want("/srv/W/outer/app", "/workspace")]);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].contains("\"/srv/W/sockdir\""), "{}", p[0]);
        assert!(p[0].contains("\"/srv/W/outer/app\""), "{}", p[0]);
        assert!(p[0].contains("\"/workspace\""), "{}", p[0]);
    }

    #[test]
    fn a_different_device_is_a_mismatch() {
        let host = parse_mountinfo(HOST);
        // Same path from the root, but of another file system (a symlink
        // into a tmpfs whose layout copies the project's).
        let c = container("0:38 /srv/app", &[]);
        let p = compare(&host, &c, &[want("/srv/app", "/workspace")]);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].contains("device 0:38"), "{}", p[0]);
        assert!(p[0].contains("device 254:0"), "{}", p[0]);
    }

    #[test]
    fn escaped_paths_compare_by_their_bytes() {
        let host = parse_mountinfo(
            "27 1 254:0 / / rw - ext4 /dev/vda rw\n30 27 0:60 /my\\040dir /mnt/my\\040mnt rw - ext4 x rw\n",
        );
        let c = container("0:60 /my\\040dir/a\\012b", &[]);
        let w = [want("/mnt/my mnt/a\nb", "/workspace")];
        assert!(
            compare(&host, &c, &w).is_empty(),
            "{:?}",
            compare(&host, &c, &w)
        );
        let c = container("0:60 /my\\040dir/a\\040b", &[]);
        assert_eq!(compare(&host, &c, &w).len(), 1, "a space is not a newline");
    }

    #[test]
    fn a_missing_mount_point_is_a_mismatch() {
        let host = parse_mountinfo(HOST);
        let c = container("254:0 /srv/app", &[]);
        let p = compare(
            &host,
            &c,
            &[
                want("/srv/app", "/workspace"),
                want("/srv/app/data", "/data"),
            ],
        );
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].contains("nothing mounted at \"/data\""), "{}", p[0]);
        let p = compare(&[], &c, &[want("/srv/app", "/workspace")]);
        assert_eq!(p.len(), 1, "no host mount covers the path: {p:?}");
    }

    #[test]
    fn a_mount_over_the_workspace_is_what_counts() {
        let host = parse_mountinfo(HOST);
        let mut c = container("254:0 /srv/app", &[]);
        c.extend(parse_mountinfo(
            "99 90 254:0 /srv/other /workspace rw - ext4 /dev/vda rw\n",
        ));
        assert_eq!(
            compare(&host, &c, &[want("/srv/app", "/workspace")]).len(),
            1,
            "the mount on top shows"
        );
    }

    #[test]
    fn a_mount_below_the_workspace_that_was_not_planned_is_a_problem() {
        let planned = [
            PathBuf::from("/workspace/data"),
            PathBuf::from("/workspace/.odek"),
        ];
        let mut c = container("254:0 /srv/app", &["254:0 /srv/app/data /workspace/data"]);
        c.extend(parse_mountinfo(
            "96 90 0:51 / /workspace/.odek ro,nosuid,nodev,noexec - tmpfs tmpfs ro
",
        ));
        assert!(
            unplanned_below(&c, Path::new("/workspace"), &planned).is_empty(),
            "the planned volume and mask are fine: {:?}",
            unplanned_below(&c, Path::new("/workspace"), &planned)
        );
        // `mount --bind /var/run W/a/b/c/d/e` after the last check.
        c.extend(parse_mountinfo(
            "97 90 0:25 /var/run /workspace/a/b/c/d/e rw - tmpfs tmpfs rw
",
        ));
        let p = unplanned_below(&c, Path::new("/workspace"), &planned);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].contains("\"/workspace/a/b/c/d/e\""), "{}", p[0]);
        assert!(p[0].contains("\"/var/run\""), "{}", p[0]);
        // Below a planned volume is not the volume.
        c.extend(parse_mountinfo(
            "98 91 0:25 / /workspace/data/sock rw - tmpfs tmpfs rw
",
        ));
        assert_eq!(
            unplanned_below(&c, Path::new("/workspace"), &planned).len(),
            2
        );
        // Mounts elsewhere (/tmp, /proc, a volume at /data) are not looked at;
        // neither is /workspace itself (compared by [`compare`]).
        let c = container("254:0 /srv/app", &["254:0 /srv/app/x /data"]);
        assert!(unplanned_below(&c, Path::new("/workspace"), &[]).is_empty());
    }

    #[test]
    fn the_cgroup_must_name_the_container() {
        let id = "7bff45fdcacd376e2f2455a3e7d57c3ac7549f1e966617193ec0a3d1a1e053ca";
        assert!(cgroup_names(
            &format!("9:name=systemd:/docker/{id}\n0::/docker/{id}\n"),
            id
        ));
        assert!(cgroup_names(
            &format!("0::/system.slice/docker-{id}.scope\n"),
            id
        ));
        assert!(!cgroup_names("0::/user.slice/session-1.scope\n", id));
        assert!(!cgroup_names(&format!("0::/docker/{id}\n"), "short"));
    }

    #[test]
    fn no_pid_or_another_process_cannot_be_verified() {
        let w = [want("/srv/app", "/workspace")];
        let id = "7bff45fdcacd376e2f2455a3e7d57c3ac7549f1e966617193ec0a3d1a1e053ca";
        assert!(matches!(
            check_container(id, None, &w, &[]),
            MountCheck::Unverifiable(_)
        ));
        assert!(matches!(
            check_container(id, Some(0), &w, &[]),
            MountCheck::Unverifiable(_)
        ));
        // This test process is no container's.
        let me = i64::from(std::process::id());
        match check_container(id, Some(me), &w, &[]) {
            MountCheck::Unverifiable(why) => assert!(why.contains("cgroup"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}
