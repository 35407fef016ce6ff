//! Approval of project settings (SPEC §7).
//!
//! A repository's `./odek.json` can ask for an image, a network mode, env,
//! volumes, networks and an OCI runtime — an attacker's repository too. Every such request
//! needs operator consent bound to the concrete Docker objects: the
//! [`ApprovalRequest`] lists each resolved network's full ID, the key covers
//! those IDs (§7.3), and the IDs are checked again right before create (§7.4).

mod key;
mod store;

pub(crate) use key::approval_key;
pub use key::{engine_binding, key_bytes, KeyInput};

pub use store::{Meta, Store, META_FILE};

use serde::{Deserialize, Serialize};

use crate::config::{Settings, Source};
use crate::network::NetworkSummary;
use crate::text::{display_name, shown};

/// Schema name of [`ApprovalRequest`] JSON.
pub const APPROVAL_REQUEST_SCHEMA: &str = "odek.approval-request/1";
/// Schema name of [`Approval`] JSON.
pub const APPROVAL_SCHEMA: &str = "odek.approval/1";

/// Why a project that was trusted asks again (its request has
/// `previously_trusted`), for refusals where no card is shown (no terminal,
/// `odek mcp`).
pub const PREVIOUSLY_TRUSTED: &str = "this project was trusted before with other settings or network IDs (recreating a Compose project with `down` and `up` gives its networks new IDs); the stored trust does not cover what it asks for now: review the new settings with odek at a terminal";

/// Why a project that was trusted asks again when its trust was stored
/// before approvals were bound to the engine (its request has
/// `trusted_before_engine_binding`), for refusals where no card is shown.
pub const ENGINE_NOW_BOUND: &str = "this project was trusted before odek bound approvals to the engine they were given on (network IDs are unique only per engine, so a trust could have carried over to another engine); it asks once more, and a trust given now holds on this engine only: review it with odek at a terminal";

/// Approval errors: class config.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum ApprovalError {
    /// Launch was called for a plan that needs approval without one.
    #[error("{} asks for project sandbox settings ({}); this needs operator approval before launch: approve the plan's approval request (answer y or t at the odek prompt, or call approve in the bindings), or set {}=1", crate::text::shown(.config), crate::text::shown(.knobs), crate::config::APPROVE_ENV)]
    Required {
        /// The project config file.
        config: String,
        /// The knobs asked for.
        knobs: String,
    },
    /// No terminal to ask on, no env approval, no stored trust. The
    /// command line's words ([`ApprovalError::render`] gives MCP's).
    #[error("{} asks for project sandbox settings ({}); this needs operator approval, but there is no terminal to ask on; either review and trust them at a terminal with `{}` given the same --sandbox-* flags and ODEK_SANDBOX_* variables as this run (they change what the project's settings ask for, so a trust without them may not cover this run; answer `t`; nothing runs) or run odek interactively and answer `t`, or set {}=1 to approve them for this run", crate::text::shown(.config), crate::text::shown(.knobs), approve_command(.project_dir), crate::config::APPROVE_ENV)]
    NonInteractive {
        /// The project config file.
        config: String,
        /// The knobs asked for.
        knobs: String,
        /// The project directory (absolute), which `odek approve -C`
        /// names.
        #[serde(default)]
        project_dir: String,
    },
    /// The operator said no.
    #[error("the project sandbox settings of {} were not approved; nothing was launched", crate::text::shown(.config))]
    Denied {
        /// The project config file.
        config: String,
    },
    /// The approval given is for other settings than the plan's.
    #[error("the approval (key {}) does not match the plan's settings (key {}); resolve and approve again", crate::text::shown(.given), crate::text::shown(.wanted))]
    KeyMismatch {
        /// Key of the approval.
        given: String,
        /// Key of the plan.
        wanted: String,
    },
    /// The project's networks changed between approval and create (SPEC §7.4).
    #[error("the project's networks changed since they were approved, so nothing was created: {difference}; run again to review and approve the new set")]
    NetworksChanged {
        /// What differs.
        difference: String,
    },
    /// The project's networks were recreated while a sandbox reached them
    /// (a Compose `down` and `up`): their new IDs are not approved, so the
    /// sandbox is not connected to them and the call did not run (SPEC
    /// §4.4). `request` is the card for the new IDs: approving it (once,
    /// through MCP elicitation, or a stored trust from `odek approve`)
    /// lets the next call connect them.
    #[error("the project's networks were recreated since they were approved ({difference}), so the sandbox is not connected to them and nothing ran; approve the new networks with `{}` (answer `t`), or end the sandbox", approve_command(&.request.project_dir))]
    Recreated {
        /// Which networks have new IDs.
        difference: String,
        /// The approval request for the new IDs.
        request: Box<ApprovalRequest>,
    },
    /// `approve` was called for a plan whose project asks for nothing.
    #[error("the plan needs no approval: its project config asks for nothing that widens the sandbox; launch it without one")]
    NotNeeded,
    /// The store cannot be read or written.
    #[error("approval store {}: {reason}", crate::text::shown(.path))]
    Store {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
}

