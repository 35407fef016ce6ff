//! Container labels that identify odek sandboxes (SPEC §6.1) so stale ones
//! can be found and reaped (`odek sandbox gc`).
//!
//! Labels are data anyone who can create a container can write, so odek
//! trusts them only under a MAC made with this user's launch key
//! ([`crate::secret`]): [`sign`] at create, [`verified`] whenever a label
//! decides something (gc, exec, describe, `--parent`). Whether an owner is
//! gone is decided by `owner_gone`, which answers "gone" only when it can
//! prove it.

use std::collections::BTreeMap;
use std::path::Path;

use crate::secret::Secret;

/// Prefix of every sandbox's container name (`odek-`): a sandbox is
/// reachable by its name on the networks it joins, and the prefix keeps it
/// from shadowing a service such as `postgres`.
pub(crate) const SANDBOX_NAME_PREFIX: &str = "odek-";

/// True for a sandbox's container name: [`SANDBOX_NAME_PREFIX`] followed
/// by Docker's container-name charset (`[A-Za-z0-9_.-]`), at most 64
/// bytes in all (the rule of `crate::launch::validate_sandbox_name`). Such
/// a name is one path component, never `.` or `..`.
pub(crate) fn is_sandbox_name(name: &str) -> bool {
    name.strip_prefix(SANDBOX_NAME_PREFIX).is_some_and(|r| {
        !r.is_empty()
            && name.len() <= 64
            && r.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
    })
}

/// `dev.odek.sandbox=true` on every sandbox container.
pub const SANDBOX: &str = "dev.odek.sandbox";

/// The label on a sandbox's own network ([`crate::link`], SPEC §4.4): the
/// sandbox's name.
pub const LINK: &str = "dev.odek.link";

/// The name of sandbox `sandbox`'s own network: `<sandbox name>-link`
/// (SPEC §4.4).
pub fn link_name(sandbox: &str) -> String {
    format!("{sandbox}-link")
}
/// PID of the process that owns an ephemeral sandbox.
pub const OWNER_PID: &str = "dev.odek.owner-pid";
/// Start time of the owner process (clock ticks since boot, from
/// `/proc/<pid>/stat`), to tell a reused PID from the owner.
pub(crate) const OWNER_START: &str = "dev.odek.owner-start";
/// Host name of the owner.
pub const OWNER_HOST: &str = "dev.odek.owner-host";
/// Boot ID of the owner's host (`/proc/sys/kernel/random/boot_id`).
pub(crate) const OWNER_BOOT: &str = "dev.odek.owner-boot";
/// Creation time, Unix seconds.
pub const CREATED: &str = "dev.odek.created";
/// The working directory mounted at `/workspace`.
pub const WORKDIR: &str = "dev.odek.workdir";
/// `true` for sandboxes started by `odek sandbox up`: they outlive their
/// creator and are removed by `odek sandbox down`, not by gc.
pub const DETACHED: &str = "dev.odek.detached";
/// The plan the sandbox was launched from, as JSON with env values removed
/// (read back by `odek sandbox up --parent`, SPEC §8).
pub const PLAN: &str = "dev.odek.plan";
/// Name of the parent sandbox of a narrowed child.
pub const PARENT: &str = "dev.odek.parent";
/// The random ID (32 hex) of the launch that created the container. A
/// removal by name — after a create whose answer was lost, or an interrupt
/// while the create was on its way — removes only a container carrying its
/// own launch's ID, never another one that happens to have the name.
pub const LAUNCH: &str = "dev.odek.launch";
/// PID namespace of the owner (`readlink /proc/self/ns/pid`, e.g.
/// `pid:[4026531836]`): a PID names the same process only in the same
/// namespace.
pub const OWNER_PIDNS: &str = "dev.odek.owner-pidns";
/// The label keys [`MAC`] covers: every `dev.odek.*` label odek set at
/// create (but these two), sorted, comma separated. Labels a container
/// carries beyond these (an image's own `dev.odek.*` labels, for one) are
/// never trusted.
pub const SIGNED: &str = "dev.odek.signed";
/// HMAC-SHA256 (lowercase hex) under this user's launch key
/// ([`crate::secret::Secret`], domain [`MAC_DOMAIN`]) over the container
/// name, the full ID of the sandbox's link network (SPEC §4.4; empty for a
/// sandbox without one), the [`SIGNED`] list and the value of each listed
/// label, in that order. The link network is created right before the
/// container and removed with it: a container that copies a sandbox's
/// labels verifies only under the sandbox's own name and on that very
/// network, which it cannot have while the sandbox lives.
pub const MAC: &str = "dev.odek.mac";
/// Domain of [`MAC`]. Version 2 binds the link network's ID; a container
/// marked under version 1 (an earlier release, without that binding)
/// verifies no more ([`Unverified::Earlier`]).
pub const MAC_DOMAIN: &str = "odek.sandbox/2";
/// Domain of the MAC of an earlier release (name, list, values): only
/// recognised, to say why such a container is not trusted.
const EARLIER_MAC_DOMAIN: &str = "odek.sandbox/1";
/// Domain of the MAC on a link network's labels (SPEC §4.4): the same
/// labels [`SIGNED`] and [`MAC`], over the network's name, the list and
/// the values. Another domain than a container's, so that a sandbox named
/// like a network cannot lend its labels to one.
pub const LINK_MAC_DOMAIN: &str = "odek.link/1";
/// On a container odek creates only to read an image's files, never
/// started (`account`: the sandbox account's `/etc/passwd`, SPEC §6.1
/// "user"); owned like an ephemeral sandbox so gc reaps one left behind.
pub const PROBE: &str = "dev.odek.probe";
/// On a sandbox a warm pool launched (`odek_core::pool::Pool`): its value is
/// `Plan::pool_label`. Stays on the container once claimed
/// (labels cannot change); `odek sandbox ls` tells a claimed one by the
/// owner's claim record (`odek_core::pool::claimed`).
pub const POOL: &str = "dev.odek.pool";
/// Prefix of odek's labels.
pub(crate) const PREFIX: &str = "dev.odek.";

