//! The seccomp profile every sandbox runs under (SPEC §6.1): Docker's
//! default profile, except that no call can put the setuid or setgid bit on
//! a file or make a device node, so a sandbox cannot hand the host a
//! setuid binary in `/workspace` (the host honours the bit through its own
//! mount of the directory, whatever the container's mount says).
//!
//! The base is `docker-default.json`, Docker's default profile copied
//! byte for byte from github.com/moby/profiles, `seccomp/default.json` at
//! commit 3c28324314729dbade8287e868eef6338c42807a (2026-05-06), under the
//! Apache License 2.0. odek derives its profile from it ([`profile`]):
//!
//! - `chmod`, `fchmod`, `fchmodat`, `fchmodat2` are allowed when the mode
//!   carries neither `S_ISUID` nor `S_ISGID` ([`SETID`]);
//! - `creat` likewise; `open` and `openat` when the flags ask for no new
//!   file (neither `O_CREAT` nor `__O_TMPFILE`, [`CREATING`]), or the mode
//!   carries no set-id bit — two rules, either allows;
//! - `mknod`, `mknodat` only for a regular file, a FIFO or a socket without
//!   set-id bits, never a character or block device;
//! - `openat2` fails with `ENOSYS` (its mode sits in `struct open_how`,
//!   which a filter cannot read; libc then falls back to `openat`);
//! - `io_uring_setup`, `io_uring_enter`, `io_uring_register` fail with
//!   `EPERM` (an io_uring `openat` is never seen by seccomp), as in
//!   Docker's own profile and under the kernel's `io_uring_disabled`;
//! - everything else is Docker's default: the default action `EPERM`.
//!
//! A rule's argument index is the same on every table the profile's
//! `archMap` adds (x86 and x32 beside x86_64, arm beside aarch64), so the
//! 32-bit calls are filtered alike. The flag values are those of x86, arm,
//! powerpc, s390, riscv and loongarch; on an engine of another architecture
//! (MIPS, whose `O_CREAT` differs) the flags rule is left out
//! ([`GENERIC_OPEN_FLAGS_ARCHES`]) and only the mode rule allows an open.
//!
//! Docker 20.10 reads this format (it ignores `defaultErrnoRet`, and runc
//! then answers the default action with `EPERM` as well); runc skips a
//! syscall name its libseccomp does not know.

use std::sync::LazyLock;

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Docker's default seccomp profile, unchanged (see the module docs).
const DOCKER_DEFAULT: &str = include_str!("docker-default.json");

/// `S_ISUID | S_ISGID`: the bits a mode must not carry.
const SETID: u64 = 0o6000;
/// `S_IFMT`: the file type bits of a `mknod` mode.
const S_IFMT: u64 = 0o170000;
/// `S_IFREG`.
const S_IFREG: u64 = 0o100000;
/// `S_IFIFO`.
const S_IFIFO: u64 = 0o010000;
/// `S_IFSOCK`.
const S_IFSOCK: u64 = 0o140000;
/// `O_CREAT | __O_TMPFILE`: open flags that make a new file (whose mode
/// argument then counts). Values of x86, arm, powerpc, s390, riscv and
/// loongarch.
const CREATING: u64 = 0o100 | 0o20000000;
/// `ENOSYS`.
const ENOSYS: u32 = 38;
/// `EPERM`.
const EPERM: u32 = 1;

/// Engine architectures (as Docker names the daemon's own) whose `O_CREAT`
/// and `__O_TMPFILE`, and those of the sub-architectures the profile's
/// `archMap` adds, are [`CREATING`]'s.
const GENERIC_OPEN_FLAGS_ARCHES: [&str; 8] = [
    "amd64", "x86", "arm", "arm64", "ppc64le", "s390x", "riscv64", "loong64",
];

/// Syscalls taken out of Docker's lists: odek's rules below decide them.
const RESTRICTED: [&str; 13] = [
    "chmod",
    "fchmod",
    "fchmodat",
    "fchmodat2",
    "creat",
    "open",
    "openat",
    "openat2",
    "mknod",
    "mknodat",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
];

