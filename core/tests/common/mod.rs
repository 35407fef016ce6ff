//! Shared builders for the fake-engine suites (SPEC §12): a fake Docker
//! engine with a local image `odek-test/base:1` and a running Compose project
//! `shop` (networks `shop_default`, not internal, and `shop_backend`,
//! internal), a temporary working directory and `$ODEK_HOME`, and settings
//! given as CLI flags.
//!
//! Every network in the fake has a fixed ID (the built-in `bridge`, `host`
//! and `none` are replaced by fixed-ID copies), so ID-prefix tests never
//! collide with a random ID.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use odek_core::config::{ConfigInputs, Layer};
use odek_core::engine::{
    ContainerInfo, ContainerSpec, ContainerSummary, Created, DockerApi, Endpoint, EngineError,
    EngineInfo, EngineSecurity, ExecExit, ExecSpec, ExitWait, FakeEngine, FakeImage, FakeNetwork,
    ImageInfo, NetworkFilter, NetworkInfo, Op, OutputSink, PathStat, ProgressSink, StdinHold,
};
use odek_core::{Client, Error, FailureClass, Plan, Reporter, Sandbox, Warning, WarningKind};

/// The test image every test passes with `--sandbox-image`.
pub const IMAGE: &str = "odek-test/base:1";
/// The Compose project of the fixture.
pub const PROJECT: &str = "shop";
/// `shop_default`: not internal.
pub const SHOP_DEFAULT: &str = "shop_default";
/// `shop_backend`: internal.
pub const SHOP_BACKEND: &str = "shop_backend";
/// Full ID of `shop_default`.
pub const SHOP_DEFAULT_ID: &str =
    "abcd1234ef56789012345678901234567890123456789012345678901234abcd";
/// Full ID of `shop_backend`.
pub const SHOP_BACKEND_ID: &str =
    "0bac4e0d0bac4e0d0bac4e0d0bac4e0d0bac4e0d0bac4e0d0bac4e0d0bac4e0d";
/// Fixed IDs of the built-in networks.
pub const BRIDGE_ID: &str = "b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1";
/// Fixed ID of `host`.
pub const HOST_ID: &str = "c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2";
/// Fixed ID of `none`.
pub const NONE_ID: &str = "d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3";

/// The create warning of a kernel without the pids cgroup.
pub const PIDS_DISCARDED: &str =
    "Your kernel does not support pids limit capabilities or the cgroup is not mounted. PIDs limit discarded.";

/// A fixed 64-hex ID built from a short seed (padded with its own digits).
pub fn hex_id(seed: &str) -> String {
    assert!(seed.bytes().all(|b| b.is_ascii_hexdigit()) && !seed.is_empty());
    seed.chars().cycle().take(64).collect()
}

