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
    let supervised = supervised(info);
    if h.privileged {
        out.push("the container is privileged".to_string());
    }
    if !h.cap_add.is_empty() && !supervised {
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
    // A supervised sandbox's container user is root, so that the
    // supervisor can confine itself; each command gets the plan's user from
    // the supervisor.
    if let Some(u) = plan.user.as_ref().filter(|_| !supervised) {
        if info.user != *u {
            out.push(format!("the user is {}, planned {}", q(&info.user), q(u)));
        }
    }
    out.extend(mount_problems(plan, info, supervised));
    out
}

/// True when `info` has exactly the shape odek gives a sandbox whose
/// process is its supervisor
/// ([`crate::supervisor::Supervision::apply`]): the supervisor as the
/// entrypoint, user `0:0`, the capabilities added exactly
/// [`crate::supervisor::SUPERVISOR_CAPS`], the image's healthcheck off,
/// and the binary's directory bind-mounted read-only. Anything else is checked as an unsupervised sandbox.
pub(crate) fn supervised(info: &ContainerInfo) -> bool {
    use crate::supervisor::{SUPERVISOR_CAPS, SUPERVISOR_DIR, SUPERVISOR_PATH};
    let mut added: Vec<String> = info
        .hardening
        .cap_add
        .iter()
        .map(|c| {
            let c = c.to_ascii_uppercase();
            c.strip_prefix("CAP_").map(str::to_string).unwrap_or(c)
        })
        .collect();
    added.sort();
    let mut want: Vec<String> = SUPERVISOR_CAPS.iter().map(|c| c.to_string()).collect();
    want.sort();
    info.entrypoint == [SUPERVISOR_PATH]
        && info.healthcheck_disabled
        && info.user == "0:0"
        && added == want
        && info
            .hardening
            .mounts
            .iter()
            .any(|m| m.kind == "bind" && m.destination == SUPERVISOR_DIR && !m.rw)
}

/// The binds must be exactly `/workspace` (none with a copied workspace,
/// SPEC §6.1 "workspace") and the planned volumes, with the planned
/// sources and read-only flags; other mounts may only be the anonymous
/// volumes of the image's `VOLUME` lines (64-hex names).
fn mount_problems(plan: &Plan, info: &ContainerInfo, supervised: bool) -> Vec<String> {
    let q = crate::text::quote;
    let mut want: Vec<(String, String, bool)> = Vec::new();
    if plan.workspace == crate::config::WorkspaceMode::Bind {
        want.push((
            plan.workdir.display().to_string(),
            "/workspace".to_string(),
            !plan.readonly,
        ));
    }
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
        // The supervisor's binary ([`supervised`] checked it is read-only):
        // odek's own copy, a directory under `$ODEK_HOME/supervisor/`.
        if supervised && m.kind == "bind" && m.destination == crate::supervisor::SUPERVISOR_DIR {
            let ours = std::path::Path::new(&m.source)
                .parent()
                .is_some_and(|p| p == plan.odek_home.join("supervisor"));
            if !ours {
                out.push(format!(
                    "the supervisor is mounted from {}, not odek's copy under $ODEK_HOME/supervisor",
                    q(&m.source)
                ));
            }
            continue;
        }
        // No mount other than odek's own may cover the supervisor, the
        // engine's init or the account (a planned volume included: a plan
        // handed back through the C ABI skips the config check).
        let ours = crate::account::binds(&plan.odek_home, &info.image_id, plan.account.as_ref())
            .iter()
            .any(|b| b.source == m.source && b.target == m.destination);
        if !ours {
            let clean = crate::config::hostpath::clean_container_path(&m.destination);
            if let Some(why) = crate::config::hostpath::reserved_target(&clean) {
                out.push(format!(
                    "a mount of {} covers {}: {why}",
                    q(if m.source.is_empty() {
                        &m.name
                    } else {
                        &m.source
                    }),
                    q(&m.destination)
                ));
                continue;
            }
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