/// A conditional allow: `names` are allowed when
/// `(argument[index] & mask)` is one of `expected` (`SCMP_CMP_MASKED_EQ`,
/// whose `value` is the mask and `valueTwo` the expected value; one rule
/// per expected value).
struct Allow {
    names: &'static [&'static str],
    index: u32,
    mask: u64,
    expected: &'static [u64],
    /// Only on these engine architectures (all when empty).
    arches: &'static [&'static str],
}

impl Allow {
    const fn new(
        names: &'static [&'static str],
        index: u32,
        mask: u64,
        expected: &'static [u64],
    ) -> Allow {
        Allow {
            names,
            index,
            mask,
            expected,
            arches: &[],
        }
    }

    const fn on(self, arches: &'static [&'static str]) -> Allow {
        Allow { arches, ..self }
    }
}

/// The `mknod` types allowed: a regular file (0 means one), a FIFO, a
/// socket; never `S_IFCHR` or `S_IFBLK`, and no set-id bit with them.
const MKNOD_TYPES: [u64; 4] = [0, S_IFREG, S_IFIFO, S_IFSOCK];

/// odek's conditional rules (see the module docs). Rules for the same call
/// are alternatives: any one allows it.
const ALLOWS: &[Allow] = &[
    // chmod(path, mode), fchmod(fd, mode), creat(path, mode)
    Allow::new(&["chmod", "fchmod", "creat"], 1, SETID, &[0]),
    // fchmodat(dirfd, path, mode), fchmodat2(dirfd, path, mode, flags)
    Allow::new(&["fchmodat", "fchmodat2"], 2, SETID, &[0]),
    // open(path, flags, mode): creates no file, or one without set-id bits
    Allow::new(&["open"], 1, CREATING, &[0]).on(&GENERIC_OPEN_FLAGS_ARCHES),
    Allow::new(&["open"], 2, SETID, &[0]),
    // openat(dirfd, path, flags, mode), likewise
    Allow::new(&["openat"], 2, CREATING, &[0]).on(&GENERIC_OPEN_FLAGS_ARCHES),
    Allow::new(&["openat"], 3, SETID, &[0]),
    // mknod(path, mode, dev), mknodat(dirfd, path, mode, dev)
    Allow::new(&["mknod"], 1, S_IFMT | SETID, &MKNOD_TYPES),
    Allow::new(&["mknodat"], 2, S_IFMT | SETID, &MKNOD_TYPES),
];

/// Calls that fail with an errno whatever their arguments.
const DENIES: &[(&[&str], u32)] = &[
    (&["openat2"], ENOSYS),
    (
        &["io_uring_setup", "io_uring_enter", "io_uring_register"],
        EPERM,
    ),
];

/// One entry of the profile's `syscalls` list (Docker's format).
#[derive(Serialize)]
struct Rule {
    names: Vec<&'static str>,
    action: &'static str,
    #[serde(rename = "errnoRet", skip_serializing_if = "Option::is_none")]
    errno_ret: Option<u32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    args: Vec<Arg>,
    #[serde(skip_serializing_if = "Option::is_none")]
    includes: Option<Includes>,
}

/// A rule's argument condition.
#[derive(Serialize)]
struct Arg {
    index: u32,
    value: u64,
    #[serde(rename = "valueTwo")]
    value_two: u64,
    op: &'static str,
}

/// A rule's `includes` filter.
#[derive(Serialize)]
struct Includes {
    arches: Vec<&'static str>,
}

/// odek's rules as profile entries.
fn odek_rules() -> Vec<Rule> {
    let allows = ALLOWS.iter().flat_map(|a| {
        a.expected.iter().map(|expected| Rule {
            names: a.names.to_vec(),
            action: "SCMP_ACT_ALLOW",
            errno_ret: None,
            args: vec![Arg {
                index: a.index,
                value: a.mask,
                value_two: *expected,
                op: "SCMP_CMP_MASKED_EQ",
            }],
            includes: (!a.arches.is_empty()).then(|| Includes {
                arches: a.arches.to_vec(),
            }),
        })
    });
    let denies = DENIES.iter().map(|(names, errno)| Rule {
        names: names.to_vec(),
        action: "SCMP_ACT_ERRNO",
        errno_ret: Some(*errno),
        args: Vec::new(),
        includes: None,
    });
    allows.chain(denies).collect()
}

