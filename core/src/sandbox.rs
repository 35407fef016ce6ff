//! The sandbox (SPEC §6, §10.4): a launched container — or the host, in
//! fallback or off mode — with the settings the engine shows applied, and
//! `verify`, the check that those settings are the plan's.

use crate::config::names;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::config::NetworkMode;
use crate::engine::ContainerInfo;
use crate::network::{AttachedNetwork, NetworkSummary};
use crate::plan::{Isolation, Plan};
use crate::warning::Warning;

/// Schema name of [`Sandbox`] JSON.
pub const SANDBOX_SCHEMA: &str = "odek.sandbox/1";

/// Options of `/tmp` (SPEC §6.1).
pub(crate) const TMP_OPTIONS: &str = "rw,noexec,nosuid";

/// The idle process the container runs; commands run through exec. It
/// reads the container's stdin and ends at its EOF: an owned sandbox's
/// stdin closes when its owner's attachment goes, the idle process exits,
/// docker-init with it, and the engine removes the container (SPEC §6.1
/// owner lifetime). A detached sandbox's stdin stays open.
pub const IDLE_CMD: [&str; 1] = ["cat"];

/// odek's seccomp profile (SPEC §6.1), compact JSON in Docker's format,
/// sent inline as `HostConfig.SecurityOpt` `seccomp=<profile>` with every
/// sandbox and required of it at verify: Docker's default profile, except
/// that no call can put the setuid or setgid bit on a file or make a
/// device node, `openat2` fails with `ENOSYS` and io_uring with `EPERM`.
pub fn seccomp_profile() -> &'static str {
    crate::hardening::seccomp::profile()
}

/// How the container ended up, read back from the engine (SPEC §10.4).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Applied {
    /// SPEC §4.2 network summary.
    pub network_summary: NetworkSummary,
    /// Internet reachable.
    pub internet: bool,
    /// Attached networks (name, ID, internal) as the container shows them.
    pub networks: Vec<AttachedNetwork>,
    /// `PidsLimit`.
    pub pids_limit: i64,
    /// `Init`.
    pub init: bool,
    /// Options of `/tmp`.
    pub tmp_options: String,
    /// Image ID.
    pub image_id: String,
    /// The daemon that created the container, as `DOCKER_HOST` would name
    /// it (`unix:///var/run/docker.sock`, `tcp://host:port`; SPEC §6.2,
    /// §6.4). Empty in sandboxes of earlier releases.
    #[serde(default)]
    pub endpoint: String,
}

/// A launched sandbox — or the host, in fallback or off mode.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sandbox {
    /// Always [`SANDBOX_SCHEMA`].
    pub schema: String,
    /// Container name (`odek-<hex>`), or `host`.
    pub name: String,
    /// Full container ID; `None` on the host.
    pub container_id: Option<String>,
    /// Container, fallback or off.
    pub isolation: Isolation,
    /// The plan it was launched from.
    pub plan: Plan,
    /// What the engine shows (containers only).
    pub applied: Option<Applied>,
    /// Every warning of resolve and launch.
    pub warnings: Vec<Warning>,
    /// The launching process's attachment to the container's stdin, for an
    /// owned (not detached) sandbox: the engine removes the container once
    /// the last clone of this value is dropped, or this process dies
    /// (SPEC §6.1 owner lifetime). Not serialized.
    #[serde(skip)]
    pub owner: OwnerLink,
}

/// What keeps an owned sandbox alive: its owner's attachment to the
/// container's stdin, shared by the clones of a [`Sandbox`]. Empty for a
/// detached sandbox, one found by name, or the host. It is no part of the
/// sandbox's value: every two links compare equal.
#[derive(Clone, Default)]
pub struct OwnerLink(pub(crate) Option<Arc<crate::engine::StdinHold>>);

impl OwnerLink {
    /// True while this value holds an attachment.
    pub fn is_held(&self) -> bool {
        self.0.is_some()
    }

    /// Lets go of this value's share of the attachment: once no clone holds
    /// it, the connection closes and the engine removes the container.
    pub fn release(&mut self) {
        self.0 = None;
    }
}

impl std::fmt::Debug for OwnerLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.is_held() {
            "OwnerLink(held)"
        } else {
            "OwnerLink(none)"
        })
    }
}

