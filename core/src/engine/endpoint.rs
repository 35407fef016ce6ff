//! Which daemon endpoint to talk to (SPEC §6.2).
//!
//! `DOCKER_HOST` when set (`unix://PATH` or `tcp://HOST[:PORT]`; anything else
//! is a config error, never silently another endpoint); else the current Docker
//! context when one other than `default` is selected; else the first socket
//! of `/var/run/docker.sock`, `$XDG_RUNTIME_DIR/docker.sock`,
//! `~/.docker/run/docker.sock`, then Podman's `/run/podman/podman.sock`
//! and `$XDG_RUNTIME_DIR/podman/podman.sock` that accepts a connection and passes the
//! ownership rule of [`super::socket_owner`] (the socket, and every directory
//! its path goes through, belong to the effective uid or root). Each path
//! passed over is kept with the reason (absent, not a socket, another user's,
//! permission denied, nothing listening), for verbose output and the "daemon
//! unreachable" error. A socket the operator names is used whoever owns it;
//! [`Endpoint::ownership`] says whose it is.
//!
//! A `tcp://` endpoint is secured with TLS as the Docker CLI does it
//! (SPEC §6.2.1): `DOCKER_TLS_VERIFY` with `DOCKER_CERT_PATH` for
//! `DOCKER_HOST`, a context's `tls/` material for a context; see
//! [`super::tls`]. Plain TCP to a host that is not loopback is used with a
//! loud [`WarningKind::PlainTcp`] warning ([`Endpoint::transport_warning`]).
//!
//! An `ssh://[user@]host[:port]` endpoint is reached as the Docker CLI
//! reaches it, through the system's `ssh` running `docker system
//! dial-stdio` there, with the host key always checked (SPEC §6.2.2); see
//! [`super::ssh`].

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::socket_owner::{self, SocketOwner};
use super::ssh::SshTarget;
use super::tls::{Tls, TlsOrigin};
use crate::warning::{Warning, WarningKind};

/// Where the endpoint came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EndpointSource {
    /// The `DOCKER_HOST` environment variable.
    DockerHost,
    /// A Docker CLI context (from `DOCKER_CONTEXT` or `config.json`).
    Context {
        /// Context name.
        name: String,
    },
    /// The first socket of the probe order that accepted a connection.
    Probe,
    /// Given explicitly by the embedding program (tests, bindings).
    Explicit,
}

/// A daemon address.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "transport", rename_all = "snake_case")]
pub enum Address {
    /// A Unix socket path.
    Unix {
        /// Socket path.
        path: PathBuf,
    },
    /// Plain TCP (`tcp://host:port`).
    Tcp {
        /// `host:port`.
        authority: String,
    },
    /// `ssh://[user@]host[:port]`: each connection is `ssh … -- host docker
    /// system dial-stdio` (SPEC §6.2.2).
    Ssh {
        /// Who and where, checked.
        target: SshTarget,
    },
}

impl fmt::Display for Address {
    /// `unix:///path` or `tcp://host:port`, as `DOCKER_HOST` would say it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Unix { path } => write!(f, "unix://{}", path.display()),
            Address::Tcp { authority } => write!(f, "tcp://{authority}"),
            Address::Ssh { target } => write!(f, "{target}"),
        }
    }
}

/// A socket path the probe passed over, and why (SPEC §6.2).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Probed {
    /// The path.
    pub path: PathBuf,
    /// Why it was not used: `absent`, `not a socket`, `permission denied
    /// (are you in the docker group?)`, `nothing listens (stale socket)`,
    /// `belongs to uid 1000 (alice), not to you (uid 0) or root, …` (or its
    /// directory does, or others can write that), or the system's error
    /// text.
    pub reason: String,
}

impl fmt::Display for Probed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", crate::text::shown(&self.path), self.reason)
    }
}

/// The daemon endpoint chosen, with every path that was tried on the way.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    /// The address.
    pub address: Address,
    /// Where it came from.
    pub source: EndpointSource,
    /// Socket paths probed and passed over before this one was chosen, in
    /// order, each with the reason (empty unless probing).
    pub tried: Vec<Probed>,
    /// The TLS material of a `tcp://` endpoint secured with TLS (SPEC
    /// §6.2.1); `None` for a Unix socket or plain TCP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<Tls>,
}

/// What an approval binds the engine by (SPEC §7.3): its own ID when
/// `/info` reports one (`engine:<ID>`), else its endpoint's address
/// (`endpoint:unix:///var/run/docker.sock`), which stands in for an
/// engine without an ID.
pub fn engine_binding(id: Option<&str>, endpoint: &str) -> String {
    match id.map(str::trim).filter(|i| !i.is_empty()) {
        Some(id) => format!("engine:{id}"),
        None => format!("endpoint:{endpoint}"),
    }
}

impl Endpoint {
    /// What an approval binds this engine by (SPEC §7.3): `engine:<id>`
    /// when the engine reported its ID, else `endpoint:<address>` — the
    /// address alone (`unix:///var/run/docker.sock`), not how it was
    /// chosen, so one socket named two ways is one engine.
    pub fn approval_binding(&self, id: Option<&str>) -> String {
        engine_binding(id, &self.address.to_string())
    }
}

impl fmt::Display for Endpoint {
    /// `unix:///path (from DOCKER_HOST)`, `tcp://host:2376 (tls, verified;
    /// from Docker context "x")`, `tcp://host:2375 (plain TCP, not
    /// encrypted)`, then any socket passed over.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.security() {
            Some(sec) => {
                let origin = self.origin();
                let origin = origin.trim_start_matches(" (").trim_end_matches(')');
                if origin.is_empty() {
                    write!(f, "{} ({sec})", self.address)?;
                } else {
                    write!(f, "{} ({sec}; {origin})", self.address)?;
                }
            }
            None => write!(f, "{}{}", self.address, self.origin())?,
        }
        if !self.tried.is_empty() {
            write!(f, " after passing over {}", display_probed(&self.tried))?;
        }
        Ok(())
    }
}

/// Why no endpoint could be chosen.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum EndpointError {
    /// `DOCKER_HOST` (or a context's host) is malformed or uses an
    /// unsupported scheme: a config error (SPEC §6.2).
    #[error("invalid Docker endpoint {value:?} from {origin}: {reason}; use unix:///path/to/docker.sock, tcp://host:port or ssh://[user@]host[:port]")]
    Invalid {
        /// The raw value.
        value: String,
        /// Where it was read.
        origin: String,
        /// What is wrong.
        reason: String,
    },
    /// A selected Docker context could not be read.
    #[error("docker context {name:?} cannot be used: {reason}; select another with `docker context use` or set DOCKER_HOST")]
    Context {
        /// Context name.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// The TLS settings of a `tcp://` endpoint cannot be honoured: a
    /// certificate file is absent, unreadable, another user's or writable
    /// by others, or holds no certificate or key; or TLS without verifying
    /// the daemon (`DOCKER_TLS` alone, a context's `SkipTLSVerify`) is
    /// asked, which odek refuses (SPEC §6.2.1). A config error: the reason
    /// names the file and the fix.
    #[error("cannot secure the Docker endpoint {endpoint} from {origin}: {reason}")]
    Tls {
        /// The endpoint (`tcp://host:port`).
        endpoint: String,
        /// Where it was read (`DOCKER_HOST`, `Docker context "x"`).
        origin: String,
        /// What is wrong, and the fix.
        reason: String,
    },
    /// An `ssh://` endpoint cannot be used because no `ssh` program is on
    /// `PATH` (SPEC §6.2.2): a config error naming the fix, before anything
    /// runs.
    #[error("cannot reach the Docker endpoint {endpoint} from {origin}: {reason}")]
    Ssh {
        /// The endpoint (`ssh://user@host:port`).
        endpoint: String,
        /// Where it was read (`DOCKER_HOST`, `Docker context "x"`).
        origin: String,
        /// What is wrong, and the fix.
        reason: String,
    },
    /// No probed socket accepts a connection: the daemon is unreachable.
    #[error("no reachable Docker socket (tried {}); start the Docker daemon, fix the socket's access, or set DOCKER_HOST", display_probed(.tried))]
    NoSocket {
        /// Every path probed, in order, with why it failed.
        tried: Vec<Probed>,
    },
}

