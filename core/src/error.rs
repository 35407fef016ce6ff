//! The top-level error and the failure classes of SPEC §6.3.

use serde::{Deserialize, Serialize};

use crate::approval::ApprovalError;
use crate::config::ConfigError;
use crate::engine::{EndpointError, EngineError};
use crate::image::ImageError;
use crate::network::NetworkError;

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

/// Every error odek reports. Each maps to one [`FailureClass`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "error", rename_all = "snake_case")]
pub enum Error {
    /// Configuration (SPEC §3): class config.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Network resolution (SPEC §4): class config (or the engine's class).
    #[error(transparent)]
    Network(#[from] NetworkError),
    /// Image (SPEC §5): class config, image-unavailable or the engine's.
    #[error(transparent)]
    Image(#[from] ImageError),
    /// Approval (SPEC §7): class config.
    #[error(transparent)]
    Approval(#[from] ApprovalError),
    /// Narrowing a sub-agent's sandbox (SPEC §8): class config.
    #[error(transparent)]
    Narrow(#[from] crate::narrow::NarrowError),
    /// The daemon endpoint is malformed (config) or has no socket (unreachable).
    #[error(transparent)]
    Endpoint(#[from] EndpointError),
    /// The daemon does not answer (class daemon-unreachable).
    #[error("the Docker daemon at {endpoint} is unreachable during {step}: {message}; start Docker or point DOCKER_HOST at a running daemon")]
    Unreachable {
        /// Endpoint and every path tried.
        endpoint: String,
        /// The step that failed.
        step: Step,
        /// The transport's message.
        message: String,
    },
    /// The daemon answered with a refusal (class docker-rejected).
    #[error("Docker refused the sandbox at {step}: {message}{}", if *.removed { "; the container was removed" } else { "" })]
    Rejected {
        /// The step.
        step: Step,
        /// The daemon's (or the verification's) message.
        message: String,
        /// True when a created container was removed again.
        removed: bool,
    },
    /// A command in the sandbox could not be run or waited for.
    #[error("{message}")]
    Exec {
        /// What went wrong.
        message: String,
        /// The class (docker-rejected, or daemon-unreachable when the
        /// daemon went away).
        class: FailureClass,
        /// False when the command never started (nothing ran); true when it
        /// started and its status is unknown.
        started: bool,
    },
    /// The sandbox container stopped (killed, out of memory) while a command
    /// ran in it: the command may have partly run (docker-rejected).
    #[error("{message}")]
    SandboxStopped {
        /// What happened, naming the sandbox.
        message: String,
    },
    /// A handle or argument misuse by an embedding program (config).
    #[error("{0}")]
    Usage(String),
    /// The caller cancelled the call through its [`crate::CancellationToken`]
    /// ([`crate::cancel`]): what the call had made is removed, a command it
    /// ran is killed. Reported as class config — fatal, never a fallback;
    /// the C ABI gives it its own code and class (`cancelled`).
    #[error("{message}")]
    Cancelled {
        /// What was stopped and what is left (nothing, or why not).
        message: String,
    },
}

impl Error {
    /// The failure class of SPEC §6.3.
    pub fn class(&self) -> FailureClass {
        use crate::engine::EngineErrorKind as K;
        let engine_class = |e: &EngineError| match e.kind {
            K::Unreachable | K::Timeout => FailureClass::DaemonUnreachable,
            _ => FailureClass::DockerRejected,
        };
        match self {
            Error::Config(_)
            | Error::Approval(_)
            | Error::Narrow(_)
            | Error::Usage(_)
            | Error::Cancelled { .. } => FailureClass::Config,
            Error::Network(NetworkError::Engine(e)) => engine_class(e),
            Error::Network(_) => FailureClass::Config,
            Error::Image(ImageError::PullFailed { .. }) => FailureClass::ImageUnavailable,
            Error::Image(ImageError::Engine(e)) => engine_class(e),
            Error::Image(_) => FailureClass::Config,
            Error::Endpoint(EndpointError::NoSocket { .. }) => FailureClass::DaemonUnreachable,
            Error::Endpoint(_) => FailureClass::Config,
            Error::Unreachable { .. } => FailureClass::DaemonUnreachable,
            Error::Rejected { .. } | Error::SandboxStopped { .. } => FailureClass::DockerRejected,
            Error::Exec { class, .. } => *class,
        }
    }

    /// Maps an engine failure at `step` to [`Error::Unreachable`] or
    /// [`Error::Rejected`].
    pub fn engine(endpoint: &str, step: Step, e: EngineError, removed: bool) -> Error {
        if e.is_unreachable() {
            Error::Unreachable {
                endpoint: endpoint.to_string(),
                step,
                message: e.message,
            }
        } else {
            Error::Rejected {
                step,
                message: e.to_string(),
                removed,
            }
        }
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