impl PartialEq for OwnerLink {
    fn eq(&self, _: &OwnerLink) -> bool {
        true
    }
}

impl Eq for OwnerLink {}

impl Sandbox {
    /// A "sandbox" that is the host (fallback or off).
    pub fn host(plan: &Plan, isolation: Isolation, warnings: Vec<Warning>) -> Sandbox {
        Sandbox {
            schema: SANDBOX_SCHEMA.into(),
            name: "host".into(),
            container_id: None,
            isolation,
            plan: plan.clone(),
            applied: None,
            warnings,
            owner: OwnerLink::default(),
        }
    }

    /// The startup line of SPEC §6.4 (one line, no trailing newline).
    pub fn startup_line(&self) -> String {
        match (&self.isolation, &self.applied) {
            (Isolation::Container, Some(a)) => {
                let names: Vec<String> = a
                    .networks
                    .iter()
                    .map(|n| {
                        crate::text::sanitize_name(&n.name)
                            .unwrap_or_else(|| format!("<unnamed {}>", &n.id[..12.min(n.id.len())]))
                    })
                    .collect();
                format!(
                    "odek: sandbox network={} pids={} image={} networks={} user={} endpoint={}",
                    a.network_summary,
                    a.pids_limit,
                    crate::text::display_text(&self.plan.image.reference.to_string()),
                    if names.is_empty() {
                        "-".to_string()
                    } else {
                        names.join(",")
                    },
                    self.plan.user_shown(),
                    if a.endpoint.is_empty() {
                        "-".to_string()
                    } else {
                        crate::text::display_text(&a.endpoint)
                    }
                )
            }
            (Isolation::Fallback(f), _) => format!(
                "odek: NO SANDBOX (fallback, {}): commands run on the host without isolation",
                f.class
            ),
            _ => "odek: sandbox off: commands run on the host".to_string(),
        }
    }
}

/// Why a container that is not running cannot be a sandbox: its exit code
/// and Docker's error, and the one cause that fits — Docker's own reason
/// when it gave one; the idle program missing (127) or not executable (126), naming
/// the sandbox_env PATH when one is set; a pids limit below 2 (docker-init
/// and the idle process), with where it came from; else an ENTRYPOINT that
/// exited.
pub(crate) fn not_running(plan: &Plan, exit: Option<&(i64, String)>) -> String {
    let idle = IDLE_CMD.join(" ");
    let program = IDLE_CMD[0];
    let source = |key: &str| {
        plan.sources
            .get(key)
            .map(|s| format!(" from {s}"))
            .unwrap_or_default()
    };
    let path_note = if plan.env.iter().any(|e| e.key == "PATH") {
        format!(
            ", and PATH, set by sandbox_env{}, must reach it",
            source(names::sandbox_env)
        )
    } else {
        String::new()
    };
    match exit {
        Some((code, err)) if !err.is_empty() => format!(
            "the container is not running (exit code {code}: {}): Docker could not start it as planned",
            crate::text::display_text(err)
        ),
        Some((127, _)) => format!(
            "the container is not running (exit code 127): its idle process `{idle}` was not found; the image must provide `{program}` on PATH{path_note}"
        ),
        Some((126, _)) => format!(
            "the container is not running (exit code 126): its idle process `{idle}` could not be executed; the image's `{program}` must be executable by the sandbox user{path_note}"
        ),
        Some((code, _)) if plan.pids_limit < 2 => format!(
            "the container is not running (exit code {code}): the pids limit {}{} leaves no room for its idle process `{idle}` beside docker-init; allow 2 processes at least, and more for the commands",
            plan.pids_limit,
            source(names::sandbox_pids_limit)
        ),
        Some((code, _)) => format!(
            "the container is not running (exit code {code}): its idle process `{idle}` ended; an image ENTRYPOINT must run its arguments (`exec \"$@\"`), not exit"
        ),
        None => format!("the container is not running: its idle process `{idle}` is not there"),
    }
}