fn display_probed(tried: &[Probed]) -> String {
    tried
        .iter()
        .map(Probed::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The process environment the endpoint rules read; a value so tests need not
/// touch the real environment.
#[derive(Clone, Debug, Default)]
pub struct EndpointEnv {
    /// `DOCKER_HOST`.
    pub docker_host: Option<String>,
    /// `DOCKER_CONTEXT`.
    pub docker_context: Option<String>,
    /// `DOCKER_CONFIG` (directory of `config.json`).
    pub docker_config: Option<PathBuf>,
    /// `XDG_RUNTIME_DIR`.
    pub xdg_runtime_dir: Option<PathBuf>,
    /// `HOME`.
    pub home: Option<PathBuf>,
    /// `DOCKER_TLS_VERIFY` is set and not empty: a `tcp://` `DOCKER_HOST`
    /// is reached over TLS, the daemon's certificate verified (SPEC §6.2.1).
    pub docker_tls_verify: bool,
    /// `DOCKER_TLS` is set and not empty (TLS without verification, which
    /// odek refuses unless `DOCKER_TLS_VERIFY` is set too).
    pub docker_tls: bool,
    /// `DOCKER_CERT_PATH` (directory of `ca.pem`, `cert.pem`, `key.pem`;
    /// default the Docker config directory).
    pub docker_cert_path: Option<PathBuf>,
    /// Variables among `DOCKER_HOST`, `DOCKER_CONTEXT` and `DOCKER_CONFIG`
    /// that are set but empty (and so count as unset), for [`EndpointEnv::notes`].
    pub set_but_empty: Vec<&'static str>,
}

impl EndpointEnv {
    /// Reads the variables from the process environment; empty values count
    /// as unset (as the Docker CLI does).
    pub fn from_process() -> EndpointEnv {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        EndpointEnv {
            docker_host: var("DOCKER_HOST"),
            docker_context: var("DOCKER_CONTEXT"),
            docker_config: var("DOCKER_CONFIG").map(PathBuf::from),
            // Relative values are ignored (the XDG spec says so; a socket
            // relative to the working directory would be a sandbox's).
            xdg_runtime_dir: var("XDG_RUNTIME_DIR")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute()),
            home: var("HOME").map(PathBuf::from).filter(|p| p.is_absolute()),
            docker_tls_verify: var("DOCKER_TLS_VERIFY").is_some(),
            docker_tls: var("DOCKER_TLS").is_some(),
            docker_cert_path: var("DOCKER_CERT_PATH").map(PathBuf::from),
            set_but_empty: ["DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_CONFIG"]
                .into_iter()
                .filter(|k| std::env::var_os(k).is_some_and(|v| v.is_empty()))
                .collect(),
        }
    }

    /// One line per endpoint variable that is set but empty, saying it is
    /// treated as unset (SPEC §6.2), e.g. `DOCKER_HOST is set but empty:
    /// treated as unset (as the Docker CLI does)`. For verbose output.
    pub fn notes(&self) -> Vec<String> {
        self.set_but_empty
            .iter()
            .map(|k| format!("{k} is set but empty: treated as unset (as the Docker CLI does)"))
            .collect()
    }
}

impl Endpoint {
    /// Chooses the endpoint by the rules of SPEC §6.2.
    ///
    /// Errors: [`EndpointError::Invalid`] / [`EndpointError::Context`] are
    /// config errors; [`EndpointError::NoSocket`] means daemon unreachable.
    pub fn resolve(env: &EndpointEnv) -> Result<Endpoint, EndpointError> {
        if let Some(host) = &env.docker_host {
            let address = parse_host(host, "DOCKER_HOST")?;
            ssh_program(&address, "DOCKER_HOST")?;
            let tls = env_tls(env, &address)?;
            return Ok(Endpoint {
                address,
                source: EndpointSource::DockerHost,
                tried: Vec::new(),
                tls,
            });
        }
        if let Some(ep) = context_endpoint(env)? {
            return Ok(ep);
        }
        probe_in_order(&probe_candidates(env))
    }

    /// An endpoint for a Unix socket given by the embedding program.
    pub fn unix(path: impl Into<PathBuf>) -> Endpoint {
        Endpoint {
            address: Address::Unix { path: path.into() },
            source: EndpointSource::Explicit,
            tried: Vec::new(),
            tls: None,
        }
    }

    /// An endpoint the embedding program names (`unix:///…` or
    /// `tcp://host:port`; `origin` names the setting in errors, e.g.
    /// `docker_host`). Used whoever owns the socket, as `DOCKER_HOST` is:
    /// [`Endpoint::ownership`] says whose it is.
    ///
    /// Errors: [`EndpointError::Invalid`] as [`parse_host`];
    /// [`EndpointError::Ssh`] for `ssh://` without an `ssh` program.
    pub fn named(value: &str, origin: &str) -> Result<Endpoint, EndpointError> {
        let address = parse_host(value, origin)?;
        ssh_program(&address, origin)?;
        Ok(Endpoint {
            address,
            source: EndpointSource::Explicit,
            tried: Vec::new(),
            tls: None,
        })
    }

    /// An endpoint the embedding program names with the TLS material for
    /// it (SPEC §6.2.1): `value` is `tcp://host:port`, reached over TLS
    /// with the daemon's certificate verified against `cert_dir/ca.pem` and
    /// `cert_dir/cert.pem` + `cert_dir/key.pem` as the client's identity,
    /// checked as `DOCKER_CERT_PATH` is (the files are yours, not writable
    /// by others). `origin` names the host setting and `cert_origin` the
    /// directory's (e.g. `docker_host`, `docker_cert_path`) in errors.
    ///
    /// Errors: [`EndpointError::Invalid`] as [`parse_host`];
    /// [`EndpointError::Tls`] when `value` is not `tcp://` (TLS material
    /// means nothing for a Unix socket or ssh), `cert_dir` is not absolute
    /// (it would be the current directory's, often a checkout's), or a file
    /// fails its check.
    pub fn named_tls(
        value: &str,
        origin: &str,
        cert_dir: &Path,
        cert_origin: &str,
    ) -> Result<Endpoint, EndpointError> {
        let address = parse_host(value, origin)?;
        let refuse = |reason: String| EndpointError::Tls {
            endpoint: address.to_string(),
            origin: cert_origin.to_string(),
            reason,
        };
        if !matches!(address, Address::Tcp { .. }) {
            return Err(refuse(format!(
                "{cert_origin} is TLS material for a tcp:// {origin}; a Unix socket or an ssh:// engine takes none: remove {cert_origin} or name the daemon's tcp://host:port"
            )));
        }
        if !cert_dir.is_absolute() {
            return Err(refuse(format!(
                "{cert_origin} {} is not an absolute path: it would be read from the current directory (often a checkout whose files choose the daemon odek trusts); give the absolute path of the directory of ca.pem, cert.pem and key.pem",
                crate::text::shown(cert_dir)
            )));
        }
        let tls = Tls::load(
            cert_dir,
            TlsOrigin::Named {
                option: cert_origin,
            },
        )
        .map_err(&refuse)?;
        Ok(Endpoint {
            address,
            source: EndpointSource::Explicit,
            tried: Vec::new(),
            tls: Some(tls),
        })
    }

    /// Where the endpoint came from, as a phrase after its address: ` (from
    /// DOCKER_HOST)`, ` (from Docker context "x")`, ` (first reachable
    /// default socket)`, or nothing for one the embedding program gave.
    fn origin(&self) -> String {
        match &self.source {
            EndpointSource::DockerHost => " (from DOCKER_HOST)".into(),
            EndpointSource::Context { name } => format!(" (from Docker context {name:?})"),
            EndpointSource::Probe => " (first reachable default socket)".into(),
            EndpointSource::Explicit => String::new(),
        }
    }

    /// Whose socket this is, read now (SPEC §6.2): the owner of the socket
    /// a Unix endpoint reaches (`None` for TCP, or when it cannot be read),
    /// and a [`WarningKind::DockerSocketNotYours`] warning when the socket,
    /// or a directory its path goes through, belongs to another user than
    /// the effective uid or root, or group or others can write such a
    /// directory — e.g. `the Docker socket unix:///run/user/1000/docker.sock
    /// (from DOCKER_HOST) belongs to uid 1000 (alice), not you: that user's
    /// daemon receives this sandbox and its environment`. A probed socket
    /// passed the same rule when it was chosen, so it warns only if it was
    /// changed since.
    pub fn ownership(&self) -> (Option<SocketOwner>, Option<Warning>) {
        let Address::Unix { path } = &self.address else {
            return (None, None);
        };
        match socket_owner::check_socket(path) {
            Ok(owner) => (Some(owner), None),
            Err(why) => {
                let what = format!("the Docker socket {}{}", self.address, self.origin());
                let warning = why
                    .named_warning(&crate::text::shown(&what))
                    .map(|m| Warning::new(WarningKind::DockerSocketNotYours, m));
                (socket_owner::owner_of(path), warning)
            }
        }
    }
}

/// The sockets probed when neither `DOCKER_HOST` nor a context names the
/// engine, in order (SPEC §6.2): Docker's (`/var/run/docker.sock`,
/// `$XDG_RUNTIME_DIR/docker.sock`, `~/.docker/run/docker.sock`), then
/// Podman's Docker-compatible API service, rootful
/// (`/run/podman/podman.sock`) then rootless
/// (`$XDG_RUNTIME_DIR/podman/podman.sock`). Every one passes the same
/// ownership rule before it is connected to.
pub fn probe_candidates(env: &EndpointEnv) -> Vec<PathBuf> {
    let mut candidates = vec![PathBuf::from("/var/run/docker.sock")];
    if let Some(x) = &env.xdg_runtime_dir {
        candidates.push(x.join("docker.sock"));
    }
    if let Some(h) = &env.home {
        candidates.push(h.join(".docker/run/docker.sock"));
    }
    candidates.push(PathBuf::from("/run/podman/podman.sock"));
    if let Some(x) = &env.xdg_runtime_dir {
        candidates.push(x.join("podman/podman.sock"));
    }
    candidates
}

/// The first of `candidates` that accepts a connection (SPEC §6.2), with
/// the ones passed over before it; [`EndpointError::NoSocket`] with every
/// candidate and its reason when none does.
fn probe_in_order(candidates: &[PathBuf]) -> Result<Endpoint, EndpointError> {
    let mut tried = Vec::new();
    for p in candidates {
        match probe(p) {
            Ok(()) => {
                return Ok(Endpoint {
                    address: Address::Unix { path: p.clone() },
                    source: EndpointSource::Probe,
                    tried,
                    tls: None,
                })
            }
            Err(reason) => tried.push(Probed {
                path: p.clone(),
                reason,
            }),
        }
    }
    Err(EndpointError::NoSocket { tried })
}

/// Checks the socket at `path` against the ownership rule
/// ([`socket_owner::check_socket`]), then connects to it and hangs up: `Ok`
/// when it is ours or root's and something accepts, else why not. Nothing
/// connects to a socket of another user. A local connect answers at once,
/// so it blocks no longer than a `stat`.
fn probe(path: &Path) -> Result<(), String> {
    use std::io::ErrorKind;
    use std::os::unix::fs::FileTypeExt;
    let denied = || "permission denied (are you in the docker group?)".to_string();
    match std::fs::metadata(path) {
        Ok(m) if m.file_type().is_socket() => {}
        Ok(_) => return Err("not a socket".into()),
        Err(e) if e.kind() == ErrorKind::NotFound => return Err("absent".into()),
        Err(e) if e.kind() == ErrorKind::PermissionDenied => return Err(denied()),
        Err(e) => return Err(format!("cannot be inspected ({e})")),
    }
    socket_owner::check_socket(path).map_err(|why| {
        why.passed_over(&crate::text::shown(format!("unix://{}", path.display())))
    })?;
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == ErrorKind::PermissionDenied => Err(denied()),
        Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
            Err("nothing listens (stale socket)".into())
        }
        Err(e) => Err(format!("cannot connect ({e})")),
    }
}

