//! An in-memory Docker engine for tests: records every call and can be
//! scripted to fail any call (SPEC §2). It mimics the Engine's lookup
//! rules where odek depends on them (network inspect by full ID, then exact
//! name, then unique ID prefix; the `name` list filter is a substring match).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use rand::Rng;
use serde::{Deserialize, Serialize};

use super::{
    ApiVersion, ContainerInfo, ContainerSpec, ContainerSummary, Created, DockerApi, Endpoint,
    EndpointInfo, EngineError, EngineErrorKind, EngineInfo, EngineSecurity, ExecExit, ExecSpec,
    ExitWait, Hardening, ImageInfo, IpamSubnet, MountInfo, NetworkFilter, NetworkInfo, NetworkSpec,
    Op, OutputSink, PathStat, ProgressSink, StdinHold, StreamKind,
};

/// The ID the fake engine reports in `/info` (Docker 20.10's layout).
pub const FAKE_ENGINE_ID: &str = "FAKE:ENGN:0000:0000:0000:0000:0000:0000:0000:0000:0000:0001";

/// One recorded call: the operation and its main argument.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Call {
    /// The operation.
    pub op: Op,
    /// Its main argument (ID, name, reference, filter).
    pub arg: String,
    /// The call is about an image probe (the container odek creates, and
    /// never starts, to read an image's paths before it mounts into one:
    /// SPEC §6.1). [`FakeEngine::calls`] leaves these out;
    /// [`FakeEngine::probe_calls`] has them.
    #[serde(default)]
    pub probe: bool,
}

/// A scripted failure: the `nth` call (1-based) of `op` fails with `kind`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// Which operation.
    pub op: Op,
    /// Which occurrence (1 = the first call of that op).
    pub nth: usize,
    /// How it fails.
    pub kind: EngineErrorKind,
    /// The message the "daemon" gives.
    pub message: String,
    /// For create: the container is created anyway before the failure is
    /// reported (the answer was lost).
    pub after_effect: bool,
    /// Counts only the calls about an image probe (the container odek
    /// creates to read an image's paths, SPEC §6.1); a fault without it
    /// counts only the other calls, so "the first create" is the sandbox's.
    pub probe: bool,
}

impl Fault {
    /// The `nth` call of `op` fails with `kind`.
    pub fn new(op: Op, nth: usize, kind: EngineErrorKind) -> Fault {
        Fault {
            op,
            nth,
            kind,
            message: format!("injected {kind:?} failure"),
            after_effect: false,
            probe: false,
        }
    }

    /// The `nth` call of `op` about an image probe fails with `kind`.
    pub fn on_probe(op: Op, nth: usize, kind: EngineErrorKind) -> Fault {
        Fault {
            probe: true,
            ..Fault::new(op, nth, kind)
        }
    }
}

/// A network in the fake engine.
#[derive(Clone, Debug)]
pub struct FakeNetwork {
    /// The network.
    pub info: NetworkInfo,
}

impl FakeNetwork {
    /// A local bridge network with a random 64-hex ID.
    pub fn bridge(name: &str) -> FakeNetwork {
        FakeNetwork {
            info: NetworkInfo {
                id: random_id(),
                name: name.to_string(),
                driver: "bridge".into(),
                scope: "local".into(),
                internal: false,
                attachable: false,
                enable_ipv6: false,
                labels: BTreeMap::new(),
                options: BTreeMap::new(),
                containers: BTreeMap::new(),
                ipam: vec![next_subnet()],
            },
        }
    }

    /// Marks the network `Internal`.
    pub fn internal(mut self) -> FakeNetwork {
        self.info.internal = true;
        self
    }

    /// Labels the network as a Compose project's.
    pub fn compose(mut self, project: &str) -> FakeNetwork {
        self.info
            .labels
            .insert("com.docker.compose.project".into(), project.into());
        self
    }

    /// Labels the network as a Swarm stack's overlay (driver `overlay`,
    /// scope `swarm`, label `com.docker.stack.namespace`), `Attachable` as
    /// given (SPEC §4.1).
    pub fn stack(mut self, stack: &str, attachable: bool) -> FakeNetwork {
        self.info
            .labels
            .insert("com.docker.stack.namespace".into(), stack.into());
        self.info.driver = "overlay".into();
        self.info.scope = "swarm".into();
        self.info.attachable = attachable;
        // Swarm's IDs: 25 characters of [0-9a-z].
        self.info.id = self.info.id[..25].to_string();
        self
    }

    /// Sets the driver and scope.
    pub fn driver(mut self, driver: &str, scope: &str) -> FakeNetwork {
        self.info.driver = driver.into();
        self.info.scope = scope.into();
        self
    }

    /// Sets the ID.
    pub fn id(mut self, id: &str) -> FakeNetwork {
        self.info.id = id.into();
        self
    }
}

/// A fresh IPv4 subnet for a fake network, as Docker's default pools
/// hand them out: `10.<n>.<m>.0/24` with its gateway at `.1`.
fn next_subnet() -> IpamSubnet {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let (a, b) = ((n / 256) % 256, n % 256);
    IpamSubnet {
        subnet: format!("10.{a}.{b}.0/24"),
        gateway: Some(format!("10.{a}.{b}.1")),
    }
}

/// An address for a new endpoint on network `n`: a host of its first IPv4
/// subnet of prefix 24 or shorter, from `.2` on (never its gateway, `.1`,
/// nor the last hosts, which SPEC §4.6's DNS upstream takes); empty when
/// it has none (as Docker shows an endpoint without an address).
fn address_in(n: &NetworkInfo) -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let Some(base) = n.ipam.iter().find_map(|s| {
        let (a, p) = s.subnet.split_once('/')?;
        let a: std::net::Ipv4Addr = a.parse().ok()?;
        let p: u32 = p.parse().ok()?;
        (p <= 24).then_some(u32::from(a))
    }) else {
        return String::new();
    };
    let host = 2 + NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 250;
    std::net::Ipv4Addr::from(base + host).to_string()
}

/// A path in a fake image's (and its containers') filesystem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FakePath {
    /// A regular file with this content.
    File(Vec<u8>),
    /// A directory.
    Dir,
    /// A symbolic link to this target.
    Symlink(String),
}

/// The filesystem every fake image starts with: `/etc` holding a root-only
/// `passwd` and `group`.
fn default_files() -> BTreeMap<String, FakePath> {
    BTreeMap::from([
        ("/etc".to_string(), FakePath::Dir),
        (
            "/etc/passwd".to_string(),
            FakePath::File(b"root:x:0:0:root:/root:/bin/sh\n".to_vec()),
        ),
        (
            "/etc/group".to_string(),
            FakePath::File(b"root:x:0:\n".to_vec()),
        ),
    ])
}