/// Marks `labels` of the container `name` as made by this user's odek:
/// adds [`SIGNED`] (every `dev.odek.*` key present) and [`MAC`], bound to
/// `link`, the full ID of the sandbox's link network (`None` for a sandbox
/// without one, an image probe).
pub fn sign(
    secret: &Secret,
    name: &str,
    link: Option<&str>,
    labels: &mut BTreeMap<String, String>,
) {
    sign_in(secret, MAC_DOMAIN, &[name, link.unwrap_or("")], labels);
}

/// Marks the labels of the link network `name` (SPEC §4.4) as made by this
/// user's odek, as [`sign`] a container's (domain [`LINK_MAC_DOMAIN`]).
pub fn sign_network(secret: &Secret, name: &str, labels: &mut BTreeMap<String, String>) {
    sign_in(secret, LINK_MAC_DOMAIN, &[name], labels);
}

fn sign_in(secret: &Secret, domain: &str, head: &[&str], labels: &mut BTreeMap<String, String>) {
    labels.remove(MAC);
    labels.remove(SIGNED);
    let keys: Vec<String> = labels
        .keys()
        .filter(|k| k.starts_with(PREFIX))
        .cloned()
        .collect();
    let signed = keys.join(",");
    let mut parts: Vec<&[u8]> = head.iter().map(|h| h.as_bytes()).collect();
    parts.push(signed.as_bytes());
    parts.extend(keys.iter().map(|k| labels[k].as_bytes()));
    let mac = secret.mac(domain, &parts);
    labels.insert(SIGNED.into(), signed);
    labels.insert(MAC.into(), mac);
}

/// Why a container's labels are not trusted ([`verified`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unverified {
    /// This `$ODEK_HOME` has no launch key yet: it never marked anything.
    NoKey,
    /// The container carries no [`MAC`] (or no [`SIGNED`]) label.
    NoMac,
    /// The MAC does not match (another key, a label changed, or it is not
    /// on the link network it was made on).
    BadMac,
    /// The MAC is this key's, made by an earlier release whose MAC does
    /// not bind the sandbox's link network: a copy of its labels would
    /// verify as well, so it is not trusted either.
    Earlier,
}