impl ApprovalError {
    /// The message in `surface`'s words: an MCP client that could not ask
    /// the user (no elicitation) is told what the operator runs in a
    /// terminal, `odek approve -C DIR` ([`approve_command`]), and the
    /// server's switch; every other message is the same on each surface.
    pub fn render(&self, surface: crate::advice::Surface) -> String {
        match self {
            ApprovalError::NonInteractive {
                config,
                knobs,
                project_dir,
            } if surface == crate::advice::Surface::Mcp => format!(
                "{} asks for project sandbox settings ({}); this needs operator approval, and the user could not be asked through this MCP client (it does not support elicitation, or the question failed); the operator approves them once in a terminal with `{}` given the same --sandbox-* flags and ODEK_SANDBOX_* variables this server was started with (answer `t`: the trust is stored, nothing runs, and this server then launches without asking), or starts the server with {}=1",
                shown(config),
                shown(knobs),
                approve_command(project_dir),
                crate::config::APPROVE_ENV
            ),
            other => other.to_string(),
        }
    }
}

/// The command that shows the approval card of the project in `dir` and
/// stores a trust on `t` without running anything: `odek approve -C DIR`,
/// `DIR` quoted for a POSIX shell when it needs it (escaped as
/// [`shown`] does when it holds a control or invisible character, which
/// no quoting makes safe to show).
pub fn approve_command(dir: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+,:@%=".contains(c);
    let dir = if !dir.is_empty() && dir.chars().all(plain) {
        dir.to_string()
    } else if dir.chars().any(crate::text::is_unsafe_char) {
        shown(dir)
    } else {
        format!("'{}'", dir.replace('\'', "'\\''"))
    };
    format!("odek approve -C {dir}")
}

/// An env key as shown for approval.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EnvKeyView {
    /// The key.
    pub key: String,
    /// Its value interpolates host variables (`${…}`).
    pub interpolates_host: bool,
    /// The host variables it reads (names only; values are never shown).
    #[serde(default)]
    pub reads: Vec<String>,
}

/// One resolved network on the card (SPEC §7.2).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NetworkCard {
    /// Name, terminal-safe ([`display_name`]).
    pub name: String,
    /// Full 64-hex ID.
    pub id: String,
    /// `Internal`.
    pub internal: bool,
    /// Compose project label (terminal-safe) or `-`.
    pub compose_project: String,
    /// Swarm stack label (terminal-safe), for a stack's network (SPEC §4.1).
    #[serde(default)]
    pub stack: Option<String>,
    /// Scope, when not `local` (`swarm` for a stack's overlay; bound by the
    /// key, SPEC §7.3).
    #[serde(default)]
    pub scope: Option<String>,
    /// `Attachable` (always true for an accepted swarm-scoped network).
    #[serde(default)]
    pub attachable: bool,
}