/// An image the fake engine has locally (or can pull).
#[derive(Clone, Debug)]
pub struct FakeImage {
    /// Reference it is found under (tag or digest reference).
    pub reference: String,
    /// Its inspect data.
    pub info: ImageInfo,
    /// Its filesystem, by absolute path (what the archive calls see).
    pub files: BTreeMap<String, FakePath>,
}

impl FakeImage {
    /// An image with a random ID found under `reference`.
    pub fn new(reference: &str) -> FakeImage {
        FakeImage {
            reference: reference.into(),
            info: ImageInfo {
                id: format!("sha256:{}", random_id()),
                repo_tags: vec![reference.into()],
                repo_digests: Vec::new(),
                labels: BTreeMap::new(),
                volumes: Vec::new(),
                layers: 1,
                env: vec![
                    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
                ],
            },
            files: default_files(),
        }
    }

    /// Sets (or, with `None`, removes) a path of the image's filesystem.
    pub fn file(mut self, path: &str, what: Option<FakePath>) -> FakeImage {
        match what {
            Some(w) => self.files.insert(path.into(), w),
            None => self.files.remove(path),
        };
        self
    }

    /// Adds a `VOLUME` path (`Config.Volumes`).
    pub fn volume(mut self, path: &str) -> FakeImage {
        self.info.volumes.push(path.into());
        self
    }

    /// Adds a label (`Config.Labels`).
    pub fn label(mut self, key: &str, value: &str) -> FakeImage {
        self.info.labels.insert(key.into(), value.into());
        self
    }
}

/// A container in the fake engine.
#[derive(Clone, Debug)]
struct FakeContainer {
    info: ContainerInfo,
    /// The command it was created with (what a process listing shows).
    cmd: Vec<String>,
    /// `HostConfig.AutoRemove`: removed once its main process exits.
    auto_remove: bool,
    /// `StdinOnce`: its stdin closes when the first attached client goes,
    /// and the idle process then exits (code 0).
    stdin_once: bool,
    /// Attachments to its stdin held now.
    holds: usize,
    /// Its stdin was closed (a `stdin_once` client went): it cannot run on.
    stdin_closed: bool,
    /// Its filesystem (the image's, plus what was written into it).
    files: BTreeMap<String, FakePath>,
    /// Processes started in it from outside (`docker exec`), by command.
    extra_processes: Vec<String>,
    /// What its log holds besides an egress proxy's ready line
    /// ([`FakeEngine::append_log`]).
    log: String,
    /// Archives uploaded into it, by directory, as `PUT
    /// /containers/{id}/archive` sent them; what `GET` of the same path
    /// answers ([`FakeEngine::archive`], [`FakeEngine::put_archive`]).
    archives: BTreeMap<String, Vec<u8>>,
}

impl FakeContainer {
    /// Its main process exited with `code` (Docker gave no error text).
    fn exit(&mut self, code: i64) {
        self.info.running = false;
        self.info.exit = Some((code, String::new()));
    }
}

/// A container as `GET /containers/json` lists it.
fn summary_of(c: &FakeContainer) -> ContainerSummary {
    let mut endpoints = c.info.endpoints.clone();
    endpoints.sort_by(|a, b| a.network_name.cmp(&b.network_name));
    ContainerSummary {
        id: c.info.id.clone(),
        name: c.info.name.clone(),
        labels: c.info.labels.clone(),
        state: if c.info.running { "running" } else { "created" }.into(),
        networks: endpoints.iter().map(|e| e.network_name.clone()).collect(),
        endpoints,
    }
}

/// Behaviour switches for scripted misbehaviour beyond plain failures.
#[derive(Clone, Debug, Default)]
pub struct Quirks {
    /// Warnings create returns.
    pub create_warnings: Vec<String>,
    /// Lines a build streams after its first step (what a `RUN` step
    /// prints: anything a hostile Dockerfile makes it print).
    pub build_output: Vec<String>,
    /// Create accepts the pids limit but the container shows none.
    pub drop_pids_limit: bool,
    /// Connect answers OK but the container does not join the network.
    pub ignore_connect: bool,
    /// A create of a network of this name also makes a twin of that name
    /// (same spec, an ID that sorts first), as a launch racing this one
    /// would: the daemon accepts a second network of a name.
    pub twin_network: Option<String>,
    /// Create ignores `init`.
    pub drop_init: bool,
    /// The container shows this `SecurityOpt` instead of the one create
    /// asked for (an engine that dropped or swapped the seccomp profile).
    pub security_opt: Option<Vec<String>>,
    /// Exit code every exec returns.
    pub exec_exit: i64,
    /// Output every exec writes to stdout.
    pub exec_stdout: Vec<u8>,
    /// An exec whose argv's first element equals this does not start: the
    /// engine reports it as the real one does when the program is missing
    /// (exit 126, [`super::NotStarted::NotFound`], none of its own text in
    /// the output).
    pub exec_not_found: Option<String>,
    /// An exec whose argv's first element equals this never ends (a command
    /// that outlives its timeout).
    pub exec_hangs: Option<String>,
    /// Exit code of the kill exec odek runs after a timeout or cancellation
    /// (`/bin/sh -c <script> odek-kill ODEK_EXEC_ID=… kill`); default 0.
    pub kill_exit: i64,
    /// Tagged processes the count exec that follows a kill reports
    /// (`… odek-kill ODEK_EXEC_ID=… count` prints `<n> 0`); default 0.
    pub kill_survivors: u64,
    /// Exec processes without any `ODEK_EXEC_ID` tag that the `main` and
    /// `count` scripts report (a command that rewrote its environment looks
    /// like this); default 0.
    pub kill_strangers: u64,
    /// What the `main` check after a timeout reports: false (default) — the
    /// command's own process still runs; true — it has exited.
    pub main_exited: bool,
    /// Every exec (but odek's kill scripts) takes this long before it
    /// returns (a command whose output stream outlives a timeout).
    pub exec_delay: Option<std::time::Duration>,
    /// The container's idle process could not start (a pids limit of 1, a
    /// missing `sleep`): the first process listing finds the container
    /// stopped with this exit code, as Docker would.
    pub idle_exits: Option<i64>,
    /// The container's idle process could not start, and the container
    /// stopped (and, auto-remove, is being removed) before odek connects
    /// it: the first connect finds it ended with this exit code and is
    /// refused as Docker refuses it ("marked for removal").
    pub exits_before_connect: Option<i64>,
    /// The process list shows only the init process, never the idle
    /// command (an image ENTRYPOINT that ignores its arguments).
    pub idle_missing: bool,
    /// Start takes this long before it answers (a slow daemon: a launch
    /// cancelled while its container exists).
    pub start_delay: Option<std::time::Duration>,
    /// Reading a file of a container takes this long (a slow storage
    /// driver: a launch cancelled while it reads an image's files).
    pub read_delay: Option<std::time::Duration>,
    /// Removing a container takes this long before it happens (a slow
    /// daemon: `odek pool down` racing claims).
    pub remove_delay: Option<std::time::Duration>,
    /// The release the engine reports (`20.10.24`, `26.0.0`); default
    /// `fake`, a release odek cannot read.
    pub server_version: Option<String>,
    /// Create ignores `HostConfig.Dns` (the container shows none).
    pub drop_dns: bool,
    /// What an egress proxy's log says in place of its ready line (SPEC
    /// §4.5): `Some("")`, a proxy that never says it is ready; a ready line
    /// with another hash, a proxy that serves another policy. `None` (the
    /// default): the ready line of the policy it was given, as the real
    /// proxy prints it.
    pub egress_ready: Option<String>,
}

