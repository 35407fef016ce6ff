//! Configuration errors (SPEC §3). Every variant is failure class `config`:
//! fatal in every mode, raised before any container exists.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::config::advice::{fix_text, Fix, Surface};
use crate::text::shown;

/// A configuration error. Messages name the cause and the fix; they never
/// carry env values (they are user data and may be secrets).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ConfigError {
    /// A config file is not valid JSON (or has duplicate keys, a BOM, NUL…).
    #[error("{}:{line}:{column}: {reason}; fix the file or remove it", shown(.path))]
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
    #[error("cannot read {}: {reason}", shown(.path))]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        reason: String,
    },
    /// `$ODEK_HOME` or the user config belongs to another non-root user or
    /// can be written by group or others (SPEC §7.3): not trusted.
    #[error("{what} {} {reason}", shown(.path))]
    NotPrivate {
        /// What it is: `$ODEK_HOME` or `user config`.
        what: String,
        /// The directory or file.
        path: PathBuf,
        /// What is wrong, with the fix (from `check_private`).
        reason: String,
    },
    /// A key has a value of the wrong type or form.
    #[error("{}: {key} {reason}", shown(.origin))]
    InvalidValue {
        /// Where the value came from (file path, env var, flag).
        origin: String,
        /// The config key, e.g. `sandbox_pids_limit`.
        key: String,
        /// What is wrong and what is expected, e.g. `must be a positive integer (got "0")`.
        reason: String,
    },
    /// `sandbox_image` has a value of the wrong type, or one that is not an
    /// image reference.
    #[error("{}: sandbox_image {reason}", shown(.origin))]
    InvalidImage {
        /// Where the value came from (file path, env var, flag).
        origin: String,
        /// What is wrong and what is expected.
        reason: String,
    },
    /// `sandbox_network` is neither `none` nor `bridge` (SPEC §3.4).
    #[error("{}", network_mode_text(.origin, .value, Surface::Cli))]
    InvalidNetworkMode {
        /// Where the value came from.
        origin: String,
        /// The value, quoted and escaped for display.
        value: String,
    },
    /// A network name outside Docker's charset, reserved, or with `:`/`/`.
    #[error("{}: network name {value} is not accepted: {reason}", shown(.origin))]
    InvalidNetworkName {
        /// Where the value came from.
        origin: String,
        /// The value, quoted and escaped for display.
        value: String,
        /// Why.
        reason: String,
    },
    /// A Compose project name outside Compose's charset.
    #[error("{}: Compose project name {value} is not valid (Compose project names match [a-z0-9][a-z0-9_-]*, at most 100 bytes){}", shown(.origin), hint_suffix(.normalized, .running))]
    InvalidComposeProject {
        /// Where the value came from.
        origin: String,
        /// The value, quoted and escaped for display.
        value: String,
        /// The normalised spelling, when one exists.
        normalized: Option<String>,
        /// Running projects' labels (sanitised), as hints: at most
        /// `network::MAX_PROJECT_HINTS`, nearest the normalised spelling
        /// first, then `and N more` when cut (the resolver fills it).
        running: Vec<String>,
    },
    /// A volume entry violates SPEC §3.4.
    #[error("{}: volume {value} is refused: {reason}", shown(.origin))]
    InvalidVolume {
        /// Where the value came from.
        origin: String,
        /// The volume string, quoted and escaped for display.
        value: String,
        /// Why.
        reason: String,
    },
    /// Networks configured while the sandbox is off (SPEC §3.3).
    #[error("networks are configured ({what}) but the sandbox is off ({}); networks cannot be honoured on the host: remove them or turn the sandbox on", shown(.origin))]
    NetworksWithoutSandbox {
        /// What was configured.
        what: String,
        /// Where the sandbox was turned off.
        origin: String,
    },
    /// The working directory is unusable.
    #[error("{}", workdir_text(.path, .reason, .fix, Surface::Cli))]
    Workdir {
        /// The directory.
        path: PathBuf,
        /// Why, up to the fix (which follows it directly).
        reason: String,
        /// Another directory to use, when one is the fix.
        fix: Option<Fix>,
    },
}