/// True for a full Docker ID: 64 lowercase hex digits.
pub fn is_full_id(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A fake engine with only the built-in networks, with fixed IDs.
pub fn bare_fake() -> FakeEngine {
    let fake = FakeEngine::new();
    for name in ["bridge", "host", "none"] {
        let old = fake.network_id(name).expect("built-in network");
        fake.remove_network(&old);
    }
    let mut bridge = FakeNetwork::bridge("bridge").id(BRIDGE_ID);
    bridge.info.options.insert(
        "com.docker.network.bridge.default_bridge".into(),
        "true".into(),
    );
    fake.add_network(bridge);
    fake.add_network(
        FakeNetwork::bridge("host")
            .driver("host", "local")
            .id(HOST_ID),
    );
    fake.add_network(
        FakeNetwork::bridge("none")
            .driver("null", "local")
            .id(NONE_ID),
    );
    fake
}

/// The standard fixture: the test image and the running `shop` project.
pub fn shop_fake() -> FakeEngine {
    let fake = bare_fake();
    fake.add_image(FakeImage::new(IMAGE));
    fake.add_network(
        FakeNetwork::bridge(SHOP_DEFAULT)
            .compose(PROJECT)
            .id(SHOP_DEFAULT_ID),
    );
    fake.add_network(
        FakeNetwork::bridge(SHOP_BACKEND)
            .compose(PROJECT)
            .internal()
            .id(SHOP_BACKEND_ID),
    );
    fake
}

/// A reporter that keeps every warning.
#[derive(Default)]
pub struct Collect {
    warnings: Mutex<Vec<Warning>>,
    progress: Mutex<Vec<String>>,
}

impl Collect {
    /// The warnings so far.
    pub fn warnings(&self) -> Vec<Warning> {
        self.warnings.lock().expect("lock").clone()
    }

    /// The warnings of one kind.
    pub fn of(&self, kind: WarningKind) -> Vec<Warning> {
        self.warnings()
            .into_iter()
            .filter(|w| w.kind == kind)
            .collect()
    }

    /// Progress lines so far.
    pub fn progress(&self) -> Vec<String> {
        self.progress.lock().expect("lock").clone()
    }
}

impl Reporter for Collect {
    fn warning(&self, w: &Warning) {
        self.warnings.lock().expect("lock").push(w.clone());
    }

    fn progress(&self, line: &str) {
        self.progress.lock().expect("lock").push(line.to_string());
    }
}

/// One test's world: temp dirs, inputs, the fake and a client over it.
pub struct Setup {
    dir: tempfile::TempDir,
    /// The working directory (canonical).
    pub workdir: PathBuf,
    /// `$ODEK_HOME` (outside the working directory).
    pub odek_home: PathBuf,
    /// What `resolve` reads.
    pub inputs: ConfigInputs,
    /// The fake engine (clones share state with the one the client uses).
    pub fake: FakeEngine,
    /// The client.
    pub odek: Client,
    /// Warnings and progress reported.
    pub reporter: Collect,
}

impl Setup {
    /// The standard fixture with `--sandbox-image odek-test/base:1`.
    pub fn new() -> Setup {
        Setup::with_fake(shop_fake()).image(IMAGE)
    }

    /// The standard fixture without an image flag (pinned default path).
    pub fn without_image() -> Setup {
        Setup::with_fake(shop_fake())
    }

    /// A setup over a given fake, no flags.
    pub fn with_fake(fake: FakeEngine) -> Setup {
        let engine: Arc<dyn DockerApi> = Arc::new(fake.clone());
        Setup::over(fake, engine)
    }

    /// A setup whose client talks to `engine` (e.g. a [`Spy`] over `fake`).
    pub fn over(fake: FakeEngine, engine: Arc<dyn DockerApi>) -> Setup {
        // Files the tests write must not be group-writable whatever the
        // developer's umask: such a user config is refused (SPEC §7.3).
        rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o022));
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical tempdir");
        let workdir = root.join("work");
        let home = root.join("home");
        let odek_home = home.join(".odek");
        std::fs::create_dir_all(&workdir).expect("workdir");
        std::fs::create_dir_all(&odek_home).expect("odek home");
        let mut env = BTreeMap::new();
        env.insert("HOME".to_string(), home.display().to_string());
        env.insert("ODEK_HOME".to_string(), odek_home.display().to_string());
        env.insert("PATH".to_string(), "/usr/bin:/bin".to_string());
        let inputs = ConfigInputs {
            workdir: workdir.clone(),
            env,
            flags: Layer::default(),
            flag_names: BTreeMap::new(),
            read_user_config: true,
            read_project_config: true,
        };
        Setup {
            dir,
            workdir,
            odek_home,
            inputs,
            fake,
            odek: Client::with_engine(engine),
            reporter: Collect::default(),
        }
    }

    /// Sets one flag: its config `key`, the `flag` as typed, and its value.
    pub fn flag(mut self, key: &str, flag: &str, set: impl FnOnce(&mut Layer)) -> Setup {
        set(&mut self.inputs.flags);
        self.inputs.flag_names.insert(key.into(), flag.into());
        self
    }

    /// `--sandbox-image`.
    pub fn image(self, image: &str) -> Setup {
        let image = image.to_string();
        self.flag("sandbox_image", "--sandbox-image", |l| {
            l.sandbox_image = Some(image)
        })
    }

    /// `--sandbox` (explicit mode).
    pub fn explicit(self) -> Setup {
        self.flag("sandbox", "--sandbox", |l| l.sandbox = Some(true))
    }

    /// `--no-sandbox`.
    pub fn no_sandbox(self) -> Setup {
        self.flag("sandbox", "--no-sandbox", |l| l.sandbox = Some(false))
    }

    /// `--sandbox-compose <project>`.
    pub fn compose(self, project: &str) -> Setup {
        let p = project.to_string();
        self.flag("sandbox_compose_project", "--sandbox-compose", |l| {
            l.sandbox_compose_project = Some(p)
        })
    }

    /// `--sandbox-networks a,b`.
    pub fn networks(self, names: &[&str]) -> Setup {
        let v: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        self.flag("sandbox_networks", "--sandbox-networks", |l| {
            l.sandbox_networks = Some(v)
        })
    }

    /// `--sandbox-network <mode>`.
    pub fn network_mode(self, mode: &str) -> Setup {
        let m = mode.to_string();
        self.flag("sandbox_network", "--sandbox-network", |l| {
            l.sandbox_network = Some(m)
        })
    }

    /// `--sandbox-pids-limit <n>`.
    pub fn pids(self, n: i64) -> Setup {
        self.flag("sandbox_pids_limit", "--sandbox-pids-limit", |l| {
            l.sandbox_pids_limit = Some(n)
        })
    }

    /// `--sandbox-memory <size>`.
    pub fn memory(self, m: &str) -> Setup {
        let m = m.to_string();
        self.flag("sandbox_memory", "--sandbox-memory", |l| {
            l.sandbox_memory = Some(m)
        })
    }

    /// `--sandbox-cpus <n>`.
    pub fn cpus(self, c: &str) -> Setup {
        let c = c.to_string();
        self.flag("sandbox_cpus", "--sandbox-cpus", |l| {
            l.sandbox_cpus = Some(c)
        })
    }

    /// `--sandbox-readonly`.
    pub fn readonly(self) -> Setup {
        self.flag("sandbox_readonly", "--sandbox-readonly", |l| {
            l.sandbox_readonly = Some(true)
        })
    }

    /// Sets a process environment variable of the snapshot.
    pub fn env(mut self, key: &str, value: &str) -> Setup {
        self.inputs.env.insert(key.into(), value.into());
        self
    }

    /// Writes `./odek.json`.
    pub fn project_config(self, json: &str) -> Setup {
        std::fs::write(self.workdir.join("odek.json"), json).expect("write odek.json");
        self
    }

    /// Writes `$ODEK_HOME/config.json`.
    pub fn user_config(self, json: &str) -> Setup {
        std::fs::write(self.odek_home.join("config.json"), json).expect("write config.json");
        self
    }

    /// The temp root (parent of the working directory and home).
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// Resolves with the collecting reporter.
    pub async fn resolve(&self) -> Result<Plan, Error> {
        self.odek.resolve(&self.inputs, &self.reporter).await
    }

    /// Launches a plan with default options.
    pub async fn launch(&self, plan: &Plan) -> Result<Sandbox, Error> {
        self.odek
            .launch(plan, &odek_core::LaunchOptions::default(), &self.reporter)
            .await
    }

    /// Resolve, then launch.
    pub async fn up(&self) -> Result<Sandbox, Error> {
        let plan = self.resolve().await?;
        self.launch(&plan).await
    }

    /// The single container that exists now, with its inspect data.
    /// Adds the running services of the fixture's Compose project, as
    /// `compose up` leaves them: `shop-redis-1` on shop_default (alias
    /// `redis`) and `shop-postgres-1` on shop_backend (alias `postgres`).
    pub fn services(self) -> Setup {
        for (name, svc, net) in [
            ("shop-redis-1", "redis", SHOP_DEFAULT_ID),
            ("shop-postgres-1", "postgres", SHOP_BACKEND_ID),
        ] {
            self.fake.add_service(
                name,
                net,
                &[svc],
                &[
                    ("com.docker.compose.project", PROJECT),
                    ("com.docker.compose.service", svc),
                ],
            );
        }
        self
    }

    /// The one odek sandbox container (services left out).
    pub fn only_sandbox(&self) -> ContainerInfo {
        let ids: Vec<String> = self
            .fake
            .containers()
            .into_iter()
            .filter(|id| {
                self.fake
                    .container(id)
                    .is_some_and(|c| c.labels.contains_key(odek_core::labels::SANDBOX))
            })
            .collect();
        assert_eq!(ids.len(), 1, "expected exactly one sandbox, have {ids:?}");
        self.fake.container(&ids[0]).expect("container exists")
    }

    /// The full ID of sandbox `sandbox`'s link network (SPEC §4.4).
    pub fn link_id(&self, sandbox: &str) -> String {
        self.fake
            .network_id(&odek_core::link::link_name(sandbox))
            .expect("the sandbox's link network exists")
    }

    pub fn only_container(&self) -> ContainerInfo {
        let ids = self.fake.containers();
        assert_eq!(ids.len(), 1, "expected exactly one container, have {ids:?}");
        self.fake.container(&ids[0]).expect("container exists")
    }

    /// Mutating calls made so far, as `op arg` lines (for messages).
    pub fn mutations(&self) -> Vec<String> {
        self.fake
            .calls()
            .into_iter()
            .filter(|c| c.op.is_mutating())
            .map(|c| format!("{} {}", c.op, c.arg))
            .collect()
    }
}