/// What the operator is asked to approve (SPEC §7.2): every project-requested
/// knob, and each resolved network's name, full ID, Internal flag and
/// Compose project.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ApprovalRequest {
    /// Always [`APPROVAL_REQUEST_SCHEMA`].
    pub schema: String,
    /// The approval key (SPEC §7.3).
    pub key: String,
    /// Absolute project directory.
    pub project_dir: String,
    /// The file that asks: `odek.json`, or `Dockerfile.odek` when that is all
    /// the project asks for.
    pub config: String,
    /// Config keys asking for approval.
    pub knobs: Vec<String>,
    /// `sandbox_image` from the project.
    pub image: Option<String>,
    /// `sandbox_network` from the project.
    pub network: Option<String>,
    /// `sandbox_env` keys from the project.
    pub env: Vec<EnvKeyView>,
    /// `sandbox_volumes` from the project.
    pub volumes: Vec<String>,
    /// `sandbox_networks` names from the project, as written.
    pub requested_networks: Vec<String>,
    /// `sandbox_compose_project` from the project.
    pub requested_compose_project: Option<String>,
    /// `sandbox_stack` from the project (SPEC §4.1).
    #[serde(default)]
    pub requested_stack: Option<String>,
    /// `sandbox_runtime` from the project: the OCI runtime it asks the
    /// engine to run the sandbox with (one the engine has; SPEC §6.1
    /// "runtime").
    #[serde(default)]
    pub runtime: Option<String>,
    /// The project-requested networks, resolved.
    pub networks: Vec<NetworkCard>,
    /// The network mode the sandbox would have (SPEC §9.2: cards report it).
    pub network_summary: NetworkSummary,
    /// Internet reachable.
    pub internet: bool,
    /// Already trusted in the store.
    pub trusted: bool,
    /// The store holds a trust for this project directory with other
    /// settings or networks (so the operator knows something changed).
    #[serde(default)]
    pub previously_trusted: bool,
    /// When project env values read host variables: the digest of the env
    /// templates a trust is bound to besides the key (SPEC §7.3 keys cover
    /// env names only, so a changed template must ask again).
    #[serde(default)]
    pub env_binding: Option<String>,
    /// SHA-256 of `Dockerfile.odek` when the image is built from it.
    #[serde(default)]
    pub dockerfile_sha256: Option<String>,
    /// `ODEK_APPROVE_PROJECT_SANDBOX=1` is set.
    pub approved_by_env: bool,
    /// The core's decision ([`ApprovalRequest::standing`]): how the plan
    /// is approved without a question — `"stored"` (a trust in the store)
    /// or `"env"` (`ODEK_APPROVE_PROJECT_SANDBOX=1`) — or null when the
    /// operator must be asked (or `approve` called). The bindings read
    /// this; they do not decide from `trusted` and `approved_by_env`.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub standing: Option<Via>,
    /// What happens when the sandbox cannot be made (the image cannot be
    /// pulled or built, the daemon is unreachable): `false` — refused,
    /// nothing runs (always, since a project setting makes the sandbox
    /// required, SPEC §6.3); `true` would be a loud fallback to the host.
    #[serde(default)]
    pub host_fallback: bool,
    /// The plain-text card the CLI prompts with ([`ApprovalRequest::render_card`]),
    /// carried so that bindings show the same text.
    #[serde(default)]
    pub card: String,
    /// `sandbox_egress` from the project, when it asks for more than the
    /// operator's own list allows (SPEC §4.5); `None` otherwise.
    #[serde(default)]
    pub egress: Option<Vec<String>>,
    /// `sandbox_egress_network` from the project.
    #[serde(default)]
    pub egress_network: Option<String>,
    /// The engine the key binds ([`engine_binding`], SPEC §7.3):
    /// `engine:<ID>` (`/info`'s `ID`), or `endpoint:<endpoint>` for an
    /// engine that reports none. Empty in requests of earlier releases.
    #[serde(default)]
    pub engine: String,
    /// The store trusts these settings under the key of earlier releases,
    /// which bound no engine: the operator is asked once more
    /// ([`ENGINE_NOW_BOUND`] says why).
    #[serde(default)]
    pub trusted_before_engine_binding: bool,
}

/// How an approval was obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// This launch only (`y`).
    Once,
    /// Persisted in the store (`t`).
    Trust,
}

/// A granted approval: the key and the network IDs it was granted for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Approval {
    /// Always [`APPROVAL_SCHEMA`].
    pub schema: String,
    /// The approved key.
    pub key: String,
    /// Full IDs of the project-requested networks as approved.
    pub network_ids: Vec<String>,
    /// `once`, `trust`, `stored` or `env`.
    #[schemars(with = "String")]
    pub via: Via,
}

/// How an [`Approval`] was obtained; serialized as `once`, `trust`,
/// `stored` or `env`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    /// Asked, and answered for this launch only.
    Once,
    /// Asked, and answered with trust (now stored).
    Trust,
    /// A trust already in the store (standing).
    Stored,
    /// `ODEK_APPROVE_PROJECT_SANDBOX=1` (standing).
    Env,
}

impl Via {
    /// The serialized name: `once`, `trust`, `stored` or `env`.
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Once => "once",
            Via::Trust => "trust",
            Via::Stored => "stored",
            Via::Env => "env",
        }
    }

    /// True for an approval that needed no question (stored, env).
    pub fn is_standing(self) -> bool {
        matches!(self, Via::Stored | Via::Env)
    }
}

