//! The plan: the value `resolve` produces and `launch` executes
//! (SPEC §1). It can be printed (config view, §10.4), approved (§7) and
//! diffed; JSON with a `schema` field crosses the C ABI.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::config::{CpuLimit, EnvVar, NetworkMode, SandboxMode, Source, VolumeMount};
use crate::engine::EngineInfo;
use crate::failure::FailureClass;
use crate::image::ImagePlan;
use crate::network::{NetworkSummary, ResolvedNetwork};
use crate::warning::Warning;

/// Schema name of [`Plan`] JSON.
pub const PLAN_SCHEMA: &str = "odek.plan/1";

/// Why commands will run on the host (SPEC §6.3 loud fallback).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Fallback {
    /// daemon-unreachable or image-unavailable.
    pub class: FailureClass,
    /// The underlying error's message.
    pub reason: String,
}

/// What the sandbox will be, or why there is none.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Isolation {
    /// A container will be launched.
    Container,
    /// Loud fallback: commands run on the host without isolation.
    Fallback(Fallback),
    /// The sandbox is off: commands run on the host (the operator chose it).
    Off,
}

/// Egress mode as resolved (SPEC §4.5): the allowlist, and the network
/// through which the proxy reaches out, by full ID, with its subnets.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EgressPlan {
    /// The allowlist's rules as odek writes them back (`pypi.org`,
    /// `x.test:8443`); empty: no way out at all.
    pub allow: Vec<String>,
    /// The egress network's name (`bridge`: the engine's default bridge).
    pub network: String,
    /// Its full ID.
    pub network_id: String,
    /// Its subnets (`a.b.c.d/n`): the addresses there stand for the
    /// outside and pass the proxy's address check.
    pub subnets: Vec<String>,
    /// Its gateways, refused even inside its subnets (the host).
    pub gateways: Vec<String>,
}

impl EgressPlan {
    /// The policy the proxy applies.
    pub fn policy(&self) -> odek_egress::policy::Policy {
        let rules = odek_egress::policy::parse_rules(&self.allow).unwrap_or_default();
        odek_egress::policy::Policy::new(rules, self.subnets.clone(), self.gateways.clone())
    }

    /// The allowlist for the startup line and views: `a,b` or `-` (none).
    pub fn allow_shown(&self) -> String {
        if self.allow.is_empty() {
            "-".into()
        } else {
            crate::text::shown(self.allow.join(","))
        }
    }
}