/// Asserts a refusal: its class, that the message names the cause, and that
/// no container is left.
#[track_caller]
pub fn assert_refused(s: &Setup, err: &Error, class: FailureClass, needle: &str) {
    assert_eq!(err.class(), class, "wrong class for: {err}");
    let msg = err.to_string();
    assert!(
        msg.contains(needle),
        "message does not name {needle:?}: {msg}"
    );
    let sandboxes: Vec<String> = s
        .fake
        .containers()
        .into_iter()
        .filter(|id| {
            s.fake
                .container(id)
                .is_none_or(|c| c.labels.contains_key(odek_core::labels::SANDBOX))
        })
        .collect();
    assert!(
        sandboxes.is_empty(),
        "a container was left behind: {sandboxes:?}"
    );
    assert!(
        s.fake.link_networks().is_empty(),
        "a link network was left behind: {:?}",
        s.fake.link_networks()
    );
}

/// [`assert_refused`] plus: no state-changing Docker call at all (a refusal
/// before create).
#[track_caller]
pub fn assert_refused_before_create(s: &Setup, err: &Error, class: FailureClass, needle: &str) {
    assert_refused(s, err, class, needle);
    assert!(
        s.fake.no_mutation(),
        "mutating calls were made: {:?}",
        s.mutations()
    );
}

