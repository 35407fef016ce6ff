//! The Docker API port (SPEC §2).
//!
//! [`DockerApi`] covers exactly the Engine calls odek makes. Two implementations
//! exist: [`BollardEngine`] (the real Engine API over a Unix socket or TCP) and
//! `FakeEngine` (in memory; records every call and can be scripted to fail
//! any of them; only with the `testing` feature, never in a release build). Nothing outside `engine/bollard_engine.rs` knows about bollard, and
//! nothing outside it and `engine/raw.rs` (the requests written by hand) about HTTP: the types below are odek's own.

mod bollard_engine;
mod endpoint;
#[cfg(any(test, feature = "testing"))]
mod fake;
mod foreign;
mod owner_fds;
mod podman;
mod raw;
mod socket_owner;
mod ssh;
mod tls;

/// The create body odek sends, for the benchmark's raw floor (feature
/// `testing`; not part of the library's API).
#[cfg(feature = "testing")]
pub use bollard_engine::create_body;
pub use bollard_engine::BollardEngine;
pub use bollard_engine::Timeouts;
pub use endpoint::{
    engine_binding, parse_host, Address, Endpoint, EndpointEnv, EndpointError, EndpointSource,
    Probed,
};
#[cfg(any(test, feature = "testing"))]
pub use fake::{
    random_id, Call, FakeEngine, FakeImage, FakeNetwork, FakePath, Fault, Quirks, FAKE_ENGINE_ID,
};
pub(crate) use foreign::Foreign;
pub use owner_fds::{take_owner_link_fds, OWNER_LINK_SLOTS};
pub(crate) use podman::seccomp_dir as podman_seccomp_dir;
pub use socket_owner::SocketOwner;
pub use ssh::SshTarget;
pub use tls::Tls;

use std::collections::BTreeMap;
use std::fmt;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// Oldest Docker Engine API version odek talks to (Docker 19.03). SPEC §6.2:
/// an older engine is refused naming both versions.
pub(crate) const MIN_API_VERSION: ApiVersion = ApiVersion {
    major: 1,
    minor: 40,
};

/// A Docker Engine API version such as `1.41`.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct ApiVersion {
    /// Major part (always 1 so far).
    pub major: u32,
    /// Minor part.
    pub minor: u32,
}

impl ApiVersion {
    /// Parses `"1.41"`; `None` for anything else.
    pub(crate) fn parse(s: &str) -> Option<ApiVersion> {
        let (a, b) = s.trim().split_once('.')?;
        Some(ApiVersion {
            major: a.parse().ok()?,
            minor: b.parse().ok()?,
        })
    }
}

impl fmt::Display for ApiVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// What the engine said about itself when the API version was negotiated.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EngineInfo {
    /// The API version every request is sent with (min of client and server).
    pub api_version: ApiVersion,
    /// The engine's release, e.g. `20.10.24`.
    pub server_version: String,
}

/// A network as the engine reports it (list or inspect).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkInfo {
    /// Full 64-hex network ID.
    pub id: String,
    /// Network name (unique only by convention; Docker allows duplicates).
    pub name: String,
    /// Driver, e.g. `bridge`, `overlay`, `macvlan`, `host`, `null`.
    pub driver: String,
    /// Scope: `local` or `swarm` (or `global`).
    pub scope: String,
    /// `Internal`: no route to the outside world.
    pub internal: bool,
    /// `Attachable`: a swarm-scoped network standalone containers may be
    /// connected to (`attachable: true` in a stack file; SPEC §4.1 refuses
    /// a stack network without it).
    #[serde(default)]
    pub attachable: bool,
    /// `EnableIPv6`: containers get IPv6 addresses on it (Docker 20.10's
    /// inter-container traffic switch blocks IPv4 only).
    #[serde(default)]
    pub enable_ipv6: bool,
    /// Network labels (e.g. `com.docker.compose.project`).
    pub labels: BTreeMap<String, String>,
    /// Options (e.g. `com.docker.network.bridge.default_bridge`).
    pub options: BTreeMap<String, String>,
    /// Containers attached, keyed by full container ID → container name.
    /// Filled by inspect only; lists leave it empty.
    pub containers: BTreeMap<String, String>,
    /// `IPAM.Config`: the network's subnets and gateways (SPEC §4.6 reads
    /// the link network's to choose the sandbox's upstream DNS server).
    #[serde(default)]
    pub ipam: Vec<IpamSubnet>,
}

/// One entry of a network's `IPAM.Config`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpamSubnet {
    /// `Subnet` in CIDR form (`172.20.0.0/16`, `fd00::/64`).
    pub subnet: String,
    /// `Gateway` (`172.20.0.1`), when the engine shows one.
    #[serde(default)]
    pub gateway: Option<String>,
}

/// A server-side filter for listing networks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum NetworkFilter {
    /// Docker's `name` filter with one or more names, OR'ed (a substring
    /// match on the server; callers compare names exactly afterwards).
    Names(Vec<String>),
    /// Docker's `label` filter: `key` or `key=value`.
    Label(String),
}