/// [`EndpointError::Ssh`] when `address` is `ssh://` and no `ssh` program
/// is on `PATH` (SPEC §6.2.2).
fn ssh_program(address: &Address, origin: &str) -> Result<(), EndpointError> {
    if let Address::Ssh { .. } = address {
        super::ssh::find_program().map_err(|reason| EndpointError::Ssh {
            endpoint: address.to_string(),
            origin: origin.to_string(),
            reason,
        })?;
    }
    Ok(())
}

/// Parses a Docker host string (`unix://PATH`, `tcp://HOST[:PORT]`,
/// `ssh://[user@]host[:port]`, SPEC §6.2.2: [`SshTarget::parse`]).
pub fn parse_host(value: &str, origin: &str) -> Result<Address, EndpointError> {
    let invalid = |reason: &str| EndpointError::Invalid {
        value: value.to_string(),
        origin: origin.to_string(),
        reason: reason.to_string(),
    };
    if value.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(invalid("it contains whitespace or control characters"));
    }
    let Some((scheme, rest)) = value.split_once("://") else {
        return Err(invalid("it has no scheme"));
    };
    match scheme {
        "unix" => {
            if rest.is_empty() {
                return Err(invalid("the socket path is empty"));
            }
            if !rest.starts_with('/') {
                return Err(invalid("the socket path is not absolute"));
            }
            Ok(Address::Unix {
                path: PathBuf::from(rest),
            })
        }
        "tcp" => {
            let authority = rest.trim_end_matches('/');
            if authority.is_empty() || authority.contains('/') || authority.contains('@') {
                return Err(invalid("expected tcp://host:port"));
            }
            let (host, port) = match authority.rsplit_once(':') {
                Some((h, p)) if !h.contains(':') || (h.starts_with('[') && h.ends_with(']')) => {
                    (h, Some(p))
                }
                Some(_) => return Err(invalid("an IPv6 host must be written in brackets")),
                None => (authority, None),
            };
            if host.is_empty() {
                return Err(invalid("the host is empty"));
            }
            let port = match port {
                None => 2375,
                Some(p) => p
                    .parse::<u16>()
                    .ok()
                    .filter(|p| *p != 0)
                    .ok_or_else(|| invalid("the port is not a number between 1 and 65535"))?,
            };
            Ok(Address::Tcp {
                authority: format!("{host}:{port}"),
            })
        }
        "ssh" => Ok(Address::Ssh {
            target: SshTarget::parse(rest).map_err(|why| invalid(&why))?,
        }),
        other => Err(invalid(&format!(
            "the scheme {other:?} is not supported (only unix://, tcp:// and ssh://)"
        ))),
    }
}

/// The endpoint of the selected Docker context, if one other than `default`
/// is selected (`DOCKER_CONTEXT`, else `currentContext` in `config.json`).
fn context_endpoint(env: &EndpointEnv) -> Result<Option<Endpoint>, EndpointError> {
    let config_dir = env
        .docker_config
        .clone()
        .or_else(|| env.home.as_ref().map(|h| h.join(".docker")));
    let name = match &env.docker_context {
        Some(n) => Some(n.clone()),
        None => {
            // `currentContext` chooses the engine: config.json is held to
            // the ownership rule (SPEC §7.3) when it exists.
            let bytes = match config_dir.as_ref().map(|d| d.join("config.json")) {
                Some(f) if std::fs::symlink_metadata(&f).is_ok() => Some(
                    super::tls::read_checked(&f).map_err(|why| EndpointError::Context {
                        name: "currentContext".into(),
                        reason: format!("{} {why}", crate::text::shown(&f)),
                    })?,
                ),
                _ => None,
            };
            bytes
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                .and_then(|v| v.get("currentContext")?.as_str().map(str::to_string))
                .filter(|n| !n.is_empty())
        }
    };
    let Some(name) = name else { return Ok(None) };
    if name == "default" {
        return Ok(None);
    }
    let ctx_err = |reason: String| EndpointError::Context {
        name: name.clone(),
        reason,
    };
    let dir =
        config_dir.ok_or_else(|| ctx_err("no Docker config directory (HOME unset)".into()))?;
    let meta = dir
        .join("contexts/meta")
        .join(hex::encode(Sha256::digest(name.as_bytes())))
        .join("meta.json");
    if std::fs::symlink_metadata(&meta).is_err() {
        return Err(ctx_err(format!(
            "there is no context of that name ({} does not exist): `docker context ls` lists them; unset DOCKER_CONTEXT or `docker context use default` for the local engine",
            meta.display()
        )));
    }
    // The context chooses the engine: its directory and meta.json are held
    // to the ownership rule (SPEC §7.3), as its TLS material is.
    if let Some(parent) = meta.parent() {
        super::tls::check_dir(parent)
            .map_err(|why| ctx_err(format!("{} {why}", crate::text::shown(parent))))?;
    }
    let bytes = super::tls::read_checked(&meta)
        .map_err(|why| ctx_err(format!("{} {why}", crate::text::shown(&meta))))?;
    let v: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| ctx_err(format!("{}: {e}", meta.display())))?;
    let host = v
        .pointer("/Endpoints/docker/Host")
        .and_then(|h| h.as_str())
        .ok_or_else(|| ctx_err(format!("{} has no Endpoints.docker.Host", meta.display())))?;
    let origin = format!("Docker context {name:?}");
    let address = parse_host(host, &origin)?;
    ssh_program(&address, &origin)?;
    let tls = match &address {
        Address::Unix { .. } | Address::Ssh { .. } => None,
        Address::Tcp { .. } => {
            let refuse = |reason: String| EndpointError::Tls {
                endpoint: address.to_string(),
                origin: origin.clone(),
                reason,
            };
            let skip = v
                .pointer("/Endpoints/docker/SkipTLSVerify")
                .and_then(|s| s.as_bool())
                .unwrap_or(false);
            if skip {
                return Err(refuse(format!(
                    "its SkipTLSVerify is true, and odek never talks to a daemon whose certificate it cannot verify; give the context the daemon's CA with `docker context update {n} --docker \"host={address},ca=CA.pem,cert=CERT.pem,key=KEY.pem,skip-tls-verify=false\"`",
                    n = crate::text::shown(&name)
                )));
            }
            let tls_dir = dir
                .join("contexts/tls")
                .join(hex::encode(Sha256::digest(name.as_bytes())))
                .join("docker");
            match std::fs::symlink_metadata(&tls_dir) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                _ => Some(Tls::load(&tls_dir, TlsOrigin::Context { name: &name }).map_err(refuse)?),
            }
        }
    };
    Ok(Some(Endpoint {
        address,
        source: EndpointSource::Context { name },
        tried: Vec::new(),
        tls,
    }))
}