/// A pass-through engine over a [`FakeEngine`] that records every create
/// request (the fake's inspect data has no binds, env or working dir) and can
/// make the daemon vanish right after a given call (so that removal fails
/// too, as when the daemon really goes away).
pub struct Spy {
    /// The fake underneath.
    pub fake: FakeEngine,
    specs: Mutex<Vec<ContainerSpec>>,
    execs: Mutex<Vec<ExecSpec>>,
    vanish_after: Mutex<Option<Op>>,
    version_override: Mutex<Option<EngineInfo>>,
    aliases: Mutex<BTreeMap<(String, String), Vec<String>>>,
    /// (op, about a probe, hook).
    hooks: Mutex<Vec<(Op, bool, Hook)>>,
    /// IDs of image probes (containers labelled `dev.odek.probe`).
    probes: Mutex<std::collections::BTreeSet<String>>,
    /// A probe's create: run this when the request arrives, then answer
    /// after the delay (a create in flight; see [`Spy::slow_probe_create`]).
    slow_probe_create: Mutex<Option<SlowCreate>>,
}

/// A delay and what runs when the request arrives (see
/// [`Spy::slow_probe_create`]).
type SlowCreate = (std::time::Duration, Box<dyn FnOnce() + Send>);

/// Something done to the fake right after a call (see [`Spy::after_call`]).
type Hook = Box<dyn FnOnce(&FakeEngine) + Send>;