/// Checks the container against the plan (SPEC §6.1): exactly the planned
/// networks, pids limit, init, `/tmp` options, image ID, limits, masks.
/// Returns what was applied (through `endpoint`, the daemon's address), or
/// what differs.
pub(crate) fn verify(
    plan: &Plan,
    info: &ContainerInfo,
    image_id: &str,
    endpoint: &crate::engine::Address,
) -> std::result::Result<Applied, String> {
    if !info.running {
        // Nothing else is worth checking (a stopped container shows no
        // network endpoints, for one).
        return Err(not_running(plan, info.exit.as_ref()));
    }
    let mut problems = Vec::new();
    let mut want: Vec<String> = plan.networks.iter().map(|n| n.id.clone()).collect();
    if plan.network_mode == NetworkMode::Bridge {
        match &plan.bridge_network_id {
            Some(b) => want.push(b.clone()),
            None => problems.push("the default bridge ID is unknown".into()),
        }
    }
    want.sort();
    let mut have: Vec<String> = info
        .endpoints
        .iter()
        .filter(|e| !(want.is_empty() && e.network_name == "none"))
        .map(|e| e.network_id.clone())
        .collect();
    have.sort();
    if have != want {
        let short = |v: &[String]| {
            v.iter()
                .map(|s| s[..12.min(s.len())].to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        problems.push(format!(
            "networks differ from the plan (planned [{}], attached [{}])",
            short(&want),
            short(&have)
        ));
    }
    if want.is_empty() && info.network_mode != "none" {
        problems.push(format!(
            "network mode is {:?}, planned \"none\"",
            info.network_mode
        ));
    }
    if info.pids_limit != Some(plan.pids_limit) {
        problems.push(format!(
            "PidsLimit is {}, requested {}",
            info.pids_limit
                .filter(|n| *n > 0)
                .map_or("unlimited".to_string(), |n| n.to_string()),
            plan.pids_limit
        ));
    }
    if info.init != Some(true) {
        problems.push("Init is not on".into());
    }
    let tmp = info.tmpfs.get("/tmp").cloned().unwrap_or_default();
    let opts: Vec<&str> = tmp.split(',').collect();
    if !(opts.contains(&"noexec") && opts.contains(&"nosuid")) {
        problems.push(format!("/tmp options are {tmp:?}, need noexec,nosuid"));
    }
    for m in &plan.masks {
        if !info.tmpfs.contains_key(m) {
            problems.push(format!("mask {m} is missing"));
        }
    }
    if let Some(a) = &plan.account {
        match info.tmpfs.get(&a.home) {
            Some(o)
                if o.split(',').any(|x| x == "nosuid") && o.split(',').any(|x| x == "nodev") => {}
            Some(o) => problems.push(format!(
                "{} options are {}, need nosuid,nodev",
                a.home,
                crate::text::quote(o)
            )),
            None => problems.push(format!("the tmpfs HOME {} is missing", a.home)),
        }
    }
    if info.image_id != image_id {
        problems.push(format!(
            "image is {}, the reference resolved to {image_id}",
            info.image_id
        ));
    }
    if info.memory_bytes != plan.memory_bytes.unwrap_or(0) {
        problems.push(format!(
            "Memory is {} bytes, requested {}",
            info.memory_bytes,
            plan.memory_bytes
                .map_or("none (0)".to_string(), |m| m.to_string())
        ));
    }
    if info.nano_cpus != plan.cpus.as_ref().map_or(0, |c| c.nano) {
        problems.push(format!(
            "NanoCpus is {}, requested {}",
            info.nano_cpus,
            plan.cpus.as_ref().map_or(0, |c| c.nano)
        ));
    }
    if !info.cap_drop.iter().any(|c| c.eq_ignore_ascii_case("ALL")) {
        problems.push("capabilities were not all dropped".into());
    }
    if !info
        .security_opt
        .iter()
        .any(|s| s.starts_with("no-new-privileges"))
    {
        problems.push("no-new-privileges is not set".into());
    }
    problems.extend(crate::hardening::problems(plan, info));
    if !problems.is_empty() {
        return Err(format!("verification failed: {}", problems.join("; ")));
    }
    let networks = plan
        .networks
        .iter()
        .map(|n| AttachedNetwork {
            name: n.name.clone(),
            id: n.id.clone(),
            internal: n.internal,
            compose_project: n.compose_project.clone(),
        })
        .collect();
    Ok(Applied {
        network_summary: plan.network_summary,
        internet: plan.internet,
        networks,
        pids_limit: info.pids_limit.unwrap_or_default(),
        init: true,
        tmp_options: tmp,
        image_id: info.image_id.clone(),
        endpoint: endpoint.to_string(),
    })
}