impl std::fmt::Display for Via {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ApprovalRequest {
    /// Why a trusted project asks again, for refusals where no card is
    /// shown: [`ENGINE_NOW_BOUND`] or [`PREVIOUSLY_TRUSTED`]; `None` when it
    /// was not trusted before.
    pub fn asks_again_because(&self) -> Option<&'static str> {
        if self.trusted_before_engine_binding {
            Some(ENGINE_NOW_BOUND)
        } else if self.previously_trusted {
            Some(PREVIOUSLY_TRUSTED)
        } else {
            None
        }
    }

    pub(crate) fn approval(&self, via: Via) -> Approval {
        Approval {
            schema: APPROVAL_SCHEMA.into(),
            key: self.key.clone(),
            network_ids: self.networks.iter().map(|n| n.id.clone()).collect(),
            via,
        }
    }

    /// The approval that needs no question: a stored trust, or
    /// `ODEK_APPROVE_PROJECT_SANDBOX=1`.
    pub fn standing(&self) -> Option<Approval> {
        if self.trusted {
            Some(self.approval(Via::Stored))
        } else if self.approved_by_env {
            Some(self.approval(Via::Env))
        } else {
            None
        }
    }

    /// What a failure to make the sandbox leads to, as the card says it.
    fn failure_outcome(&self) -> &'static str {
        if self.host_fallback {
            "commands run ON THE HOST without isolation, with a loud warning"
        } else {
            "refused, nothing runs"
        }
    }

    /// The card shown at the prompt: plain text, every name terminal-safe.
    pub fn render_card(&self) -> String {
        let mut s = format!(
            "The project's {} asks for sandbox settings that need your approval:\n",
            shown(&self.config)
        );
        let mut row = |k: &str, v: String| s.push_str(&format!("  {k:<9} {v}\n"));
        if let Some(sha) = &self.dockerfile_sha256 {
            row(
                "image",
                format!(
                    "built from Dockerfile.odek (odek-sandbox:{}): its RUN steps run at build time, with network access",
                    &sha[..24.min(sha.len())]
                ),
            );
        } else if let Some(i) = &self.image {
            row(
                "image",
                format!(
                    "{} (if it cannot be pulled: {})",
                    shown(i),
                    self.failure_outcome()
                ),
            );
        }
        if let Some(n) = &self.network {
            row("network", shown(n));
        }
        if let Some(r) = &self.runtime {
            row(
                "runtime",
                format!(
                    "{} (the OCI runtime the engine runs the sandbox with: it decides how the sandbox is isolated from the host)",
                    display_name(r)
                ),
            );
        }
        if !self.env.is_empty() {
            let keys: Vec<String> = self
                .env
                .iter()
                .map(|e| {
                    if e.interpolates_host {
                        let vars: Vec<String> =
                            e.reads.iter().map(|v| format!("${}", shown(v))).collect();
                        format!("{} (reads host {})", shown(&e.key), vars.join(", "))
                    } else {
                        shown(&e.key)
                    }
                })
                .collect();
            row("env", keys.join(", "));
        }
        for v in &self.volumes {
            row("volume", shown(v));
        }
        if let Some(p) = &self.requested_compose_project {
            row("compose", display_name(p));
        }
        if let Some(p) = &self.requested_stack {
            row("stack", display_name(p));
        }
        if let Some(e) = &self.egress {
            row(
                "egress",
                if e.is_empty() {
                    "egress mode with an empty allowlist (no way out)".to_string()
                } else {
                    format!(
                        "only through odek's proxy, to {}",
                        e.iter().map(shown).collect::<Vec<_>>().join(", ")
                    )
                },
            );
        }
        if let Some(n) = &self.egress_network {
            row("egress via", display_name(n));
        }
        if !self.networks.is_empty() {
            row(
                "networks",
                format!(
                    "{} ({}; internet {})",
                    self.networks.len(),
                    self.network_summary.describe(),
                    if self.internet {
                        "reachable"
                    } else {
                        "not reachable"
                    }
                ),
            );
            for n in &self.networks {
                s.push_str(&format!(
                    "    {}\n      id {}  internal={}  compose={}",
                    n.name,
                    n.id,
                    if n.internal { "yes" } else { "no" },
                    n.compose_project
                ));
                if let Some(st) = &n.stack {
                    s.push_str(&format!("  stack={st}"));
                }
                if let Some(sc) = &n.scope {
                    s.push_str(&format!(
                        "  scope={sc}  attachable={}",
                        if n.attachable { "yes" } else { "no" }
                    ));
                }
                s.push('\n');
            }
        }
        s.push_str(&format!(
            "  on failure {} (the image cannot be pulled or built, the daemon is unreachable, any check fails)\n",
            self.failure_outcome()
        ));
        if !self.engine.is_empty() {
            s.push_str(&format!("  engine    {}\n", shown(&self.engine)));
        }
        s.push_str(&format!("  key       {}\n", self.key));
        if self.trusted_before_engine_binding {
            s.push_str("  note      this project was trusted before odek bound approvals to the engine (network IDs are unique only per engine): asked once more; a trust given now holds on this engine only\n");
        } else if self.previously_trusted {
            s.push_str("  note      this project was trusted before with other settings or networks: review what changed\n");
        }
        s
    }
}

