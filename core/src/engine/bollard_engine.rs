//! The real Docker Engine API, through bollard. The only file that knows
//! bollard or HTTP exist (SPEC §2).
//!
//! Version negotiation (SPEC §6.2): the first call asks `/version` with the
//! oldest version odek supports; the engine answers its own API version and
//! every later request is sent as `/v<min(engine, client)>/…`. An engine that
//! only speaks older versions is refused naming both; one that dropped old
//! versions says its minimum, and odek asks again with that.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use async_trait::async_trait;
use bollard::errors::Error as BError;
use bollard::models::{
    ContainerCreateBody, EndpointSettings, ExecConfig, HostConfig, Mount, MountType,
    NetworkConnectRequest, NetworkCreateRequest, NetworkDisconnectRequest, NetworkingConfig,
};
use bollard::query_parameters::{
    BuildImageOptions, ContainerArchiveInfoOptions, CreateContainerOptions, CreateImageOptions,
    DownloadFromContainerOptions, InspectContainerOptions, InspectNetworkOptions,
    ListContainersOptions, ListNetworksOptions, RemoveContainerOptions, UploadToContainerOptions,
};
use bollard::{ClientVersion, Docker};
use futures_util::StreamExt;
use tokio::sync::OnceCell;

use super::endpoint::Address;
use super::raw::{attach_session, attach_stdin, ping, tls_config, tls_failure, wait_removed, Dial};
use super::{
    ApiVersion, ContainerInfo, ContainerSpec, ContainerSummary, Created, DockerApi, Endpoint,
    EndpointInfo, EngineError, EngineErrorKind, EngineInfo, EngineSecurity, ExecExit, ExecSpec,
    ExitWait, Hardening, ImageInfo, IpamSubnet, MountInfo, NetworkFilter, NetworkInfo, NetworkSpec,
    Op, OutputSink, PathStat, ProgressSink, StdinHold, StreamKind, MIN_API_VERSION,
};

/// The newest API version this build sends (bollard's model version).
const CLIENT_MAX: ApiVersion = ApiVersion {
    major: 1,
    minor: 53,
};

/// Per-call time budgets. `ODEK_DOCKER_TIMEOUT` (seconds) scales the
/// non-streaming calls; streamed calls (pull, build) time out when no
/// progress arrives for the idle budget.
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    /// `/version` and the first connection.
    pub ping: Duration,
    /// Every other non-streaming call.
    pub call: Duration,
    /// Longest silence in a pull or build stream.
    pub stream_idle: Duration,
}

impl Timeouts {
    /// Defaults (5 s ping, 60 s per call, 300 s stream silence), or
    /// `ODEK_DOCKER_TIMEOUT` seconds for ping and calls when set.
    /// A value that is not valid ([`crate::config::parse_docker_timeout`]) is ignored here;
    /// config loading refuses it before any Engine call.
    pub(crate) fn from_env() -> Timeouts {
        let base = std::env::var("ODEK_DOCKER_TIMEOUT")
            .ok()
            .and_then(|v| crate::config::parse_docker_timeout(&v).ok());
        Timeouts {
            ping: base.unwrap_or(Duration::from_secs(5)),
            call: base.unwrap_or(Duration::from_secs(60)),
            stream_idle: Duration::from_secs(300).max(base.unwrap_or_default()),
        }
    }
}

/// [`DockerApi`] over the Docker Engine API (bollard).
pub struct BollardEngine {
    endpoint: Endpoint,
    /// How the requests written by hand reach the daemon (TLS included).
    dial: Dial,
    timeouts: Timeouts,
    /// The client before negotiation (used only for `/version`).
    connect: ConnectFn,
    /// The negotiated client and what the engine said.
    negotiated: OnceCell<(Docker, EngineInfo)>,
    /// Podman's release when the engine is Podman's API service (its
    /// `/version` components), asked once (SPEC §6.2.3).
    podman: OnceCell<Option<String>>,
}

type ConnectFn = Box<dyn Fn(ApiVersion) -> Result<Docker, BError> + Send + Sync>;

impl BollardEngine {
    /// Prepares a client for `endpoint`. No connection is made until the first
    /// call; connection errors surface from [`DockerApi::version`].
    pub fn new(endpoint: Endpoint) -> BollardEngine {
        Self::with_timeouts(endpoint, Timeouts::from_env())
    }

    /// As [`BollardEngine::new`] with explicit time budgets.
    pub(crate) fn with_timeouts(endpoint: Endpoint, timeouts: Timeouts) -> BollardEngine {
        let address = endpoint.address.clone();
        let dial = Dial {
            address: address.clone(),
            tls: endpoint.tls.clone().map(|t| (tls_config(&t), t)),
            connect_timeout: timeouts.ping,
        };
        let ssh_timeout = timeouts.ping;
        let tls = dial.tls.clone();
        // bollard's own timeout is whole seconds; ours (tokio) is the real one.
        let secs = timeouts.call.as_secs().max(1) + 1;
        let connect: ConnectFn = Box::new(move |v: ApiVersion| {
            let cv = ClientVersion {
                major_version: v.major as usize,
                minor_version: v.minor as usize,
            };
            let docker = match (&address, &tls) {
                (Address::Unix { path }, _) => {
                    Docker::connect_with_unix(&path.to_string_lossy(), secs, &cv)
                }
                (Address::Tcp { authority }, None) => {
                    Docker::connect_with_http(&format!("tcp://{authority}"), secs, &cv)
                }
                (Address::Tcp { authority }, Some((config, material))) => {
                    let config = config.clone().map_err(|e| BError::IOError {
                        err: std::io::Error::other(TlsRefused(e)),
                    })?;
                    connect_with_tls(&address, authority, config, material.clone(), secs, &cv)
                }
                (Address::Ssh { target }, _) => connect_with_ssh(target, ssh_timeout, secs, &cv),
            }?;
            // bollard 0.21 builds `/v1.xx` + path with `Url::join`, which drops
            // the version for absolute paths, so requests would go out
            // unversioned (the engine then applies its newest API). Put the
            // negotiated version back on every request (SPEC §6.2).
            Ok(docker.with_request_modifier(move |req| versioned(req, v)))
        });
        BollardEngine {
            endpoint,
            dial,
            timeouts,
            connect,
            negotiated: OnceCell::new(),
            podman: OnceCell::new(),
        }
    }

    /// Podman's release when the engine is Podman's Docker-compatible API
    /// service (`/version` lists a `Podman Engine` component), else `None`
    /// (Docker; an engine that will not answer `/version` is taken for
    /// Docker and asked again next time).
    async fn podman(&self) -> Result<Option<String>, EngineError> {
        if let Some(p) = self.podman.get() {
            return Ok(p.clone());
        }
        let d = self.client().await?;
        let v = timed(Op::Version, self.timeouts.call, d.version()).await?;
        let components = v.components.unwrap_or_default();
        let found = super::podman_release(
            components
                .iter()
                .map(|c| (c.name.as_str(), c.version.as_str())),
        );
        let _ = self.podman.set(found.clone());
        Ok(found)
    }

    /// The refusal of a network operation on Podman (SPEC §6.2.3): its
    /// bridge networks drop the options odek's isolation rests on, so no
    /// network is made or joined there, whichever path asked (a resolve
    /// whose `/info` was refused, a plan from the C ABI). `Ok` on Docker,
    /// and when `/version` does not answer (then the create that follows
    /// fails on Podman: its seccomp profile goes inline).
    async fn refuse_on_podman(&self, op: Op) -> Result<(), EngineError> {
        match self.podman().await {
            Ok(Some(release)) => Err(EngineError::new(
                op,
                EngineErrorKind::Rejected,
                format!(
                    "the engine is Podman {release}, where odek makes and joins no network: {}",
                    super::PODMAN_LACKS_NETWORKS
                ),
            )),
            _ => Ok(()),
        }
    }

    async fn client(&self) -> Result<&Docker, EngineError> {
        Ok(&self.negotiate().await?.0)
    }

    /// The client for an engine that speaks up to API `server`: refused
    /// below [`MIN_API_VERSION`], else the lower of `server` and
    /// [`CLIENT_MAX`], sent on every request from then on.
    fn settle(
        &self,
        server: ApiVersion,
        release: String,
    ) -> Result<(Docker, EngineInfo), EngineError> {
        if server < MIN_API_VERSION {
            return Err(EngineError::new(
                Op::Version,
                EngineErrorKind::Rejected,
                format!(
                    "the engine speaks API {server} at most; odek needs API {MIN_API_VERSION} or newer (Docker 19.03+)"
                ),
            ));
        }
        let use_version = server.min(CLIENT_MAX);
        let docker = (self.connect)(use_version).map_err(|e| map_err(Op::Version, e))?;
        Ok((
            docker,
            EngineInfo {
                api_version: use_version,
                server_version: release,
            },
        ))
    }

    async fn negotiate(&self) -> Result<&(Docker, EngineInfo), EngineError> {
        self.negotiated
            .get_or_try_init(|| async {
                // `/_ping` answers in well under a millisecond with the
                // engine's API version in a header; `/version` can take
                // several (Docker 20.10 asks containerd and runc). Fall back
                // to `/version` when the header is missing.
                if let Some((server, release)) = ping(&self.dial, self.timeouts.ping).await? {
                    return self.settle(server, release);
                }
                let mut ask = MIN_API_VERSION;
                for _ in 0..2 {
                    let docker = (self.connect)(ask).map_err(|e| map_err(Op::Version, e))?;
                    let answer = timed(Op::Version, self.timeouts.ping, docker.version()).await;
                    match answer {
                        Ok(v) => {
                            let server = v
                                .api_version
                                .as_deref()
                                .and_then(ApiVersion::parse)
                                .ok_or_else(|| {
                                    EngineError::new(
                                        Op::Version,
                                        EngineErrorKind::Protocol,
                                        "the engine did not report its API version",
                                    )
                                })?;
                            return self.settle(server, v.version.unwrap_or_default());
                        }
                        Err(e) => match version_hint(&e.message) {
                            VersionHint::TooOld(min) if min > ask && min <= CLIENT_MAX => ask = min,
                            VersionHint::TooNew(max) => {
                                return Err(EngineError {
                                    kind: EngineErrorKind::Rejected,
                                    message: format!(
                                        "the engine speaks API {max} at most; odek needs API {MIN_API_VERSION} or newer (Docker 19.03+)"
                                    ),
                                    ..e
                                })
                            }
                            _ => return Err(e),
                        },
                    }
                }
                Err(EngineError::new(
                    Op::Version,
                    EngineErrorKind::Protocol,
                    "API version negotiation did not converge",
                ))
            })
            .await
    }
}