#[derive(Default)]
struct State {
    api: Option<ApiVersion>,
    reachable: bool,
    networks: Vec<FakeNetwork>,
    images: Vec<FakeImage>,
    registry: Vec<FakeImage>,
    containers: BTreeMap<String, FakeContainer>,
    calls: Vec<Call>,
    counts: BTreeMap<Op, usize>,
    faults: Vec<Fault>,
    quirks: Quirks,
    built: Vec<(String, Vec<u8>)>,
    /// Exit codes of removed containers, by ID (what a removal wait answers).
    removed_exits: BTreeMap<String, i64>,
    /// IDs of containers whose stdin attachment was dropped, in order.
    released: Vec<String>,
    /// IDs of containers the engine removed by itself (auto-remove).
    auto_removed: Vec<String>,
    /// What `GET /info` says of the engine's isolation.
    security: EngineSecurity,
    /// Names and IDs of image probes (containers labelled
    /// `dev.odek.probe`), whose calls faults count apart.
    probes: std::collections::BTreeSet<String>,
    /// Calls per operation about probes.
    probe_counts: BTreeMap<Op, usize>,
}

impl State {
    /// Container `id`'s main process exited with `code`: it stops, and an
    /// auto-remove container is removed, its code kept for waits.
    fn ended(&mut self, id: &str, code: i64) {
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        c.exit(code);
        if c.auto_remove {
            self.containers.remove(id);
            self.removed_exits.insert(id.to_string(), code);
            self.auto_removed.push(id.to_string());
        }
    }
}

/// A fake attachment: dropping it closes the container's stdin when it was
/// created with `stdin_once`.
struct FakeHold {
    state: Arc<Mutex<State>>,
    id: String,
}

impl Drop for FakeHold {
    fn drop(&mut self) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.released.push(self.id.clone());
        let Some(c) = s.containers.get_mut(&self.id) else {
            return;
        };
        c.holds = c.holds.saturating_sub(1);
        if c.stdin_once {
            c.stdin_closed = true;
            if c.info.running {
                let id = self.id.clone();
                s.ended(&id, 0);
            }
        }
    }
}

/// The fake engine. Cheap to clone; clones share state.
#[derive(Clone)]
pub struct FakeEngine {
    endpoint: Endpoint,
    state: Arc<Mutex<State>>,
}

impl Default for FakeEngine {
    fn default() -> Self {
        Self::new()
    }
}

/// A random 64-hex ID like Docker's.
pub fn random_id() -> String {
    let bytes: [u8; 32] = rand::rng().random();
    hex::encode(bytes)
}

impl FakeEngine {
    /// An empty, reachable engine speaking API 1.41 with the three built-in
    /// networks `bridge`, `host`, `none`.
    pub fn new() -> FakeEngine {
        let mut default_bridge = FakeNetwork::bridge("bridge");
        default_bridge.info.options.insert(
            "com.docker.network.bridge.default_bridge".into(),
            "true".into(),
        );
        let state = State {
            api: Some(ApiVersion {
                major: 1,
                minor: 41,
            }),
            reachable: true,
            networks: vec![
                default_bridge,
                FakeNetwork::bridge("host").driver("host", "local"),
                FakeNetwork::bridge("none").driver("null", "local"),
            ],
            // Docker's own: runc registered (also under containerd's
            // names) and the default.
            security: EngineSecurity {
                runtimes: vec![
                    "io.containerd.runc.v2".into(),
                    "io.containerd.runtime.v1.linux".into(),
                    "runc".into(),
                ],
                default_runtime: Some("runc".into()),
                id: Some(FAKE_ENGINE_ID.into()),
                ..EngineSecurity::default()
            },
            ..Default::default()
        };
        FakeEngine {
            endpoint: Endpoint::unix("/fake/docker.sock"),
            state: Arc::new(Mutex::new(state)),
        }
    }

