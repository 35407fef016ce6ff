//! The failure classes of SPEC §6.3 and the launch steps that messages name.
//! Depends on nothing else in the crate.

use serde::{Deserialize, Serialize};

/// The failure classes of SPEC §6.3.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum FailureClass {
    /// Misconfiguration: fatal in every mode.
    Config,
    /// The daemon answered but refused create/start/connect/verify: fatal.
    DockerRejected,
    /// The image cannot be pulled: loud fallback in implicit mode, else fatal.
    ImageUnavailable,
    /// No socket, connection refused, ping fails: loud fallback in implicit
    /// mode, else fatal.
    DaemonUnreachable,
}

impl FailureClass {
    /// The kebab-case name used in JSON and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureClass::Config => "config",
            FailureClass::DockerRejected => "docker-rejected",
            FailureClass::ImageUnavailable => "image-unavailable",
            FailureClass::DaemonUnreachable => "daemon-unreachable",
        }
    }

    /// True for the two classes that allow the loud fallback (SPEC §6.3).
    pub fn allows_fallback(self) -> bool {
        matches!(
            self,
            FailureClass::ImageUnavailable | FailureClass::DaemonUnreachable
        )
    }
}

impl std::fmt::Display for FailureClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The class a front end reports an error with — the CLI's `odek: error
/// (CLASS)`, MCP's `failure class CLASS`, the C ABI's `odek_error_class` —
/// decided once, by the core error's variant ([`crate::Error::reported_class`]):
/// SPEC §6.3's four classes ([`FailureClass`]), plus `usage` (a request the
/// caller got wrong: an empty argv, a bad name, no such sandbox; the C ABI's
/// 1xx codes) and `cancelled` (the caller cancelled the call).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// A request the caller got wrong (nothing was done).
    Usage,
    /// One of SPEC §6.3's classes.
    Failure(FailureClass),
    /// The caller cancelled the call.
    Cancelled,
}

impl ErrorClass {
    /// The kebab-case name every surface shows: `"usage"`, `"config"`,
    /// `"docker-rejected"`, `"image-unavailable"`, `"daemon-unreachable"`,
    /// `"cancelled"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Usage => "usage",
            ErrorClass::Failure(c) => c.as_str(),
            ErrorClass::Cancelled => "cancelled",
        }
    }
}

impl std::fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A launch step, for messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// Pinging the daemon.
    Ping,
    /// Re-checking approved network IDs (SPEC §7.4).
    Recheck,
    /// Inspecting / pulling / building the image.
    Image,
    /// Creating the container.
    Create,
    /// Starting it.
    Start,
    /// Connecting the remaining networks.
    Connect,
    /// Reading the container back and checking it.
    Verify,
    /// Running a command.
    Exec,
    /// Removing the container.
    Remove,
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Step::Ping => "ping",
            Step::Recheck => "network re-check",
            Step::Image => "image",
            Step::Create => "create",
            Step::Start => "start",
            Step::Connect => "connect",
            Step::Verify => "verify",
            Step::Exec => "exec",
            Step::Remove => "remove",
        })
    }
}