/// An image as the engine reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageInfo {
    /// Image ID, `sha256:<64 hex>`.
    pub id: String,
    /// `RepoTags`, e.g. `odek-test/base:1`.
    pub repo_tags: Vec<String>,
    /// `RepoDigests`, e.g. `alpine@sha256:…`.
    pub repo_digests: Vec<String>,
    /// `Config.Labels` (e.g. the mark of an image odek built, SPEC §5).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// `Config.Volumes`: the paths of the image's `VOLUME` lines, where the
    /// engine mounts an anonymous volume in every container.
    #[serde(default)]
    pub volumes: Vec<String>,
    /// `RootFS.Layers`: how many filesystem layers it has (0: an image
    /// `FROM scratch` with no file, as the egress proxy's, SPEC §4.5).
    #[serde(default)]
    pub layers: usize,
    /// `Config.Env` (`KEY=value`), what every container of it inherits.
    #[serde(default)]
    pub env: Vec<String>,
}

/// A bind mount.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BindMount {
    /// Absolute host path.
    pub source: String,
    /// Absolute container path.
    pub target: String,
    /// Mounted read-only.
    pub read_only: bool,
}

/// A tmpfs mount (`--tmpfs target:options`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TmpfsMount {
    /// Absolute container path.
    pub target: String,
    /// Mount options, comma separated, e.g. `rw,noexec,nosuid`.
    pub options: String,
}

/// Everything odek sends in `POST /containers/create` (SPEC §6.1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerSpec {
    /// Unique container name (`odek-<hex>`), known before create so a
    /// container can be removed by name even if the create answer is lost.
    pub name: String,
    /// Image reference to create from (by digest when pinned) or image ID.
    pub image: String,
    /// The idle command (commands run through exec), or the supervisor's
    /// arguments.
    pub cmd: Vec<String>,
    /// `Entrypoint`: `None` keeps the image's; the supervisor's path for a
    /// supervised sandbox.
    #[serde(default)]
    pub entrypoint: Option<Vec<String>>,
    /// `--cap-add` (only the supervisor's SETUID, SETGID, KILL and SETPCAP).
    #[serde(default)]
    pub cap_add: Vec<String>,
    /// `HostConfig.LogConfig.Type`; `None` keeps the engine's default. A
    /// supervised sandbox's is `none`: its stdout is the supervisor's
    /// protocol, which a log driver would copy (and slow). `json-file` (the
    /// egress proxy's) is capped at two files of 1 MiB (`max-size`,
    /// `max-file`), so refusals an agent provokes cannot fill the disk.
    #[serde(default)]
    pub log_driver: Option<String>,
    /// `Healthcheck: {Test: ["NONE"]}`: the image's `HEALTHCHECK` never runs
    /// (a supervised sandbox's would run as the container's user, root,
    /// with the supervisor's capabilities).
    #[serde(default)]
    pub no_healthcheck: bool,
    /// `KEY=value` pairs. Values are user data: never logged.
    pub env: Vec<String>,
    /// Working directory inside the container.
    pub working_dir: String,
    /// `uid[:gid]` or user name.
    pub user: Option<String>,
    /// Container labels.
    pub labels: BTreeMap<String, String>,
    /// `HostConfig.NetworkMode`: `none`, `bridge` or a full network ID.
    pub network_mode: String,
    /// `--init`.
    pub init: bool,
    /// `--pids-limit`.
    pub pids_limit: i64,
    /// `--cap-drop`.
    pub cap_drop: Vec<String>,
    /// `--security-opt`.
    pub security_opt: Vec<String>,
    /// `--tmpfs`.
    pub tmpfs: Vec<TmpfsMount>,
    /// Bind mounts (`/workspace` first).
    pub binds: Vec<BindMount>,
    /// Memory limit in bytes.
    pub memory_bytes: Option<i64>,
    /// CPU limit in billionths of a CPU (`NanoCpus`).
    pub nano_cpus: Option<i64>,
    /// `HostConfig.Runtime`: the OCI runtime to run the container with,
    /// one of [`EngineSecurity::runtimes`]; `None` leaves the engine's
    /// default runtime.
    #[serde(default)]
    pub runtime: Option<String>,
    /// `OpenStdin`: the container's stdin stays open (the idle process
    /// reads it and ends at its EOF, SPEC §6.1 owner lifetime).
    pub open_stdin: bool,
    /// `StdinOnce` (and `AttachStdin`): the daemon closes the container's
    /// stdin when the first client attached to it goes, so an owned sandbox
    /// ends with the connection its owner holds ([`DockerApi::attach_stdin`]).
    pub stdin_once: bool,
    /// `HostConfig.AutoRemove`: the daemon removes the container once it
    /// stops.
    pub auto_remove: bool,
    /// `HostConfig.Dns`: the upstream servers of the engine's embedded
    /// resolver; empty keeps the engine's (the host's). A sandbox with no
    /// route out gets one address nobody answers inside its own link
    /// network (SPEC §4.6, CVE-2024-29018).
    #[serde(default)]
    pub dns: Vec<String>,
    /// `HostConfig.ReadonlyRootfs` (the egress proxy's container, SPEC
    /// §4.5; a sandbox's root stays as the image has it).
    #[serde(default)]
    pub readonly_rootfs: bool,
}

