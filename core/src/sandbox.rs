//! The sandbox (SPEC §6, §10.4): a launched container — or the host, in
//! fallback or off mode — with the settings the engine shows applied
//! (`verify.rs` checks that those settings are the plan's).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::network::{AttachedNetwork, NetworkSummary};
use crate::plan::{Isolation, Plan};
use crate::warning::Warning;

/// Schema name of [`Sandbox`] JSON.
pub const SANDBOX_SCHEMA: &str = "odek.sandbox/1";

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
    /// The OCI runtime the engine runs the container with
    /// (`HostConfig.Runtime`: `sandbox_runtime`, else the engine's
    /// default). Empty when the engine does not say, and in sandboxes of
    /// earlier releases.
    #[serde(default)]
    pub runtime: String,
    /// The daemon that created the container, as `DOCKER_HOST` would name
    /// it (`unix:///var/run/docker.sock`, `tcp://host:port`; SPEC §6.2,
    /// §6.4). Empty in sandboxes of earlier releases.
    #[serde(default)]
    pub endpoint: String,
    /// Full ID of the sandbox's own network (`<name>-link`, SPEC §4.4), its
    /// only network when it reaches networks: the containers of
    /// [`Applied::networks`] are connected to it. `None` without networks
    /// and in sandboxes of earlier releases (attached to the networks
    /// themselves).
    #[serde(default)]
    pub link_network: Option<String>,
    /// Full ID of `odek-out` (SPEC §4.4), the sandboxes' shared way out to
    /// the internet without traffic between them, when its plan reaches the
    /// internet through attached networks without the default bridge.
    /// `None` otherwise.
    #[serde(default)]
    pub out_network: Option<String>,
    /// For a sandbox with no route out that asks the engine's embedded
    /// resolver: whether its DNS lookups can reach the host's resolver
    /// (SPEC §4.6, CVE-2024-29018), from the container's `HostConfig.Dns`
    /// and the engine's release. `None` otherwise, and in sandboxes of
    /// earlier releases.
    #[serde(default)]
    pub dns_forwarding: Option<crate::dns::DnsForwarding>,
    /// The egress proxy's URL (`http://<address>:3128`), in egress mode
    /// (SPEC §4.5); `None` otherwise.
    #[serde(default)]
    pub egress_proxy: Option<String>,
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
    /// Whether commands run through odek's supervisor, and if not why
    /// (docs/SANDBOXING.md, "The supervisor"). `None` on the host, and for
    /// a sandbox found by name whose container could not be read.
    #[serde(default)]
    pub supervisor: Option<crate::supervisor::SupervisorState>,
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
pub struct OwnerLink(pub(crate) Option<Arc<Owned>>);

/// What an owner holds: the attachment to the idle process's stdin, or the
/// session with the sandbox's supervisor over the same attachment (issue
/// 21); either closes with its last holder.
pub(crate) enum Owned {
    /// The idle process's stdin.
    Stdin(#[allow(dead_code)] crate::engine::StdinHold),
    /// The supervisor's owner session.
    Session(crate::supervisor::Session),
    /// The sandbox's own link, and the attachment to its egress proxy's
    /// stdin (SPEC §4.5), which goes with it.
    WithProxy(Arc<Owned>, #[allow(dead_code)] crate::engine::StdinHold),
}

impl OwnerLink {
    /// The supervisor session this link carries, when the sandbox has one
    /// and the session is alive.
    pub fn session(&self) -> Option<&crate::supervisor::Session> {
        let mut owned = self.0.as_deref();
        while let Some(Owned::WithProxy(inner, _)) = owned {
            owned = Some(inner);
        }
        match owned {
            Some(Owned::Session(s)) if s.is_alive() => Some(s),
            _ => None,
        }
    }

    /// This link with the owner's attachment to the sandbox's egress
    /// proxy added (SPEC §4.5): both close with the last holder.
    pub(crate) fn with_proxy(self, hold: crate::engine::StdinHold) -> OwnerLink {
        match self.0 {
            Some(inner) => OwnerLink(Some(Arc::new(Owned::WithProxy(inner, hold)))),
            // A detached sandbox's proxy has no owner either.
            None => OwnerLink(None),
        }
    }

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
    /// True when closing it copies its `/workspace` back first (SPEC §6.1
    /// "workspace"): a container with a copied, writable workspace.
    pub fn copies_back(&self) -> bool {
        self.container_id.is_some()
            && self.plan.workspace == crate::config::WorkspaceMode::Copy
            && !self.plan.readonly
    }

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
            supervisor: None,
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
                let egress = match (&self.plan.egress, &a.egress_proxy) {
                    (Some(e), Some(p)) => format!(
                        " egress={} egress-proxy={}",
                        e.allow_shown(),
                        crate::text::shown(p)
                    ),
                    (Some(e), None) => format!(" egress={}", e.allow_shown()),
                    _ => String::new(),
                };
                format!(
                    "odek: sandbox network={} pids={} image={} networks={} user={} endpoint={} runtime={} supervisor={}{}{egress}",
                    a.network_summary,
                    a.pids_limit,
                    crate::text::shown(self.plan.image.reference.to_string()),
                    if names.is_empty() {
                        "-".to_string()
                    } else {
                        names.join(",")
                    },
                    self.plan.user_shown(),
                    if a.endpoint.is_empty() {
                        "-".to_string()
                    } else {
                        crate::text::shown(&a.endpoint)
                    },
                    if a.runtime.is_empty() {
                        "-".to_string()
                    } else {
                        crate::text::display_name(&a.runtime)
                    },
                    self.supervisor
                        .as_ref()
                        .map_or_else(|| "-".to_string(), |s| s.shown()),
                    // SPEC §4.6, §6.4: only for a sandbox with no route out.
                    a.dns_forwarding
                        .map(|d| format!(" dns={}", d.word()))
                        .unwrap_or_default()
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