    /// This engine, reporting `endpoint` as its own (its calls stay in
    /// memory): for the rules that read the endpoint, e.g. whose socket it
    /// is (SPEC §6.2).
    pub fn with_endpoint(mut self, endpoint: Endpoint) -> FakeEngine {
        self.endpoint = endpoint;
        self
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A test that panicked while holding the lock poisons it; the state
        // is still the best record we have.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The last archive uploaded into directory `path` of container `id`
    /// (or put there by [`FakeEngine::put_archive`]).
    pub fn archive(&self, id: &str, path: &str) -> Option<Vec<u8>> {
        self.lock()
            .containers
            .get(id)
            .and_then(|c| c.archives.get(path).cloned())
    }

    /// Makes `GET /containers/{id}/archive?path=<path>` answer `archive`
    /// (what the sandbox changed, or a hostile tar). Panics on an unknown
    /// container.
    pub fn put_archive(&self, id: &str, path: &str, archive: Vec<u8>) {
        self.lock()
            .containers
            .get_mut(id)
            .expect("a container of this engine")
            .archives
            .insert(path.to_string(), archive);
    }

    /// Adds a network; returns its full ID.
    pub fn add_network(&self, n: FakeNetwork) -> String {
        let id = n.info.id.clone();
        self.lock().networks.push(n);
        id
    }

    /// Adds a running container that is not a sandbox (a Compose
    /// service's), attached to `network_id` with `aliases` and labelled
    /// with `labels`; returns its full ID. Panics on an unknown network.
    pub fn add_service(
        &self,
        name: &str,
        network_id: &str,
        aliases: &[&str],
        labels: &[(&str, &str)],
    ) -> String {
        let mut s = self.lock();
        let n = s
            .networks
            .iter()
            .find(|n| n.info.id == network_id)
            .expect("the service's network exists")
            .info
            .clone();
        let id = random_id();
        let info = ContainerInfo {
            id: id.clone(),
            name: name.to_string(),
            running: true,
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            network_mode: n.id.clone(),
            endpoints: vec![EndpointInfo {
                network_name: n.name,
                network_id: n.id,
                aliases: aliases.iter().map(|a| a.to_string()).collect(),
                endpoint_id: random_id(),
                ip: String::new(),
            }],
            ..ContainerInfo::default()
        };
        s.containers.insert(
            id.clone(),
            FakeContainer {
                info,
                cmd: Vec::new(),
                auto_remove: false,
                stdin_once: false,
                holds: 0,
                stdin_closed: false,
                files: BTreeMap::new(),
                extra_processes: Vec::new(),
                log: String::new(),
                archives: BTreeMap::new(),
            },
        );
        id
    }

    /// Removes a container that is not a sandbox (a Compose service's
    /// `down`), leaving every network it was attached to.
    pub fn remove_service(&self, id: &str) {
        self.lock().containers.remove(id);
    }

    /// Changes network `id` as `change` says (labels forged, a flag).
    pub fn update_network(&self, id: &str, change: impl FnOnce(&mut NetworkInfo)) {
        if let Some(n) = self.lock().networks.iter_mut().find(|n| n.info.id == id) {
            change(&mut n.info);
        }
    }

    /// Whether network `id` is `Internal` (false when there is none).
    pub fn network_internal(&self, id: &str) -> bool {
        self.lock()
            .networks
            .iter()
            .any(|n| n.info.id == id && n.info.internal)
    }

    /// Names of the link networks (labelled [`crate::labels::LINK`]).
    pub fn link_networks(&self) -> Vec<String> {
        self.lock()
            .networks
            .iter()
            .filter(|n| n.info.labels.contains_key(crate::labels::LINK))
            .map(|n| n.info.name.clone())
            .collect()
    }

    /// Removes a network by ID.
    pub fn remove_network(&self, id: &str) {
        self.lock().networks.retain(|n| n.info.id != id);
    }

    /// The full ID of the (first) network named `name`.
    pub fn network_id(&self, name: &str) -> Option<String> {
        self.lock()
            .networks
            .iter()
            .find(|n| n.info.name == name)
            .map(|n| n.info.id.clone())
    }

    /// Adds a local image.
    pub fn add_image(&self, i: FakeImage) -> String {
        let id = i.info.id.clone();
        self.lock().images.push(i);
        id
    }

    /// Makes `i` pullable under its reference.
    pub fn add_registry_image(&self, i: FakeImage) {
        self.lock().registry.push(i);
    }

    /// Sets what the engine says of its isolation (rootless, userns, its
    /// runtimes; a new engine has Docker's: `runc`, also the default).
    pub fn set_security(&self, sec: EngineSecurity) {
        self.lock().security = sec;
    }

    /// A path of container `id`'s filesystem now (e.g. the `/etc/passwd`
    /// odek wrote before start).
    pub fn container_file(&self, id: &str, path: &str) -> Option<FakePath> {
        self.lock().containers.get(id)?.files.get(path).cloned()
    }

    /// Sets the engine's API version.
    pub fn set_api_version(&self, v: ApiVersion) {
        self.lock().api = Some(v);
    }

    /// Makes every call fail as unreachable (or answer again).
    pub fn set_reachable(&self, reachable: bool) {
        self.lock().reachable = reachable;
    }

    /// Adds a scripted failure.
    pub fn fail(&self, f: Fault) {
        self.lock().faults.push(f);
    }

    /// Sets behaviour quirks.
    pub fn set_quirks(&self, q: Quirks) {
        self.lock().quirks = q;
    }

    /// Every call so far but those about image probes (the sandbox's and
    /// the other calls odek makes; a test that counts "the create" or "the
    /// removal" means the sandbox's).
    pub fn calls(&self) -> Vec<Call> {
        self.lock()
            .calls
            .iter()
            .filter(|c| !c.probe)
            .cloned()
            .collect()
    }

    /// The calls about image probes: create, stat, read, remove.
    pub fn probe_calls(&self) -> Vec<Call> {
        self.lock()
            .calls
            .iter()
            .filter(|c| c.probe)
            .cloned()
            .collect()
    }

    /// The calls of one operation.
    pub fn calls_of(&self, op: Op) -> Vec<Call> {
        self.calls().into_iter().filter(|c| c.op == op).collect()
    }

    /// True when no state-changing call was made.
    pub fn no_mutation(&self) -> bool {
        self.calls().iter().all(|c| !c.op.is_mutating())
    }

    /// IDs of containers that exist now.
    pub fn containers(&self) -> Vec<String> {
        self.lock().containers.keys().cloned().collect()
    }

    /// Inspect data of a container that exists now.
    pub fn container(&self, id: &str) -> Option<ContainerInfo> {
        self.lock().containers.get(id).map(|c| c.info.clone())
    }

    /// Changes container `id`'s inspect data in place (as `docker update`,
    /// or a container made behind odek's back, would).
    pub fn update_container(&self, id: &str, change: impl FnOnce(&mut ContainerInfo)) {
        if let Some(c) = self.lock().containers.get_mut(id) {
            change(&mut c.info);
        }
    }

    /// Starts `cmd` in container `id` from outside, as `docker exec -d`
    /// would: its process list shows it, and its `ExecIDs` an exec.
    pub fn exec_from_outside(&self, id: &str, cmd: &str) {
        if let Some(c) = self.lock().containers.get_mut(id) {
            c.extra_processes.push(cmd.to_string());
            c.info.exec_ids.push(random_id());
        }
    }

    /// Stops container `id` (as `docker stop` would): it stays, not running.
    pub fn stop_container(&self, id: &str) {
        if let Some(c) = self.lock().containers.get_mut(id) {
            c.info.running = false;
        }
    }

    /// Container `id`'s main process exited with `code` (as when it could
    /// not start its child): it stays, not running, with that exit code.
    pub fn exit_container(&self, id: &str, code: i64) {
        self.lock().ended(id, code);
    }

    /// Attachments to container `id`'s stdin held now (0 when it is gone).
    pub fn stdin_holds(&self, id: &str) -> usize {
        self.lock().containers.get(id).map_or(0, |c| c.holds)
    }

    /// IDs of containers whose stdin attachment was dropped, in order.
    pub fn released(&self) -> Vec<String> {
        self.lock().released.clone()
    }

    /// Appends `text` to the log of container `id` (its ID or name), as
    /// its process would write it ([`DockerApi::container_logs`]).
    pub fn append_log(&self, id: &str, text: &str) {
        let mut s = self.lock();
        if let Some(c) = s
            .containers
            .values_mut()
            .find(|c| c.info.id == id || c.info.name == id)
        {
            c.log.push_str(text);
        }
    }

    /// True when container `id` was removed without a remove call: by
    /// the engine itself, after its main process exited (auto-remove).
    pub fn auto_removed(&self, id: &str) -> bool {
        self.lock().auto_removed.iter().any(|a| a == id)
    }

    /// The local image found under `reference` (tag or ID), if any.
    pub fn image(&self, reference: &str) -> Option<ImageInfo> {
        Self::find_image(&self.lock().images, reference)
    }

    /// Build contexts received (tag, tar bytes).
    pub fn builds(&self) -> Vec<(String, Vec<u8>)> {
        self.lock().built.clone()
    }

    /// Records a call and applies scripted faults. Returns the fault to
    /// report *after* the effect when `after_effect` is set.
    fn enter(&self, op: Op, arg: &str) -> Result<Option<EngineError>, EngineError> {
        let mut s = self.lock();
        let probe = matches!(op, Op::StatPath | Op::ReadFile)
            || s.probes.contains(arg)
            || (op == Op::CreateContainer && arg.ends_with("-probe"));
        s.calls.push(Call {
            op,
            arg: arg.to_string(),
            probe,
        });
        let n = {
            let counts = if probe {
                &mut s.probe_counts
            } else {
                &mut s.counts
            };
            let c = counts.entry(op).or_insert(0);
            *c += 1;
            *c
        };
        if !s.reachable {
            return Err(EngineError::new(
                op,
                EngineErrorKind::Unreachable,
                "connection refused",
            ));
        }
        if let Some(f) = s
            .faults
            .iter()
            .find(|f| f.op == op && f.nth == n && f.probe == probe)
            .cloned()
        {
            let e = EngineError {
                op,
                kind: f.kind,
                status: match f.kind {
                    EngineErrorKind::Rejected => Some(500),
                    EngineErrorKind::NotFound => Some(404),
                    _ => None,
                },
                message: f.message.clone(),
            };
            if f.after_effect {
                return Ok(Some(e));
            }
            return Err(e);
        }
        Ok(None)
    }

    fn find_image(images: &[FakeImage], reference: &str) -> Option<ImageInfo> {
        images
            .iter()
            .find(|i| i.reference == reference || i.info.id == reference)
            .map(|i| i.info.clone())
    }
}

fn not_found(op: Op, what: &str) -> EngineError {
    EngineError {
        op,
        kind: EngineErrorKind::NotFound,
        status: Some(404),
        message: format!("No such {what}"),
    }
}

#[async_trait]
impl DockerApi for FakeEngine {
    fn no_supervisor(&self) -> Option<&'static str> {
        Some("the in-memory test engine runs no supervisor")
    }

    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    async fn version(&self) -> Result<EngineInfo, EngineError> {
        self.enter(Op::Version, "")?;
        let api = self.lock().api.ok_or_else(|| {
            EngineError::new(Op::Version, EngineErrorKind::Protocol, "no version")
        })?;
        if api < super::MIN_API_VERSION {
            return Err(EngineError::new(
                Op::Version,
                EngineErrorKind::Rejected,
                format!(
                    "the engine speaks API {api} at most; odek needs API {} or newer (Docker 19.03+)",
                    super::MIN_API_VERSION
                ),
            ));
        }
        let server_version = self
            .lock()
            .quirks
            .server_version
            .clone()
            .unwrap_or_else(|| "fake".into());
        Ok(EngineInfo {
            api_version: api,
            server_version,
        })
    }

