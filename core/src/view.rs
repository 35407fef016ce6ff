//! Config view (SPEC §10.4): the settings actually applied — after
//! precedence, project tightening, lenient downgrade and resolution — with
//! each value's source. Rendered as text by the CLI or as JSON.

use crate::config::names;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::client::Client;
use crate::config::{SandboxMode, Source};
use crate::network::NetworkSummary;
use crate::plan::{Isolation, Plan};
use crate::text::sanitize_name;
use crate::verify::TMP_OPTIONS;
use crate::warning::Warning;

/// Schema name of [`ConfigView`] JSON.
pub const CONFIG_VIEW_SCHEMA: &str = "odek.config-view/1";

/// The image as it would be used.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ImageView {
    /// The reference as configured.
    pub reference: String,
    /// The pinned digest, if any.
    pub digest: Option<String>,
    /// Local image ID, when present on the daemon.
    pub id: Option<String>,
    /// Local `RepoDigests`.
    pub repo_digests: Vec<String>,
    /// `explicit`, `dockerfile` or `pinned_default`.
    pub origin: String,
    /// When a container is planned and the image is not present locally:
    /// what launch will do about it and what a failure then means (pull, or
    /// build from `Dockerfile.odek`; host fallback or refusal, SPEC §6.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_missing: Option<String>,
}

/// One network as applied.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NetworkView {
    /// Name (sanitised; `None` when it fails SPEC §9.3).
    pub name: Option<String>,
    /// Full ID.
    pub id: String,
    /// `Internal`.
    pub internal: bool,
    /// Compose project label (sanitised).
    pub compose_project: Option<String>,
    /// Swarm stack label (sanitised; SPEC §4.1).
    #[serde(default)]
    pub stack: Option<String>,
}

/// The applied configuration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ConfigView {
    /// Always [`CONFIG_VIEW_SCHEMA`].
    pub schema: String,
    /// Sandbox mode.
    pub mode: SandboxMode,
    /// `container`, `fallback` or `off`.
    pub isolation: String,
    /// Why fallback, when it is.
    pub fallback_reason: Option<String>,
    /// What a setup failure does (SPEC §6.3): true when an image that cannot
    /// be pulled (or a daemon that cannot be reached) would run commands on
    /// the host, with a warning — implicit mode, no `ODEK_REQUIRE_SANDBOX`, no
    /// attached network; false when every setup failure is a refusal
    /// (explicit mode, `ODEK_REQUIRE_SANDBOX`, networks attached, or the
    /// sandbox off).
    #[serde(default)]
    pub fallback_allowed: bool,
    /// Daemon endpoint.
    pub endpoint: Option<String>,
    /// Who owns the endpoint's Unix socket (`uid 0 (root)`, `uid 1000
    /// (alice)`); `None` for TCP or when it cannot be read. A socket of
    /// another user than you or root also has a warning (SPEC §6.2).
    #[serde(default)]
    pub endpoint_owner: Option<String>,
    /// Engine API version in use.
    pub api_version: Option<String>,
    /// Image.
    pub image: ImageView,
    /// `sandbox_network`.
    pub network_mode: String,
    /// SPEC §4.2 summary.
    pub network: NetworkSummary,
    /// Internet reachable.
    pub internet: bool,
    /// With no route out: whether the engine's DNS forwarding to the
    /// host's resolver is closed, and by whom (SPEC §4.6, CVE-2024-29018).
    #[serde(default)]
    pub dns_forwarding: Option<crate::dns::DnsForwarding>,
    /// Attached networks.
    pub networks: Vec<NetworkView>,
    /// PIDs limit.
    pub pids_limit: i64,
    /// `--init` (always on).
    pub init: bool,
    /// `/tmp` tmpfs options.
    pub tmpfs: String,
    /// Memory limit, bytes.
    pub memory_bytes: Option<i64>,
    /// CPUs.
    pub cpus: Option<String>,
    /// The user commands run as (`uid:gid`, a name, `root`); `None`: the
    /// image's own (SPEC §6.1 "user").
    pub user: Option<String>,
    /// Why that user when the operator named none.
    #[serde(default)]
    pub user_choice: Option<crate::account::UserChoice>,
    /// The account odek gives a non-root numeric user (name, uid, gid,
    /// the tmpfs `HOME`).
    #[serde(default)]
    pub account: Option<crate::account::Account>,
    /// The OCI runtime asked for (`sandbox_runtime`); `None`: the
    /// engine's default, [`ConfigView::default_runtime`].
    #[serde(default)]
    pub runtime: Option<String>,
    /// The engine's default runtime, when resolve asked the engine.
    #[serde(default)]
    pub default_runtime: Option<String>,
    /// `/workspace` read-only.
    pub readonly: bool,
    /// How the working directory reaches `/workspace` (SPEC §6.1
    /// "workspace"): `bind` or `copy`.
    #[serde(default)]
    pub workspace: crate::config::WorkspaceMode,
    /// Working directory.
    pub workdir: String,
    /// Env keys (values are never shown).
    pub env_keys: Vec<String>,
    /// Volume entries.
    pub volumes: Vec<String>,
    /// Masked container paths.
    pub masks: Vec<String>,
    /// Source of each setting.
    pub sources: BTreeMap<String, Source>,
    /// Warnings.
    pub warnings: Vec<Warning>,
    /// Project settings that take effect only once approved (SPEC §7):
    /// config keys, empty when nothing waits for approval.
    pub pending_approval: Vec<String>,
    /// Whether a sandbox launched now would have odek's supervisor, and if
    /// not why and what then does not hold (docs/SANDBOXING.md, "The
    /// supervisor"); `None` without a container or an engine.
    #[serde(default)]
    pub supervisor: Option<crate::supervisor::SupervisorState>,
    /// Egress mode (SPEC §4.5): the allowlist and the network the proxy
    /// reaches out through; `None` when `sandbox_egress` is unset.
    #[serde(default)]
    pub egress: Option<EgressView>,
}

