//! The top-level error; each maps to a failure class of SPEC §6.3.

use serde::{Deserialize, Serialize};

use crate::approval::ApprovalError;
use crate::config::ConfigError;
use crate::engine::{EndpointError, EngineError};
use crate::failure::{FailureClass, Step};
use crate::image::ImageError;
use crate::network::NetworkError;

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
    pub(crate) fn engine(endpoint: &str, step: Step, e: EngineError, removed: bool) -> Error {
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

/// A key that cannot be used refuses what needed it (class config), with the
/// key's own message.
impl From<crate::secret::SecretError> for crate::Error {
    fn from(e: crate::secret::SecretError) -> Self {
        crate::Error::Usage(e.to_string())
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