/// Docker's profile with [`RESTRICTED`] taken out of every list (an entry
/// left with no name goes) and odek's rules appended, as compact JSON.
fn derive(base: &str) -> Result<String, String> {
    let mut p: Value = serde_json::from_str(base).map_err(|e| e.to_string())?;
    let calls = p
        .get_mut("syscalls")
        .and_then(Value::as_array_mut)
        .ok_or("no syscalls list")?;
    for rule in calls.iter_mut() {
        if let Some(names) = rule.get_mut("names").and_then(Value::as_array_mut) {
            names.retain(|n| !n.as_str().is_some_and(|n| RESTRICTED.contains(&n)));
        }
    }
    calls.retain(|r| {
        r.get("names")
            .and_then(Value::as_array)
            .is_none_or(|n| !n.is_empty())
    });
    for r in odek_rules() {
        calls.push(serde_json::to_value(r).map_err(|e| e.to_string())?);
    }
    serde_json::to_string(&p).map_err(|e| e.to_string())
}

/// The profile as sent to the engine (compact JSON, as the docker CLI
/// sends a profile file's content).
static PROFILE: LazyLock<String> = LazyLock::new(|| {
    // A unit test derives the embedded file; it cannot fail at run time.
    derive(DOCKER_DEFAULT).expect("the embedded Docker profile is a seccomp profile")
});

/// odek's seccomp profile (SPEC §6.1): compact JSON in Docker's format.
pub(crate) fn profile() -> &'static str {
    &PROFILE
}

/// The `HostConfig.SecurityOpt` entry that applies [`profile`]:
/// `seccomp=<profile JSON>` (the Engine API takes the content inline).
pub(crate) fn security_opt() -> String {
    format!("seccomp={}", profile())
}

/// `sha256:<64 hex>` of a profile's text, to name it in messages.
fn digest(profile: &str) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(profile.as_bytes())))
}

/// What differs from odek's profile in a container's `SecurityOpt`, one
/// phrase (terminal-safe), or `None` when it carries exactly
/// [`security_opt`]. `seccomp=unconfined` is also said by the
/// confinement check of [`crate::hardening::problems`].
pub(crate) fn problem(security_opt: &[String]) -> Option<String> {
    let given: Vec<&str> = security_opt
        .iter()
        .filter_map(|o| {
            let (key, value) = o.split_once('=').or_else(|| o.split_once(':'))?;
            key.eq_ignore_ascii_case("seccomp").then_some(value)
        })
        .collect();
    let short = |d: String| d[..19.min(d.len())].to_string();
    let ours = short(digest(profile()));
    match given.as_slice() {
        [one] if *one == profile() => None,
        [] => Some(format!(
            "it runs without odek's seccomp profile ({ours}), so nothing keeps it from putting the setuid bit on files in /workspace (made by an earlier odek release, or not by odek)"
        )),
        [one] => Some(format!(
            "its seccomp profile ({}) is not odek's ({ours})",
            short(digest(one))
        )),
        many => Some(format!(
            "it carries {} seccomp profiles, not only odek's ({ours})",
            many.len()
        )),
    }
}

/// What the kernel says of a process's seccomp mode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum KernelFilter {
    /// `Seccomp: 2`: a filter is on.
    On,
    /// Another mode (`0` off, `1` strict), as the kernel wrote it.
    Off(String),
    /// The record could not be read; why.
    Unreadable(String),
}

/// The `Seccomp:` field of `/proc/<pid>/status` text.
pub(crate) fn status_mode(status: &str) -> Option<&str> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Seccomp:"))
        .map(str::trim)
}

