//! The top-level error; each maps to a failure class of SPEC §6.3.
//!
//! What a caller (or the C ABI's codes) tells errors apart by is a variant or
//! a field, never the message's text: the text is rendered from the fields
//! when shown.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::approval::ApprovalError;
use crate::config::advice::{fix_text, Fix, Surface};
use crate::config::ConfigError;
use crate::engine::{EndpointError, EngineError, EngineErrorKind};
use crate::failure::{ErrorClass, FailureClass, Step};
use crate::image::ImageError;
use crate::network::NetworkError;
use crate::secret::SecretError;
use crate::text::{quote, shown};

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
    Narrow(#[from] NarrowError),
    /// The daemon endpoint is malformed (config) or has no socket (unreachable).
    #[error(transparent)]
    Endpoint(#[from] EndpointError),
    /// The daemon does not answer (class daemon-unreachable).
    #[error("{}", unreachable_text(.endpoint, *.step, .message, .removal, Surface::Cli))]
    Unreachable {
        /// Endpoint and every path tried.
        endpoint: String,
        /// The step that failed.
        step: Step,
        /// How the engine call failed: [`EngineErrorKind::Unreachable`] (no
        /// connection) or [`EngineErrorKind::Timeout`] (no answer in time).
        kind: EngineErrorKind,
        /// The transport's message.
        message: String,
        /// What became of a container the failed launch had made, or may
        /// have made; `None` when there was none to speak of.
        removal: Option<Removal>,
    },
    /// The daemon answered with a refusal (class docker-rejected).
    #[error("{}", rejected_text(*.step, .message, .fix, .removal, Surface::Cli))]
    Rejected {
        /// The step.
        step: Step,
        /// The daemon's (or the verification's) message, up to the fix.
        message: String,
        /// What to do, when the message names a fix (it follows the
        /// message directly).
        fix: Option<Fix>,
        /// What became of a container the failed launch had made; `None`
        /// when there was none to speak of.
        removal: Option<Removal>,
    },
    /// A command in the sandbox could not be run or waited for.
    #[error("{message}{}", fix_text(.fix, Surface::Cli))]
    Exec {
        /// What went wrong, up to the fix.
        message: String,
        /// What to do, when the message names a fix.
        fix: Option<Fix>,
        /// The class (docker-rejected, or daemon-unreachable when the
        /// daemon went away).
        class: FailureClass,
        /// False when the command never started (nothing ran); true when it
        /// started and its status is unknown.
        started: bool,
    },
    /// The sandbox container stopped (killed, out of memory) while a command
    /// ran in it: the command may have partly run (docker-rejected).
    #[error("{message}{}", fix_text(.fix, Surface::Cli))]
    SandboxStopped {
        /// What happened, naming the sandbox, up to the fix.
        message: String,
        /// What to do, when the message names a fix.
        fix: Option<Fix>,
    },
    /// No sandbox by the name asked for (config).
    #[error(transparent)]
    NotFound(#[from] NotFound),
    /// The container asked for is not a sandbox this user's odek made and
    /// can use (config).
    #[error(transparent)]
    NotASandbox(#[from] NotASandbox),
    /// A plan handed back to odek is not one it could have made (config):
    /// edited, or claiming a host run its own settings forbid.
    #[error("the plan is not valid: {reason}")]
    InvalidPlan {
        /// What is wrong with it.
        reason: String,
    },
    /// A caller-chosen sandbox name breaks the naming rule (config).
    #[error("{}", invalid_name_text(.name, Surface::Cli))]
    InvalidName {
        /// The name as given.
        name: String,
    },
    /// The launch key cannot be used (config).
    #[error(transparent)]
    Secret(#[from] SecretError),
    /// An exec request an embedding program got wrong (config): an empty
    /// argv, NUL bytes.
    #[error("{0}")]
    Usage(String),
    /// A file tool's operation (read, write, edit, list in the sandbox;
    /// `crate::files`) was refused: the path, the sandbox's file system
    /// or an edit that does not apply (config; nothing was written).
    #[error(transparent)]
    File(#[from] FileError),
    /// The caller cancelled the call through its [`crate::CancellationToken`]
    /// ([`crate::cancel`]): what the call had made is removed, a command it
    /// ran is killed. Reported as class config — fatal, never a fallback;
    /// the C ABI gives it its own code and class (`cancelled`).
    #[error("{message}{}", fix_text(.fix, Surface::Cli))]
    Cancelled {
        /// What was stopped and what is left (nothing, or why not), up to
        /// the fix.
        message: String,
        /// How to remove what is left, when something is.
        fix: Option<Fix>,
    },
}

/// A refused file operation ([`Error::File`]): what kind of refusal, the
/// path as the sandbox resolved it (absolute, inside the sandbox) and the
/// message shown, which names the cause and what to do.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[error("{message}")]
pub struct FileError {
    /// What was refused.
    pub kind: FileErrorKind,
    /// The path inside the sandbox (relative paths resolved against
    /// `/workspace`).
    pub path: String,
    /// The message, naming the path, the cause and the fix.
    pub message: String,
}

/// Why a file operation was refused ([`FileError::kind`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileErrorKind {
    /// The path (or a directory in it) does not exist (`ENOENT`).
    NotFound,
    /// A component of the path is not a directory (`ENOTDIR`).
    NotADirectory,
    /// A file was asked for and the path is a directory (`EISDIR`).
    IsADirectory,
    /// The path is neither a regular file nor a directory (a FIFO, a
    /// device, a socket).
    NotAFile,
    /// The command user may not do this (`EACCES`, `EPERM`).
    PermissionDenied,
    /// The file system is read-only (`EROFS`): a `sandbox_readonly`
    /// workspace or a read-only mount.
    ReadOnly,
    /// Over a size limit (the content, the file for an edit, or the file
    /// system's space).
    TooLarge,
    /// Text was asked for and the bytes are not UTF-8.
    NotUtf8,
    /// An edit's `oldText` is not in the file (or is empty).
    EditNotFound,
    /// An edit's `oldText` is in the file more than once.
    EditAmbiguous,
    /// The sandbox has no odek supervisor, or the command runs on the host:
    /// file tools need the supervisor to act as the command user.
    NoSupervisor,
    /// Anything else (the message says what).
    Other,
}

/// No sandbox by the name asked for.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum NotFound {
    /// The daemon knows no container by that name or ID.
    #[error("no sandbox named {}", quote(.name))]
    Unknown {
        /// The name (or ID) as given.
        name: String,
    },
    /// The daemon's inspect found nothing by that name or ID.
    #[error("no sandbox named {}{}", quote(.name), unlisted_hint(Surface::Cli))]
    Unlisted {
        /// The name (or ID) as given.
        name: String,
    },
    /// A sandbox odek had attached to is gone.
    #[error("sandbox {name} no longer exists")]
    Gone {
        /// The sandbox's name.
        name: String,
    },
}

impl NotFound {
    /// The message in `surface`'s words: only the CLI is pointed at
    /// `odek sandbox ls`.
    pub fn render(&self, surface: Surface) -> String {
        match self {
            NotFound::Unlisted { name } => {
                format!("no sandbox named {}{}", quote(name), unlisted_hint(surface))
            }
            other => other.to_string(),
        }
    }
}

fn unlisted_hint(surface: Surface) -> &'static str {
    match surface {
        Surface::Cli => "; see `odek sandbox ls`",
        Surface::Library | Surface::Mcp => "",
    }
}

fn invalid_name_text(name: &str, surface: Surface) -> String {
    let prefix = crate::labels::SANDBOX_NAME_PREFIX;
    let try_it = match surface {
        Surface::Cli => format!("try --name {prefix}<name>"),
        Surface::Library | Surface::Mcp => format!("try {prefix}<name>"),
    };
    format!(
        "sandbox name {} is refused: a name must start with \"{prefix}\" followed by letters, digits, '_', '.' or '-' (at most 64 bytes), because a sandbox is reachable by its name on the networks it joins and any other name could shadow a service such as \"postgres\"; {try_it}",
        shown(name)
    )
}

/// A container that is not a sandbox this user's odek can use.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum NotASandbox {
    /// It carries no `dev.odek.sandbox=true` label.
    #[error("container {} is not an odek sandbox (no {}=true label)", quote(.name), crate::labels::SANDBOX)]
    Unlabelled {
        /// The name as given.
        name: String,
    },
    /// Its labels carry no valid MAC under this user's launch key.
    #[error("container {} {why}: odek does not run commands in, describe, narrow or remove it; if it is yours after all, remove it with `docker rm -f {}`", quote(.name), shown(.container))]
    Unverified {
        /// The name as given.
        name: String,
        /// Why it is not trusted: the end of a sentence that starts with
        /// the name.
        why: String,
        /// The container's own name.
        container: String,
    },
    /// Its plan label is missing or does not parse.
    #[error("sandbox {} carries no readable {} label (made by another odek version?)", quote(.name), crate::labels::PLAN)]
    NoPlan {
        /// The name as given.
        name: String,
    },
}

/// What became of a container a failed launch had made (or may have made);
/// shown at the end of the error's message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Removal {
    /// It was removed.
    Removed,
    /// It may be left behind: its removal failed (`why`), or the daemon
    /// stopped answering before it could be tried (`why` is `None`).
    Left {
        /// The container's name.
        name: String,
        /// A detached launch (`odek sandbox up`): gc keeps it.
        detached: bool,
        /// Why its removal failed.
        why: Option<String>,
    },
    /// A container by the launch's name exists that this launch did not
    /// create: left alone.
    NotOurs {
        /// The container's name.
        name: String,
    },
    /// None appeared while the launch waited for a create still in flight.
    Absent {
        /// The container's name.
        name: String,
        /// A detached launch.
        detached: bool,
        /// How long it waited.
        waited: Duration,
    },
}