/// A client's attachment to a container's stdin, held open
/// ([`DockerApi::attach_stdin`]). Nothing is ever written to it; dropping
/// it closes the connection, and with `StdinOnce` the daemon then closes
/// the container's stdin (SPEC §6.1 owner lifetime). The operating system
/// closes it as well when the process holding it dies, by any signal.
///
/// A connection with a descriptor of its own ([`StdinHold::raw_fd`]) is
/// registered for a process that forks without exec
/// ([`take_owner_link_fds`]): a forked child closes its copy at once, so it
/// never keeps its parent's sandbox alive. A hold dropped in such a child
/// (another process than the one that made it) closes nothing: its
/// descriptor number was closed there already and may name another file.
pub struct StdinHold {
    /// The connection (both halves), never read or written: only its
    /// lifetime matters. The mutex makes the hold `Sync`.
    conn: std::sync::Mutex<Option<Box<dyn Send>>>,
    /// The connection's descriptor, registered while the hold lives.
    registered: Option<owner_fds::Registered>,
    /// The process that made the hold.
    pid: u32,
}

impl StdinHold {
    /// Holds `conn` (whatever keeps the connection open) until dropped.
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn new(conn: Box<dyn Send>) -> StdinHold {
        StdinHold {
            conn: std::sync::Mutex::new(Some(conn)),
            registered: None,
            pid: std::process::id(),
        }
    }

    /// Holds the connection `fd`, registered as `registered` (made for
    /// `fd`'s number when the socket was created), until dropped.
    pub(crate) fn with_fd(
        fd: std::os::fd::OwnedFd,
        registered: owner_fds::Registered,
    ) -> StdinHold {
        debug_assert_eq!(std::os::fd::AsRawFd::as_raw_fd(&fd), registered.fd());
        StdinHold {
            conn: std::sync::Mutex::new(Some(Box::new(fd))),
            registered: Some(registered),
            pid: std::process::id(),
        }
    }

    /// Holds `conn` (an `ssh` child's connection, SPEC §6.2.2), whose
    /// link is the descriptor `registered` names, until dropped.
    pub(crate) fn with_conn(conn: Box<dyn Send>, registered: owner_fds::Registered) -> StdinHold {
        StdinHold {
            conn: std::sync::Mutex::new(Some(conn)),
            registered: Some(registered),
            pid: std::process::id(),
        }
    }

    /// The connection's descriptor when it has one of its own (the real
    /// engine's), as registered for forks ([`take_owner_link_fds`]).
    pub fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        self.registered.as_ref().map(owner_fds::Registered::fd)
    }
}

impl Drop for StdinHold {
    fn drop(&mut self) {
        let conn = self
            .conn
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if std::process::id() != self.pid {
            // A forked child: its copy of the descriptor is the parent's
            // link, closed after the fork; the number may be reused.
            std::mem::forget(conn);
            std::mem::forget(self.registered.take());
            return;
        }
        // Unregister first, then close: a fork in between must not find a
        // number that another file may already have.
        drop(self.registered.take());
        drop(conn);
    }
}

impl fmt::Debug for StdinHold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StdinHold")
    }
}

/// A wait for a container's removal, started before the container starts
/// ([`DockerApi::wait_removed`]): it runs on its own task, so a container
/// that ends and is auto-removed before anyone inspects it still tells its
/// exit code. Dropping it stops the wait (and closes its connection).
#[derive(Debug)]
pub struct ExitWait {
    task: tokio::task::JoinHandle<Result<i64, EngineError>>,
}

impl ExitWait {
    /// Runs `wait` (it resolves to the container's exit code once it is
    /// removed) on a task of the current tokio runtime.
    pub(crate) fn spawn(
        wait: impl std::future::Future<Output = Result<i64, EngineError>> + Send + 'static,
    ) -> ExitWait {
        ExitWait {
            task: tokio::spawn(wait),
        }
    }

    /// The container's exit code once it has been removed, waiting up to
    /// `budget`. `None` when the budget ran out or the wait task ended
    /// without an answer; `Some(Err)` when the daemon refused the wait (a
    /// container already gone before the wait began is
    /// [`EngineErrorKind::NotFound`]).
    pub(crate) async fn code(
        mut self,
        budget: std::time::Duration,
    ) -> Option<Result<i64, EngineError>> {
        match tokio::time::timeout(budget, &mut self.task).await {
            Ok(Ok(answer)) => Some(answer.map_err(EngineError::made_safe)),
            _ => None,
        }
    }
}

impl Drop for ExitWait {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The answer to create.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Created {
    /// Full container ID.
    pub id: String,
    /// Warnings the engine returned (e.g. "PIDs limit discarded").
    pub warnings: Vec<String>,
}

/// One network endpoint of a container.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointInfo {
    /// Network name as the container reports it.
    pub network_name: String,
    /// Full network ID.
    pub network_id: String,
    /// DNS aliases of the container on this network.
    pub aliases: Vec<String>,
    /// `EndpointID`: new at every connect, so an endpoint seen before with
    /// the same ID still has the aliases it had (SPEC §4.4 member check).
    /// Empty when the engine did not say.
    #[serde(default)]
    pub endpoint_id: String,
    /// `IPAddress` (IPv4) on this network; empty when not given.
    #[serde(default)]
    pub ip: String,
}

