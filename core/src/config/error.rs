//! Configuration errors (SPEC §3). Every variant is failure class `config`:
//! fatal in every mode, raised before any container exists.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// A configuration error. Messages name the cause and the fix; they never
/// carry env values (CONVENTIONS 20).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ConfigError {
    /// A config file is not valid JSON (or has duplicate keys, a BOM, NUL…).
    #[error("{path}:{line}:{column}: {reason}; fix the file or remove it")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// 1-based line (0 when unknown).
        line: usize,
        /// 1-based column (0 when unknown).
        column: usize,
        /// What is wrong.
        reason: String,
    },
    /// A config file could not be read.
    #[error("cannot read {path}: {reason}")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        reason: String,
    },
    /// `$ODEK_HOME` or the user config belongs to another non-root user or
    /// can be written by group or others (SPEC §7.3): not trusted.
    #[error("{what} {path} {reason}")]
    NotPrivate {
        /// What it is: `$ODEK_HOME` or `user config`.
        what: String,
        /// The directory or file.
        path: PathBuf,
        /// What is wrong, with the fix (from `check_private`).
        reason: String,
    },
    /// A key has a value of the wrong type or form.
    #[error("{origin}: {key} {reason}")]
    InvalidValue {
        /// Where the value came from (file path, env var, flag).
        origin: String,
        /// The config key, e.g. `sandbox_pids_limit`.
        key: String,
        /// What is wrong and what is expected, e.g. `must be a positive integer (got "0")`.
        reason: String,
    },
    /// `sandbox_network` is neither `none` nor `bridge` (SPEC §3.4).
    #[error("{origin}: sandbox_network must be \"none\" or \"bridge\" (got {value}); to attach the sandbox to Docker networks use sandbox_networks (--sandbox-networks a,b) or sandbox_compose_project (--sandbox-compose <project>); ODEK_SANDBOX_NETWORK_LENIENT=1 downgrades an invalid value to \"none\"")]
    InvalidNetworkMode {
        /// Where the value came from.
        origin: String,
        /// The value, quoted and escaped for display.
        value: String,
    },
    /// A network name outside Docker's charset, reserved, or with `:`/`/`.
    #[error("{origin}: network name {value} is not accepted: {reason}")]
    InvalidNetworkName {
        /// Where the value came from.
        origin: String,
        /// The value, quoted and escaped for display.
        value: String,
        /// Why.
        reason: String,
    },
    /// A Compose project name outside Compose's charset.
    #[error("{origin}: Compose project name {value} is not valid (Compose project names match [a-z0-9][a-z0-9_-]*, at most 100 bytes){}", hint_suffix(.normalized, .running))]
    InvalidComposeProject {
        /// Where the value came from.
        origin: String,
        /// The value, quoted and escaped for display.
        value: String,
        /// The normalised spelling, when one exists.
        normalized: Option<String>,
        /// Running projects' labels (sanitised), as hints.
        running: Vec<String>,
    },
    /// A volume entry violates SPEC §3.4.
    #[error("{origin}: volume {value} is refused: {reason}")]
    InvalidVolume {
        /// Where the value came from.
        origin: String,
        /// The volume string, quoted and escaped for display.
        value: String,
        /// Why.
        reason: String,
    },
    /// Networks configured while the sandbox is off (SPEC §3.3).
    #[error("networks are configured ({what}) but the sandbox is off ({origin}); networks cannot be honoured on the host: remove them or turn the sandbox on")]
    NetworksWithoutSandbox {
        /// What was configured.
        what: String,
        /// Where the sandbox was turned off.
        origin: String,
    },
    /// The working directory is unusable.
    #[error("working directory {path}: {reason}")]
    Workdir {
        /// The directory.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

fn hint_suffix(normalized: &Option<String>, running: &[String]) -> String {
    let mut s = String::new();
    if let Some(n) = normalized {
        s.push_str(&format!("; did you mean {n:?}?"));
    }
    if running.is_empty() {
        s.push_str("; no Compose project is running");
    } else {
        s.push_str(&format!("; running projects: {}", running.join(", ")));
    }
    s
}

/// Quotes a user-supplied value for an error message: Rust debug escaping
/// (control and escape characters shown as `\u{…}`), cut at 80 characters.
pub fn quote(value: &str) -> String {
    let mut cut: String = value.chars().take(80).collect();
    if cut.len() < value.len() {
        cut.push('…');
    }
    format!("{cut:?}")
}
