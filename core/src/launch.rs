//! Launch (SPEC §6): validate → (re-check) → ensure image → create with the
//! first network → start → connect the rest → inspect and verify → ready.
//! Any failure after create force-removes the container; a create whose
//! answer was lost is removed by its (pre-chosen) name.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;

mod check;
mod guard;
mod image_facts;

pub use guard::{Interrupted, LaunchGuard};

pub use image_facts::settle as settle_probes;
mod recheck;

use recheck::recheck;

use crate::client::Client;
use crate::config::NetworkMode;
use crate::engine::{BindMount, ContainerSpec, DockerApi, EngineErrorKind, TmpfsMount};
use crate::error::{Error, Removal, Result};
use crate::failure::{FailureClass, Step};
use crate::image;
use crate::inventory::Reaped;
use crate::labels::{self, Owner};
use crate::plan::{Fallback, Isolation, Plan};
use crate::resolve::{fallback_warning, Reporter};
use crate::sandbox::{Applied, Owned, OwnerLink, Sandbox, SANDBOX_SCHEMA};
use crate::verify::{not_running, verify, IDLE_CMD, TMP_OPTIONS};
use crate::warning::{Warning, WarningKind};

/// How far a launch got, readable from another task (e.g. a signal
/// handler deciding what to clean up), and the launch's ID (the
/// [`labels::LAUNCH`] label), so that task removes only this launch's
/// container.
#[derive(Debug)]
pub struct LaunchProgress {
    stage: AtomicU8,
    launch_id: String,
}

impl Default for LaunchProgress {
    fn default() -> Self {
        LaunchProgress {
            stage: AtomicU8::new(Stage::Preparing as u8),
            launch_id: new_launch_id(),
        }
    }
}

/// A random launch ID: 32 lowercase hex characters.
pub fn new_launch_id() -> String {
    let b: [u8; 16] = rand::rng().random();
    hex::encode(b)
}

/// A launch stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    /// Nothing created yet.
    Preparing = 0,
    /// The create request is on its way.
    Creating = 1,
    /// The container exists (its ID is known).
    Created = 2,
}

impl LaunchProgress {
    /// Records a stage.
    pub(crate) fn set(&self, s: Stage) {
        self.stage.store(s as u8, Ordering::SeqCst);
    }

    /// The ID the launch labels its container with ([`labels::LAUNCH`]).
    pub fn launch_id(&self) -> &str {
        &self.launch_id
    }

    /// The stage reached.
    pub fn get(&self) -> Stage {
        match self.stage.load(Ordering::SeqCst) {
            0 => Stage::Preparing,
            1 => Stage::Creating,
            _ => Stage::Created,
        }
    }
}

/// Options of a launch.
#[derive(Clone, Debug, Default)]
pub struct LaunchOptions {
    /// Outlives its creator (`odek sandbox up`): labelled detached, no owner.
    pub detached: bool,
    /// Container name; default `odek-<12 hex>`. A chosen name must pass
    /// [`validate_sandbox_name`].
    pub name: Option<String>,
    /// Extra labels (e.g. the parent of a narrowed sandbox).
    pub labels: BTreeMap<String, String>,
    /// The approval of the plan's project settings (SPEC §7), when it needs one.
    pub approval: Option<crate::approval::Approval>,
    /// Updated as the launch proceeds.
    pub progress: Option<Arc<LaunchProgress>>,
    /// Stops the launch when it fires (SPEC §10.1): the launch ends with
    /// [`Error::Cancelled`] after its [`LaunchGuard`] removed what it
    /// created. `None`: not cancellable.
    pub cancel: Option<crate::CancellationToken>,
}

/// Checks a caller-chosen sandbox name: `odek-` followed by Docker's
/// container-name charset (`[A-Za-z0-9_.-]`), 6–64 bytes in all.
///
/// A container is reachable on its user-defined networks by its name, so a
/// sandbox named `postgres` on a Compose network would shadow the real
/// service for every other container there; the prefix rules that out.
///
/// # Errors
/// [`Error::InvalidName`], before any Docker call.
pub fn validate_sandbox_name(name: &str) -> Result<()> {
    if crate::labels::is_sandbox_name(name) {
        Ok(())
    } else {
        Err(Error::InvalidName {
            name: name.to_string(),
        })
    }
}

/// A fresh sandbox name, `odek-<12 hex>`.
pub fn new_sandbox_name() -> String {
    let b: [u8; 6] = rand::rng().random();
    format!("odek-{}", hex::encode(b))
}

/// What tells a launch that the sandbox's process runs.
enum Ready<'a> {
    /// The idle process in the container's process list.
    Idle,
    /// The supervisor's Ready on the owner's session.
    Owner(crate::engine::Link),
    /// The supervisor's Ready through a relay (a detached sandbox `name`).
    Relay(&'a str),
}

/// What every attempt of one launch shares ([`Client::launch`]).
#[derive(Clone, Copy)]
struct Attempt<'a> {
    engine: &'a dyn DockerApi,
    plan: &'a Plan,
    opts: &'a LaunchOptions,
    reporter: &'a dyn Reporter,
    secret: &'a crate::secret::Secret,
    image_id: &'a str,
    name: &'a str,
    launch_id: &'a str,
    /// The sandbox's own networks (SPEC §4.4), when it reaches networks.
    link: Option<&'a crate::link::Own>,
    /// The upstream DNS servers the container is created with (SPEC §4.6):
    /// the container must show exactly these.
    dns: &'a [String],
    /// The egress proxy's URL (SPEC §4.5), in egress mode: the one
    /// container besides the sandbox's services that belongs on its link
    /// network.
    proxy: Option<&'a str>,
    /// The copied workspace's tar (SPEC §6.1 "workspace"), uploaded
    /// between create and start.
    workspace: Option<&'a [u8]>,
}

/// How one attempt of a launch ended, short of a refusal.
enum Started {
    /// The sandbox is ready.
    Ready(Box<Sandbox>),
    /// Its supervisor did not start (why), and its container was removed.
    NoSupervisor(String),
}

/// How the refusal of a sandbox whose supervisor did not start begins.
const NO_SUPERVISOR_PREFIX: &str = "odek's supervisor did not start in the sandbox: ";

/// Why the supervisor did not start, when `err` says that it did not
/// ([`Fix::NoSupervisor`](crate::config::advice::Fix::NoSupervisor)).
fn supervisor_failure(err: &Error) -> Option<String> {
    match err {
        Error::Rejected {
            fix: Some(crate::config::advice::Fix::NoSupervisor),
            message,
            ..
        } => Some(
            message
                .strip_prefix(NO_SUPERVISOR_PREFIX)
                .unwrap_or(message)
                .to_string(),
        ),
        _ => None,
    }
}

/// What an owned sandbox's owner attached to before start.
enum Attached {
    /// The idle process's stdin.
    Stdin(crate::engine::StdinHold),
    /// The supervisor's stdin and stdout.
    Session(crate::engine::Link),
}