/// A container as inspect reports it (only what odek reads).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerInfo {
    /// Full container ID.
    pub id: String,
    /// Name without the leading `/`.
    pub name: String,
    /// Image ID (`sha256:…`).
    pub image_id: String,
    /// `State.Running`.
    pub running: bool,
    /// `State.ExitCode` and `State.Error` when the container is not running
    /// (why its process ended; empty error when Docker gave none).
    #[serde(default)]
    pub exit: Option<(i64, String)>,
    /// `State.Pid`: the container's init process, in the daemon's PID
    /// namespace (`None` or 0 when it is not running or not reported).
    #[serde(default)]
    pub pid: Option<i64>,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// `HostConfig.NetworkMode`.
    pub network_mode: String,
    /// Endpoints, one per attached network.
    pub endpoints: Vec<EndpointInfo>,
    /// `HostConfig.PidsLimit` (None or ≤ 0 means unlimited).
    pub pids_limit: Option<i64>,
    /// `HostConfig.Init`.
    pub init: Option<bool>,
    /// `HostConfig.Tmpfs`: target → options.
    pub tmpfs: BTreeMap<String, String>,
    /// `HostConfig.Memory` in bytes (0 = unset).
    pub memory_bytes: i64,
    /// `HostConfig.NanoCpus` (0 = unset).
    pub nano_cpus: i64,
    /// `Config.User`.
    pub user: String,
    /// `Config.Entrypoint` (empty when unset).
    #[serde(default)]
    pub entrypoint: Vec<String>,
    /// `Config.Healthcheck.Test` is `["NONE"]`.
    #[serde(default)]
    pub healthcheck_disabled: bool,
    /// `HostConfig.CapDrop`.
    pub cap_drop: Vec<String>,
    /// `HostConfig.SecurityOpt`.
    pub security_opt: Vec<String>,
    /// `Config.Env` (`KEY=value`; values are user data, never logged).
    pub env: Vec<String>,
    /// `HostConfig.Runtime`: the OCI runtime the container runs with (the
    /// engine fills in its default runtime when create named none); empty
    /// when the engine does not say.
    #[serde(default)]
    pub runtime: String,
    /// The isolation settings the container runs with (SPEC §6.1).
    #[serde(default)]
    pub hardening: Hardening,
    /// `ExecIDs`: the exec instances running in it now (the engine forgets
    /// one once it ended).
    #[serde(default)]
    pub exec_ids: Vec<String>,
    /// `HostConfig.Dns` (SPEC §4.6).
    #[serde(default)]
    pub dns: Vec<String>,
}

/// What a container's isolation looks like from inspect (SPEC §6.1): what a
/// forged container or a `docker update` could loosen beyond
/// [`ContainerInfo`]'s limits and lists.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hardening {
    /// `HostConfig.Privileged`.
    pub privileged: bool,
    /// `HostConfig.CapAdd`.
    pub cap_add: Vec<String>,
    /// `HostConfig.Devices` (host paths), `DeviceCgroupRules` and
    /// `DeviceRequests` (drivers), one entry each.
    pub devices: Vec<String>,
    /// `HostConfig.PidMode` (`""`, `host`, `container:<id>`).
    pub pid_mode: String,
    /// `HostConfig.IpcMode` (`private`, `shareable`, `host`, …).
    pub ipc_mode: String,
    /// `HostConfig.UTSMode`.
    pub uts_mode: String,
    /// `HostConfig.UsernsMode`.
    pub userns_mode: String,
    /// Top-level `Mounts`: binds and volumes (tmpfs mounts are in
    /// [`ContainerInfo::tmpfs`]).
    pub mounts: Vec<MountInfo>,
}

/// One entry of a container's `Mounts`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MountInfo {
    /// `Type`: `bind`, `volume`, `tmpfs`, `npipe`, `cluster`.
    pub kind: String,
    /// `Name` (volumes).
    pub name: String,
    /// `Source`: the host path.
    pub source: String,
    /// `Destination`: the container path.
    pub destination: String,
    /// `RW`.
    pub rw: bool,
}

/// A container as list reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerSummary {
    /// Full container ID.
    pub id: String,
    /// First name without the leading `/`.
    pub name: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// `State`, e.g. `running`, `exited`, `created`.
    pub state: String,
    /// Names of the networks it is attached to (`NetworkSettings.Networks`),
    /// sorted.
    #[serde(default)]
    pub networks: Vec<String>,
    /// Its endpoints (`NetworkSettings.Networks`: name, full network ID and,
    /// when the engine lists them, aliases), in the order of
    /// [`ContainerSummary::networks`].
    #[serde(default)]
    pub endpoints: Vec<EndpointInfo>,
}

/// What `POST /networks/create` gets for a sandbox's own network
/// ([`crate::link`], SPEC §4.4): a `bridge` network of local scope.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkSpec {
    /// The network's name (`<sandbox name>-link`).
    pub name: String,
    /// `Internal`: no route out (the sandbox's internet as planned).
    pub internal: bool,
    /// Network labels ([`crate::labels::LINK`]).
    pub labels: BTreeMap<String, String>,
    /// Driver options (`com.docker.network.bridge.enable_icc`).
    pub options: BTreeMap<String, String>,
}

/// A command to run in a container through the exec API.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecSpec {
    /// argv; never interpreted by a shell unless argv says so.
    pub cmd: Vec<String>,
    /// `KEY=value` pairs added for this command.
    pub env: Vec<String>,
    /// Working directory.
    pub working_dir: Option<String>,
    /// User override.
    pub user: Option<String>,
}