/// The knobs a project config needs approval for (SPEC §7.1), by config key,
/// when the applied value comes from the project. Operator sources never do.
pub(crate) fn project_knobs(s: &Settings) -> Vec<&'static str> {
    crate::config::approval_keys()
        .into_iter()
        .filter(|k| s.sources.get(k.name).is_some_and(Source::is_project))
        // A project egress list that only narrows the operator's needs no
        // approval (SPEC §3.2).
        .filter(|k| !(k.name == crate::config::names::sandbox_egress && s.egress_narrows))
        .map(|k| k.name)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn via_serializes_as_the_strings_of_the_abi() {
        for (via, text) in [
            (Via::Once, "once"),
            (Via::Trust, "trust"),
            (Via::Stored, "stored"),
            (Via::Env, "env"),
        ] {
            let json = serde_json::to_string(&via).expect("json");
            assert_eq!(json, format!("\"{text}\""));
            assert_eq!(via.to_string(), text);
            assert_eq!(serde_json::from_str::<Via>(&json).expect("back"), via);
        }
    }

    #[test]
    fn the_approve_command_names_the_directory_ready_for_a_shell() {
        assert_eq!(
            approve_command("/home/dev/app"),
            "odek approve -C /home/dev/app"
        );
        assert_eq!(
            approve_command("/home/dev/my app"),
            "odek approve -C '/home/dev/my app'"
        );
        assert_eq!(
            approve_command("/tmp/it's $(x)"),
            "odek approve -C '/tmp/it'\\''s $(x)'"
        );
        let hostile = approve_command("/tmp/e\u{1b}]0;x\u{7}");
        assert!(!hostile.chars().any(char::is_control), "{hostile}");
    }

    #[test]
    fn an_mcp_client_that_cannot_ask_is_told_the_approve_command() {
        let e = ApprovalError::NonInteractive {
            config: "/home/dev/app/odek.json".into(),
            knobs: "sandbox_image".into(),
            project_dir: "/home/dev/app".into(),
        };
        for surface in [crate::advice::Surface::Cli, crate::advice::Surface::Mcp] {
            let text = e.render(surface);
            assert!(
                text.contains("`odek approve -C /home/dev/app`"),
                "{surface:?}: {text}"
            );
            assert!(text.contains("ODEK_APPROVE_PROJECT_SANDBOX=1"), "{text}");
        }
        assert_eq!(e.render(crate::advice::Surface::Cli), e.to_string());
        assert!(e
            .render(crate::advice::Surface::Mcp)
            .contains("could not be asked through this MCP client"));
        let other = ApprovalError::NotNeeded;
        assert_eq!(other.render(crate::advice::Surface::Mcp), other.to_string());
    }

    #[test]
    fn approval_errors_show_the_project_config_escaped() {
        let config = "/tmp/attack/e\u{1b}]0;pwn\u{7}\u{1b}[2Jx/odek.json".to_string();
        for e in [
            ApprovalError::Required {
                config: config.clone(),
                knobs: "sandbox_image".into(),
            },
            ApprovalError::NonInteractive {
                config: config.clone(),
                knobs: "sandbox_image".into(),
                project_dir: config.clone(),
            },
            ApprovalError::Denied {
                config: config.clone(),
            },
            ApprovalError::Store {
                path: config.clone(),
                reason: "x".into(),
            },
        ] {
            let msg = e.to_string();
            assert!(!msg.chars().any(char::is_control), "raw in {msg:?}");
            assert!(msg.contains("\\u{1b}]0;pwn\\u{7}"), "{msg}");
        }
        let plain = ApprovalError::Denied {
            config: "/home/dev/app/odek.json".into(),
        };
        assert!(plain.to_string().contains(" /home/dev/app/odek.json "));
    }
}