/// A removal's words on `surface`, with the `; ` that joins them to the
/// message.
fn removal_text(removal: &Option<Removal>, surface: Surface) -> String {
    removal
        .as_ref()
        .map(|r| r.render(surface))
        .unwrap_or_default()
}

fn unreachable_text(
    endpoint: &str,
    step: Step,
    message: &str,
    removal: &Option<Removal>,
    surface: Surface,
) -> String {
    // The way to a remote daemon (its host, port, ssh, TLS port) fails
    // more often than the daemon itself.
    let fix = if endpoint.starts_with("ssh://") {
        "check that the host and port are right and that `ssh` reaches that machine and runs `docker` there, or point DOCKER_HOST at a running daemon"
    } else if endpoint.starts_with("tcp://") {
        "check that the host and port are right and that the daemon listens there, or point DOCKER_HOST at a running daemon"
    } else {
        "start Docker or point DOCKER_HOST at a running daemon"
    };
    format!(
        "the Docker daemon at {endpoint} is unreachable during {step}: {message}{}; {fix}",
        removal_text(removal, surface)
    )
}

/// What Docker says when no address pool is left for a new network
/// (libnetwork's ipam error, Engine 20.10 to 27).
const ADDRESS_POOLS_USED_UP: &str = "non-overlapping IPv4 address pool";