impl Spy {
    /// A spy over `fake`.
    pub fn new(fake: FakeEngine) -> Arc<Spy> {
        Arc::new(Spy {
            fake,
            specs: Mutex::new(Vec::new()),
            execs: Mutex::new(Vec::new()),
            vanish_after: Mutex::new(None),
            version_override: Mutex::new(None),
            aliases: Mutex::new(BTreeMap::new()),
            hooks: Mutex::new(Vec::new()),
            probes: Mutex::new(Default::default()),
            slow_probe_create: Mutex::new(None),
        })
    }

    /// The next image probe's create request runs `on_request` as it
    /// arrives and is answered `delay` later (the container is made then):
    /// a launch cancelled while that create is in flight.
    pub fn slow_probe_create(
        &self,
        delay: std::time::Duration,
        on_request: impl FnOnce() + Send + 'static,
    ) {
        *self.slow_probe_create.lock().expect("lock") = Some((delay, Box::new(on_request)));
    }

    /// Runs `f` on the fake once, right after the next call of `op` (e.g. a
    /// network joining the project while the image is being checked) —
    /// a call about a sandbox, not about an image probe.
    pub fn after_call(&self, op: Op, f: impl FnOnce(&FakeEngine) + Send + 'static) {
        self.hooks
            .lock()
            .expect("lock")
            .push((op, false, Box::new(f)));
    }

    /// [`Spy::after_call`] for a call about an image probe (the container
    /// odek creates, never starts, to read an image's paths).
    pub fn after_probe_call(&self, op: Op, f: impl FnOnce(&FakeEngine) + Send + 'static) {
        self.hooks
            .lock()
            .expect("lock")
            .push((op, true, Box::new(f)));
    }

    /// Every create request of a sandbox so far (not of image probes).
    pub fn specs(&self) -> Vec<ContainerSpec> {
        self.all_specs()
            .into_iter()
            .filter(|s| !s.labels.contains_key(odek_core::labels::PROBE))
            .collect()
    }

    /// The create requests of image probes.
    pub fn probe_specs(&self) -> Vec<ContainerSpec> {
        self.all_specs()
            .into_iter()
            .filter(|s| s.labels.contains_key(odek_core::labels::PROBE))
            .collect()
    }

    fn all_specs(&self) -> Vec<ContainerSpec> {
        self.specs.lock().expect("lock").clone()
    }

    /// Every exec request so far.
    pub fn execs(&self) -> Vec<ExecSpec> {
        self.execs.lock().expect("lock").clone()
    }

    /// After the next call of `op` (whatever its outcome) every call fails
    /// as unreachable.
    pub fn vanish_after(&self, op: Op) {
        *self.vanish_after.lock().expect("lock") = Some(op);
    }

    /// Makes `version` answer OK with this info, bypassing the fake's check.
    pub fn answer_version(&self, info: EngineInfo) {
        *self.version_override.lock().expect("lock") = Some(info);
    }

    /// Gives container `container_id` these DNS aliases on network
    /// `network_id` in what inspect reports (the fake cannot model aliases).
    pub fn set_aliases(&self, container_id: &str, network_id: &str, aliases: &[&str]) {
        self.aliases.lock().expect("lock").insert(
            (container_id.to_string(), network_id.to_string()),
            aliases.iter().map(|a| a.to_string()).collect(),
        );
    }

