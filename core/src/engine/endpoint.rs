//! Which daemon endpoint to talk to (SPEC §6.2).
//!
//! `DOCKER_HOST` when set (`unix://PATH` or `tcp://HOST[:PORT]`; anything else
//! is a config error, never silently another endpoint); else the current Docker
//! context when one other than `default` is selected; else the first socket
//! of `/var/run/docker.sock`, `$XDG_RUNTIME_DIR/docker.sock`,
//! `~/.docker/run/docker.sock` that accepts a connection and passes the
//! ownership rule of [`super::socket_owner`] (the socket, and every directory
//! its path goes through, belong to the effective uid or root). Each path
//! passed over is kept with the reason (absent, not a socket, another user's,
//! permission denied, nothing listening), for verbose output and the "daemon
//! unreachable" error. A socket the operator names is used whoever owns it;
//! [`Endpoint::ownership`] says whose it is.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::socket_owner::{self, SocketOwner};
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
}

impl fmt::Display for Address {
    /// `unix:///path` or `tcp://host:port`, as `DOCKER_HOST` would say it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Unix { path } => write!(f, "unix://{}", path.display()),
            Address::Tcp { authority } => write!(f, "tcp://{authority}"),
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
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.address, self.origin())?;
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
    #[error("invalid Docker endpoint {value:?} from {origin}: {reason}; use unix:///path/to/docker.sock or tcp://host:port")]
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
            xdg_runtime_dir: var("XDG_RUNTIME_DIR").map(PathBuf::from),
            home: var("HOME").map(PathBuf::from),
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
            return Ok(Endpoint {
                address,
                source: EndpointSource::DockerHost,
                tried: Vec::new(),
            });
        }
        if let Some(ep) = context_endpoint(env)? {
            return Ok(ep);
        }
        let mut candidates = vec![PathBuf::from("/var/run/docker.sock")];
        if let Some(x) = &env.xdg_runtime_dir {
            candidates.push(x.join("docker.sock"));
        }
        if let Some(h) = &env.home {
            candidates.push(h.join(".docker/run/docker.sock"));
        }
        probe_in_order(&candidates)
    }

    /// An endpoint for a Unix socket given by the embedding program.
    pub fn unix(path: impl Into<PathBuf>) -> Endpoint {
        Endpoint {
            address: Address::Unix { path: path.into() },
            source: EndpointSource::Explicit,
            tried: Vec::new(),
        }
    }

    /// An endpoint the embedding program names (`unix:///…` or
    /// `tcp://host:port`; `origin` names the setting in errors, e.g.
    /// `docker_host`). Used whoever owns the socket, as `DOCKER_HOST` is:
    /// [`Endpoint::ownership`] says whose it is.
    ///
    /// Errors: [`EndpointError::Invalid`] as [`parse_host`].
    pub fn named(value: &str, origin: &str) -> Result<Endpoint, EndpointError> {
        Ok(Endpoint {
            address: parse_host(value, origin)?,
            source: EndpointSource::Explicit,
            tried: Vec::new(),
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

/// Parses a Docker host string (`unix://PATH`, `tcp://HOST[:PORT]`).
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
        other => Err(invalid(&format!(
            "the scheme {other:?} is not supported (only unix:// and tcp://)"
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
        None => config_dir
            .as_ref()
            .and_then(|d| std::fs::read(d.join("config.json")).ok())
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|v| v.get("currentContext")?.as_str().map(str::to_string))
            .filter(|n| !n.is_empty()),
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
    let bytes = std::fs::read(&meta).map_err(|e| ctx_err(format!("{}: {e}", meta.display())))?;
    let v: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| ctx_err(format!("{}: {e}", meta.display())))?;
    let host = v
        .pointer("/Endpoints/docker/Host")
        .and_then(|h| h.as_str())
        .ok_or_else(|| ctx_err(format!("{} has no Endpoints.docker.Host", meta.display())))?;
    let address = parse_host(host, &format!("Docker context {name:?}"))?;
    Ok(Some(Endpoint {
        address,
        source: EndpointSource::Context { name },
        tried: Vec::new(),
    }))
}

impl Endpoint {
    /// True when the engine runs on this machine: a Unix socket, or TCP to
    /// a loopback address (`localhost`, `127.0.0.0/8`, `::1`). Only then do
    /// the operator's uid and paths mean the same to the engine as to odek
    /// (SPEC §6.1 "user").
    pub fn is_local(&self) -> bool {
        match &self.address {
            Address::Unix { .. } => true,
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
            "ssh://me@host",
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
                assert_eq!(tried.len(), 3);
                assert_eq!(tried[0].path, PathBuf::from("/var/run/docker.sock"));
                assert_eq!(tried[1].path, dir.path().join("xdg/docker.sock"));
                assert_eq!(tried[1].reason, "absent");
                assert_eq!(
                    tried[2].path,
                    dir.path().join("home/.docker/run/docker.sock")
                );
            }
            Err(e) => panic!("unexpected {e}"),
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
        assert!(matches!(
            Endpoint::resolve(&env),
            Err(EndpointError::Context { .. })
        ));
    }
}