/// A byte stream to odek's supervisor in a sandbox: its stdout
/// (demultiplexed by the engine port) and its stdin
/// ([`DockerApi::attach_session`], [`DockerApi::exec_session`]).
pub struct Link {
    /// The supervisor's stdout, in chunks cut anywhere.
    pub output: futures_util::stream::BoxStream<'static, std::io::Result<Vec<u8>>>,
    /// Its stdin.
    pub input: Box<dyn tokio::io::AsyncWrite + Send + Unpin>,
    /// Anything that must live as long as the stream (a fork registration).
    pub keep: Option<Box<dyn Send + Sync>>,
}

/// Which stream a chunk of exec output came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StreamKind {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// Receives exec output as it arrives.
pub type OutputSink<'a> = &'a (dyn Fn(StreamKind, &[u8]) + Send + Sync);

/// Receives progress lines of slow operations (pulls, builds).
pub type ProgressSink<'a> = &'a (dyn Fn(&str) + Send + Sync);

/// The Engine operations, for call logs and error messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// `GET /version` (+ `/_ping`).
    Version,
    /// `GET /networks`.
    ListNetworks,
    /// `GET /networks/{id}`.
    InspectNetwork,
    /// `GET /images/{name}/json`.
    InspectImage,
    /// `POST /images/create`.
    PullImage,
    /// `POST /build`.
    BuildImage,
    /// `POST /containers/create`.
    CreateContainer,
    /// `POST /containers/{id}/start`.
    StartContainer,
    /// `POST /networks/{id}/connect`.
    ConnectNetwork,
    /// `POST /networks/{id}/disconnect` (force).
    DisconnectNetwork,
    /// `POST /networks/create`.
    CreateNetwork,
    /// `DELETE /networks/{id}`.
    RemoveNetwork,
    /// `GET /containers/{id}/json`.
    InspectContainer,
    /// `GET /containers/{id}/top`.
    ListProcesses,
    /// `DELETE /containers/{id}?force=1`.
    RemoveContainer,
    /// `GET /containers/json`.
    ListContainers,
    /// `POST /containers/{id}/exec` + start + inspect.
    Exec,
    /// `POST /containers/{id}/attach?stream=1&stdin=1`.
    AttachContainer,
    /// `POST /containers/{id}/wait?condition=removed`.
    WaitContainer,
    /// `GET /info`.
    Info,
    /// `HEAD /containers/{id}/archive?path=…`.
    StatPath,
    /// `GET /containers/{id}/archive?path=…`.
    ReadFile,
    /// `PUT /containers/{id}/archive?path=…`.
    UploadArchive,
    /// `GET /containers/{id}/archive?path=…` of a directory.
    DownloadArchive,
    /// `GET /distribution/{name}/json`.
    DistributionInspect,
    /// `GET /containers/{id}/logs`.
    Logs,
}

impl Op {
    /// True for calls that change the engine's state.
    pub fn is_mutating(self) -> bool {
        matches!(
            self,
            Op::PullImage
                | Op::BuildImage
                | Op::CreateContainer
                | Op::StartContainer
                | Op::ConnectNetwork
                | Op::DisconnectNetwork
                | Op::CreateNetwork
                | Op::RemoveNetwork
                | Op::RemoveContainer
                | Op::Exec
                | Op::UploadArchive
        )
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Op::Version => "version",
            Op::ListNetworks => "list networks",
            Op::InspectNetwork => "inspect network",
            Op::InspectImage => "inspect image",
            Op::PullImage => "pull image",
            Op::BuildImage => "build image",
            Op::CreateContainer => "create container",
            Op::StartContainer => "start container",
            Op::ConnectNetwork => "connect network",
            Op::DisconnectNetwork => "disconnect network",
            Op::CreateNetwork => "create network",
            Op::RemoveNetwork => "remove network",
            Op::InspectContainer => "inspect container",
            Op::ListProcesses => "list container processes",
            Op::RemoveContainer => "remove container",
            Op::ListContainers => "list containers",
            Op::Exec => "exec",
            Op::AttachContainer => "attach to container",
            Op::WaitContainer => "wait for container",
            Op::Info => "engine info",
            Op::StatPath => "stat a path in the container",
            Op::ReadFile => "read a file of the container",
            Op::UploadArchive => "copy the workspace into the container",
            Op::DownloadArchive => "copy the workspace out of the container",
            Op::DistributionInspect => "ask the registry for an image",
            Op::Logs => "read a container's log",
        };
        f.write_str(s)
    }
}

/// How an Engine call failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EngineErrorKind {
    /// No socket, connection refused or reset, I/O error: the daemon is not
    /// (or no longer) answering.
    Unreachable,
    /// The call did not finish within its time budget.
    Timeout,
    /// 404: no such object.
    NotFound,
    /// The daemon answered with an error (4xx/5xx other than 404).
    Rejected,
    /// A streamed answer (pull, build) ended in an error object.
    Stream,
    /// The answer could not be understood.
    Protocol,
}

/// An Engine call that failed. Messages come from the daemon and may name
/// user objects; they never carry env values.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[error("{op} failed: {message}")]
pub struct EngineError {
    /// The call.
    pub op: Op,
    /// The kind of failure.
    pub kind: EngineErrorKind,
    /// HTTP status when the daemon answered.
    pub status: Option<u16>,
    /// The daemon's (or the transport's) message.
    pub message: String,
}

