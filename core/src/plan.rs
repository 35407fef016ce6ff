//! The plan: the value `resolve` produces and `launch` executes
//! (CONVENTIONS 4). It can be printed (config view, §10.4), approved (§7) and
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fallback {
    /// daemon-unreachable or image-unavailable.
    pub class: FailureClass,
    /// The underlying error's message.
    pub reason: String,
}

/// What the sandbox will be, or why there is none.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Isolation {
    /// A container will be launched.
    Container,
    /// Loud fallback: commands run on the host without isolation.
    Fallback(Fallback),
    /// The sandbox is off: commands run on the host (the operator chose it).
    Off,
}

/// The resolved configuration: everything launch needs, with sources.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
    pub workdir_id: Option<crate::workdir::FileId>,
    /// `$ODEK_HOME`.
    pub odek_home: PathBuf,
    /// The daemon endpoint (display form), when one was chosen.
    pub endpoint: Option<String>,
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
    /// Whether the internet is reachable (SPEC §4.2).
    pub internet: bool,
    /// `--pids-limit`.
    pub pids_limit: i64,
    /// `/workspace` read-only.
    pub readonly: bool,
    /// Memory limit in bytes.
    pub memory_bytes: Option<i64>,
    /// CPU limit.
    pub cpus: Option<CpuLimit>,
    /// `uid[:gid]` or name.
    pub user: Option<String>,
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
}

impl Plan {
    /// Re-checks a plan before launch: plans cross the C ABI as JSON, so one
    /// may have been edited or built by hand. Every value must still pass the
    /// rules it passed at resolve (SPEC §3.4, §4.1, §5); for a container, the
    /// working directory and volumes are checked against the file system
    /// again ([`crate::workdir::check_at_use`]: a symlink planted since
    /// resolve, or another directory at the working directory's path, is
    /// refused). Errors name the field.
    pub fn check(&self) -> Result<(), crate::Error> {
        use crate::config::{parse_cpus, validate_env_key, validate_pids_limit, validate_user};
        let bad = |what: String| crate::Error::Usage(format!("the plan is not valid: {what}"));
        if self.schema != PLAN_SCHEMA {
            return Err(bad(format!(
                "schema {:?}, expected {PLAN_SCHEMA:?}",
                self.schema
            )));
        }
        validate_pids_limit("plan", self.pids_limit).map_err(crate::Error::Config)?;
        if let Some(m) = self.memory_bytes {
            if m < 6 << 20 {
                return Err(bad(format!("memory_bytes {m} is below 6 MiB")));
            }
        }
        if let Some(c) = &self.cpus {
            let again = parse_cpus("plan", &c.text).map_err(crate::Error::Config)?;
            if again.nano != c.nano {
                return Err(bad(format!(
                    "cpus {:?} and nano {} disagree",
                    c.text, c.nano
                )));
            }
        }
        if let Some(u) = &self.user {
            validate_user("plan", u).map_err(crate::Error::Config)?;
        }
        let full_id = |id: &str| {
            id.len() == 64
                && id
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        if self.networks.len() > crate::network::MAX_NETWORKS {
            return Err(bad(format!(
                "{} networks, at most {}",
                self.networks.len(),
                crate::network::MAX_NETWORKS
            )));
        }
        for n in &self.networks {
            if !full_id(&n.id) {
                return Err(bad(format!(
                    "network ID {:?} is not a full 64-hex ID",
                    n.id
                )));
            }
        }
        if self.isolation == Isolation::Container
            && self.network_mode == crate::config::NetworkMode::Bridge
        {
            match &self.bridge_network_id {
                Some(b) if full_id(b) => {}
                _ => {
                    return Err(bad(
                        "bridge mode without the default bridge's full ID".into()
                    ))
                }
            }
        }
        let again = crate::image::ImageRef::parse(&self.image.reference.original)
            .map_err(|e| bad(e.to_string()))?;
        if again != self.image.reference {
            return Err(bad(
                "the image reference does not match its parsed parts".into()
            ));
        }
        for e in &self.env {
            validate_env_key("plan env", &e.key).map_err(crate::Error::Config)?;
            if e.value.contains('\0') {
                return Err(bad(format!("env {} contains a NUL byte", e.key)));
            }
        }
        // The working directory and volumes as the file system holds them
        // now: the full working-directory rules, no symlink, still the
        // directory resolve recorded (a --parent child's plan comes from a
        // label, an ABI plan from JSON).
        if self.isolation == Isolation::Container {
            crate::workdir::check_at_use(self)?;
        }
        for m in &self.masks {
            if !m.starts_with("/workspace/") || m.contains("/../") || m.ends_with("/..") {
                return Err(bad(format!("mask {m:?} is not under /workspace")));
            }
        }
        Ok(())
    }

    /// True when a fallback to the host is allowed should the image be
    /// unavailable (SPEC §6.3): implicit mode, no `ODEK_REQUIRE_SANDBOX`, no
    /// attached network.
    pub fn fallback_allowed(&self) -> bool {
        self.mode == SandboxMode::Implicit && !self.require_sandbox && self.networks.is_empty()
    }
}