    fn after(&self, op: Op) {
        self.after_of(op, false)
    }

    /// Runs the hooks due after `op` about a probe (or not); only a call
    /// about a sandbox can make the daemon vanish.
    fn after_of(&self, op: Op, probe: bool) {
        let due: Vec<Hook> = {
            let mut hooks = self.hooks.lock().expect("lock");
            let (due, keep) = std::mem::take(&mut *hooks)
                .into_iter()
                .partition(|(o, p, _)| *o == op && *p == probe);
            *hooks = keep;
            due.into_iter().map(|(_, _, f)| f).collect()
        };
        for f in due {
            f(&self.fake);
        }
        if probe {
            return;
        }
        let mut v = self.vanish_after.lock().expect("lock");
        if *v == Some(op) {
            *v = None;
            self.fake.set_reachable(false);
        }
    }
}

#[async_trait]
impl DockerApi for Spy {
    fn endpoint(&self) -> &Endpoint {
        self.fake.endpoint()
    }

    fn no_supervisor(&self) -> Option<&'static str> {
        self.fake.no_supervisor()
    }

    async fn version(&self) -> Result<EngineInfo, EngineError> {
        let over = self.version_override.lock().expect("lock").clone();
        if let Some(info) = over {
            return Ok(info);
        }
        let r = self.fake.version().await;
        self.after(Op::Version);
        r
    }

    async fn list_networks(&self, filter: &NetworkFilter) -> Result<Vec<NetworkInfo>, EngineError> {
        let r = self.fake.list_networks(filter).await;
        self.after(Op::ListNetworks);
        r
    }

    async fn inspect_network(&self, id: &str) -> Result<Option<NetworkInfo>, EngineError> {
        let r = self.fake.inspect_network(id).await;
        self.after(Op::InspectNetwork);
        r
    }

    async fn inspect_image(&self, reference: &str) -> Result<Option<ImageInfo>, EngineError> {
        let r = self.fake.inspect_image(reference).await;
        self.after(Op::InspectImage);
        r
    }

    async fn pull_image(
        &self,
        reference: &str,
        progress: ProgressSink<'_>,
    ) -> Result<(), EngineError> {
        let r = self.fake.pull_image(reference, progress).await;
        self.after(Op::PullImage);
        r
    }

    async fn build_image(
        &self,
        context_tar: Vec<u8>,
        dockerfile: &str,
        tag: &str,
        labels: &BTreeMap<String, String>,
        progress: ProgressSink<'_>,
    ) -> Result<String, EngineError> {
        let r = self
            .fake
            .build_image(context_tar, dockerfile, tag, labels, progress)
            .await;
        self.after(Op::BuildImage);
        r
    }

    async fn create_container(&self, spec: &ContainerSpec) -> Result<Created, EngineError> {
        self.specs.lock().expect("lock").push(spec.clone());
        let probe = spec.labels.contains_key(odek_core::labels::PROBE);
        let slow = match probe {
            true => self.slow_probe_create.lock().expect("lock").take(),
            false => None,
        };
        if let Some((delay, on_request)) = slow {
            on_request();
            tokio::time::sleep(delay).await;
        }
        let r = self.fake.create_container(spec).await;
        if let (true, Ok(c)) = (probe, &r) {
            self.probes.lock().expect("lock").insert(c.id.clone());
        }
        self.after_of(Op::CreateContainer, probe);
        r
    }

    async fn start_container(&self, id: &str) -> Result<(), EngineError> {
        let r = self.fake.start_container(id).await;
        self.after(Op::StartContainer);
        r
    }

    async fn connect_network(
        &self,
        network_id: &str,
        container_id: &str,
        aliases: &[String],
    ) -> Result<(), EngineError> {
        let r = self
            .fake
            .connect_network(network_id, container_id, aliases)
            .await;
        self.after(Op::ConnectNetwork);
        r
    }

    async fn disconnect_network(
        &self,
        network_id: &str,
        container_id: &str,
    ) -> Result<(), EngineError> {
        let r = self.fake.disconnect_network(network_id, container_id).await;
        self.after(Op::DisconnectNetwork);
        r
    }

    async fn create_network(
        &self,
        spec: &odek_core::engine::NetworkSpec,
    ) -> Result<String, EngineError> {
        let r = self.fake.create_network(spec).await;
        self.after(Op::CreateNetwork);
        r
    }

    async fn remove_network(&self, id: &str) -> Result<bool, EngineError> {
        let r = DockerApi::remove_network(&self.fake, id).await;
        self.after(Op::RemoveNetwork);
        r
    }

    async fn list_network_members(
        &self,
        names: &[String],
        all: bool,
    ) -> Result<Vec<odek_core::engine::ContainerSummary>, EngineError> {
        let r = self.fake.list_network_members(names, all).await;
        self.after(Op::ListContainers);
        r
    }

    async fn container_processes(&self, id: &str) -> Result<Vec<String>, EngineError> {
        let r = self.fake.container_processes(id).await;
        self.after(Op::ListProcesses);
        r
    }

    async fn inspect_container(&self, id: &str) -> Result<Option<ContainerInfo>, EngineError> {
        let mut r = self.fake.inspect_container(id).await;
        self.after(Op::InspectContainer);
        if let Ok(Some(info)) = &mut r {
            let aliases = self.aliases.lock().expect("lock");
            for e in &mut info.endpoints {
                if let Some(a) = aliases.get(&(info.id.clone(), e.network_id.clone())) {
                    e.aliases = a.clone();
                }
            }
        }
        r
    }

    async fn remove_container(&self, id: &str) -> Result<bool, EngineError> {
        let r = self.fake.remove_container(id).await;
        let probe = self.probes.lock().expect("lock").contains(id);
        self.after_of(Op::RemoveContainer, probe);
        r
    }

    async fn list_containers(&self, label: &str) -> Result<Vec<ContainerSummary>, EngineError> {
        let r = self.fake.list_containers(label).await;
        self.after(Op::ListContainers);
        r
    }

    async fn exec(
        &self,
        container_id: &str,
        spec: &ExecSpec,
        output: OutputSink<'_>,
    ) -> Result<ExecExit, EngineError> {
        self.execs.lock().expect("lock").push(spec.clone());
        let r = self.fake.exec(container_id, spec, output).await;
        self.after(Op::Exec);
        r
    }

    async fn attach_stdin(&self, id: &str) -> Result<StdinHold, EngineError> {
        let r = self.fake.attach_stdin(id).await;
        self.after(Op::AttachContainer);
        r
    }

    async fn attach_session(&self, id: &str) -> Result<odek_core::engine::Link, EngineError> {
        let r = self.fake.attach_session(id).await;
        self.after(Op::AttachContainer);
        r
    }

    async fn exec_session(
        &self,
        id: &str,
        spec: &ExecSpec,
    ) -> Result<odek_core::engine::Link, EngineError> {
        let r = self.fake.exec_session(id, spec).await;
        self.after(Op::Exec);
        r
    }

    async fn wait_removed(&self, id: &str) -> Result<ExitWait, EngineError> {
        let r = self.fake.wait_removed(id).await;
        self.after(Op::WaitContainer);
        r
    }

    async fn container_logs(&self, id: &str, max: usize) -> Result<Option<String>, EngineError> {
        let r = self.fake.container_logs(id, max).await;
        self.after(Op::Logs);
        r
    }

    async fn security(&self) -> Result<EngineSecurity, EngineError> {
        let r = self.fake.security().await;
        self.after(Op::Info);
        r
    }

    async fn stat_path(&self, id: &str, path: &str) -> Result<Option<PathStat>, EngineError> {
        let r = self.fake.stat_path(id, path).await;
        self.after_of(Op::StatPath, true);
        r
    }

    async fn read_file(
        &self,
        id: &str,
        path: &str,
        max: usize,
    ) -> Result<Option<Vec<u8>>, EngineError> {
        let r = self.fake.read_file(id, path, max).await;
        self.after_of(Op::ReadFile, true);
        r
    }

    async fn upload_archive(
        &self,
        id: &str,
        path: &str,
        archive: Vec<u8>,
    ) -> Result<(), EngineError> {
        let r = self.fake.upload_archive(id, path, archive).await;
        self.after(Op::UploadArchive);
        r
    }

    async fn download_archive(
        &self,
        id: &str,
        path: &str,
        max: u64,
    ) -> Result<Option<Vec<u8>>, EngineError> {
        let r = self.fake.download_archive(id, path, max).await;
        self.after(Op::DownloadArchive);
        r
    }
}