impl ConfigError {
    /// The message with its advice in `surface`'s words (`Display` is
    /// [`Surface::Cli`]'s).
    pub fn render(&self, surface: Surface) -> String {
        match self {
            ConfigError::InvalidNetworkMode { origin, value } => {
                network_mode_text(origin, value, surface)
            }
            ConfigError::Workdir { path, reason, fix } => workdir_text(path, reason, fix, surface),
            // A model is not told other Compose projects on the daemon
            // (they may be other people's); the normalised spelling is
            // its own value's.
            ConfigError::InvalidComposeProject {
                origin,
                value,
                normalized,
                ..
            } if surface == Surface::Mcp => format!(
                "{}: Compose project name {value} is not valid (Compose project names match [a-z0-9][a-z0-9_-]*, at most 100 bytes){}; {}",
                shown(origin),
                normalized
                    .as_ref()
                    .map(|n| format!("; did you mean {n:?}?"))
                    .unwrap_or_default(),
                super::advice::MCP_PROJECTS_HINT
            ),
            other => other.to_string(),
        }
    }

    /// The error of a bad value for `key`: [`ConfigError::InvalidImage`]
    /// for `sandbox_image`, else [`ConfigError::InvalidValue`].
    pub(crate) fn invalid_value(origin: String, key: &str, reason: String) -> ConfigError {
        if key == super::names::sandbox_image {
            ConfigError::InvalidImage { origin, reason }
        } else {
            ConfigError::InvalidValue {
                origin,
                key: key.to_string(),
                reason,
            }
        }
    }
}

fn network_mode_text(origin: &str, value: &str, surface: Surface) -> String {
    format!(
        "{}: sandbox_network must be \"none\" or \"bridge\" (got {value}); to attach the sandbox to Docker networks use sandbox_networks ({}) or sandbox_compose_project ({}); ODEK_SANDBOX_NETWORK_LENIENT=1 downgrades an invalid value to \"none\"",
        shown(origin),
        surface.value(super::names::sandbox_networks),
        surface.value(super::names::sandbox_compose_project),
    )
}

fn workdir_text(
    path: &std::path::Path,
    reason: &str,
    fix: &Option<Fix>,
    surface: Surface,
) -> String {
    format!(
        "working directory {}: {reason}{}",
        shown(path),
        fix_text(fix, surface)
    )
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::quote;
    use std::path::Path;

    const HOSTILE: &str = "/tmp/attack/e\u{1b}]0;pwn\u{7}\u{1b}[2Jx";

    fn assert_no_raw(shown: &str) {
        assert!(
            !shown
                .chars()
                .any(|c| c.is_control() || matches!(c, '\u{200b}' | '\u{202e}' | '\u{feff}')),
            "raw control or invisible character in {shown:?}"
        );
    }

    #[test]
    fn paths_and_origins_are_shown_escaped_never_cut() {
        assert_eq!(
            shown("/home/dev/my app/odek.json"),
            "/home/dev/my app/odek.json"
        );
        assert_eq!(shown("/srv/été"), "/srv/été");
        assert_eq!(shown("flag --sandbox-memory"), "flag --sandbox-memory");
        assert_eq!(shown(""), "\"\"");
        for hostile in [
            HOSTILE,
            "a\nb",
            "a\u{202e}b",
            "a\u{200b}b",
            "\u{feff}a",
            "a\"b",
        ] {
            let s = shown(hostile);
            assert!(s.starts_with('"'), "{s}");
            assert_no_raw(&s);
        }
        let long = format!("/{}\u{1b}", "a".repeat(300));
        assert!(shown(&long).contains(&"a".repeat(300)), "never cut");
    }

    #[test]
    fn errors_naming_a_path_or_origin_are_terminal_safe() {
        let path = Path::new(HOSTILE).to_path_buf();
        let errors = [
            ConfigError::Workdir {
                path: path.clone(),
                reason: "holds a Unix socket; ".into(),
                fix: Some(Fix::RunFrom {
                    dir: "a project directory".into(),
                }),
            },
            ConfigError::Malformed {
                path: path.join("odek.json"),
                line: 1,
                column: 2,
                reason: "x".into(),
            },
            ConfigError::Unreadable {
                path: path.clone(),
                reason: "x".into(),
            },
            ConfigError::NotPrivate {
                what: "$ODEK_HOME".into(),
                path: path.clone(),
                reason: "x".into(),
            },
            ConfigError::InvalidValue {
                origin: format!("{HOSTILE}/odek.json"),
                key: "sandbox_pids_limit".into(),
                reason: "x".into(),
            },
            ConfigError::InvalidVolume {
                origin: format!("{HOSTILE}/odek.json"),
                value: quote("a:b"),
                reason: "x".into(),
            },
            ConfigError::NetworksWithoutSandbox {
                what: "x".into(),
                origin: HOSTILE.into(),
            },
        ];
        for e in errors {
            let msg = e.to_string();
            assert_no_raw(&msg);
            assert!(msg.contains("\\u{1b}]0;pwn\\u{7}"), "{msg}");
        }
    }
}