impl Unverified {
    /// The end of a sentence that starts with the container's name, e.g.
    /// "was not created by this user's odek (no valid dev.odek.mac for
    /// /home/u/.odek/launch.key)".
    pub(crate) fn reason(self, odek_home: &Path) -> String {
        if self == Unverified::Earlier {
            return format!(
                "was made by an earlier odek release, whose {MAC} does not bind the sandbox's own network, so a copy of its labels could pass for it; it is not trusted: remove it with `docker rm -f` and launch a new one"
            );
        }
        let why = match self {
            Unverified::NoKey => ", which does not exist",
            Unverified::NoMac => "; it carries none",
            _ => "; its MAC was made with another key, its labels were changed, or it is not on the network it was made on",
        };
        format!(
            "was not created by this user's odek (no valid {MAC} for {}{why})",
            crate::text::shown(crate::secret::key_path(odek_home))
        )
    }
}

/// The labels [`MAC`] covers, when it verifies under `secret` for the
/// container `name` on the link network `link` (its full ID, as
/// `crate::link::link_of` finds it; `None` when the container is on none); only these
/// may decide anything.
pub fn verified(
    secret: Option<&Secret>,
    name: &str,
    link: Option<&str>,
    labels: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, Unverified> {
    let name = name.trim_start_matches('/');
    match verified_in(secret, MAC_DOMAIN, &[name, link.unwrap_or("")], labels) {
        Err(Unverified::BadMac)
            if verified_in(secret, EARLIER_MAC_DOMAIN, &[name], labels).is_ok() =>
        {
            Err(Unverified::Earlier)
        }
        other => other,
    }
}

/// The labels a link network's MAC ([`sign_network`]) covers, when it
/// verifies under `secret` for the network `name`.
pub fn verified_network(
    secret: Option<&Secret>,
    name: &str,
    labels: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, Unverified> {
    verified_in(secret, LINK_MAC_DOMAIN, &[name], labels)
}

fn verified_in(
    secret: Option<&Secret>,
    domain: &str,
    head: &[&str],
    labels: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, Unverified> {
    let (Some(mac), Some(signed)) = (labels.get(MAC), labels.get(SIGNED)) else {
        return Err(Unverified::NoMac);
    };
    let secret = secret.ok_or(Unverified::NoKey)?;
    let keys: Vec<&str> = if signed.is_empty() {
        Vec::new()
    } else {
        signed.split(',').collect()
    };
    let mut covered = BTreeMap::new();
    let mut parts: Vec<&[u8]> = head.iter().map(|h| h.as_bytes()).collect();
    parts.push(signed.as_bytes());
    for k in &keys {
        let v = labels.get(*k).ok_or(Unverified::BadMac)?;
        parts.push(v.as_bytes());
        covered.insert(k.to_string(), v.clone());
    }
    if secret.verify(domain, &parts, mac) {
        Ok(covered)
    } else {
        Err(Unverified::BadMac)
    }
}

/// Who owns a sandbox.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    /// Process ID.
    pub pid: u32,
    /// Process start time in clock ticks since boot.
    pub start: Option<u64>,
    /// Host name.
    pub host: String,
    /// Boot ID.
    pub boot: Option<String>,
    /// PID namespace (`pid:[inode]`).
    pub pidns: Option<String>,
}

impl Owner {
    /// The current process.
    pub fn current() -> Owner {
        Owner {
            pid: std::process::id(),
            // `self`: under a /proc of another PID namespace, /proc/<getpid()>
            // is another process.
            start: stat_start("/proc/self/stat"),
            host: hostname(),
            boot: boot_id(),
            pidns: pid_namespace(),
        }
    }

    /// Labels for this owner.
    pub fn labels(&self) -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        m.insert(OWNER_PID.into(), self.pid.to_string());
        if let Some(s) = self.start {
            m.insert(OWNER_START.into(), s.to_string());
        }
        m.insert(OWNER_HOST.into(), self.host.clone());
        if let Some(b) = &self.boot {
            m.insert(OWNER_BOOT.into(), b.clone());
        }
        if let Some(n) = &self.pidns {
            m.insert(OWNER_PIDNS.into(), n.clone());
        }
        m
    }
}

/// Whether the owner recorded in `labels` (trusted ones: [`verified`]) is
/// gone. `Some(true)` only when that is proven: the same host, and either
/// another boot, or the same boot and PID namespace with no process of that
/// PID (`kill(pid, 0)` answers ESRCH) or one that started at another time
/// (a reused PID). `Some(false)` when the owner is seen alive (EPERM counts:
/// a process exists); `None` when this process cannot tell (another host or
/// PID namespace, labels missing, a kernel that does not say) — which gc
/// treats as alive.
pub(crate) fn owner_gone(labels: &BTreeMap<String, String>) -> Option<bool> {
    owner_gone_seen_from(labels, &Here)
}

/// Whether a process with this PID exists, as `kill(pid, 0)` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Signal {
    /// It exists and may be signalled.
    Exists,
    /// ESRCH: no such process.
    NoSuchProcess,
    /// EPERM: it exists, and belongs to someone else.
    Denied,
    /// Any other answer, or a PID that cannot be asked about.
    Failed,
}