/// Egress mode in the config view (SPEC §4.5, §10.4).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EgressView {
    /// The hosts the proxy lets through; empty: none.
    pub allow: Vec<String>,
    /// The egress network's name (`bridge`: the default bridge).
    pub network: String,
    /// Its full ID.
    pub network_id: String,
    /// Its subnets (addresses there pass the proxy's address check).
    pub subnets: Vec<String>,
    /// The proxy binary odek would mount, by SHA-256 (the proxy runs from
    /// the sandbox's own image; the binary is what identifies it), or why
    /// there is none (then a launch is refused).
    pub proxy: String,
}

impl Client {
    /// The config view of a plan (SPEC §10.4). Looks the image up locally
    /// when the daemon answers (never pulls or builds).
    pub async fn config_view(&self, plan: &Plan) -> ConfigView {
        let mut image = ImageView {
            reference: plan.image.reference.original.clone(),
            digest: plan.image.reference.digest.clone(),
            id: None,
            repo_digests: Vec::new(),
            origin: match &plan.image.source {
                crate::image::ImageSource::Explicit { .. } => "explicit",
                crate::image::ImageSource::Dockerfile { .. } => "dockerfile",
                crate::image::ImageSource::PinnedDefault => "pinned_default",
            }
            .into(),
            when_missing: None,
        };
        if plan.isolation == Isolation::Container {
            if let Ok(engine) = self.engine() {
                if let Ok(Some(info)) = engine
                    .inspect_image(&plan.image.reference.create_ref())
                    .await
                {
                    image.id = Some(info.id);
                    image.repo_digests = info.repo_digests;
                }
            }
            if image.id.is_none() {
                image.when_missing = Some(
                    match (&plan.image.source, plan.fallback_allowed()) {
                        (crate::image::ImageSource::Dockerfile { .. }, _) => {
                            "launch builds it from Dockerfile.odek; a failed build is refused"
                        }
                        (_, true) => "launch pulls it; should that fail, commands run on the host",
                        (_, false) => "launch pulls it; should that fail, the launch is refused",
                    }
                    .into(),
                );
            }
        }
        let supervisor = match (&plan.isolation, self.engine()) {
            (Isolation::Container, Ok(e)) => {
                Some(crate::supervisor::Supervision::state_for(plan, e.as_ref()))
            }
            _ => None,
        };
        let (isolation, fallback_reason) = match &plan.isolation {
            Isolation::Container => ("container", None),
            Isolation::Fallback(f) => ("fallback", Some(f.reason.clone())),
            Isolation::Off => ("off", None),
        };
        ConfigView {
            schema: CONFIG_VIEW_SCHEMA.into(),
            mode: plan.mode,
            isolation: isolation.into(),
            fallback_reason,
            fallback_allowed: plan.isolation != Isolation::Off && plan.fallback_allowed(),
            endpoint: plan.endpoint.clone(),
            endpoint_owner: plan.endpoint_owner.as_ref().map(|o| o.to_string()),
            api_version: plan.engine.as_ref().map(|e| e.api_version.to_string()),
            image,
            network_mode: plan.network_mode.to_string(),
            network: plan.network_summary,
            internet: plan.internet,
            dns_forwarding: plan.dns_forwarding,
            egress: plan.egress.as_ref().map(|e| EgressView {
                allow: e.allow.clone(),
                network: e.network.clone(),
                network_id: e.network_id.clone(),
                subnets: e.subnets.clone(),
                proxy: crate::egress::binary_identity(),
            }),
            networks: plan
                .networks
                .iter()
                .map(|n| NetworkView {
                    name: sanitize_name(&n.name),
                    id: n.id.clone(),
                    internal: n.internal,
                    compose_project: n.compose_project.as_deref().and_then(sanitize_name),
                    stack: n.stack.as_deref().and_then(sanitize_name),
                })
                .collect(),
            pids_limit: plan.pids_limit,
            init: true,
            tmpfs: TMP_OPTIONS.into(),
            memory_bytes: plan.memory_bytes,
            cpus: plan.cpus.as_ref().map(|c| c.text.clone()),
            user: plan.user.clone(),
            user_choice: plan.user_choice,
            account: plan.account.clone(),
            runtime: plan.runtime.clone(),
            default_runtime: plan.engine_default_runtime.clone(),
            readonly: plan.readonly,
            workspace: plan.workspace,
            workdir: plan.workdir.display().to_string(),
            env_keys: plan.env.iter().map(|e| e.key.clone()).collect(),
            volumes: plan.volumes.iter().map(|v| v.spec.clone()).collect(),
            masks: plan.masks.clone(),
            sources: plan.sources.clone(),
            warnings: plan.warnings.clone(),
            pending_approval: plan
                .approval
                .as_ref()
                .filter(|a| a.standing().is_none())
                .map(|a| a.knobs.clone())
                .unwrap_or_default(),
            supervisor,
        }
    }
}