impl EngineError {
    /// Builds an error.
    pub(crate) fn new(op: Op, kind: EngineErrorKind, message: impl Into<String>) -> EngineError {
        EngineError {
            op,
            kind,
            status: None,
            message: message.into(),
        }
    }

    /// True when the daemon did not answer (unreachable or timed out).
    pub(crate) fn is_unreachable(&self) -> bool {
        matches!(
            self.kind,
            EngineErrorKind::Unreachable | EngineErrorKind::Timeout
        )
    }
}

/// The exit of an exec.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecExit {
    /// Exit code of the command (`None` when the engine could not tell, e.g.
    /// the container died mid-exec).
    pub code: Option<i64>,
    /// Set when the command's program never started (not found, not
    /// executable, no such working directory): the engine's own text about
    /// it was not passed to the output, and the core says it in its words
    /// ([`crate::exec`]'s one message for every exec path).
    #[serde(default)]
    pub not_started: Option<NotStarted>,
}

impl ExecExit {
    /// An exec that ran and ended with `code`.
    pub fn code(code: Option<i64>) -> ExecExit {
        ExecExit {
            code,
            not_started: None,
        }
    }
}

/// Why a command's program did not start, as the supervisor's protocol
/// names it: not found, not executable, no such working directory.
pub use odek_supervisor::proto::NotStarted;

/// Why odek refuses a sandbox under gVisor (`runsc`), check by check
/// (SPEC §6.1 "runtime", docs/SANDBOXING.md "gVisor (runsc)").
/// True for a runtime name that says gVisor: `runsc`, or containerd's
/// shim names `io.containerd.runsc.*`.
pub fn is_gvisor_name(name: &str) -> bool {
    name == "runsc" || name.starts_with("io.containerd.runsc.")
}

pub(crate) const GVISOR_UNSUPPORTED: &str = "odek refuses gVisor rather than run a sandbox whose checks do not hold: the container's process on the host (State.Pid) is gVisor's kernel (runsc-sandbox), so the kernel read-backs would check the wrong process (its seccomp mode 2 is gVisor's own filter, not odek's profile; its mounts are not the container's /workspace), and the engine's process list (docker top) names host processes instead of the sandbox's, so the idle-process and untouched checks cannot hold; use runc (--sandbox-runtime runc) or leave sandbox_runtime unset on an engine whose default is not gVisor (docs/SANDBOXING.md, \"gVisor (runsc)\")";

/// What the engine says of how it isolates containers (`GET /info`'s
/// `SecurityOptions`, `Runtimes` and `DefaultRuntime`), where it decides
/// whose user a sandbox runs as (SPEC §6.1 "user") and which OCI runtimes
/// a sandbox may ask for (`sandbox_runtime`, SPEC §6.1 "runtime").
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EngineSecurity {
    /// The daemon runs rootless (`name=rootless`): uid 0 in a container is
    /// the daemon's user on the host, and other uids map to its subordinate
    /// ids.
    #[serde(default)]
    pub rootless: bool,
    /// The daemon remaps user namespaces (`name=userns`): container uids
    /// are other uids on the host.
    #[serde(default)]
    pub userns: bool,
    /// The OCI runtimes the engine has registered (`Runtimes`' names, e.g.
    /// `runc`, `io.containerd.runc.v2`, and `runsc` when daemon.json
    /// registers gVisor), sorted; empty when the engine does not say.
    #[serde(default)]
    pub runtimes: Vec<String>,
    /// The runtime a container gets when create names none
    /// (`DefaultRuntime`); `None` when the engine does not say.
    #[serde(default)]
    pub default_runtime: Option<String>,
    /// Those of [`runtimes`](Self::runtimes) that are gVisor: registered
    /// with a `path` whose file name is `runsc` (daemon.json's `"runtimes":
    /// {"runsc": {"path": "/usr/bin/runsc"}}`), or named so
    /// ([`is_gvisor_name`]), sorted. A gVisor under another name and path
    /// (a wrapper script, a `runtimeType` shim, which the API model odek
    /// reads does not carry) is refused only after start, when its process
    /// on the host shows `runsc-sandbox`. odek refuses a
    /// sandbox on one (SPEC §6.1 "runtime", docs/SANDBOXING.md "gVisor
    /// (runsc)").
    #[serde(default)]
    pub gvisor: Vec<String>,
    /// The engine's own ID (`/info`'s `ID`: a UUID on Docker 23+, twelve
    /// colon-separated groups on 20.10), `None` when it reports none.
    /// Network IDs are unique only per engine, so approvals bind to it
    /// (SPEC §7.3). Always `None` on Podman: its `/info` `ID` is a new
    /// random UUID on every call, so the endpoint's address stands in
    /// ([`engine_binding`]).
    #[serde(default)]
    pub id: Option<String>,
    /// The engine is Podman's Docker-compatible API service (`/version`
    /// lists a component named `Podman Engine`): its release, e.g. `4.3.1`;
    /// `None` for Docker (SPEC §6.2.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub podman: Option<String>,
}

/// Why a sandbox that reaches networks (`sandbox_compose_project`,
/// `sandbox_networks`, `sandbox_stack`, `sandbox_egress`) is refused on
/// Podman (SPEC §6.2.3): what Podman lacks.
pub const PODMAN_LACKS_NETWORKS: &str = "Podman lacks what odek's link and out networks need (SPEC §4.4): its bridge networks drop com.docker.network.bridge.inhibit_ipv4, so every network, internal ones included, holds the gateway address on the host and a sandbox would reach every host service bound to a wildcard address; and they drop com.docker.network.bridge.enable_icc=false, so sandboxes sharing odek-out would reach each other. On Podman a sandbox runs with sandbox_network none (its default network is not Docker's bridge either); to reach a Compose project's services, use Docker";