/// The TLS material `DOCKER_TLS_VERIFY` asks for a `tcp://` `DOCKER_HOST`
/// (SPEC §6.2.1): `ca.pem`, `cert.pem`, `key.pem` in `DOCKER_CERT_PATH`,
/// else in the Docker config directory (`DOCKER_CONFIG`, `~/.docker`). The
/// variables mean nothing for a Unix socket, as in the Docker CLI.
///
/// Errors: [`EndpointError::Tls`] when a file fails [`Tls::load`], or when
/// `DOCKER_TLS` asks for TLS without `DOCKER_TLS_VERIFY` (unverified TLS is
/// refused, never downgraded to plain TCP).
fn env_tls(env: &EndpointEnv, address: &Address) -> Result<Option<Tls>, EndpointError> {
    if !matches!(address, Address::Tcp { .. }) || !(env.docker_tls_verify || env.docker_tls) {
        return Ok(None);
    }
    let refuse = |reason: String| EndpointError::Tls {
        endpoint: address.to_string(),
        origin: "DOCKER_HOST".into(),
        reason,
    };
    if !env.docker_tls_verify {
        return Err(refuse(
            "DOCKER_TLS asks for TLS without verifying the daemon's certificate, which odek refuses; set DOCKER_TLS_VERIFY=1 with the daemon's CA in DOCKER_CERT_PATH/ca.pem (and your cert.pem, key.pem)".into(),
        ));
    }
    let dir = env
        .docker_cert_path
        .clone()
        .or_else(|| env.docker_config.clone())
        .or_else(|| env.home.as_ref().map(|h| h.join(".docker")))
        .ok_or_else(|| {
            refuse("DOCKER_TLS_VERIFY is set but neither DOCKER_CERT_PATH nor HOME is; set DOCKER_CERT_PATH to the directory of ca.pem, cert.pem and key.pem".into())
        })?;
    let origin = TlsOrigin::Env {
        cert_path_set: env.docker_cert_path.is_some(),
    };
    Tls::load(&dir, origin).map(Some).map_err(refuse)
}