/// The create request for a plan (SPEC §6.1).
pub fn container_spec(
    plan: &Plan,
    name: &str,
    image: &str,
    opts: &LaunchOptions,
    launch_id: &str,
) -> ContainerSpec {
    let mut labels = BTreeMap::new();
    labels.insert(labels::SANDBOX.to_string(), "true".to_string());
    labels.insert(
        labels::CREATED.to_string(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0)
            .to_string(),
    );
    labels.insert(
        labels::WORKDIR.to_string(),
        plan.workdir.display().to_string(),
    );
    if opts.detached {
        labels.insert(labels::DETACHED.to_string(), "true".to_string());
    } else {
        labels.extend(Owner::current().labels());
    }
    labels.insert(labels::PLAN.to_string(), plan.label_json());
    labels.extend(opts.labels.clone());
    labels.insert(labels::LAUNCH.to_string(), launch_id.to_string());

    // SPEC §6.1 "workspace": a copied workspace is uploaded into the
    // container's own /workspace, never mounted.
    let mut binds = Vec::new();
    if plan.workspace == crate::config::WorkspaceMode::Bind {
        binds.push(BindMount {
            source: plan.workdir.display().to_string(),
            target: "/workspace".into(),
            read_only: plan.readonly,
        });
    }
    binds.extend(plan.volumes.iter().map(|v| BindMount {
        source: v.host.display().to_string(),
        target: v.container.clone(),
        read_only: v.read_only || plan.readonly,
    }));
    let mut tmpfs = vec![TmpfsMount {
        target: "/tmp".into(),
        options: TMP_OPTIONS.into(),
    }];
    tmpfs.extend(plan.masks.iter().map(|m| TmpfsMount {
        target: m.clone(),
        options: "ro,noexec,nosuid,nodev,size=4k".into(),
    }));
    // SPEC §6.1 "user": the account's empty, private HOME.
    if let Some(a) = &plan.account {
        tmpfs.push(TmpfsMount {
            target: a.home.clone(),
            options: a.home_tmpfs_options(),
        });
    }
    let mut env: Vec<String> = plan
        .account
        .iter()
        .flat_map(|a| a.env())
        .filter(|(k, _)| !plan.env.iter().any(|e| e.key == *k))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    env.extend(plan.env.iter().map(|e| format!("{}={}", e.key, e.value)));
    let network_mode = match (plan.network_mode, plan.networks.first()) {
        (NetworkMode::Bridge, _) => "bridge".to_string(),
        (NetworkMode::None, Some(first)) => first.id.clone(),
        (NetworkMode::None, None) => "none".to_string(),
    };
    ContainerSpec {
        name: name.to_string(),
        image: image.to_string(),
        cmd: IDLE_CMD.iter().map(|s| s.to_string()).collect(),
        entrypoint: None,
        cap_add: Vec::new(),
        log_driver: None,
        no_healthcheck: false,
        env,
        working_dir: "/workspace".into(),
        user: plan.user.clone(),
        labels,
        network_mode,
        init: true,
        pids_limit: plan.pids_limit,
        cap_drop: vec!["ALL".into()],
        // SPEC §6.1: odek's seccomp profile, which no call can use to put
        // the setuid bit on a file the host sees.
        security_opt: vec![
            "no-new-privileges".into(),
            crate::hardening::seccomp::security_opt(),
        ],
        tmpfs,
        binds,
        memory_bytes: plan.memory_bytes,
        nano_cpus: plan.cpus.as_ref().map(|c| c.nano),
        runtime: plan.runtime.clone(),
        // SPEC §6.1 owner lifetime: every sandbox's idle process reads an
        // open stdin; an owned one's closes with its owner's attachment,
        // and the engine then removes it.
        open_stdin: true,
        stdin_once: !opts.detached,
        auto_remove: !opts.detached,
        // Set at launch from the link network (SPEC §4.6).
        dns: Vec::new(),
        readonly_rootfs: false,
    }
}

/// The plan's runtime asked of the engine again before anything is pulled
/// or created (SPEC §6.1 "runtime"): a plan crosses the C ABI as JSON and a
/// child's comes from its parent's label, and the daemon may have been
/// reconfigured since resolve. A plan without one needs no call.
async fn check_runtime(engine: &dyn DockerApi, plan: &Plan) -> Result<()> {
    let Some(asked) = &plan.runtime else {
        return Ok(());
    };
    let endpoint = engine.endpoint().to_string();
    let origin = plan
        .sources
        .get(crate::config::names::sandbox_runtime)
        .map_or_else(|| "plan".to_string(), |s| s.to_string());
    match engine.security().await {
        // gVisor since resolve (or a plan resolved elsewhere): refused
        // before create, as resolve refuses it.
        Ok(s) if s.gvisor.contains(asked) => Err(Error::Rejected {
            fix: None,
            step: Step::Create,
            message: format!(
                "{} is gVisor on the engine at {}, so nothing was created: {}",
                crate::text::quote(asked),
                crate::text::shown(&endpoint),
                crate::engine::GVISOR_UNSUPPORTED
            ),
            removal: None,
        }),
        Ok(s) if s.runtimes.contains(asked) => Ok(()),
        Ok(s) => {
            Err(crate::resolve::runtime_refusal(&origin, asked, &endpoint, Some(&s), None).into())
        }
        Err(e) if e.is_unreachable() => Err(Error::engine(&endpoint, Step::Ping, e)),
        Err(e) => {
            Err(
                crate::resolve::runtime_refusal(&origin, asked, &endpoint, None, Some(&e.message))
                    .into(),
            )
        }
    }
}

/// True for a create warning that drops a requested limit (SPEC §6.1):
/// Docker says "… PIDs limit discarded." / "… Limitation discarded." /
/// "… CPU … discarded.". The swap warning ("Memory limited without swap")
/// concerns a limit odek never asks for and is shown, not fatal.
fn drops_limit(w: &str) -> bool {
    w.to_ascii_lowercase().contains("discarded")
}

/// The refusal of a plan that claims a host run its own settings forbid.
fn host_run_refused(plan: &Plan, what: &str) -> Error {
    Error::InvalidPlan {
        reason: format!(
        "it says {what}, but its settings require a sandbox (mode {:?}{}{}{}); nothing ran on the host — resolve it again",
        plan.mode,
        if plan.require_sandbox { ", ODEK_REQUIRE_SANDBOX" } else { "" },
        if plan.networks.is_empty() { "" } else { ", networks attached" },
        if plan.sources.values().any(crate::config::Source::is_project) {
            ", settings from the project"
        } else {
            ""
        },
    ),
    }
}

impl Client {
    /// Launches a sandbox from a plan (SPEC §6.1). On the host for
    /// [`Isolation::Fallback`] / [`Isolation::Off`] plans; an image that
    /// cannot be pulled falls back loudly when the plan allows it.
    ///
    /// With [`LaunchOptions::cancel`], the launch stops when the token
    /// fires: the container it created (found by name and launch ID, never
    /// one it did not create) is removed before this returns, a create
    /// request on its way first given up to
    /// [`CREATE_SETTLE`](crate::inventory::CREATE_SETTLE) to answer
    /// ([`LaunchGuard`]). A token cancelled before the call makes it fail at
    /// once.
    ///
    /// Errors: image (config / image-unavailable), create/start/connect/
    /// verify refused (docker-rejected, container removed), daemon lost
    /// (daemon-unreachable, container removed when still possible);
    /// [`Error::Cancelled`] saying whether a container was removed (or
    /// could not be, and how to remove it).
    pub async fn launch(
        &self,
        plan: &Plan,
        opts: &LaunchOptions,
        reporter: &dyn Reporter,
    ) -> Result<Sandbox> {
        let Some(cancel) = opts.cancel.clone() else {
            return self.launch_uncancellable(plan, opts, reporter).await;
        };
        if cancel.is_cancelled() {
            return Err(crate::cancel::cancelled("the launch"));
        }
        let mut opts = opts.clone();
        opts.cancel = None;
        let guard = LaunchGuard::for_options(&mut opts);
        // Boxed so that `drop(work)` below really ends the launch before
        // the reap (a stack pin would live on to the end of the scope).
        let mut work = Box::pin(self.launch_uncancellable(plan, &opts, reporter));
        tokio::select! {
            out = &mut work => return out,
            () = cancel.cancelled() => {}
        }
        if guard.creating() {
            guard.settle(&mut work, std::future::pending::<()>()).await;
        }
        drop(work);
        // A probe the launch had made to read its image is removed too
        // (waiting up to `inventory::PROBE_SETTLE`, as the CLI's signal
        // path does).
        let ended = guard.reap(self, std::future::pending::<()>()).await;
        Err(ended.cancelled())
    }