    async fn list_networks(&self, filter: &NetworkFilter) -> Result<Vec<NetworkInfo>, EngineError> {
        let arg = format!("{filter:?}");
        self.enter(Op::ListNetworks, &arg)?;
        let s = self.lock();
        Ok(s.networks
            .iter()
            .filter(|n| match filter {
                NetworkFilter::Names(subs) => {
                    subs.iter().any(|sub| n.info.name.contains(sub.as_str()))
                }
                NetworkFilter::Label(l) => match l.split_once('=') {
                    Some((k, v)) => n.info.labels.get(k).map(String::as_str) == Some(v),
                    None => n.info.labels.contains_key(l.as_str()),
                },
            })
            .map(|n| NetworkInfo {
                containers: BTreeMap::new(),
                ..n.info.clone()
            })
            .collect())
    }

    async fn inspect_network(&self, id: &str) -> Result<Option<NetworkInfo>, EngineError> {
        self.enter(Op::InspectNetwork, id)?;
        let s = self.lock();
        let found = s
            .networks
            .iter()
            .find(|n| n.info.id == id)
            .or_else(|| {
                let by_name: Vec<_> = s.networks.iter().filter(|n| n.info.name == id).collect();
                (by_name.len() == 1).then(|| by_name[0])
            })
            .or_else(|| {
                let by_prefix: Vec<_> = s
                    .networks
                    .iter()
                    .filter(|n| !id.is_empty() && n.info.id.starts_with(id))
                    .collect();
                (by_prefix.len() == 1).then(|| by_prefix[0])
            });
        Ok(found.map(|n| {
            let mut info = n.info.clone();
            info.containers = s
                .containers
                .values()
                // As Docker: a stopped container keeps its endpoint
                // settings but is not listed on the network.
                .filter(|c| c.info.running)
                .filter(|c| c.info.endpoints.iter().any(|e| e.network_id == n.info.id))
                .map(|c| (c.info.id.clone(), c.info.name.clone()))
                .collect();
            info
        }))
    }

    async fn inspect_image(&self, reference: &str) -> Result<Option<ImageInfo>, EngineError> {
        self.enter(Op::InspectImage, reference)?;
        let s = self.lock();
        Ok(Self::find_image(&s.images, reference))
    }

    async fn registry_digest(&self, reference: &str) -> Result<Option<String>, EngineError> {
        self.enter(Op::DistributionInspect, reference)?;
        let s = self.lock();
        match s.registry.iter().find(|i| i.reference == reference) {
            Some(i) => Ok(Some(
                i.info
                    .repo_digests
                    .first()
                    .and_then(|d| d.split_once('@'))
                    .map_or_else(|| i.info.id.clone(), |(_, d)| d.to_string()),
            )),
            None => Err(EngineError::new(
                Op::DistributionInspect,
                EngineErrorKind::NotFound,
                format!("manifest for {reference} not found: manifest unknown"),
            )),
        }
    }

    async fn pull_image(
        &self,
        reference: &str,
        progress: ProgressSink<'_>,
    ) -> Result<(), EngineError> {
        self.enter(Op::PullImage, reference)?;
        let mut s = self.lock();
        match s
            .registry
            .iter()
            .find(|i| i.reference == reference)
            .cloned()
        {
            Some(i) => {
                progress(&format!("Pulling from {reference}"));
                s.images.push(i);
                Ok(())
            }
            None => Err(EngineError::new(
                Op::PullImage,
                EngineErrorKind::Stream,
                format!("manifest for {reference} not found: manifest unknown"),
            )),
        }
    }

    async fn build_image(
        &self,
        context_tar: Vec<u8>,
        _dockerfile: &str,
        tag: &str,
        labels: &BTreeMap<String, String>,
        progress: ProgressSink<'_>,
    ) -> Result<String, EngineError> {
        self.enter(Op::BuildImage, tag)?;
        progress("Step 1/1 : FROM fake");
        let output = self.lock().quirks.build_output.clone();
        for line in &output {
            progress(line);
        }
        let mut image = FakeImage::new(tag);
        image.info.labels = labels.clone();
        // A Dockerfile `FROM scratch` (the tar holds it uncompressed) makes
        // an image without a file, a layer or an environment.
        if context_tar
            .windows(b"FROM scratch".len())
            .any(|w| w == b"FROM scratch")
        {
            image.info.layers = 0;
            image.info.env.clear();
            image.files.clear();
        }
        let id = image.info.id.clone();
        let mut s = self.lock();
        s.built.push((tag.to_string(), context_tar));
        // The tag moves to the new image, as with Docker.
        s.images.retain(|i| i.reference != tag);
        s.images.push(image);
        Ok(id)
    }