/// The resolved configuration: everything launch needs, with sources.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Plan {
    /// Always [`PLAN_SCHEMA`].
    pub schema: String,
    /// Sandbox mode (SPEC §3.3).
    pub mode: SandboxMode,
    /// Container, fallback or off.
    pub isolation: Isolation,
    /// Absolute working directory (mounted at `/workspace`).
    pub workdir: PathBuf,
    /// The working directory's identity (device, inode) when it was
    /// resolved: launch refuses a path that holds another directory now
    /// ([`crate::workdir::check_at_use`]). `None` in plans of earlier
    /// releases (JSON without the field) and with the sandbox off.
    #[serde(default)]
    pub workdir_id: Option<crate::config::FileId>,
    /// `$ODEK_HOME`.
    pub odek_home: PathBuf,
    /// The daemon endpoint (display form), when one was chosen.
    pub endpoint: Option<String>,
    /// Who owns the endpoint's Unix socket, read at resolve (SPEC §6.2);
    /// `None` for TCP, when no endpoint was chosen, or in plans of earlier
    /// releases.
    #[serde(default)]
    pub endpoint_owner: Option<crate::engine::SocketOwner>,
    /// The engine, when it answered.
    pub engine: Option<EngineInfo>,
    /// The image decision.
    pub image: ImagePlan,
    /// `sandbox_network`.
    pub network_mode: NetworkMode,
    /// Attached networks by full ID, in attach order.
    pub networks: Vec<ResolvedNetwork>,
    /// Full ID of the default bridge network (when `network_mode` is bridge).
    pub bridge_network_id: Option<String>,
    /// SPEC §4.2 summary.
    pub network_summary: NetworkSummary,
    /// Whether the internet is reachable (SPEC §4.2); false in egress
    /// mode, whose only way out is the proxy ([`Plan::egress`]).
    pub internet: bool,
    /// For a sandbox with no route out that asks the engine's embedded
    /// resolver: whether the engine refuses to forward its lookups to the
    /// host's resolver or odek closes that path (SPEC §4.6,
    /// CVE-2024-29018); `None` with a route out, without any network, and
    /// in plans of earlier releases.
    #[serde(default)]
    pub dns_forwarding: Option<crate::dns::DnsForwarding>,
    /// Egress mode (SPEC §4.5): the allowlist and the network through
    /// which the proxy reaches out; `None` when `sandbox_egress` is unset
    /// (and in plans of earlier releases).
    #[serde(default)]
    pub egress: Option<EgressPlan>,
    /// `--pids-limit`.
    pub pids_limit: i64,
    /// How the working directory reaches `/workspace` (SPEC §6.1
    /// "workspace"): bind-mounted, or copied in at launch and back on
    /// request and at `down`. Plans of earlier releases bind.
    #[serde(default)]
    pub workspace: crate::config::WorkspaceMode,
    /// `/workspace` read-only.
    pub readonly: bool,
    /// Memory limit in bytes.
    pub memory_bytes: Option<i64>,
    /// CPU limit.
    pub cpus: Option<CpuLimit>,
    /// `uid[:gid]` or name: the operator's `sandbox_user`, else the
    /// default of SPEC §6.1 "user" (the operator's uid:gid on a local
    /// engine); `None`: the image's user.
    pub user: Option<String>,
    /// Why the sandbox runs as [`Plan::user`]. `None` in plans of earlier
    /// releases.
    #[serde(default)]
    pub user_choice: Option<crate::account::UserChoice>,
    /// The account odek gives a non-root numeric user (a passwd line, an
    /// empty tmpfs `HOME`, `HOME`/`USER`/`LOGNAME`), SPEC §6.1 "user".
    #[serde(default)]
    pub account: Option<crate::account::Account>,
    /// The OCI runtime asked for (`sandbox_runtime`, sent as
    /// `HostConfig.Runtime`), one the engine reported at resolve; `None`:
    /// the engine's default runtime.
    #[serde(default)]
    pub runtime: Option<String>,
    /// The engine's default runtime (`DefaultRuntime`) when resolve asked
    /// the engine (for views: what a plan without [`Plan::runtime`] gets);
    /// `None` when it did not ask or the engine did not say.
    #[serde(default)]
    pub engine_default_runtime: Option<String>,
    /// Container environment. Values are user data: do not log them.
    pub env: Vec<EnvVar>,
    /// Bind mounts besides `/workspace`.
    pub volumes: Vec<VolumeMount>,
    /// Container paths masked with an empty read-only tmpfs (`$ODEK_HOME`
    /// inside the working directory, SPEC §7.3).
    pub masks: Vec<String>,
    /// `ODEK_REQUIRE_SANDBOX=1`.
    pub require_sandbox: bool,
    /// The source of each setting, by config key.
    pub sources: BTreeMap<String, Source>,
    /// Warnings so far.
    pub warnings: Vec<Warning>,
    /// What the operator must approve before launch (SPEC §7), if anything.
    pub approval: Option<crate::approval::ApprovalRequest>,
    /// Days the sandbox's record (`$ODEK_HOME/sandboxes/<name>/`,
    /// docs/SECURITY.md "The record of what ran") is kept after the
    /// sandbox ended: the operator's `sandbox_log_retention`; 0 = removed
    /// when it ends. Plans of earlier releases get the default (7).
    #[serde(default = "default_log_retention_days")]
    pub log_retention_days: u32,
}

/// [`Plan::log_retention_days`] of a plan that does not say.
fn default_log_retention_days() -> u32 {
    crate::config::DEFAULT_LOG_RETENTION as u32
}

impl Plan {
    /// The sandbox user as views show it: `1000:1000`, `root`, a name, or
    /// `image` (the image's own user); terminal-safe.
    pub fn user_shown(&self) -> String {
        match &self.user {
            Some(u) => crate::text::shown(u),
            None => "image".into(),
        }
    }