    /// [`Client::launch`] without its cancellation.
    async fn launch_uncancellable(
        &self,
        plan: &Plan,
        opts: &LaunchOptions,
        reporter: &dyn Reporter,
    ) -> Result<Sandbox> {
        if let Some(name) = &opts.name {
            validate_sandbox_name(name)?;
        }
        let mut warnings = plan.warnings.clone();
        match &plan.isolation {
            Isolation::Container => {}
            // Only the operator may run commands on the host (SPEC §6.3): a
            // plan that says so must also say nothing requires a sandbox —
            // the sandbox off, or a fallback its mode, networks and sources
            // allow — whoever handed it over (the C ABI, a label).
            Isolation::Off if plan.mode != crate::config::SandboxMode::Off => {
                return Err(host_run_refused(plan, "the sandbox off"))
            }
            Isolation::Fallback(_) if !plan.fallback_allowed() => {
                return Err(host_run_refused(plan, "a fallback to the host"))
            }
            other => return Ok(Sandbox::host(plan, other.clone(), warnings)),
        }
        plan.check()?;
        // A plan without the working directory's identity (an earlier
        // release's, or written by hand) takes it now, right after the full
        // check, so that the checks before create and after start compare
        // against the directory checked here (SPEC §3.4).
        let identified;
        let plan = match plan.workdir_id {
            Some(_) => plan,
            None => {
                identified = Plan {
                    workdir_id: Some(crate::config::identify(&plan.workdir)?),
                    ..plan.clone()
                };
                &identified
            }
        };
        // The key that marks the container as this user's (SPEC §6.1
        // labels): an unusable one refuses before anything is pulled or made.
        let secret = crate::secret::Secret::load_or_create(&plan.odek_home)?;
        // The records of sandboxes odek saw end longer ago than the
        // operator keeps them (a directory read; no engine call).
        crate::audit::prune(
            &plan.odek_home,
            plan.log_retention_days,
            None,
            std::time::SystemTime::now(),
        );
        let engine = self.engine()?.clone();
        let endpoint = engine.endpoint().to_string();
        // SPEC §6.1 "workspace": a plan crosses the C ABI as JSON and a
        // child's comes from a label, so the rule of resolve is asked
        // again of the engine this client talks to.
        let workspace = crate::config::Sourced::new(
            plan.workspace,
            plan.sources
                .get(crate::config::names::sandbox_workspace)
                .cloned()
                .unwrap_or(crate::config::Source::Default),
        );
        if let Some(e) = engine
            .endpoint()
            .remote_bind_refusal(&workspace, &plan.workdir)
        {
            return Err(e.into());
        }
        if plan.account.is_some() && !engine.endpoint().is_local() {
            return Err(crate::config::ConfigError::InvalidValue {
                origin: "the plan".into(),
                key: crate::config::names::sandbox_user.into(),
                reason: format!(
                    "{} carries an account whose files are bind-mounted from this machine, but the engine at {} runs on another machine, so nothing was created; resolve the plan against this engine (resolve drops the account there)",
                    plan.user_shown(),
                    crate::text::shown(engine.endpoint().to_string())
                ),
            }
            .into());
        }
        if plan.egress.is_some() && !engine.endpoint().is_local() {
            return Err(crate::config::ConfigError::InvalidValue {
                origin: "the plan".into(),
                key: crate::config::names::sandbox_egress.into(),
                reason: format!(
                    "needs odek's egress proxy, whose binary is bind-mounted from this machine, but the engine at {} runs on another machine, so nothing was created; resolve the plan against this engine",
                    crate::text::shown(engine.endpoint().to_string())
                ),
            }
            .into());
        }
        let volumes_source = plan
            .sources
            .get(crate::config::names::sandbox_volumes)
            .cloned()
            .unwrap_or(crate::config::Source::Default);
        if let Some(e) = engine
            .endpoint()
            .remote_volumes_refusal(&plan.volumes, &volumes_source)
        {
            return Err(e.into());
        }
        recheck(engine.as_ref(), plan, opts.approval.as_ref()).await?;
        check_runtime(engine.as_ref(), plan).await?;
        let progress = |line: &str| reporter.progress(line);
        let ensured = image::ensure(engine.as_ref(), &plan.image, &plan.odek_home, &progress).await;
        let image = match ensured {
            Ok(info) => info,
            Err(image::ImageError::Engine(e)) => {
                return Err(Error::engine(&endpoint, Step::Image, e));
            }
            Err(e) => {
                let err = Error::from(e);
                if err.class() == FailureClass::ImageUnavailable && plan.fallback_allowed() {
                    let fb = Fallback {
                        class: err.class(),
                        reason: err.to_string(),
                    };
                    let w = fallback_warning(&fb);
                    reporter.warning(&w);
                    warnings.push(w);
                    return Ok(Sandbox::host(plan, Isolation::Fallback(fb), warnings));
                }
                return Err(err);
            }
        };
        // The image's paths odek mounts onto (and, for a non-root numeric
        // user, its account files), read once per image by a probe: nothing
        // may lead the engine to write into the project (SPEC §6.1).
        let account_binds = image_facts::prepare(&engine, plan, &image, &secret).await?;
        let image_id = image.id;
        // SPEC §7.4 "right before create": the check above keeps a refused
        // launch from pulling or building; a pull or build can take minutes,
        // so the networks are compared again now.
        if plan.approval.is_some() {
            recheck(engine.as_ref(), plan, opts.approval.as_ref()).await?;
        }
        // Docker mounts by path: the working directory and volumes are
        // checked again now, after the prompt and a pull or build (SPEC
        // §3.4); what was really mounted is read back after start.
        crate::workdir::check_paths(plan)?;
        // SPEC §6.1 "workspace": the copy is made before anything is
        // created, so a working directory that cannot travel creates
        // nothing.
        let packed = match plan.workspace {
            crate::config::WorkspaceMode::Bind => None,
            crate::config::WorkspaceMode::Copy => {
                let (archive, manifest, w) = pack_workspace(plan).await?;
                if let Some(w) = w {
                    reporter.warning(&w);
                    warnings.push(w);
                }
                Some((archive, manifest))
            }
        };
        let name = opts.name.clone().unwrap_or_else(new_sandbox_name);
        // What was uploaded, for the copy-back to compare with.
        if let Some((_, manifest)) = &packed {
            if let Err(why) = save_manifest(&plan.odek_home, &name, manifest) {
                let w = Warning::new(
                    WarningKind::Other,
                    format!(
                        "the list of what the copied workspace held at launch could not be kept in $ODEK_HOME ({}): its copy-back will write every file that differs from the host's, a file changed on the host since launch included",
                        crate::text::foreign(&why)
                    ),
                );
                reporter.warning(&w);
                warnings.push(w);
            }
        }
        let packed = packed.map(|(archive, _)| archive);
        let launch_id = opts
            .progress
            .as_ref()
            .map_or_else(new_launch_id, |p| p.launch_id().to_string());
        // Created from the image ID the checks above saw (its paths, its
        // digest): never by tag, so a tag another process moves meanwhile
        // changes nothing (SPEC §6.1: stronger than "by digest").
        let mut spec = container_spec(plan, &name, &image_id, opts, &launch_id);
        spec.binds.extend(account_binds);
        // SPEC §4.4: the sandbox's own network, its only one when it
        // reaches networks, to which their containers are connected,
        // labelled with the container's owner (so an orphan is known as
        // one). Link networks of sandboxes that are gone (their owner was
        // killed) go first.
        let owner: BTreeMap<String, String> = spec
            .labels
            .iter()
            .filter(|(k, _)| k.starts_with("dev.odek.owner-"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let link = if crate::link::uses_link(plan) {
            crate::link::collect(engine.as_ref(), Some(&secret), false).await;
            Some(
                crate::link::create(engine.as_ref(), plan, &name, &owner, &secret)
                    .await
                    .map_err(|e| Error::engine(&endpoint, Step::Connect, e))?,
            )
        } else {
            None
        };
        if let (Some(own), NetworkMode::None) = (&link, plan.network_mode) {
            spec.network_mode = own.link.clone();
        }
        // SPEC §4.6 (CVE-2024-29018): a sandbox with no route out on an
        // engine that may forward its lookups to the host's resolver gets
        // an upstream DNS server inside its own link network that nobody
        // answers. Without one (a link network with no IPv4 subnet to
        // spare) it goes on, and says it may forward.
        if let (Some(own), Some(crate::dns::DnsForwarding::ClosedByOdek)) =
            (&link, plan.dns_forwarding)
        {
            match crate::dns::sink_of(engine.as_ref(), &own.link).await {
                Ok(Some(addr)) => spec.dns = vec![addr.to_string()],
                Ok(None) => {
                    let w = Warning::new(
                        WarningKind::DnsForwarding,
                        "the sandbox's own network has no IPv4 address to spare for odek's DNS upstream: the engine may forward its DNS lookups to the host's resolver (CVE-2024-29018), so data can leave through DNS although no route leads out".to_string(),
                    );
                    reporter.warning(&w);
                    warnings.push(w);
                }
                Err(e) => {
                    crate::link::release(engine.as_ref(), &name, Some(&own.link)).await;
                    return Err(Error::engine(&endpoint, Step::Connect, e));
                }
            }
        }
        // SPEC §4.5: in egress mode the proxy starts (and proves its
        // policy) before the sandbox exists; the sandbox's proxy variables
        // name it, and NO_PROXY the attached services, reached directly.
        let proxy = match (&plan.egress, &link) {
            (Some(egress), Some(own)) => {
                let mut labels = owner.clone();
                labels.insert(labels::LAUNCH.to_string(), launch_id.clone());
                if opts.detached {
                    labels.insert(labels::DETACHED.to_string(), "true".to_string());
                }
                let started = crate::egress::start(
                    engine.as_ref(),
                    &crate::egress::StartSpec {
                        plan,
                        egress,
                        sandbox: &name,
                        link: &own.link,
                        labels,
                        detached: opts.detached,
                    },
                )
                .await;
                match started {
                    Ok(p) => Some(p),
                    Err(e) => {
                        crate::link::release(engine.as_ref(), &name, Some(&own.link)).await;
                        return Err(e);
                    }
                }
            }
            _ => None,
        };
        let proxy_url = proxy.as_ref().map(crate::egress::Proxy::url);
        if let Some(p) = &proxy {
            let services = crate::egress::service_names(engine.as_ref(), plan).await;
            spec.env
                .extend(crate::egress::env(&plan.env, &p.url(), &services));
        }
        // odek's supervisor as the sandbox's process, when this host has
        // one and the sandbox can use it; otherwise the exec API's path,
        // said once per process.
        let mut supervision = crate::supervisor::Supervision::for_plan(plan, engine.as_ref());
        // docs/SECURITY.md "Files host tools run": the files of the working
        // directory that host tools execute, as they are before the
        // container exists, for the report when it ends.
        if let Some(w) = record_host_files(plan, &name).await {
            reporter.warning(&w);
            warnings.push(w);
        }
        let launched = async {
            loop {
            let state = match &supervision {
                Ok(_) => crate::supervisor::SupervisorState::on(),
                Err(why) => crate::supervisor::SupervisorState::off(why.clone()),
            };
            if let Some(w) = crate::supervisor::off_warning_once(&state) {
                reporter.warning(&w);
                warnings.push(w);
            }
            let attempt = Attempt {
                engine: engine.as_ref(),
                plan,
                opts,
                reporter,
                secret: &secret,
                image_id: &image_id,
                name: &name,
                launch_id: &launch_id,
                link: link.as_ref(),
                dns: &spec.dns,
                proxy: proxy_url.as_deref(),
                workspace: packed.as_deref(),
            };
            match self
                .create_and_start(
                    &attempt,
                    &spec,
                    supervision.as_ref().ok(),
                    state,
                    &mut warnings,
                )
                .await?
            {
                Started::Ready(sandbox) => return Ok(*sandbox),
                // The supervisor did not start in a container that is now
                // removed: the same launch once more, through the exec
                // API (a performance fallback, never a security one).
                Started::NoSupervisor(why) => {
                    supervision = Err(format!("it did not start in the sandbox: {why}"));
                    tracing::warn!(sandbox = %name, "odek's supervisor did not start ({why}); launching again without it");
                }
            }
            }
        }
        .await;
        if launched.is_err() {
            crate::host_files::discard(&plan.odek_home, &name);
            if let Some(own) = &link {
                crate::link::release(engine.as_ref(), &name, Some(&own.link)).await;
            }
        }
        let mut launched = launched;
        if let (Ok(sandbox), Some(p)) = (&mut launched, proxy) {
            if let Some(a) = sandbox.applied.as_mut() {
                a.egress_proxy = Some(p.url());
            }
            if let Some(hold) = p.hold {
                sandbox.owner = std::mem::take(&mut sandbox.owner).with_proxy(hold);
            }
            tracing::debug!(sandbox = %sandbox.name, proxy = %p.id, "egress proxy ready");
        }
        launched
    }

    /// One create → start → verify of a launch, with `supervision` or
    /// without ([`Client::launch`]): the sandbox, or
    /// [`Started::NoSupervisor`] when its supervisor did not start (the
    /// container removed), or the launch's refusal.
    async fn create_and_start(
        &self,
        attempt: &Attempt<'_>,
        spec: &ContainerSpec,
        supervision: Option<&crate::supervisor::Supervision>,
        state: crate::supervisor::SupervisorState,
        warnings: &mut Vec<Warning>,
    ) -> Result<Started> {
        let Attempt {
            engine,
            plan,
            opts,
            reporter,
            secret,
            name,
            launch_id,
            ..
        } = *attempt;
        let endpoint = engine.endpoint().to_string();
        let name = name.to_string();
        let mut spec = spec.clone();
        if let Some(s) = supervision {
            s.apply(&mut spec);
        }
        // SPEC §4.4: bound to its link network, made just before it.
        let link_id = attempt.link.map(|own| own.link.as_str());
        labels::sign(secret, &name, link_id, &mut spec.labels);
        if let Some(p) = &opts.progress {
            p.set(Stage::Creating);
        }
        let created = match engine.create_container(&spec).await {
            Ok(c) => c,
            Err(e) if e.is_unreachable() => {
                // The answer was lost or late: the daemon may still create
                // the container. Remove it by its pre-chosen name, waiting up
                // to one call budget for a create that is still in flight.
                let wait = if e.kind == crate::engine::EngineErrorKind::Timeout {
                    crate::engine::Timeouts::from_env()
                        .call
                        .min(Duration::from_secs(10))
                } else {
                    // The connection broke: one attempt tells whether it landed.
                    Duration::ZERO
                };
                let removal = match crate::inventory::reap(engine, &name, launch_id, wait).await {
                    Reaped::Removed => Removal::Removed,
                    Reaped::NotOurs => Removal::NotOurs { name: name.clone() },
                    Reaped::Absent => Removal::Absent {
                        name: name.clone(),
                        detached: opts.detached,
                        waited: wait,
                    },
                    Reaped::Failed(why) => Removal::Left {
                        name: name.clone(),
                        detached: opts.detached,
                        why: Some(why),
                    },
                };
                return Err(Error::engine(&endpoint, Step::Create, e).with_removal(removal));
            }
            Err(e) => return Err(Error::engine(&endpoint, Step::Create, e)),
        };
        if let Some(p) = &opts.progress {
            p.set(Stage::Created);
        }
        // SPEC §6.1 owner lifetime: before start, an owned sandbox's wait
        // for its removal (its exit code is gone with it) and its owner's
        // attachment to its stdin, so it never runs unowned.
        let mut wait = None;
        let owned = async {
            if opts.detached {
                return Ok(None);
            }
            // A wait the daemon refused only costs the exit code of a
            // container that stops at once; the inspect may still have it.
            wait = engine.wait_removed(&created.id).await.ok();
            let attached = if supervision.is_some() {
                engine
                    .attach_session(&created.id)
                    .await
                    .map(Attached::Session)
            } else {
                engine.attach_stdin(&created.id).await.map(Attached::Stdin)
            };
            attached
                .map(Some)
                .map_err(|e| Error::engine(&endpoint, Step::Start, e))
        };
        let finished = match owned.await {
            Ok(attached) => {
                let (hold, link) = match attached {
                    Some(Attached::Stdin(h)) => (Some(h), None),
                    Some(Attached::Session(l)) => (None, Some(l)),
                    None => (None, None),
                };
                self.finish(
                    attempt,
                    &created,
                    &mut wait,
                    match (link, supervision.is_some()) {
                        (Some(link), _) => Ready::Owner(link),
                        (None, true) => Ready::Relay(&name),
                        (None, false) => Ready::Idle,
                    },
                )
                .await
                .map(|done| (done, hold))
            }
            Err(e) => Err(e),
        };
        match finished {
            Ok(((applied, more, session), hold)) => {
                let owned = match (session, hold) {
                    (Some(s), _) => Some(Owned::Session(s)),
                    (None, Some(h)) => Some(Owned::Stdin(h)),
                    (None, None) => None,
                };
                for w in more {
                    reporter.warning(&w);
                    warnings.push(w);
                }
                Ok(Started::Ready(Box::new(Sandbox {
                    schema: SANDBOX_SCHEMA.into(),
                    name,
                    container_id: Some(created.id),
                    isolation: Isolation::Container,
                    plan: plan.clone(),
                    applied: Some(applied),
                    warnings: std::mem::take(warnings),
                    supervisor: Some(state),
                    owner: OwnerLink(owned.map(Arc::new)),
                })))
            }
            Err(err) => {
                let removed = match engine.remove_container(&created.id).await {
                    Ok(_) => true,
                    Err(e) if e.is_unreachable() => false,
                    // Refused mid-way (the daemon busy with the container's
                    // own auto-removal once its owner link closed, which a
                    // loaded machine showed): one more try settles it.
                    Err(_) => {
                        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
                        engine.remove_container(&created.id).await.is_ok()
                            || matches!(engine.inspect_container(&created.id).await, Ok(None))
                    }
                };
                // An auto-removed container may still be on its way out
                // ("removal already in progress"): its wait says when it
                // is gone, so the refusal is said once it is.
                if removed {
                    removed_exit(wait.take()).await;
                }
                if let (true, Some(why)) = (removed, supervisor_failure(&err)) {
                    return Ok(Started::NoSupervisor(why));
                }
                Err(err.with_removal(if removed {
                    Removal::Removed
                } else {
                    Removal::Left {
                        name: name.clone(),
                        detached: opts.detached,
                        why: None,
                    }
                }))
            }
        }
    }

    /// Create warnings → start → connect → verify.
    async fn finish(
        &self,
        attempt: &Attempt<'_>,
        created: &crate::engine::Created,
        wait: &mut Option<crate::engine::ExitWait>,
        ready: Ready<'_>,
    ) -> Result<(Applied, Vec<Warning>, Option<crate::supervisor::Session>)> {
        let Attempt {
            engine,
            plan,
            image_id,
            link,
            dns,
            proxy,
            ..
        } = *attempt;
        let endpoint = engine.endpoint().to_string();
        let id = created.id.as_str();
        let mut warnings = Vec::new();
        for w in &created.warnings {
            if drops_limit(w) {
                return Err(Error::Rejected {
                    fix: None,
                    step: Step::Create,
                    message: format!("the engine dropped a requested limit: {w}"),
                    removal: None,
                });
            }
            warnings.push(Warning::new(WarningKind::Engine, format!("docker: {w}")));
        }
        if let Some(archive) = attempt.workspace {
            engine
                .upload_archive(id, "/", archive.to_vec())
                .await
                .map_err(|e| Error::engine(&endpoint, Step::Create, e))?;
        }
        if let Err(mut e) = engine.start_container(id).await {
            // The daemon answered: the container may have stopped while it
            // started (docker-init could not start the idle process; runc
            // says "cannot start a stopped process"). Its exit says why.
            if e.kind == EngineErrorKind::Rejected {
                if let Some(why) = stopped_reason(engine, plan, id, wait).await {
                    e.message = format!("{}; {why}", e.message);
                }
            }
            return Err(Error::engine(&endpoint, Step::Start, e));
        }
        let connects = async {
            let Some(own) = link else {
                return Ok::<Vec<Warning>, Error>(Vec::new());
            };
            if plan.network_mode == NetworkMode::Bridge {
                engine
                    .connect_network(&own.link, id, &[])
                    .await
                    .map_err(|e| Error::engine(&endpoint, Step::Connect, e))?;
            }
            if let Some(out) = &own.out {
                engine
                    .connect_network(out, id, &[])
                    .await
                    .map_err(|e| Error::engine(&endpoint, Step::Connect, e))?;
            }
            // SPEC §4.4: the planned networks' containers join the link,
            // once whoever else is on it or on odek-out is disconnected.
            let watch = crate::link::Watch {
                me: id,
                name: attempt.name,
                link: &own.link,
                out: own.out.as_deref(),
                odek_home: &plan.odek_home,
                proxy,
                egress: plan.egress.is_some(),
            };
            let (_, intruders) = crate::link::join(engine, plan, &watch, &self.checked)
                .await
                .map_err(|mut e| {
                    e.message = format!("connecting the networks' containers: {}", e.message);
                    Error::engine(&endpoint, Step::Connect, e)
                })?;
            Ok::<Vec<Warning>, Error>(
                intruders
                    .iter()
                    .map(|i| Warning::new(WarningKind::ForeignMember, i.note(attempt.name)))
                    .collect(),
            )
        };
        // The idle process is looked for while the networks are connected:
        // the container's start can succeed while the idle process cannot
        // (a pids limit of 1, no `cat` on PATH), and an inspect alone may come
        // before docker-init has found out.
        // The first failure ends both (the container is removed anyway).
        // A supervised sandbox's process is the supervisor: its first frame
        // (Ready, from a process confined to its own uid) stands for the
        // idle process.
        // A detached one's (no owner session) is asked through a relay.
        let no_supervisor = |why: String| Error::Rejected {
            fix: Some(crate::config::advice::Fix::NoSupervisor),
            step: Step::Verify,
            message: format!("{NO_SUPERVISOR_PREFIX}{why}"),
            removal: None,
        };
        let idle = async {
            match ready {
                Ready::Owner(link) => {
                    crate::supervisor::Session::open(link, crate::supervisor::READY_BUDGET)
                        .await
                        .map(|s| (Idle::Running, Some(s)))
                        .map_err(no_supervisor)
                }
                Ready::Relay(name) => match self.relay(engine, name, id).await {
                    Ok(Some(_)) => Ok((Idle::Running, None)),
                    Ok(None) => Err(no_supervisor(
                        "the container does not have the supervisor's shape".into(),
                    )),
                    Err(e) => Err(no_supervisor(e.to_string())),
                },
                Ready::Idle => idle_process(engine, id, IDLE_START_BUDGET)
                    .await
                    .map(|i| (i, None))
                    .map_err(|e| Error::engine(&endpoint, Step::Verify, e)),
            }
        };
        let (intruders, (idle, session)) = match tokio::try_join!(connects, idle) {
            Ok(both) => both,
            // The daemon refused a connect because the container stopped
            // meanwhile (its idle process could not start, and an owned
            // sandbox is being auto-removed: "marked for removal"): its exit
            // says why, as at start.
            Err(Error::Rejected {
                step: Step::Connect,
                mut message,
                fix,
                removal,
            }) => {
                if let Some(why) = stopped_reason(engine, plan, id, wait).await {
                    message = format!("{message}; {why}");
                }
                return Err(Error::Rejected {
                    step: Step::Connect,
                    message,
                    fix,
                    removal,
                });
            }
            Err(e) => return Err(e),
        };
        warnings.extend(intruders);
        let info = engine
            .inspect_container(id)
            .await
            .map_err(|e| Error::engine(&endpoint, Step::Verify, e))?;
        let Some(info) = info else {
            // An owned sandbox is auto-removed once it stops (SPEC §6.1
            // owner lifetime): the wait begun before start has its exit.
            let message = match removed_exit(wait.take()).await {
                Some(code) => not_running(plan, Some(&(code, String::new()))),
                None => "the container vanished right after start".into(),
            };
            return Err(Error::Rejected {
                fix: None,
                step: Step::Verify,
                message,
                removal: None,
            });
        };
        let applied = verify(plan, &info, image_id, engine.endpoint()).map_err(|message| {
            Error::Rejected {
                fix: None,
                step: Step::Verify,
                message,
                removal: None,
            }
        })?;
        // SPEC §4.6: the engine kept the upstream odek set, or the sandbox
        // would claim a closed path it does not have.
        if info.dns != dns {
            return Err(Error::Rejected {
                fix: None,
                step: Step::Verify,
                message: format!(
                    "verification failed: HostConfig.Dns is [{}], odek set [{}] (the DNS upstream that keeps a sandbox with no route out from forwarding lookups to the host's resolver, CVE-2024-29018)",
                    crate::text::shown(info.dns.join(",")),
                    dns.join(",")
                ),
                removal: None,
            });
        }
        // Before the idle process's verdict: under gVisor the engine's
        // process list names host processes, and the message would blame
        // the image.
        refuse_gvisor(id, info.pid)?;
        let problem = match idle {
            Idle::Running => None,
            Idle::Stopped => Some("the container stopped right after start".to_string()),
            Idle::Missing(seen) => Some(idle_missing_message(&seen)),
        };
        if let Some(message) = problem {
            return Err(Error::Rejected {
                fix: None,
                step: Step::Verify,
                message,
                removal: None,
            });
        }
        if let Some(w) = verify_mounts(engine, plan, id, info.pid)? {
            warnings.push(w);
        }
        if let Some(w) = verify_seccomp(id, info.pid)? {
            warnings.push(w);
        }
        Ok((applied, warnings, session))
    }
}

impl Client {
    /// What a launch guarantees, run again on a sandbox launched earlier
    /// for `plan` and kept ready since ([`crate::pool::Pool::claim`]): the
    /// re-check of SPEC §7.4 (the approval, and the project's networks
    /// resolved again against `approval`'s network IDs), the working
    /// directory and volumes still the checked paths (SPEC §3.4), the
    /// owner's link still held, and the inspect-verify of SPEC §6.1 —
    /// the same functions a launch calls — with the settings the engine
    /// shows equal to those verified at launch.
    ///
    /// Errors: the re-check's refusals (class approval-required, or the
    /// engine's); [`Error::Rejected`] at verify when the container stopped,
    /// vanished, lost its owner or shows other settings. Nothing is removed
    /// here: the caller discards the sandbox.
    pub(crate) async fn recheck_ready(
        &self,
        sandbox: &Sandbox,
        plan: &Plan,
        approval: Option<&crate::approval::Approval>,
    ) -> Result<()> {
        let engine = self.engine()?.clone();
        let endpoint = engine.endpoint().to_string();
        let refuse = |message: String| Error::Rejected {
            fix: None,
            step: Step::Verify,
            message,
            removal: None,
        };
        recheck(engine.as_ref(), plan, approval).await?;
        crate::workdir::check_paths(plan)?;
        let (Some(id), Some(applied)) = (&sandbox.container_id, &sandbox.applied) else {
            return Err(refuse("the ready sandbox is no container".into()));
        };
        let supervised = sandbox.supervisor.as_ref().is_some_and(|s| s.on);
        if !sandbox.owner.is_held() || (supervised && sandbox.owner.session().is_none()) {
            return Err(refuse(
                "the ready sandbox lost its owner's link (its supervisor session ended)".into(),
            ));
        }
        let info = engine
            .inspect_container(id)
            .await
            .map_err(|e| Error::engine(&endpoint, Step::Verify, e))?;
        let Some(info) = info.filter(|i| i.running) else {
            return Err(refuse("the ready sandbox is no longer running".into()));
        };
        let now =
            verify(&sandbox.plan, &info, &applied.image_id, engine.endpoint()).map_err(refuse)?;
        if &now != applied {
            return Err(refuse(
                "the ready sandbox shows other settings than when it was launched".into(),
            ));
        }
        verify_mounts(engine.as_ref(), &sandbox.plan, id, info.pid)?;
        verify_seccomp(id, info.pid)?;
        // SPEC §6.5: nothing was done in it since its launch.
        untouched(engine.as_ref(), id, &info, supervised)
            .await
            .map_err(|e| match e {
                Untouched::Engine(e) => Error::engine(&endpoint, Step::Verify, e),
                Untouched::Changed(why) => refuse(format!(
                    "the ready sandbox was changed from outside since its launch ({why})"
                )),
            })?;
        Ok(())
    }
}

/// Why [`untouched`] refused a ready sandbox.
enum Untouched {
    /// An engine call failed.
    Engine(crate::engine::EngineError),
    /// What was found, one phrase.
    Changed(String),
}

/// SPEC §6.5: a warm pool's ready sandbox `id` (inspected as `info`) as a
/// fresh one is — nothing running in it since its launch but what a fresh
/// one runs (a `docker exec` by someone with Docker access): no exec
/// running (`ExecIDs`) and no process but docker-init and its child
/// (odek's supervisor's keeper and server when `supervised`, else the idle
/// process), from one `top` call. Its filesystem is not diffed: a diff
/// cannot see what is under the tmpfs mounts (`/tmp`, `HOME`) or the
/// workspace, where such a writer would put it, and `GET
/// /containers/{id}/changes` walks the whole image on storage drivers
/// without a native diff (fuse-overlayfs: 3 s on a loaded 2-core machine,
/// longer than a fresh launch). Docker access is root-equivalent on a
/// local engine (docs/SECURITY.md, "Known gaps").
async fn untouched(
    engine: &dyn DockerApi,
    id: &str,
    info: &crate::engine::ContainerInfo,
    supervised: bool,
) -> std::result::Result<(), Untouched> {
    if !info.exec_ids.is_empty() {
        return Err(Untouched::Changed(format!(
            "{} exec instance(s) running in it",
            info.exec_ids.len()
        )));
    }
    let processes = engine
        .container_processes(id)
        .await
        .map_err(Untouched::Engine)?;
    const INIT: &str = "/sbin/docker-init -- ";
    let child = processes
        .iter()
        .find_map(|p| p.strip_prefix(INIT))
        .unwrap_or_default()
        .to_string();
    let children = processes.iter().filter(|p| **p == child).count();
    let strangers: Vec<&String> = processes
        .iter()
        .filter(|p| !p.starts_with(INIT) && **p != child)
        .collect();
    let want = if supervised { 2 } else { 1 };
    if child.is_empty() || !strangers.is_empty() || children != want || processes.len() != want + 1
    {
        let shown: Vec<String> = strangers
            .iter()
            .take(3)
            .map(|p| crate::text::quote(p))
            .collect();
        return Err(Untouched::Changed(format!(
            "{} processes where a fresh one has {}{}",
            processes.len(),
            want + 1,
            if shown.is_empty() {
                String::new()
            } else {
                format!(", among them {}", shown.join(", "))
            }
        )));
    }
    Ok(())
}

/// Confirms from the kernel that container `id`'s init process (`pid`)
/// runs under a seccomp filter: `Seccomp: 2` in its `/proc/<pid>/status`
/// (SPEC §6.1). The engine's record says the profile is odek's
/// ([`crate::hardening::seccomp::problem`], at verify); this says the
/// runtime applied it. Another mode is a refusal at verify. Where the
/// process is not visible here, [`verify_mounts`] has already said so; a
/// visible process whose status cannot be read is a warning.
fn verify_seccomp(id: &str, pid: Option<i64>) -> Result<Option<Warning>> {
    use crate::hardening::seccomp::{kernel_filter, KernelFilter};
    // gVisor's Sentry runs under a filter of its own: `Seccomp: 2` there
    // says nothing of odek's profile.
    refuse_gvisor(id, pid)?;
    let Ok(proc_dir) = crate::mounts::container_proc(id, pid) else {
        return Ok(None);
    };
    match kernel_filter(&proc_dir) {
        KernelFilter::On => Ok(None),
        KernelFilter::Off(mode) => Err(Error::Rejected {
            fix: None,
            step: Step::Verify,
            message: format!(
                "the kernel shows the container's init process with seccomp mode {mode}, not 2 (a filter): the runtime did not apply odek's seccomp profile"
            ),
            removal: None,
        }),
        KernelFilter::Unreadable(why) => Ok(Some(Warning::new(
            WarningKind::Other,
            format!(
                "the kernel's seccomp record of the sandbox could not be read ({why}); odek's profile was checked in the engine's record only"
            ),
        ))),
    }
}

/// Refuses at verify a container whose process on the host (`pid`,
/// `State.Pid`, once [`crate::mounts::container_proc`] places it in the
/// container's cgroup) is gVisor's Sentry: its `/proc/<pid>/cmdline`
/// starts with `runsc-sandbox`. The backstop of resolve's refusal, for a
/// gVisor registered under another file name. A process not visible here
/// is left to [`verify_mounts`]'s warning.
fn refuse_gvisor(id: &str, pid: Option<i64>) -> Result<()> {
    let Ok(proc_dir) = crate::mounts::container_proc(id, pid) else {
        return Ok(());
    };
    let cmdline = std::fs::read(proc_dir.join("cmdline")).unwrap_or_default();
    let argv0 = cmdline.split(|b| *b == 0).next().unwrap_or_default();
    if argv0 == b"runsc-sandbox" || argv0.ends_with(b"/runsc-sandbox") {
        return Err(Error::Rejected {
            fix: None,
            step: Step::Verify,
            message: format!(
                "the container runs under gVisor (its process on the host is runsc-sandbox): {}",
                crate::engine::GVISOR_UNSUPPORTED
            ),
            removal: None,
        });
    }
    Ok(())
}

/// Reads back what the kernel mounted at `/workspace` and each volume target
/// of container `id` (init process `pid`) and compares it with the plan
/// ([`crate::mounts`]), refusing a mount below `/workspace` the plan does
/// not make (neither a volume nor a mask); then checks that the working
/// directory's path still holds the directory resolve recorded. A difference is a refusal at
/// verify. When the kernel's record cannot be read the launch goes on, with
/// a warning when the daemon is on a local Unix socket (a remote daemon's
/// processes are never visible here: docs/SECURITY.md says so).
fn verify_mounts(
    engine: &dyn DockerApi,
    plan: &Plan,
    id: &str,
    pid: Option<i64>,
) -> Result<Option<Warning>> {
    use crate::mounts::{check_container, MountCheck, Wanted};
    let mut wanted = Vec::new();
    if plan.workspace == crate::config::WorkspaceMode::Bind {
        wanted.push(Wanted {
            host: plan.workdir.clone(),
            target: "/workspace".into(),
        });
    }
    wanted.extend(plan.volumes.iter().map(|v| Wanted {
        host: v.host.clone(),
        target: v.container.clone().into(),
    }));
    let refuse = |message: String| Error::Rejected {
        fix: None,
        step: Step::Verify,
        message,
        removal: None,
    };
    let masks: Vec<std::path::PathBuf> = plan.masks.iter().map(Into::into).collect();
    let warning = match check_container(id, pid, &wanted, &masks) {
        MountCheck::Verified => None,
        MountCheck::Mismatch(problems) => {
            return Err(refuse(format!(
                "the container's mounts are not the planned ones: {}; run odek again from the real project directory",
                problems.join("; ")
            )))
        }
        MountCheck::Unverifiable(why) => match &engine.endpoint().address {
            crate::engine::Address::Unix { .. } => Some(Warning::new(
                WarningKind::MountsUnverified,
                format!(
                    "what the kernel mounted at /workspace could not be read back ({why}); the working directory and volumes were checked right before create only"
                ),
            )),
            // TCP or ssh to loopback counts as this machine (SPEC §6.2.2),
            // but a tunnel to another machine looks the same: with a bind
            // mount, say that the kernel could not confirm it.
            _ if !wanted.is_empty() => Some(Warning::new(
                WarningKind::MountsUnverified,
                format!(
                    "the engine at {} is on a loopback address, which odek takes for this machine, but what it mounted at /workspace could not be read back ({why}): if that address is a tunnel to another machine, /workspace is a directory of THAT machine; use --sandbox-workspace copy there",
                    crate::text::shown(engine.endpoint().to_string())
                ),
            )),
            _ => None,
        },
    };
    if let Some(want) = plan.workdir_id {
        crate::config::still(&plan.workdir, want).map_err(|e| {
            refuse(format!(
                "the working directory changed while the sandbox was created: {e}"
            ))
        })?;
    }
    Ok(warning)
}

/// How long a launch waits, once an owned container is gone, for the exit
/// code its removal wait reports.
const REMOVED_EXIT_BUDGET: Duration = Duration::from_secs(5);

/// The exit code of an auto-removed container, from the wait begun before
/// its start; `None` without a wait, when the daemon refused it, or when no
/// answer came within [`REMOVED_EXIT_BUDGET`].
async fn removed_exit(wait: Option<crate::engine::ExitWait>) -> Option<i64> {
    wait?.code(REMOVED_EXIT_BUDGET).await?.ok()
}

/// Why container `id` is not running, when it stopped without a reason of
/// Docker's ([`not_running`]): from its inspect, or — an auto-removed
/// container is gone — from its exit wait. `None` while it runs, when
/// Docker gave the reason itself, or when neither says.
async fn stopped_reason(
    engine: &dyn DockerApi,
    plan: &Plan,
    id: &str,
    wait: &mut Option<crate::engine::ExitWait>,
) -> Option<String> {
    match engine.inspect_container(id).await {
        // Docker's reason, when it gave one, is the message already.
        Ok(Some(info)) => (!info.running && info.exit.as_ref().is_some_and(|(_, e)| e.is_empty()))
            .then(|| not_running(plan, info.exit.as_ref())),
        Ok(None) => removed_exit(wait.take())
            .await
            .map(|code| not_running(plan, Some(&(code, String::new())))),
        Err(_) => None,
    }
}

/// How long a launch waits for the idle process to show in the container's
/// process list after start (SPEC §6.1): docker-init starts it at once, so
/// only a container that cannot run it takes this long to be refused.
pub const IDLE_START_BUDGET: Duration = Duration::from_secs(5);

/// What the container's process list said about [`IDLE_CMD`].
#[derive(Clone, Debug, PartialEq, Eq)]
enum Idle {
    /// The idle process runs.
    Running,
    /// The container is not running (or gone): the inspect that follows
    /// says why.
    Stopped,
    /// The container runs, but not the idle process: these command lines
    /// (untrusted, from the image) were all it had when the budget ran out.
    Missing(Vec<String>),
}

/// Polls the process list of container `id` until [`IDLE_CMD`] shows
/// (5 ms, doubling to 100 ms between listings) or `budget` ends.
/// Errors: an Engine failure other than "not running" / "no such
/// container", or a listing the daemon refused for a container that is
/// still running.
async fn idle_process(
    engine: &dyn DockerApi,
    id: &str,
    budget: Duration,
) -> std::result::Result<Idle, crate::engine::EngineError> {
    let want = IDLE_CMD.join(" ");
    let deadline = tokio::time::Instant::now() + budget;
    let mut pause = Duration::from_millis(5);
    loop {
        match engine.container_processes(id).await {
            Ok(cmds) if cmds.iter().any(|c| c.trim() == want) => return Ok(Idle::Running),
            Ok(cmds) if tokio::time::Instant::now() >= deadline => return Ok(Idle::Missing(cmds)),
            Ok(_) => {}
            Err(e) if e.kind == EngineErrorKind::NotFound || e.status == Some(409) => {
                return Ok(Idle::Stopped)
            }
            // A container that stops while it is listed makes the daemon
            // answer 500 ("runc did not terminate successfully … container
            // does not exist", "ttrpc: closed"): the inspect decides.
            Err(e) if e.kind == EngineErrorKind::Rejected => {
                match engine.inspect_container(id).await {
                    Ok(Some(info)) if info.running => return Err(e),
                    _ => return Ok(Idle::Stopped),
                }
            }
            Err(e) => return Err(e),
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

/// The refusal for a container that runs without its idle process: what it
/// runs instead, at most 4 command lines, each quoted as config values are
/// ([`crate::text::quote`]: escaped, cut to 80 characters).
fn idle_missing_message(seen: &[String]) -> String {
    let shown: Vec<String> = seen.iter().take(4).map(|c| crate::text::quote(c)).collect();
    let more = seen.len().saturating_sub(shown.len());
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    format!(
        "the idle process `{}` did not start within {} s; the container runs [{}]{more} instead: an image ENTRYPOINT must run its arguments (`exec \"$@\"`), and do so within that time",
        IDLE_CMD.join(" "),
        IDLE_START_BUDGET.as_secs(),
        shown.join(", ")
    )
}

/// Records the files host tools run of `plan`'s working directory for the
/// sandbox `name` ([`crate::host_files::record`]) off the async threads;
/// a warning when they could not be recorded (the end of the sandbox then
/// says it cannot tell).
pub(crate) async fn record_host_files(plan: &Plan, name: &str) -> Option<Warning> {
    if !crate::host_files::writes_workdir(plan) {
        return None;
    }
    let (p, n) = (plan.clone(), name.to_string());
    let recorded = tokio::task::spawn_blocking(move || crate::host_files::record(&p, &n))
        .await
        .unwrap_or_else(|e| Err(format!("the recording task failed: {e}")));
    recorded.err().map(|why| {
        Warning::new(
            WarningKind::Other,
            format!(
                "the files host tools run (.git/hooks, .git/config, Makefile, …) could not be recorded at launch ({}), so the end of sandbox {name} cannot say whether it changed them; review them before running git or make",
                crate::text::foreign(&why)
            ),
        )
    })
}

/// The copied workspace's tar for `plan` ([`crate::workspace_copy::pack`]),
/// owned by the command user (the image's own user counts as root: odek
/// cannot know its uid before the container exists), and the warning
/// naming what stayed behind.
///
/// Errors: the working directory cannot be read or is too large
/// ([`crate::config::ConfigError::Workdir`]: nothing was created).
async fn pack_workspace(
    plan: &Plan,
) -> Result<(Vec<u8>, crate::workspace_copy::Manifest, Option<Warning>)> {
    let (uid, gid) = crate::supervisor::command_ids(plan).unwrap_or((0, 0));
    let workdir = plan.workdir.clone();
    let home = plan.odek_home.clone();
    let packed = tokio::task::spawn_blocking(move || {
        crate::workspace_copy::pack(&workdir, Some(&home), uid, gid)
    })
    .await
    .map_err(|e| crate::workspace_copy::CopyError::Unreadable {
        path: crate::text::shown(&plan.workdir),
        reason: format!("the copying task failed: {e}"),
    })
    .and_then(|r| r)
    .map_err(|e| crate::config::ConfigError::Workdir {
        path: plan.workdir.clone(),
        reason: format!("{e}; nothing was created"),
        fix: None,
    })?;
    let warning = (!packed.skipped.is_empty()).then(|| {
        Warning::new(
            WarningKind::Other,
            format!(
                "the copied workspace leaves out what must not travel into a sandbox: {}",
                skipped_list(&packed.skipped)
            ),
        )
    });
    Ok((packed.archive, packed.manifest, warning))
}

/// The file in the sandbox's directory of `$ODEK_HOME` that keeps its
/// upload's [`crate::workspace_copy::Manifest`].
const MANIFEST_FILE: &str = "workspace-copy.json";

/// The largest manifest read back (64 MiB).
const MAX_MANIFEST_BYTES: u64 = 64 << 20;

/// Keeps the upload's manifest of sandbox `name` (a private file in its
/// directory of `$ODEK_HOME`). Blocking file I/O. Errors: why not.
fn save_manifest(
    odek_home: &std::path::Path,
    name: &str,
    m: &crate::workspace_copy::Manifest,
) -> Result<(), String> {
    let dir = crate::host_files::sandbox_dir(odek_home, name, true)
        .and_then(|d| d.ok_or_else(|| "it could not be created".to_string()))?;
    let json = serde_json::to_vec(m).map_err(|e| e.to_string())?;
    crate::host_files::write_private(&dir, MANIFEST_FILE, &json).map_err(|e| e.to_string())
}

/// The upload's manifest of sandbox `name`, when it was kept and is the
/// operator's. Blocking file I/O.
fn load_manifest(
    odek_home: &std::path::Path,
    name: &str,
) -> Option<crate::workspace_copy::Manifest> {
    let dir = crate::host_files::sandbox_dir(odek_home, name, false).ok()??;
    let (bytes, st) = crate::safe_open::read_at(
        &dir,
        std::ffi::OsStr::new(MANIFEST_FILE),
        MAX_MANIFEST_BYTES,
    )
    .ok()??;
    if !crate::ownership::is_trusted_owner(st.st_uid) || st.st_mode & 0o022 != 0 {
        return None;
    }
    serde_json::from_slice(&bytes).ok()
}

/// At most ten skipped entries, then how many more.
pub(crate) fn skipped_list(skipped: &[crate::workspace_copy::Skipped]) -> String {
    let mut list: Vec<String> = skipped.iter().take(10).map(|s| s.to_string()).collect();
    if skipped.len() > 10 {
        list.push(format!("and {} more", skipped.len() - 10));
    }
    list.join("; ")
}

impl Client {
    /// Copies a copied workspace back (SPEC §6.1 "workspace"): the
    /// sandbox's `/workspace` through `GET /containers/{id}/archive`,
    /// written into the working directory by the filter of
    /// [`crate::workspace_copy::unpack`] (nothing deleted, nothing written
    /// through a symlink, no setuid bit, no device). The sandbox keeps
    /// running.
    ///
    /// Errors: [`Error::Usage`] (class config) for a sandbox whose
    /// workspace is bind-mounted (its writes are the host's already),
    /// read-only, or on the host; the engine's error when the archive
    /// cannot be read; [`Error::Rejected`] when the sandbox has no
    /// `/workspace` or the archive is not a tar.
    pub async fn copy_back(&self, sandbox: &Sandbox) -> Result<crate::workspace_copy::Unpacked> {
        let refuse = |message: String| Error::Rejected {
            fix: None,
            step: Step::Exec,
            message,
            removal: None,
        };
        let Some(id) = &sandbox.container_id else {
            return Err(Error::Usage(format!(
                "sandbox {} runs on the host: its working directory is the host's, there is nothing to copy back",
                sandbox.name
            )));
        };
        if sandbox.plan.readonly {
            return Err(Error::Usage(format!(
                "sandbox {} has a read-only workspace (sandbox_readonly): nothing it holds is copied back",
                sandbox.name
            )));
        }
        if sandbox.plan.workspace != crate::config::WorkspaceMode::Copy {
            return Err(Error::Usage(format!(
                "sandbox {} has its working directory bind-mounted: what it writes is on the host already, there is nothing to copy back",
                sandbox.name
            )));
        }
        let engine = self.engine()?.clone();
        let endpoint = engine.endpoint().to_string();
        let max = crate::workspace_copy::MAX_COPY_BYTES + (64 << 20);
        let archive = engine
            .download_archive(id, crate::workspace_copy::WORKSPACE_DIR, max)
            .await
            .map_err(|e| Error::engine(&endpoint, Step::Exec, e))?
            .ok_or_else(|| {
                refuse(format!(
                    "sandbox {} has no /workspace to copy back",
                    sandbox.name
                ))
            })?;
        let (workdir, expect) = (sandbox.plan.workdir.clone(), sandbox.plan.workdir_id);
        let (home, name) = (sandbox.plan.odek_home.clone(), sandbox.name.clone());
        tokio::task::spawn_blocking(move || {
            let base = load_manifest(&home, &name);
            let got = crate::workspace_copy::unpack_at(
                &archive,
                &workdir,
                expect,
                base.as_ref(),
                Some(&home),
            )?;
            // What this copy-back made the same on both sides is the next
            // one's base: a file it wrote is not a change on the host.
            if let Some(mut base) = base {
                base.extend(got.synced.clone());
                let _ = save_manifest(&home, &name, &base);
            }
            Ok::<_, crate::workspace_copy::CopyError>(got)
        })
        .await
        .map_err(|e| refuse(format!("the copying task failed: {e}")))?
        .map_err(|e| refuse(format!("{e}; nothing more was written")))
    }

    /// Force-removes a sandbox's container (SPEC §10.1 destroy), dropping
    /// what [`Client::close`] would report. The host "sandbox" of
    /// fallback/off has nothing to remove. An absent container is not an
    /// error. Its record ([`crate::audit`]) is marked as ended, or removed
    /// when the plan keeps records 0 days.
    pub async fn destroy(&self, sandbox: &Sandbox) -> Result<()> {
        self.destroy_recorded(sandbox, None).await
    }

    /// [`Client::destroy`] recorded as `call` in the sandbox's log (`odek
    /// mcp`), written before the record is marked as ended (or removed,
    /// with a retention of 0 days).
    ///
    /// Errors: as [`Client::destroy`].
    pub async fn destroy_recorded(
        &self,
        sandbox: &Sandbox,
        call: Option<crate::audit::Call>,
    ) -> Result<()> {
        self.remove(sandbox, call).await?;
        if sandbox.container_id.is_some() {
            crate::host_files::discard(&sandbox.plan.odek_home, &sandbox.name);
            ended(sandbox);
        }
        Ok(())
    }

    /// [`Client::destroy`], then the report of the files host tools run
    /// that changed while the sandbox lived ([`crate::host_files`],
    /// docs/SECURITY.md "Files host tools run"): compared once the
    /// container is gone, against the record its launch (or its claim from
    /// a warm pool) took. Empty for the host and for a sandbox that could
    /// not write its working directory; [`crate::host_files::Report::unchecked`]
    /// says why when a sandbox that could has no usable record.
    ///
    /// Errors: as [`Client::destroy`] (the container is still there; the
    /// record is kept for a later call).
    pub async fn close(&self, sandbox: &Sandbox) -> Result<crate::host_files::Report> {
        self.close_recorded(sandbox, None).await
    }

    /// [`Client::close`] recorded as `call` in the sandbox's log (`odek
    /// mcp`'s `sandbox_down`). Errors: as [`Client::destroy`].
    pub async fn close_recorded(
        &self,
        sandbox: &Sandbox,
        call: Option<crate::audit::Call>,
    ) -> Result<crate::host_files::Report> {
        // SPEC §6.1 "workspace": a copied workspace comes back before its
        // container goes (a copy-back that fails keeps the container, so
        // nothing is lost), and before the files host tools run are
        // compared, so that what it brought back is named as a bind
        // mount's writes would be.
        let copied_back = if sandbox.copies_back() {
            match self.copy_back(sandbox).await {
                Ok(u) => Some(u),
                Err(e) => {
                    if let Some(call) = call {
                        call.finish(None, None, Some(&e));
                    }
                    return Err(e);
                }
            }
        } else {
            None
        };
        self.remove(sandbox, call).await?;
        if sandbox.container_id.is_none() {
            return Ok(crate::host_files::Report::default());
        }
        let (home, name) = (sandbox.plan.odek_home.clone(), sandbox.name.clone());
        let found = tokio::task::spawn_blocking(move || crate::host_files::finish(&home, &name))
            .await
            .unwrap_or_else(|e| {
                Some(crate::host_files::Report {
                    changed: Vec::new(),
                    unchecked: Some(format!("the comparing task failed: {e}")),
                    copied_back: None,
                })
            });
        // Compared first: a retention of 0 days removes the sandbox's
        // whole directory, the record of the files included.
        ended(sandbox);
        let mut report = match found {
            Some(report) => report,
            None if crate::host_files::writes_workdir(&sandbox.plan) => crate::host_files::Report {
                changed: Vec::new(),
                unchecked: Some("no record of them was taken when the sandbox was launched".into()),
                copied_back: None,
            },
            None => crate::host_files::Report::default(),
        };
        report.copied_back = copied_back;
        Ok(report)
    }

    /// Force-removes the sandbox's container, if it has one, and finishes
    /// `call` with the outcome.
    async fn remove(&self, sandbox: &Sandbox, call: Option<crate::audit::Call>) -> Result<()> {
        let Some(id) = &sandbox.container_id else {
            return Ok(());
        };
        let removed = match self.engine() {
            Ok(engine) => match engine.remove_container(id).await {
                Ok(_) => {
                    release_link(engine.as_ref(), sandbox).await;
                    Ok(())
                }
                Err(e) if e.kind == EngineErrorKind::NotFound => {
                    release_link(engine.as_ref(), sandbox).await;
                    Ok(())
                }
                Err(e) => Err(Error::engine(
                    &engine.endpoint().to_string(),
                    Step::Remove,
                    e,
                )),
            },
            Err(e) => Err(e),
        };
        if let Some(call) = call {
            match &removed {
                Ok(()) => call.finish(None, Some("removed"), None),
                Err(e) => call.finish(None, None, Some(e)),
            }
        }
        removed
    }
}

/// Removes `sandbox`'s link network, if it has one (SPEC §4.4).
async fn release_link(engine: &dyn DockerApi, sandbox: &Sandbox) {
    if let Some(a) = sandbox
        .applied
        .as_ref()
        .filter(|a| a.link_network.is_some())
    {
        crate::link::release(engine, &sandbox.name, a.link_network.as_deref()).await;
    }
}

/// Marks the end of `sandbox`'s record ([`crate::audit::sandbox_ended`]).
fn ended(sandbox: &Sandbox) {
    crate::audit::sandbox_ended(
        &sandbox.plan.odek_home,
        &sandbox.name,
        sandbox.plan.log_retention_days,
    );
}