    async fn create_container(&self, spec: &ContainerSpec) -> Result<Created, EngineError> {
        let late = self.enter(Op::CreateContainer, &spec.name)?;
        let mut s = self.lock();
        if s.containers.values().any(|c| c.info.name == spec.name) {
            // A 409 whose answer was lost looks like the lost answer.
            if let Some(e) = late {
                return Err(e);
            }
            return Err(EngineError {
                op: Op::CreateContainer,
                kind: EngineErrorKind::Rejected,
                status: Some(409),
                message: format!(
                    "Conflict. The container name \"/{}\" is already in use",
                    spec.name
                ),
            });
        }
        let image_files = s
            .images
            .iter()
            .find(|i| i.reference == spec.image || i.info.id == spec.image)
            .map(|i| i.files.clone())
            .unwrap_or_else(default_files);
        let image = Self::find_image(&s.images, &spec.image)
            .ok_or_else(|| not_found(Op::CreateContainer, &format!("image: {}", spec.image)))?;
        // Docker refuses a runtime it has not registered (400).
        let runtime = match &spec.runtime {
            Some(r) if !s.security.runtimes.contains(r) => {
                return Err(EngineError {
                    op: Op::CreateContainer,
                    kind: EngineErrorKind::Rejected,
                    status: Some(400),
                    message: format!("Unknown runtime specified {r}"),
                })
            }
            Some(r) => r.clone(),
            None => s.security.default_runtime.clone().unwrap_or_default(),
        };
        let mut endpoints = Vec::new();
        match spec.network_mode.as_str() {
            "none" | "bridge" => {
                let n = s
                    .networks
                    .iter()
                    .find(|n| n.info.name == spec.network_mode)
                    .ok_or_else(|| not_found(Op::CreateContainer, "network"))?;
                endpoints.push(EndpointInfo {
                    network_name: n.info.name.clone(),
                    network_id: n.info.id.clone(),
                    aliases: Vec::new(),
                    endpoint_id: random_id(),
                    ip: String::new(),
                });
            }
            id => {
                let n = s
                    .networks
                    .iter()
                    .find(|n| n.info.id == id)
                    .ok_or_else(|| not_found(Op::CreateContainer, &format!("network: {id}")))?;
                endpoints.push(EndpointInfo {
                    network_name: n.info.name.clone(),
                    network_id: n.info.id.clone(),
                    aliases: Vec::new(),
                    endpoint_id: random_id(),
                    ip: address_in(&n.info),
                });
            }
        }
        let id = random_id();
        let q = s.quirks.clone();
        let info = ContainerInfo {
            id: id.clone(),
            name: spec.name.clone(),
            image_id: image.id,
            running: false,
            exit: None,
            // The fake runs no process: the kernel's record of the mounts
            // cannot be read (SPEC §6.1 verify), as with a remote daemon.
            pid: None,
            labels: spec.labels.clone(),
            network_mode: spec.network_mode.clone(),
            endpoints,
            pids_limit: if q.drop_pids_limit {
                None
            } else {
                Some(spec.pids_limit)
            },
            init: Some(spec.init && !q.drop_init),
            tmpfs: spec
                .tmpfs
                .iter()
                .map(|t| (t.target.clone(), t.options.clone()))
                .collect(),
            memory_bytes: spec.memory_bytes.unwrap_or(0),
            nano_cpus: spec.nano_cpus.unwrap_or(0),
            user: spec.user.clone().unwrap_or_default(),
            entrypoint: spec.entrypoint.clone().unwrap_or_default(),
            healthcheck_disabled: spec.no_healthcheck,
            cap_drop: spec.cap_drop.clone(),
            security_opt: q
                .security_opt
                .clone()
                .unwrap_or_else(|| spec.security_opt.clone()),
            env: spec.env.clone(),
            runtime,
            dns: if q.drop_dns {
                Vec::new()
            } else {
                spec.dns.clone()
            },
            hardening: Hardening {
                ipc_mode: "private".into(),
                mounts: spec
                    .binds
                    .iter()
                    .map(|b| MountInfo {
                        kind: "bind".into(),
                        name: String::new(),
                        source: b.source.clone(),
                        destination: b.target.clone(),
                        rw: !b.read_only,
                    })
                    .collect(),
                ..Hardening::default()
            },
            exec_ids: Vec::new(),
        };
        if spec.labels.contains_key(crate::labels::PROBE) {
            s.probes.insert(spec.name.clone());
            s.probes.insert(id.clone());
        }
        s.containers.insert(
            id.clone(),
            FakeContainer {
                info,
                cmd: spec.cmd.clone(),
                auto_remove: spec.auto_remove,
                stdin_once: spec.stdin_once,
                holds: 0,
                stdin_closed: false,
                files: image_files,
                extra_processes: Vec::new(),
                log: String::new(),
                archives: BTreeMap::new(),
            },
        );
        if let Some(e) = late {
            return Err(e);
        }
        Ok(Created {
            id,
            warnings: q.create_warnings,
        })
    }

    async fn start_container(&self, id: &str) -> Result<(), EngineError> {
        self.enter(Op::StartContainer, id)?;
        let delay = self.lock().quirks.start_delay;
        if let Some(d) = delay {
            tokio::time::sleep(d).await;
        }
        let mut s = self.lock();
        let c = s
            .containers
            .get_mut(id)
            .ok_or_else(|| not_found(Op::StartContainer, "container"))?;
        c.info.running = true;
        if c.stdin_closed {
            // The idle process reads a closed stdin: it ends at once.
            let id = id.to_string();
            s.ended(&id, 0);
        }
        Ok(())
    }

    async fn disconnect_network(
        &self,
        network_id: &str,
        container_id: &str,
    ) -> Result<(), EngineError> {
        self.enter(Op::DisconnectNetwork, network_id)?;
        let mut s = self.lock();
        if let Some(c) = s.containers.get_mut(container_id) {
            c.info.endpoints.retain(|e| e.network_id != network_id);
        }
        Ok(())
    }

    async fn create_network(&self, spec: &NetworkSpec) -> Result<String, EngineError> {
        self.enter(Op::CreateNetwork, &spec.name)?;
        let mut n = FakeNetwork::bridge(&spec.name);
        n.info.internal = spec.internal;
        n.info.labels = spec.labels.clone();
        n.info.options = spec.options.clone();
        let mut st = self.lock();
        let twin_of = st.quirks.twin_network.as_deref() == Some(spec.name.as_str());
        if twin_of && n.info.id.starts_with('0') {
            // The twin (made first, "0…") must sort before this one.
            n.info.id.replace_range(..1, "1");
        }
        let id = n.info.id.clone();
        if twin_of {
            let mut twin = n.clone();
            twin.info.id = format!("0{}", &id[1..]);
            st.networks.push(twin);
        }
        st.networks.push(n);
        Ok(id)
    }

