//! Configuration (SPEC §3): the keys of §3.1 from four sources, merged by the
//! precedence of §3.2 with each value's source kept, the project-can-only-
//! tighten rules, and the validation of §3.4 — all before any container exists.

pub mod advice;
mod error;
pub(crate) mod hostpath;
mod identity;
mod keys;
mod merge;
mod parse;
mod validate;

use crate::text::{quote, shown};
pub use error::ConfigError;
pub use hostpath::resolve_volume;
pub(crate) use hostpath::validate_workdir;
pub use hostpath::RootOwned;
pub(crate) use identity::identify;
pub(crate) use identity::walk_no_symlink;
pub use identity::{still, FileId};
pub(crate) use keys::approval_keys;
pub(crate) use keys::container_only_keys;
pub use keys::{env_var_of, key, names, Flag, Key, Kind, Layer, KEYS, KNOWN_KEYS};
pub(crate) use merge::truthy;
pub use merge::{
    load, log_retention, odek_home, ConfigInputs, SandboxTurnedOff, Settings, APPROVE_ENV,
    DEFAULT_MEMORY, DEFAULT_MEMORY_BYTES, PROCESS_ENV_VARS,
};
pub(crate) use parse::layer_from_env;
pub(crate) use parse::suggest as suggest_key;
pub use parse::{check_strict_json, parse_bytes, MAX_CONFIG_BYTES};
pub(crate) use parse::{parse_file, parse_project_file};
pub(crate) use validate::host_refs;
pub(crate) use validate::validate_env_key_as;
pub use validate::{
    interpolate, normalize_compose_project, parse_cpus, parse_memory, parse_network_mode,
    validate_compose_project, validate_env_key, validate_log_retention, validate_network_name,
    validate_pids_limit, validate_pool, validate_runtime, validate_stack, validate_user,
    DEFAULT_LOG_RETENTION, EGRESS_ENV, EXEC_TAG_ENV, MAX_LOG_RETENTION, MAX_POOL,
    MAX_RUNTIME_NAME_BYTES, SUPERVISOR_ENV,
};

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Where a value came from (SPEC §3.2), lowest precedence first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Source {
    /// Built-in default.
    Default,
    /// `$ODEK_HOME/config.json`.
    User {
        /// The file.
        path: PathBuf,
    },
    /// `./odek.json` in the working directory (needs approval for some keys, §7).
    Project {
        /// The file.
        path: PathBuf,
    },
    /// An `ODEK_*` environment variable.
    Env {
        /// The variable.
        var: String,
    },
    /// A CLI flag.
    Flag {
        /// The flag, e.g. `--sandbox-pids-limit`.
        flag: String,
    },
    /// Set by an embedding program through the library or C ABI (an
    /// operator source, like a flag).
    Api,
}

impl Source {
    /// True for `./odek.json`.
    pub(crate) fn is_project(&self) -> bool {
        matches!(self, Source::Project { .. })
    }

    /// True for `$ODEK_HOME/config.json`.
    pub(crate) fn is_user(&self) -> bool {
        matches!(self, Source::User { .. })
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::User { path } => write!(f, "user config {}", shown(path)),
            Source::Project { path } => write!(f, "project config {}", shown(path)),
            Source::Env { var } => write!(f, "env {var}"),
            Source::Flag { flag } => write!(f, "flag {flag}"),
            Source::Api => f.write_str("api"),
        }
    }
}

/// A value with its source.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sourced<T> {
    /// The value.
    pub value: T,
    /// Where it came from.
    pub source: Source,
}

impl<T> Sourced<T> {
    /// Pairs a value with its source.
    pub(crate) fn new(value: T, source: Source) -> Sourced<T> {
        Sourced { value, source }
    }
}

/// Sandbox mode (SPEC §3.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SandboxMode {
    /// `sandbox=true` from some source: unreachable daemon / unpullable image are fatal.
    Explicit,
    /// Nothing said: on, with loud fallback where §6.3 allows.
    Implicit,
    /// `--no-sandbox`, `ODEK_SANDBOX=false` or user config `false`.
    Off,
}

/// `sandbox_network` (SPEC §3.4): exactly `none` or `bridge`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NetworkMode {
    /// No network besides attached ones.
    None,
    /// The default bridge.
    Bridge,
}

impl fmt::Display for NetworkMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NetworkMode::None => "none",
            NetworkMode::Bridge => "bridge",
        })
    }
}

/// `sandbox_workspace` (SPEC §6.1 "workspace"): how the working directory
/// reaches the sandbox's `/workspace`.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum WorkspaceMode {
    /// The working directory is bind-mounted: the sandbox's writes are the
    /// host's at once. Needs an engine on this machine.
    #[default]
    Bind,
    /// The working directory is uploaded through the engine's archive API
    /// at launch and copied back on request and at `down`, through the
    /// filter of [`crate::workspace_copy`].
    Copy,
}

impl fmt::Display for WorkspaceMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WorkspaceMode::Bind => "bind",
            WorkspaceMode::Copy => "copy",
        })
    }
}

/// Parses `sandbox_workspace` (SPEC §6.1 "workspace"): exactly `bind` or
/// `copy`. Errors: [`ConfigError::InvalidValue`] naming both.
pub fn parse_workspace_mode(origin: &str, value: &str) -> Result<WorkspaceMode, ConfigError> {
    match value {
        "bind" => Ok(WorkspaceMode::Bind),
        "copy" => Ok(WorkspaceMode::Copy),
        other => Err(ConfigError::InvalidValue {
            origin: origin.to_string(),
            key: names::sandbox_workspace.into(),
            reason: format!(
                "must be \"bind\" (mount the working directory) or \"copy\" (upload it at launch, copy it back at down) (got {})",
                crate::text::quote(other)
            ),
        }),
    }
}

/// A CPU limit as written and in `NanoCpus`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CpuLimit {
    /// As written, e.g. `0.5`.
    pub text: String,
    /// Billionths of a CPU.
    pub nano: i64,
}

/// One environment variable for the container.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EnvVar {
    /// The key (`[A-Za-z_][A-Za-z0-9_]*`).
    pub key: String,
    /// The value after `${…}` interpolation. User data: never logged.
    pub value: String,
    /// True when the written value used `${HOST_VAR}` (flagged in approval, §7.2).
    pub interpolates_host: bool,
    /// The host variables the written value reads (names only).
    #[serde(default)]
    pub reads: Vec<String>,
}

impl fmt::Debug for EnvVar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EnvVar")
            .field("key", &self.key)
            .field("value", &"<redacted>")
            .field("interpolates_host", &self.interpolates_host)
            .field("reads", &self.reads)
            .finish()
    }
}

/// A validated bind mount from `sandbox_volumes` (SPEC §3.4).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VolumeMount {
    /// The entry as written (used in the approval key, §7.3).
    pub spec: String,
    /// Absolute host path inside the working directory.
    pub host: PathBuf,
    /// Absolute container path.
    pub container: String,
    /// `:ro`.
    pub read_only: bool,
}

/// Parses an `ODEK_DOCKER_TIMEOUT` value (the Engine's ping and call
/// budget, SPEC §6.2): positive seconds below 1,000,000 (`"5"`, `"0.5"`).
/// Errors: the reason, with the value quoted.
pub fn parse_docker_timeout(value: &str) -> Result<std::time::Duration, String> {
    match value.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v < 1e6 => Ok(std::time::Duration::from_secs_f64(v)),
        _ => Err(format!(
            "must be a positive number of seconds below 1000000 (got {})",
            crate::text::quote(value)
        )),
    }
}