/// A setup whose client goes through a [`Spy`] over the standard fixture,
/// with `--sandbox-image odek-test/base:1`.
pub fn spied() -> (Setup, Arc<Spy>) {
    let fake = shop_fake();
    let spy = Spy::new(fake.clone());
    let s = Setup::over(fake, spy.clone()).image(IMAGE);
    (s, spy)
}

/// A peer container (like a Compose service's) created directly through the
/// engine API on `network_id`, started, with extra networks connected.
/// The fake cannot give it network aliases; labels are kept.
pub async fn add_peer(
    fake: &FakeEngine,
    name: &str,
    service: Option<&str>,
    network_id: &str,
    more_networks: &[&str],
) -> String {
    let mut labels = BTreeMap::new();
    if let Some(svc) = service {
        labels.insert("com.docker.compose.service".to_string(), svc.to_string());
        labels.insert(
            "com.docker.compose.project".to_string(),
            PROJECT.to_string(),
        );
    }
    let spec = ContainerSpec {
        name: name.to_string(),
        image: IMAGE.to_string(),
        cmd: vec!["sleep".into(), "infinity".into()],
        entrypoint: None,
        cap_add: Vec::new(),
        log_driver: None,
        no_healthcheck: false,
        env: Vec::new(),
        working_dir: "/".into(),
        user: None,
        labels,
        network_mode: network_id.to_string(),
        init: false,
        pids_limit: 0,
        cap_drop: Vec::new(),
        security_opt: Vec::new(),
        tmpfs: Vec::new(),
        binds: Vec::new(),
        memory_bytes: None,
        nano_cpus: None,
        runtime: None,
        open_stdin: false,
        stdin_once: false,
        auto_remove: false,
        dns: Vec::new(),
        readonly_rootfs: false,
    };
    let created = fake.create_container(&spec).await.expect("create peer");
    fake.start_container(&created.id).await.expect("start peer");
    for n in more_networks {
        fake.connect_network(n, &created.id, &[])
            .await
            .expect("connect peer");
    }
    created.id
}

/// The first character of `msg` that must not reach a terminal raw: a
/// control character, or an invisible one that can make a shown value differ
/// from the real one (bidi controls, zero-width, BOM). The tests' own list,
/// independent of the code under test.
pub fn raw_unsafe_char(msg: &str) -> Option<char> {
    msg.chars().find(|&c| {
        c.is_control()
            || matches!(
                c,
                '\u{061C}'
                    | '\u{200B}'..='\u{200F}'
                    | '\u{2028}'..='\u{202E}'
                    | '\u{2060}'..='\u{2064}'
                    | '\u{2066}'..='\u{2069}'
                    | '\u{FEFF}'
            )
    })
}

/// ` user=<euid>:<egid>`: the end of the startup line of a sandbox whose
/// user is the default, this test process's own (SPEC §6.1 "user").
pub fn default_user_field() -> String {
    format!(
        " user={}:{}",
        rustix::process::geteuid().as_raw(),
        rustix::process::getegid().as_raw()
    )
}