/// What the calling process can see of others (the real one is [`Here`]).
trait View {
    fn host(&self) -> String;
    fn boot(&self) -> Option<String>;
    fn pidns(&self) -> Option<String>;
    fn signal(&self, pid: u32) -> Signal;
    /// Start time of `pid`, `None` when it cannot be read (hidden by
    /// `hidepid`, gone, or a /proc of another PID namespace).
    fn start(&self, pid: u32) -> Option<u64>;
}

fn owner_gone_seen_from(labels: &BTreeMap<String, String>, here: &dyn View) -> Option<bool> {
    let pid: u32 = labels.get(OWNER_PID)?.parse().ok()?;
    if *labels.get(OWNER_HOST)? != here.host() {
        return None;
    }
    // Every process of the recorded boot is gone after a reboot.
    if *labels.get(OWNER_BOOT)? != here.boot()? {
        return Some(true);
    }
    if *labels.get(OWNER_PIDNS)? != here.pidns()? {
        return None;
    }
    match here.signal(pid) {
        Signal::NoSuchProcess => Some(true),
        Signal::Denied => Some(false),
        Signal::Failed => None,
        Signal::Exists => {
            let recorded = labels.get(OWNER_START).and_then(|s| s.parse::<u64>().ok());
            match (recorded, here.start(pid)) {
                (Some(r), Some(now)) => Some(r != now),
                _ => Some(false),
            }
        }
    }
}

/// The calling process's own view.
struct Here;

impl View for Here {
    fn host(&self) -> String {
        hostname()
    }

    fn boot(&self) -> Option<String> {
        boot_id()
    }

    fn pidns(&self) -> Option<String> {
        pid_namespace()
    }

