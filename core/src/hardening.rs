//! The isolation every sandbox must still have (SPEC §6.1), checked on the
//! container as the engine reports it — right after launch, and again each
//! time a sandbox is found by name to run a command in, describe, or narrow
//! ([`crate::Client::attach`]): a container made behind odek's back, or loosened
//! with `docker update`, is refused naming what differs.
//!
//! `problems` covers what `crate::verify::verify`'s limit and network
//! checks do not: privileges, capabilities added, devices, shared host
//! namespaces, confinement switched off, odek's seccomp profile
//! ([`seccomp`]), the user, and the mounts.

pub(crate) mod seccomp;

use crate::engine::ContainerInfo;
use crate::plan::Plan;

/// `IpcMode` values that keep the container's own IPC namespace.
const OWN_IPC: [&str; 4] = ["", "private", "shareable", "none"];

/// What differs from SPEC §6.1 and `plan` in `info`'s isolation, one phrase
/// each (terminal-safe); empty when nothing does.
pub(crate) fn problems(plan: &Plan, info: &ContainerInfo) -> Vec<String> {
    let h = &info.hardening;
    let q = crate::text::quote;
    let mut out = Vec::new();
    if h.privileged {
        out.push("the container is privileged".to_string());
    }
    if !h.cap_add.is_empty() {
        let caps: Vec<String> = h.cap_add.iter().map(|c| q(c)).collect();
        out.push(format!("capabilities were added ({})", caps.join(", ")));
    }
    if !h.devices.is_empty() {
        let devs: Vec<String> = h.devices.iter().map(|d| q(d)).collect();
        out.push(format!("host devices are exposed ({})", devs.join(", ")));
    }
    for (what, mode) in [
        ("PID", &h.pid_mode),
        ("UTS", &h.uts_mode),
        ("user", &h.userns_mode),
    ] {
        if !mode.is_empty() {
            out.push(format!(
                "the {what} namespace mode is {}, not the container's own",
                q(mode)
            ));
        }
    }
    if !OWN_IPC.contains(&h.ipc_mode.as_str()) {
        out.push(format!(
            "the IPC namespace mode is {}, not the container's own",
            q(&h.ipc_mode)
        ));
    }
    for opt in &info.security_opt {
        let o = opt.to_ascii_lowercase();
        if o.contains("unconfined") || o.replace(':', "=") == "label=disable" {
            out.push(format!("confinement is switched off ({})", q(opt)));
        }
    }
    out.extend(seccomp::problem(&info.security_opt));
    if let Some(u) = &plan.user {
        if info.user != *u {
            out.push(format!("the user is {}, planned {}", q(&info.user), q(u)));
        }
    }
    out.extend(mount_problems(plan, info));
    out
}

/// The binds must be exactly `/workspace` and the planned volumes, with the
/// planned sources and read-only flags; other mounts may only be the
/// anonymous volumes of the image's `VOLUME` lines (64-hex names).
fn mount_problems(plan: &Plan, info: &ContainerInfo) -> Vec<String> {
    let q = crate::text::quote;
    let mut want: Vec<(String, String, bool)> = vec![(
        plan.workdir.display().to_string(),
        "/workspace".to_string(),
        !plan.readonly,
    )];
    want.extend(plan.volumes.iter().map(|v| {
        (
            v.host.display().to_string(),
            v.container.clone(),
            !(v.read_only || plan.readonly),
        )
    }));
    // The sandbox account's files (SPEC §6.1 "user"), read-only.
    want.extend(
        crate::account::binds(&plan.odek_home, &info.image_id, plan.account.as_ref())
            .into_iter()
            .map(|b| (b.source, b.target, !b.read_only)),
    );
    let mut out = Vec::new();
    let mut seen = vec![false; want.len()];
    for m in &info.hardening.mounts {
        let anonymous = m.name.len() == 64
            && m.name
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if m.kind == "volume" && anonymous {
            continue;
        }
        match want.iter().position(|(src, dst, rw)| {
            m.kind == "bind" && *src == m.source && *dst == m.destination && *rw == m.rw
        }) {
            Some(i) if !seen[i] => seen[i] = true,
            _ => out.push(format!(
                "an unplanned {} mount {} at {}{}",
                q(&m.kind),
                q(if m.source.is_empty() {
                    &m.name
                } else {
                    &m.source
                }),
                q(&m.destination),
                if m.rw {
                    " (read-write)"
                } else {
                    " (read-only)"
                }
            )),
        }
    }
    for ((src, dst, _), found) in want.iter().zip(seen) {
        if !found {
            out.push(format!(
                "the planned mount {} at {} is missing",
                q(src),
                q(dst)
            ));
        }
    }
    out
}