fn rejected_text(
    step: Step,
    message: &str,
    fix: &Option<Fix>,
    removal: &Option<Removal>,
    surface: Surface,
) -> String {
    format!(
        "Docker refused the sandbox at {step}: {message}{}{}",
        fix_text(fix, surface),
        removal_text(removal, surface)
    )
}

impl Removal {
    /// The removal's words on `surface`, starting with `"; "`.
    pub fn render(&self, surface: Surface) -> String {
        let reap = |name: &String, detached: &bool| {
            Fix::Reap {
                name: name.clone(),
                detached: *detached,
            }
            .render(surface)
        };
        match self {
            Removal::Removed => "; the container was removed".to_string(),
            Removal::Left {
                name,
                detached,
                why: None,
            } => format!(
                "; container {name} may be left behind: {} once the daemon answers",
                reap(name, detached)
            ),
            Removal::Left {
                name,
                detached,
                why: Some(why),
            } => format!(
                "; container {name} may be left behind ({why}): {} once the daemon answers",
                reap(name, detached)
            ),
            Removal::NotOurs { name } => format!(
                "; a container named {name} exists, but this launch did not create it: it was left alone"
            ),
            Removal::Absent {
                name,
                detached,
                waited,
            } => format!(
                "; no container {name} appeared within {:.0} s (should the daemon still create it, {})",
                waited.as_secs_f64(),
                reap(name, detached)
            ),
        }
    }
}