/// Prefixes a request path with `/v<major>.<minor>` unless it has one.
fn versioned(mut req: bollard::BollardRequest, v: ApiVersion) -> bollard::BollardRequest {
    let uri = req.uri().clone();
    let pq = uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    if pq.starts_with("/v1.") {
        return req;
    }
    let mut parts = uri.into_parts();
    // Unparseable (never for paths bollard built): leave it as it was.
    if let Ok(p) = format!("/v{}.{}{pq}", v.major, v.minor).parse() {
        parts.path_and_query = Some(p);
        if let Ok(u) = http::Uri::from_parts(parts) {
            *req.uri_mut() = u;
        }
    }
    req
}

enum VersionHint {
    TooOld(ApiVersion),
    TooNew(ApiVersion),
    None,
}

/// Reads the engine's version refusal ("client version 1.40 is too old.
/// Minimum supported API version is 1.44" / "… too new. Maximum …").
fn version_hint(message: &str) -> VersionHint {
    let after = |phrase: &str| {
        let rest = &message[message.find(phrase)? + phrase.len()..];
        let token: String = rest
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        ApiVersion::parse(token.trim_end_matches('.'))
    };
    if let Some(v) = after("Minimum supported API version is ") {
        VersionHint::TooOld(v)
    } else if let Some(v) = after("Maximum supported API version is ") {
        VersionHint::TooNew(v)
    } else {
        VersionHint::None
    }
}

async fn timed<T>(
    op: Op,
    budget: Duration,
    fut: impl std::future::Future<Output = Result<T, BError>>,
) -> Result<T, EngineError> {
    match tokio::time::timeout(budget, fut).await {
        Ok(r) => r.map_err(|e| map_err(op, e)),
        Err(_) => Err(EngineError::new(
            op,
            EngineErrorKind::Timeout,
            format!("no answer within {:.1} s", budget.as_secs_f64()),
        )),
    }
}

/// A TLS failure that refuses the endpoint (a certificate refused, or
/// material that makes no client configuration): carried through bollard
/// in an I/O error, mapped to `Rejected` by [`map_err`] (SPEC §6.2.1).
#[derive(Debug)]
struct TlsRefused(String);

impl std::fmt::Display for TlsRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TlsRefused {}

/// A bollard client for `https://authority` over hyper-rustls with
/// `config` ([`tls_config`]): bollard's own `connect_with_ssl` would add
/// the system's roots to `ca.pem` and read the key at each handshake,
/// dropping its errors. A refused certificate comes back as [`TlsRefused`]
/// with the fix ([`tls_failure`]).
fn connect_with_tls(
    address: &Address,
    authority: &str,
    config: std::sync::Arc<rustls::ClientConfig>,
    material: super::Tls,
    secs: u64,
    cv: &ClientVersion,
) -> Result<Docker, BError> {
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config((*config).clone())
        .https_only()
        .enable_http1()
        .build();
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .pool_max_idle_per_host(0)
        .build(connector);
    let address = address.clone();
    let material = std::sync::Arc::new(material);
    Docker::connect_with_custom_transport(
        move |req: bollard::BollardRequest| {
            let client = client.clone();
            let address = address.clone();
            let material = material.clone();
            async move {
                client
                    .request(req)
                    .await
                    .map_err(|e| match tls_failure(&e, &address, &material) {
                        (true, message) => BError::IOError {
                            err: std::io::Error::other(TlsRefused(message)),
                        },
                        (false, _) => BError::from(e),
                    })
            }
        },
        Some(format!("https://{authority}")),
        secs,
        cv,
    )
}

/// An `ssh` connection that failed (SPEC §6.2.2), explained
/// ([`super::ssh::Diagnostics::explain`]): carried through bollard in an
/// I/O error, its kind and message kept by [`map_err`].
#[derive(Debug)]
struct SshFailed(EngineError);

impl std::fmt::Display for SshFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.message)
    }
}

impl std::error::Error for SshFailed {}

/// A bollard client whose every request is a connection of its own through
/// an `ssh` child running `docker system dial-stdio` on `target` (SPEC
/// §6.2.2), as the Docker CLI does: HTTP/1 (with upgrades, for exec and
/// attach) over the child's stdio; the child is killed when the connection
/// ends. A failed connection comes back as [`SshFailed`], with what `ssh`
/// said and the fix.
fn connect_with_ssh(
    target: &super::SshTarget,
    connect_timeout: Duration,
    secs: u64,
    cv: &ClientVersion,
) -> Result<Docker, BError> {
    let target = std::sync::Arc::new(target.clone());
    Docker::connect_with_custom_transport(
        move |mut req: bollard::BollardRequest| {
            let target = target.clone();
            async move {
                let failed = |e: EngineError| BError::IOError {
                    err: std::io::Error::other(SshFailed(e)),
                };
                let stream = super::ssh::SshStream::spawn(&target, connect_timeout, Op::Version)
                    .await
                    .map_err(failed)?;
                let diagnostics = stream.diagnostics.clone();
                // Origin-form on the wire, as a client sends to a server
                // it is connected to; Go's server wants a Host header.
                if let Some(pq) = req.uri().path_and_query().cloned() {
                    if let Ok(u) = http::Uri::builder().path_and_query(pq).build() {
                        *req.uri_mut() = u;
                    }
                }
                req.headers_mut()
                    .entry(http::header::HOST)
                    .or_insert(http::HeaderValue::from_static("docker"));
                let io = hyper_util::rt::TokioIo::new(stream);
                let (mut send, conn) = match hyper::client::conn::http1::handshake(io).await {
                    Ok(pair) => pair,
                    Err(e) => {
                        return Err(failed(
                            diagnostics
                                .explain(&target, Op::Version, &e.to_string())
                                .await,
                        ))
                    }
                };
                tokio::spawn(async move {
                    let _ = conn.with_upgrades().await;
                });
                match send.send_request(req).await {
                    Ok(resp) => Ok(resp),
                    Err(e) => Err(failed(
                        diagnostics
                            .explain(&target, Op::Version, &error_chain(&e))
                            .await,
                    )),
                }
            }
        },
        Some("http://docker"),
        secs,
        cv,
    )
}

/// An error's text with every cause after it.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if parts.last() != Some(&t) {
            parts.push(t);
        }
        cur = c.source();
    }
    parts.join(": ")
}

fn map_err(op: Op, e: BError) -> EngineError {
    if let BError::IOError { err } = &e {
        if let Some(refused) = err.get_ref().and_then(|i| i.downcast_ref::<TlsRefused>()) {
            return EngineError::new(op, EngineErrorKind::Rejected, refused.0.clone());
        }
        if let Some(failed) = err.get_ref().and_then(|i| i.downcast_ref::<SshFailed>()) {
            return EngineError::new(op, failed.0.kind, failed.0.message.clone());
        }
    }
    let (kind, status, message) = match e {
        BError::DockerResponseServerError {
            status_code,
            message,
        } => {
            let kind = if status_code == 404 {
                EngineErrorKind::NotFound
            } else {
                EngineErrorKind::Rejected
            };
            // Something that is not an engine (a web server on the port)
            // may answer with no body: say what was seen.
            let message = if message.trim().is_empty() {
                format!("HTTP {status_code} with an empty body (is a Docker Engine listening at this endpoint?)")
            } else {
                message
            };
            (kind, Some(status_code), message)
        }
        BError::DockerStreamError { error } => (EngineErrorKind::Stream, None, error),
        BError::RequestTimeoutError => (EngineErrorKind::Timeout, None, "request timed out".into()),
        BError::JsonDataError { .. }
        | BError::JsonSerdeError { .. }
        | BError::APIVersionParseError {} => (EngineErrorKind::Protocol, None, e.to_string()),
        other => (EngineErrorKind::Unreachable, None, other.to_string()),
    };
    EngineError {
        op,
        kind,
        status,
        message,
    }
}

fn filters(pairs: &[(&str, &str)]) -> HashMap<String, Vec<String>> {
    let mut m: HashMap<String, Vec<String>> = HashMap::new();
    for (k, v) in pairs {
        m.entry((*k).to_string())
            .or_default()
            .push((*v).to_string());
    }
    m
}

fn network_from(n: bollard::models::Network) -> NetworkInfo {
    NetworkInfo {
        id: n.id.unwrap_or_default(),
        name: n.name.unwrap_or_default(),
        driver: n.driver.unwrap_or_default(),
        scope: n.scope.unwrap_or_default(),
        internal: n.internal.unwrap_or(false),
        attachable: n.attachable.unwrap_or(false),
        enable_ipv6: n.enable_ipv6.unwrap_or(false),
        labels: n.labels.unwrap_or_default().into_iter().collect(),
        options: n.options.unwrap_or_default().into_iter().collect(),
        containers: BTreeMap::new(),
        ipam: ipam_of(n.ipam),
    }
}

/// A network's `IPAM.Config` as odek reads it (entries without a subnet
/// left out).
fn ipam_of(ipam: Option<bollard::models::Ipam>) -> Vec<IpamSubnet> {
    ipam.and_then(|i| i.config)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|c| {
            Some(IpamSubnet {
                subnet: c.subnet?,
                gateway: c.gateway.filter(|g| !g.is_empty()),
            })
        })
        .collect()
}