    async fn remove_network(&self, id: &str) -> Result<bool, EngineError> {
        self.enter(Op::RemoveNetwork, id)?;
        let mut s = self.lock();
        if s.containers
            .values()
            .any(|c| c.info.endpoints.iter().any(|e| e.network_id == id))
        {
            return Err(EngineError {
                op: Op::RemoveNetwork,
                kind: EngineErrorKind::Rejected,
                status: Some(403),
                message: format!("error while removing network: network {id} has active endpoints"),
            });
        }
        let before = s.networks.len();
        s.networks.retain(|n| n.info.id != id);
        Ok(s.networks.len() != before)
    }

    async fn list_network_members(
        &self,
        names: &[String],
        all: bool,
    ) -> Result<Vec<ContainerSummary>, EngineError> {
        self.enter(Op::ListContainers, &names.join(","))?;
        let s = self.lock();
        Ok(s.containers
            .values()
            .filter(|c| all || c.info.running)
            .filter(|c| {
                c.info.endpoints.iter().any(|e| {
                    names
                        .iter()
                        .any(|n| *n == e.network_name || *n == e.network_id)
                })
            })
            .map(summary_of)
            .collect())
    }

    async fn connect_network(
        &self,
        network_id: &str,
        container_id: &str,
        aliases: &[String],
    ) -> Result<(), EngineError> {
        self.enter(Op::ConnectNetwork, network_id)?;
        let mut s = self.lock();
        if let Some(code) = s.quirks.exits_before_connect.take() {
            s.ended(container_id, code);
            return Err(EngineError {
                op: Op::ConnectNetwork,
                kind: EngineErrorKind::Rejected,
                status: Some(500),
                message: format!(
                    "Container {container_id} is marked for removal and cannot be connected or disconnected to the network"
                ),
            });
        }
        let n = s
            .networks
            .iter()
            .find(|n| n.info.id == network_id)
            .cloned()
            .ok_or_else(|| not_found(Op::ConnectNetwork, "network"))?;
        let ignore = s.quirks.ignore_connect;
        let c = s
            .containers
            .get_mut(container_id)
            .ok_or_else(|| not_found(Op::ConnectNetwork, "container"))?;
        if !ignore {
            if c.info.endpoints.iter().any(|e| e.network_id == n.info.id) {
                return Err(EngineError {
                    op: Op::ConnectNetwork,
                    kind: EngineErrorKind::Rejected,
                    status: Some(403),
                    message: format!(
                        "endpoint with name {} already exists in network {}",
                        c.info.name, n.info.name
                    ),
                });
            }
            c.info.endpoints.push(EndpointInfo {
                ip: address_in(&n.info),
                network_name: n.info.name,
                network_id: n.info.id,
                aliases: aliases.to_vec(),
                endpoint_id: random_id(),
            });
        }
        Ok(())
    }

    async fn inspect_container(&self, id: &str) -> Result<Option<ContainerInfo>, EngineError> {
        self.enter(Op::InspectContainer, id)?;
        let s = self.lock();
        Ok(s.containers
            .values()
            .find(|c| c.info.id == id || c.info.name == id)
            .map(|c| c.info.clone()))
    }

    async fn container_processes(&self, id: &str) -> Result<Vec<String>, EngineError> {
        self.enter(Op::ListProcesses, id)?;
        let mut s = self.lock();
        let q = s.quirks.clone();
        let c = s
            .containers
            .values_mut()
            .find(|c| c.info.id == id || c.info.name == id)
            .ok_or_else(|| not_found(Op::ListProcesses, "container"))?;
        if let (true, Some(code)) = (c.info.running, q.idle_exits) {
            let cid = c.info.id.clone();
            s.ended(&cid, code);
            return Err(match s.containers.contains_key(&cid) {
                true => not_running(Op::ListProcesses, id),
                false => not_found(Op::ListProcesses, "container"),
            });
        }
        if !c.info.running {
            return Err(EngineError {
                op: Op::ListProcesses,
                kind: EngineErrorKind::Rejected,
                status: Some(409),
                message: format!("Container {id} is not running"),
            });
        }
        let mut cmds = vec![format!("/sbin/docker-init -- {}", c.cmd.join(" "))];
        if !q.idle_missing {
            cmds.push(c.cmd.join(" "));
        }
        cmds.extend(c.extra_processes.iter().cloned());
        Ok(cmds)
    }

    async fn remove_container(&self, id: &str) -> Result<bool, EngineError> {
        self.enter(Op::RemoveContainer, id)?;
        let delay = self.lock().quirks.remove_delay;
        if let Some(d) = delay {
            tokio::time::sleep(d).await;
        }
        let mut s = self.lock();
        let key = s
            .containers
            .values()
            .find(|c| c.info.id == id || c.info.name == id)
            .map(|c| c.info.id.clone());
        Ok(match key {
            Some(k) => {
                // A removal wait answers for a forced removal too (a
                // running container is killed: 137).
                let code = s.containers.get(&k).map_or(0, |c| match &c.info.exit {
                    Some((code, _)) if !c.info.running => *code,
                    _ => 137,
                });
                s.removed_exits.insert(k.clone(), code);
                s.containers.remove(&k).is_some()
            }
            None => false,
        })
    }

    async fn list_containers(&self, label: &str) -> Result<Vec<ContainerSummary>, EngineError> {
        self.enter(Op::ListContainers, label)?;
        let s = self.lock();
        Ok(s.containers
            .values()
            .filter(|c| match label.split_once('=') {
                Some((k, v)) => c.info.labels.get(k).map(String::as_str) == Some(v),
                None => c.info.labels.contains_key(label),
            })
            .map(summary_of)
            .collect())
    }