/// The command line's words.
impl std::fmt::Display for Removal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render(Surface::Cli))
    }
}

impl Error {
    /// The message with its advice in `surface`'s words ([`crate::config::advice`]):
    /// `Display` is [`Surface::Cli`]'s; the C ABI and the bindings show
    /// [`Surface::Library`]'s, `odek mcp` [`Surface::Mcp`]'s.
    pub fn render(&self, surface: Surface) -> String {
        match self {
            Error::Config(e) => e.render(surface),
            Error::Image(e) => e.render(surface),
            Error::Unreachable {
                endpoint,
                step,
                message,
                removal,
                ..
            } => unreachable_text(endpoint, *step, message, removal, surface),
            Error::Rejected {
                step,
                message,
                fix,
                removal,
            } => rejected_text(*step, message, fix, removal, surface),
            Error::Exec { message, fix, .. }
            | Error::SandboxStopped { message, fix }
            | Error::Cancelled { message, fix } => {
                format!("{message}{}", fix_text(fix, surface))
            }
            Error::NotFound(e) => e.render(surface),
            Error::InvalidName { name } => invalid_name_text(name, surface),
            Error::Approval(e) => e.render(surface),
            Error::Network(e) => e.render(surface),
            // The rest carry no advice that differs by surface (a test
            // renders every variant on each surface and looks for flags).
            Error::Narrow(_)
            | Error::Endpoint(_)
            | Error::NotASandbox(_)
            | Error::InvalidPlan { .. }
            | Error::Secret(_)
            | Error::File(_)
            | Error::Usage(_) => self.to_string(),
        }
    }

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
            | Error::NotFound(_)
            | Error::NotASandbox(_)
            | Error::InvalidPlan { .. }
            | Error::InvalidName { .. }
            | Error::Secret(_)
            | Error::Usage(_)
            | Error::File(_)
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

    /// The class every surface reports this error with ([`ErrorClass`]):
    /// the CLI, `odek mcp` and the C ABI's `odek_error_class` all show
    /// this. A request the caller got wrong ([`Error::Usage`], not found,
    /// not a sandbox, an invalid plan or name, the launch key) is `usage`;
    /// a cancellation `cancelled`; everything else its [`Error::class`].
    pub fn reported_class(&self) -> ErrorClass {
        match self {
            Error::Usage(_)
            | Error::NotFound(_)
            | Error::NotASandbox(_)
            | Error::InvalidPlan { .. }
            | Error::InvalidName { .. }
            | Error::Secret(_) => ErrorClass::Usage,
            Error::Cancelled { .. } => ErrorClass::Cancelled,
            other => ErrorClass::Failure(other.class()),
        }
    }

    /// Maps an engine failure at `step` to [`Error::Unreachable`] (keeping
    /// the engine's kind) or [`Error::Rejected`], with no removal to speak of.
    pub(crate) fn engine(endpoint: &str, step: Step, e: EngineError) -> Error {
        if e.is_unreachable() {
            Error::Unreachable {
                endpoint: endpoint.to_string(),
                step,
                kind: e.kind,
                message: e.message,
                removal: None,
            }
        } else if e.message.contains(ADDRESS_POOLS_USED_UP) {
            Error::Rejected {
                step,
                message: format!("{e}; "),
                fix: Some(crate::config::advice::Fix::AddressPools),
                removal: None,
            }
        } else {
            Error::Rejected {
                step,
                message: e.to_string(),
                fix: None,
                removal: None,
            }
        }
    }

    /// What became of the container a failed launch made (or may have
    /// made), when the error says: `Some` only on [`Error::Unreachable`]
    /// and [`Error::Rejected`] after a create was tried. A front end that
    /// says "no container was left" says it only when this is `None` or
    /// [`Removal::Removed`].
    pub fn removal(&self) -> Option<&Removal> {
        match self {
            Error::Unreachable { removal, .. } | Error::Rejected { removal, .. } => {
                removal.as_ref()
            }
            _ => None,
        }
    }

    /// This error with what became of the launch's container: set on
    /// [`Error::Unreachable`] and [`Error::Rejected`], other errors as they are.
    pub(crate) fn with_removal(mut self, what: Removal) -> Error {
        if let Error::Unreachable { removal, .. } | Error::Rejected { removal, .. } = &mut self {
            *removal = Some(what);
        }
        self
    }
}