/// The component `/version` names Podman's engine by.
pub const PODMAN_COMPONENT: &str = "Podman Engine";

/// Podman's release when `/version`'s components (name, version) include
/// [`PODMAN_COMPONENT`]; `None` for Docker, whose components are `Engine`,
/// `containerd`, `runc`, `docker-init`.
pub fn podman_release<'a>(
    components: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Option<String> {
    components
        .into_iter()
        .find(|(name, _)| *name == PODMAN_COMPONENT)
        .map(|(_, v)| v.trim().to_string())
}

/// A path in a container's filesystem as `HEAD /containers/{id}/archive`
/// reports it: the path itself, a final symlink not followed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathStat {
    /// A directory.
    pub is_dir: bool,
    /// A symbolic link.
    pub is_symlink: bool,
    /// A regular file.
    pub is_regular: bool,
    /// Where a symlink points (untrusted text from the image).
    pub link_target: String,
}

/// The Engine calls odek makes — nothing more (SPEC §2).
///
/// Every method maps to one Engine API call (exec to create + start +
/// inspect). Implementations must be cheap to share across threads.
#[async_trait]
pub trait DockerApi: Send + Sync {
    /// Where this engine is reached (for messages and verbose output).
    fn endpoint(&self) -> &Endpoint;

    /// Why this engine cannot run odek's supervisor in its sandboxes, when
    /// it cannot for a reason of its own (the in-memory engine runs no
    /// process); `None` by default, the engine's address then decides
    /// ([`crate::supervisor::Supervision::for_plan`]).
    fn no_supervisor(&self) -> Option<&'static str> {
        None
    }

    /// Pings the daemon and negotiates the API version (SPEC §6.2).
    async fn version(&self) -> Result<EngineInfo, EngineError>;

    /// Lists networks matching `filter`, evaluated by the daemon.
    async fn list_networks(&self, filter: &NetworkFilter) -> Result<Vec<NetworkInfo>, EngineError>;

    /// Inspects one network by ID (or, as Docker does, by name or ID prefix).
    /// `Ok(None)` when there is no such network.
    async fn inspect_network(&self, id: &str) -> Result<Option<NetworkInfo>, EngineError>;

    /// Inspects an image by reference or ID. `Ok(None)` when absent locally.
    async fn inspect_image(&self, reference: &str) -> Result<Option<ImageInfo>, EngineError>;

    /// Pulls `reference`; a stream ending in an error object is an error
    /// even though the HTTP status was 200 (SPEC §6.1).
    async fn pull_image(
        &self,
        reference: &str,
        progress: ProgressSink<'_>,
    ) -> Result<(), EngineError>;

    /// Builds an image from a tar build context with the given Dockerfile
    /// path inside it, tagging it `tag`. Returns the image ID.
    async fn build_image(
        &self,
        context_tar: Vec<u8>,
        dockerfile: &str,
        tag: &str,
        labels: &BTreeMap<String, String>,
        progress: ProgressSink<'_>,
    ) -> Result<String, EngineError>;

    /// Creates a container.
    async fn create_container(&self, spec: &ContainerSpec) -> Result<Created, EngineError>;

    /// Starts a created container.
    async fn start_container(&self, id: &str) -> Result<(), EngineError>;

    /// Connects a container to a network (by full network ID) with the
    /// given DNS aliases (none: only its name and short ID resolve).
    async fn connect_network(
        &self,
        network_id: &str,
        container_id: &str,
        aliases: &[String],
    ) -> Result<(), EngineError>;

    /// Disconnects a container from a network (forced: also a stopped or
    /// vanished container's endpoint). `Ok` when it was not connected.
    async fn disconnect_network(
        &self,
        network_id: &str,
        container_id: &str,
    ) -> Result<(), EngineError>;

    /// Creates a `bridge` network; returns its full ID.
    async fn create_network(&self, spec: &NetworkSpec) -> Result<String, EngineError>;

    /// Removes a network by full ID. `Ok(true)` when it existed and is
    /// gone, `Ok(false)` when there was no such network; a network with
    /// endpoints is [`EngineErrorKind::Rejected`].
    async fn remove_network(&self, id: &str) -> Result<bool, EngineError>;

    /// The containers attached to a network with one of `names` (names or
    /// full IDs; Docker's `network` filter, evaluated by the daemon) — the
    /// running ones, with `all` also stopped ones (which keep their
    /// endpoint settings) — each with its endpoints
    /// ([`ContainerSummary::endpoints`]). One call.
    async fn list_network_members(
        &self,
        names: &[String],
        all: bool,
    ) -> Result<Vec<ContainerSummary>, EngineError>;

    /// Inspects a container by ID or name. `Ok(None)` when absent.
    async fn inspect_container(&self, id: &str) -> Result<Option<ContainerInfo>, EngineError>;

    /// The command lines (`ps` CMD column, arguments joined by spaces) of
    /// the processes running in container `id`, in the engine's order
    /// (`GET /containers/{id}/top`). Errors: a container that is not
    /// running is [`EngineErrorKind::Rejected`] with status 409, an absent
    /// one [`EngineErrorKind::NotFound`]. Used to confirm the idle process
    /// runs before a launch is reported (SPEC §6.1).
    async fn container_processes(&self, id: &str) -> Result<Vec<String>, EngineError>;

    /// Force-removes a container (and its anonymous volumes). `Ok(true)`
    /// when it existed and is gone (or already being removed), `Ok(false)`
    /// when there was no such container.
    async fn remove_container(&self, id: &str) -> Result<bool, EngineError>;

    /// Lists containers (all states) carrying `label` (`key` or `key=value`).
    async fn list_containers(&self, label: &str) -> Result<Vec<ContainerSummary>, EngineError>;

    /// Runs a command in a running container, streaming its output to
    /// `output`, and returns its exit code.
    async fn exec(
        &self,
        container_id: &str,
        spec: &ExecSpec,
        output: OutputSink<'_>,
    ) -> Result<ExecExit, EngineError>;

    /// Attaches to container `id`'s stdin (stream, no output) and returns
    /// the connection, held until the [`StdinHold`] is dropped. Made before
    /// start, so that an owned sandbox never runs without its owner's
    /// connection (SPEC §6.1 owner lifetime).
    async fn attach_stdin(&self, id: &str) -> Result<StdinHold, EngineError>;

    /// Attaches to container `id`'s stdin and stdout (stream) when its
    /// process is odek's supervisor: the owner link, used both ways (issue
    /// 21). Made before start, as [`DockerApi::attach_stdin`]; the
    /// connection closes when the returned link is dropped. An engine that
    /// cannot ([`EngineErrorKind::Rejected`]) gets sandboxes without a
    /// supervisor.
    async fn attach_session(&self, id: &str) -> Result<Link, EngineError>;

    /// Runs `spec` in container `id` through the exec API with its stdin
    /// and stdout attached as a stream (a relay to the supervisor, issue
    /// 21), returning that stream; the exec's stderr is logged.
    async fn exec_session(&self, id: &str, spec: &ExecSpec) -> Result<Link, EngineError>;

    /// How the engine isolates containers (`GET /info`): rootless, user
    /// namespaces (SPEC §6.1 "user"), its OCI runtimes and default runtime
    /// (SPEC §6.1 "runtime").
    async fn security(&self) -> Result<EngineSecurity, EngineError>;

    /// What `path` is in container `id`'s filesystem (`HEAD
    /// /containers/{id}/archive`; intermediate symlinks resolve inside the
    /// container, a final one is reported, not followed). `Ok(None)` when
    /// there is no such path.
    async fn stat_path(&self, id: &str, path: &str) -> Result<Option<PathStat>, EngineError>;

    /// The content of the regular file `path` in container `id` (`GET
    /// /containers/{id}/archive`), at most `max` bytes. `Ok(None)` when
    /// there is no such path or it is not a regular file (a final symlink
    /// is not followed). A larger file is [`EngineErrorKind::Rejected`].
    async fn read_file(
        &self,
        id: &str,
        path: &str,
        max: usize,
    ) -> Result<Option<Vec<u8>>, EngineError>;

    /// Extracts the tar `archive` into directory `path` of container `id`
    /// (`PUT /containers/{id}/archive`): the copied workspace's upload at
    /// launch (SPEC §6.1 "workspace"; the archive is made by
    /// [`crate::workspace_copy::pack`]).
    async fn upload_archive(
        &self,
        id: &str,
        path: &str,
        archive: Vec<u8>,
    ) -> Result<(), EngineError>;

    /// The tar of `path` in container `id` (`GET
    /// /containers/{id}/archive`), at most `max` bytes: the copied
    /// workspace's copy-back (SPEC §6.1 "workspace"; written by
    /// [`crate::workspace_copy::unpack`]). `Ok(None)` when there is no such
    /// path; a larger archive is [`EngineErrorKind::Rejected`].
    async fn download_archive(
        &self,
        id: &str,
        path: &str,
        max: u64,
    ) -> Result<Option<Vec<u8>>, EngineError>;

    /// Begins waiting, on its own connection and task, for container `id`
    /// to be removed (`condition=removed`); the [`ExitWait`] answers its
    /// exit code. Returns once the wait has been sent. Used before start
    /// for an auto-removed container, whose exit code is gone with it.
    async fn wait_removed(&self, id: &str) -> Result<ExitWait, EngineError>;

    /// The container's log so far (stdout and stderr, as text, lossy
    /// UTF-8), at most `max` bytes from its end; `Ok(None)` when the
    /// container does not exist. Read from the egress proxy's container
    /// (its ready line and refusals, SPEC §4.5).
    async fn container_logs(&self, id: &str, max: usize) -> Result<Option<String>, EngineError>;

    /// Asks the registry of `reference`, through the daemon and without
    /// pulling (`GET /distribution/{name}/json`, the daemon's own
    /// credentials), whether it serves the image: `Ok(Some(digest))` with
    /// the manifest's digest (`sha256:…`) when it does, an error with the
    /// registry's or the daemon's words when it does not or cannot be
    /// asked. `Ok(None)`: this engine cannot tell (the default).
    async fn registry_digest(&self, reference: &str) -> Result<Option<String>, EngineError> {
        let _ = reference;
        Ok(None)
    }
}