    async fn exec(
        &self,
        container_id: &str,
        spec: &ExecSpec,
        output: OutputSink<'_>,
    ) -> Result<ExecExit, EngineError> {
        self.enter(Op::Exec, &spec.cmd.join(" "))?;
        let (running, q) = {
            let s = self.lock();
            let c = s
                .containers
                .get(container_id)
                .ok_or_else(|| not_found(Op::Exec, "container"))?;
            (c.info.running, s.quirks.clone())
        };
        if !running {
            return Err(EngineError {
                op: Op::Exec,
                kind: EngineErrorKind::Rejected,
                status: Some(409),
                message: format!("Container {container_id} is not running"),
            });
        }
        if spec.cmd.get(3).map(String::as_str) == Some("odek-kill") {
            if spec.cmd.get(5).map(String::as_str) == Some("main") {
                let alive = if q.main_exited { "0" } else { "1" };
                output(
                    StreamKind::Stdout,
                    format!("{alive} {}\n", q.kill_strangers).as_bytes(),
                );
                return Ok(ExecExit::code(Some(0)));
            }
            if spec.cmd.get(5).map(String::as_str) == Some("count") {
                output(
                    StreamKind::Stdout,
                    format!("{} 0 {}\n", q.kill_survivors, q.kill_strangers).as_bytes(),
                );
                return Ok(ExecExit::code(Some(0)));
            }
            return Ok(ExecExit::code(Some(q.kill_exit)));
        }
        if q.exec_not_found.is_some() && q.exec_not_found.as_ref() == spec.cmd.first() {
            return Ok(ExecExit {
                code: Some(126),
                not_started: Some(super::NotStarted::NotFound),
            });
        }
        if q.exec_hangs.is_some() && q.exec_hangs.as_ref() == spec.cmd.first() {
            std::future::pending::<()>().await;
        }
        if let Some(d) = q.exec_delay {
            tokio::time::sleep(d).await;
        }
        if !q.exec_stdout.is_empty() {
            output(StreamKind::Stdout, &q.exec_stdout);
        }
        Ok(ExecExit::code(Some(q.exec_exit)))
    }

    async fn attach_stdin(&self, id: &str) -> Result<StdinHold, EngineError> {
        self.enter(Op::AttachContainer, id)?;
        let mut s = self.lock();
        let c = s
            .containers
            .get_mut(id)
            .ok_or_else(|| not_found(Op::AttachContainer, "container"))?;
        c.holds += 1;
        Ok(StdinHold::new(Box::new(FakeHold {
            state: self.state.clone(),
            id: id.to_string(),
        })))
    }

    async fn attach_session(&self, id: &str) -> Result<super::Link, EngineError> {
        self.enter(Op::AttachContainer, id)?;
        Err(EngineError::new(
            Op::AttachContainer,
            EngineErrorKind::Rejected,
            "the in-memory engine runs no supervisor",
        ))
    }

    async fn exec_session(&self, id: &str, _spec: &ExecSpec) -> Result<super::Link, EngineError> {
        self.enter(Op::Exec, id)?;
        Err(EngineError::new(
            Op::Exec,
            EngineErrorKind::Rejected,
            "the in-memory engine runs no supervisor",
        ))
    }

    async fn security(&self) -> Result<EngineSecurity, EngineError> {
        self.enter(Op::Info, "")?;
        Ok(self.lock().security.clone())
    }

    async fn stat_path(&self, id: &str, path: &str) -> Result<Option<PathStat>, EngineError> {
        self.enter(Op::StatPath, path)?;
        let s = self.lock();
        let c = s
            .containers
            .get(id)
            .ok_or_else(|| not_found(Op::StatPath, "container"))?;
        Ok(c.files.get(path).map(|p| PathStat {
            is_dir: *p == FakePath::Dir,
            is_symlink: matches!(p, FakePath::Symlink(_)),
            is_regular: matches!(p, FakePath::File(_)),
            link_target: match p {
                FakePath::Symlink(t) => t.clone(),
                _ => String::new(),
            },
        }))
    }

    async fn read_file(
        &self,
        id: &str,
        path: &str,
        max: usize,
    ) -> Result<Option<Vec<u8>>, EngineError> {
        self.enter(Op::ReadFile, path)?;
        let delay = self.lock().quirks.read_delay;
        if let Some(d) = delay {
            tokio::time::sleep(d).await;
        }
        let s = self.lock();
        let c = s
            .containers
            .get(id)
            .ok_or_else(|| not_found(Op::ReadFile, "container"))?;
        match c.files.get(path) {
            Some(FakePath::File(b)) if b.len() > max => Err(EngineError::new(
                Op::ReadFile,
                EngineErrorKind::Rejected,
                format!("{path} is larger than {max} bytes"),
            )),
            Some(FakePath::File(b)) => Ok(Some(b.clone())),
            _ => Ok(None),
        }
    }

    async fn upload_archive(
        &self,
        id: &str,
        path: &str,
        archive: Vec<u8>,
    ) -> Result<(), EngineError> {
        self.enter(Op::UploadArchive, id)?;
        let mut s = self.lock();
        let c = s
            .containers
            .get_mut(id)
            .ok_or_else(|| not_found(Op::UploadArchive, "container"))?;
        c.archives.insert(path.to_string(), archive);
        Ok(())
    }

    async fn download_archive(
        &self,
        id: &str,
        path: &str,
        max: u64,
    ) -> Result<Option<Vec<u8>>, EngineError> {
        self.enter(Op::DownloadArchive, id)?;
        let s = self.lock();
        let c = s
            .containers
            .get(id)
            .ok_or_else(|| not_found(Op::DownloadArchive, "container"))?;
        match c.archives.get(path) {
            Some(a) if a.len() as u64 > max => Err(EngineError::new(
                Op::DownloadArchive,
                EngineErrorKind::Rejected,
                format!("the archive of {path} is larger than {max} bytes"),
            )),
            other => Ok(other.cloned()),
        }
    }

    async fn container_logs(&self, id: &str, max: usize) -> Result<Option<String>, EngineError> {
        self.enter(Op::Logs, id)?;
        let s = self.lock();
        let Some(c) = s
            .containers
            .values()
            .find(|c| c.info.id == id || c.info.name == id)
        else {
            return Ok(None);
        };
        // An egress proxy (SPEC §4.5) says it is ready with its policy's
        // hash, as the real one does; then what a test appended.
        let mut log = String::new();
        if let [serve, flag, json] = c.cmd.as_slice() {
            if serve == "serve" && flag == "--policy" {
                if let Some(instead) = &s.quirks.egress_ready {
                    log.push_str(instead);
                } else if let Ok(p) = odek_egress::policy::Policy::from_json(json) {
                    log.push_str(&odek_egress::policy::ready_line(&p));
                    log.push('\n');
                }
            }
        }
        log.push_str(&c.log);
        let cut = log.len().saturating_sub(max);
        Ok(Some(log[cut..].to_string()))
    }

    async fn wait_removed(&self, id: &str) -> Result<ExitWait, EngineError> {
        self.enter(Op::WaitContainer, id)?;
        if !self.lock().containers.contains_key(id) {
            return Err(not_found(Op::WaitContainer, "container"));
        }
        let state = self.state.clone();
        let id = id.to_string();
        Ok(ExitWait::spawn(async move {
            loop {
                let code = state
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .removed_exits
                    .get(&id)
                    .copied();
                if let Some(code) = code {
                    return Ok(code);
                }
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
        }))
    }
}

/// Docker's answer about a container that is not running.
fn not_running(op: Op, id: &str) -> EngineError {
    EngineError {
        op,
        kind: EngineErrorKind::Rejected,
        status: Some(409),
        message: format!("Container {id} is not running"),
    }
}