impl Endpoint {
    /// How a TCP or ssh endpoint is secured, for the startup line, `config
    /// view` and messages (SPEC §6.2.1, §6.2.2): `tls, verified`, `plain
    /// TCP, not encrypted` or `ssh, host key checked`; `None` for a Unix
    /// socket.
    pub fn security(&self) -> Option<&'static str> {
        match (&self.address, &self.tls) {
            (Address::Unix { .. }, _) => None,
            (Address::Ssh { .. }, _) => Some("ssh, host key checked"),
            (Address::Tcp { .. }, Some(_)) => Some("tls, verified"),
            (Address::Tcp { .. }, None) => Some("plain TCP, not encrypted"),
        }
    }

    /// The loud [`WarningKind::PlainTcp`] warning for plain TCP to a host
    /// that is not loopback (SPEC §6.2.1): anyone on the path reads the
    /// sandbox's environment and can drive the daemon, which is root on its
    /// machine. `None` for TLS, a Unix socket or loopback.
    pub fn transport_warning(&self) -> Option<Warning> {
        if self.tls.is_some() || self.is_local() {
            return None;
        }
        let Address::Tcp { .. } = &self.address else {
            return None;
        };
        Some(Warning::new(
            WarningKind::PlainTcp,
            format!(
                "PLAIN TCP to a remote Docker daemon: {} is neither TLS nor loopback, so anyone on the network between can read the sandbox, its environment and its files, and can command the daemon (root on that machine); use TLS (DOCKER_TLS_VERIFY=1 with DOCKER_CERT_PATH, or a Docker context with ca, cert and key)",
                crate::text::shown(self.to_string())
            ),
        ))
    }

    /// The refusal of a bind-mounted workspace on an engine on another
    /// machine ([`Endpoint::is_local`] false: TCP or ssh to a host that is
    /// not loopback; SPEC §6.1 "workspace", §6.2.2): the bind mount would
    /// name `workdir` on THAT machine, so the sandbox would see whatever is
    /// there (or an empty directory the daemon makes), not the operator's
    /// files, and nothing it wrote would come back. `None` for a local
    /// engine or a copied workspace. The fixes: run odek on the engine's
    /// machine, or `sandbox_workspace` `copy`.
    pub fn remote_bind_refusal(
        &self,
        workspace: &crate::config::Sourced<crate::config::WorkspaceMode>,
        workdir: &Path,
    ) -> Option<crate::config::ConfigError> {
        if self.is_local() || workspace.value != crate::config::WorkspaceMode::Bind {
            return None;
        }
        let origin = match &workspace.source {
            crate::config::Source::Default => "the default".to_string(),
            other => other.to_string(),
        };
        Some(crate::config::ConfigError::InvalidValue {
            origin,
            key: crate::config::names::sandbox_workspace.into(),
            reason: format!(
                "is \"bind\", but the engine at {} runs on another machine: a bind mount of {} would name a path on THAT machine, not your files, and nothing the sandbox wrote would come back here, so nothing was created; run odek on the engine's machine, or copy the working directory in and back with --sandbox-workspace copy (ODEK_SANDBOX_WORKSPACE=copy or \"sandbox_workspace\": \"copy\" in the user config)",
                crate::text::shown(self.to_string()),
                crate::text::shown(workdir)
            ),
        })
    }

    /// The refusal of `sandbox_volumes` on an engine on another machine
    /// ([`Endpoint::is_local`] false; SPEC §6.1 "volumes", §6.2.2): each
    /// entry bind-mounts a host path inside the working directory, which on
    /// that machine is not the operator's (and a copied workspace copies
    /// only `/workspace`). `None` for a local engine or no volumes. `origin`
    /// names the source of the setting; the first entry is quoted.
    pub fn remote_volumes_refusal(
        &self,
        volumes: &[crate::config::VolumeMount],
        origin: &crate::config::Source,
    ) -> Option<crate::config::ConfigError> {
        let first = volumes.first()?;
        if self.is_local() {
            return None;
        }
        Some(crate::config::ConfigError::InvalidValue {
            origin: origin.to_string(),
            key: crate::config::names::sandbox_volumes.into(),
            reason: format!(
                "mounts {} (and {} entr{} in all), but the engine at {} runs on another machine: a bind mount names a path on THAT machine, not your files, so nothing was created; remove sandbox_volumes for this engine, or run odek on the engine's machine",
                crate::text::quote(&first.spec),
                volumes.len(),
                if volumes.len() == 1 { "y" } else { "ies" },
                crate::text::shown(self.to_string()),
            ),
        })
    }

    /// True when the engine runs on this machine: a Unix socket, or TCP or
    /// ssh to a loopback address (`localhost`, `127.0.0.0/8`, `::1`). Only
    /// then do the operator's uid and paths mean the same to the engine as
    /// to odek (SPEC §6.1 "user", §6.2.2).
    pub fn is_local(&self) -> bool {
        match &self.address {
            Address::Unix { .. } => true,
            Address::Ssh { target } => target.is_loopback(),
            Address::Tcp { authority } => {
                let host = match authority.rsplit_once(':') {
                    Some((h, _)) => h,
                    None => authority.as_str(),
                };
                let host = host.trim_start_matches('[').trim_end_matches(']');
                host.eq_ignore_ascii_case("localhost")
                    || host
                        .parse::<std::net::IpAddr>()
                        .is_ok_and(|ip| ip.is_loopback())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_with_host(h: &str) -> EndpointEnv {
        EndpointEnv {
            docker_host: Some(h.into()),
            ..Default::default()
        }
    }

    #[test]
    fn docker_host_unix_and_tcp() {
        let ep = Endpoint::resolve(&env_with_host("unix:///run/x.sock")).expect("valid");
        assert_eq!(
            ep.address,
            Address::Unix {
                path: "/run/x.sock".into()
            }
        );
        assert_eq!(ep.source, EndpointSource::DockerHost);
        let ep = Endpoint::resolve(&env_with_host("tcp://10.0.0.1:2376")).expect("valid");
        assert_eq!(
            ep.address,
            Address::Tcp {
                authority: "10.0.0.1:2376".into()
            }
        );
        let ep = Endpoint::resolve(&env_with_host("tcp://dockerd")).expect("valid");
        assert_eq!(
            ep.address,
            Address::Tcp {
                authority: "dockerd:2375".into()
            }
        );
        let ep = Endpoint::resolve(&env_with_host("tcp://[::1]:2375")).expect("valid");
        assert_eq!(
            ep.address,
            Address::Tcp {
                authority: "[::1]:2375".into()
            }
        );
    }

    #[test]
    fn docker_host_invalid_is_config_error_not_another_endpoint() {
        for bad in [
            "/var/run/docker.sock",
            "unix://",
            "unix://relative.sock",
            "ssh://-oProxyCommand=sh",
            "ssh://me@-oProxyCommand=sh",
            "ssh://me@host:22%20-oX",
            "ssh://me:secret@host",
            "ssh://me@host/var/run/docker.sock",
            "ssh://",
            "npipe:////./pipe/docker_engine",
            "http://localhost:2375",
            "tcp://",
            "tcp://host:notaport",
            "tcp://host:0",
            "tcp://::1:2375",
            "unix:///a b",
        ] {
            let err = Endpoint::resolve(&env_with_host(bad)).expect_err(bad);
            assert!(
                matches!(err, EndpointError::Invalid { .. }),
                "{bad}: {err:?}"
            );
            assert!(err.to_string().contains("DOCKER_HOST"), "{err}");
        }
    }

    #[test]
    fn docker_host_ssh_is_an_ssh_endpoint_with_the_host_key_checked() {
        if super::super::ssh::find_program().is_err() {
            // Covered by missing_ssh_is_a_config_error below.
            return;
        }
        let ep = Endpoint::resolve(&env_with_host("ssh://odek@10.0.0.5:2222")).expect("valid");
        assert_eq!(
            ep.address,
            Address::Ssh {
                target: SshTarget {
                    user: Some("odek".into()),
                    host: "10.0.0.5".into(),
                    port: Some(2222),
                }
            }
        );
        assert_eq!(ep.tls, None);
        assert_eq!(
            ep.to_string(),
            "ssh://odek@10.0.0.5:2222 (ssh, host key checked; from DOCKER_HOST)"
        );
        assert_eq!(ep.security(), Some("ssh, host key checked"));
        // Encrypted and authenticated: no plain-TCP warning, even remote.
        assert_eq!(ep.transport_warning(), None);
        assert!(!ep.is_local());
        let bind = crate::config::Sourced::new(
            crate::config::WorkspaceMode::Bind,
            crate::config::Source::Default,
        );
        let copy = crate::config::Sourced::new(
            crate::config::WorkspaceMode::Copy,
            crate::config::Source::Flag {
                flag: "--sandbox-workspace".into(),
            },
        );
        let e = ep
            .remote_bind_refusal(&bind, Path::new("/home/me/proj"))
            .expect("a remote engine refuses the bind-mounted workspace")
            .to_string();
        assert_eq!(
            e,
            "the default: sandbox_workspace is \"bind\", but the engine at ssh://odek@10.0.0.5:2222 (ssh, host key checked; from DOCKER_HOST) runs on another machine: a bind mount of /home/me/proj would name a path on THAT machine, not your files, and nothing the sandbox wrote would come back here, so nothing was created; run odek on the engine's machine, or copy the working directory in and back with --sandbox-workspace copy (ODEK_SANDBOX_WORKSPACE=copy or \"sandbox_workspace\": \"copy\" in the user config)"
        );
        // The copied workspace is the fix.
        assert!(ep
            .remote_bind_refusal(&copy, Path::new("/home/me/proj"))
            .is_none());
        // DOCKER_TLS_VERIFY means nothing for ssh, as in the Docker CLI.
        let mut env = env_with_host("ssh://h");
        env.docker_tls_verify = true;
        env.docker_cert_path = Some("/nowhere".into());
        assert_eq!(Endpoint::resolve(&env).expect("ssh").tls, None);
        // Loopback: the daemon is on this machine.
        let ep = Endpoint::resolve(&env_with_host("ssh://127.0.0.1:2222")).expect("valid");
        assert!(ep.is_local());
        assert!(ep.remote_bind_refusal(&bind, Path::new("/p")).is_none());
        // Plain TCP to a remote host refuses the bind mount too.
        let tcp = Endpoint::resolve(&env_with_host("tcp://10.0.0.5:2375")).expect("valid");
        assert!(tcp.remote_bind_refusal(&bind, Path::new("/p")).is_some());
        // sandbox_volumes name host paths: refused on a remote engine,
        // whatever the workspace mode; fine on loopback or with none.
        let vols = vec![crate::config::VolumeMount {
            spec: "./data:/data:ro".into(),
            host: "/home/me/proj/data".into(),
            container: "/data".into(),
            read_only: true,
        }];
        let project = crate::config::Source::Project {
            path: "/home/me/proj/odek.json".into(),
        };
        let e = tcp
            .remote_volumes_refusal(&vols, &project)
            .expect("a remote engine refuses sandbox_volumes")
            .to_string();
        assert!(
            e.starts_with("project config /home/me/proj/odek.json: sandbox_volumes mounts \"./data:/data:ro\" (and 1 entry in all), but the engine at tcp://10.0.0.5:2375")
                && e.contains("remove sandbox_volumes for this engine"),
            "{e}"
        );
        assert!(tcp.remote_volumes_refusal(&[], &project).is_none());
        assert!(ep.remote_volumes_refusal(&vols, &project).is_none());
        // A context whose docker host is ssh://, with SkipTLSVerify
        // meaningless for it.
        let d = tempfile::tempdir().expect("tempdir");
        let cfg = d.path().join("docker");
        context(
            &cfg,
            "box",
            r#"{"Name":"box","Endpoints":{"docker":{"Host":"ssh://odek@box.example","SkipTLSVerify":false}}}"#,
            false,
        );
        let env = EndpointEnv {
            docker_config: Some(cfg.clone()),
            docker_context: Some("box".into()),
            ..Default::default()
        };
        let ep = Endpoint::resolve(&env).expect("ssh context");
        assert_eq!(
            ep.to_string(),
            "ssh://odek@box.example (ssh, host key checked; from Docker context \"box\")"
        );
        // A hostile context cannot smuggle an option in.
        context(
            &cfg,
            "evil",
            r#"{"Name":"evil","Endpoints":{"docker":{"Host":"ssh://-oProxyCommand=touch${IFS}pwned"}}}"#,
            false,
        );
        let env = EndpointEnv {
            docker_config: Some(cfg),
            docker_context: Some("evil".into()),
            ..Default::default()
        };
        let err = Endpoint::resolve(&env).expect_err("refused");
        assert!(
            matches!(err, EndpointError::Invalid { .. })
                && err.to_string().contains("begins with '-'")
                && err.to_string().contains("Docker context \"evil\""),
            "{err}"
        );
    }

    #[test]
    fn missing_ssh_is_a_config_error_naming_the_fix() {
        let d = tempfile::tempdir().expect("tempdir");
        let err = super::super::ssh::find_program_in(d.path().as_os_str()).expect_err("none");
        assert!(
            err.contains("no `ssh` program on PATH")
                && err.contains("apt-get install openssh-client"),
            "{err}"
        );
        // An executable `ssh` in a PATH directory is found; a
        // non-executable one is not.
        let ssh = d.path().join("ssh");
        std::fs::write(&ssh, "#!/bin/sh\n").expect("write");
        chmod(&ssh, 0o644);
        assert!(super::super::ssh::find_program_in(d.path().as_os_str()).is_err());
        chmod(&ssh, 0o755);
        assert_eq!(
            super::super::ssh::find_program_in(d.path().as_os_str()),
            Ok(ssh)
        );
        let shown = EndpointError::Ssh {
            endpoint: "ssh://h".into(),
            origin: "DOCKER_HOST".into(),
            reason: err,
        }
        .to_string();
        assert!(
            shown.starts_with(
                "cannot reach the Docker endpoint ssh://h from DOCKER_HOST: no `ssh` program"
            ),
            "{shown}"
        );
    }

    #[test]
    fn probe_order_lists_every_path_tried() {
        let dir = tempfile::tempdir().expect("tempdir");
        let env = EndpointEnv {
            xdg_runtime_dir: Some(dir.path().join("xdg")),
            home: Some(dir.path().join("home")),
            ..Default::default()
        };
        match Endpoint::resolve(&env) {
            Ok(ep) => assert_eq!(
                ep.address,
                Address::Unix {
                    path: "/var/run/docker.sock".into()
                }
            ),
            Err(EndpointError::NoSocket { tried }) => {
                assert_eq!(tried.len(), 5);
                assert_eq!(tried[0].path, PathBuf::from("/var/run/docker.sock"));
                assert_eq!(tried[1].path, dir.path().join("xdg/docker.sock"));
                assert_eq!(tried[1].reason, "absent");
                assert_eq!(
                    tried[2].path,
                    dir.path().join("home/.docker/run/docker.sock")
                );
                assert_eq!(tried[3].path, PathBuf::from("/run/podman/podman.sock"));
                assert_eq!(tried[4].path, dir.path().join("xdg/podman/podman.sock"));
                assert_eq!(tried[4].reason, "absent");
            }
            Err(e) => panic!("unexpected {e}"),
        }
    }

    #[test]
    fn podman_sockets_are_probed_after_dockers() {
        let env = EndpointEnv {
            xdg_runtime_dir: Some("/run/user/1000".into()),
            home: Some("/home/a".into()),
            ..Default::default()
        };
        assert_eq!(
            probe_candidates(&env),
            [
                "/var/run/docker.sock",
                "/run/user/1000/docker.sock",
                "/home/a/.docker/run/docker.sock",
                "/run/podman/podman.sock",
                "/run/user/1000/podman/podman.sock",
            ]
            .map(PathBuf::from)
        );
        // Without XDG_RUNTIME_DIR or HOME, only the fixed paths.
        assert_eq!(
            probe_candidates(&EndpointEnv::default()),
            ["/var/run/docker.sock", "/run/podman/podman.sock"].map(PathBuf::from)
        );
    }

    #[test]
    fn a_live_podman_socket_is_chosen_when_dockers_are_absent_under_the_same_rule() {
        let dir = tempfile::tempdir().expect("tempdir");
        let xdg = dir.path().join("xdg");
        std::fs::create_dir_all(xdg.join("podman")).expect("mkdir");
        let sock = xdg.join("podman/podman.sock");
        let _l = std::os::unix::net::UnixListener::bind(&sock).expect("bind");
        let mut candidates = probe_candidates(&EndpointEnv {
            xdg_runtime_dir: Some(xdg.clone()),
            home: Some(dir.path().join("home")),
            ..Default::default()
        });
        // The machine's own sockets are not this test's.
        candidates.retain(|p| p.starts_with(dir.path()));
        let ep = probe_in_order(&candidates).expect("podman socket");
        assert_eq!(ep.address, Address::Unix { path: sock.clone() });
        assert_eq!(ep.tried.len(), 2, "{:?}", ep.tried);
        // Others can write its directory: passed over, as Docker's would be.
        chmod(&xdg.join("podman"), 0o777);
        match probe_in_order(&candidates) {
            Err(EndpointError::NoSocket { tried }) => {
                assert_eq!(tried[2].path, sock);
                assert!(tried[2].reason.contains("others"), "{}", tried[2].reason);
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    /// A socket file nobody listens on: bound, then the listener dropped.
    fn stale_socket(path: &Path) {
        drop(std::os::unix::net::UnixListener::bind(path).expect("bind"));
        assert!(path.exists(), "the socket file stays after the listener");
    }

    #[test]
    fn probe_passes_over_absent_non_socket_and_stale_sockets_to_a_live_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let absent = dir.path().join("absent.sock");
        let file = dir.path().join("file.sock");
        std::fs::write(&file, b"").expect("write");
        let stale = dir.path().join("stale.sock");
        stale_socket(&stale);
        let live = dir.path().join("live.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&live).expect("bind");
        let ep = probe_in_order(&[absent.clone(), file.clone(), stale.clone(), live.clone()])
            .expect("the live socket is reachable");
        assert_eq!(ep.address, Address::Unix { path: live });
        assert_eq!(ep.source, EndpointSource::Probe);
        let tried: Vec<(PathBuf, &str)> = ep
            .tried
            .iter()
            .map(|t| (t.path.clone(), t.reason.as_str()))
            .collect();
        assert_eq!(
            tried,
            vec![
                (absent, "absent"),
                (file, "not a socket"),
                (stale.clone(), "nothing listens (stale socket)"),
            ]
        );
        let shown = ep.to_string();
        assert!(
            shown.contains(&format!(
                "after passing over {}: absent",
                dir.path().join("absent.sock").display()
            )) && shown.contains(&format!(
                "{}: nothing listens (stale socket)",
                stale.display()
            )),
            "{shown}"
        );
    }

    #[test]
    fn no_reachable_socket_is_no_socket_with_every_reason() {
        let dir = tempfile::tempdir().expect("tempdir");
        let stale = dir.path().join("stale.sock");
        stale_socket(&stale);
        let absent = dir.path().join("absent.sock");
        let err = probe_in_order(&[stale.clone(), absent.clone()]).expect_err("none live");
        let EndpointError::NoSocket { tried } = &err else {
            panic!("expected NoSocket, got {err:?}");
        };
        assert_eq!(tried.len(), 2);
        assert_eq!(tried[0].reason, "nothing listens (stale socket)");
        assert_eq!(tried[1].reason, "absent");
        let msg = err.to_string();
        assert!(
            msg.contains(&format!(
                "{}: nothing listens (stale socket)",
                stale.display()
            )) && msg.contains(&format!("{}: absent", absent.display())),
            "{msg}"
        );
    }

    #[test]
    fn an_unreachable_socket_before_a_live_one_is_passed_over() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let locked = dir.path().join("locked.sock");
        let _locked_listener = std::os::unix::net::UnixListener::bind(&locked).expect("bind");
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000))
            .expect("chmod 000");
        let live = dir.path().join("live.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&live).expect("bind");
        let ep = probe_in_order(&[locked.clone(), live.clone()]).expect("one is reachable");
        if rustix::process::geteuid().is_root() {
            // Root connects through mode 000; the EACCES case is covered as
            // uid 65534 by tests/e2e/tests/endpoint_probe.rs.
            assert_eq!(ep.address, Address::Unix { path: locked });
            return;
        }
        assert_eq!(ep.address, Address::Unix { path: live });
        assert_eq!(ep.tried.len(), 1);
        assert_eq!(
            ep.tried[0].reason,
            "permission denied (are you in the docker group?)"
        );
    }

    const NOBODY: u32 = 65534;

    fn chown(p: &Path, uid: u32) {
        rustix::fs::chown(p, Some(rustix::fs::Uid::from_raw(uid)), None).expect("chown");
    }

    fn chmod(p: &Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    /// `uid 65534 (nobody)`, as `/etc/passwd` names it here.
    fn nobody() -> String {
        super::SocketOwner::of(NOBODY).to_string()
    }

    /// Only root can give a socket or directory away; the suite runs as root.
    fn is_root() -> bool {
        rustix::process::geteuid().is_root()
    }

    #[test]
    fn a_socket_another_user_owns_is_passed_over_naming_the_owner() {
        if !is_root() {
            return;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let theirs = dir.path().join("theirs.sock");
        let _their_daemon = std::os::unix::net::UnixListener::bind(&theirs).expect("bind");
        chown(&theirs, NOBODY);
        let ours = dir.path().join("ours.sock");
        let _our_daemon = std::os::unix::net::UnixListener::bind(&ours).expect("bind");
        let ep = probe_in_order(&[theirs.clone(), ours.clone()]).expect("ours is reachable");
        assert_eq!(ep.address, Address::Unix { path: ours });
        assert_eq!(ep.tried.len(), 1, "{ep}");
        let why = &ep.tried[0].reason;
        assert!(
            why.starts_with(&format!(
                "belongs to {}, not to you (uid 0) or root",
                nobody()
            )) && why.contains(&format!(
                "set DOCKER_HOST=unix://{} to use it knowingly",
                theirs.display()
            )),
            "{why}"
        );
        // Alone, it is no socket at all: daemon unreachable, owner named.
        let err = probe_in_order(std::slice::from_ref(&theirs)).expect_err("not used");
        let msg = err.to_string();
        assert!(
            matches!(err, EndpointError::NoSocket { .. })
                && msg.contains(&format!("{}: belongs to {}", theirs.display(), nobody())),
            "{msg}"
        );
    }

    #[test]
    fn a_socket_in_a_directory_others_can_write_or_own_is_passed_over() {
        if !is_root() {
            return;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let run = dir.path().join("run");
        std::fs::create_dir(&run).expect("mkdir");
        let sock = run.join("docker.sock");
        let _daemon = std::os::unix::net::UnixListener::bind(&sock).expect("bind");
        // Control: root's socket in root's 0755 directory is used.
        chmod(&run, 0o755);
        let ep = probe_in_order(std::slice::from_ref(&sock)).expect("root's socket");
        assert!(ep.tried.is_empty(), "{ep}");
        // Group- or world-writable, sticky or not: anyone could bind their
        // own socket there while the daemon restarts.
        for mode in [0o777, 0o775, 0o1777] {
            chmod(&run, mode);
            let err = probe_in_order(std::slice::from_ref(&sock)).expect_err("writable dir");
            let msg = err.to_string();
            assert!(
                msg.contains(&format!(
                    "{}: lies in {} (mode {mode:04o}), where group or others could replace the socket",
                    sock.display(),
                    run.display()
                )),
                "{mode:o}: {msg}"
            );
        }
        // A directory of another user: they could swap the socket.
        chmod(&run, 0o755);
        chown(&run, NOBODY);
        let err = probe_in_order(std::slice::from_ref(&sock)).expect_err("their dir");
        let msg = err.to_string();
        assert!(
            msg.contains(&format!(
                "{}: lies in {}, which belongs to {}, not to you (uid 0) or root",
                sock.display(),
                run.display(),
                nobody()
            )),
            "{msg}"
        );
    }

    #[test]
    fn a_root_owned_0660_socket_is_accepted() {
        if !is_root() {
            return;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        chmod(dir.path(), 0o755);
        let sock = dir.path().join("docker.sock");
        let _daemon = std::os::unix::net::UnixListener::bind(&sock).expect("bind");
        // root:<another group> 0660, as dockerd leaves root:docker.
        rustix::fs::chown(
            &sock,
            Some(rustix::fs::Uid::ROOT),
            Some(rustix::fs::Gid::from_raw(NOBODY)),
        )
        .expect("chgrp");
        chmod(&sock, 0o660);
        let ep = probe_in_order(std::slice::from_ref(&sock)).expect("root's socket");
        assert_eq!(ep.address, Address::Unix { path: sock });
        assert!(ep.tried.is_empty(), "{ep}");
        let (owner, warning) = ep.ownership();
        assert_eq!(
            owner.map(|o| o.to_string()).as_deref(),
            Some("uid 0 (root)")
        );
        assert_eq!(warning, None);
    }

    #[test]
    fn an_explicit_docker_host_to_another_users_socket_is_used_with_a_warning() {
        if !is_root() {
            return;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let theirs = dir.path().join("theirs.sock");
        let _their_daemon = std::os::unix::net::UnixListener::bind(&theirs).expect("bind");
        chown(&theirs, NOBODY);
        let host = format!("unix://{}", theirs.display());
        let ep = Endpoint::resolve(&env_with_host(&host)).expect("DOCKER_HOST is used");
        assert_eq!(
            ep.address,
            Address::Unix {
                path: theirs.clone()
            }
        );
        let (owner, warning) = ep.ownership();
        assert_eq!(owner.map(|o| o.uid), Some(NOBODY));
        let w = warning.expect("a warning naming the owner");
        assert_eq!(w.kind, WarningKind::DockerSocketNotYours);
        assert_eq!(
            w.message,
            format!(
                "the Docker socket {host} (from DOCKER_HOST) belongs to {}, not you: that user's daemon receives this sandbox and its environment",
                nobody()
            )
        );
        // The same from the embedding program (the C ABI's docker_host).
        let named = Endpoint::named(&host, "docker_host").expect("valid");
        let w = named.ownership().1.expect("warned");
        assert!(
            w.message
                .starts_with(&format!("the Docker socket {host} belongs to")),
            "{}",
            w.message
        );
        // Control: the socket given to root, no warning.
        chown(&theirs, 0);
        assert_eq!(ep.ownership().1, None);
        // TCP has no owner to tell.
        let tcp = Endpoint::resolve(&env_with_host("tcp://127.0.0.1:2375")).expect("valid");
        assert_eq!(tcp.ownership(), (None, None));
    }

    #[test]
    fn empty_endpoint_variables_are_noted() {
        let env = EndpointEnv {
            set_but_empty: vec!["DOCKER_HOST"],
            ..Default::default()
        };
        assert_eq!(
            env.notes(),
            vec!["DOCKER_HOST is set but empty: treated as unset (as the Docker CLI does)"]
        );
        assert!(EndpointEnv::default().notes().is_empty());
    }

    #[test]
    fn context_is_read_from_meta() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cfg = dir.path().join("docker");
        let name = "remote";
        let meta = cfg
            .join("contexts/meta")
            .join(hex::encode(Sha256::digest(name.as_bytes())));
        std::fs::create_dir_all(&meta).expect("mkdir");
        std::fs::write(
            meta.join("meta.json"),
            r#"{"Name":"remote","Endpoints":{"docker":{"Host":"unix:///tmp/remote.sock"}}}"#,
        )
        .expect("write");
        std::fs::write(cfg.join("config.json"), r#"{"currentContext":"remote"}"#).expect("write");
        let env = EndpointEnv {
            docker_config: Some(cfg.clone()),
            ..Default::default()
        };
        let ep = Endpoint::resolve(&env).expect("context");
        assert_eq!(
            ep.address,
            Address::Unix {
                path: "/tmp/remote.sock".into()
            }
        );
        assert_eq!(
            ep.source,
            EndpointSource::Context {
                name: "remote".into()
            }
        );
        let env = EndpointEnv {
            docker_config: Some(cfg),
            docker_context: Some("missing".into()),
            ..Default::default()
        };
        let err = Endpoint::resolve(&env).expect_err("no such context");
        assert!(matches!(err, EndpointError::Context { .. }));
        assert!(
            err.to_string().contains("there is no context of that name")
                && err.to_string().contains("docker context ls"),
            "{err}"
        );
    }

    const PEM_CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    const PEM_KEY: &str = "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n";

    /// `dir` with ca.pem, cert.pem, key.pem (PEM blocks; the handshake is
    /// the e2e test's), each 0644 (key 0600).
    fn cert_dir(dir: &Path) {
        std::fs::create_dir_all(dir).expect("mkdir");
        for (f, text, mode) in [
            ("ca.pem", PEM_CERT, 0o644),
            ("cert.pem", PEM_CERT, 0o644),
            ("key.pem", PEM_KEY, 0o600),
        ] {
            std::fs::write(dir.join(f), text).expect("write");
            chmod(&dir.join(f), mode);
        }
    }

    fn tls_env(host: &str, cert_path: Option<&Path>, home: &Path) -> EndpointEnv {
        EndpointEnv {
            docker_host: Some(host.into()),
            docker_tls_verify: true,
            docker_cert_path: cert_path.map(Path::to_path_buf),
            home: Some(home.to_path_buf()),
            ..Default::default()
        }
    }

    #[test]
    fn docker_tls_verify_reads_the_cert_path_and_says_so() {
        let d = tempfile::tempdir().expect("tempdir");
        let certs = d.path().join("certs");
        cert_dir(&certs);
        let ep = Endpoint::resolve(&tls_env("tcp://127.0.0.1:2376", Some(&certs), d.path()))
            .expect("tls");
        let tls = ep.tls.as_ref().expect("secured");
        assert_eq!(tls.ca, certs.join("ca.pem"));
        assert_eq!(tls.cert, certs.join("cert.pem"));
        assert_eq!(tls.key, certs.join("key.pem"));
        assert_eq!(tls.pem.key, PEM_KEY.as_bytes());
        assert_eq!(
            ep.to_string(),
            "tcp://127.0.0.1:2376 (tls, verified; from DOCKER_HOST)"
        );
        assert_eq!(ep.transport_warning(), None);
        // The key is never in Debug output.
        assert!(!format!("{ep:?}").contains("MIIB"), "{ep:?}");
        // Without DOCKER_CERT_PATH: ~/.docker, as the Docker CLI.
        cert_dir(&d.path().join(".docker"));
        let ep = Endpoint::resolve(&tls_env("tcp://127.0.0.1:2376", None, d.path())).expect("tls");
        assert_eq!(ep.tls.expect("secured").ca, d.path().join(".docker/ca.pem"));
        // ... or DOCKER_CONFIG when set.
        let cfg = d.path().join("cfg");
        cert_dir(&cfg);
        let mut env = tls_env("tcp://127.0.0.1:2376", None, d.path());
        env.docker_config = Some(cfg.clone());
        assert_eq!(
            Endpoint::resolve(&env)
                .expect("tls")
                .tls
                .expect("secured")
                .ca,
            cfg.join("ca.pem")
        );
        // A Unix socket ignores DOCKER_TLS_VERIFY, as the Docker CLI does.
        let ep = Endpoint::resolve(&tls_env("unix:///run/x.sock", Some(&certs), d.path()))
            .expect("unix");
        assert_eq!(ep.tls, None);
        assert_eq!(ep.to_string(), "unix:///run/x.sock (from DOCKER_HOST)");
    }

    /// The C ABI's `docker_host` + `docker_cert_path` (SPEC §6.2.1): TLS
    /// verified with that directory's files, checked as `DOCKER_CERT_PATH`
    /// is; a missing file names the option; a Unix socket or ssh:// with
    /// TLS material is refused rather than the material ignored.
    #[test]
    fn a_named_endpoint_with_a_cert_directory_is_tls_verified_or_refused_naming_the_option() {
        let d = tempfile::tempdir().expect("tempdir");
        let certs = d.path().join("certs");
        cert_dir(&certs);
        let ep = Endpoint::named_tls(
            "tcp://10.1.2.3:2376",
            "docker_host",
            &certs,
            "docker_cert_path",
        )
        .expect("tls");
        assert_eq!(ep.tls.as_ref().expect("secured").ca, certs.join("ca.pem"));
        assert_eq!(ep.to_string(), "tcp://10.1.2.3:2376 (tls, verified)");
        assert_eq!(ep.transport_warning(), None);
        std::fs::remove_file(certs.join("key.pem")).expect("rm");
        let msg = Endpoint::named_tls(
            "tcp://10.1.2.3:2376",
            "docker_host",
            &certs,
            "docker_cert_path",
        )
        .expect_err("no key")
        .to_string();
        assert!(
            msg.starts_with(
                "cannot secure the Docker endpoint tcp://10.1.2.3:2376 from docker_cert_path: "
            ) && msg.contains(&format!(
                "{} does not exist",
                certs.join("key.pem").display()
            )) && msg.contains("or point docker_cert_path at the directory that holds them"),
            "{msg}"
        );
        cert_dir(&certs);
        for host in ["unix:///run/x.sock", "ssh://u@h"] {
            let err = Endpoint::named_tls(host, "docker_host", &certs, "docker_cert_path")
                .expect_err(host);
            assert!(matches!(err, EndpointError::Tls { .. }), "{err:?}");
            assert!(
                err.to_string()
                    .contains("remove docker_cert_path or name the daemon's tcp://host:port"),
                "{err}"
            );
        }
    }

    #[test]
    fn missing_or_untrusted_cert_material_is_refused_naming_the_file_and_fix() {
        let d = tempfile::tempdir().expect("tempdir");
        let certs = d.path().join("certs");
        for (missing, _) in [("ca.pem", 0), ("cert.pem", 1), ("key.pem", 2)] {
            cert_dir(&certs);
            std::fs::remove_file(certs.join(missing)).expect("rm");
            let err = Endpoint::resolve(&tls_env("tcp://10.1.2.3:2376", Some(&certs), d.path()))
                .expect_err(missing);
            let msg = err.to_string();
            assert!(matches!(err, EndpointError::Tls { .. }), "{err:?}");
            assert!(
                msg.starts_with(
                    "cannot secure the Docker endpoint tcp://10.1.2.3:2376 from DOCKER_HOST: "
                ) && msg.contains(&format!("{} does not exist", certs.join(missing).display()))
                    && msg.contains("as ca.pem, cert.pem and key.pem, or unset DOCKER_TLS_VERIFY"),
                "{msg}"
            );
        }
        // Not PEM at all.
        cert_dir(&certs);
        std::fs::write(certs.join("key.pem"), "not a key").expect("write");
        let msg = Endpoint::resolve(&tls_env("tcp://h:2376", Some(&certs), d.path()))
            .expect_err("no key")
            .to_string();
        assert!(msg.contains("key.pem holds no PEM private key"), "{msg}");
        std::fs::write(certs.join("ca.pem"), "").expect("write");
        let msg = Endpoint::resolve(&tls_env("tcp://h:2376", Some(&certs), d.path()))
            .expect_err("no ca")
            .to_string();
        assert!(msg.contains("ca.pem holds no PEM certificate"), "{msg}");
        // Writable by others: whoever can write ca.pem picks the daemon.
        cert_dir(&certs);
        chmod(&certs.join("ca.pem"), 0o666);
        let msg = Endpoint::resolve(&tls_env("tcp://h:2376", Some(&certs), d.path()))
            .expect_err("world-writable ca")
            .to_string();
        assert!(
            msg.contains(&format!(
                "{} has mode 0666: group or others can write it",
                certs.join("ca.pem").display()
            )) && msg.contains("chmod go-w"),
            "{msg}"
        );
        // Another user's file (only root can give one away).
        if is_root() {
            cert_dir(&certs);
            chown(&certs.join("cert.pem"), NOBODY);
            let msg = Endpoint::resolve(&tls_env("tcp://h:2376", Some(&certs), d.path()))
                .expect_err("nobody's cert")
                .to_string();
            assert!(
                msg.contains(&format!(
                    "{} belongs to uid {NOBODY}, not to you (uid 0) or root",
                    certs.join("cert.pem").display()
                )),
                "{msg}"
            );
        }
    }

    #[test]
    fn docker_tls_without_verify_is_refused() {
        let d = tempfile::tempdir().expect("tempdir");
        let env = EndpointEnv {
            docker_host: Some("tcp://127.0.0.1:2376".into()),
            docker_tls: true,
            ..Default::default()
        };
        let msg = Endpoint::resolve(&env).expect_err("unverified").to_string();
        assert!(
            msg.contains("DOCKER_TLS asks for TLS without verifying")
                && msg.contains("set DOCKER_TLS_VERIFY=1"),
            "{msg}"
        );
        drop(d);
    }

    /// A context `name` with `host` and, if `tls`, its TLS material.
    fn context(cfg: &Path, name: &str, meta_json: &str, tls: bool) {
        let id = hex::encode(Sha256::digest(name.as_bytes()));
        let meta = cfg.join("contexts/meta").join(&id);
        std::fs::create_dir_all(&meta).expect("mkdir");
        std::fs::write(meta.join("meta.json"), meta_json).expect("write");
        if tls {
            cert_dir(&cfg.join("contexts/tls").join(&id).join("docker"));
        }
    }

    #[test]
    fn a_context_with_tls_material_is_secured_with_it() {
        let d = tempfile::tempdir().expect("tempdir");
        let cfg = d.path().join("docker");
        context(
            &cfg,
            "remote",
            r#"{"Name":"remote","Endpoints":{"docker":{"Host":"tcp://127.0.0.1:2376","SkipTLSVerify":false}}}"#,
            true,
        );
        let env = EndpointEnv {
            docker_config: Some(cfg.clone()),
            docker_context: Some("remote".into()),
            ..Default::default()
        };
        let ep = Endpoint::resolve(&env).expect("context");
        let dir = cfg
            .join("contexts/tls")
            .join(hex::encode(Sha256::digest(b"remote")))
            .join("docker");
        assert_eq!(ep.tls.as_ref().expect("secured").ca, dir.join("ca.pem"));
        assert_eq!(
            ep.to_string(),
            "tcp://127.0.0.1:2376 (tls, verified; from Docker context \"remote\")"
        );
        // The context's TLS directory missing a file: refused, naming it.
        std::fs::remove_file(dir.join("cert.pem")).expect("rm");
        let msg = Endpoint::resolve(&env).expect_err("no cert").to_string();
        assert!(
            msg.contains(&format!(
                "{} does not exist",
                dir.join("cert.pem").display()
            )) && msg.contains("docker context update remote"),
            "{msg}"
        );
        // DOCKER_TLS_VERIFY is for DOCKER_HOST: a context is not secured by it.
        let mut env2 = env.clone();
        env2.docker_tls_verify = true;
        env2.docker_cert_path = Some(d.path().join("nowhere"));
        assert!(Endpoint::resolve(&env2).is_err(), "still the context's own");
    }

    #[test]
    fn skip_tls_verify_is_refused_fail_closed() {
        let d = tempfile::tempdir().expect("tempdir");
        let cfg = d.path().join("docker");
        for tls in [false, true] {
            context(
                &cfg,
                "insecure",
                r#"{"Name":"insecure","Endpoints":{"docker":{"Host":"tcp://127.0.0.1:2376","SkipTLSVerify":true}}}"#,
                tls,
            );
            let env = EndpointEnv {
                docker_config: Some(cfg.clone()),
                docker_context: Some("insecure".into()),
                ..Default::default()
            };
            let err = Endpoint::resolve(&env).expect_err("skip verify");
            let msg = err.to_string();
            assert!(
                matches!(err, EndpointError::Tls { .. })
                    && msg.contains("SkipTLSVerify is true")
                    && msg.contains("skip-tls-verify=false"),
                "{msg}"
            );
        }
        // A Unix-socket context has nothing to verify.
        context(
            &cfg,
            "local",
            r#"{"Name":"local","Endpoints":{"docker":{"Host":"unix:///run/x.sock","SkipTLSVerify":true}}}"#,
            false,
        );
        let env = EndpointEnv {
            docker_config: Some(cfg),
            docker_context: Some("local".into()),
            ..Default::default()
        };
        assert_eq!(Endpoint::resolve(&env).expect("unix").tls, None);
    }

    #[test]
    fn plain_tcp_to_a_remote_host_warns_loudly_loopback_does_not() {
        for (host, warns) in [
            ("tcp://10.0.0.5:2375", true),
            ("tcp://docker.example:2375", true),
            ("tcp://127.0.0.1:2375", false),
            ("tcp://localhost:2375", false),
            ("tcp://[::1]:2375", false),
            ("unix:///run/x.sock", false),
        ] {
            let ep = Endpoint::resolve(&env_with_host(host)).expect("valid");
            let w = ep.transport_warning();
            assert_eq!(w.is_some(), warns, "{host}: {w:?}");
            if let Some(w) = w {
                assert_eq!(w.kind, WarningKind::PlainTcp);
                assert!(
                    w.message
                        .starts_with("PLAIN TCP to a remote Docker daemon: ")
                        && w.message
                            .contains("(plain TCP, not encrypted; from DOCKER_HOST)")
                        && w.message.contains("DOCKER_TLS_VERIFY=1"),
                    "{}",
                    w.message
                );
            }
        }
        // A plain context to a remote host warns the same.
        let d = tempfile::tempdir().expect("tempdir");
        let cfg = d.path().join("docker");
        context(
            &cfg,
            "plain",
            r#"{"Name":"plain","Endpoints":{"docker":{"Host":"tcp://10.0.0.5:2375"}}}"#,
            false,
        );
        let env = EndpointEnv {
            docker_config: Some(cfg),
            docker_context: Some("plain".into()),
            ..Default::default()
        };
        let ep = Endpoint::resolve(&env).expect("plain context");
        assert_eq!(ep.tls, None);
        assert!(ep.transport_warning().is_some());
    }

    /// SPEC §7.3 binds an engine that reports no ID by its address alone:
    /// how it was chosen (`(from DOCKER_HOST)`, a context's name, sockets
    /// passed over) is no part of the key, so the same socket named two
    /// ways is one engine (it was, through the display, before).
    #[test]
    fn the_endpoint_binding_is_the_address_alone() {
        let via_env = Endpoint::resolve(&env_with_host("unix:///x")).expect("valid");
        let named = Endpoint::unix("/x");
        // The premise: one socket.
        assert_eq!(via_env.address, named.address);
        assert_ne!(via_env.to_string(), named.to_string());
        assert_eq!(via_env.approval_binding(None), "endpoint:unix:///x");
        assert_eq!(named.approval_binding(None), "endpoint:unix:///x");
        assert_eq!(via_env.approval_binding(Some("ID")), "engine:ID");
    }
}