    fn signal(&self, pid: u32) -> Signal {
        // PID 0 would mean "my process group": never asked.
        let Some(p) = i32::try_from(pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        else {
            return Signal::Failed;
        };
        match rustix::process::test_kill_process(p) {
            Ok(()) => Signal::Exists,
            Err(rustix::io::Errno::SRCH) => Signal::NoSuchProcess,
            Err(rustix::io::Errno::PERM) => Signal::Denied,
            Err(_) => Signal::Failed,
        }
    }

    fn start(&self, pid: u32) -> Option<u64> {
        // /proc/<pid> names the process `pid` only when this /proc belongs
        // to the caller's PID namespace: then /proc/self reads as getpid().
        let me = std::fs::read_link("/proc/self").ok()?;
        if me.to_str()? != std::process::id().to_string() {
            return None;
        }
        process_start(pid)
    }
}

/// Start time (field 22 of `/proc/<pid>/stat`), `None` when no such process
/// is visible.
pub(crate) fn process_start(pid: u32) -> Option<u64> {
    stat_start(&format!("/proc/{pid}/stat"))
}

fn stat_start(path: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(path).ok()?;
    // The command name (field 2) may contain spaces; fields resume after ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// This process's PID namespace, `pid:[inode]`.
fn pid_namespace() -> Option<String> {
    std::fs::read_link("/proc/self/ns/pid")
        .ok()
        .and_then(|p| p.to_str().map(str::to_string))
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_is_alive_and_a_dead_pid_is_gone() {
        let me = Owner::current();
        assert!(me.start.is_some());
        assert_eq!(owner_gone(&me.labels()), Some(false));
        let mut stale = me.labels();
        stale.insert(OWNER_START.into(), "1".into());
        assert_eq!(
            owner_gone(&stale),
            Some(true),
            "a reused PID is not the owner"
        );
        let mut dead = me.labels();
        dead.insert(OWNER_PID.into(), "4194303".into());
        assert_eq!(owner_gone(&dead), Some(true));
        let mut elsewhere = me.labels();
        elsewhere.insert(OWNER_HOST.into(), "another-host".into());
        assert_eq!(owner_gone(&elsewhere), None);
        assert_eq!(owner_gone(&BTreeMap::new()), None);
        let mut old_label = me.labels();
        old_label.remove(OWNER_PIDNS);
        old_label.insert(OWNER_PID.into(), "4194303".into());
        assert_eq!(owner_gone(&old_label), None, "no namespace recorded");
    }

    /// A view whose /proc shows nothing and whose `kill(pid, 0)` answers as
    /// scripted.
    struct Seen {
        signal: Signal,
        start: Option<u64>,
        pidns: &'static str,
    }

    impl View for Seen {
        fn host(&self) -> String {
            "h".into()
        }
        fn boot(&self) -> Option<String> {
            Some("b".into())
        }
        fn pidns(&self) -> Option<String> {
            Some(self.pidns.into())
        }
        fn signal(&self, _pid: u32) -> Signal {
            self.signal
        }
        fn start(&self, _pid: u32) -> Option<u64> {
            self.start
        }
    }

    const NET: &str = "1111111111111111111111111111111111111111111111111111111111111111";

    fn recorded() -> BTreeMap<String, String> {
        Owner {
            pid: 4242,
            start: Some(77),
            host: "h".into(),
            boot: Some("b".into()),
            pidns: Some("pid:[1]".into()),
        }
        .labels()
    }

    #[test]
    fn an_owner_that_cannot_be_seen_is_alive() {
        let seen = |signal, start, pidns| Seen {
            signal,
            start,
            pidns,
        };
        let l = recorded();
        // hidepid=2, another user's process: /proc shows nothing, kill EPERM.
        let hidden = seen(Signal::Denied, None, "pid:[1]");
        assert_eq!(owner_gone_seen_from(&l, &hidden), Some(false));
        // Exists, /proc unreadable (hidepid, a foreign /proc): alive.
        let unread = seen(Signal::Exists, None, "pid:[1]");
        assert_eq!(owner_gone_seen_from(&l, &unread), Some(false));
        // Another PID namespace: the PID means nothing here, even ESRCH.
        let other_ns = seen(Signal::NoSuchProcess, None, "pid:[2]");
        assert_eq!(owner_gone_seen_from(&l, &other_ns), None);
        // A kernel that does not answer plainly.
        let failed = seen(Signal::Failed, None, "pid:[1]");
        assert_eq!(owner_gone_seen_from(&l, &failed), None);
        // Proven: ESRCH in the same namespace, or a reused PID.
        let gone = seen(Signal::NoSuchProcess, None, "pid:[1]");
        assert_eq!(owner_gone_seen_from(&l, &gone), Some(true));
        let reused = seen(Signal::Exists, Some(78), "pid:[1]");
        assert_eq!(owner_gone_seen_from(&l, &reused), Some(true));
        let same = seen(Signal::Exists, Some(77), "pid:[1]");
        assert_eq!(owner_gone_seen_from(&l, &same), Some(false));
        // Another boot of the same host: every process of it is gone.
        let mut rebooted = l.clone();
        rebooted.insert(OWNER_BOOT.into(), "a".into());
        assert_eq!(owner_gone_seen_from(&rebooted, &hidden), Some(true));
    }

    #[test]
    fn signed_labels_verify_only_under_the_same_key_name_and_values() {
        let d = tempfile::tempdir().expect("tempdir");
        let key = Secret::load_or_create(&d.path().join("a")).expect("key");
        let other = Secret::load_or_create(&d.path().join("b")).expect("key");
        let mut l = recorded();
        l.insert(SANDBOX.into(), "true".into());
        l.insert("com.example".into(), "not covered".into());
        sign(&key, "odek-1", Some(NET), &mut l);
        let ok = verified(Some(&key), "odek-1", Some(NET), &l).expect("verifies");
        assert!(ok.contains_key(OWNER_PID) && !ok.contains_key("com.example"));
        assert!(!ok.contains_key(MAC));
        // An image's own dev.odek.* label added later is not covered, and
        // does not break the MAC.
        let mut with_image_label = l.clone();
        with_image_label.insert("dev.odek.test".into(), "true".into());
        let ok = verified(Some(&key), "odek-1", Some(NET), &with_image_label).expect("verifies");
        assert!(!ok.contains_key("dev.odek.test"));
        assert_eq!(
            verified(Some(&other), "odek-1", Some(NET), &l),
            Err(Unverified::BadMac),
            "another home's key"
        );
        assert_eq!(
            verified(None, "odek-1", Some(NET), &l),
            Err(Unverified::NoKey)
        );
        assert_eq!(
            verified(Some(&key), "odek-2", Some(NET), &l),
            Err(Unverified::BadMac),
            "renamed"
        );
        let mut changed = l.clone();
        changed.insert(OWNER_PID.into(), "1".into());
        assert_eq!(
            verified(Some(&key), "odek-1", Some(NET), &changed),
            Err(Unverified::BadMac)
        );
        let mut dropped = l.clone();
        dropped.remove(OWNER_START);
        assert_eq!(
            verified(Some(&key), "odek-1", Some(NET), &dropped),
            Err(Unverified::BadMac)
        );
        let mut unsigned = l.clone();
        unsigned.remove(MAC);
        assert_eq!(
            verified(Some(&key), "odek-1", Some(NET), &unsigned),
            Err(Unverified::NoMac)
        );
        // The same labels elsewhere: on no link network, or another one.
        assert_eq!(
            verified(Some(&key), "odek-1", None, &l),
            Err(Unverified::BadMac),
            "off its link network"
        );
        assert_eq!(
            verified(Some(&key), "odek-1", Some(&NET.replace('1', "2")), &l),
            Err(Unverified::BadMac),
            "on another network"
        );
        // An earlier release's MAC (no link bound): recognised, not trusted.
        let mut earlier = recorded();
        earlier.insert(SANDBOX.into(), "true".into());
        sign_in(&key, EARLIER_MAC_DOMAIN, &["odek-1"], &mut earlier);
        assert_eq!(
            verified(Some(&key), "odek-1", None, &earlier),
            Err(Unverified::Earlier)
        );
        assert!(Unverified::Earlier
            .reason(d.path())
            .contains("earlier odek release"));
        // A link network's labels verify as a network's only.
        let mut net = BTreeMap::from([(LINK.to_string(), "odek-1".to_string())]);
        sign_network(&key, "odek-1-link", &mut net);
        assert!(verified_network(Some(&key), "odek-1-link", &net).is_ok());
        assert_eq!(
            verified_network(Some(&key), "odek-2-link", &net),
            Err(Unverified::BadMac)
        );
        assert_eq!(
            verified(Some(&key), "odek-1-link", None, &net),
            Err(Unverified::BadMac),
            "a network's labels are no container's"
        );
        let msg = Unverified::BadMac.reason(d.path());
        assert!(msg.contains("launch.key") && msg.contains(MAC), "{msg}");
    }
}