impl ConfigView {
    /// Human-readable text, one setting per line with its source.
    pub fn render_text(&self) -> String {
        let src = |k: &str| {
            self.sources
                .get(k)
                .map(|s| s.to_string())
                .unwrap_or_else(|| "default".into())
        };
        let mut out = String::new();
        // Every value and source may hold foreign text (a path, a volume, a
        // daemon's message, DOCKER_HOST): one line each, escaped.
        let mut line = |k: &str, v: String, s: String| {
            let (v, s) = (crate::text::foreign(&v), crate::text::foreign(&s));
            out.push_str(&format!("{k:<12} {v:<48} ({s})\n"));
        };
        let mode = match self.mode {
            SandboxMode::Explicit => "explicit",
            SandboxMode::Implicit => "implicit",
            SandboxMode::Off => "off",
        };
        line(
            "mode",
            format!("{mode} ({})", self.isolation),
            src(names::sandbox),
        );
        if let Some(r) = &self.fallback_reason {
            line("fallback", r.clone(), "daemon/image".into());
        }
        if self.isolation == "container" {
            let (what, why) = if self.fallback_allowed {
                (
                    "refused, except an image that cannot be pulled: commands then run on the host, with a warning",
                    "implicit mode".to_string(),
                )
            } else {
                (
                    "refused: every setup failure is a refusal, nothing runs on the host",
                    match (self.mode, self.networks.is_empty()) {
                        (SandboxMode::Explicit, _) => {
                            format!("explicit mode; {}", src(names::sandbox))
                        }
                        (_, false) => "networks are attached".to_string(),
                        (_, true) => "a sandbox is required: ODEK_REQUIRE_SANDBOX".to_string(),
                    },
                )
            };
            line("on failure", what.into(), why);
        }
        if let Some(e) = &self.endpoint {
            line(
                "endpoint",
                e.clone(),
                format!(
                    "API {}",
                    self.api_version.clone().unwrap_or_else(|| "?".into())
                ),
            );
            if let Some(o) = &self.endpoint_owner {
                line("  owner", o.clone(), "of the socket".into());
            }
        }
        if let Some(sup) = &self.supervisor {
            line(
                "supervisor",
                sup.shown(),
                match std::env::var_os(crate::config::SUPERVISOR_ENV) {
                    Some(_) => crate::config::SUPERVISOR_ENV.to_string(),
                    None => "installed beside odek".into(),
                },
            );
            for gap in &sup.not_held {
                line("  not held", gap.clone(), "without the supervisor".into());
            }
        }
        let mut img = self.image.reference.clone();
        if let Some(id) = &self.image.id {
            img.push_str(&format!(" [{}]", &id[..id.len().min(19)]));
        } else if let Some(w) = &self.image.when_missing {
            img.push_str(&format!(" [not present locally: {w}]"));
        }
        line(
            "image",
            img,
            format!("{}; {}", self.image.origin, src(names::sandbox_image)),
        );
        line(
            "network",
            self.network.describe().to_string(),
            src(names::sandbox_network),
        );
        line(
            "internet",
            match (self.internet, self.dns_forwarding) {
                (true, _) => "reachable",
                (false, Some(crate::dns::DnsForwarding::MayForward)) => {
                    "not reachable by route; DNS lookups may be forwarded by this engine (CVE-2024-29018)"
                }
                (false, _) => "not reachable",
            }
            .into(),
            "resolved".into(),
        );
        if let Some(d) = self.dns_forwarding {
            line(
                "dns",
                match d {
                    crate::dns::DnsForwarding::ClosedByOdek => "lookups of outside names go nowhere: odek gives the sandbox an upstream DNS server nobody answers inside its own network (CVE-2024-29018)",
                    crate::dns::DnsForwarding::EngineRefuses => "lookups of outside names go nowhere: this engine's release does not forward them from internal networks (CVE-2024-29018 fixed)",
                    crate::dns::DnsForwarding::MayForward => "lookups of outside names MAY BE FORWARDED to the host's resolver by this engine (CVE-2024-29018)",
                }
                .into(),
                "resolved".into(),
            );
        }
        if let Some(e) = &self.egress {
            line(
                "egress",
                if e.allow.is_empty() {
                    "nothing (no way out)".to_string()
                } else {
                    e.allow.join(", ")
                },
                src(names::sandbox_egress),
            );
            line(
                "  via",
                format!(
                    "{} {} ({})",
                    crate::text::shown(&e.network),
                    &e.network_id[..e.network_id.len().min(12)],
                    e.subnets.join(", ")
                ),
                src(names::sandbox_egress_network),
            );
            line(
                "  proxy",
                crate::text::shown(&e.proxy),
                "odek-egress".into(),
            );
        }
        for n in &self.networks {
            line(
                "  attached",
                format!(
                    "{} {} internal={} compose={}{}",
                    n.name.clone().unwrap_or_else(|| "(name omitted)".into()),
                    n.id,
                    n.internal,
                    n.compose_project.clone().unwrap_or_else(|| "-".into()),
                    n.stack
                        .as_ref()
                        .map(|s| format!(" stack={s}"))
                        .unwrap_or_default()
                ),
                {
                    let from: Vec<String> = [
                        names::sandbox_networks,
                        names::sandbox_compose_project,
                        names::sandbox_stack,
                    ]
                    .iter()
                    .filter_map(|k| self.sources.get(*k).map(|s| s.to_string()))
                    .collect();
                    if from.is_empty() {
                        "-".into()
                    } else {
                        from.join("; ")
                    }
                },
            );
        }
        line(
            "pids",
            self.pids_limit.to_string(),
            src(names::sandbox_pids_limit),
        );
        line("init", "on".into(), "always".into());
        line("tmpfs", format!("/tmp {}", self.tmpfs), "always".into());
        line(
            "memory",
            self.memory_bytes
                .map(crate::text::memory)
                .unwrap_or_else(|| "unlimited".into()),
            src(names::sandbox_memory),
        );
        line(
            "cpus",
            self.cpus.clone().unwrap_or_else(|| "unlimited".into()),
            src(names::sandbox_cpus),
        );
        line(
            "user",
            match (&self.user, &self.account) {
                (Some(u), Some(a)) => format!(
                    "{} ({}, HOME {}: an empty tmpfs)",
                    crate::text::shown(u),
                    a.name,
                    a.home
                ),
                (Some(u), None) => crate::text::shown(u),
                (None, _) => "the image's user".into(),
            },
            match self.user_choice {
                Some(c) if c != crate::account::UserChoice::Operator => {
                    format!("default: {}", c.describe())
                }
                _ => src(names::sandbox_user),
            },
        );
        if self.isolation == "container" {
            line(
                "runtime",
                match (&self.runtime, &self.default_runtime) {
                    (Some(r), _) => crate::text::display_name(r),
                    (None, Some(d)) => {
                        format!("{} (the engine's default)", crate::text::display_name(d))
                    }
                    (None, None) => "the engine's default".into(),
                },
                src(names::sandbox_runtime),
            );
        }
        line(
            "readonly",
            format!(
                "{} (/workspace = {})",
                self.readonly,
                crate::text::shown(&self.workdir)
            ),
            src(names::sandbox_readonly),
        );
        line(
            "workspace",
            match self.workspace {
                crate::config::WorkspaceMode::Bind => {
                    "bind (the working directory is mounted)".into()
                }
                crate::config::WorkspaceMode::Copy => {
                    "copy (uploaded at launch, copied back at down or `odek sandbox copy-back`)"
                        .into()
                }
            },
            src(names::sandbox_workspace),
        );
        if !self.env_keys.is_empty() {
            line("env", self.env_keys.join(","), src(names::sandbox_env));
        }
        if !self.volumes.is_empty() {
            let shown: Vec<String> = self.volumes.iter().map(crate::text::shown).collect();
            line("volumes", shown.join(" "), src(names::sandbox_volumes));
        }
        for m in &self.masks {
            line(
                "masked",
                crate::text::shown(m),
                "$ODEK_HOME inside workdir".into(),
            );
        }
        if !self.pending_approval.is_empty() {
            out.push_str(&format!(
                "\nNot applied until approved (odek asks at launch): {} from the project\n",
                self.pending_approval.join(", ")
            ));
        }
        out
    }
}