/// The seccomp mode of the process whose `/proc` directory is `proc_dir`
/// (one [`crate::mounts::container_proc`] found to be the container's).
pub(crate) fn kernel_filter(proc_dir: &std::path::Path) -> KernelFilter {
    match std::fs::read_to_string(proc_dir.join("status")) {
        Ok(s) => match status_mode(&s) {
            Some("2") => KernelFilter::On,
            Some(m) => KernelFilter::Off(crate::text::quote(m)),
            None => KernelFilter::Unreadable(format!(
                "{} has no Seccomp field",
                proc_dir.join("status").display()
            )),
        },
        Err(e) => KernelFilter::Unreadable(format!("{}: {e}", proc_dir.join("status").display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed() -> Value {
        serde_json::from_str(profile()).expect("odek's profile is JSON")
    }

    fn rules(p: &Value) -> &Vec<Value> {
        p["syscalls"].as_array().expect("syscalls")
    }

    /// Every rule naming `name`.
    fn naming<'a>(p: &'a Value, name: &str) -> Vec<&'a Value> {
        rules(p)
            .iter()
            .filter(|r| {
                r["names"]
                    .as_array()
                    .is_some_and(|n| n.iter().any(|x| x == name))
            })
            .collect()
    }

    /// `(index, mask, expected)` of each masked rule naming `name`, and the
    /// arches it is limited to.
    fn conditions(p: &Value, name: &str) -> Vec<(u64, u64, u64, Vec<String>)> {
        naming(p, name)
            .iter()
            .map(|r| {
                assert_eq!(r["action"], "SCMP_ACT_ALLOW", "{name}: {r}");
                let args = r["args"].as_array().expect("conditional");
                assert_eq!(
                    args.len(),
                    1,
                    "one condition per rule (an AND would be wrong): {r}"
                );
                let a = &args[0];
                assert_eq!(a["op"], "SCMP_CMP_MASKED_EQ", "{r}");
                let arches = r["includes"]["arches"]
                    .as_array()
                    .map(|v| {
                        v.iter()
                            .map(|s| s.as_str().expect("arch").to_string())
                            .collect()
                    })
                    .unwrap_or_default();
                (
                    a["index"].as_u64().expect("index"),
                    a["value"].as_u64().expect("mask"),
                    a["valueTwo"].as_u64().expect("expected"),
                    arches,
                )
            })
            .collect()
    }

    #[test]
    fn the_base_is_dockers_default_with_the_restricted_calls_unconditionally_allowed() {
        let base: Value = serde_json::from_str(DOCKER_DEFAULT).expect("base is JSON");
        assert_eq!(base["defaultAction"], "SCMP_ACT_ERRNO");
        let first = &base["syscalls"][0];
        assert_eq!(first["action"], "SCMP_ACT_ALLOW");
        assert!(first.get("args").is_none() && first.get("includes").is_none());
        let names = first["names"].as_array().expect("names");
        // What odek restricts is in Docker's plain allow list (io_uring is
        // not: Docker denies it already), so removing it there matters.
        for n in RESTRICTED.iter().filter(|n| !n.starts_with("io_uring")) {
            assert!(
                names.iter().any(|x| x == n),
                "{n} not in Docker's allow list"
            );
        }
        assert!(!names
            .iter()
            .any(|x| x.as_str().is_some_and(|n| n.starts_with("io_uring"))));
    }

    #[test]
    fn the_profile_keeps_dockers_default_action_and_arches() {
        let p = parsed();
        let base: Value = serde_json::from_str(DOCKER_DEFAULT).expect("base");
        assert_eq!(p["defaultAction"], "SCMP_ACT_ERRNO");
        assert_eq!(p["defaultErrnoRet"], 1);
        assert_eq!(p["archMap"], base["archMap"]);
        // Everything Docker allows, but the restricted calls, is still allowed.
        let kept = &p["syscalls"][0]["names"];
        let before = base["syscalls"][0]["names"].as_array().expect("names");
        let after = kept.as_array().expect("names");
        assert_eq!(after.len(), before.len() - (RESTRICTED.len() - 3));
        assert!(
            !profile().contains('\n'),
            "compact, as the docker CLI sends it"
        );
    }

    #[test]
    fn no_restricted_call_is_allowed_without_a_condition() {
        let p = parsed();
        for n in RESTRICTED {
            for r in naming(&p, n) {
                let conditional = r["args"].as_array().is_some_and(|a| !a.is_empty());
                assert!(
                    conditional || r["action"] == "SCMP_ACT_ERRNO",
                    "{n} allowed outright by {r}"
                );
            }
        }
    }

    #[test]
    fn chmod_like_calls_are_allowed_only_without_set_id_bits() {
        let p = parsed();
        for (name, index) in [
            ("chmod", 1),
            ("fchmod", 1),
            ("creat", 1),
            ("fchmodat", 2),
            ("fchmodat2", 2),
        ] {
            assert_eq!(
                conditions(&p, name),
                vec![(index, 0o6000, 0, vec![])],
                "{name}"
            );
        }
    }

    #[test]
    fn open_like_calls_are_allowed_when_they_create_nothing_or_create_without_set_id_bits() {
        let p = parsed();
        let arches: Vec<String> = GENERIC_OPEN_FLAGS_ARCHES
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert!(arches.contains(&"amd64".to_string()) && arches.contains(&"arm64".to_string()));
        // O_CREAT (0100) | __O_TMPFILE (020000000)
        assert_eq!(CREATING, 0o20000100);
        for (name, flags, mode) in [("open", 1, 2), ("openat", 2, 3)] {
            let mut c = conditions(&p, name);
            c.sort();
            assert_eq!(
                c,
                vec![
                    (flags, 0o20000100, 0, arches.clone()),
                    (mode, 0o6000, 0, vec![])
                ],
                "{name}"
            );
        }
    }

    #[test]
    fn mknod_like_calls_make_no_device_and_no_set_id_file() {
        let p = parsed();
        for (name, index) in [("mknod", 1), ("mknodat", 2)] {
            let mut c = conditions(&p, name);
            c.sort();
            let want: Vec<(u64, u64, u64, Vec<String>)> = [0, 0o010000, 0o100000, 0o140000]
                .into_iter()
                .map(|v| (index, 0o176000, v, vec![]))
                .collect();
            assert_eq!(c, want, "{name}");
        }
    }

    #[test]
    fn openat2_is_enosys_and_io_uring_is_eperm() {
        let p = parsed();
        let deny = |n: &str| {
            let r = naming(&p, n);
            assert_eq!(r.len(), 1, "{n}: {r:?}");
            assert_eq!(r[0]["action"], "SCMP_ACT_ERRNO");
            r[0]["errnoRet"].as_u64().expect("errnoRet")
        };
        assert_eq!(deny("openat2"), 38);
        for n in ["io_uring_setup", "io_uring_enter", "io_uring_register"] {
            assert_eq!(deny(n), 1);
        }
    }

    #[test]
    fn only_odeks_profile_passes() {
        assert_eq!(problem(&["no-new-privileges".into(), security_opt()]), None);
        let none = problem(&["no-new-privileges".into()]).expect("missing");
        assert!(
            none.contains("without odek's seccomp profile (sha256:"),
            "{none}"
        );
        let other =
            problem(&["seccomp={\"defaultAction\":\"SCMP_ACT_ALLOW\"}".into()]).expect("another");
        assert!(other.contains("is not odek's"), "{other}");
        let colon = problem(&[format!("seccomp:{}", profile()), security_opt()]).expect("two");
        assert!(colon.contains("2 seccomp profiles"), "{colon}");
        assert!(problem(&["seccomp=unconfined".into()]).is_some());
    }

    #[test]
    fn the_kernel_mode_is_read_from_status() {
        let s = "Name:\tdocker-init\nNoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t1\n";
        assert_eq!(status_mode(s), Some("2"));
        assert_eq!(status_mode("Seccomp:\t0\n"), Some("0"));
        assert_eq!(status_mode("Name:\tx\n"), None);
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("status"), s).expect("write");
        assert_eq!(kernel_filter(dir.path()), KernelFilter::On);
        std::fs::write(dir.path().join("status"), "Seccomp:\t0\n").expect("write");
        assert_eq!(kernel_filter(dir.path()), KernelFilter::Off("\"0\"".into()));
        std::fs::remove_file(dir.path().join("status")).expect("rm");
        assert!(matches!(
            kernel_filter(dir.path()),
            KernelFilter::Unreadable(_)
        ));
    }
}