/// A request that parses but cannot be carried out is a usage error
/// ([`ErrorClass::Usage`]) on every surface.
impl From<RequestError> for Error {
    fn from(e: RequestError) -> Error {
        Error::Usage(e.0)
    }
}

/// Checks a request's optional `"schema"` tag: absent, or `<family>` + a
/// version (`"odek.exec-request/1"` for family `"odek.exec-request/"`).
/// Errors name the unknown tag and the expected one.
pub fn check_schema_tag(schema: Option<&str>, family: &str) -> Result<(), RequestError> {
    match schema {
        Some(s) if !s.starts_with(family) => Err(RequestError(format!(
            "unknown schema {s:?} (expected {family}1)"
        ))),
        _ => Ok(()),
    }
}

/// A request that parses but cannot be carried out as given: the C ABI's
/// `ODEK_E_INVALID_ARGUMENT`. The message names the member and what is
/// accepted. (Here, with the other errors; `api` re-exports it.)
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RequestError(pub String);

/// Why a child cannot have what it asked for. Class config. (Here, with the other errors; `narrow` re-exports it.)
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[error("a sub-agent sandbox can only narrow its parent's: {reason}")]
pub struct NarrowError {
    /// What would widen.
    pub reason: String,
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreachable_remote_daemon_names_the_way_to_it_not_starting_docker() {
        let text = |endpoint: &str| {
            unreachable_text(
                endpoint,
                Step::Ping,
                "Connection refused",
                &None,
                Surface::Cli,
            )
        };
        let ssh = text("ssh://me@127.0.0.1:1 (ssh, host key checked; from DOCKER_HOST)");
        assert!(ssh.contains("`ssh` reaches that machine"), "{ssh}");
        assert!(!ssh.contains("start Docker"), "{ssh}");
        let tcp = text("tcp://127.0.0.1:1 (plain TCP, not encrypted; from DOCKER_HOST)");
        assert!(tcp.contains("the daemon listens there"), "{tcp}");
        let unix = text("unix:///var/run/docker.sock");
        assert!(
            unix.ends_with("start Docker or point DOCKER_HOST at a running daemon"),
            "{unix}"
        );
    }

    #[test]
    fn used_up_address_pools_name_the_operators_fix_on_every_surface() {
        let e = Error::engine(
            "unix:///var/run/docker.sock",
            Step::Connect,
            crate::engine::EngineError::new(
                crate::engine::Op::CreateNetwork,
                crate::engine::EngineErrorKind::Rejected,
                "could not find an available, non-overlapping IPv4 address pool among the defaults to assign to the network",
            ),
        );
        for surface in [Surface::Cli, Surface::Library, Surface::Mcp] {
            let text = e.render(surface);
            assert!(
                text.contains("address pool among the defaults to assign to the network; Docker's default address pools are used up")
                    && text.contains("docker network prune")
                    && text.contains("default-address-pools"),
                "{surface:?}: {text}"
            );
            assert!(!text.contains("SPEC"), "{text}");
        }
        // Another refusal gets no such advice.
        let other = Error::engine(
            "unix:///var/run/docker.sock",
            Step::Connect,
            crate::engine::EngineError::new(
                crate::engine::Op::CreateNetwork,
                crate::engine::EngineErrorKind::Rejected,
                "network with name odek-1-link already exists",
            ),
        );
        assert!(!other.to_string().contains("address pools"), "{other}");
    }