    /// True when a sandbox of this plan asks the engine's embedded resolver
    /// and has no route out (SPEC §4.6): attached networks only, none of
    /// them leading out.
    pub fn no_route_with_resolver(&self) -> bool {
        crate::dns::no_route_with_resolver(
            self.internet,
            self.network_mode,
            // Egress mode puts the sandbox on its internal link network
            // even without attached networks (SPEC §4.5): it asks the
            // embedded resolver all the same.
            !self.networks.is_empty() || self.egress.is_some(),
        )
    }

    /// ` [Podman 4.3.1]` when resolve found the engine to be Podman's API
    /// service (SPEC §6.2.3: it says so with the endpoint, on the startup
    /// line and in `config view`), else empty.
    pub(crate) fn podman_shown(&self) -> &str {
        self.endpoint
            .as_deref()
            .and_then(|e| e.find(" [Podman ").map(|i| &e[i..]))
            .unwrap_or("")
    }

    /// The engine's release as resolve saw it (`20.10.24`), when it answered.
    pub(crate) fn engine_release(&self) -> Option<&str> {
        self.engine.as_ref().map(|e| e.server_version.as_str())
    }

    /// What a sandbox of this plan will have of the engine's DNS forwarding
    /// (SPEC §4.6, [`crate::dns::planned`]).
    pub fn planned_dns_forwarding(&self) -> Option<crate::dns::DnsForwarding> {
        crate::dns::planned(self.no_route_with_resolver(), self.engine_release())
    }

    /// The key of the warm pool this plan claims from
    /// ([`crate::pool::Pool`]): 64 lowercase hex digits, the SHA-256 of the
    /// whole plan's JSON (every field launch uses — image, network IDs,
    /// limits, user, workdir and its identity, env values, approval — and
    /// every field a later release adds), so any difference gives another
    /// key. It covers env values: it is kept in memory, never written to a
    /// label ([`Plan::pool_label`] is).
    pub fn pool_key(&self) -> String {
        use sha2::{Digest, Sha256};
        hex::encode(Sha256::digest(
            serde_json::to_vec(self).expect("a plan serializes"),
        ))
    }

    /// The value of a ready sandbox's [`crate::labels::POOL`] label: 64 hex
    /// digits, the SHA-256 of the plan as its `dev.odek.plan` label holds it
    /// (env values removed), so the label tells which plan a ready sandbox
    /// was launched for and reveals no more than that label.
    pub fn pool_label(&self) -> String {
        use sha2::{Digest, Sha256};
        hex::encode(Sha256::digest(self.label_json()))
    }

    /// The plan as JSON for the container label (read back to narrow a
    /// child, SPEC §8), with env values removed: labels travel further than
    /// the container's environment (monitoring exports them), and values
    /// may be secrets. [`crate::Client::attach`] restores them from
    /// `Config.Env`.
    pub(crate) fn label_json(&self) -> String {
        let mut p = self.clone();
        for e in &mut p.env {
            e.value.clear();
        }
        serde_json::to_string(&p).unwrap_or_default()
    }

    /// True when a fallback to the host is allowed should the image be
    /// unavailable (SPEC §6.3): implicit mode, no `ODEK_REQUIRE_SANDBOX`, no
    /// attached network, and nothing from the project (its `odek.json` or
    /// `Dockerfile.odek`): only the operator may allow a host run. The last
    /// is checked here again although resolve makes such a plan explicit,
    /// so that a plan from elsewhere (a parent's label, the C ABI) cannot
    /// buy one either.
    pub(crate) fn fallback_allowed(&self) -> bool {
        self.fallback_allowed_attaching(!self.networks.is_empty())
    }

    /// [`Plan::fallback_allowed`] with whether the sandbox attaches networks
    /// given: resolve asks before the networks are resolved (from the
    /// settings' request), the plan's own networks after.
    pub(crate) fn fallback_allowed_attaching(&self, attaches_networks: bool) -> bool {
        self.mode == SandboxMode::Implicit
            && !self.require_sandbox
            && !attaches_networks
            && !self.sources.values().any(crate::config::Source::is_project)
            && !matches!(
                self.image.source,
                crate::image::ImageSource::Dockerfile { .. }
            )
    }
}