/// A container's `NetworkSettings.Networks` as odek reads them, by name.
fn endpoints_of(networks: Option<HashMap<String, EndpointSettings>>) -> Vec<EndpointInfo> {
    let mut endpoints: Vec<EndpointInfo> = networks
        .unwrap_or_default()
        .into_iter()
        .map(|(name, e)| EndpointInfo {
            network_name: name,
            network_id: e.network_id.unwrap_or_default(),
            aliases: e.aliases.unwrap_or_default(),
            endpoint_id: e.endpoint_id.unwrap_or_default(),
            ip: e.ip_address.unwrap_or_default(),
        })
        .collect();
    endpoints.sort_by(|a, b| a.network_name.cmp(&b.network_name));
    endpoints
}

/// A container of `GET /containers/json` as odek reads it.
fn summary_from(c: bollard::models::ContainerSummary) -> ContainerSummary {
    let endpoints = endpoints_of(c.network_settings.and_then(|s| s.networks));
    ContainerSummary {
        id: c.id.unwrap_or_default(),
        name: c
            .names
            .and_then(|n| n.into_iter().next())
            .unwrap_or_default()
            .trim_start_matches('/')
            .to_string(),
        labels: c.labels.unwrap_or_default().into_iter().collect(),
        state: c.state.map(|s| s.to_string()).unwrap_or_default(),
        networks: endpoints.iter().map(|e| e.network_name.clone()).collect(),
        endpoints,
    }
}

#[async_trait]
impl DockerApi for BollardEngine {
    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    async fn version(&self) -> Result<EngineInfo, EngineError> {
        Ok(self.negotiate().await?.1.clone())
    }

    async fn list_networks(&self, filter: &NetworkFilter) -> Result<Vec<NetworkInfo>, EngineError> {
        let d = self.client().await?;
        let f = match filter {
            NetworkFilter::Names(ns) => {
                let pairs: Vec<(&str, &str)> = ns.iter().map(|n| ("name", n.as_str())).collect();
                filters(&pairs)
            }
            NetworkFilter::Label(l) => filters(&[("label", l)]),
        };
        let opts = ListNetworksOptions { filters: Some(f) };
        let list = timed(
            Op::ListNetworks,
            self.timeouts.call,
            d.list_networks(Some(opts)),
        )
        .await?;
        Ok(list.into_iter().map(network_from).collect())
    }