    /// One error of each kind that carries advice, with every fix.
    fn advised() -> Vec<Error> {
        let fixes = crate::config::advice::every_fix();
        let mut out: Vec<Error> = vec![
            ConfigError::InvalidNetworkMode {
                origin: "odek.json".into(),
                value: "\"host\"".into(),
            }
            .into(),
            ImageError::PullFailed {
                reference: "x:1".into(),
                message: "m".into(),
            }
            .into(),
            ImageError::DockerfileUnusable {
                path: "/p/Dockerfile.odek".into(),
                reason: "is a directory".into(),
            }
            .into(),
            Error::InvalidName { name: "x".into() },
            NotFound::Unlisted { name: "x".into() }.into(),
            NotFound::Unknown { name: "x".into() }.into(),
            Error::Narrow(NarrowError { reason: "r".into() }),
            Error::Unreachable {
                endpoint: "unix:///x".into(),
                step: Step::Create,
                kind: EngineErrorKind::Timeout,
                message: "m".into(),
                removal: Some(Removal::Absent {
                    name: "odek-1".into(),
                    detached: true,
                    waited: std::time::Duration::from_secs(10),
                }),
            },
        ];
        for fix in fixes {
            let fix = Some(fix);
            out.push(
                ConfigError::Workdir {
                    path: "/w".into(),
                    reason: "r; ".into(),
                    fix: fix.clone(),
                }
                .into(),
            );
            out.push(Error::Rejected {
                step: Step::Start,
                message: "m; ".into(),
                fix: fix.clone(),
                removal: Some(Removal::Left {
                    name: "odek-1".into(),
                    detached: false,
                    why: None,
                }),
            });
            out.push(Error::Exec {
                message: "m; ".into(),
                fix: fix.clone(),
                class: FailureClass::DockerRejected,
                started: false,
            });
            out.push(Error::SandboxStopped {
                message: "m; ".into(),
                fix: fix.clone(),
            });
            out.push(Error::Cancelled {
                message: "m; ".into(),
                fix,
            });
        }
        out
    }

    /// MCP and the C ABI never show a command-line flag, `-C` or an
    /// `odek sandbox down`/`ls` command; the CLI's words are `Display`.
    #[test]
    fn only_the_cli_is_told_flags_and_commands() {
        for e in advised() {
            assert_eq!(e.render(Surface::Cli), e.to_string());
            for surface in [Surface::Library, Surface::Mcp] {
                let text = e.render(surface);
                for cli_only in ["--", "-C ", "odek sandbox down", "odek sandbox ls"] {
                    assert!(
                        !text.contains(cli_only),
                        "{surface:?} shows {cli_only:?}: {text}"
                    );
                }
            }
        }
    }

    /// A model is never told the daemon's other Compose projects (they may
    /// be other people's); the CLI and the library still name them.
    #[test]
    fn mcp_names_no_other_compose_project() {
        let not_running = Error::Network(NetworkError::ComposeNotRunning {
            project: "shop".into(),
            origin: "--sandbox-compose".into(),
            closest: Some("shopx".into()),
            running: vec!["shopx".into(), "payroll".into()],
        });
        let invalid = Error::Config(crate::config::ConfigError::InvalidComposeProject {
            origin: "odek.json".into(),
            value: "\"Shop\"".into(),
            normalized: Some("shop".into()),
            running: vec!["payroll".into()],
        });
        for e in [&not_running, &invalid] {
            let mcp = e.render(Surface::Mcp);
            assert!(!mcp.contains("payroll") && !mcp.contains("shopx"), "{mcp}");
            assert!(mcp.contains("docker compose ls"), "{mcp}");
            let cli = e.render(Surface::Library);
            assert!(cli.contains("payroll"), "{cli}");
        }
        // The model's own value, normalised, is still offered.
        assert!(invalid
            .render(Surface::Mcp)
            .contains("did you mean \"shop\""));
    }

    /// `usage` on every surface, a cancellation `cancelled`, the rest
    /// their SPEC §6.3 class.
    #[test]
    fn reported_classes() {
        assert_eq!(Error::Usage("x".into()).reported_class(), ErrorClass::Usage);
        assert_eq!(
            Error::from(RequestError("x".into())).reported_class(),
            ErrorClass::Usage
        );
        assert_eq!(
            Error::from(NotFound::Gone { name: "x".into() }).reported_class(),
            ErrorClass::Usage
        );
        assert_eq!(
            Error::Cancelled {
                message: "x".into(),
                fix: None
            }
            .reported_class(),
            ErrorClass::Cancelled
        );
        for e in advised() {
            match e.reported_class() {
                ErrorClass::Failure(c) => assert_eq!(c, e.class(), "{e:?}"),
                _ => assert!(
                    matches!(
                        e,
                        Error::InvalidName { .. } | Error::NotFound(_) | Error::Cancelled { .. }
                    ),
                    "{e:?}"
                ),
            }
        }
    }
}
