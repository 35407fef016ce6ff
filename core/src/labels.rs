//! Container labels that identify odek sandboxes (SPEC §6.1) so stale ones
//! can be found and reaped (`odek sandbox gc`).

use std::collections::BTreeMap;

/// `dev.odek.sandbox=true` on every sandbox container.
pub const SANDBOX: &str = "dev.odek.sandbox";
/// PID of the process that owns an ephemeral sandbox.
pub const OWNER_PID: &str = "dev.odek.owner-pid";
/// Start time of the owner process (clock ticks since boot, from
/// `/proc/<pid>/stat`), to tell a reused PID from the owner.
pub const OWNER_START: &str = "dev.odek.owner-start";
/// Host name of the owner.
pub const OWNER_HOST: &str = "dev.odek.owner-host";
/// Boot ID of the owner's host (`/proc/sys/kernel/random/boot_id`).
pub const OWNER_BOOT: &str = "dev.odek.owner-boot";
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
}

impl Owner {
    /// The current process.
    pub fn current() -> Owner {
        let pid = std::process::id();
        Owner {
            pid,
            start: process_start(pid),
            host: hostname(),
            boot: boot_id(),
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
        m
    }
}

/// Whether the owner recorded in `labels` is known to be gone. `None` when
/// this host cannot tell (another host, or no owner label).
pub fn owner_gone(labels: &BTreeMap<String, String>) -> Option<bool> {
    let pid: u32 = labels.get(OWNER_PID)?.parse().ok()?;
    if labels.get(OWNER_HOST) != Some(&hostname()) {
        return None;
    }
    if let (Some(b), Some(now)) = (labels.get(OWNER_BOOT), boot_id()) {
        if *b != now {
            return Some(true);
        }
    }
    match process_start(pid) {
        None => Some(true),
        Some(start) => match labels.get(OWNER_START).and_then(|s| s.parse::<u64>().ok()) {
            Some(recorded) => Some(recorded != start),
            None => Some(false),
        },
    }
}

/// Start time (field 22 of `/proc/<pid>/stat`), `None` when no such process.
pub fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces; fields resume after ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
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
    }
}