    async fn inspect_network(&self, id: &str) -> Result<Option<NetworkInfo>, EngineError> {
        let d = self.client().await?;
        let opts = InspectNetworkOptions {
            verbose: false,
            scope: None,
        };
        match timed(
            Op::InspectNetwork,
            self.timeouts.call,
            d.inspect_network(id, Some(opts)),
        )
        .await
        {
            Ok(n) => {
                let containers = n
                    .containers
                    .clone()
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(id, c)| (id, c.name.unwrap_or_default()))
                    .collect();
                let mut info = network_from(bollard::models::Network {
                    name: n.name,
                    id: n.id,
                    scope: n.scope,
                    driver: n.driver,
                    internal: n.internal,
                    enable_ipv6: n.enable_ipv6,
                    options: n.options,
                    labels: n.labels,
                    ipam: n.ipam,
                    ..Default::default()
                });
                info.containers = containers;
                Ok(Some(info))
            }
            Err(e) if e.kind == EngineErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn registry_digest(&self, reference: &str) -> Result<Option<String>, EngineError> {
        let d = self.client().await?;
        let found = timed(
            Op::DistributionInspect,
            self.timeouts.call,
            d.inspect_registry_image(reference, None),
        )
        .await?;
        Ok(Some(found.descriptor.digest.unwrap_or_default()))
    }

    async fn inspect_image(&self, reference: &str) -> Result<Option<ImageInfo>, EngineError> {
        let d = self.client().await?;
        match timed(
            Op::InspectImage,
            self.timeouts.call,
            d.inspect_image(reference),
        )
        .await
        {
            Ok(i) => Ok(Some(ImageInfo {
                id: i.id.unwrap_or_default(),
                repo_tags: i.repo_tags.unwrap_or_default(),
                repo_digests: i.repo_digests.unwrap_or_default(),
                labels: i
                    .config
                    .as_ref()
                    .and_then(|c| c.labels.clone())
                    .unwrap_or_default()
                    .into_iter()
                    .collect(),
                volumes: i
                    .config
                    .as_ref()
                    .and_then(|c| c.volumes.clone())
                    .map(|v| v.into_iter().collect())
                    .unwrap_or_default(),
                layers: i
                    .root_fs
                    .as_ref()
                    .and_then(|r| r.layers.as_ref())
                    .map_or(0, Vec::len),
                env: i.config.and_then(|c| c.env).unwrap_or_default(),
            })),
            Err(e) if e.kind == EngineErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn pull_image(
        &self,
        reference: &str,
        progress: ProgressSink<'_>,
    ) -> Result<(), EngineError> {
        let d = self.client().await?;
        let opts = CreateImageOptions {
            from_image: Some(reference.to_string()),
            ..Default::default()
        };
        let mut stream = d.create_image(Some(opts), None, None);
        let mut last = String::new();
        loop {
            let item = tokio::time::timeout(self.timeouts.stream_idle, stream.next()).await;
            let item = match item {
                Ok(Some(item)) => item,
                Ok(None) => return Ok(()),
                Err(_) => {
                    return Err(EngineError::new(
                        Op::PullImage,
                        EngineErrorKind::Timeout,
                        "the pull made no progress",
                    ))
                }
            };
            let info = item.map_err(|e| map_err(Op::PullImage, e))?;
            if let Some(status) = info.status {
                let line = match info.id {
                    Some(id) => format!("{id}: {status}"),
                    None => status,
                };
                if line != last {
                    progress(&line);
                    last = line;
                }
            }
        }
    }

    async fn build_image(
        &self,
        context_tar: Vec<u8>,
        dockerfile: &str,
        tag: &str,
        labels: &BTreeMap<String, String>,
        progress: ProgressSink<'_>,
    ) -> Result<String, EngineError> {
        let d = self.client().await?;
        let opts = BuildImageOptions {
            dockerfile: dockerfile.to_string(),
            t: Some(tag.to_string()),
            rm: true,
            forcerm: true,
            labels: Some(labels.clone().into_iter().collect()),
            ..Default::default()
        };
        let body = bollard::body_full(context_tar.into());
        let mut stream = d.build_image(opts, None, Some(body));
        let mut image_id = None;
        loop {
            let item = tokio::time::timeout(self.timeouts.stream_idle, stream.next()).await;
            let info = match item {
                Ok(Some(item)) => item.map_err(|e| map_err(Op::BuildImage, e))?,
                Ok(None) => break,
                Err(_) => {
                    return Err(EngineError::new(
                        Op::BuildImage,
                        EngineErrorKind::Timeout,
                        "the build made no progress",
                    ))
                }
            };
            if let Some(err) = info.error_detail.and_then(|e| e.message) {
                return Err(EngineError::new(
                    Op::BuildImage,
                    EngineErrorKind::Stream,
                    err,
                ));
            }
            if let Some(s) = info.stream {
                for line in s.lines().filter(|l| !l.trim().is_empty()) {
                    progress(line);
                }
            }
            if let Some(id) = info.aux.and_then(|a| a.id) {
                image_id = Some(id);
            }
        }
        match image_id {
            Some(id) => Ok(id),
            None => match self.inspect_image(tag).await? {
                Some(i) => Ok(i.id),
                None => Err(EngineError::new(
                    Op::BuildImage,
                    EngineErrorKind::Protocol,
                    "the build ended without producing an image",
                )),
            },
        }
    }

    async fn create_container(&self, spec: &ContainerSpec) -> Result<Created, EngineError> {
        let d = self.client().await?;
        let mut body = create_body(spec);
        // Podman takes a seccomp profile by path only (SPEC §6.2.3): a
        // path on the engine's host, so only a Podman on this machine.
        if self.podman().await.ok().flatten().is_some() {
            if !self.endpoint.is_local() {
                return Err(EngineError::new(
                    Op::CreateContainer,
                    EngineErrorKind::Rejected,
                    format!(
                        "the engine at {} is Podman on another machine: Podman takes odek's seccomp profile only as a file on its own host, which odek cannot write or check there, so nothing was created; run odek on that machine",
                        crate::text::shown(self.endpoint.to_string())
                    ),
                ));
            }
            if let Some(host) = body.host_config.as_mut() {
                let opts = host.security_opt.take().unwrap_or_default();
                let sent = super::podman::profile_to_file(&opts).map_err(|why| {
                    EngineError::new(
                        Op::CreateContainer,
                        EngineErrorKind::Rejected,
                        format!("Podman takes a seccomp profile only as a file, and odek's could not be written: {why}"),
                    )
                })?;
                host.security_opt = Some(sent);
            }
        }
        let opts = CreateContainerOptions {
            name: Some(spec.name.clone()),
            ..Default::default()
        };
        let r = timed(
            Op::CreateContainer,
            self.timeouts.call,
            d.create_container(Some(opts), body),
        )
        .await?;
        Ok(Created {
            id: r.id,
            warnings: r.warnings,
        })
    }

    async fn start_container(&self, id: &str) -> Result<(), EngineError> {
        let d = self.client().await?;
        timed(
            Op::StartContainer,
            self.timeouts.call,
            d.start_container(id, None),
        )
        .await
    }

    async fn connect_network(
        &self,
        network_id: &str,
        container_id: &str,
        aliases: &[String],
    ) -> Result<(), EngineError> {
        self.refuse_on_podman(Op::ConnectNetwork).await?;
        let d = self.client().await?;
        let req = NetworkConnectRequest {
            container: container_id.to_string(),
            endpoint_config: Some(EndpointSettings {
                aliases: (!aliases.is_empty()).then(|| aliases.to_vec()),
                ..Default::default()
            }),
        };
        timed(
            Op::ConnectNetwork,
            self.timeouts.call,
            d.connect_network(network_id, req),
        )
        .await
    }

    async fn disconnect_network(
        &self,
        network_id: &str,
        container_id: &str,
    ) -> Result<(), EngineError> {
        let d = self.client().await?;
        let req = NetworkDisconnectRequest {
            container: container_id.to_string(),
            force: Some(true),
        };
        match timed(
            Op::DisconnectNetwork,
            self.timeouts.call,
            d.disconnect_network(network_id, req),
        )
        .await
        {
            // Docker says 404 for a container that is gone or was never
            // connected, 403 "is not connected" on some releases.
            Err(e) if e.kind == EngineErrorKind::NotFound => Ok(()),
            Err(e) if e.message.contains("is not connected") => Ok(()),
            other => other,
        }
    }

    async fn create_network(&self, spec: &NetworkSpec) -> Result<String, EngineError> {
        self.refuse_on_podman(Op::CreateNetwork).await?;
        let d = self.client().await?;
        let req = NetworkCreateRequest {
            name: spec.name.clone(),
            driver: Some("bridge".into()),
            internal: Some(spec.internal),
            labels: Some(spec.labels.clone().into_iter().collect()),
            options: (!spec.options.is_empty()).then(|| spec.options.clone().into_iter().collect()),
            ..Default::default()
        };
        timed(Op::CreateNetwork, self.timeouts.call, d.create_network(req))
            .await
            .map(|r| r.id)
    }

    async fn remove_network(&self, id: &str) -> Result<bool, EngineError> {
        let d = self.client().await?;
        match timed(Op::RemoveNetwork, self.timeouts.call, d.remove_network(id)).await {
            Ok(()) => Ok(true),
            Err(e) if e.kind == EngineErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn list_network_members(
        &self,
        names: &[String],
        all: bool,
    ) -> Result<Vec<ContainerSummary>, EngineError> {
        let d = self.client().await?;
        let pairs: Vec<(&str, &str)> = names.iter().map(|n| ("network", n.as_str())).collect();
        let opts = ListContainersOptions {
            all,
            filters: Some(filters(&pairs)),
            ..Default::default()
        };
        let list = timed(
            Op::ListContainers,
            self.timeouts.call,
            d.list_containers(Some(opts)),
        )
        .await?;
        Ok(list.into_iter().map(summary_from).collect())
    }

    async fn inspect_container(&self, id: &str) -> Result<Option<ContainerInfo>, EngineError> {
        let d = self.client().await?;
        let opts = InspectContainerOptions { size: false };
        let c = match timed(
            Op::InspectContainer,
            self.timeouts.call,
            d.inspect_container(id, Some(opts)),
        )
        .await
        {
            Ok(c) => c,
            Err(e) if e.kind == EngineErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut host = c.host_config.unwrap_or_default();
        // Podman reports the seccomp profile's path (SPEC §6.2.3).
        if self.podman().await.ok().flatten().is_some() {
            host.security_opt = host.security_opt.map(super::podman::profile_from_file);
            let pid = c.state.as_ref().and_then(|s| s.pid);
            super::podman::docker_host_config(&mut host, id, pid);
        }
        let config = c.config.unwrap_or_default();
        let endpoints = endpoints_of(c.network_settings.and_then(|n| n.networks));
        let hardening = hardening(&host, c.mounts.unwrap_or_default());
        Ok(Some(ContainerInfo {
            id: c.id.unwrap_or_default(),
            name: c
                .name
                .unwrap_or_default()
                .trim_start_matches('/')
                .to_string(),
            image_id: c.image.unwrap_or_default(),
            running: c.state.as_ref().and_then(|s| s.running).unwrap_or(false),
            exit: c
                .state
                .as_ref()
                .filter(|s| s.running != Some(true))
                .map(|s| {
                    (
                        s.exit_code.unwrap_or(0),
                        s.error.clone().unwrap_or_default(),
                    )
                }),
            pid: c.state.as_ref().and_then(|s| s.pid).filter(|p| *p > 0),
            labels: config.labels.unwrap_or_default().into_iter().collect(),
            network_mode: host.network_mode.unwrap_or_default(),
            endpoints,
            pids_limit: host.pids_limit,
            init: host.init,
            tmpfs: host.tmpfs.unwrap_or_default().into_iter().collect(),
            memory_bytes: host.memory.unwrap_or(0),
            nano_cpus: host.nano_cpus.unwrap_or(0),
            user: config.user.clone().unwrap_or_default(),
            entrypoint: config.entrypoint.clone().unwrap_or_default(),
            healthcheck_disabled: config.healthcheck.as_ref().and_then(|h| h.test.as_deref())
                == Some(&["NONE".to_string()][..]),
            cap_drop: host.cap_drop.unwrap_or_default(),
            security_opt: host.security_opt.unwrap_or_default(),
            env: config.env.unwrap_or_default(),
            runtime: host.runtime.clone().unwrap_or_default(),
            hardening,
            exec_ids: c.exec_ids.unwrap_or_default(),
            dns: host.dns.unwrap_or_default(),
        }))
    }

    async fn container_processes(&self, id: &str) -> Result<Vec<String>, EngineError> {
        let d = self.client().await?;
        // No ps arguments: the daemon's default (`-ef`) has a CMD column on
        // every Linux engine.
        let top = timed(
            Op::ListProcesses,
            self.timeouts.call,
            d.top_processes(id, None),
        )
        .await?;
        let (titles, processes) = super::podman::split_top(
            top.titles.unwrap_or_default(),
            top.processes.unwrap_or_default(),
        );
        let col = titles
            .iter()
            .position(|t| t == "CMD" || t == "COMMAND")
            .ok_or_else(|| {
                EngineError::new(
                    Op::ListProcesses,
                    EngineErrorKind::Protocol,
                    format!("no CMD column in the process list (columns {titles:?})"),
                )
            })?;
        Ok(processes
            .into_iter()
            .filter_map(|mut row| (col < row.len()).then(|| row.swap_remove(col)))
            .collect())
    }

    async fn remove_container(&self, id: &str) -> Result<bool, EngineError> {
        let d = self.client().await?;
        let opts = RemoveContainerOptions {
            v: true,
            force: true,
            link: false,
        };
        match timed(
            Op::RemoveContainer,
            self.timeouts.call,
            d.remove_container(id, Some(opts)),
        )
        .await
        {
            Ok(()) => Ok(true),
            Err(e) if e.kind == EngineErrorKind::NotFound => Ok(false),
            // "removal of container … is already in progress"
            Err(e) if e.status == Some(409) && e.message.contains("already in progress") => {
                Ok(true)
            }
            Err(e) => Err(e),
        }
    }

    async fn list_containers(&self, label: &str) -> Result<Vec<ContainerSummary>, EngineError> {
        let d = self.client().await?;
        let opts = ListContainersOptions {
            all: true,
            filters: Some(filters(&[("label", label)])),
            ..Default::default()
        };
        let list = timed(
            Op::ListContainers,
            self.timeouts.call,
            d.list_containers(Some(opts)),
        )
        .await?;
        Ok(list.into_iter().map(summary_from).collect())
    }

    async fn exec(
        &self,
        container_id: &str,
        spec: &ExecSpec,
        output: OutputSink<'_>,
    ) -> Result<ExecExit, EngineError> {
        let d = self.client().await?;
        let config = ExecConfig {
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            attach_stdin: Some(false),
            tty: Some(false),
            cmd: Some(spec.cmd.clone()),
            env: Some(spec.env.clone()),
            working_dir: spec.working_dir.clone(),
            user: spec.user.clone(),
            ..Default::default()
        };
        let created = timed(
            Op::Exec,
            self.timeouts.call,
            d.create_exec(container_id, config),
        )
        .await?;
        let started = timed(
            Op::Exec,
            self.timeouts.call,
            d.start_exec(&created.id, None),
        )
        .await?;
        // The daemon writes why a program did not start (runc's "OCI
        // runtime exec failed: …") into the exec's stdout as one frame: the
        // first frame is held back when it reads so, and dropped once the
        // inspect confirms it ([`not_started`]: no process, exit 126 or
        // 127); so is runc's own line on stderr when its exec of a program
        // that exists failed (`exec PROGRAM: …`, exit 1: its interpreter is
        // missing); anything else flows.
        let mut held: Option<(StreamKind, Vec<u8>)> = None;
        let mut first = true;
        if let bollard::exec::StartExecResults::Attached {
            output: mut stream, ..
        } = started
        {
            while let Some(item) = stream.next().await {
                let (kind, message) = match item.map_err(|e| map_err(Op::Exec, e))? {
                    bollard::container::LogOutput::StdOut { message }
                    | bollard::container::LogOutput::Console { message } => {
                        (StreamKind::Stdout, message)
                    }
                    bollard::container::LogOutput::StdErr { message } => {
                        (StreamKind::Stderr, message)
                    }
                    bollard::container::LogOutput::StdIn { .. } => continue,
                };
                let runtimes = message.starts_with(OCI_EXEC_FAILED)
                    || (kind == StreamKind::Stderr && message.starts_with(RUNC_EXEC_FAILED));
                if std::mem::take(&mut first) && runtimes {
                    held = Some((kind, message.to_vec()));
                    continue;
                }
                if let Some((k, h)) = held.take() {
                    output(k, &h);
                }
                output(kind, &message);
            }
        }
        let inspected = timed(Op::Exec, self.timeouts.call, d.inspect_exec(&created.id)).await?;
        let code = if inspected.running == Some(true) {
            None
        } else {
            inspected.exit_code
        };
        // Pid 0: the exec never had a process.
        let never_ran = inspected.pid.unwrap_or(0) == 0;
        let argv0 = spec.cmd.first().map_or("", String::as_str);
        let not_started = held
            .as_ref()
            .and_then(|(_, text)| not_started(text, code, argv0, never_ran));
        if not_started.is_none() {
            if let Some((k, h)) = held {
                output(k, &h);
            }
        }
        Ok(ExecExit { code, not_started })
    }

    async fn attach_stdin(&self, id: &str) -> Result<StdinHold, EngineError> {
        let v = self.negotiate().await?.1.api_version;
        attach_stdin(&self.dial, v, id, self.timeouts.call).await
    }

    async fn attach_session(&self, id: &str) -> Result<super::Link, EngineError> {
        let v = self.negotiate().await?.1.api_version;
        attach_session(&self.dial, v, id, self.timeouts.call).await
    }

    async fn exec_session(
        &self,
        container_id: &str,
        spec: &ExecSpec,
    ) -> Result<super::Link, EngineError> {
        let d = self.client().await?;
        let config = ExecConfig {
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            attach_stdin: Some(true),
            tty: Some(false),
            cmd: Some(spec.cmd.clone()),
            env: Some(spec.env.clone()),
            working_dir: spec.working_dir.clone(),
            user: spec.user.clone(),
            ..Default::default()
        };
        let created = timed(
            Op::Exec,
            self.timeouts.call,
            d.create_exec(container_id, config),
        )
        .await?;
        let started = timed(
            Op::Exec,
            self.timeouts.call,
            d.start_exec(&created.id, None),
        )
        .await?;
        let bollard::exec::StartExecResults::Attached { output, input } = started else {
            return Err(EngineError::new(
                Op::Exec,
                EngineErrorKind::Protocol,
                "the exec started detached",
            ));
        };
        let output = output
            .filter_map(|item| async move {
                match item {
                    Ok(bollard::container::LogOutput::StdOut { message }) => {
                        Some(Ok(message.to_vec()))
                    }
                    Ok(bollard::container::LogOutput::StdErr { message }) => {
                        tracing::debug!(
                            "supervisor relay stderr: {}",
                            crate::text::foreign(&String::from_utf8_lossy(&message))
                        );
                        None
                    }
                    Ok(_) => None,
                    Err(e) => Some(Err(std::io::Error::other(e.to_string()))),
                }
            })
            .boxed();
        Ok(super::Link {
            output,
            input: Box::new(input),
            keep: None,
        })
    }

    async fn wait_removed(&self, id: &str) -> Result<ExitWait, EngineError> {
        let v = self.negotiate().await?.1.api_version;
        wait_removed(&self.dial, v, id, self.timeouts.call).await
    }

    async fn container_logs(&self, id: &str, max: usize) -> Result<Option<String>, EngineError> {
        let d = self.client().await?;
        let opts = bollard::query_parameters::LogsOptions {
            stdout: true,
            stderr: true,
            follow: false,
            ..Default::default()
        };
        let collect = async {
            let mut stream = d.logs(id, Some(opts));
            let mut text: Vec<u8> = Vec::new();
            while let Some(chunk) = stream.next().await {
                text.extend_from_slice(&chunk?.into_bytes());
                if text.len() > 2 * max {
                    let cut = text.len() - max;
                    text.drain(..cut);
                }
            }
            Ok::<_, BError>(text)
        };
        match timed(Op::Logs, self.timeouts.call, collect).await {
            Ok(mut text) => {
                if text.len() > max {
                    let cut = text.len() - max;
                    text.drain(..cut);
                }
                Ok(Some(String::from_utf8_lossy(&text).into_owned()))
            }
            Err(e) if e.kind == EngineErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn security(&self) -> Result<EngineSecurity, EngineError> {
        let d = self.client().await?;
        // `/version` says whether this is Podman (SPEC §6.2.3), asked with
        // `/info`; an engine that will not say is taken for Docker.
        let (info, podman) =
            tokio::join!(timed(Op::Info, self.timeouts.call, d.info()), self.podman());
        let info = info?;
        let podman = podman.ok().flatten();
        let opts = info.security_options.unwrap_or_default();
        // Each option is `name=<name>[,key=value…]`.
        let has = |name: &str| {
            opts.iter()
                .any(|o| o.split(',').any(|kv| kv.trim() == format!("name={name}")))
        };
        let registered = info.runtimes.unwrap_or_default();
        let mut gvisor: Vec<String> = registered
            .iter()
            .filter(|(name, r)| {
                super::is_gvisor_name(name)
                    || r.path.as_deref().is_some_and(|p| {
                        std::path::Path::new(p).file_name() == Some(std::ffi::OsStr::new("runsc"))
                    })
            })
            .map(|(name, _)| name.clone())
            .collect();
        gvisor.sort();
        let mut runtimes: Vec<String> = registered.into_keys().collect();
        runtimes.sort();
        Ok(EngineSecurity {
            rootless: has("rootless"),
            userns: has("userns"),
            runtimes,
            gvisor,
            default_runtime: info.default_runtime.filter(|r| !r.is_empty()),
            // Podman's `/info` `ID` is a new random UUID on every call: it
            // names no engine, so an approval binds the endpoint instead.
            id: info.id.filter(|i| !i.trim().is_empty() && podman.is_none()),
            podman,
        })
    }

    async fn stat_path(&self, id: &str, path: &str) -> Result<Option<PathStat>, EngineError> {
        let d = self.client().await?;
        let opts = ContainerArchiveInfoOptions { path: path.into() };
        match timed(
            Op::StatPath,
            self.timeouts.call,
            d.get_container_archive_info(id, Some(opts)),
        )
        .await
        {
            Ok(st) => Ok(Some(PathStat {
                is_dir: st.file_mode & GO_MODE_DIR != 0,
                is_symlink: st.file_mode & GO_MODE_SYMLINK != 0,
                is_regular: st.file_mode & GO_MODE_TYPE == 0,
                link_target: st.link_target,
            })),
            Err(e) if e.kind == EngineErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn read_file(
        &self,
        id: &str,
        path: &str,
        max: usize,
    ) -> Result<Option<Vec<u8>>, EngineError> {
        let d = self.client().await?;
        let opts = DownloadFromContainerOptions { path: path.into() };
        let too_big = || {
            EngineError::new(
                Op::ReadFile,
                EngineErrorKind::Rejected,
                format!("{path} is larger than {max} bytes"),
            )
        };
        // The archive of one file: its content plus headers and padding.
        let limit = max + 64 * 1024;
        let collect = async {
            let mut stream = d.download_from_container(id, Some(opts));
            let mut tar = Vec::new();
            while let Some(chunk) = stream.next().await {
                tar.extend_from_slice(&chunk?);
                if tar.len() > limit {
                    return Ok(None);
                }
            }
            Ok(Some(tar))
        };
        let tar = match timed(Op::ReadFile, self.timeouts.call, collect).await {
            Ok(Some(tar)) => tar,
            Ok(None) => return Err(too_big()),
            Err(e) if e.kind == EngineErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let protocol = |e: std::io::Error| {
            EngineError::new(
                Op::ReadFile,
                EngineErrorKind::Protocol,
                format!("the archive of {path} is unreadable: {e}"),
            )
        };
        let mut archive = tar::Archive::new(tar.as_slice());
        let mut entries = archive.entries().map_err(protocol)?;
        let Some(entry) = entries.next() else {
            return Ok(None);
        };
        let mut entry = entry.map_err(protocol)?;
        if entry.header().entry_type() != tar::EntryType::Regular {
            return Ok(None);
        }
        if entry.size() > max as u64 {
            return Err(too_big());
        }
        let mut content = Vec::new();
        std::io::Read::read_to_end(
            &mut std::io::Read::take(&mut entry, max as u64 + 1),
            &mut content,
        )
        .map_err(protocol)?;
        if content.len() > max {
            return Err(too_big());
        }
        Ok(Some(content))
    }

    async fn upload_archive(
        &self,
        id: &str,
        path: &str,
        archive: Vec<u8>,
    ) -> Result<(), EngineError> {
        let d = self.client().await?;
        let opts = UploadToContainerOptions {
            path: path.into(),
            // A directory is never replaced by a file or the other way.
            no_overwrite_dir_non_dir: Some("true".into()),
            // The headers' uid and gid (the command user's) are kept.
            copy_uidgid: None,
        };
        timed(
            Op::UploadArchive,
            self.timeouts.stream_idle,
            d.upload_to_container(id, Some(opts), bollard::body_full(archive.into())),
        )
        .await
    }

    async fn download_archive(
        &self,
        id: &str,
        path: &str,
        max: u64,
    ) -> Result<Option<Vec<u8>>, EngineError> {
        let d = self.client().await?;
        let opts = DownloadFromContainerOptions { path: path.into() };
        let collect = async {
            let mut stream = d.download_from_container(id, Some(opts));
            let mut tar = Vec::new();
            while let Some(chunk) = stream.next().await {
                tar.extend_from_slice(&chunk?);
                if tar.len() as u64 > max {
                    return Ok(None);
                }
            }
            Ok(Some(tar))
        };
        match timed(Op::DownloadArchive, self.timeouts.stream_idle, collect).await {
            Ok(Some(tar)) => Ok(Some(tar)),
            Ok(None) => Err(EngineError::new(
                Op::DownloadArchive,
                EngineErrorKind::Rejected,
                format!("the archive of {path} is larger than {max} bytes"),
            )),
            Err(e) if e.kind == EngineErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// Go's `os.ModeDir` bit, as the archive stat header reports a mode.
const GO_MODE_DIR: u32 = 1 << 31;
/// Go's `os.ModeSymlink` bit.
const GO_MODE_SYMLINK: u32 = 1 << 27;
/// Go's `os.ModeType`: every bit that makes a file not a regular one (dir,
/// symlink, named pipe, socket, device, char device, irregular).
const GO_MODE_TYPE: u32 =
    GO_MODE_DIR | GO_MODE_SYMLINK | (1 << 25) | (1 << 24) | (1 << 26) | (1 << 21) | (1 << 19);

/// The isolation settings of an inspected container (SPEC §6.1).
fn hardening(host: &HostConfig, mounts: Vec<bollard::models::MountPoint>) -> Hardening {
    let mut devices: Vec<String> = host
        .devices
        .iter()
        .flatten()
        .map(|d| d.path_on_host.clone().unwrap_or_default())
        .collect();
    devices.extend(host.device_cgroup_rules.iter().flatten().cloned());
    devices.extend(
        host.device_requests
            .iter()
            .flatten()
            .map(|r| format!("device request {}", r.driver.clone().unwrap_or_default())),
    );
    Hardening {
        privileged: host.privileged.unwrap_or(false),
        cap_add: host.cap_add.clone().unwrap_or_default(),
        devices,
        pid_mode: host.pid_mode.clone().unwrap_or_default(),
        ipc_mode: host.ipc_mode.clone().unwrap_or_default(),
        uts_mode: host.uts_mode.clone().unwrap_or_default(),
        userns_mode: host.userns_mode.clone().unwrap_or_default(),
        mounts: mounts
            .into_iter()
            .map(|m| MountInfo {
                kind: m.typ.map(|t| t.to_string()).unwrap_or_default(),
                name: m.name.unwrap_or_default(),
                source: m.source.unwrap_or_default(),
                destination: m.destination.unwrap_or_default(),
                rw: m.rw.unwrap_or(false),
            })
            .collect(),
    }
}

/// The Engine API create body for `spec` (SPEC §6.1): binds as mounts, the
/// limits, `/tmp` and mask tmpfs, and the first network as the endpoint
/// created with the container. Public so that the benchmark's raw floor
/// sends exactly the request odek sends.
pub fn create_body(spec: &ContainerSpec) -> ContainerCreateBody {
    let mounts = spec
        .binds
        .iter()
        .map(|b| Mount {
            target: Some(b.target.clone()),
            source: Some(b.source.clone()),
            typ: Some(MountType::BIND),
            read_only: Some(b.read_only),
            ..Default::default()
        })
        .collect();
    let host = HostConfig {
        network_mode: Some(spec.network_mode.clone()),
        init: Some(spec.init),
        pids_limit: Some(spec.pids_limit),
        cap_drop: Some(spec.cap_drop.clone()),
        cap_add: (!spec.cap_add.is_empty()).then(|| spec.cap_add.clone()),
        log_config: spec
            .log_driver
            .as_ref()
            .map(|d| bollard::models::HostConfigLogConfig {
                typ: Some(d.clone()),
                // odek's `json-file` logs (the egress proxy's, one line per
                // refusal an agent can provoke) are capped: 2 files of 1 MiB.
                config: (d == "json-file").then(|| {
                    std::collections::HashMap::from([
                        ("max-size".to_string(), "1m".to_string()),
                        ("max-file".to_string(), "2".to_string()),
                    ])
                }),
            }),
        security_opt: Some(spec.security_opt.clone()),
        tmpfs: Some(
            spec.tmpfs
                .iter()
                .map(|t| (t.target.clone(), t.options.clone()))
                .collect(),
        ),
        mounts: Some(mounts),
        memory: spec.memory_bytes,
        nano_cpus: spec.nano_cpus,
        runtime: spec.runtime.clone(),
        auto_remove: Some(spec.auto_remove),
        // SPEC §4.6: empty keeps the engine's upstream servers.
        dns: (!spec.dns.is_empty()).then(|| spec.dns.clone()),
        readonly_rootfs: spec.readonly_rootfs.then_some(true),
        ..Default::default()
    };
    // The first network is the endpoint created with the container; no
    // alias is requested (SPEC §4.1).
    let networking = if spec.network_mode != "none" && spec.network_mode != "bridge" {
        Some(NetworkingConfig {
            endpoints_config: Some(HashMap::from([(
                spec.network_mode.clone(),
                EndpointSettings::default(),
            )])),
        })
    } else {
        None
    };
    ContainerCreateBody {
        image: Some(spec.image.clone()),
        cmd: Some(spec.cmd.clone()),
        entrypoint: spec.entrypoint.clone(),
        healthcheck: spec.no_healthcheck.then(|| bollard::models::HealthConfig {
            test: Some(vec!["NONE".into()]),
            ..Default::default()
        }),
        env: Some(spec.env.clone()),
        working_dir: Some(spec.working_dir.clone()),
        user: spec.user.clone(),
        labels: Some(spec.labels.clone().into_iter().collect()),
        host_config: Some(host),
        networking_config: networking,
        open_stdin: Some(spec.open_stdin),
        stdin_once: Some(spec.stdin_once),
        attach_stdin: Some(spec.stdin_once),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_answer_with_an_empty_body_says_what_was_seen() {
        let e = map_err(
            Op::Version,
            BError::DockerResponseServerError {
                status_code: 404,
                message: String::new(),
            },
        );
        assert_eq!(e.kind, EngineErrorKind::NotFound);
        assert!(
            e.message.contains("HTTP 404 with an empty body"),
            "{}",
            e.message
        );
        assert!(e.message.contains("Docker Engine"), "{}", e.message);
        let e = map_err(
            Op::Version,
            BError::DockerResponseServerError {
                status_code: 500,
                message: "boom".into(),
            },
        );
        assert_eq!(e.message, "boom");
    }
    use std::sync::{Arc, Mutex};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A tiny HTTP/1.1 "daemon" on a Unix socket that records request lines.
    /// `ping_api`: the `Api-Version` header of `/_ping` (None: omitted);
    /// `version_api`: the `ApiVersion` of `/version`.
    async fn fake_daemon(
        dir: &std::path::Path,
        ping_api: Option<&'static str>,
        version_api: &'static str,
    ) -> (std::path::PathBuf, Arc<Mutex<Vec<String>>>) {
        let path = dir.join("d.sock");
        let listener = tokio::net::UnixListener::bind(&path).expect("bind");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut conn, _)) = listener.accept().await else {
                    return;
                };
                let log = log.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    loop {
                        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                            match conn.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        }
                        let end = buf.windows(4).position(|w| w == b"\r\n\r\n").expect("head") + 4;
                        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                        buf.drain(..end);
                        let line = head.lines().next().unwrap_or_default().to_string();
                        log.lock().expect("log").push(line.clone());
                        let path = line.split(' ').nth(1).unwrap_or_default().to_string();
                        let (status, extra, body) = if path == "/_ping" {
                            let h = ping_api
                                .map(|v| {
                                    format!(
                                        "Api-Version: {v}\r\nServer: Docker/20.10.99 (linux)\r\n"
                                    )
                                })
                                .unwrap_or_default();
                            ("200 OK", h, "OK".to_string())
                        } else if path.ends_with("/version") {
                            let want: ApiVersion = ApiVersion::parse(version_api).expect("v");
                            let asked = path
                                .trim_start_matches("/v")
                                .split('/')
                                .next()
                                .and_then(ApiVersion::parse);
                            match asked {
                                Some(a) if a > want => (
                                    "400 Bad Request",
                                    String::new(),
                                    format!("{{\"message\":\"client version {a} is too new. Maximum supported API version is {want}\"}}"),
                                ),
                                _ => ("200 OK", String::new(), format!("{{\"ApiVersion\":\"{version_api}\",\"Version\":\"19.0.0\"}}")),
                            }
                        } else {
                            ("200 OK", String::new(), "[]".to_string())
                        };
                        let resp = format!(
                            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{extra}Content-Length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        if conn.write_all(resp.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (path, seen)
    }

    fn engine_at(path: &std::path::Path) -> BollardEngine {
        BollardEngine::with_timeouts(
            Endpoint::unix(path),
            Timeouts {
                ping: Duration::from_secs(5),
                call: Duration::from_secs(5),
                stream_idle: Duration::from_secs(5),
            },
        )
    }

    /// A daemon that answers `/_ping` (API 1.41) and, by the end of the
    /// request path, `/version` and `/info` with the given JSON bodies.
    async fn scripted_daemon(
        dir: &std::path::Path,
        version: &'static str,
        info: &'static str,
    ) -> std::path::PathBuf {
        let path = dir.join("s.sock");
        let listener = tokio::net::UnixListener::bind(&path).expect("bind");
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    loop {
                        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                            match conn.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        }
                        let end = buf.windows(4).position(|w| w == b"\r\n\r\n").expect("head") + 4;
                        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                        buf.drain(..end);
                        let target = head.split(' ').nth(1).unwrap_or_default().to_string();
                        let (extra, body) = if target == "/_ping" {
                            (
                                "Api-Version: 1.41\r\nServer: Libpod/4.3.1 (linux)\r\n",
                                "OK",
                            )
                        } else if target.ends_with("/version") {
                            ("", version)
                        } else if target.ends_with("/info") {
                            ("", info)
                        } else {
                            ("", "[]")
                        };
                        let resp = format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{extra}Content-Length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        if conn.write_all(resp.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        path
    }

    #[tokio::test]
    async fn on_podman_no_network_is_made_or_joined_whatever_asked() {
        let info =
            r#"{"ID":"x","DefaultRuntime":"runc","Runtimes":{"runc":{"path":"/usr/bin/runc"}}}"#;
        let spec = NetworkSpec {
            name: "odek-x-link".into(),
            internal: true,
            labels: Default::default(),
            options: Default::default(),
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let podman = r#"{"ApiVersion":"1.41","Version":"4.3.1","Components":[{"Name":"Podman Engine","Version":"4.3.1"}]}"#;
        let e = engine_at(&scripted_daemon(dir.path(), podman, info).await);
        let err = e.create_network(&spec).await.expect_err("refused");
        assert!(
            err.message.contains("odek makes and joins no network"),
            "{err:?}"
        );
        let err = e.connect_network("n", "c", &[]).await.expect_err("refused");
        assert!(
            err.message.contains("odek makes and joins no network"),
            "{err:?}"
        );
        // Docker: asked of the daemon (whose scripted answer is no network).
        let dir = tempfile::tempdir().expect("tempdir");
        let docker = r#"{"ApiVersion":"1.41","Version":"20.10.24","Components":[{"Name":"Engine","Version":"20.10.24"}]}"#;
        let e = engine_at(&scripted_daemon(dir.path(), docker, info).await);
        let got = e.create_network(&spec).await;
        assert!(
            !got.as_ref()
                .is_err_and(|e| e.message.contains("odek makes and joins no network")),
            "{got:?}"
        );
    }

    #[tokio::test]
    async fn podmans_random_info_id_is_never_an_engine_id() {
        let dir = tempfile::tempdir().expect("tempdir");
        let info = r#"{"ID":"7a9ffb74-4fc3-479c-a5fd-ab28cd4901e0","DefaultRuntime":"runc","Runtimes":{"runc":{"path":"/usr/bin/runc"}}}"#;
        let podman = r#"{"ApiVersion":"1.41","Version":"4.3.1","Components":[{"Name":"Podman Engine","Version":"4.3.1"},{"Name":"Conmon","Version":"2.1.6"}]}"#;
        let e = engine_at(&scripted_daemon(dir.path(), podman, info).await);
        let s = e.security().await.expect("security");
        assert_eq!(s.podman.as_deref(), Some("4.3.1"));
        assert_eq!(s.id, None, "Podman's /info ID is new on every call");
        assert_eq!(
            e.endpoint().approval_binding(s.id.as_deref()),
            format!("endpoint:unix://{}", dir.path().join("s.sock").display())
        );
        // Docker's components: its ID is bound.
        let dir = tempfile::tempdir().expect("tempdir");
        let docker = r#"{"ApiVersion":"1.41","Version":"20.10.24","Components":[{"Name":"Engine","Version":"20.10.24"},{"Name":"containerd","Version":"1.6"}]}"#;
        let e = engine_at(&scripted_daemon(dir.path(), docker, info).await);
        let s = e.security().await.expect("security");
        assert_eq!(s.podman, None);
        assert_eq!(
            s.id.as_deref(),
            Some("7a9ffb74-4fc3-479c-a5fd-ab28cd4901e0")
        );
    }

    /// A daemon that answers attach requests: 101 for container `abc` (then
    /// reports the request head and, later, the connection's EOF), 404 with
    /// a JSON message for any other, keeping that connection open.
    async fn attach_daemon(
        dir: &std::path::Path,
    ) -> (
        std::path::PathBuf,
        tokio::sync::mpsc::UnboundedReceiver<String>,
    ) {
        let path = dir.join("attach.sock");
        let listener = tokio::net::UnixListener::bind(&path).expect("bind");
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let tx = tx.clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut chunk = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match conn.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let head = String::from_utf8_lossy(&head).into_owned();
                    let found = head.starts_with("POST /v1.41/containers/abc/attach?");
                    let _ = tx.send(head);
                    if !found {
                        let body = r#"{"message":"No such container: gone"}"#;
                        let resp = format!(
                            "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        let _ = conn.write_all(resp.as_bytes()).await;
                        // Kept open: the client must not wait for EOF.
                        tokio::time::sleep(Duration::from_secs(30)).await;
                        return;
                    }
                    let _ = conn
                        .write_all(b"HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n")
                        .await;
                    loop {
                        match conn.read(&mut chunk).await {
                            Ok(0) | Err(_) => break,
                            Ok(_) => {
                                let _ = tx.send("unexpected bytes".into());
                            }
                        }
                    }
                    let _ = tx.send("EOF".into());
                });
            }
        });
        (path, rx)
    }

    /// The owner link (SPEC §6.1): an upgraded attach request for stdin
    /// only, held open and registered for forks while the hold lives,
    /// closed (the daemon sees EOF) and unregistered once it is dropped.
    #[tokio::test]
    async fn the_stdin_attach_is_held_and_registered_until_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, mut seen) = attach_daemon(dir.path()).await;
        let address = Dial {
            address: Address::Unix { path },
            tls: None,
            connect_timeout: Duration::from_secs(5),
        };
        let v = ApiVersion {
            major: 1,
            minor: 41,
        };
        let hold = attach_stdin(&address, v, "abc", Duration::from_secs(5))
            .await
            .expect("attached");
        let head = seen.recv().await.expect("request");
        assert!(
            head.starts_with("POST /v1.41/containers/abc/attach?stream=1&stdin=1 HTTP/1.1\r\n"),
            "{head}"
        );
        assert!(head.contains("\r\nUpgrade: tcp\r\n"), "{head}");
        let fd = hold.raw_fd().expect("a descriptor of its own");
        assert!(super::super::owner_fds::registered().contains(&fd));
        assert!(
            tokio::time::timeout(Duration::from_millis(300), seen.recv())
                .await
                .is_err(),
            "the daemon heard from the held connection"
        );
        drop(hold);
        assert!(!super::super::owner_fds::registered().contains(&fd));
        let end = tokio::time::timeout(Duration::from_secs(5), seen.recv()).await;
        assert_eq!(end.ok().flatten().as_deref(), Some("EOF"));
    }

    /// A container the daemon does not know: NotFound with its message, at
    /// once, though the daemon keeps the connection open.
    #[tokio::test]
    async fn an_attach_to_a_missing_container_is_not_found() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, _seen) = attach_daemon(dir.path()).await;
        let address = Dial {
            address: Address::Unix { path },
            tls: None,
            connect_timeout: Duration::from_secs(5),
        };
        let v = ApiVersion {
            major: 1,
            minor: 41,
        };
        let t0 = std::time::Instant::now();
        let e = attach_stdin(&address, v, "gone", Duration::from_secs(5))
            .await
            .expect_err("404");
        assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
        assert_eq!(
            (e.op, e.kind, e.status, e.message.as_str()),
            (
                Op::AttachContainer,
                EngineErrorKind::NotFound,
                Some(404),
                "No such container: gone"
            )
        );
        let e = attach_stdin(&address, v, "a/b", Duration::from_secs(5))
            .await
            .expect_err("not an ID");
        assert_eq!(e.kind, EngineErrorKind::Protocol);
    }

    #[tokio::test]
    async fn negotiated_version_is_in_every_request_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, seen) = fake_daemon(dir.path(), Some("1.41"), "1.41").await;
        let e = engine_at(&path);
        let info = e.version().await.expect("version");
        assert_eq!(
            info.api_version,
            ApiVersion {
                major: 1,
                minor: 41
            }
        );
        assert_eq!(info.server_version, "20.10.99");
        e.list_networks(&NetworkFilter::Label("a=b".into()))
            .await
            .expect("list");
        e.list_containers("dev.odek.sandbox=true")
            .await
            .expect("list");
        let lines = seen.lock().expect("log").clone();
        assert_eq!(lines[0], "GET /_ping HTTP/1.1");
        assert!(lines.len() >= 3, "{lines:?}");
        for l in &lines[1..] {
            assert!(
                l.contains(" /v1.41/"),
                "request without the negotiated version: {l}"
            );
        }
    }

    #[tokio::test]
    async fn without_the_ping_header_version_is_asked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, seen) = fake_daemon(dir.path(), None, "1.40").await;
        let e = engine_at(&path);
        let info = e.version().await.expect("version");
        assert_eq!(
            info.api_version,
            ApiVersion {
                major: 1,
                minor: 40
            }
        );
        e.list_networks(&NetworkFilter::Names(vec!["x".into()]))
            .await
            .expect("list");
        let lines = seen.lock().expect("log").clone();
        assert!(
            lines.iter().any(|l| l.starts_with("GET /v1.40/version")),
            "{lines:?}"
        );
        assert!(
            lines.last().expect("some").contains(" /v1.40/networks"),
            "{lines:?}"
        );
    }

    #[tokio::test]
    async fn an_engine_older_than_the_minimum_is_refused_naming_both() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, _) = fake_daemon(dir.path(), Some("1.30"), "1.30").await;
        let e = engine_at(&path).version().await.expect_err("too old");
        assert!(
            e.message.contains("1.30") && e.message.contains("1.40"),
            "{e}"
        );
        let (path2, _) = {
            let d2 = dir.path().join("b");
            std::fs::create_dir(&d2).expect("mkdir");
            fake_daemon(&d2, None, "1.30").await
        };
        let e = engine_at(&path2)
            .version()
            .await
            .expect_err("too old via /version");
        assert!(
            e.message.contains("1.30") && e.message.contains("1.40"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn a_missing_socket_is_unreachable() {
        let e = engine_at(std::path::Path::new("/nonexistent/odek.sock"))
            .version()
            .await
            .expect_err("no socket");
        assert_eq!(e.kind, EngineErrorKind::Unreachable);
    }

    #[test]
    fn version_refusals_are_read() {
        assert!(matches!(
            version_hint("client version 1.53 is too new. Maximum supported API version is 1.41"),
            VersionHint::TooNew(ApiVersion {
                major: 1,
                minor: 41
            })
        ));
        assert!(matches!(
            version_hint("client version 1.40 is too old. Minimum supported API version is 1.44, please upgrade your client to a newer version"),
            VersionHint::TooOld(ApiVersion { major: 1, minor: 44 })
        ));
        assert!(matches!(
            version_hint("client version 1.40 is too old. Minimum supported API version is 1.44"),
            VersionHint::TooOld(ApiVersion {
                major: 1,
                minor: 44
            })
        ));
        assert!(matches!(version_hint("no such host"), VersionHint::None));
    }
}

/// How the daemon's message about an exec whose program could not start
/// begins (moby writes the runtime's error into the exec's output).
const OCI_EXEC_FAILED: &[u8] = b"OCI runtime exec failed";

/// How runc's own line begins when its exec of the program failed after
/// the exec's process started (`exec /workspace/s.sh: no such file or
/// directory`, on stderr, exit 1): the program exists (runc looked it up)
/// but its interpreter does not.
const RUNC_EXEC_FAILED: &[u8] = b"exec ";

/// Why the program of an exec did not start, read from the exec's whole
/// first output frame `text` and confirmed by its exit code `code`:
/// the daemon's message (starting with [`OCI_EXEC_FAILED`]) with 126 or
/// 127, which the daemon gives an exec that did not start, and only when
/// the exec had no process (`never_ran`); or runc's line `exec P: no such
/// file or directory` with 1, `P` the program `argv0` (or, for a name
/// looked up in `PATH`, a path ending in it): its interpreter is missing.
/// `None` for anything else, whose text then reaches the output as it
/// came.
fn not_started(
    text: &[u8],
    code: Option<i64>,
    argv0: &str,
    never_ran: bool,
) -> Option<super::NotStarted> {
    use super::NotStarted as N;
    let text = std::str::from_utf8(text).ok()?.trim_end();
    if code == Some(1) && !text.contains('\n') {
        let program = text
            .strip_prefix("exec ")?
            .strip_suffix(": no such file or directory")?;
        let named = program == argv0
            || (!argv0.is_empty()
                && !argv0.contains('/')
                && program.ends_with(&format!("/{argv0}")));
        return named.then_some(N::NoInterpreter);
    }
    if !never_ran || !matches!(code, Some(126 | 127)) {
        return None;
    }
    if !text.starts_with("OCI runtime exec failed") || text.contains('\n') {
        return None;
    }
    let chdir = text.contains("chdir to cwd");
    if text.contains("executable file not found") {
        Some(N::NotFound)
    } else if chdir
        && (text.contains("no such file or directory") || text.contains("not a directory"))
    {
        Some(N::NoWorkdir)
    } else if chdir {
        None
    } else if text.contains("no such file or directory") {
        Some(N::NotFound)
    } else if text.contains("permission denied") || text.contains("exec format error") {
        Some(N::NotExecutable)
    } else {
        None
    }
}

#[cfg(test)]
mod not_started_tests {
    use super::not_started;
    use crate::engine::NotStarted as N;

    /// The daemon's words (Docker 20.10 and 24+, runc 1.0 and 1.1).
    #[test]
    fn the_daemons_message_names_why_the_program_did_not_start() {
        for (text, code, want) in [
            ("OCI runtime exec failed: exec failed: unable to start container process: exec: \"no-such-tool\": executable file not found in $PATH: unknown\r\n", 126, Some(N::NotFound)),
            ("OCI runtime exec failed: exec failed: container_linux.go:380: starting container process caused: exec: \"x\": executable file not found in $PATH: unknown\r\n", 127, Some(N::NotFound)),
            ("OCI runtime exec failed: exec failed: unable to start container process: exec: \"/no/such\": stat /no/such: no such file or directory: unknown\r\n", 127, Some(N::NotFound)),
            ("OCI runtime exec failed: exec failed: unable to start container process: exec: \"/etc/passwd\": permission denied: unknown\r\n", 126, Some(N::NotExecutable)),
            ("OCI runtime exec failed: exec failed: unable to start container process: chdir to cwd (\"/nope\") set in config.json failed: no such file or directory: unknown\r\n", 126, Some(N::NoWorkdir)),
            ("OCI runtime exec failed: exec failed: unable to start container process: chdir to cwd (\"/root\") set in config.json failed: permission denied: unknown\r\n", 126, None),
        ] {
            assert_eq!(not_started(text.as_bytes(), Some(code), "x", true), want, "{text}");
            assert_eq!(not_started(text.as_bytes(), Some(code), "x", false), None, "a process ran: {text}");
        }
    }

    /// A program that prints the same words and exits with another code,
    /// or prints more than the one line, is left alone.
    #[test]
    fn output_that_only_looks_like_it_is_left_alone() {
        let text = b"OCI runtime exec failed: exec: \"x\": executable file not found in $PATH\r\n";
        assert_eq!(not_started(text, Some(0), "x", true), None);
        assert_eq!(not_started(text, Some(1), "x", true), None);
        assert_eq!(not_started(text, None, "x", true), None);
        let two = b"OCI runtime exec failed: executable file not found\nand more\n";
        assert_eq!(not_started(two, Some(127), "x", true), None);
        assert_eq!(not_started(b"hello", Some(127), "x", true), None);
        // runc's line for another program, or with another status, or
        // with more after it, is the command's own.
        let runc = b"exec ./s.sh: no such file or directory\n";
        assert_eq!(not_started(runc, Some(1), "./t.sh", false), None);
        assert_eq!(not_started(runc, Some(2), "./s.sh", false), None);
        assert_eq!(
            not_started(
                b"exec ./s.sh: no such file or directory\nmore\n",
                Some(1),
                "./s.sh",
                false
            ),
            None
        );
    }

    /// runc's own line when the program exists but its interpreter does
    /// not (Docker 20.10, runc 1.1: exit 1, the exec's process started).
    #[test]
    fn runcs_line_for_a_missing_interpreter_is_recognised() {
        use crate::engine::NotStarted as N;
        let runc = b"exec ./s.sh: no such file or directory\n";
        assert_eq!(
            not_started(runc, Some(1), "./s.sh", false),
            Some(N::NoInterpreter)
        );
        let looked_up = b"exec /usr/local/bin/tool: no such file or directory\n";
        assert_eq!(
            not_started(looked_up, Some(1), "tool", false),
            Some(N::NoInterpreter)
        );
        assert_eq!(not_started(looked_up, Some(1), "other", false), None);
    }
}

/// TLS to an in-process "daemon" (SPEC §6.2.1): rustls on a loopback port,
/// asking for a client certificate, with certificates made by `openssl`.
#[cfg(test)]
mod tls_tests {
    use super::*;
    use crate::engine::{Endpoint, EndpointEnv};
    use rustls_pki_types::pem::PemObject;
    use std::path::Path;
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    // A test's own tool: the library itself starts no process here.
    #[allow(clippy::disallowed_types, clippy::disallowed_methods)]
    fn openssl(dir: &Path, args: &[&str]) {
        let out = std::process::Command::new("openssl")
            .current_dir(dir)
            .args(args)
            .output()
            .expect("openssl (Debian: apt-get install openssl)");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// ca, wrongca (self-signed), server (IP 127.0.0.1) and client, each
    /// `<name>.pem` and `<name>-key.pem`, signed by ca.
    fn make_certs(d: &Path) {
        let key = |n: &str| {
            openssl(
                d,
                &[
                    "genpkey",
                    "-algorithm",
                    "EC",
                    "-pkeyopt",
                    "ec_paramgen_curve:P-256",
                    "-out",
                    &format!("{n}-key.pem"),
                ],
            )
        };
        for ca in ["ca", "wrongca"] {
            key(ca);
            openssl(
                d,
                &[
                    "req",
                    "-x509",
                    "-new",
                    "-key",
                    &format!("{ca}-key.pem"),
                    "-subj",
                    &format!("/CN={ca}"),
                    "-days",
                    "2",
                    "-out",
                    &format!("{ca}.pem"),
                ],
            );
        }
        for (leaf, ext) in [
            ("server", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n"),
            ("client", "extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n"),
        ] {
            key(leaf);
            std::fs::write(d.join(format!("{leaf}.ext")), ext).expect("ext");
            openssl(d, &["req", "-new", "-key", &format!("{leaf}-key.pem"), "-subj", &format!("/CN={leaf}"), "-out", &format!("{leaf}.csr")]);
            openssl(d, &["x509", "-req", "-in", &format!("{leaf}.csr"), "-CA", "ca.pem", "-CAkey", "ca-key.pem", "-CAcreateserial", "-days", "2", "-extfile", &format!("{leaf}.ext"), "-out", &format!("{leaf}.pem")]);
        }
    }

    /// A TLS server on 127.0.0.1 that asks for a client certificate signed
    /// by `ca.pem` and answers every request with a `/version` body.
    async fn daemon(d: &Path) -> u16 {
        #[allow(deprecated)]
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let read = |f: &str| std::fs::read(d.join(f)).expect("read");
        let mut roots = rustls::RootCertStore::empty();
        for c in crate::engine::tls::certificates(&read("ca.pem")) {
            roots.add(c).expect("root");
        }
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .build()
        .expect("verifier");
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_client_cert_verifier(verifier)
            .with_single_cert(
                crate::engine::tls::certificates(&read("server.pem")),
                rustls_pki_types::PrivateKeyDer::from_pem_slice(&read("server-key.pem"))
                    .expect("key"),
            )
            .expect("server config");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(mut s) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match s.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let body = r#"{"ApiVersion":"1.45","Version":"27.0.0","MinAPIVersion":"1.24"}"#;
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = s.write_all(answer.as_bytes()).await;
                    let _ = s.shutdown().await;
                });
            }
        });
        port
    }

    /// A client directory: `ca.pem` ← `ca`, `cert.pem` ← `cert`, `key.pem` ← `key`.
    fn client(d: &Path, name: &str, ca: &str, cert: &str, key: &str) -> std::path::PathBuf {
        let c = d.join(name);
        std::fs::create_dir_all(&c).expect("mkdir");
        for (to, from) in [("ca.pem", ca), ("cert.pem", cert), ("key.pem", key)] {
            std::fs::copy(d.join(from), c.join(to)).expect("copy");
        }
        c
    }

    fn engine(port: u16, dir: &Path) -> BollardEngine {
        let env = EndpointEnv {
            docker_host: Some(format!("tcp://127.0.0.1:{port}")),
            docker_tls_verify: true,
            docker_cert_path: Some(dir.to_path_buf()),
            ..Default::default()
        };
        let ep = Endpoint::resolve(&env).expect("tls endpoint");
        assert!(ep.tls.is_some());
        BollardEngine::with_timeouts(
            ep,
            Timeouts {
                ping: Duration::from_secs(5),
                call: Duration::from_secs(5),
                stream_idle: Duration::from_secs(5),
            },
        )
    }

    #[tokio::test]
    async fn verified_tls_answers_a_wrong_ca_or_a_foreign_client_cert_is_refused_with_the_fix() {
        let d = tempfile::tempdir().expect("tempdir");
        make_certs(d.path());
        let port = daemon(d.path()).await;

        let good = client(d.path(), "good", "ca.pem", "client.pem", "client-key.pem");
        let info = engine(port, &good)
            .version()
            .await
            .expect("verified TLS answers");
        assert_eq!(
            info.api_version,
            ApiVersion {
                major: 1,
                minor: 45
            }
        );

        let wrong = client(
            d.path(),
            "wrong",
            "wrongca.pem",
            "client.pem",
            "client-key.pem",
        );
        let e = engine(port, &wrong).version().await.expect_err("wrong CA");
        assert_eq!(e.kind, EngineErrorKind::Rejected, "{e}");
        assert!(
            e.message.contains("the daemon's certificate was refused")
                && e.message
                    .contains(&format!("{} ", wrong.join("ca.pem").display())),
            "{e}"
        );

        let foreign = client(
            d.path(),
            "foreign",
            "ca.pem",
            "wrongca.pem",
            "wrongca-key.pem",
        );
        let e = engine(port, &foreign)
            .version()
            .await
            .expect_err("foreign client cert");
        assert_eq!(e.kind, EngineErrorKind::Rejected, "{e}");
        assert!(
            e.message
                .contains("the daemon refused odek's client certificate"),
            "{e}"
        );
    }
}
